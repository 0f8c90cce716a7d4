/* Replay ring (see http_replay.h). Pure memory bookkeeping. */
#include "transport/http_replay.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/util.h"

void http_replay_init(struct http_replay *r, size_t cap_events, size_t cap_bytes)
{
    memset(r, 0, sizeof(*r));
    r->cap_events = cap_events ? cap_events : 1;
    r->cap_bytes = cap_bytes;
    r->ring = xcalloc(r->cap_events, sizeof(*r->ring));
    r->next_seq = 1;
}

static void drop_oldest(struct http_replay *r)
{
    struct http_replay_event *ev = &r->ring[r->head];
    r->bytes -= ev->len;
    free(ev->data);
    memset(ev, 0, sizeof(*ev));
    r->head = (r->head + 1) % r->cap_events;
    r->count--;
}

void http_replay_free(struct http_replay *r)
{
    while (r->count)
        drop_oldest(r);
    free(r->ring);
    r->ring = NULL;
}

uint64_t http_replay_push(struct http_replay *r, uint64_t stream, const char *data, size_t len)
{
    uint64_t seq = r->next_seq++;
    if (len > r->cap_bytes) {
        /* Not retained: forget older events too, so a resume across this
         * gap reports -1 instead of silently skipping it. */
        while (r->count)
            drop_oldest(r);
        return seq;
    }
    while (r->count && (r->count == r->cap_events || r->bytes + len > r->cap_bytes))
        drop_oldest(r);
    struct http_replay_event *ev = &r->ring[(r->head + r->count) % r->cap_events];
    ev->stream = stream;
    ev->seq = seq;
    ev->data = xmalloc(len + 1);
    memcpy(ev->data, data, len);
    ev->data[len] = '\0';
    ev->len = len;
    r->bytes += len;
    r->count++;
    return seq;
}

void http_replay_end_stream(struct http_replay *r, uint64_t stream)
{
    for (size_t i = r->count; i-- > 0;) {
        struct http_replay_event *ev = &r->ring[(r->head + i) % r->cap_events];
        if (ev->stream == stream) {
            ev->last = true;
            return;
        }
    }
}

bool http_replay_stream_ended(const struct http_replay *r, uint64_t stream)
{
    for (size_t i = 0; i < r->count; i++) {
        const struct http_replay_event *ev = &r->ring[(r->head + i) % r->cap_events];
        if (ev->stream == stream && ev->last)
            return true;
    }
    return false;
}

int http_event_id_format(char *buf, size_t size, uint64_t stream, uint64_t seq)
{
    return snprintf(buf, size, "%" PRIu64 "-%" PRIu64, stream, seq);
}

static bool parse_u64(const char *s, size_t len, uint64_t *out)
{
    if (len == 0 || len > 19)
        return false;
    uint64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    *out = v;
    return true;
}

bool http_event_id_parse(const char *id, uint64_t *stream, uint64_t *seq)
{
    if (!id)
        return false;
    const char *dash = strchr(id, '-');
    if (!dash)
        return false;
    return parse_u64(id, (size_t)(dash - id), stream) &&
           parse_u64(dash + 1, strlen(dash + 1), seq) && *seq > 0;
}

long http_replay_since(const struct http_replay *r, uint64_t stream, uint64_t after,
                       http_replay_fn fn, void *ctx)
{
    if (after >= r->next_seq)
        return -1;
    /* Lossless only if nothing newer than `after` was evicted: the oldest
     * retained seq must be at most after+1, or nothing was pushed since. */
    uint64_t oldest = r->count ? r->ring[r->head].seq : r->next_seq;
    if (oldest > after + 1)
        return -1;
    long n = 0;
    for (size_t i = 0; i < r->count; i++) {
        const struct http_replay_event *ev = &r->ring[(r->head + i) % r->cap_events];
        if (ev->stream == stream && ev->seq > after) {
            fn(ctx, ev);
            n++;
        }
    }
    return n;
}
