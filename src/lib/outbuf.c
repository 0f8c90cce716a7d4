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

/* Bytes at the end of buf (len) that begin a UTF-8 sequence it does not finish. */
static size_t unfinished_sequence(const char *buf, size_t len)
{
    for (size_t back = 1; back <= 3 && back <= len; back++) {
        unsigned char c = (unsigned char)buf[len - back];
        if ((c & 0xC0) == 0x80)
            continue; /* a continuation byte: its lead is further back */
        size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
        return need > back ? back : 0;
    }
    return 0;
}

char *outbuf_render(const struct outbuf *b, size_t *len)
{
    size_t head_len = b->head_len, skip = 0;
    uint64_t dropped = outbuf_dropped(b);
    char marker[96] = "";
    if (dropped) {
        /* Cut between characters, not inside one: what a cut splits goes with the middle
         * (else it would read as '?' on both sides of the marker). */
        head_len -= unfinished_sequence(b->head, head_len);
        while (skip < 3 && skip < b->tail_len &&
               ((unsigned char)b->tail[(b->tail_start + skip) % b->tail_cap] & 0xC0) == 0x80)
            skip++;
        snprintf(marker, sizeof(marker), "\n[... %llu bytes cut ...]\n",
                 (unsigned long long)(dropped + (b->head_len - head_len) + skip));
    }
    size_t mlen = strlen(marker);
    size_t n = head_len + mlen + b->tail_len - skip;
    char *out = xmalloc(n + 1);
    if (head_len)
        memcpy(out, b->head, head_len);
    memcpy(out + head_len, marker, mlen);
    /* The tail's ring, in order, from its first whole character. */
    char *t = out + head_len + mlen;
    size_t start = (b->tail_start + skip) % b->tail_cap, left = b->tail_len - skip;
    size_t first = b->tail_cap - start;
    if (first > left)
        first = left;
    if (first)
        memcpy(t, b->tail + start, first);
    if (left > first)
        memcpy(t + first, b->tail, left - first);
    out[n] = '\0';
    if (len)
        *len = n;
    return out;
}
