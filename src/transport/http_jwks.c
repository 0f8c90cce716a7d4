/* The JWKS file, watched, or the JWKS URL, fetched (see http_jwks.h). */
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
#include "transport/http_jwks_fetch.h"
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
    struct jwks_fetch *fetch; /* the URL's fetcher, when the keys come from a URL */
};

static bool same_version(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

/* The keys of a JWKS document; `name` (the file or URL) is for messages. */
static int load_text(const struct sbx_config *cfg, const char *text, size_t len, const char *name,
                     struct http_jwt **out, struct sbx_err *err)
{
    struct http_jwt_config jc = {
        .issuer = cfg->jwt_issuer,
        .principal_claim = cfg->jwt_principal_claim,
        .algorithms = (const char *const *)cfg->jwt_algorithms.items,
        .n_algorithms = cfg->jwt_algorithms.len,
        .leeway_s = cfg->jwt_leeway_s,
    };
    int r = http_jwt_new(&jc, text, len, name, out, err);
    return r < 0 ? sbx_err_wrap(err, "JWT validation (http.jwt_*)") : 0;
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
    r = load_text(cfg, text, len, file, out, err);
    free(text);
    return r;
}

static void log_loaded(const struct http_jwks *w, const char *msg)
{
    char n[24];
    snprintf(n, sizeof(n), "%zu", http_jwt_key_count(w->jwt));
    log_emit(LOG_LVL_INFO, msg, w->fetch ? "url" : "file",
             w->fetch ? w->cfg->jwt_jwks_url : w->cfg->jwt_jwks_file, "keys", n, "issuer",
             w->cfg->jwt_issuer, NULL);
}

/* The keys from http.jwt_jwks_url: fetched now (a URL that does not answer with usable keys
 * stops the server, as a file would), then kept current by the fetcher. */
static int open_url(struct http_jwks *w, struct sbx_err *err)
{
    const struct sbx_config *cfg = w->cfg;
    struct jwks_fetch_config fc = {.url = cfg->jwt_jwks_url,
                                   .ca_file = cfg->jwt_jwks_ca_file,
                                   .refresh_s = cfg->jwt_jwks_url_refresh_s,
                                   .min_gap_s = JWKS_FETCH_MIN_GAP_S};
    char *text = NULL;
    size_t len = 0;
    if (jwks_url_check(fc.url, err) < 0)
        return -1;
    if (jwks_fetch_once(&fc, &text, &len, err) < 0)
        return sbx_err_wrap(err, "http.jwt_jwks_url");
    int r = load_text(cfg, text, len, fc.url, &w->jwt, err);
    if (r == 0)
        r = jwks_fetch_start(&fc, text, len, &w->fetch, err);
    free(text);
    return r;
}

int http_jwks_open(const struct sbx_config *cfg, struct http_jwks **out, struct sbx_err *err)
{
    *out = NULL;
    const char *file = cfg->jwt_jwks_file, *url = cfg->jwt_jwks_url;
    bool have_file = file && *file, have_url = url && *url;
    if (have_file && have_url)
        return sbx_fail(err, EINVAL,
                        "http.jwt_jwks_file and http.jwt_jwks_url are both set: keep one");
    if (!have_file && !have_url) {
        if ((cfg->jwt_issuer && *cfg->jwt_issuer) || (cfg->jwt_audience && *cfg->jwt_audience))
            return sbx_fail(err, EINVAL,
                            "http.jwt_issuer or http.jwt_audience is set but neither "
                            "http.jwt_jwks_file nor http.jwt_jwks_url is: JWTs cannot be checked "
                            "without the issuer's keys");
        return 0;
    }
    if (!cfg->jwt_issuer || !*cfg->jwt_issuer)
        return sbx_fail(err, EINVAL,
                        "%s is set but http.jwt_issuer is not: set it to the \"iss\" of the "
                        "tokens to accept",
                        have_url ? "http.jwt_jwks_url" : "http.jwt_jwks_file");
    struct http_jwks *w = xcalloc(1, sizeof(*w));
    w->cfg = cfg;
    int r = 0;
    if (have_url) {
        r = open_url(w, err);
    } else {
        w->interval_ms = (uint64_t)cfg->jwt_jwks_reload_s * 1000;
        r = load(cfg, &w->jwt, &w->loaded, err);
        w->next_check_ms = now_ms() + w->interval_ms;
    }
    if (r < 0) {
        http_jwks_free(w);
        return -1;
    }
    log_loaded(w, "jwt keys loaded");
    *out = w;
    return 0;
}

/* A new version loaded (fresh non-NULL) replaces the keys in force; one that did not keeps
 * them, said in the log. */
static void put_in_force(struct http_jwks *w, struct http_jwt *fresh, const struct sbx_err *err)
{
    if (!fresh) {
        log_emit(LOG_LVL_WARNING, "jwt keys not reloaded; the previous keys stay in force", "error",
                 err->msg, NULL);
        return;
    }
    http_jwt_free(w->jwt);
    w->jwt = fresh;
    log_loaded(w, "jwt keys reloaded");
}

/* A document the fetcher brought, if any. */
static void take_fetched(struct http_jwks *w)
{
    size_t len = 0;
    char *text = jwks_fetch_take(w->fetch, &len);
    if (!text)
        return;
    struct http_jwt *fresh = NULL;
    struct sbx_err err = {0};
    load_text(w->cfg, text, len, w->cfg->jwt_jwks_url, &fresh, &err);
    free(text);
    put_in_force(w, fresh, &err);
}

const struct http_jwt *http_jwks_current(struct http_jwks *w, uint64_t now)
{
    if (w->fetch) {
        take_fetched(w);
        return w->jwt;
    }
    if (w->interval_ms == 0 || now < w->next_check_ms)
        return w->jwt;
    w->next_check_ms = now + w->interval_ms;
    struct stat st;
    if (stat(w->cfg->jwt_jwks_file, &st) < 0 || same_version(&st, &w->loaded) ||
        (w->have_failed && same_version(&st, &w->failed)))
        return w->jwt;
    struct http_jwt *fresh = NULL;
    struct sbx_err err = {0};
    /* Half-written, or wrong: the keys in force stay, and this version is not tried again. */
    w->have_failed = load(w->cfg, &fresh, &st, &err) < 0;
    *(w->have_failed ? &w->failed : &w->loaded) = st;
    put_in_force(w, fresh, &err);
    return w->jwt;
}

void http_jwks_key_missing(struct http_jwks *w)
{
    if (w->fetch)
        jwks_fetch_request(w->fetch);
}

void http_jwks_free(struct http_jwks *w)
{
    if (!w)
        return;
    jwks_fetch_stop(w->fetch);
    http_jwt_free(w->jwt);
    free(w);
}
