/* The JWKS file of http.jwt_jwks_file, kept current: read at startup (a file that cannot work
 * stops the server), then looked at again at most every http.jwt_jwks_reload_s seconds, when a
 * token is checked, and reloaded when it changed (another inode, size or modification time).
 * So an identity provider's key rotation reaches the server by rewriting the file, and a key
 * removed from it stops being accepted, without a restart that would end every session. A
 * changed file that does not load keeps the keys in force and is logged once. Runs on the event
 * loop's thread, like every token check. */
#ifndef SBX_TRANSPORT_HTTP_JWKS_H
#define SBX_TRANSPORT_HTTP_JWKS_H

#include <stdint.h>

#include "lib/err.h"

struct http_jwks;
struct http_jwt;
struct sbx_config;

/* Loads the configured file into *out; *out is NULL (and 0 returned) when JWT validation is
 * not configured. cfg must outlive *out. */
int http_jwks_open(const struct sbx_config *cfg, struct http_jwks **out, struct sbx_err *err);
/* The keys to check a token with at now_ms (a monotonic clock), after looking at the file if
 * that is due. Never NULL. */
const struct http_jwt *http_jwks_current(struct http_jwks *w, uint64_t now_ms);
void http_jwks_free(struct http_jwks *w);

#endif
