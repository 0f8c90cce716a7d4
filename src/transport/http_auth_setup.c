/* Loading the HTTP transport's credentials from the configuration: the static token table, read
 * once at startup, and the JWT keys (http_jwks.c, which keeps them current). Kept apart from
 * http_auth.c and http_jwt.c, which are pure, because this is where files are read. */
#include "transport/http_auth.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "lib/config.h"
#include "lib/util.h"
#include "transport/http_jwks.h"

#define CREDENTIALS_FILE_MAX (1u << 20)

int http_auth_setup(const struct sbx_config *cfg, struct http_auth *auth, struct http_jwks **jwks,
                    struct sbx_err *err)
{
    *jwks = NULL;
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
    return http_jwks_open(cfg, jwks, err);
}
