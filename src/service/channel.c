/* Length-prefixed JSON frames: pure code, no I/O. */
#include "channel.h"

#include "util.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

void channel_decoder_init(struct channel_decoder *d, size_t max_frame, size_t small_frame)
{
    memset(d, 0, sizeof(*d));
    d->max_frame = max_frame ? max_frame : CHANNEL_MAX_FRAME;
    d->small_frame = small_frame && small_frame < d->max_frame ? small_frame : d->max_frame;
}

void channel_allow_large(struct channel_decoder *d)
{
    d->large_allowed = true;
}

void channel_forbid_large(struct channel_decoder *d)
{
    d->large_allowed = false;
}

/* A buffer grown for a large frame goes back once it is empty, rather than staying with every
 * sandbox that ever sent one. */
static void shrink_if_empty(struct channel_decoder *d)
{
    if (d->len == 0 && d->cap > (1u << 20)) {
        free(d->buf);
        d->buf = NULL;
        d->cap = 0;
    }
}

void channel_decoder_reset(struct channel_decoder *d)
{
    d->len = 0;
    d->large_allowed = false;
    shrink_if_empty(d);
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

int channel_next(struct channel_decoder *d, json_t **out)
{
    *out = NULL;
    if (d->len < 4)
        return 0;
    const unsigned char *p = (const unsigned char *)d->buf;
    size_t n = (size_t)p[0] << 24 | (size_t)p[1] << 16 | (size_t)p[2] << 8 | (size_t)p[3];
    if (n > (d->large_allowed ? d->max_frame : d->small_frame))
        return -1;
    if (d->len < 4 + n)
        return 0;
    if (n > d->small_frame)
        d->large_allowed = false;
    /* \u0000 is valid JSON, and Python strings may hold it (an exception's message, say): a
     * frame that carries one is not malformed. */
    json_t *obj = json_text_values_within(d->buf + 4, n, CHANNEL_MAX_VALUES)
                      ? json_loadb(d->buf + 4, n, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, NULL)
                      : NULL;
    memmove(d->buf, d->buf + 4 + n, d->len - 4 - n);
    d->len -= 4 + n;
    shrink_if_empty(d);
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
