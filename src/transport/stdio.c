/* MCP over stdio: one JSON-RPC message per line. A line over the size cap is answered with an
 * error and skipped up to its newline without being buffered, so the stream stays in sync; its
 * id is read from the line's two ends (where clients put it), so that the client hears about
 * its own request instead of waiting for it.
 *
 * stdout is written without blocking: a client that stops reading must not stop the loop
 * (timeouts, signals, other work). What it has not taken waits in a queue; past
 * OUT_PAUSE_BYTES no more requests are read until the queue drains. */
#include "stdio.h"

#include "log.h"
#include "protocol/mcp.h"
#include "service/loop.h"
#include "util.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <string.h>

#define OUT_PAUSE_BYTES  (64u << 20)
#define FLUSH_AT_EXIT_MS 2000 /* for the answers still queued when the server stops */

struct stdio_transport {
    struct ev_loop *loop;
    struct mcp_server *srv;
    struct mcp_session *session;
    struct ev_watch *watch;
    int in_fd, out_fd;
    char *buf;
    size_t len, cap, max;
    bool discarding;              /* inside an oversized line */
    struct mcp_message_ends ends; /* its first and last bytes, and its length */
    int in_flags, out_flags;      /* as found, put back at the end */
    char *out;                    /* output the client has not taken yet: out[out_off..out_len) */
    size_t out_off, out_len, out_cap;
    struct ev_watch *out_watch; /* while output waits */
    bool out_broken;            /* the client is gone: output is dropped */
    bool paused;                /* too much output waits: stdin is not read */
    bool eof;
    /* stdin is a file epoll refuses (`< requests.jsonl`, `< /dev/null`): always readable, so
     * it is read a chunk per turn of the loop instead of on events. */
    bool in_file;
    struct ev_task in_task;
};

static void on_input(struct ev_loop *loop, int fd, uint32_t events, void *data);
static void on_output(struct ev_loop *loop, int fd, uint32_t events, void *data);

static void on_input_turn(struct ev_loop *loop, void *data)
{
    struct stdio_transport *t = data;
    on_input(loop, t->in_fd, EPOLLIN, t);
    if (!t->eof && !t->paused)
        ev_task_post(loop, &t->in_task);
}

/* Reads stdin again (at the start, and once output has drained). */
static int start_input(struct stdio_transport *t, struct sbx_err *err)
{
    if (t->in_file) {
        ev_task_post(t->loop, &t->in_task);
        return 0;
    }
    t->watch = ev_watch(t->loop, t->in_fd, EPOLLIN, on_input, t, err);
    return t->watch ? 0 : -1;
}

static void stop_input(struct stdio_transport *t)
{
    ev_unwatch(t->watch);
    t->watch = NULL;
    ev_task_cancel(t->loop, &t->in_task);
}

/* Appends n bytes to a buffer that doubles as it grows (the line being read, the output). */
static void append(char **buf, size_t *len, size_t *cap, const char *p, size_t n)
{
    if (n == 0)
        return; /* an empty line before any other: *buf may still be NULL */
    if (*len + n > *cap) {
        while (*cap < *len + n)
            *cap = *cap ? *cap * 2 : 65536;
        *buf = xrealloc(*buf, *cap);
    }
    memcpy(*buf + *len, p, n);
    *len += n;
}

static size_t out_queued(const struct stdio_transport *t)
{
    return t->out_len - t->out_off;
}

/* What stdout takes of buf now (0 when it is full); a failure means the client is gone. */
static size_t write_some(struct stdio_transport *t, const char *buf, size_t len)
{
    ssize_t w;
    do
        w = write(t->out_fd, buf, len);
    while (w < 0 && errno == EINTR);
    if (w > 0)
        return (size_t)w;
    if (w == 0 || errno != EAGAIN) {
        /* Nobody can read an answer any more: as at stdin's end, the server ends, and its
         * sandboxes with it, rather than running work whose results go nowhere. */
        log_warn("stdout write failed; the client went away; shutting down");
        t->out_broken = true;
        ev_loop_stop(t->loop);
    }
    return 0;
}

