#include "outbuf.h"

#include "util.h"

#include <string.h>

void outbuf_init(struct outbuf *b, size_t cap)
{
    memset(b, 0, sizeof(*b));
    if (cap < 2)
        cap = 2;
    b->cap = cap;
    b->head_cap = cap / 2;
    b->tail_cap = cap - b->head_cap;
    /* Buffers grow lazily so that an idle capture costs nothing. */
}

void outbuf_free(struct outbuf *b)
{
    free(b->head);
    free(b->tail);
    b->head = b->tail = NULL;
}

void outbuf_reset(struct outbuf *b)
{
    b->head_len = b->tail_start = b->tail_len = 0;
    b->total = 0;
}

void outbuf_append(struct outbuf *b, const char *data, size_t len)
{
    b->total += len;
    if (b->head_len < b->head_cap) {
        size_t n = b->head_cap - b->head_len;
        if (n > len)
            n = len;
        if (!b->head)
            b->head = xmalloc(b->head_cap);
        memcpy(b->head + b->head_len, data, n);
        b->head_len += n;
        data += n;
        len -= n;
    }
    if (len == 0)
        return;
    if (!b->tail)
        b->tail = xmalloc(b->tail_cap);
    if (len >= b->tail_cap) {
        memcpy(b->tail, data + len - b->tail_cap, b->tail_cap);
        b->tail_start = 0;
        b->tail_len = b->tail_cap;
        return;
    }
    /* Ring: write at the logical end; when full, the write overwrites the oldest bytes. */
    while (len > 0) {
        size_t end = (b->tail_start + b->tail_len) % b->tail_cap;
        size_t n = b->tail_cap - end;
        if (n > len)
            n = len;
        memcpy(b->tail + end, data, n);
        size_t newlen = b->tail_len + n;
        if (newlen > b->tail_cap) {
            b->tail_start = (b->tail_start + (newlen - b->tail_cap)) % b->tail_cap;
            newlen = b->tail_cap;
        }
        b->tail_len = newlen;
        data += n;
        len -= n;
    }
}

uint64_t outbuf_dropped(const struct outbuf *b)
{
    return b->total - b->head_len - b->tail_len;
}

bool outbuf_truncated(const struct outbuf *b)
{
    return outbuf_dropped(b) > 0;
}

char *outbuf_render(const struct outbuf *b, size_t *len)
{
    char marker[96] = "";
    uint64_t dropped = outbuf_dropped(b);
    if (dropped)
        snprintf(marker, sizeof(marker), "\n[... %llu bytes cut ...]\n",
                 (unsigned long long)dropped);
    size_t mlen = strlen(marker);
    size_t n = b->head_len + mlen + b->tail_len;
    char *out = xmalloc(n + 1);
    if (b->head_len)
        memcpy(out, b->head, b->head_len);
    memcpy(out + b->head_len, marker, mlen);
    char *t = out + b->head_len + mlen;
    size_t first = b->tail_cap - b->tail_start;
    if (first > b->tail_len)
        first = b->tail_len;
    if (first)
        memcpy(t, b->tail + b->tail_start, first);
    if (b->tail_len > first)
        memcpy(t + first, b->tail, b->tail_len - first);
    out[n] = '\0';
    if (len)
        *len = n;
    return out;
}
