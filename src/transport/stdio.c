/* MCP over stdio: one JSON-RPC message per line. A line over the size cap is answered with an
 * error and skipped up to its newline without being buffered, so the stream stays in sync; its
 * id is read from the line's two ends (where clients put it), so that the client hears about
 * its own request instead of waiting for it. */
#include "stdio.h"

#include "log.h"
#include "protocol/mcp.h"
#include "service/loop.h"
#include "util.h"

#include <fcntl.h>
#include <regex.h>
#include <string.h>

#define END_KEEP 256 /* bytes kept of each end of an oversized line */

struct stdio_transport {
    struct ev_loop *loop;
    struct mcp_server *srv;
    struct mcp_session *session;
    struct ev_watch *watch;
    int in_fd, out_fd;
    char *buf;
    size_t len, cap, max;
    bool discarding; /* inside an oversized line */
    size_t discarded;
    char head[END_KEEP + 1], tail[END_KEEP + 1]; /* its first and last bytes */
    size_t head_len, tail_len;
};

static void stdio_send(void *ctx, json_t *msg, const json_t *related)
{
    (void)related;
    struct stdio_transport *t = ctx;
    char *line = json_dumps(msg, MCP_JSON_FLAGS);
    if (!line)
        return;
    size_t n = strlen(line);
    line[n] = '\n'; /* replaces the NUL json_dumps left room for */
    if (write_all(t->out_fd, line, n + 1) < 0)
        log_warn("stdout write failed; the client went away");
    free(line);
}

static void keep_head(struct stdio_transport *t, const char *p, size_t n)
{
    size_t take = n < END_KEEP - t->head_len ? n : END_KEEP - t->head_len;
    memcpy(t->head + t->head_len, p, take);
    t->head_len += take;
}

static void keep_tail(struct stdio_transport *t, const char *p, size_t n)
{
    if (n >= END_KEEP) {
        memcpy(t->tail, p + n - END_KEEP, END_KEEP);
        t->tail_len = END_KEEP;
        return;
    }
    size_t keep = t->tail_len + n > END_KEEP ? END_KEEP - n : t->tail_len;
    memmove(t->tail, t->tail + t->tail_len - keep, keep);
    memcpy(t->tail + keep, p, n);
    t->tail_len = keep + n;
}

json_t *stdio_oversized_id(const char *head, const char *tail)
{
    static regex_t first, last;
    static int ready; /* 1 compiled, -1 failed */
#define ID_VALUE "[[:space:]]*\"id\"[[:space:]]*:[[:space:]]*(-?[0-9]+|\"[^\"\\]*\")"
    if (!ready)
        ready = regcomp(&first,
                        "^[[:space:]]*\\{[[:space:]]*(\"jsonrpc\"[[:space:]]*:[[:space:]]*"
                        "\"2\\.0\"[[:space:]]*,)?" ID_VALUE "[[:space:]]*[,}]",
                        REG_EXTENDED) == 0 &&
                        regcomp(&last, "[,{]" ID_VALUE "[[:space:]]*\\}[[:space:]]*$",
                                REG_EXTENDED) == 0
                    ? 1
                    : -1;
#undef ID_VALUE
    if (ready < 0)
        return NULL;
    regmatch_t m[3];
    const char *text = NULL;
    if (regexec(&first, head, 3, m, 0) == 0)
        text = head;
    else if (regexec(&last, tail, 2, m, 0) == 0)
        text = tail, m[2] = m[1];
    if (!text || m[2].rm_so < 0)
        return NULL;
    return json_loadb(text + m[2].rm_so, (size_t)(m[2].rm_eo - m[2].rm_so), JSON_DECODE_ANY, NULL);
}

static void handle_line(struct stdio_transport *t, const char *line, size_t len)
{
    if (len && line[len - 1] == '\r')
        len--;
    if (len == 0)
        return;
    mcp_session_receive(t->session, line, len);
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
        if (t->len && !t->discarding)
            handle_line(t, t->buf, t->len);
        log_info("stdin closed; shutting down");
        ev_unwatch(t->watch);
        t->watch = NULL;
        ev_loop_stop(loop);
        return;
    }
    const char *p = chunk, *end = chunk + n;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t seg = (size_t)((nl ? nl : end) - p);
        if (t->discarding) {
            t->discarded += seg;
            keep_tail(t, p, seg);
        } else if (t->len + seg > t->max) {
            t->discarding = true;
            t->discarded = t->len + seg;
            t->head_len = t->tail_len = 0;
            keep_head(t, t->buf, t->len);
            keep_head(t, p, seg);
            keep_tail(t, t->buf, t->len);
            keep_tail(t, p, seg);
            t->len = 0;
        } else {
            if (t->len + seg > t->cap) {
                while (t->cap < t->len + seg)
                    t->cap = t->cap ? t->cap * 2 : 65536;
                t->buf = xrealloc(t->buf, t->cap);
            }
            memcpy(t->buf + t->len, p, seg);
            t->len += seg;
        }
        if (!nl)
            break;
        if (t->discarding) {
            t->head[t->head_len] = '\0';
            t->tail[t->tail_len] = '\0';
            json_t *id = stdio_oversized_id(t->head, t->tail);
            json_t *m =
                json_pack("{s:s, s:o, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", id ? id : json_null(),
                          "error", "code", -32600, "message", "message exceeds the size limit");
            json_object_set_new(json_object_get(m, "error"), "data",
                                json_pack("{s:I, s:I}", "bytes", (json_int_t)t->discarded, "limit",
                                          (json_int_t)t->max));
            stdio_send(t, m, NULL);
            json_decref(m);
            t->discarding = false;
            t->discarded = 0;
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
    int fl = fcntl(in_fd, F_GETFL);
    if (fl >= 0)
        fcntl(in_fd, F_SETFL, fl | O_NONBLOCK);
    t->watch = ev_watch(loop, in_fd, EPOLLIN, on_input, t, err);
    if (!t->watch) {
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

void stdio_transport_stop(struct stdio_transport *t)
{
    if (!t)
        return;
    ev_unwatch(t->watch);
    mcp_session_free(t->session);
    free(t->buf);
    free(t);
}
