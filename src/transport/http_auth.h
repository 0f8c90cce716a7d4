/* Bearer-token table for the HTTP transport. Tokens are held only as
 * SHA-256 digests; a presented token is hashed and compared against every
 * entry in constant time, so timing reveals neither which entry matched
 * nor how much of a digest did. Each entry names a principal, which the
 * transport passes to the protocol layer as the session owner.
 *
 * Sources: config "sha256:<64 hex>" (principal "token-<n>", n from 1), and
 * a tokens file with one "principal:sha256:<64 hex>" or "principal:<token>"
 * per line ('#' comments and blank lines ignored).
 *
 * With JWT validation on (transport/http_jwt.h), a token that is not in the table and is shaped
 * like a JWS is checked as a JWT instead, and its principal is "jwt:<claim>". */
#ifndef SBX_TRANSPORT_HTTP_AUTH_H
#define SBX_TRANSPORT_HTTP_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/err.h"

struct http_auth_entry {
    uint8_t digest[32];
    char *principal;
};

struct http_auth {
    struct http_auth_entry *v;
    size_t len;
};

void http_auth_free(struct http_auth *a);
/* Add one "sha256:<hex>" spec under `principal`. */
int http_auth_add_hash(struct http_auth *a, const char *principal, const char *spec,
                       struct sbx_err *err);
/* Parse tokens-file text (see above); `name` is used in error messages. */
int http_auth_load_text(struct http_auth *a, const char *text, const char *name,
                        struct sbx_err *err);
/* The principal a token maps to, or NULL. */
const char *http_auth_check(const struct http_auth *a, const char *token, size_t len);
struct http_jwt;
struct http_jwks;
struct sbx_config;
/* Fills the table from http.auth_token_hashes and http.auth_tokens_file, and opens the JWKS of
 * http.jwt_jwks_file or http.jwt_jwks_url into *jwks (NULL when JWT validation is off).
 * Unreadable files, bad entries and a JWT configuration that cannot work are errors. */
int http_auth_setup(const struct sbx_config *cfg, struct http_auth *auth, struct http_jwks **jwks,
                    struct sbx_err *err);
/* The principal of an Authorization header value: a static token's, else (jwt non-NULL and the
 * token shaped like a JWS) a JWT's, checked for `audience` at time `now`; a JWT principal is
 * written to buf (HTTP_JWT_PRINCIPAL_MAX bytes). On failure NULL, with *why a reason fit for
 * WWW-Authenticate's error_description, or *why NULL when no bearer token was presented at all
 * (RFC 6750 3.1: then the challenge carries no error code). */
const char *http_auth_principal(const struct http_auth *a, const struct http_jwt *jwt,
                                const char *header, const char *audience, int64_t now, char *buf,
                                size_t cap, const char **why);
/* Token from an "Authorization: Bearer <t>" value (scheme case-insensitive);
 * NULL when absent or another scheme. */
const char *http_auth_bearer(const char *header, size_t *len);

#endif
