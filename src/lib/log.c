#include "log.h"

#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const level_names[] = {
    "debug", "info", "notice", "warning", "error", "critical", "alert", "emergency",
};

static int log_fd = 2;
static enum log_level log_min = LOG_LVL_INFO;
/* log_never_block: a socket is sent to with MSG_DONTWAIT (a pipe gets a non-blocking
 * description of its own); what finds no room is counted, and said once there is room. */
static bool log_nonblocking, log_is_socket;
static unsigned long log_lost;
/* log_emit comes from other threads too (the JWKS fetch): one line at a time. */
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

int log_level_from_name(const char *name)
{
    for (size_t i = 0; i < ARRAY_SIZE(level_names); i++)
        if (name && strcmp(name, level_names[i]) == 0)
            return (int)i;
    return -1;
}

const char *log_level_name(enum log_level lvl)
{
    return (unsigned)lvl < ARRAY_SIZE(level_names) ? level_names[lvl] : "info";
}

int log_open(const char *path, enum log_level min_level)
{
    log_min = min_level;
    log_nonblocking = log_is_socket = false;
    if (!path || !*path || strcmp(path, "-") == 0 || strcmp(path, "stderr") == 0) {
        if (log_fd > 2)
            close(log_fd);
        log_fd = 2;
        return 0;
    }
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
    if (fd < 0)
        return -errno;
    if (log_fd > 2)
        close(log_fd);
    log_fd = fd;
    return 0;
}

void log_set_level(enum log_level lvl)
{
    log_min = lvl;
}

void log_never_block(void)
{
    struct stat st;
    if (log_nonblocking || fstat(log_fd, &st) < 0)
        return;
    if (S_ISSOCK(st.st_mode)) {
        log_nonblocking = log_is_socket = true;
    } else if (S_ISFIFO(st.st_mode)) {
        /* Opening the pipe anew gives a file description of our own: O_NONBLOCK on the one
         * we were given would change it for every other process that writes to it. */
        char path[32];
        snprintf(path, sizeof(path), "/proc/self/fd/%d", log_fd);
        int fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0)
            return; /* no /proc: it stays blocking */
        if (log_fd > 2)
            close(log_fd);
        log_fd = fd;
        log_nonblocking = true;
    }
}

static ssize_t put(const char *buf, size_t n)
{
    ssize_t w;
    do
        w = log_is_socket ? send(log_fd, buf, n, MSG_DONTWAIT | MSG_NOSIGNAL)
                          : write(log_fd, buf, n);
    while (w < 0 && errno == EINTR);
    return w;
}

/* The rest of a line that went in part (a pipe takes up to PIPE_BUF bytes whole or not at all;
 * a longer line, or a stream socket, may take some): it goes out before anything else, so that
 * no line runs into another, and nothing waits for it. */
static char *log_rest;
static size_t log_rest_len;

static bool rest_written(void)
{
    while (log_rest_len) {
        ssize_t w = put(log_rest, log_rest_len);
        if (w <= 0)
            return false;
        memmove(log_rest, log_rest + w, log_rest_len - (size_t)w);
        log_rest_len -= (size_t)w;
    }
    free(log_rest);
    log_rest = NULL;
    return true;
}

void log_flush(void)
{
    pthread_mutex_lock(&log_lock);
    if (log_rest)
        rest_written();
    pthread_mutex_unlock(&log_lock);
}

/* Whether the line is, or will be, in the log whole. */
static bool write_line(const char *line, size_t n)
{
    if (!log_nonblocking)
        return write_all(log_fd, line, n) == 0;
    if (!rest_written())
        return false;
    ssize_t w = put(line, n);
    if (w <= 0)
        return false;
    if ((size_t)w < n) {
        log_rest_len = n - (size_t)w;
        log_rest = xmalloc(log_rest_len);
        memcpy(log_rest, line + w, log_rest_len);
    }
    return true;
}

