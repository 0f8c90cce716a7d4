/* Streamable HTTP on libmicrohttpd, driven from the server's event loop: MHD's epoll fd is
 * watched like any other fd, MHD_run is called when it is readable or its timeout passes, and
 * SSE responses are content-reader callbacks that suspend their connection while they have
 * nothing to send (resumed when the protocol layer sends). No thread touches protocol state. */
#include "http.h"

#include "http_auth.h"
#include "http_conns.h"
#include "http_jwks.h"
#include "http_jwt.h"
#include "http_links.h"
#include "http_policy.h"
#include "http_replay.h"
#include "log.h"
#include "protocol/mcp.h"
#include "service/loop.h"
#include "service/files.h"
#include "service/metrics.h"
#include "service/sandbox.h"
#include "strmap.h"
#include "util.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <stdarg.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <malloc.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>

#define SESSION_ID_LEN 32
#define REPLAY_EVENTS  512
#define REPLAY_BYTES   (512u << 10) /* per session: bounds memory with many sessions */
#define RECONNECT_MS   500          /* the SSE retry field: a client's wait before it resumes */
#define SWEEP_MS       5000
#define CONN_TIMEOUT_S 30 /* an idle connection is dropped after this (a dribbling one: conns) */
/* Per connection: request headers up to about 30 KiB fit (431 past that; each header also
 * takes a list entry, so a few hundred small ones count too). MHD zeroes the whole pool for
 * every request, so each KiB more costs every call. */
#define HEADER_MEMORY (32u << 10)
/* A POST whose answer is not ready waits without a byte sent, so that a quick answer goes out
 * as one JSON body (one write, nothing to number or replay); if the call is still running
 * after this long, or sends anything before its answer, the answer becomes an SSE stream
 * (headers and the priming event at once), so long calls show life and can be resumed. */
#define SSE_AFTER_MS 250

struct http_session;

/* One SSE response: a POST's stream (request_id set) or the session's GET stream. */
struct sse_stream {
    struct http_session *s;
    struct MHD_Connection *conn; /* NULL once the client is gone */
    json_t *request_id;
    uint64_t number;
    char *buf;
    size_t len, off, cap;
    bool done;      /* the response was queued: end after the buffer drains */
    bool suspended; /* parked by the reader with nothing to send */
    bool json_only; /* answered as one application/json body, never a stream */
    bool rest;      /* a REST call: the body is the tool result alone */
    bool queued;    /* its HTTP response exists (conn NULL after that means the client left) */
    bool detached;  /* closed by the server mid-call: later events wait in the replay buffer */
    bool waiting;   /* a POST parked in the access handler, no response queued yet */
    /* Its request is being handed to the protocol layer, which may answer, notify or end it
     * meanwhile: the POST handler reads the stream after that, so it must not be freed. */
    bool dispatching;
    uint64_t priming_seq;  /* a POST stream's first, empty event: a resume point from the start */
    uint64_t last_sent_ms; /* when the reader last handed bytes to the client */
    struct ev_timer *sse_timer; /* while waiting: when the answer turns into a stream */
    struct sse_stream *next;
};

struct http_session {
    struct http_transport *t;
    char id[SESSION_ID_LEN + 1];
    char *owner;
    struct mcp_session *mcp;
    struct sse_stream *streams;
    struct sse_stream *get_stream;
    struct http_replay replay;
    uint64_t next_stream;
    uint64_t last_seen_ms;
    bool legacy; /* the 2024-11-05 HTTP+SSE transport: everything goes on one stream */
    bool rest;   /* the hidden session the REST calls of one owner go through */
    uint64_t rest_calls;
    bool ended; /* its legacy stream closed: freed on the next loop turn */
    struct ev_timer *end_timer;
    struct http_session *next;
};

struct http_transport {
    struct ev_loop *loop;
    struct mcp_server *srv;
    const struct sbx_config *cfg;
    struct MHD_Daemon *d;
    struct ev_watch *w;
    struct ev_timer *timer, *sweeper;
    struct ev_task kick;
    struct http_auth auth;
    struct http_jwks *jwks; /* NULL: no JWT validation */
    bool auth_on;
    uint16_t port;
    struct http_session *sessions;
    struct strmap sessions_by_id;
    size_t n_sessions;
    size_t body_bytes; /* the request bodies held now, summed (http.max_body_bytes_total) */
    struct http_conns conns;
    size_t peak_sessions; /* since the last heap trim */
    bool stopping;
    struct sandbox_service *svc; /* for file downloads; NULL until attached */
    uint8_t link_key[HTTP_LINK_KEY_LEN];
    char *base_url; /* http_public_base */
};

#define LINK_TTL_S 3600

/* Per-request state kept by MHD between calls of the access handler. */
struct request {
    char *body;
    size_t len, cap;
    /* Its first and last bytes, and how many came, kept or not: the id of a response too large
     * to keep (fail_answered_request). */
    struct mcp_message_ends ends;
    bool too_big;
    bool over_budget; /* its body would have taken the others' past http.max_body_bytes_total */
    bool is_init;
    bool url_had_nul;
    struct sse_stream *parked; /* a POST waiting for its answer (the handler runs again) */
};

static const char *const versions[] = {"2025-11-25", "2025-06-18", "2025-03-26"};

/* ---- running MHD from the loop ---- */

static void run_mhd(struct http_transport *t);

static void on_timer(struct ev_loop *loop, void *data)
{
    (void)loop;
    struct http_transport *t = data;
    t->timer = NULL;
    run_mhd(t);
}

static void on_kick(struct ev_loop *loop, void *data)
{
    (void)loop;
    run_mhd(data);
}

/* A resumed connection is served at the next MHD_run: make that this turn of the loop. */
static void kick(struct http_transport *t)
{
    if (!t->stopping)
        ev_task_post(t->loop, &t->kick);
}

static void run_mhd(struct http_transport *t)
{
    MHD_run(t->d);
    MHD_UNSIGNED_LONG_LONG ms;
    if (MHD_get_timeout(t->d, &ms) != MHD_YES)
        return; /* nothing timed: a timer left over fires once and finds nothing */
    if (ms == 0) {
        kick(t);
        return;
    }
    /* MHD's next timeout moves with every request; a timer due no later is good enough
     * (firing early only runs MHD once more), which spares a timer per request. */
    uint64_t due = now_ns() + ms * 1000000ull;
    if (t->timer && ev_timer_due(t->timer) <= due)
        return;
    ev_timer_cancel(t->timer);
    t->timer = ev_timer_add(t->loop, ms, on_timer, t);
}

static void on_epoll(struct ev_loop *loop, int fd, uint32_t events, void *data)
{
    (void)loop;
    (void)fd;
    (void)events;
    run_mhd(data);
}

/* ---- responses ---- */

static void count(unsigned status)
{
    char labels[32];
    snprintf(labels, sizeof(labels), "code=\"%u\"", status);
    metrics_counter_add("mcp_http_requests_total", "HTTP requests by status code", labels, 1);
}

static bool public_url_set(const struct http_transport *t)
{
    return t->cfg->public_url && *t->cfg->public_url;
}

/* Where clients reach us: http.public_url, else from the Host header already checked against
 * the allowed names. */
static const char *base_url(struct http_transport *t, struct MHD_Connection *c)
{
    static char url[300];
    if (public_url_set(t))
        return t->base_url;
    const char *host = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Host");
    if (host)
        snprintf(url, sizeof(url), "http://%s", host);
    else
        snprintf(url, sizeof(url), "http://127.0.0.1:%u", t->port);
    return url;
}

/* This server's MCP endpoint as the protected-resource metadata names it, and as a JWT's
 * audience must name it when http.jwt_audience is empty: the name the client used, with the
 * port this server listens on. Not the Host's own port: an allowed host without a port matches
 * any, and a token minted for another server on the same name (localhost:3000) must not pass
 * here by sending its Host. */
static const char *resource_url(struct http_transport *t, struct MHD_Connection *c)
{
    static char url[HTTP_PUBLIC_URL_MAX + 8];
    if (public_url_set(t)) {
        snprintf(url, sizeof(url), "%s/mcp", t->base_url);
        return url;
    }
    const char *host = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Host");
    size_t name_len = http_host_name_len(host);
    if (name_len == 0 || name_len > 255)
        snprintf(url, sizeof(url), "http://127.0.0.1:%u/mcp", t->port);
    else
        snprintf(url, sizeof(url), "http://%.*s:%u/mcp", (int)name_len, host, t->port);
    return url;
}

static void add_cors(struct http_transport *t, struct MHD_Connection *c, struct MHD_Response *r)
{
    const char *origin = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin");
    if (!origin)
        return;
    for (size_t i = 0; i < t->cfg->cors_origins.len; i++)
        if (strcasecmp(origin, t->cfg->cors_origins.items[i]) == 0) {
            MHD_add_response_header(r, "Access-Control-Allow-Origin", origin);
            /* A page's script reads only the headers named here: the session id, and the 401's
             * challenge, which names the metadata it discovers the authorization server from. */
            MHD_add_response_header(r, "Access-Control-Expose-Headers",
                                    "Mcp-Session-Id, WWW-Authenticate");
            MHD_add_response_header(r, "Vary", "Origin");
            return;
        }
}

/* Every answer goes out through here: CORS headers where configured, and the status counted. */
static enum MHD_Result send_response(struct http_transport *t, struct MHD_Connection *c,
                                     unsigned status, struct MHD_Response *r)
{
    add_cors(t, c, r);
    enum MHD_Result ok = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    count(status);
    return ok;
}

static enum MHD_Result reply(struct http_transport *t, struct MHD_Connection *c, unsigned status,
                             const char *ctype, const char *body, const char *session_id)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(body), (void *)body, MHD_RESPMEM_MUST_COPY);
    if (!r)
        return MHD_NO;
    if (ctype)
        MHD_add_response_header(r, "Content-Type", ctype);
    if (session_id)
        MHD_add_response_header(r, "Mcp-Session-Id", session_id);
    return send_response(t, c, status, r);
}

/* A JSON document as the body (doc is taken). */
static enum MHD_Result reply_json(struct http_transport *t, struct MHD_Connection *c,
                                  unsigned status, json_t *doc, size_t flags)
{
    char *body = json_dumps(doc, flags);
    json_decref(doc);
    enum MHD_Result r = body ? reply(t, c, status, "application/json", body, NULL) : MHD_NO;
    free(body);
    return r;
}

/* A JSON-RPC error body, as MCP clients expect, in a response the caller may add headers to. */
static struct MHD_Response *error_response(int code, const char *message)
{
    json_t *e = json_pack("{s:s, s:{s:i, s:s}, s:n}", "jsonrpc", "2.0", "error", "code", code,
                          "message", message, "id");
    char *body = json_dumps(e, JSON_COMPACT);
    json_decref(e);
    struct MHD_Response *r =
        body ? MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE) : NULL;
    if (!r) {
        free(body);
        return NULL;
    }
    MHD_add_response_header(r, "Content-Type", "application/json");
    return r;
}

/* auth_error: for a 401 to a token that was presented, why it was refused (RFC 6750 3). */
static enum MHD_Result refuse_why(struct http_transport *t, struct MHD_Connection *c,
                                  unsigned status, int code, const char *message,
                                  const char *auth_error)
{
    struct MHD_Response *r = error_response(code, message);
    if (!r)
        return MHD_NO;
    if (status == MHD_HTTP_UNAUTHORIZED) {
        char *err = auth_error ? xasprintf("error=\"invalid_token\", error_description=\"%s\", ",
                                           auth_error)
                               : xstrdup("");
        char *hdr =
            xasprintf("Bearer %sresource_metadata=\"%s/.well-known/oauth-protected-resource\"", err,
                      base_url(t, c));
        free(err);
        MHD_add_response_header(r, "WWW-Authenticate", hdr);
        free(hdr);
    }
    return send_response(t, c, status, r);
}

struct joined_header {
    const char *name;
    char buf[2048];
    size_t len;
};