/* Writes what the queue holds, as far as stdout takes it now. */
static void flush_out(struct stdio_transport *t)
{
    while (out_queued(t) && !t->out_broken) {
        size_t w = write_some(t, t->out + t->out_off, out_queued(t));
        if (w == 0)
            break;
        t->out_off += w;
    }
    if (t->out_broken || !out_queued(t)) {
        t->out_off = t->out_len = 0;
        if (t->out_cap > (1u << 20)) {
            free(t->out);
            t->out = NULL;
            t->out_cap = 0;
        }
    } else if (t->out_off > t->out_cap / 2) {
        memmove(t->out, t->out + t->out_off, out_queued(t));
        t->out_len -= t->out_off;
        t->out_off = 0;
    }
}

/* Watches stdout while output waits, and stdin only while little does. */
static void update_watches(struct stdio_transport *t)
{
    struct sbx_err err = {0};
    size_t queued = out_queued(t);
    if (queued && !t->out_watch)
        t->out_watch = ev_watch(t->loop, t->out_fd, EPOLLOUT, on_output, t, &err);
    else if (!queued && t->out_watch) {
        ev_unwatch(t->out_watch);
        t->out_watch = NULL;
    }
    if (queued > OUT_PAUSE_BYTES && !t->paused && !t->eof) {
        stop_input(t);
        t->paused = true;
    } else if (!queued && t->paused && !t->eof) {
        t->paused = false;
        start_input(t, &err);
    }
}

static void on_output(struct ev_loop *loop, int fd, uint32_t events, void *data)
{
    (void)loop, (void)fd, (void)events;
    struct stdio_transport *t = data;
    flush_out(t);
    update_watches(t);
}

static void stdio_send(void *ctx, json_t *msg, const json_t *related)
{
    (void)related;
    struct stdio_transport *t = ctx;
    if (t->out_broken)
        return;
    size_t n = 0;
    char *line = mcp_dumps(msg, &n);
    if (!line)
        return;
    line[n++] = '\n'; /* replaces the NUL mcp_dumps left room for */
    if (!out_queued(t)) {
        /* The usual case: straight out, and only what stdout does not take is queued. */
        size_t w = write_some(t, line, n);
        if (w == n || t->out_broken) {
            free(line);
            return;
        }
        /* The line becomes the queue as it is: a large result (11 MB for a 4 MiB read_file)
         * is not copied again. */
        free(t->out);
        t->out = line;
        t->out_off = w;
        t->out_len = t->out_cap = n;
    } else {
        append(&t->out, &t->out_len, &t->out_cap, line, n);
        free(line);
    }
    flush_out(t);
    update_watches(t);
}

static void handle_line(struct stdio_transport *t, const char *line, size_t len)
{
    /* CRLF endings, a UTF-8 byte order mark (some Windows clients) and blank lines are not
     * messages. */
    if (len && line[len - 1] == '\r')
        len--;
    if (len >= 3 && memcmp(line, "\xEF\xBB\xBF", 3) == 0)
        line += 3, len -= 3;
    size_t blank = 0;
    while (blank < len && (line[blank] == ' ' || line[blank] == '\t'))
        blank++;
    if (blank == len)
        return;
    mcp_session_receive(t->session, line, len);
}

/* Answers the oversized line just skipped, under the id its two ends show. */
static void refuse_oversized(struct stdio_transport *t)
{
    json_t *id = mcp_message_ends_id(&t->ends);
    char why[96];
    snprintf(why, sizeof(why), "exceeds the size limit (%zu bytes, limit %zu)", t->ends.bytes,
             t->max);
    if (mcp_session_refuse_response(t->session, id, why)) {
        json_decref(id);
        t->discarding = false;
        return;
    }
    json_t *m = json_pack("{s:s, s:o, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", id ? id : json_null(),
                          "error", "code", -32600, "message", "message exceeds the size limit");
    json_object_set_new(
        json_object_get(m, "error"), "data",
        json_pack("{s:I, s:I}", "bytes", (json_int_t)t->ends.bytes, "limit", (json_int_t)t->max));
    stdio_send(t, m, NULL);
    json_decref(m);
    t->discarding = false;
}