void log_close(void)
{
    /* At the end a moment's wait is no one's: the rest of a cut line, if it comes. */
    for (int tries = 0; log_rest && tries < 10; tries++) {
        struct pollfd p = {.fd = log_fd, .events = POLLOUT};
        if (poll(&p, 1, 100) < 0 || rest_written())
            break;
    }
    free(log_rest);
    log_rest = NULL;
    log_rest_len = 0;
    if (log_fd > 2)
        close(log_fd);
    log_fd = 2;
    log_nonblocking = log_is_socket = false;
}

/* Text as a JSON string. Bytes that are not UTF-8 (a path or an error from a sandbox) become
 * '?': jansson will not encode them, and the whole line would be lost. */
static json_t *log_string(const char *v, size_t len)
{
    if (utf8_valid_prefix(v, len) == len)
        return json_stringn_nocheck(v, len); /* the usual case: no copy */
    char *copy = xmalloc(len + 1);
    memcpy(copy, v, len);
    copy[len] = '\0';
    utf8_scrub(copy, len);
    json_t *s = json_stringn_nocheck(copy, len);
    free(copy);
    return s;
}

static void emit(enum log_level lvl, const char *msg, va_list kv)
{
    json_t *o = json_object();
    json_object_set_new(o, "ts_ms", json_integer((json_int_t)wall_ms()));
    json_object_set_new(o, "level", json_string(log_level_name(lvl)));
    json_object_set_new(o, "msg", log_string(msg, strlen(msg)));
    for (;;) {
        const char *k = va_arg(kv, const char *);
        if (!k)
            break;
        const char *v = va_arg(kv, const char *);
        size_t len = v ? strlen(v) : 0;
        if (len <= LOG_VALUE_MAX) {
            json_object_set_new(o, k, log_string(v ? v : "", len));
            continue;
        }
        size_t keep = LOG_VALUE_MAX;
        while (keep > 0 && ((unsigned char)v[keep] & 0xC0) == 0x80)
            keep--; /* not inside a character */
        char *cut = xasprintf("%.*s... [%zu bytes cut]", (int)keep, v, len - keep);
        json_object_set_new(o, k, log_string(cut, strlen(cut)));
        free(cut);
    }
    char *line = json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII);
    json_decref(o);
    if (!line)
        return;
    size_t n = strlen(line);
    line[n] = '\n'; /* json_dumps leaves room for the NUL, which we replace */
    pthread_mutex_lock(&log_lock);
    if (log_lost) {
        char lost[160];
        int m = snprintf(lost, sizeof(lost),
                         "{\"ts_ms\":%llu,\"level\":\"warning\",\"msg\":\"log lines lost: the "
                         "log's reader had no room\",\"lost\":\"%lu\"}\n",
                         (unsigned long long)wall_ms(), log_lost);
        if (write_line(lost, (size_t)m))
            log_lost = 0;
    }
    if (log_lost || !write_line(line, n + 1))
        log_lost++;
    pthread_mutex_unlock(&log_lock);
    free(line);
}

void log_emit(enum log_level lvl, const char *msg, ...)
{
    if (lvl < log_min)
        return;
    va_list ap;
    va_start(ap, msg);
    emit(lvl, msg, ap);
    va_end(ap);
}

static void emit_plain(enum log_level lvl, const char *msg, ...)
{
    va_list ap;
    va_start(ap, msg);
    emit(lvl, msg, ap);
    va_end(ap);
}

void log_msgf(enum log_level lvl, const char *fmt, ...)
{
    if (lvl < log_min)
        return;
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    emit_plain(lvl, buf, NULL);
}

bool log_rate_take(struct log_rate *r, const char *sandbox_id)
{
    uint64_t now = now_ns() / 1000000;
    if (!r->start_ms || now - r->start_ms >= LOG_RATE_INTERVAL_MS) {
        if (r->dropped) {
            char n[16];
            snprintf(n, sizeof(n), "%u", r->dropped);
            log_emit(LOG_LVL_NOTICE, "log lines dropped: too many from one sandbox", "sandbox",
                     sandbox_id, "dropped", n, NULL);
        }
        r->start_ms = now;
        r->used = r->dropped = 0;
    }
    if (r->used < LOG_RATE_BURST) {
        r->used++;
        return true;
    }
    r->dropped++;
    return false;
}