static enum MHD_Result join_value(void *cls, enum MHD_ValueKind kind, const char *key,
                                  const char *value)
{
    (void)kind;
    struct joined_header *j = cls;
    if (strcasecmp(key, j->name) != 0 || !value)
        return MHD_YES;
    int n = snprintf(j->buf + j->len, sizeof(j->buf) - j->len, "%s%s", j->len ? ", " : "", value);
    if (n > 0)
        j->len += (size_t)n < sizeof(j->buf) - j->len ? (size_t)n : sizeof(j->buf) - 1 - j->len;
    return MHD_YES;
}

/* The Accept header's values, all of its lines joined with ", " as RFC 9110 5.3 reads a
 * repeated field (a client may send text/event-stream on a line of its own); NULL if none. */
static const char *accept_of(struct MHD_Connection *c, struct joined_header *j)
{
    j->name = "Accept";
    j->len = 0;
    j->buf[0] = '\0';
    MHD_get_connection_values(c, MHD_HEADER_KIND, join_value, j);
    return j->len ? j->buf : NULL;
}

/* A 405 whose Allow names the methods the resource does take (RFC 9110 15.5.6). */
static enum MHD_Result refuse_method(struct http_transport *t, struct MHD_Connection *c,
                                     const char *allow, const char *message)
{
    struct MHD_Response *r = error_response(-32600, message);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, "Allow", allow);
    return send_response(t, c, MHD_HTTP_METHOD_NOT_ALLOWED, r);
}

/* Refused, and the connection closed after the answer: nothing after these headers is read
 * as a request of its own. */
static enum MHD_Result refuse_and_close(struct http_transport *t, struct MHD_Connection *c,
                                        unsigned status, int code, const char *message)
{
    struct MHD_Response *r = error_response(code, message);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
    return send_response(t, c, status, r);
}

/* An HTTP-level refusal with a JSON-RPC error body, as MCP clients expect. */
static enum MHD_Result refuse(struct http_transport *t, struct MHD_Connection *c, unsigned status,
                              int code, const char *message)
{
    return refuse_why(t, c, status, code, message, NULL);
}

/* What a JWT's audience must be: http.jwt_audience, else the resource URL for this Host (see
 * resource_url), which is what /.well-known/oauth-protected-resource names either way (RFC
 * 9728 3.3: the URL the client used; an audience may be an identifier such as api://...). */
static const char *audience(struct http_transport *t, struct MHD_Connection *c)
{
    const char *aud = t->cfg->jwt_audience;
    return aud && *aud ? aud : resource_url(t, c);
}

/* The caller's principal from its Authorization header (see http_auth_principal), written to
 * buf when it comes from a JWT, checked for audience(). */
static const char *authenticate(struct http_transport *t, struct MHD_Connection *c, char *buf,
                                size_t cap, const char **why)
{
    const char *aud = audience(t, c);
    const char *p =
        http_auth_principal(&t->auth, t->jwks ? http_jwks_current(t->jwks, now_ms()) : NULL,
                            MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization"), aud,
                            (int64_t)(wall_ms() / 1000), buf, cap, why);
    /* A key id we lack, or a kid-less token no key verifies, may be a key the identity
     * provider has just published. */
    if (!p && t->jwks && http_jwt_refusal_wants_new_keys(*why))
        http_jwks_key_missing(t->jwks);
    return p;
}

/* ---- sessions and streams ---- */

static struct http_session *find_session(struct http_transport *t, const char *id)
{
    return strmap_get(&t->sessions_by_id, id);
}

static void stream_destroy(struct sse_stream *st)
{
    ev_timer_cancel(st->sse_timer);
    json_decref(st->request_id);
    free(st->buf);
    free(st);
}

static void stream_free(struct sse_stream *st)
{
    struct http_session *s = st->s;
    for (struct sse_stream **pp = &s->streams; *pp; pp = &(*pp)->next)
        if (*pp == st) {
            *pp = st->next;
            break;
        }
    if (s->get_stream == st)
        s->get_stream = NULL;
    stream_destroy(st);
}

static void stream_wake(struct sse_stream *st)
{
    if (st->suspended && st->conn) {
        st->suspended = false;
        MHD_resume_connection(st->conn);
        kick(st->s->t);
    }
}

static void stream_append(struct sse_stream *st, const char *data, size_t len)
{
    if (st->len + len > st->cap) {
        size_t cap = st->cap ? st->cap : 1024;
        while (cap < st->len + len)
            cap *= 2;
        st->buf = xrealloc(st->buf, cap);
        st->cap = cap;
    }
    memcpy(st->buf + st->len, data, len);
    st->len += len;
}

/* One SSE message event, numbered for Last-Event-ID. */
static void append_event(struct sse_stream *st, uint64_t stream_no, uint64_t seq, const char *json,
                         size_t len)
{
    char id[64];
    http_event_id_format(id, sizeof(id), stream_no, seq);
    char *ev = xasprintf("id: %s\nevent: message\ndata: %.*s\n\n", id, (int)len, json);
    stream_append(st, ev, strlen(ev));
    free(ev);
}

static void sse_event(struct sse_stream *st, uint64_t seq, const char *json, size_t len)
{
    append_event(st, st->number, seq, json, len);
    stream_wake(st);
}

/* Ends a stream that another one replaces: it closes once its buffer drains (dropped first
 * when its events were replayed elsewhere), or at once when nobody is reading it. */
static void stream_retire(struct sse_stream *st, bool drop_pending)
{
    if (st->s->get_stream == st)
        st->s->get_stream = NULL;
    if (!st->conn) {
        stream_free(st);
        return;
    }
    if (drop_pending)
        st->len = st->off = 0;
    st->done = true;
    if (st->waiting && drop_pending && st->json_only) {
        free(st->buf);
        st->buf = NULL;
        st->cap = 0;
    }
    stream_wake(st);
}

/* The priming event goes first: an id with empty data (a point to resume from even before
 * any message) and how long a client should wait before reconnecting. */
static void stream_prime(struct sse_stream *st)
{
    char id[64];
    http_event_id_format(id, sizeof(id), st->number, st->priming_seq);
    char *ev = xasprintf("id: %s\nretry: %u\ndata: \n\n", id, RECONNECT_MS);
    size_t n = strlen(ev);
    stream_append(st, ev, n); /* grows the buffer; then move the event to the front */
    memmove(st->buf + st->off + n, st->buf + st->off, st->len - st->off - n);
    memcpy(st->buf + st->off, ev, n);
    free(ev);
}

/* A POST's answer becomes a stream: its priming event is numbered before anything the call
 * sends on it, so resuming from the priming event loses nothing. */
static void stream_to_sse(struct sse_stream *st)
{
    if (!st->json_only)
        return;
    st->json_only = false;
    st->priming_seq = http_replay_push(&st->s->replay, st->number, "", 0);
}

/* A stream whose answer is complete goes once nothing will read it: no client, no parked
 * POST, no handler about to look at it. */
static void stream_free_if_unread(struct sse_stream *st)
{
    if (!st->conn && !st->waiting && !st->dispatching)
        stream_free(st);
}

static struct sse_stream *stream_new(struct http_session *s, const json_t *request_id)
{
    struct sse_stream *st = xcalloc(1, sizeof(*st));
    st->s = s;
    st->number = ++s->next_stream;
    st->request_id = request_id ? json_deep_copy(request_id) : NULL;
    st->next = s->streams;
    s->streams = st;
    return st;
}

/* The POST stream still waiting for the answer to the request (or batch) with this id. */
static struct sse_stream *stream_open_for(const struct http_session *s, const json_t *id)
{
    for (struct sse_stream *st = s->streams; st; st = st->next)
        if (st->request_id && !st->done && json_equal(st->request_id, id))
            return st;
    return NULL;
}

/* Routes a message from the protocol layer: to the POST stream of the request it belongs to,
 * else to the session's GET stream. Every event is numbered and kept for replay, so a client
 * that lost its stream can resume with Last-Event-ID. */
static void session_send(void *ctx, json_t *msg, const json_t *related_id)
{
    struct http_session *s = ctx;
    size_t text_len = 0;
    char *text = mcp_dumps(msg, &text_len);
    if (!text)
        return;
    struct sse_stream *target = related_id && !s->legacy ? stream_open_for(s, related_id) : NULL;
    if (!target)
        target = s->get_stream;
    /* A batch's answers, an array, are the last message of its stream. */
    bool is_response =
        target && related_id &&
        (json_is_array(msg) || ((json_object_get(msg, "result") || json_object_get(msg, "error")) &&
                                json_equal(json_object_get(msg, "id"), related_id)));
    if (target && target->json_only) {
        if (is_response) {
            /* Alone: one JSON body, which has no event id to resume from. */
            size_t n = text_len;
            if (!target->buf) {
                target->buf = text;
                target->len = target->cap = n;
            } else {
                stream_append(target, text, n);
                free(text);
            }
            target->done = true;
            stream_wake(target);
            return;
        }
        stream_to_sse(target);
    }
    uint64_t number = target ? target->number : 0;
    uint64_t seq = http_replay_push(&s->replay, number, text, text_len);
    /* A request's stream ends with its response: so does a resume of it, even once the stream
     * itself is gone. */
    if (is_response && target != s->get_stream && !target->rest)
        http_replay_end_stream(&s->replay, number);
    if (target) {
        if (target->rest) {
            /* REST answers are the tool result itself; progress and logs have no place. */
            if (is_response) {
                json_t *body = json_object_get(msg, "result");
                json_t *err =
                    body ? NULL : json_pack("{s:O}", "error", json_object_get(msg, "error"));
                size_t out_len = 0;
                char *out = mcp_dumps(body ? body : err, &out_len);
                json_decref(err);
                if (out)
                    stream_append(target, out, out_len);
                free(out);
                target->done = true;
                stream_wake(target);
                if (target->queued && !target->conn)
                    stream_free(target); /* the caller left before the answer */
            }
            free(text);
            return;
        }
        if (target->detached) {
            if (is_response) {
                target->done = true;
                stream_free_if_unread(target);
            }
            free(text);
            return;
        }
        sse_event(target, seq, text, text_len);
        if (is_response && target != s->get_stream) {
            target->done = true;
            stream_wake(target);
            stream_free_if_unread(target); /* the replay buffer keeps what it sent */
        }
    }
    free(text);
}

/* SEP-1699 polling: the server ends a request's stream early; the client reconnects with a
 * GET and Last-Event-ID and gets the rest from the replay buffer. */
static void session_close_stream(void *ctx, const json_t *related_id)
{
    struct http_session *s = ctx;
    if (s->legacy)
        return;
    for (struct sse_stream *st = s->streams; st; st = st->next)
        if (st->request_id && !st->done && !st->detached && st != s->get_stream &&
            json_equal(st->request_id, related_id)) {
            st->detached = true;
            stream_to_sse(st); /* even if the answer comes at once, it waits for the resume */
            stream_wake(st);
            return;
        }
}

/* A request that ended without a response (cancelled): its POST ends too, or the client
 * would wait on it for ever. */
static void session_end_request(void *ctx, const json_t *related_id)
{
    struct http_session *s = ctx;
    if (s->legacy)
        return;
    for (struct sse_stream *st = s->streams; st; st = st->next)
        if (st->request_id && !st->done && st != s->get_stream &&
            json_equal(st->request_id, related_id)) {
            stream_to_sse(st); /* a parked POST answers with an empty stream */
            http_replay_end_stream(&s->replay, st->number);
            st->done = true;
            stream_wake(st);
            stream_free_if_unread(st); /* its client left already */
            return;
        }
}

static const struct mcp_transport_ops session_ops = {
    .send = session_send, .close_stream = session_close_stream, .end_request = session_end_request};

static bool principal_full(const struct http_transport *t, const char *principal);

/* Why no new session may open now, or NULL. A principal (a token's holder) may hold only
 * http.max_sessions_per_principal of them, so that one tenant cannot lock the others out. */
static const char *session_limit(const struct http_transport *t, const char *principal)
{
    if (t->n_sessions >= t->cfg->http_max_sessions)
        return "limit reached: http.max_sessions sessions are open";
    return principal_full(t, principal)
               ? "limit reached: this principal holds http.max_sessions_per_principal sessions"
               : NULL;
}

