/* Loading the HTTP transport's credentials from the configuration: the static token table and
 * the JWT keys. Kept apart from http_auth.c and http_jwt.c, which are pure, because this is
 * where files are read. Everything is read once, at startup. */
#include "transport/http_auth.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "lib/config.h"
#include "lib/log.h"
#include "lib/util.h"
#include "transport/http_jwt.h"

#define CREDENTIALS_FILE_MAX (1u << 20)

/* A server configured for JWTs that cannot check them does not start. */
static int load_jwt(const struct sbx_config *cfg, struct http_jwt **out, struct sbx_err *err)
{
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
    char *text = NULL;
    size_t len = 0;
    int r = read_file_max(file, CREDENTIALS_FILE_MAX, &text, &len);
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
    if (r < 0)
        return sbx_err_wrap(err, "JWT validation (http.jwt_*)");
    char n[24];
    snprintf(n, sizeof(n), "%zu", http_jwt_key_count(*out));
    log_emit(LOG_LVL_INFO, "jwt keys loaded", "file", file, "keys", n, "issuer", cfg->jwt_issuer,
             NULL);
    return 0;
}

int http_auth_setup(const struct sbx_config *cfg, struct http_auth *auth, struct http_jwt **jwt,
                    struct sbx_err *err)
{
    *jwt = NULL;
    for (size_t i = 0; i < cfg->auth_token_hashes.len; i++) {
        char principal[32];
        snprintf(principal, sizeof(principal), "token-%zu", i + 1);
        if (http_auth_add_hash(auth, principal, cfg->auth_token_hashes.items[i], err) < 0)
            return -1;
    }
    if (cfg->auth_tokens_file && *cfg->auth_tokens_file) {
        char *text = NULL;
        int r = read_file_max(cfg->auth_tokens_file, CREDENTIALS_FILE_MAX, &text, NULL);
        if (r < 0)
            return sbx_fail_errno(err, -r, "http.auth_tokens_file %s", cfg->auth_tokens_file);
        r = http_auth_load_text(auth, text, cfg->auth_tokens_file, err);
        free(text);
        if (r < 0)
            return -1;
    }
    return load_jwt(cfg, jwt, err);
}
