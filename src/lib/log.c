#include "log.h"

#include "util.h"

#include <fcntl.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const level_names[] = {
    "debug", "info", "notice", "warning", "error", "critical", "alert", "emergency",
};

static int log_fd = 2;
static enum log_level log_min = LOG_LVL_INFO;

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
    if (!path || !*path || strcmp(path, "-") == 0 || strcmp(path, "stderr") == 0) {
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

void log_close(void)
{
    if (log_fd > 2)
        close(log_fd);
    log_fd = 2;
}

static void emit(enum log_level lvl, const char *msg, va_list kv)
{
    json_t *o = json_object();
    json_object_set_new(o, "ts_ms", json_integer((json_int_t)wall_ms()));
    json_object_set_new(o, "level", json_string(log_level_name(lvl)));
    json_object_set_new(o, "msg", json_stringn_nocheck(msg, strlen(msg)));
    for (;;) {
        const char *k = va_arg(kv, const char *);
        if (!k)
            break;
        const char *v = va_arg(kv, const char *);
        size_t len = v ? strlen(v) : 0;
        if (len <= LOG_VALUE_MAX) {
            json_object_set_new(o, k, json_stringn_nocheck(v ? v : "", len));
            continue;
        }
        size_t keep = LOG_VALUE_MAX;
        while (keep > 0 && ((unsigned char)v[keep] & 0xC0) == 0x80)
            keep--; /* not inside a character */
        char *cut = xasprintf("%.*s... [%zu bytes cut]", (int)keep, v, len - keep);
        json_object_set_new(o, k, json_string_nocheck(cut));
        free(cut);
    }
    char *line = json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII);
    json_decref(o);
    if (!line)
        return;
    size_t n = strlen(line);
    line[n] = '\n'; /* json_dumps leaves room for the NUL, which we replace */
    (void)write_all(log_fd, line, n + 1);
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
