/* One connection goes HEAD (reading the request) -> RESOLVING -> CONNECTING -> RELAY, or to
 * REFUSING (an error reply is written, then the rest of the client's bytes are drained so
 * the reply is not lost to a reset). Every refusal says which rule said no, to the sandbox
 * in a 403 body and to the operator in the log. */
#include "egress_proxy.h"

#include "log.h"
#include "metrics.h"
#include "resolver.h"
#include "service/loop.h"
#include "util.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#define RELAY_BUF       (32 * 1024)
#define ACCEPTS_PER_RUN 16
#define REFUSE_LINGER   2000 /* ms to drain a refused client before closing */

enum conn_state { ST_HEAD, ST_RESOLVING, ST_CONNECTING, ST_RELAY, ST_REFUSING };

struct relay_buf {
    char *data;
    size_t cap, len, off;
};

struct conn {
    struct egress_proxy *px;
    enum conn_state st;
    int cfd, ufd;
    struct ev_watch *cw, *uw;
    char *head; /* the request head while it arrives */
    size_t head_len;
    struct egress_request req;
    const struct egress_rule *rule;
    char target[EGRESS_HOST_MAX + 16];
    struct resolver_job *job;
    struct addrinfo *addrs, *next_addr;
    uint64_t dial_deadline_ms; /* the whole dial, every address, ends by then (0: not begun) */
    uint32_t attempt_ms;       /* the limit of the address being dialled */
    char refusal[400];         /* why the last address was skipped or failed */
    bool policy_refusal;
    struct relay_buf up, down;       /* client -> upstream, upstream -> client */
    bool client_eof, upstream_eof;   /* read side ended */
    uint64_t body_left;              /* forwarded requests: body bytes still to pass upstream */
    bool upstream_shut, client_shut; /* write side shut after the other side's EOF */
    bool upstream_hup;               /* the upstream hung up: its fd is watched only to drain it */
    uint64_t last_active_ms;
    struct ev_timer *idle;
    struct conn *next;
};

struct egress_proxy {
    struct ev_loop *loop;
    struct resolver *resolver;
    uint64_t lookup_owner; /* this proxy's lookups, to the resolver (never reused) */
    const struct egress_policy *policy;
    struct egress_limits limits;
    char sandbox_id[32];
    int listen_fd;
    struct ev_watch *lw;
    bool accepting;
    struct ev_timer *resume; /* out of fds: accepting again shortly */
    struct conn *conns;
    uint32_t refusing; /* of stats.open, those only lingering after their refusal */
    struct egress_stats stats;
    char last_refusal[1024];  /* what the last refused client was told */
    struct log_rate log_rate; /* every line here is one sandbox code can repeat at will */
};

static void count(const char *decision)
{
    char labels[48];
    snprintf(labels, sizeof(labels), "decision=\"%s\"", decision);
    metrics_counter_add("mcp_proxy_connections_total",
                        "Egress proxy connections of package sandboxes, by decision", labels, 1);
}

static void set_accepting(struct egress_proxy *px, bool on);

static void conn_free(struct conn *c)
{
    struct egress_proxy *px = c->px;
    for (struct conn **pp = &px->conns; *pp; pp = &(*pp)->next)
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    px->stats.open--;
    if (c->st == ST_REFUSING)
        px->refusing--;
    if (!px->accepting && !px->resume && px->stats.open < 2 * px->limits.max_connections)
        set_accepting(px, true);
    if (c->job)
        resolver_cancel(c->job);
    ev_timer_cancel(c->idle);
    ev_unwatch(c->cw);
    ev_unwatch(c->uw);
    cleanup_closep(&c->cfd);
    cleanup_closep(&c->ufd);
    if (c->addrs)
        freeaddrinfo(c->addrs);
    free(c->req.upstream);
    free(c->head);
    free(c->up.data);
    free(c->down.data);
    free(c);
}

static void touch(struct conn *c)
{
    c->last_active_ms = now_ms();
}

/* ---- refusals ---- */

/* A refused client's last bytes are read and dropped (a bounded bite per turn, like every
 * read on the loop) until it closes or the linger ends, so that closing does not reset the
 * connection before the client has read the refusal. */
