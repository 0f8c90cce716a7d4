/* HMAC-SHA256 link signatures. */
#include "http_links.h"

#include <nettle/hmac.h>
#include <stdio.h>
#include <string.h>

void http_link_sign(const uint8_t key[HTTP_LINK_KEY_LEN], const char *sandbox_id, const char *path,
                    uint64_t expires, char out[65])
{
    struct hmac_sha256_ctx ctx;
    hmac_sha256_set_key(&ctx, HTTP_LINK_KEY_LEN, key);
    char exp[24];
    snprintf(exp, sizeof(exp), "%llu", (unsigned long long)expires);
    /* NUL separators: no field can run into the next. */
    hmac_sha256_update(&ctx, strlen(sandbox_id) + 1, (const uint8_t *)sandbox_id);
    hmac_sha256_update(&ctx, strlen(path) + 1, (const uint8_t *)path);
    hmac_sha256_update(&ctx, strlen(exp), (const uint8_t *)exp);
    uint8_t mac[SHA256_DIGEST_SIZE];
    hmac_sha256_digest(&ctx, sizeof(mac), mac);
    for (size_t i = 0; i < sizeof(mac); i++)
        snprintf(out + 2 * i, 3, "%02x", mac[i]);
}

bool http_link_verify(const uint8_t key[HTTP_LINK_KEY_LEN], const char *sandbox_id,
                      const char *path, uint64_t expires, const char *sig, uint64_t now)
{
    if (!sig || strlen(sig) != 64 || now >= expires)
        return false;
    char want[65];
    http_link_sign(key, sandbox_id, path, expires, want);
    unsigned diff = 0;
    for (size_t i = 0; i < 64; i++)
        diff |= (unsigned)(want[i] ^ sig[i]);
    return diff == 0;
}
