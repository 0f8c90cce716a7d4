/* Base64 through nettle, with allocation on our side. */
#include "base64.h"

#include "util.h"

#include <nettle/base64.h>
#include <string.h>

char *base64_encode_alloc(const void *data, size_t len)
{
    char *out = xmalloc(BASE64_ENCODE_RAW_LENGTH(len) + 1);
    base64_encode_raw(out, len, data);
    out[BASE64_ENCODE_RAW_LENGTH(len)] = '\0';
    return out;
}

int base64_decode_alloc(const char *text, char **out, size_t *len)
{
    size_t n = strlen(text);
    char *buf = xmalloc(BASE64_DECODE_LENGTH(n) + 1);
    struct base64_decode_ctx ctx;
    base64_decode_init(&ctx);
    size_t got = BASE64_DECODE_LENGTH(n);
    if (!base64_decode_update(&ctx, &got, (uint8_t *)buf, n, text) || !base64_decode_final(&ctx)) {
        free(buf);
        return -1;
    }
    *out = buf;
    *len = got;
    return 0;
}
