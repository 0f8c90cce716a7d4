/* The JWT keys, kept current, from one of two sources:
 * - http.jwt_jwks_file: read at startup (a file that cannot work stops the server), then
 *   looked at again at most every http.jwt_jwks_reload_s seconds, when a token is checked, and
 *   reloaded when it changed (another inode, size or modification time);
 * - http.jwt_jwks_url: fetched at startup (a URL that does not answer with usable keys stops
 *   the server), then by a thread of its own every http.jwt_jwks_url_refresh_s seconds, and
 *   early when a token names a key id the keys in force lack (http_jwks_fetch.h).
 * So an identity provider's key rotation reaches the server, and a key removed stops being
 * accepted, without a restart that would end every session. A new version that does not load
 * keeps the keys in force and is logged. Runs on the event loop's thread, like every token
 * check; only the URL's fetcher has a thread of its own. */
#ifndef SBX_TRANSPORT_HTTP_JWKS_H
#define SBX_TRANSPORT_HTTP_JWKS_H

#include <stdint.h>

#include "lib/err.h"

struct http_jwks;
struct http_jwt;
struct sbx_config;

/* Loads the configured keys into *out; *out is NULL (and 0 returned) when JWT validation is
 * not configured. cfg must outlive *out. */
int http_jwks_open(const struct sbx_config *cfg, struct http_jwks **out, struct sbx_err *err);
/* The keys to check a token with at now_ms (a monotonic clock), after looking at the file if
 * that is due, or taking what the URL's fetcher brought. Never NULL. */
const struct http_jwt *http_jwks_current(struct http_jwks *w, uint64_t now_ms);
/* A token named a key id the keys in force lack: the URL's fetcher fetches early (rate-limited);
 * a file waits for its next look. */
void http_jwks_key_missing(struct http_jwks *w);
void http_jwks_free(struct http_jwks *w);

#endif