static void session_free(struct http_session *s, const char *why);

/* Whether anyone uses the session: an event stream or a POST still connected, or a call. */
static bool session_in_use(const struct http_session *s)
{
    for (const struct sse_stream *st = s->streams; st; st = st->next)
        if (st->conn)
            return true;
    return mcp_session_busy(s->mcp);
}

/* Whether the principal holds its http.max_sessions_per_principal sessions. */
static bool principal_full(const struct http_transport *t, const char *principal)
{
    if (!principal)
        return false;
    uint32_t mine = 0;
    for (const struct http_session *s = t->sessions; s; s = s->next)
        mine += !s->rest && strcmp(s->owner, principal) == 0;
    return mine >= t->cfg->http_max_sessions_per_principal;
}

/* Why no new session may open now, or NULL, once room was made where it could be: at a limit,
 * the session unused the longest goes (the principal's own, when it is the principal's limit),
 * if unused for http.session_evict_idle_s, with no stream open and no call running, and if
 * ending it closes no sandboxes (its owner has another session, or none). Most clients leave
 * without the DELETE that ends a session, and theirs held every place until
 * http.session_idle_s (an hour). */
static const char *session_room(struct http_transport *t, const char *principal)
{
    const char *full;
    while ((full = session_limit(t, principal))) {
        bool mine = principal_full(t, principal);
        uint64_t now = now_ms(), idle = (uint64_t)t->cfg->http_session_evict_idle_s * 1000;
        struct http_session *oldest = NULL;
        for (struct http_session *s = t->sessions; s; s = s->next)
            if (now - s->last_seen_ms >= idle && !s->ended &&
                (!oldest || s->last_seen_ms < oldest->last_seen_ms) &&
                (!mine || (!s->rest && strcmp(s->owner, principal) == 0)) && !session_in_use(s) &&
                !mcp_session_end_closes_sandboxes(s->mcp))
                oldest = s;
        if (!oldest)
            return full;
        log_emit(LOG_LVL_INFO, "http session ended to make room for a new one", "limit",
                 mine ? "http.max_sessions_per_principal" : "http.max_sessions", NULL);
        session_free(oldest, NULL); /* nobody uses it: no call to answer */
    }
    return NULL;
}

/* Why this principal may not hold one more connection open now, or NULL. A call still
 * running, an event stream and a REST call each hold one of http.max_connections until they
 * end: without a cap of its own, one tenant could take them all, and another's requests would
 * then wait unserved, not even refused. */
static const char *open_request_limit(const struct http_transport *t, const char *principal)
{
    if (!principal)
        return NULL;
    uint32_t open = 0;
    for (const struct http_session *s = t->sessions; s; s = s->next)
        if (strcmp(s->owner, principal) == 0)
            for (const struct sse_stream *st = s->streams; st; st = st->next)
                open += st->conn != NULL;
    return open >= t->cfg->http_max_open_requests_per_principal
               ? "limit reached: this principal holds http.max_open_requests_per_principal "
                 "requests open (calls still running, event streams, REST calls)"
               : NULL;
}

static struct http_session *session_new(struct http_transport *t, const char *principal)
{
    struct http_session *s = xcalloc(1, sizeof(*s));
    s->t = t;
    unsigned char r[SESSION_ID_LEN / 2];
    if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r))
        return free(s), NULL;
    for (size_t i = 0; i < sizeof(r); i++)
        snprintf(s->id + 2 * i, 3, "%02x", r[i]);
    /* With tokens, the principal owns the sandboxes; without, each session owns its own. */
    s->owner = xstrdup(principal ? principal : s->id);
    http_replay_init(&s->replay, REPLAY_EVENTS, REPLAY_BYTES);
    s->mcp = mcp_session_new(t->srv, &session_ops, s, s->owner);
    s->last_seen_ms = now_ms();
    s->next = t->sessions;
    t->sessions = s;
    strmap_put(&t->sessions_by_id, s->id, s);
    t->n_sessions++;
    if (t->n_sessions > t->peak_sessions)
        t->peak_sessions = t->n_sessions;
    metrics_gauge_set("mcp_http_sessions", "Open MCP sessions over HTTP", "",
                      (double)t->n_sessions);
    return s;
}

/* why: what each request still in flight is answered (see mcp_session_end), or NULL when no
 * client could hear it. */
static void session_free(struct http_session *s, const char *why)
{
    struct http_transport *t = s->t;
    strmap_del(&t->sessions_by_id, s->id, s);
    for (struct http_session **pp = &t->sessions; *pp; pp = &(*pp)->next)
        if (*pp == s) {
            *pp = s->next;
            break;
        }
    t->n_sessions--;
    /* Ending the MCP session cancels its calls and, if it was the owner's last, closes the
     * owner's sandboxes. */
    if (why)
        mcp_session_end(s->mcp, why);
    else
        mcp_session_free(s->mcp);
    s->mcp = NULL;
    /* Streams still attached to a connection end when their reader next runs. */
    struct sse_stream *st = s->streams;
    while (st) {
        struct sse_stream *next = st->next;
        if (st->conn) {
            st->done = true;
            ev_timer_clear(&st->sse_timer);
            stream_wake(st);
            st->s = NULL; /* freed when MHD lets go of it (stream_gone, or a parked POST's
                             handler) */
            st->next = NULL;
        } else {
            stream_destroy(st);
        }
        st = next;
    }
    ev_timer_cancel(s->end_timer);
    http_replay_free(&s->replay);
    free(s->owner);
    free(s);
    metrics_gauge_set("mcp_http_sessions", "Open MCP sessions over HTTP", "",
                      (double)t->n_sessions);
}

static void end_legacy(struct ev_loop *loop, void *data)
{
    (void)loop;
    struct http_session *s = data;
    s->end_timer = NULL;
    session_free(s, NULL); /* its stream, the only way to answer, is gone */
}

/* ---- SSE responses ---- */

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    struct sse_stream *st = cls;
    if (st->off < st->len) {
        size_t n = st->len - st->off < max ? st->len - st->off : max;
        memcpy(buf, st->buf + st->off, n);
        st->off += n;
        if (st->off == st->len)
            st->off = st->len = 0;
        st->last_sent_ms = now_ms();
        return (ssize_t)n;
    }
    if (st->done || st->detached)
        return MHD_CONTENT_READER_END_OF_STREAM;
    /* Nothing to send yet: park the connection until the protocol layer has something. */
    st->suspended = true;
    MHD_suspend_connection(st->conn);
    return 0;
}

static void stream_gone(void *cls)
{
    struct sse_stream *st = cls;
    st->conn = NULL;
    st->suspended = false;
    if (!st->s) { /* its session ended first */
        stream_destroy(st);
        return;
    }
    struct http_session *s = st->s;
    /* A client that drops a POST stream does not cancel the call: it finishes, and its
     * messages stay in the replay buffer. */
    if (st->done || st == s->get_stream)
        stream_free(st);
    /* The legacy transport has no DELETE: its stream closing ends the session. */
    if (s->legacy && !s->ended) {
        s->ended = true;
        s->end_timer = ev_timer_add(s->t->loop, 0, end_legacy, s);
    }
}

static enum MHD_Result reply_stream(struct http_transport *t, struct MHD_Connection *c,
                                    struct sse_stream *st, const char *session_id)
{
    struct MHD_Response *r =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 << 10, stream_read, st, stream_gone);
    if (!r)
        return MHD_NO;
    st->conn = c;
    st->last_sent_ms = now_ms();
    MHD_add_response_header(r, "Content-Type", "text/event-stream");
    MHD_add_response_header(r, "Cache-Control", "no-cache");
    if (session_id)
        MHD_add_response_header(r, "Mcp-Session-Id", session_id);
    return send_response(t, c, MHD_HTTP_OK, r);
}

/* ---- /mcp ---- */

static bool version_ok(const char *v)
{
    if (!v)
        return true; /* absent: the client speaks 2025-03-26 */
    for (size_t i = 0; i < ARRAY_SIZE(versions); i++)
        if (strcmp(v, versions[i]) == 0)
            return true;
    return false;
}

/* The session named by the request, checked against the caller's principal: another
 * principal's session answers like an unknown one. */
static struct http_session *session_of(struct http_transport *t, struct MHD_Connection *c,
                                       const char *principal, unsigned *status, const char **why)
{
    const char *sid = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Mcp-Session-Id");
    if (!sid) {
        *status = MHD_HTTP_BAD_REQUEST;
        *why = "Mcp-Session-Id header is required (initialize first)";
        return NULL;
    }
    struct http_session *s = find_session(t, sid);
    /* A legacy session (its /sse stream, its sessionId) and the REST calls' own are not
     * Streamable HTTP sessions: an answer could not find its POST. */
    if (!s || s->legacy || s->rest || (principal && strcmp(s->owner, principal) != 0)) {
        *status = MHD_HTTP_NOT_FOUND;
        *why = "unknown or ended session: initialize again";
        return NULL;
    }
    if (!version_ok(MHD_lookup_connection_value(c, MHD_HEADER_KIND, "MCP-Protocol-Version"))) {
        *status = MHD_HTTP_BAD_REQUEST;
        *why = "unsupported MCP-Protocol-Version";
        return NULL;
    }
    s->last_seen_ms = now_ms();
    return s;
}

/* A POST answered alone is one JSON body; otherwise its messages go out as an SSE stream,
 * the priming event first. */
static enum MHD_Result answer_post(struct http_transport *t, struct MHD_Connection *c,
                                   struct request *rq, struct sse_stream *st)
{
    struct http_session *s = st->s;
    /* The session ended while the call ran: what it was sent then still goes out, as one body
     * or, if it had become a stream, as that stream (it needs no session: it is done). */
    if (!s && !(st->done && st->len)) {
        stream_destroy(st);
        return refuse(t, c, MHD_HTTP_NOT_FOUND, -32600, "the session ended");
    }
    const char *sid = s && rq->is_init ? s->id : NULL;
    if (st->done && st->json_only) {
        if (!st->len) { /* its request was taken over by a resumed stream */
            stream_free(st);
            return refuse(t, c, MHD_HTTP_CONFLICT, -32600, "this request's stream was resumed");
        }
        struct MHD_Response *r =
            MHD_create_response_from_buffer(st->len, st->buf, MHD_RESPMEM_MUST_FREE);
        if (r)
            st->buf = NULL; /* the response owns it */
        if (s)
            stream_free(st);
        else
            stream_destroy(st);
        if (!r)
            return MHD_NO;
        MHD_add_response_header(r, "Content-Type", "application/json");
        if (sid)
            MHD_add_response_header(r, "Mcp-Session-Id", sid);
        return send_response(t, c, MHD_HTTP_OK, r);
    }
    stream_to_sse(st);
    stream_prime(st);
    return reply_stream(t, c, st, sid);
}

static void on_sse_after(struct ev_loop *loop, void *data)
{
    (void)loop;
    struct sse_stream *st = data;
    st->sse_timer = NULL;
    if (st->waiting && !st->done) {
        stream_to_sse(st);
        stream_wake(st);
    }
}

/* The handler of a parked POST, run again once its stream woke. */
static enum MHD_Result resume_post(struct http_transport *t, struct MHD_Connection *c,
                                   struct request *rq)
{
    struct sse_stream *st = rq->parked;
    rq->parked = NULL;
    st->waiting = false;
    st->conn = NULL;
    ev_timer_clear(&st->sse_timer);
    return answer_post(t, c, rq, st);
}

/* Why a batch is refused whole. One with a request in it is answered member by member, an
 * invalid member by an error in the array, on that request's stream (as over stdio); one
 * without has no stream for its errors. */
static const char *batch_shape_error(const json_t *batch)
{
    if (json_array_size(batch) == 0)
        return "an empty batch";
    if (mcp_batch_first_request_id(batch))
        return NULL;
    size_t i;
    const json_t *m;
    json_array_foreach(batch, i, m)
    {
        const char *why = mcp_message_shape_error(m);
        if (why)
            return why;
        if (strcmp(json_string_value(json_object_get(m, "method")) ?: "", "initialize") == 0)
            return "initialize must not be part of a batch";
    }
    return NULL;
}

