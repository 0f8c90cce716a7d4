/* Length-prefixed JSON frames: pure code, no I/O. */
#include "channel.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

void channel_decoder_init(struct channel_decoder *d, size_t max_frame)
{
    memset(d, 0, sizeof(*d));
    d->max_frame = max_frame ? max_frame : CHANNEL_MAX_FRAME;
}

void channel_decoder_reset(struct channel_decoder *d)
{
    d->len = 0;
}

void channel_decoder_free(struct channel_decoder *d)
{
    free(d->buf);
    d->buf = NULL;
    d->len = d->cap = 0;
}

int channel_feed(struct channel_decoder *d, const void *data, size_t len)
{
    if (d->len + len > d->cap) {
        size_t cap = d->cap ? d->cap : 4096;
        while (cap < d->len + len)
            cap *= 2;
        char *nb = realloc(d->buf, cap);
        if (!nb)
            return -1;
        d->buf = nb;
        d->cap = cap;
    }
    memcpy(d->buf + d->len, data, len);
    d->len += len;
    return 0;
}

/* Whether the JSON text holds at most max values, counted as the commas, colons and openings
 * outside strings (an upper bound): a linear scan, before the parser builds anything. */
static bool values_within(const char *s, size_t n, size_t max)
{
    size_t count = 1;
    bool in_string = false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (in_string) {
            if (c == '\\')
                i++;
            else if (c == '"')
                in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if (c == ',' || c == ':' || c == '{' || c == '[') {
            if (++count > max)
                return false;
        }
    }
    return true;
}

int channel_next(struct channel_decoder *d, json_t **out)
{
    *out = NULL;
    if (d->len < 4)
        return 0;
    const unsigned char *p = (const unsigned char *)d->buf;
    size_t n = (size_t)p[0] << 24 | (size_t)p[1] << 16 | (size_t)p[2] << 8 | (size_t)p[3];
    if (n > d->max_frame)
        return -1;
    if (d->len < 4 + n)
        return 0;
    /* \u0000 is valid JSON, and Python strings may hold it (an exception's message, say): a
     * frame that carries one is not malformed. */
    json_t *obj = values_within(d->buf + 4, n, CHANNEL_MAX_VALUES)
                      ? json_loadb(d->buf + 4, n, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, NULL)
                      : NULL;
    memmove(d->buf, d->buf + 4 + n, d->len - 4 - n);
    d->len -= 4 + n;
    /* A buffer grown for a large frame goes back once it is empty, rather than staying with
     * every sandbox that ever sent one. */
    if (d->len == 0 && d->cap > (1u << 20))
        channel_decoder_free(d);
    if (!obj || !json_is_object(obj)) {
        json_decref(obj);
        return -1;
    }
    *out = obj;
    return 1;
}

int channel_encode(const json_t *obj, char **out, size_t *len)
{
    char *body = json_dumps(obj, JSON_COMPACT);
    if (!body)
        return -1;
    size_t n = strlen(body);
    if (n > CHANNEL_MAX_FRAME) {
        free(body);
        return -1;
    }
    char *buf = malloc(n + 4);
    if (!buf) {
        free(body);
        return -1;
    }
    buf[0] = (char)(n >> 24);
    buf[1] = (char)(n >> 16);
    buf[2] = (char)(n >> 8);
    buf[3] = (char)n;
    memcpy(buf + 4, body, n);
    free(body);
    *out = buf;
    *len = n + 4;
    return 0;
}