static void drain_refused(struct conn *c, uint32_t events)
{
    char sink[4096];
    for (int bites = 0; bites < 4; bites++) {
        ssize_t n = read(c->cfd, sink, sizeof(sink));
        if (n > 0)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EINTR) && !(events & (EPOLLHUP | EPOLLERR)))
            return;   /* nothing more now: wait for the client or the linger */
        conn_free(c); /* closed, failed or hung up */
        return;
    }
    /* a full bite: the rest waits for the next turn */
}

static uint32_t timer_ms(const struct conn *c);
static void on_idle(struct ev_loop *loop, void *data);

/* The connection's one timer, for its current state (an idle, connect or linger limit). */
static void rearm(struct conn *c)
{
    ev_timer_cancel(c->idle);
    c->idle = ev_timer_add(c->px->loop, timer_ms(c), on_idle, c);
}

/* Answers the client with status and a plain-text reason, then closes gracefully. */
static void refuse(struct conn *c, int status, const char *reason_phrase, const char *why)
{
    struct egress_proxy *px = c->px;
    char body[1024];
    const char *what = c->req.method[0] ? c->req.method : "request";
    /* A head refused before its target was read names no target. */
    const char *sep = c->target[0] ? " " : "";
    if (status == 403) {
        char *allowed = egress_policy_describe(px->policy);
        snprintf(body, sizeof(body),
                 "mcp-sandbox egress proxy: %s%s%s refused by the sandbox's network policy "
                 "(network: packages): %s. Allowed: %s.\n",
                 what, sep, c->target, why, allowed);
        free(allowed);
    } else {
        snprintf(body, sizeof(body), "mcp-sandbox egress proxy: %s%s%s: %s\n", what, sep, c->target,
                 why);
    }
    snprintf(px->last_refusal, sizeof(px->last_refusal), "%.*s", (int)strcspn(body, "\n"), body);
    char msg[1536];
    int n = snprintf(msg, sizeof(msg),
                     "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\n"
                     "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
                     status, reason_phrase, strlen(body), body);
    /* Small enough for an empty socket buffer; a client that filled its own gets less. */
    ssize_t w = write(c->cfd, msg, (size_t)n < sizeof(msg) ? (size_t)n : sizeof(msg) - 1);
    (void)w;
    shutdown(c->cfd, SHUT_WR);
    px->stats.denied++;
    count("denied");
    char code[8];
    snprintf(code, sizeof(code), "%d", status);
    if (log_rate_take(&px->log_rate, px->sandbox_id))
        log_emit(LOG_LVL_NOTICE, "egress denied", "sandbox", px->sandbox_id, "method", what,
                 "target", c->target, "status", code, "reason", why, NULL);

    if (c->job) {
        resolver_cancel(c->job);
        c->job = NULL;
    }
    ev_unwatch(c->uw);
    c->uw = NULL;
    cleanup_closep(&c->ufd);
    /* The same watch goes on (on_client dispatches on the state): no second registration
     * that could fail halfway. */
    if (c->st != ST_REFUSING)
        px->refusing++;
    c->st = ST_REFUSING;
    ev_watch_modify(c->cw, EPOLLIN);
    touch(c);
    rearm(c);
}

/* ---- relaying ---- */

static void on_upstream(struct ev_loop *loop, int fd, uint32_t events, void *data);

/* A forwarded request whose client has sent all of it: that client's close means it left (a
 * half-close cannot be told from a close, and HTTP clients do not half-close), and its slot
 * is freed then, not at the reply. */
static bool forward_sent(const struct conn *c)
{
    return c->client_eof && c->req.kind == EGRESS_FORWARD;
}

static void update_interest(struct conn *c)
{
    uint32_t ce = 0, ue = 0;
    if (!c->client_eof && c->up.len == 0)
        ce |= EPOLLIN;
    if (forward_sent(c))
        ce |= EPOLLRDHUP;
    if (c->down.len > c->down.off)
        ce |= EPOLLOUT;
    if (!c->upstream_eof && c->down.len == 0)
        ue |= EPOLLIN;
    if (c->up.len > c->up.off)
        ue |= EPOLLOUT;
    ev_watch_modify(c->cw, ce);
    /* A hung-up upstream reports EPOLLHUP whatever is asked: watch it only while its
     * remaining bytes are wanted, or the loop would spin on it while the client drains. */
    if (c->upstream_hup && !(ue & EPOLLIN)) {
        ev_unwatch(c->uw);
        c->uw = NULL;
        return;
    }
    if (!c->uw) {
        struct sbx_err err = {0};
        c->uw = ev_watch(c->px->loop, c->ufd, ue, on_upstream, c, &err);
        return; /* on failure the idle timer ends the connection */
    }
    ev_watch_modify(c->uw, ue);
}