/* A POST body that is no message (over a size cap, or unparsable) on a session the server has
 * asked something (sampling, elicitation, roots): when the id its ends show is that request's,
 * it was the client's answer, and the request fails with why instead of waiting for one that
 * will not come. The client gets its 413 or 400 all the same. */
static void fail_answered_request(struct http_session *s, struct request *rq, const char *why)
{
    if (!s)
        return;
    json_t *id = mcp_message_ends_id(&rq->ends);
    if (id)
        mcp_session_refuse_response(s->mcp, id, why);
    json_decref(id);
}

/* The session a refused POST names, if it is the caller's; NULL, and nothing said, otherwise. */
static struct http_session *session_if_any(struct http_transport *t, struct MHD_Connection *c,
                                           const char *principal)
{
    unsigned status;
    const char *why;
    return session_of(t, c, principal, &status, &why);
}

static enum MHD_Result message_too_large(struct http_transport *t, struct MHD_Connection *c,
                                         size_t len)
{
    char why[128];
    snprintf(why, sizeof(why), "message of %zu bytes exceeds the limit of %llu (max_message_bytes)",
             len, (unsigned long long)t->cfg->max_message_bytes);
    return refuse(t, c, MHD_HTTP_CONTENT_TOO_LARGE, -32600, why);
}

static enum MHD_Result handle_post(struct http_transport *t, struct MHD_Connection *c,
                                   struct request *rq, const char *principal)
{
    struct joined_header accept;
    if (!http_accept_post_ok(accept_of(c, &accept)))
        return refuse(t, c, MHD_HTTP_NOT_ACCEPTABLE, -32600,
                      "Accept must list application/json and text/event-stream");
    if (!http_content_type_json(MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Type")))
        return refuse(t, c, MHD_HTTP_UNSUPPORTED_MEDIA_TYPE, -32600,
                      "Content-Type must be application/json");
    /* The protocol layer's cap, said here with a status (its error would name no request). */
    if (rq->too_big || rq->len > t->cfg->max_message_bytes) {
        char why[96];
        snprintf(why, sizeof(why), "exceeds the size limit (%zu bytes, limit %llu)", rq->ends.bytes,
                 rq->too_big ? (unsigned long long)t->cfg->http_max_body_bytes
                             : (unsigned long long)t->cfg->max_message_bytes);
        fail_answered_request(session_if_any(t, c, principal), rq, why);
        if (rq->too_big)
            return refuse(t, c, MHD_HTTP_CONTENT_TOO_LARGE, -32600, "request body too large");
        return message_too_large(t, c, rq->len);
    }
    /* Parsed once, here, as the protocol layer would. */
    char parse_error[JSON_ERROR_TEXT_LENGTH + 64];
    json_t *msg = mcp_parse(rq->body ? rq->body : "", rq->len, parse_error, sizeof(parse_error));
    if (!msg) {
        char why[sizeof(parse_error) + 32];
        snprintf(why, sizeof(why), "could not be read: %s", parse_error);
        /* A request the strict parse refuses answers nothing, whatever its id (as over stdio). */
        if (!mcp_text_is_request(rq->body ? rq->body : "", rq->len))
            fail_answered_request(session_if_any(t, c, principal), rq, why);
        return refuse(t, c, MHD_HTTP_BAD_REQUEST, -32700, parse_error);
    }
    /* A message the protocol layer could only answer with id null is refused here, with a
     * status: its error would otherwise go to the GET stream, or nowhere, and the POST of a
     * request with an unusable id would wait for ever. */
    bool batch = json_is_array(msg);
    const char *shape = batch ? batch_shape_error(msg) : mcp_message_shape_error(msg);
    if (shape) {
        /* An id with neither a method nor a result or error: when the id is a request of the
         * server's, it was the client's answer to it, and that request fails with why (over
         * stdio the protocol layer does the same). */
        struct http_session *s =
            batch || json_object_get(msg, "method") ? NULL : session_if_any(t, c, principal);
        if (s)
            mcp_session_refuse_response(s->mcp, json_object_get(msg, "id"),
                                        "has neither a result nor an error");
        json_decref(msg);
        return refuse(t, c, MHD_HTTP_BAD_REQUEST, -32600, shape);
    }
    /* A batch's answers come together, on the stream of its first request (see mcp.h). */
    const char *method = json_string_value(json_object_get(msg, "method"));
    const json_t *id = batch ? mcp_batch_first_request_id(msg) : json_object_get(msg, "id");
    bool is_request = id && (batch || method);
    bool is_init = is_request && method && strcmp(method, "initialize") == 0;
    const char *busy = is_request ? open_request_limit(t, principal) : NULL;
    if (busy) {
        json_decref(msg);
        return refuse(t, c, MHD_HTTP_TOO_MANY_REQUESTS, -32000, busy);
    }
    struct http_session *s = NULL;
    unsigned status = 0;
    const char *why = NULL;
    bool fresh = false;
    if (is_init && !MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Mcp-Session-Id")) {
        const char *full = session_room(t, principal);
        if (full) {
            json_decref(msg);
            return refuse(t, c, MHD_HTTP_SERVICE_UNAVAILABLE, -32000, full);
        }
        s = session_new(t, principal);
        fresh = true;
    } else {
        s = session_of(t, c, principal, &status, &why);
    }
    if (!s) {
        json_decref(msg);
        return refuse(t, c, status ? status : MHD_HTTP_INTERNAL_SERVER_ERROR, -32600,
                      why ? why : "session");
    }
    if (batch && !mcp_session_accepts_batches(s->mcp)) {
        json_decref(msg);
        return refuse(t, c, MHD_HTTP_BAD_REQUEST, -32600,
                      "batches are taken only in protocol version 2025-03-26 (2025-06-18 "
                      "removed them)");
    }
    if (!is_request) {
        mcp_session_receive_json(s->mcp, msg, rq->len);
        json_decref(msg);
        return reply(t, c, MHD_HTTP_ACCEPTED, NULL, "", NULL);
    }
    /* Answers find their POST by its (first) id: two open POSTs under one id would get each
     * other's. JSON-RPC ids are unique among a session's open requests. */
    if (stream_open_for(s, id)) {
        json_decref(msg);
        return refuse(t, c, MHD_HTTP_BAD_REQUEST, -32600,
                      "a request with this id is still open on this session (a POST not yet "
                      "answered, or a batch it starts): use another id");
    }
    struct sse_stream *st = stream_new(s, id);
    st->json_only = true; /* until something besides the response is sent */
    st->dispatching = true;
    mcp_session_receive_json(s->mcp, msg, rq->len);
    st->dispatching = false;
    json_decref(msg);
    rq->is_init = is_init;
    if (fresh && st->done && !mcp_session_initialized(s->mcp)) {
        /* A failed initialize leaves no session behind, and names none. */
        rq->is_init = false;
        enum MHD_Result r = answer_post(t, c, rq, st);
        session_free(s, NULL);
        return r;
    }
    if (st->done || !st->json_only)
        return answer_post(t, c, rq, st);
    /* Still running: park the request; its handler runs again when the stream wakes. */
    st->conn = c;
    st->waiting = true;
    st->suspended = true;
    st->sse_timer = ev_timer_add(t->loop, SSE_AFTER_MS, on_sse_after, st);
    rq->parked = st;
    MHD_suspend_connection(c);
    return MHD_YES;
}

static void replay_into(void *ctx, const struct http_replay_event *ev)
{
    struct sse_stream *st = ctx;
    if (ev->len == 0)
        return; /* a priming event: nothing to deliver */
    append_event(st, ev->stream, ev->seq, ev->data, ev->len);
}

static enum MHD_Result handle_get(struct http_transport *t, struct MHD_Connection *c,
                                  const char *principal)
{
    struct joined_header accept;
    if (!http_accept_has(accept_of(c, &accept), "text/event-stream"))
        return refuse_method(t, c, "GET, POST, DELETE",
                             "GET /mcp opens an event stream: Accept must list text/event-stream");
    unsigned status = 0;
    const char *why = NULL;
    struct http_session *s = session_of(t, c, principal, &status, &why);
    if (!s)
        return refuse(t, c, status, -32600, why);
    const char *busy = open_request_limit(t, principal);
    if (busy)
        return refuse(t, c, MHD_HTTP_TOO_MANY_REQUESTS, -32000, busy);
    struct sse_stream *st = stream_new(s, NULL);
    const char *last = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Last-Event-ID");
    uint64_t stream_no, seq;
    if (last && http_event_id_parse(last, &stream_no, &seq)) {
        /* Resume: what the named stream sent after that event, then live messages. */
        if (http_replay_since(&s->replay, stream_no, seq, replay_into, st) < 0) {
            stream_free(st);
            return refuse(t, c, MHD_HTTP_NOT_FOUND, -32600,
                          "cannot resume: those events are no longer buffered");
        }
        for (struct sse_stream *o = s->streams; o; o = o->next) {
            /* One retired below keeps its number while its buffer drains: the live one counts. */
            if (o->number != stream_no || o == st || (o->done && !o->request_id))
                continue;
            if (o->done && o->request_id) {
                /* That request was answered: the replay holds the rest of it, answer included,
                 * and this stream ends with it. (Taking its id over, it stayed open for ever,
                 * and held the id from any later request.) */
                st->done = true;
                return reply_stream(t, c, st, NULL);
            }
            /* This stream takes over: the rest of that request's messages come here. The old
             * one may still look connected (a dropped client is noticed only when written to),
             * so it is ended rather than left to swallow them. */
            st->request_id = o->request_id;
            o->request_id = NULL;
            /* And goes on under its number: a client that loses this stream too before any
             * event of it resumes again from the same id. (Under a new number, that second
             * resume found no stream, and the request's events went to the lost one.) */
            st->number = o->number;
            stream_retire(o, true);
            break;
        }
        /* A request's stream, resumed, carries that request to its end; the session's own GET
         * stream is another, and stays. (Taking its place, it was then replaced by the next
         * plain GET, and the request's response went out on that one.) One whose request
         * ended, its stream gone since, ends with the replay: it stayed open for ever before,
         * as the session's GET stream. */
        if (!st->request_id && http_replay_stream_ended(&s->replay, stream_no))
            st->done = true;
        if (st->request_id || st->done)
            return reply_stream(t, c, st, NULL);
    }
    /* One GET stream per session: a new one replaces the old, whose client has most likely
     * gone (a parked connection's close is only noticed when it is written to). */
    if (s->get_stream && s->get_stream != st)
        stream_retire(s->get_stream, false);
    s->get_stream = st;
    return reply_stream(t, c, st, NULL);
}

static enum MHD_Result handle_delete(struct http_transport *t, struct MHD_Connection *c,
                                     const char *principal)
{
    unsigned status = 0;
    const char *why = NULL;
    struct http_session *s = session_of(t, c, principal, &status, &why);
    if (!s)
        return refuse(t, c, status, -32600, why);
    session_free(s, "the session was ended (HTTP DELETE) while this request ran: it was "
                    "cancelled");
    return reply(t, c, MHD_HTTP_OK, NULL, "", NULL);
}

/* ---- the deprecated HTTP+SSE transport (2024-11-05), for older clients ---- */

static enum MHD_Result handle_legacy_sse(struct http_transport *t, struct MHD_Connection *c,
                                         const char *principal)
{
    struct joined_header accept;
    if (!http_accept_has(accept_of(c, &accept), "text/event-stream"))
        return refuse(t, c, MHD_HTTP_NOT_ACCEPTABLE, -32600,
                      "GET /sse opens an event stream: Accept must list text/event-stream");
    const char *busy = open_request_limit(t, principal);
    if (busy)
        return refuse(t, c, MHD_HTTP_TOO_MANY_REQUESTS, -32000, busy);
    const char *full = session_room(t, principal);
    if (full)
        return refuse(t, c, MHD_HTTP_SERVICE_UNAVAILABLE, -32000, full);
    struct http_session *s = session_new(t, principal);
    if (!s)
        return refuse(t, c, MHD_HTTP_INTERNAL_SERVER_ERROR, -32603, "no session");
    s->legacy = true;
    struct sse_stream *st = stream_new(s, NULL);
    s->get_stream = st;
    /* The first event tells the client where to POST its messages. Relative, it resolves
     * against the URL the client used for /sse; behind a proxy with a path prefix that drops
     * the prefix, so with http.public_url set it is absolute. */
    char *ev = xasprintf("event: endpoint\ndata: %s/messages?sessionId=%s\n\n",
                         public_url_set(t) ? t->base_url : "", s->id);
    stream_append(st, ev, strlen(ev));
    free(ev);
    return reply_stream(t, c, st, NULL);
}

static enum MHD_Result handle_legacy_post(struct http_transport *t, struct MHD_Connection *c,
                                          struct request *rq, const char *principal)
{
    const char *sid = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "sessionId");
    struct http_session *s = sid ? find_session(t, sid) : NULL;
    if (!s || !s->legacy || s->ended || (principal && strcmp(s->owner, principal) != 0))
        return refuse(t, c, MHD_HTTP_NOT_FOUND, -32600, "unknown sessionId: GET /sse first");
    if (rq->too_big) {
        char why[96];
        snprintf(why, sizeof(why), "exceeds the size limit (%zu bytes, limit %llu)", rq->ends.bytes,
                 (unsigned long long)t->cfg->http_max_body_bytes);
        fail_answered_request(s, rq, why);
        return refuse(t, c, MHD_HTTP_CONTENT_TOO_LARGE, -32600, "request body too large");
    }
    s->last_seen_ms = now_ms();
    /* Answers, errors included, travel on the session's event stream. */
    mcp_session_receive(s->mcp, rq->body ? rq->body : "", rq->len);
    return reply(t, c, MHD_HTTP_ACCEPTED, "text/plain", "Accepted", NULL);
}

/* ---- file downloads ---- */

static char *make_link(void *data, const char *sandbox_id, const char *rel)
{
    struct http_transport *t = data;
    uint64_t expires = wall_ms() / 1000 + LINK_TTL_S;
    char sig[65];
    http_link_sign(t->link_key, sandbox_id, rel, expires, sig);
    char *enc = uri_path_encode(rel);
    char *url = xasprintf("%s/files/%s/%s?exp=%llu&sig=%s", t->base_url, sandbox_id, enc,
                          (unsigned long long)expires, sig);
    free(enc);
    return url;
}

void http_transport_serve_files(struct http_transport *t, struct sandbox_service *svc)
{
    t->svc = svc;
    svc->link_fn = make_link;
    svc->link_data = t;
}

static bool shown_inline(const char *mime)
{
    static const char *const inline_types[] = {"image/png", "image/jpeg", "image/gif", "image/webp",
                                               "text/plain"};
    for (size_t i = 0; i < ARRAY_SIZE(inline_types); i++)
        if (strcmp(mime, inline_types[i]) == 0)
            return true;
    return false;
}

/* attachment, with the file's name: plain (unsafe bytes as '_') and RFC 5987-encoded. */
static void content_disposition(const char *path, char *out, size_t cap)
{
    const char *name = strrchr(path, '/');
    name = name ? name + 1 : path;
    char plain[256], encoded[768];
    size_t p = 0, e = 0;
    for (const unsigned char *c = (const unsigned char *)name; *c; c++) {
        bool safe = isalnum(*c) || *c == '.' || *c == '-' || *c == '_';
        if (p + 1 < sizeof(plain))
            plain[p++] = safe ? (char)*c : '_';
        if (e + 4 < sizeof(encoded)) {
            if (safe)
                encoded[e++] = (char)*c;
            else
                e += (size_t)snprintf(encoded + e, sizeof(encoded) - e, "%%%02X", *c);
        }
    }
    plain[p] = '\0';
    encoded[e] = '\0';
    snprintf(out, cap, "attachment; filename=\"%s\"; filename*=UTF-8''%s", plain, encoded);
}

/* A download's body, read from the sandbox's file as it goes out. The file is the sandbox's to
 * change meanwhile: bytes past the length the headers promised are never read (a file that
 * grows is cut there), and one that ends early (or fails) closes the connection at once, so
 * the client sees a short body instead of waiting out the connection timeout for bytes that
 * will not come. libmicrohttpd's fd responses (0.9.75) do so only on their pread path: on the
 * sendfile one (taken once MHD_OPTION_SIGPIPE_HANDLED_BY_APP is set) sendfile's 0 at the end
 * of the file stalls the connection until its timeout. */
struct file_body {
    int fd;
    uint64_t from, len;
};

/* The buffer libmicrohttpd holds per download. With 64 KiB reads 200 MiB go out in about a
 * third of the time the 4 KiB reads of its fd responses take; 1,024 downloads hold 64 MiB. */
#define FILE_BODY_BLOCK (64u << 10)

static ssize_t file_body_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    const struct file_body *b = cls;
    if (pos >= b->len)
        return MHD_CONTENT_READER_END_WITH_ERROR;
    if (max > b->len - pos)
        max = (size_t)(b->len - pos);
    ssize_t n;
    do
        n = pread(b->fd, buf, max, (off_t)(b->from + pos));
    while (n < 0 && errno == EINTR);
    return n > 0 ? n : MHD_CONTENT_READER_END_WITH_ERROR;
}

