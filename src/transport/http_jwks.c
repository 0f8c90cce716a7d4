/* The JWKS file, watched (see http_jwks.h). */
#include "transport/http_jwks.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lib/config.h"
#include "lib/log.h"
#include "lib/util.h"
#include "transport/http_jwt.h"

#define JWKS_FILE_MAX (1u << 20)

struct http_jwks {
    const struct sbx_config *cfg;
    struct http_jwt *jwt;
    uint64_t interval_ms; /* 0: read once */
    uint64_t next_check_ms;
    struct stat loaded; /* the version in force */
    struct stat failed; /* the last version that did not load, logged once */
    bool have_failed;
};

static bool same_version(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

/* Reads and checks the file; on success *out holds its keys and *st the version read. */
static int load(const struct sbx_config *cfg, struct http_jwt **out, struct stat *st,
                struct sbx_err *err)
{
    const char *file = cfg->jwt_jwks_file;
    char *text = NULL;
    size_t len = 0;
    /* The version is taken before the read: a write in between shows as a change next time. */
    int r = stat(file, st) < 0 ? -errno : read_file_max(file, JWKS_FILE_MAX, &text, &len);
    if (r < 0)
        return sbx_fail_errno(err, -r, "http.jwt_jwks_file %s", file);
    struct http_jwt_config jc = {
        .issuer = cfg->jwt_issuer,
        .principal_claim = cfg->jwt_principal_claim,
        .algorithms = (const char *const *)cfg->jwt_algorithms.items,
        .n_algorithms = cfg->jwt_algorithms.len,
        .leeway_s = cfg->jwt_leeway_s,
    };
    r = http_jwt_new(&jc, text, len, file, out, err);
    free(text);
    return r < 0 ? sbx_err_wrap(err, "JWT validation (http.jwt_*)") : 0;
}

static void log_loaded(const struct http_jwks *w, const char *msg)
{
    char n[24];
    snprintf(n, sizeof(n), "%zu", http_jwt_key_count(w->jwt));
    log_emit(LOG_LVL_INFO, msg, "file", w->cfg->jwt_jwks_file, "keys", n, "issuer",
             w->cfg->jwt_issuer, NULL);
}

int http_jwks_open(const struct sbx_config *cfg, struct http_jwks **out, struct sbx_err *err)
{
    *out = NULL;
    const char *file = cfg->jwt_jwks_file;
    if (!file || !*file) {
        if ((cfg->jwt_issuer && *cfg->jwt_issuer) || (cfg->jwt_audience && *cfg->jwt_audience))
            return sbx_fail(err, EINVAL,
                            "http.jwt_issuer or http.jwt_audience is set but http.jwt_jwks_file "
                            "is not: JWTs cannot be checked without the issuer's keys");
        return 0;
    }
    if (!cfg->jwt_issuer || !*cfg->jwt_issuer)
        return sbx_fail(err, EINVAL,
                        "http.jwt_jwks_file is set but http.jwt_issuer is not: set it to the "
                        "\"iss\" of the tokens to accept");
    struct http_jwks *w = xcalloc(1, sizeof(*w));
    w->cfg = cfg;
    w->interval_ms = (uint64_t)cfg->jwt_jwks_reload_s * 1000;
    if (load(cfg, &w->jwt, &w->loaded, err) < 0) {
        free(w);
        return -1;
    }
    w->next_check_ms = now_ms() + w->interval_ms;
    log_loaded(w, "jwt keys loaded");
    *out = w;
    return 0;
}

const struct http_jwt *http_jwks_current(struct http_jwks *w, uint64_t now)
{
    if (w->interval_ms == 0 || now < w->next_check_ms)
        return w->jwt;
    w->next_check_ms = now + w->interval_ms;
    struct stat st;
    if (stat(w->cfg->jwt_jwks_file, &st) < 0 || same_version(&st, &w->loaded) ||
        (w->have_failed && same_version(&st, &w->failed)))
        return w->jwt;
    struct http_jwt *fresh = NULL;
    struct sbx_err err = {0};
    if (load(w->cfg, &fresh, &st, &err) < 0) {
        /* Half-written, or wrong: the keys in force stay, and this version is not tried again. */
        w->failed = st;
        w->have_failed = true;
        log_emit(LOG_LVL_WARNING, "jwt keys not reloaded; the previous keys stay in force", "error",
                 err.msg, NULL);
        return w->jwt;
    }
    http_jwt_free(w->jwt);
    w->jwt = fresh;
    w->loaded = st;
    w->have_failed = false;
    log_loaded(w, "jwt keys reloaded");
    return w->jwt;
}

void http_jwks_free(struct http_jwks *w)
{
    if (!w)
        return;
    http_jwt_free(w->jwt);
    free(w);
}