static bool charge(struct conn *c, size_t n)
{
    struct egress_proxy *px = c->px;
    px->stats.bytes += n;
    return px->stats.bytes <= px->limits.max_bytes;
}

/* Moves what fits (at most max bytes, if max) from fd into b (when b is empty). Returns 1 on
 * data, 0 on EOF, -1 on error or nothing to read now (*again). */
static int fill(int fd, struct relay_buf *b, size_t max, bool *again)
{
    *again = false;
    if (!b->data) {
        b->cap = RELAY_BUF;
        b->data = xmalloc(b->cap);
    }
    ssize_t n = read(fd, b->data, max && max < b->cap ? max : b->cap);
    if (n > 0) {
        b->len = (size_t)n;
        b->off = 0;
        return 1;
    }
    if (n == 0)
        return 0;
    *again = errno == EAGAIN || errno == EINTR;
    return -1;
}

static int drain(int fd, struct relay_buf *b, bool *again)
{
    *again = false;
    ssize_t n = send(fd, b->data + b->off, b->len - b->off, MSG_NOSIGNAL);
    if (n < 0) {
        *again = errno == EAGAIN || errno == EINTR;
        return -1;
    }
    b->off += (size_t)n;
    if (b->off == b->len)
        b->len = b->off = 0;
    return 0;
}

static void finish_if_done(struct conn *c)
{
    bool up_empty = c->up.len == c->up.off, down_empty = c->down.len == c->down.off;
    /* A forwarded request is not half-closed: Connection: close ends it, and some servers
     * drop a request whose client shut its side early. */
    if (c->client_eof && up_empty && !c->upstream_shut && c->req.kind == EGRESS_CONNECT) {
        shutdown(c->ufd, SHUT_WR);
        c->upstream_shut = true;
    }
    if (c->upstream_eof && down_empty && !c->client_shut) {
        shutdown(c->cfd, SHUT_WR);
        c->client_shut = true;
    }
    /* A forwarded request ends with its response (we asked the origin for Connection: close);
     * a tunnel ends when both sides have. */
    bool done = c->req.kind == EGRESS_FORWARD
                    ? c->upstream_eof && down_empty
                    : c->client_eof && c->upstream_eof && up_empty && down_empty;
    if (done) {
        conn_free(c);
        return;
    }
    update_interest(c);
}

static void relay(struct conn *c, bool from_client, uint32_t events)
{
    /* fd is read into `in` (bound for the other side) and written from `out` (bound for it). */
    int fd = from_client ? c->cfd : c->ufd;
    struct relay_buf *in = from_client ? &c->up : &c->down;
    struct relay_buf *out = from_client ? &c->down : &c->up;
    bool *eof = from_client ? &c->client_eof : &c->upstream_eof;
    bool again;
    /* A reset, or a client gone both ways (or gone at all, for a forwarded request): nothing
     * more can be delivered. */
    if ((events & EPOLLERR) || (from_client && (events & EPOLLHUP)) ||
        (from_client && forward_sent(c) && (events & EPOLLRDHUP))) {
        conn_free(c);
        return;
    }
    if (!from_client && (events & EPOLLHUP))
        c->upstream_hup = true;
    if ((events & EPOLLOUT) && out->len > out->off) {
        if (drain(fd, out, &again) < 0 && !again) {
            conn_free(c);
            return;
        }
        touch(c);
    }
    if ((events & (EPOLLIN | EPOLLHUP | EPOLLERR)) && !*eof && in->len == 0) {
        size_t want = from_client && c->req.kind == EGRESS_FORWARD ? (size_t)c->body_left : 0;
        int r = fill(fd, in, want, &again);
        if (r > 0) {
            touch(c);
            if (want) {
                c->body_left -= in->len;
                c->client_eof = c->body_left == 0;
            }
            if (!charge(c, in->len)) {
                if (log_rate_take(&c->px->log_rate, c->px->sandbox_id))
                    log_emit(LOG_LVL_NOTICE, "egress byte budget exhausted", "sandbox",
                             c->px->sandbox_id, "target", c->target, NULL);
                conn_free(c);
                return;
            }
        } else if (r == 0) {
            *eof = true;
        } else if (!again) {
            conn_free(c);
            return;
        }
    }
    finish_if_done(c);
}