static void file_body_free(void *cls)
{
    struct file_body *b = cls;
    close(b->fd);
    free(b);
}

/* Without tokens, the one owner of every REST call (plain HTTP carries no session). */
#define REST_OWNER "rest"

/* GET /files/{sandbox_id}/{path} and the seed's GET /sandbox/file: allowed with a valid signed
 * link, or as the sandbox's owner: the bearer principal; without auth, the MCP session named,
 * or with none named the REST client (who could read the file with read_file anyway). Anyone
 * else is answered like an unknown file. */
static enum MHD_Result handle_file(struct http_transport *t, struct MHD_Connection *c,
                                   const char *sandbox_id, const char *rel)
{
    struct sandbox *sb = t->svc && sandbox_id ? sandbox_find(t->svc, sandbox_id) : NULL;
    const char *exp = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "exp");
    const char *sig = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "sig");
    bool allowed = false;
    /* exp as the link has it: digits only (strtoull would take "+1", " 1" and "1x" too). */
    if (sb && exp && sig && *exp && strlen(exp) <= 19 && strspn(exp, "0123456789") == strlen(exp))
        allowed = http_link_verify(t->link_key, sandbox_id, rel, strtoull(exp, NULL, 10), sig,
                                   wall_ms() / 1000);
    if (sb && !allowed) {
        const char *owner = NULL, *why = NULL;
        char jwt_principal[HTTP_JWT_PRINCIPAL_MAX];
        if (t->auth_on) {
            owner = authenticate(t, c, jwt_principal, sizeof(jwt_principal), &why);
        } else {
            const char *sid = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Mcp-Session-Id");
            struct http_session *s = sid ? find_session(t, sid) : NULL;
            owner = s ? s->owner : sid ? NULL : REST_OWNER;
        }
        allowed = owner && strcmp(owner, sb->owner) == 0;
    }
    if (!allowed)
        return refuse(t, c, MHD_HTTP_NOT_FOUND, -32002, "no such file");
    char *path = xasprintf("%s%s", rel[0] == '/' ? "" : "/workspace/", rel);
    char canon[FILES_PATH_MAX];
    struct sbx_err err = {0};
    int fd = files_canonical(path, canon, sizeof(canon), &err) < 0
                 ? -1
                 : sandbox_open_file(sb, canon, O_RDONLY | O_NONBLOCK | O_NOCTTY, &err);
    free(path);
    if (fd < 0 && err.code == EAGAIN) /* the sandbox is still starting */
        return refuse(t, c, MHD_HTTP_SERVICE_UNAVAILABLE, -32002, err.msg);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        if (fd >= 0)
            close(fd);
        return refuse(t, c, MHD_HTTP_NOT_FOUND, -32002, "no such file");
    }
    sandbox_touch(sb); /* a download is a use of the sandbox, as its file tools are */
    uint64_t size = (uint64_t)st.st_size, from = 0, to = size ? size - 1 : 0;
    const char *range = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Range");
    unsigned status = MHD_HTTP_OK;
    enum http_range kind = range ? http_range_parse(range, size, &from, &to) : HTTP_RANGE_IGNORED;
    if (kind != HTTP_RANGE_IGNORED) {
        if (kind == HTTP_RANGE_UNSATISFIABLE) {
            close(fd);
            struct MHD_Response *r = MHD_create_response_from_buffer(0, "", MHD_RESPMEM_PERSISTENT);
            char cr[48];
            snprintf(cr, sizeof(cr), "bytes */%llu", (unsigned long long)size);
            MHD_add_response_header(r, "Content-Range", cr);
            return send_response(t, c, MHD_HTTP_RANGE_NOT_SATISFIABLE, r);
        }
        status = MHD_HTTP_PARTIAL_CONTENT;
    }
    uint64_t len = size ? to - from + 1 : 0;
    struct file_body *body = xmalloc(sizeof(*body));
    *body = (struct file_body){.fd = fd, .from = from, .len = len};
    struct MHD_Response *r = MHD_create_response_from_callback(len, FILE_BODY_BLOCK, file_body_read,
                                                               body, file_body_free);
    if (!r) {
        file_body_free(body);
        return MHD_NO;
    }
    const char *mime = files_mime_type(canon, "application/octet-stream");
    MHD_add_response_header(r, "Content-Type", mime);
    MHD_add_response_header(r, "Accept-Ranges", "bytes");
    /* Sandbox code wrote this file: it must not run as a page of this origin, which the Origin
     * check trusts. No sniffing, a sandboxed document without scripts or outside fetches, and
     * anything but a raster image or plain text is a download. */
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(
        r, "Content-Security-Policy",
        "sandbox; default-src 'none'; img-src data:; style-src 'unsafe-inline'");
    if (!shown_inline(mime)) {
        char cd[FILES_PATH_MAX * 4];
        content_disposition(canon, cd, sizeof(cd));
        MHD_add_response_header(r, "Content-Disposition", cd);
    }
    if (status == MHD_HTTP_PARTIAL_CONTENT) {
        char cr[80];
        snprintf(cr, sizeof(cr), "bytes %llu-%llu/%llu", (unsigned long long)from,
                 (unsigned long long)to, (unsigned long long)size);
        MHD_add_response_header(r, "Content-Range", cr);
    }
    return send_response(t, c, status, r);
}

/* ---- REST: the same tool handlers for scripts that do not speak MCP ---- */

/* A hidden MCP session, initialized: no Mcp-Session-Id reaches it (session_of). */
static struct http_session *hidden_session(struct http_transport *t, const char *owner)
{
    struct http_session *s = session_new(t, owner);
    if (!s)
        return NULL;
    s->rest = true;
    static const char init[] =
        "{\"jsonrpc\":\"2.0\",\"id\":\"rest-init\",\"method\":\"initialize\",\"params\":"
        "{\"protocolVersion\":\"2025-11-25\",\"capabilities\":{},\"clientInfo\":{\"name\":"
        "\"rest\",\"version\":\"1\"}}}";
    static const char ready[] = "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}";
    mcp_session_receive(s->mcp, init, sizeof(init) - 1);
    mcp_session_receive(s->mcp, ready, sizeof(ready) - 1);
    return s;
}

/* The hidden MCP session of an owner's REST calls (with tokens the principal; without,
 * REST_OWNER). */
static struct http_session *rest_session(struct http_transport *t, const char *principal)
{
    const char *owner = principal ? principal : REST_OWNER;
    for (struct http_session *s = t->sessions; s; s = s->next)
        if (s->rest && strcmp(s->owner, owner) == 0)
            return s;
    return hidden_session(t, owner);
}