static void on_input(struct ev_loop *loop, int fd, uint32_t events, void *data)
{
    (void)events;
    struct stdio_transport *t = data;
    char chunk[65536];
    ssize_t n = read(fd, chunk, sizeof(chunk));
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n <= 0) {
        /* A last line without its newline is still a message, and one over the cap is
         * still answered: its client may be reading stdout after closing stdin. */
        if (t->discarding)
            refuse_oversized(t);
        else if (t->len)
            handle_line(t, t->buf, t->len);
        log_info("stdin closed; shutting down");
        t->eof = true;
        stop_input(t);
        ev_loop_stop(loop);
        return;
    }
    const char *p = chunk, *end = chunk + n;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t seg = (size_t)((nl ? nl : end) - p);
        if (t->discarding) {
            mcp_message_ends_add(&t->ends, p, seg);
        } else if (t->len + seg > t->max + 1) { /* + 1: a CRLF line's CR */
            t->discarding = true;
            t->ends = (struct mcp_message_ends){0};
            mcp_message_ends_add(&t->ends, t->buf, t->len);
            mcp_message_ends_add(&t->ends, p, seg);
            t->len = 0;
        } else {
            append(&t->buf, &t->len, &t->cap, p, seg);
        }
        if (!nl)
            break;
        if (t->discarding) {
            refuse_oversized(t);
        } else {
            handle_line(t, t->buf, t->len);
            /* Large line buffers are given back once used. */
            if (t->cap > (1u << 20)) {
                free(t->buf);
                t->buf = NULL;
                t->cap = 0;
            }
        }
        t->len = 0;
        p = nl + 1;
    }
}

int stdio_transport_start(struct ev_loop *loop, struct mcp_server *srv, int in_fd, int out_fd,
                          struct stdio_transport **out, struct sbx_err *err)
{
    struct stdio_transport *t = xcalloc(1, sizeof(*t));
    t->loop = loop;
    t->srv = srv;
    t->in_fd = in_fd;
    t->out_fd = out_fd;
    t->max = 16u << 20;
    static const struct mcp_transport_ops ops = {.send = stdio_send};
    t->session = mcp_session_new(srv, &ops, t, "stdio");
    /* Both may be one socket, whose flags are shared: both are made non-blocking. */
    t->in_flags = fcntl(in_fd, F_GETFL);
    t->out_flags = fcntl(out_fd, F_GETFL);
    if (t->in_flags >= 0)
        fcntl(in_fd, F_SETFL, t->in_flags | O_NONBLOCK);
    if (t->out_flags >= 0)
        fcntl(out_fd, F_SETFL, t->out_flags | O_NONBLOCK);
    t->in_task.cb = on_input_turn;
    t->in_task.data = t;
    struct stat st;
    t->in_file = fstat(in_fd, &st) == 0 && S_ISREG(st.st_mode);
    if (start_input(t, err) < 0 && err->code == EPERM) {
        t->in_file = true; /* /dev/null and the like */
        start_input(t, err);
    }
    if (!t->watch && !t->in_file) {
        mcp_session_free(t->session);
        free(t);
        return sbx_err_wrap(err, "stdin");
    }
    *out = t;
    return 0;
}

void stdio_transport_set_max(struct stdio_transport *t, size_t max)
{
    t->max = max;
}

/* The answers still queued get a short while to leave: a client that reads them after
 * closing stdin has them, one that stopped reading does not hold the shutdown. */
static void flush_at_exit(struct stdio_transport *t)
{
    uint64_t deadline = now_ms() + FLUSH_AT_EXIT_MS;
    for (;;) {
        flush_out(t);
        uint64_t now = now_ms();
        if (!out_queued(t) || t->out_broken || now >= deadline)
            return;
        struct pollfd p = {.fd = t->out_fd, .events = POLLOUT};
        poll(&p, 1, (int)(deadline - now));
    }
}

void stdio_transport_stop(struct stdio_transport *t)
{
    if (!t)
        return;
    stop_input(t);
    if (t->out_watch)
        ev_unwatch(t->out_watch);
    mcp_session_free(t->session);
    flush_at_exit(t);
    /* A terminal or pipe shared with the parent is left as it was found. */
    if (t->in_flags >= 0)
        fcntl(t->in_fd, F_SETFL, t->in_flags);
    if (t->out_flags >= 0)
        fcntl(t->out_fd, F_SETFL, t->out_flags);
    free(t->out);
    free(t->buf);
    free(t);
}
