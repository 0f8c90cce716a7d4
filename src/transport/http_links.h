/* Signed, expiring download links for sandbox files: HMAC-SHA256 (nettle) over the sandbox
 * id, the path and the expiry, with a key the server draws at start. Pure code: unit-tested. */
#ifndef SBX_TRANSPORT_HTTP_LINKS_H
#define SBX_TRANSPORT_HTTP_LINKS_H

#include <stdbool.h>
#include <stdint.h>

#define HTTP_LINK_KEY_LEN 32

/* out gets 64 hex digits and a NUL. */
void http_link_sign(const uint8_t key[HTTP_LINK_KEY_LEN], const char *sandbox_id, const char *path,
                    uint64_t expires, char out[65]);
/* True if sig is the signature of (sandbox_id, path, expires) and now < expires. The compare
 * takes the same time wherever the first difference is. */
bool http_link_verify(const uint8_t key[HTTP_LINK_KEY_LEN], const char *sandbox_id,
                      const char *path, uint64_t expires, const char *sig, uint64_t now);

#endif