static enum MHD_Result handle_rest_call(struct http_transport *t, struct MHD_Connection *c,
                                        struct request *rq, const char *tool, const char *principal)
{
    if (rq->too_big)
        return refuse(t, c, MHD_HTTP_CONTENT_TOO_LARGE, -32600, "request body too large");
    /* A body is declared JSON, as on /mcp: a form a browser may send cross-site is not. (No
     * body at all, for a tool without arguments, needs no type.) */
    if (rq->len &&
        !http_content_type_json(MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Type")))
        return refuse(t, c, MHD_HTTP_UNSUPPORTED_MEDIA_TYPE, -32600,
                      "Content-Type must be application/json");
    /* Parsed as /mcp parses (a NUL in a string reaches the schema, which names it). */
    char why[JSON_ERROR_TEXT_LENGTH + 64];
    json_t *args = rq->len ? mcp_parse(rq->body, rq->len, why, sizeof(why)) : json_object();
    if (!args)
        return refuse(t, c, MHD_HTTP_BAD_REQUEST, -32700, why);
    if (!json_is_object(args)) {
        json_decref(args);
        return refuse(t, c, MHD_HTTP_BAD_REQUEST, -32600,
                      "the body must be a JSON object of the tool's arguments");
    }
    const char *busy = open_request_limit(t, principal);
    if (busy) {
        json_decref(args);
        return refuse(t, c, MHD_HTTP_TOO_MANY_REQUESTS, -32000, busy);
    }
    /* A name from the path may be any bytes; a tool's is UTF-8. */
    json_t *name = json_string(tool);
    if (!name) {
        json_decref(args);
        return refuse(t, c, MHD_HTTP_NOT_FOUND, -32602, "unknown tool: its name is not UTF-8");
    }
    struct http_session *s = rest_session(t, principal);
    if (!s) {
        json_decref(name);
        json_decref(args);
        return refuse(t, c, MHD_HTTP_INTERNAL_SERVER_ERROR, -32603, "no session");
    }
    s->last_seen_ms = now_ms();
    char id[32];
    snprintf(id, sizeof(id), "rest-%llu", (unsigned long long)++s->rest_calls);
    json_t *req = json_pack("{s:s, s:s, s:s, s:{s:o, s:o}}", "jsonrpc", "2.0", "id", id, "method",
                            "tools/call", "params", "name", name, "arguments", args);
    char *text = req ? json_dumps(req, JSON_COMPACT) : NULL;
    json_decref(req);
    if (!text)
        return refuse(t, c, MHD_HTTP_INTERNAL_SERVER_ERROR, -32603, "out of memory");
    size_t len = strlen(text);
    if (len > t->cfg->max_message_bytes) {
        free(text);
        return message_too_large(t, c, len);
    }
    json_t *rid = json_string(id);
    struct sse_stream *st = stream_new(s, rid);
    json_decref(rid);
    st->rest = true;
    mcp_session_receive(s->mcp, text, len);
    free(text);
    if (st->done && st->buf && strncmp(st->buf, "{\"error\"", 8) == 0) {
        char *body = xstrndup(st->buf, st->len);
        stream_free(st);
        enum MHD_Result r = reply(t, c, MHD_HTTP_BAD_REQUEST, "application/json", body, NULL);
        free(body);
        return r;
    }
    /* The result may come later (an execution): the reader waits for it, suspended. */
    struct MHD_Response *r =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 << 10, stream_read, st, stream_gone);
    if (!r)
        return MHD_NO;
    st->conn = c;
    st->queued = true;
    st->last_sent_ms = now_ms();
    MHD_add_response_header(r, "Content-Type", "application/json");
    return send_response(t, c, MHD_HTTP_OK, r);
}

/* The tool definitions as the protocol layer lists them (through a REST session). */
static json_t *list_tools(struct http_transport *t)
{
    /* A session of its own that ends with the listing: the description is served without a
     * token, and a session kept for later held a slot of http.max_sessions for
     * http.session_idle_s. No principal is named "docs:" (a token's holds no ':', a JWT's
     * starts "jwt:"), so no one's sandboxes are touched when it ends. */
    struct http_session *s = hidden_session(t, "docs:");
    if (!s)
        return json_array();
    json_t *rid = json_string("rest-tools");
    struct sse_stream *st = stream_new(s, rid);
    json_decref(rid);
    st->rest = true;
    static const char req[] =
        "{\"jsonrpc\":\"2.0\",\"id\":\"rest-tools\",\"method\":\"tools/list\","
        "\"params\":{}}";
    json_t *tools = NULL;
    /* Pages are followed until the list is whole. */
    mcp_session_receive(s->mcp, req, sizeof(req) - 1);
    json_t *page = st->done ? json_loadb(st->buf, st->len, 0, NULL) : NULL;
    stream_free(st);
    tools = json_incref(json_object_get(page, "tools"));
    const char *cursor = json_string_value(json_object_get(page, "nextCursor"));
    while (cursor && tools) {
        char *more = xasprintf("{\"jsonrpc\":\"2.0\",\"id\":\"rest-tools\",\"method\":"
                               "\"tools/list\",\"params\":{\"cursor\":\"%s\"}}",
                               cursor);
        rid = json_string("rest-tools");
        st = stream_new(s, rid);
        json_decref(rid);
        st->rest = true;
        mcp_session_receive(s->mcp, more, strlen(more));
        free(more);
        json_decref(page);
        page = st->done ? json_loadb(st->buf, st->len, 0, NULL) : NULL;
        stream_free(st);
        json_array_extend(tools, json_object_get(page, "tools"));
        cursor = json_string_value(json_object_get(page, "nextCursor"));
    }
    json_decref(page);
    session_free(s, NULL);
    return tools ? tools : json_array();
}

static json_t *openapi_doc(struct http_transport *t)
{
    json_t *paths = json_object();
    static const struct {
        const char *path, *method, *summary;
    } routes[] = {
        {"/mcp", "post", "MCP Streamable HTTP: one JSON-RPC message (JSON or SSE answer)"},
        {"/mcp", "get", "MCP: the session's server-initiated event stream"},
        {"/mcp", "delete", "MCP: end the session and close its sandboxes"},
        {"/sse", "get", "Deprecated HTTP+SSE transport (2024-11-05)"},
        {"/files/{sandbox_id}/{path}", "get", "Download a workspace file (Range supported)"},
        {"/sandbox/file", "get", "Download a workspace file (sandbox_id, file_path)"},
        {"/healthz", "get", "Liveness"},
        {"/readyz", "get", "Readiness"},
        {"/metrics", "get", "Prometheus metrics"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(routes); i++) {
        json_t *p = json_object_get(paths, routes[i].path);
        if (!p)
            json_object_set_new(paths, routes[i].path, p = json_object());
        json_object_set_new(p, routes[i].method,
                            json_pack("{s:s, s:{s:{s:s}}}", "summary", routes[i].summary,
                                      "responses", "200", "description", "OK"));
    }
    json_t *tools = list_tools(t);
    size_t i;
    json_t *tool;
    json_array_foreach(tools, i, tool)
    {
        const char *name = json_string_value(json_object_get(tool, "name"));
        char *path = xasprintf("/api/v1/tools/%s", name);
        json_t *out = json_object_get(tool, "outputSchema");
        json_t *op =
            json_pack("{s:s, s:s, s:{s:b, s:{s:{s:O}}}, s:{s:{s:s, s:{s:{s:o}}}}}", "summary", name,
                      "description", json_string_value(json_object_get(tool, "description")) ?: "",
                      "requestBody", "required", 1, "content", "application/json", "schema",
                      json_object_get(tool, "inputSchema"), "responses", "200", "description",
                      "The tool result: content, structuredContent, isError", "content",
                      "application/json", "schema",
                      json_pack("{s:s, s:{s:{s:s}, s:O?, s:{s:s}}}", "type", "object", "properties",
                                "content", "type", "array", "structuredContent", out, "isError",
                                "type", "boolean"));
        json_object_set_new(paths, path, json_pack("{s:o}", "post", op));
        free(path);
    }
    json_decref(tools);
    return json_pack("{s:s, s:{s:s, s:s}, s:[{s:s}], s:o}", "openapi", "3.1.0", "info", "title",
                     "mcp-sandbox", "version", SBX_VERSION, "servers", "url", t->base_url, "paths",
                     paths);
}

static void html_escape(char **out, const char *s)
{
    size_t n = strlen(*out);
    for (; *s; s++) {
        const char *rep = *s == '<' ? "&lt;" : *s == '>' ? "&gt;" : *s == '&' ? "&amp;" : NULL;
        char one[2] = {*s, 0};
        const char *add = rep ? rep : one;
        size_t a = strlen(add);
        *out = xrealloc(*out, n + a + 1);
        memcpy(*out + n, add, a + 1);
        n += a;
    }
}

static char *docs_page(json_t *doc)
{
    char *out = xstrdup("<!doctype html><meta charset=utf-8><title>mcp-sandbox API</title>"
                        "<h1>mcp-sandbox</h1><p>Generated from <a href=/api/v1/openapi.json>"
                        "/api/v1/openapi.json</a>.</p><table border=1 cellpadding=4>"
                        "<tr><th>method</th><th>path</th><th>what</th></tr>");
    const char *path;
    json_t *item;
    json_object_foreach(json_object_get(doc, "paths"), path, item)
    {
        const char *method;
        json_t *op;
        json_object_foreach(item, method, op)
        {
            char *row = xasprintf("%s<tr><td>%s</td><td>", out, method);
            free(out);
            out = row;
            html_escape(&out, path);
            row = xasprintf("%s</td><td>", out);
            free(out);
            out = row;
            const char *d = json_string_value(json_object_get(op, "description"));
            html_escape(&out, d ? d : json_string_value(json_object_get(op, "summary")));
            row = xasprintf("%s</td></tr>", out);
            free(out);
            out = row;
        }
    }
    char *end = xasprintf("%s</table>", out);
    free(out);
    return end;
}

/* ---- routing ---- */

static bool in_query(struct MHD_Connection *c, const char *key)
{
    return MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, key) != NULL;
}

/* The methods a path takes, or NULL for no such path: what a preflight (OPTIONS) and a 405's
 * Allow header name. The plain resources take HEAD as GET (RFC 9110 9.1). */
static const char *methods_of(const char *url)
{
    static const char *const plain[] = {"/healthz",
                                        "/readyz",
                                        "/metrics",
                                        "/.well-known/oauth-protected-resource",
                                        "/.well-known/oauth-protected-resource/mcp",
                                        "/api/v1/openapi.json",
                                        "/docs",
                                        "/sandbox/file"};
    for (size_t i = 0; i < ARRAY_SIZE(plain); i++)
        if (strcmp(url, plain[i]) == 0)
            return "GET, HEAD";
    if (strncmp(url, "/files/", 7) == 0)
        return "GET, HEAD";
    if (strcmp(url, "/mcp") == 0)
        return "GET, POST, DELETE";
    if (strcmp(url, "/sse") == 0)
        return "GET";
    if (strcmp(url, "/messages") == 0 || (strncmp(url, "/api/v1/tools/", 14) == 0 && url[14]))
        return "POST";
    return NULL;
}

static enum MHD_Result route(struct http_transport *t, struct MHD_Connection *c, const char *url,
                             const char *method, struct request *rq)
{
    const struct sbx_config *cfg = t->cfg;
    /* While the answers of the sessions it ended go out, nothing new starts: a session or a
     * parked request made now would outlive the daemon (see http_transport_stop). */
    if (t->stopping)
        return refuse_and_close(t, c, MHD_HTTP_SERVICE_UNAVAILABLE, -32000,
                                "the server is shutting down");
    /* DNS rebinding: a page on a foreign name must not reach a loopback server. */
    if (!http_host_allowed(MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Host"),
                           (const char *const *)cfg->allowed_hosts.items, cfg->allowed_hosts.len))
        return refuse(t, c, MHD_HTTP_FORBIDDEN, -32600, "Host not allowed");
    if (!http_origin_allowed(MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin"),
                             (const char *const *)cfg->allowed_origins.items,
                             cfg->allowed_origins.len))
        return refuse(t, c, MHD_HTTP_FORBIDDEN, -32600, "Origin not allowed");
    if (rq->url_had_nul)
        return refuse(t, c, MHD_HTTP_BAD_REQUEST, -32600,
                      "the URL holds an encoded NUL (%00), which no path or value may");
    const char *methods = methods_of(url);
    if (!methods)
        return refuse(t, c, MHD_HTTP_NOT_FOUND, -32600, "no such path (MCP is at /mcp)");
    /* A browser asks before it sends an Authorization or Mcp-Session-Id header anywhere, file
     * downloads included; it asks without them, so this comes before authentication. */
    if (strcmp(method, "OPTIONS") == 0) {
        struct MHD_Response *r = MHD_create_response_from_buffer(0, "", MHD_RESPMEM_PERSISTENT);
        MHD_add_response_header(r, "Allow", methods);
        MHD_add_response_header(r, "Access-Control-Allow-Methods", methods);
        MHD_add_response_header(r, "Access-Control-Allow-Headers",
                                "Content-Type, Authorization, Mcp-Session-Id, "
                                "MCP-Protocol-Version, Last-Event-ID");
        return send_response(t, c, MHD_HTTP_NO_CONTENT, r);
    }
    bool get = strcmp(method, "GET") == 0;
    /* HEAD as GET for the plain resources; the library sends no body. */
    bool get_or_head = get || strcmp(method, "HEAD") == 0;
    if (!get_or_head && strcmp(methods, "GET, HEAD") == 0)
        return refuse_method(t, c, methods, "method not allowed: GET or HEAD only");
    if (get_or_head && strcmp(url, "/healthz") == 0)
        return reply(t, c, MHD_HTTP_OK, "text/plain", "ok\n", NULL);
    if (get_or_head && strcmp(url, "/readyz") == 0) {
        /* Ready: the isolation engine started sandboxes (the warm pool has one up), so the
         * kernel layers are there; before that, or without a service, 503. */
        json_t *detail = NULL;
        bool ok = t->svc && sandbox_service_ready(t->svc, &detail);
        if (!detail)
            detail = json_pack("{s:b}", "ready", false);
        return reply_json(t, c, ok ? MHD_HTTP_OK : MHD_HTTP_SERVICE_UNAVAILABLE, detail,
                          JSON_COMPACT);
    }
    /* RFC 9728 3.1: the resource's path (/mcp) may follow the well-known name. */
    if (get_or_head && (strcmp(url, "/.well-known/oauth-protected-resource") == 0 ||
                        strcmp(url, "/.well-known/oauth-protected-resource/mcp") == 0)) {
        json_t *doc = json_pack("{s:s, s:[s]}", "resource", resource_url(t, c),
                                "bearer_methods_supported", "header");
        /* With JWTs, their issuer is the authorization server unless one is named (RFC 8414
         * 2: an authorization server's identifier is its issuer). */
        const char *as = cfg->authorization_server && *cfg->authorization_server
                             ? cfg->authorization_server
                             : (t->jwks ? cfg->jwt_issuer : NULL);
        if (as)
            json_object_set_new(doc, "authorization_servers", json_pack("[s]", as));
        return reply_json(t, c, MHD_HTTP_OK, doc, JSON_COMPACT);
    }
    if (get_or_head && strcmp(url, "/api/v1/openapi.json") == 0)
        return reply_json(t, c, MHD_HTTP_OK, openapi_doc(t), JSON_INDENT(1));
    if (get_or_head && strcmp(url, "/docs") == 0) {
        json_t *doc = openapi_doc(t);
        char *page = docs_page(doc);
        json_decref(doc);
        enum MHD_Result r = reply(t, c, MHD_HTTP_OK, "text/html; charset=utf-8", page, NULL);
        free(page);
        return r;
    }
    if (get_or_head && strncmp(url, "/files/", 7) == 0) {
        char id[32];
        const char *slash = strchr(url + 7, '/');
        if (!slash || (size_t)(slash - url - 7) >= sizeof(id))
            return refuse(t, c, MHD_HTTP_NOT_FOUND, -32002, "no such file");
        memcpy(id, url + 7, (size_t)(slash - url - 7));
        id[slash - url - 7] = '\0';
        return handle_file(t, c, id, slash + 1);
    }
    if (get_or_head && strcmp(url, "/sandbox/file") == 0) {
        const char *fp = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "file_path");
        return handle_file(t, c,
                           MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "sandbox_id"),
                           fp ? fp : "");
    }
    bool legacy_sse = strcmp(url, "/sse") == 0, legacy_post = strcmp(url, "/messages") == 0;
    bool rest_tool = strncmp(url, "/api/v1/tools/", 14) == 0;
    const char *principal = NULL, *why = NULL;
    char jwt_principal[HTTP_JWT_PRINCIPAL_MAX];
    if (in_query(c, "access_token") || in_query(c, "token"))
        return refuse(t, c, MHD_HTTP_BAD_REQUEST, -32600,
                      "tokens are never accepted in the query string: send "
                      "Authorization: Bearer");
    if (t->auth_on) {
        principal = authenticate(t, c, jwt_principal, sizeof(jwt_principal), &why);
        if (!principal)
            return refuse_why(t, c, MHD_HTTP_UNAUTHORIZED, -32001,
                              why ? why : "a bearer token is required", why);
    }
    /* The counters say how the server is used: with auth on, only to a client with a token. */
    if (get_or_head && strcmp(url, "/metrics") == 0) {
        size_t len;
        char *text = metrics_render(&len);
        enum MHD_Result r = reply(t, c, MHD_HTTP_OK, "text/plain; version=0.0.4", text, NULL);
        free(text);
        return r;
    }
    if (rest_tool)
        return strcmp(method, "POST") == 0 ? handle_rest_call(t, c, rq, url + 14, principal)
                                           : refuse_method(t, c, "POST", "POST a tool's arguments");
    if (legacy_sse)
        return get ? handle_legacy_sse(t, c, principal)
                   : refuse_method(t, c, "GET", "GET /sse only");
    if (legacy_post)
        return strcmp(method, "POST") == 0 ? handle_legacy_post(t, c, rq, principal)
                                           : refuse_method(t, c, "POST", "POST /messages only");
    if (strcmp(method, "POST") == 0)
        return handle_post(t, c, rq, principal);
    if (get)
        return handle_get(t, c, principal);
    if (strcmp(method, "DELETE") == 0)
        return handle_delete(t, c, principal);
    return refuse_method(t, c, "GET, POST, DELETE", "method not allowed");
}

