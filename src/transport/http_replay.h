/* Bounded per-session replay buffer for resumable SSE streams. Every event
 * sent on any of a session's streams gets a session-unique id
 * "<stream>-<seq>" (seq increases across the session), so a Last-Event-ID
 * names both the stream to resume and the point to resume after. Oldest
 * events are evicted when either the event or the byte cap is reached. */
#ifndef SBX_TRANSPORT_HTTP_REPLAY_H
#define SBX_TRANSPORT_HTTP_REPLAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct http_replay_event {
    uint64_t stream;
    uint64_t seq;
    char *data;
    size_t len;
    bool last; /* its stream ended with it (a request's response) */
};

struct http_replay {
    struct http_replay_event *ring;
    size_t cap_events, cap_bytes;
    size_t head, count, bytes;
    uint64_t next_seq;
};

void http_replay_init(struct http_replay *r, size_t cap_events, size_t cap_bytes);
void http_replay_free(struct http_replay *r);

/* Copy `data` into the buffer; returns its seq (>= 1). An event larger than
 * cap_bytes is still numbered but not retained. */
uint64_t http_replay_push(struct http_replay *r, uint64_t stream, const char *data, size_t len);

/* Marks the newest retained event of `stream` as its last: the stream ended there. */
void http_replay_end_stream(struct http_replay *r, uint64_t stream);
/* Whether a retained event says `stream` ended. */
bool http_replay_stream_ended(const struct http_replay *r, uint64_t stream);

/* Format / parse the SSE id. Parse returns false for anything malformed. */
int http_event_id_format(char *buf, size_t size, uint64_t stream, uint64_t seq);
bool http_event_id_parse(const char *id, uint64_t *stream, uint64_t *seq);

/* Call `fn` for each retained event of `stream` with seq > after, oldest
 * first. Returns the number replayed, or -1 when events after `after` were
 * already evicted (the client cannot resume losslessly) or `after` was
 * never issued. */
typedef void (*http_replay_fn)(void *ctx, const struct http_replay_event *ev);
long http_replay_since(const struct http_replay *r, uint64_t stream, uint64_t after,
                       http_replay_fn fn, void *ctx);

#endif