static void start_relay(struct conn *c)
{
    struct egress_proxy *px = c->px;
    int one = 1;
    setsockopt(c->ufd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    c->down.cap = RELAY_BUF;
    c->down.data = xmalloc(c->down.cap);
    /* Bytes the client sent after its head (a request body, a TLS hello) follow it; a
     * forwarded request takes its body and nothing more. */
    size_t extra = c->head_len - c->req.head_len;
    if (c->req.kind == EGRESS_FORWARD) {
        if (extra > c->req.body_len)
            extra = (size_t)c->req.body_len;
        c->body_left = c->req.body_len - extra;
        c->client_eof = c->body_left == 0; /* nothing more is read from the client */
    }
    const char *first = c->req.kind == EGRESS_FORWARD ? c->req.upstream : NULL;
    size_t first_len = first ? c->req.upstream_len : 0;
    c->up.cap = first_len + extra > RELAY_BUF ? first_len + extra : RELAY_BUF;
    c->up.data = xmalloc(c->up.cap);
    if (first)
        memcpy(c->up.data, first, first_len);
    memcpy(c->up.data + first_len, c->head + c->req.head_len, extra);
    c->up.len = first_len + extra;
    free(c->head);
    c->head = NULL;
    if (!charge(c, c->up.len)) {
        refuse(c, 403, "Forbidden", "the sandbox's egress byte budget is used up");
        return;
    }
    if (c->req.kind == EGRESS_CONNECT) {
        static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
        memcpy(c->down.data, ok, sizeof(ok) - 1);
        c->down.len = sizeof(ok) - 1;
    }
    c->st = ST_RELAY;
    px->stats.allowed++;
    count("allowed");
    if (log_rate_take(&px->log_rate, px->sandbox_id))
        log_emit(LOG_LVL_INFO, "egress allowed", "sandbox", px->sandbox_id, "method", c->req.method,
                 "target", c->target, NULL);
    touch(c);
    update_interest(c);
}

/* ---- connecting ---- */

static void try_connect(struct conn *c);

static void on_upstream(struct ev_loop *loop, int fd, uint32_t events, void *data)
{
    (void)loop;
    (void)fd;
    struct conn *c = data;
    if (c->st == ST_CONNECTING) {
        int soerr = 0;
        socklen_t sl = sizeof(soerr);
        if (getsockopt(c->ufd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0)
            soerr = errno;
        if (soerr == 0 && !(events & EPOLLERR)) {
            start_relay(c);
            return;
        }
        snprintf(c->refusal, sizeof(c->refusal), "connecting to %s: %s", c->target,
                 strerror(soerr ? soerr : ECONNREFUSED));
        c->policy_refusal = false; /* the network's word, whatever an earlier address got */
        ev_unwatch(c->uw);
        c->uw = NULL;
        cleanup_closep(&c->ufd);
        try_connect(c);
        return;
    }
    relay(c, false, events);
}

/* Whether the policy lets the proxy dial address a for this connection's rule. */
static bool dialable(const struct conn *c, const struct addrinfo *a)
{
    return c->rule->ip_literal || c->rule->private_ok || !egress_address_class(a->ai_addr);
}

static size_t count_dialable(const struct conn *c, const struct addrinfo *a)
{
    size_t n = 0;
    for (; a; a = a->ai_next)
        n += dialable(c, a);
    return n;
}

/* Dials the next allowed address, or refuses when none is left. */
static void try_connect(struct conn *c)
{
    struct egress_proxy *px = c->px;
    /* Whether the last word is the policy's (an address class) or the network's. */
    bool policy_refusal = c->policy_refusal;
    for (; c->next_addr; c->next_addr = c->next_addr->ai_next) {
        struct addrinfo *a = c->next_addr;
        if (!dialable(c, a)) {
            const char *cls = egress_address_class(a->ai_addr);
            char addr[INET6_ADDRSTRLEN] = "?";
            const void *raw = a->ai_family == AF_INET
                                  ? (const void *)&((struct sockaddr_in *)a->ai_addr)->sin_addr
                                  : (const void *)&((struct sockaddr_in6 *)a->ai_addr)->sin6_addr;
            inet_ntop(a->ai_family, raw, addr, sizeof(addr));
            snprintf(c->refusal, sizeof(c->refusal),
                     "%s resolves to a %s address (%s), which is refused unless "
                     "packages.private_hosts names the host",
                     c->req.host, cls, addr);
            policy_refusal = true;
            continue;
        }
        /* One limit for the whole dial, as curl has: a name with many black-holed addresses
         * would otherwise hold the client (and a connection slot) that many times as long. An
         * address with others after it gets half the time left, the last one all of it. */
        uint64_t now = now_ms();
        if (!c->dial_deadline_ms)
            c->dial_deadline_ms = now + px->limits.connect_ms;
        if (now >= c->dial_deadline_ms) {
            size_t untried = count_dialable(c, a), used = strlen(c->refusal);
            snprintf(c->refusal + used, sizeof(c->refusal) - used,
                     "; the dial's %u s (packages.proxy_connect_timeout_s) ran out with %zu "
                     "address%s untried",
                     px->limits.connect_ms / 1000, untried, untried == 1 ? "" : "es");
            policy_refusal = false;
            break;
        }
        uint64_t left = c->dial_deadline_ms - now;
        c->attempt_ms = (uint32_t)(count_dialable(c, a->ai_next) ? (left + 1) / 2 : left);
        int fd = socket(a->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0 || (connect(fd, a->ai_addr, a->ai_addrlen) < 0 && errno != EINPROGRESS)) {
            snprintf(c->refusal, sizeof(c->refusal), "connecting to %s: %s", c->target,
                     strerror(errno));
            policy_refusal = false;
            if (fd >= 0)
                close(fd);
            continue;
        }
        c->next_addr = a->ai_next;
        c->policy_refusal = policy_refusal;
        c->ufd = fd;
        c->st = ST_CONNECTING;
        struct sbx_err err = {0};
        c->uw = ev_watch(px->loop, fd, EPOLLOUT, on_upstream, c, &err);
        if (!c->uw) {
            refuse(c, 502, "Bad Gateway", err.msg);
            return;
        }
        touch(c); /* the attempt's limit, from now */
        rearm(c);
        return;
    }
    if (policy_refusal)
        refuse(c, 403, "Forbidden", c->refusal);
    else
        refuse(c, 502, "Bad Gateway", c->refusal[0] ? c->refusal : "no address to dial");
}

static void on_resolved(struct addrinfo *res, int gai_error, const char *why_not, void *data)
{
    struct conn *c = data;
    c->job = NULL;
    if (!res) {
        char why[450];
        snprintf(why, sizeof(why), "cannot resolve %s: %s", c->req.host,
                 why_not ? why_not : gai_strerror(gai_error));
        refuse(c, 502, "Bad Gateway", why);
        return;
    }
    c->addrs = c->next_addr = res;
    try_connect(c);
}

/* ---- the request head ---- */

static void decide(struct conn *c)
{
    struct egress_proxy *px = c->px;
    const struct egress_request *r = &c->req;
    bool v6 = strchr(r->host, ':') != NULL;
    snprintf(c->target, sizeof(c->target), "%s%s%s:%u", v6 ? "[" : "", r->host, v6 ? "]" : "",
             r->port);
    const char *why = NULL;
    c->rule = egress_policy_match(px->policy, r->host, r->port, r->kind == EGRESS_CONNECT, &why);
    if (!c->rule) {
        refuse(c, 403, "Forbidden", why);
        return;
    }
    if (px->stats.bytes >= px->limits.max_bytes) {
        refuse(c, 403, "Forbidden", "the sandbox's egress byte budget is used up");
        return;
    }
    /* The client waits while we dial; a forwarded request's client that closes has left (a
     * tunnel's may only have half-closed). */
    ev_watch_modify(c->cw, r->kind == EGRESS_FORWARD ? EPOLLRDHUP : 0);
    c->st = ST_RESOLVING;
    touch(c); /* the lookup's limit, from now */
    rearm(c);
    if (c->rule->ip_literal) {
        /* An address needs no DNS: getaddrinfo with AI_NUMERICHOST returns at once. */
        struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
                                 .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV};
        char port[8];
        snprintf(port, sizeof(port), "%u", r->port);
        struct addrinfo *res = NULL;
        int e = getaddrinfo(r->host, port, &hints, &res);
        on_resolved(e == 0 ? res : NULL, e, NULL, c);
        return;
    }
    c->job = resolver_lookup(px->resolver, px->lookup_owner, r->host, r->port, on_resolved, c);
}

static void read_head(struct conn *c)
{
    size_t room = EGRESS_HEAD_MAX - c->head_len;
    ssize_t n = room ? read(c->cfd, c->head + c->head_len, room) : 0;
    if (n == 0 && room) {
        conn_free(c); /* gone before asking anything */
        return;
    }
    if (n < 0) {
        if (errno != EAGAIN && errno != EINTR)
            conn_free(c);
        return;
    }
    size_t seen = c->head_len;
    c->head_len += (size_t)n;
    /* No touch(): the whole head must arrive within the idle limit from accept, or a client
     * sending a byte now and then would hold its slot for ever. */
    /* A head can only end at a newline: a client dribbling bytes costs one scan per line, not
     * one per byte (and the parser refuses a head of too many lines early). The first bytes
     * are looked at at once, so that what is no request at all is refused without waiting. */
    if (seen > 0 && !memchr(c->head + seen, '\n', (size_t)n) && c->head_len < EGRESS_HEAD_MAX)
        return;
    const char *why = NULL;
    int r = egress_parse_request(c->head, c->head_len, &c->req, &why);
    if (r < 0) {
        refuse(c, 400, "Bad Request", why);
        return;
    }
    if (r > 0)
        decide(c);
}

static void on_client(struct ev_loop *loop, int fd, uint32_t events, void *data)
{
    (void)loop;
    (void)fd;
    struct conn *c = data;
    switch (c->st) {
    case ST_HEAD:
        read_head(c);
        return;
    case ST_RELAY:
        relay(c, true, events);
        return;
    case ST_REFUSING:
        drain_refused(c, events);
        return;
    case ST_RESOLVING:
    case ST_CONNECTING:
        if (events & (EPOLLHUP | EPOLLERR | EPOLLRDHUP))
            conn_free(c); /* the client left while we dialled */
        return;
    }
}

static uint32_t timer_ms(const struct conn *c)
{
    uint32_t idle = c->px->limits.idle_ms;
    switch (c->st) {
    case ST_REFUSING:
        return REFUSE_LINGER;
    case ST_RESOLVING: {
        uint32_t lookup = c->px->limits.connect_ms;
        return idle < lookup ? idle : lookup;
    }
    case ST_CONNECTING:
        return idle < c->attempt_ms ? idle : c->attempt_ms;
    default:
        return idle;
    }
}

static void on_idle(struct ev_loop *loop, void *data)
{
    struct conn *c = data;
    c->idle = NULL;
    uint64_t quiet = now_ms() - c->last_active_ms;
    uint32_t limit = timer_ms(c);
    if (quiet < limit) {
        c->idle = ev_timer_add(loop, limit - quiet, on_idle, c);
        return;
    }
    switch (c->st) {
    case ST_HEAD:
        refuse(c, 408, "Request Timeout", "no complete request in time");
        return;
    case ST_RESOLVING:
        refuse(c, 504, "Gateway Timeout", "looking the host up took too long");
        return;
    case ST_CONNECTING:
        /* A black-holed address: give the next one its turn. */
        snprintf(c->refusal, sizeof(c->refusal), "connecting to %s timed out", c->target);
        c->policy_refusal = false;
        ev_unwatch(c->uw);
        c->uw = NULL;
        cleanup_closep(&c->ufd);
        try_connect(c);
        return;
    case ST_RELAY:
        if (log_rate_take(&c->px->log_rate, c->px->sandbox_id))
            log_emit(LOG_LVL_INFO, "egress connection idle; closed", "sandbox", c->px->sandbox_id,
                     "target", c->target, NULL);
        conn_free(c);
        return;
    case ST_REFUSING:
        conn_free(c);
        return;
    }
}

/* ---- accepting ---- */

static void on_accept(struct ev_loop *loop, int fd, uint32_t events, void *data);

/* Stops or resumes taking connections: at the cap of open ones (refusals lingering included),
 * or for a moment when the server is out of fds, so that a full backlog never spins the loop
 * and a sandbox cannot hold more of the server's fds than its limits say. */
static void set_accepting(struct egress_proxy *px, bool on)
{
    if (px->accepting == on)
        return;
    px->accepting = on;
    ev_watch_modify(px->lw, on ? EPOLLIN : 0);
}

static void on_resume(struct ev_loop *loop, void *data)
{
    (void)loop;
    struct egress_proxy *px = data;
    px->resume = NULL;
    if (px->stats.open < 2 * px->limits.max_connections)
        set_accepting(px, true);
}

static void on_accept(struct ev_loop *loop, int fd, uint32_t events, void *data)
{
    (void)events;
    struct egress_proxy *px = data;
    for (int i = 0; i < ACCEPTS_PER_RUN; i++) {
        /* Past the limit a connection still gets its 429, up to as many again lingering. */
        if (px->stats.open >= 2 * px->limits.max_connections) {
            set_accepting(px, false);
            return;
        }
        int cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (cfd < 0) {
            if ((errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) &&
                !px->resume) {
                set_accepting(px, false);
                px->resume = ev_timer_add(loop, 100, on_resume, px);
            }
            return;
        }
        struct conn *c = xcalloc(1, sizeof(*c));
        c->px = px;
        c->cfd = cfd;
        c->ufd = -1;
        c->next = px->conns;
        px->conns = c;
        px->stats.open++;
        struct sbx_err err = {0};
        c->cw = ev_watch(loop, cfd, EPOLLIN, on_client, c, &err);
        if (!c->cw) {
            conn_free(c);
            continue;
        }
        touch(c);
        rearm(c);
        /* Only connections being served count: a refusal still lingering does not. */
        if (px->stats.open - px->refusing > px->limits.max_connections) {
            char why[128];
            snprintf(why, sizeof(why),
                     "too many connections open (packages.proxy_max_connections = %u)",
                     px->limits.max_connections);
            refuse(c, 429, "Too Many Requests", why);
            continue;
        }
        c->head = xmalloc(EGRESS_HEAD_MAX);
    }
}

int egress_proxy_new(struct ev_loop *loop, struct resolver *resolver,
                     const struct egress_policy *policy, const struct egress_limits *limits,
                     const char *sandbox_id, int listen_fd, struct egress_proxy **out,
                     struct sbx_err *err)
{
    struct egress_proxy *px = xcalloc(1, sizeof(*px));
    px->loop = loop;
    px->resolver = resolver;
    static uint64_t proxies_made; /* the loop's thread only */
    px->lookup_owner = ++proxies_made;
    px->policy = policy;
    px->limits = *limits;
    snprintf(px->sandbox_id, sizeof(px->sandbox_id), "%s", sandbox_id);
    px->listen_fd = listen_fd;
    fcntl(listen_fd, F_SETFL, O_NONBLOCK);
    px->lw = ev_watch(loop, listen_fd, EPOLLIN, on_accept, px, err);
    px->accepting = true;
    if (!px->lw) {
        close(listen_fd);
        free(px);
        return -1;
    }
    *out = px;
    return 0;
}

void egress_proxy_free(struct egress_proxy *px)
{
    if (!px)
        return;
    /* No resuming on the way out. */
    px->accepting = true;
    while (px->conns)
        conn_free(px->conns);
    ev_timer_cancel(px->resume);
    ev_unwatch(px->lw);
    close(px->listen_fd);
    free(px);
}

void egress_proxy_stats(const struct egress_proxy *px, struct egress_stats *out)
{
    *out = px->stats;
}

const char *egress_proxy_last_refusal(const struct egress_proxy *px)
{
    return px->last_refusal;
}