/* A header name as libmicrohttpd 0.9.75 keeps it that another reader may take otherwise: with
 * white space before its colon (kept in the name; RFC 9112 5.1 says refuse), or a framing
 * header's name run together with a line folded after its empty value ("Content-Length:" CRLF
 * SP "5" becomes a name "Content-Length5"), which a proxy that unfolds reads as a length (RFC
 * 9112 5.2). libmicrohttpd then frames no body, and serves the body as the next request. */
static bool name_malformed(const char *key)
{
    static const char *const framing[] = {"Content-Length", "Transfer-Encoding"};
    if (strpbrk(key, " \t"))
        return true;
    for (size_t i = 0; i < ARRAY_SIZE(framing); i++) {
        size_t n = strlen(framing[i]);
        if (strncasecmp(key, framing[i], n) == 0 && key[n])
            return true;
    }
    return false;
}

static enum MHD_Result count_framing(void *cls, enum MHD_ValueKind kind, const char *key,
                                     const char *value)
{
    (void)kind;
    (void)value;
    unsigned *n = cls;
    n[0] += strcasecmp(key, "Content-Length") == 0;
    n[1] += strcasecmp(key, "Transfer-Encoding") == 0;
    n[2] += strcasecmp(key, "Host") == 0;
    n[3] += strcasecmp(key, "Authorization") == 0;
    n[4] += strcasecmp(key, "Mcp-Session-Id") == 0;
    n[5] += name_malformed(key);
    return MHD_YES;
}

/* Framing that another reader of the stream (a proxy in front) could take differently, or NULL:
 * two lengths, a length beside a transfer coding, two Hosts (RFC 9112 6.3, 3.2), a malformed
 * name (above). libmicrohttpd takes the first length and reads the rest of the body as the next
 * request. Two Authorization or Mcp-Session-Id headers, likewise: we would take the first, a
 * proxy might log or route by the last. */
static const char *ambiguous_framing(struct MHD_Connection *c)
{
    unsigned n[6] = {0}; /* lengths, codings, hosts, credentials, session ids, malformed */
    MHD_get_connection_values(c, MHD_HEADER_KIND, count_framing, n);
    if (n[5])
        return "malformed request: a header name with white space before its colon, or run "
               "together with a folded line (RFC 9112 5.1, 5.2)";
    if (n[0] > 1 || n[1] > 1 || (n[0] && n[1]) || n[2] > 1 || n[3] > 1 || n[4] > 1)
        return "ambiguous request: two Content-Length, Transfer-Encoding, Host, Authorization or "
               "Mcp-Session-Id headers";
    return NULL;
}

/* libmicrohttpd frames a body by its Transfer-Encoding only when that is "chunked" alone; any
 * other value it reads until the client closes, answering nothing, which no request may be
 * framed by (RFC 9112 6.3): a proxy in front that took it as chunked would have the next
 * request it sends swallowed. 501 when chunked comes last after a coding we do not undo (RFC
 * 9112 6.1), else 400; 0 when the body is framed. */
static unsigned transfer_coding_refusal(struct MHD_Connection *c)
{
    const char *te =
        MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING);
    if (!te || strcasecmp(te, "chunked") == 0)
        return 0;
    const char *comma = strrchr(te, ',');
    const char *last = comma ? comma + 1 : te;
    last += strspn(last, " \t");
    return comma && strcasecmp(last, "chunked") == 0 ? MHD_HTTP_NOT_IMPLEMENTED
                                                     : MHD_HTTP_BAD_REQUEST;
}

/* The deadline record of a connection (see http_conns.h). */
static struct http_conn *conn_of(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe)
{
    struct http_transport *t = cls;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        *socket_context = ci ? http_conn_add(&t->conns, ci->connect_fd, now_ms()) : NULL;
    } else if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
        http_conn_remove(&t->conns, *socket_context);
        *socket_context = NULL;
    }
}

/* The library's own decoding of the URL's path and query, but a %00 is noted: the library hands
 * on a C string, in which a NUL would silently cut the path or value there. */
static size_t on_unescape(void *cls, struct MHD_Connection *c, char *s)
{
    (void)cls;
    size_t n = MHD_http_unescape(s);
    struct http_conn *hc = conn_of(c);
    if (hc && memchr(s, '\0', n))
        hc->url_had_nul = true;
    return n;
}

/* libmicrohttpd's own messages (a client gone mid-response, mostly) become log lines like
 * every other, at debug level, instead of raw text on stderr. */
static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    char msg[512];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    size_t n = strlen(msg);
    while (n && (msg[n - 1] == '\n' || msg[n - 1] == ' '))
        msg[--n] = '\0';
    log_emit(LOG_LVL_DEBUG, "libmicrohttpd", "message", msg, NULL);
}

static void drop_body(struct http_transport *t, struct request *rq)
{
    t->body_bytes -= rq->cap;
    free(rq->body);
    rq->body = NULL;
    rq->len = rq->cap = 0;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_size, void **con_cls)
{
    (void)version;
    struct http_transport *t = cls;
    struct request *rq = *con_cls;
    if (!rq) {
        struct http_conn *hc = conn_of(c);
        http_conn_headers_done(&t->conns, hc, now_ms());
        rq = *con_cls = xcalloc(1, sizeof(struct request));
        const char *ambiguous = ambiguous_framing(c);
        if (ambiguous)
            return refuse_and_close(t, c, MHD_HTTP_BAD_REQUEST, -32600, ambiguous);
        unsigned coding = transfer_coding_refusal(c);
        if (coding)
            return refuse_and_close(t, c, coding, -32600,
                                    "Transfer-Encoding must be chunked alone (or absent, with a "
                                    "Content-Length)");
        if (hc && hc->url_had_nul) {
            hc->url_had_nul = false;
            rq->url_had_nul = true;
        }
        /* A declared length over the cap is known now: nothing of that body is kept. */
        const char *declared =
            MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (declared && strtoull(declared, NULL, 10) > t->cfg->http_max_body_bytes)
            rq->too_big = true;
        /* A client that waits for 100 Continue has sent none of it yet: refused now, it never
         * sends it (answered at the end, it was invited to send it all to be thrown away). */
        const char *expect = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Expect");
        if (rq->too_big && expect && strcasecmp(expect, "100-continue") == 0)
            return refuse_and_close(t, c, MHD_HTTP_CONTENT_TOO_LARGE, -32600,
                                    "request body too large (http.max_body_bytes)");
        return MHD_YES;
    }
    if (rq->parked)
        return resume_post(t, c, rq);
    if (*upload_size) {
        mcp_message_ends_add(&rq->ends, upload_data, *upload_size);
        /* Count everything, keep nothing past the cap: the answer is 413. */
        size_t max = t->cfg->http_max_body_bytes;
        if (!rq->too_big && !rq->over_budget && rq->len + *upload_size <= max) {
            if (rq->len + *upload_size + 1 > rq->cap) {
                /* Doubling, so a body that comes in many small pieces is copied a few times,
                 * not once per piece. */
                size_t cap = rq->cap ? rq->cap : 16384;
                while (cap < rq->len + *upload_size + 1)
                    cap *= 2;
                cap = cap < max + 1 ? cap : max + 1;
                /* The bodies of all connections together stay under the budget, so that many
                 * large ones at once cannot take the server's memory; one alone always fits. */
                size_t others = t->body_bytes - rq->cap;
                if (others && others + cap > t->cfg->http_max_body_bytes_total) {
                    rq->over_budget = true;
                    drop_body(t, rq);
                    *upload_size = 0;
                    return MHD_YES;
                }
                t->body_bytes += cap - rq->cap;
                rq->cap = cap;
                rq->body = xrealloc(rq->body, rq->cap);
            }
            memcpy(rq->body + rq->len, upload_data, *upload_size);
            rq->len += *upload_size;
        } else if (!rq->over_budget) {
            rq->too_big = true;
            drop_body(t, rq);
        }
        *upload_size = 0;
        return MHD_YES;
    }
    http_conn_body_done(conn_of(c));
    if (rq->over_budget)
        return refuse(t, c, MHD_HTTP_SERVICE_UNAVAILABLE, -32000,
                      "busy: the request bodies the server holds at once reached "
                      "http.max_body_bytes_total; try again");
    enum MHD_Result r = route(t, c, url, method, rq);
    /* Read by now (each handler parses or copies it): a call that runs on keeps none. */
    drop_body(t, rq);
    return r;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    struct http_transport *t = cls;
    (void)toe;
    http_conn_request_done(&t->conns, conn_of(c), now_ms());
    struct request *rq = *con_cls;
    if (rq) {
        if (rq->parked) { /* MHD let go of a parked POST (the daemon stops) */
            struct sse_stream *st = rq->parked;
            st->waiting = false;
            st->conn = NULL;
            if (st->s)
                stream_free(st);
            else
                stream_destroy(st);
        }
        drop_body(t, rq);
        free(rq);
        *con_cls = NULL;
    }
}

/* ---- idle sessions ---- */

static void on_sweep(struct ev_loop *loop, void *data)
{
    struct http_transport *t = data;
    uint64_t now = now_ms();
    size_t dropped = http_conns_expire(&t->conns, now);
    if (dropped) {
        char n[24];
        snprintf(n, sizeof(n), "%zu", dropped);
        log_emit(LOG_LVL_INFO, "http connections dropped: a request came in too slowly",
                 "connections", n, NULL);
    }
    struct http_session *s = t->sessions;
    while (s) {
        struct http_session *next = s->next;
        bool streaming = false;
        for (struct sse_stream *st = s->streams; st; st = st->next) {
            streaming |= st->conn != NULL;
            /* A stream with nothing to say gets a comment (http.keepalive_s): the write is how
             * a client that left is found, a parked connection being polled by nobody. A REST
             * body is one JSON value, which may start with white space. */
            if (st->conn && st->suspended && !st->waiting && !st->json_only &&
                now - st->last_sent_ms >= (uint64_t)t->cfg->http_keepalive_s * 1000) {
                stream_append(st, st->rest ? " " : ":\n\n", st->rest ? 1 : 3);
                stream_wake(st);
            }
        }
        /* REST sessions too: one is made per principal on demand, and one kept for ever
         * would hold a slot of http.max_sessions (and its memory) after its last call. */
        if (!streaming && now - s->last_seen_ms > (uint64_t)t->cfg->http_session_idle_s * 1000) {
            log_emit(LOG_LVL_INFO, "http session expired", "limit", "http.session_idle_s", NULL);
            session_free(s, NULL); /* no client reads it */
        }
        s = next;
    }
    /* After a crowd of sessions has gone, give the freed heap back: RSS follows the load. */
    if (t->n_sessions < t->peak_sessions / 2) {
        malloc_trim(0);
        t->peak_sessions = t->n_sessions;
    }
    t->sweeper = ev_timer_add(loop, SWEEP_MS, on_sweep, t);
}

/* ---- start and stop ---- */

static int parse_listen(const char *listen, struct sockaddr_storage *ss, socklen_t *len, char *host,
                        size_t host_size, struct sbx_err *err)
{
    const char *colon = strrchr(listen, ':');
    if (!colon)
        return sbx_fail(err, EINVAL, "--http %s: want ADDRESS:PORT, e.g. 127.0.0.1:8080", listen);
    size_t hl = (size_t)(colon - listen);
    if (hl >= host_size)
        return sbx_fail(err, EINVAL, "--http %s: address too long", listen);
    memcpy(host, listen, hl);
    host[hl] = '\0';
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (*end || port < 0 || port > 65535 || end == colon + 1)
        return sbx_fail(err, EINVAL, "--http %s: bad port", listen);
    memset(ss, 0, sizeof(*ss));
    char bare[64];
    snprintf(bare, sizeof(bare), "%s", host);
    if (bare[0] == '[' && hl >= 2 && bare[hl - 1] == ']') {
        memmove(bare, bare + 1, hl - 2);
        bare[hl - 2] = '\0';
    }
    if (strcmp(bare, "localhost") == 0)
        snprintf(bare, sizeof(bare), "127.0.0.1");
    struct sockaddr_in *v4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)ss;
    if (inet_pton(AF_INET, bare, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons((uint16_t)port);
        *len = sizeof(*v4);
    } else if (inet_pton(AF_INET6, bare, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons((uint16_t)port);
        *len = sizeof(*v6);
    } else {
        return sbx_fail(err, EINVAL, "--http %s: not an IP address", listen);
    }
    return 0;
}

int http_transport_start(struct ev_loop *loop, struct mcp_server *srv, const struct sbx_config *cfg,
                         const char *listen, struct http_transport **out, struct sbx_err *err)
{
    struct http_transport *t = xcalloc(1, sizeof(*t));
    t->loop = loop;
    t->srv = srv;
    t->cfg = cfg;
    t->conns.headers_ms = (uint64_t)cfg->http_request_timeout_s * 1000;
    t->conns.body_ms = 4 * t->conns.headers_ms;
    t->kick = (struct ev_task){.cb = on_kick, .data = t};
    strmap_init(&t->sessions_by_id);
    struct sockaddr_storage ss;
    socklen_t sl = 0;
    char host[64];
    if (parse_listen(listen, &ss, &sl, host, sizeof(host), err) < 0 ||
        http_auth_setup(cfg, &t->auth, &t->jwks, err) < 0)
        goto fail;
    t->auth_on = t->auth.len > 0 || t->jwks;
    if (!http_listen_is_loopback(host) && !t->auth_on) {
        sbx_fail(err, EPERM,
                 "--http %s reaches the network but no tokens are configured: anyone could run "
                 "code here. Set http.auth_token_hashes, http.auth_tokens_file or "
                 "http.jwt_jwks_file or http.jwt_jwks_url, or listen on 127.0.0.1",
                 listen);
        goto fail;
    }
    unsigned flags = MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
    if (ss.ss_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    t->d = MHD_start_daemon(
        flags, 0, NULL, NULL, on_request, t, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)cfg->http_max_connections,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)CONN_TIMEOUT_S, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
        (size_t)HEADER_MEMORY, MHD_OPTION_NOTIFY_COMPLETED, on_completed, t,
        MHD_OPTION_NOTIFY_CONNECTION, on_connection, t, MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, t,
        MHD_OPTION_UNESCAPE_CALLBACK, on_unescape, t, MHD_OPTION_END);
    if (!t->d) {
        sbx_fail_errno(err, errno ? errno : EADDRINUSE, "--http %s: cannot listen", listen);
        goto fail;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(t->d, MHD_DAEMON_INFO_EPOLL_FD);
    const union MHD_DaemonInfo *pinfo = MHD_get_daemon_info(t->d, MHD_DAEMON_INFO_BIND_PORT);
    t->port = pinfo ? pinfo->port : 0;
    if (!info || !(t->w = ev_watch(loop, info->epoll_fd, EPOLLIN, on_epoll, t, err)))
        goto fail;
    t->sweeper = ev_timer_add(loop, SWEEP_MS, on_sweep, t);
    if (getrandom(t->link_key, sizeof(t->link_key), 0) != (ssize_t)sizeof(t->link_key)) {
        sbx_fail_errno(err, errno, "drawing the link-signing key");
        goto fail;
    }
    const char *why = NULL;
    t->base_url = http_public_base(cfg->public_url, host, t->port,
                                   (const char *const *)cfg->allowed_hosts.items,
                                   cfg->allowed_hosts.len, &why);
    if (!t->base_url) {
        sbx_fail(err, EINVAL, "%s", why);
        goto fail;
    }
    run_mhd(t);
    char port[8];
    snprintf(port, sizeof(port), "%u", t->port);
    const char *auth =
        t->jwks ? (t->auth.len ? "bearer+jwt" : "jwt") : (t->auth_on ? "bearer" : "none");
    log_emit(LOG_LVL_INFO, "http listening", "address", host, "port", port, "auth", auth, NULL);
    *out = t;
    return 0;
fail:
    http_transport_stop(t);
    return -1;
}

uint16_t http_transport_port(const struct http_transport *t)
{
    return t->port;
}

const char *http_transport_url(const struct http_transport *t)
{
    return t->base_url;
}

void http_transport_stop(struct http_transport *t)
{
    if (!t)
        return;
    t->stopping = true; /* route refuses every request from here on */
    if (t->svc)
        t->svc->link_fn = NULL;
    if (t->d) { /* and no new connection comes in (external polling: closed at once) */
        MHD_socket listen_fd = MHD_quiesce_daemon(t->d);
        if (listen_fd != MHD_INVALID_SOCKET)
            close(listen_fd);
    }
    while (t->sessions)
        session_free(t->sessions, "the server is shutting down: this request was cancelled");
    if (t->d) {
        /* The answers given above, and the ends of the streams woken, go out before the
         * daemon stops: a second at most. Every suspended connection was a stream of a
         * session freed above, now woken, and none can be made meanwhile (route), so the
         * library is not stopped with one still suspended (which aborts). */
        uint64_t until = now_ms() + 1000;
        do
            MHD_run_wait(t->d, 20);
        while (http_conns_answering(&t->conns) && now_ms() < until);
        MHD_stop_daemon(t->d);
    }
    while (t->conns.head) /* each closed connection removed its own; none should be left */
        http_conn_remove(&t->conns, t->conns.head);
    ev_unwatch(t->w);
    ev_timer_cancel(t->timer);
    ev_task_cancel(t->loop, &t->kick);
    ev_timer_cancel(t->sweeper);
    http_auth_free(&t->auth);
    http_jwks_free(t->jwks);
    strmap_free(&t->sessions_by_id);
    free(t->base_url);
    free(t);
}
