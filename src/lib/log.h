/* Structured logs: one JSON object per line, to stderr or a file. Never to stdout, which
 * belongs to the protocol when serving over stdio. */
#ifndef SBX_LOG_H
#define SBX_LOG_H

#include <stdbool.h>
#include <stdint.h>

enum log_level {
    LOG_LVL_DEBUG = 0,
    LOG_LVL_INFO,
    LOG_LVL_NOTICE,
    LOG_LVL_WARNING,
    LOG_LVL_ERROR,
    LOG_LVL_CRITICAL,
    LOG_LVL_ALERT,
    LOG_LVL_EMERGENCY,
};

/* Returns -1 for an unknown name. Names are the 8 syslog levels used by MCP. */
int log_level_from_name(const char *name);
const char *log_level_name(enum log_level lvl);

/* path NULL or "-" or "stderr" logs to stderr. Returns -errno on open failure. */
int log_open(const char *path, enum log_level min_level);
void log_set_level(enum log_level lvl);
void log_close(void);
/* From now on a log reader with no room costs lines (counted, and said once there is room
 * again), never a wait: for the server, whose loop must not stop because its host does not
 * read its stderr. A file stays as it is. */
void log_never_block(void);
/* Writes what is left of a line that went in part, if the reader has room now (the next line
 * would, but a quiet server may have none to write for a while). */
void log_flush(void);

/* msg is free text; kv is an optional list of "key", "value" string pairs ended by NULL. */
void log_emit(enum log_level lvl, const char *msg, ...) __attribute__((sentinel));
void log_msgf(enum log_level lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A value longer than this is logged cut, with how much went. */
#define LOG_VALUE_MAX 2048

/* What sandbox code can make the server log, per source (a sandbox's driver, its proxy): at
 * most LOG_RATE_BURST lines per LOG_RATE_INTERVAL_MS, so that it can neither fill the disk nor
 * hold the loop in write(). */
#define LOG_RATE_BURST       20
#define LOG_RATE_INTERVAL_MS 10000
struct log_rate {
    uint64_t start_ms;
    unsigned used, dropped;
};
/* Whether one more line of the source may be logged now; the first after lines were dropped
 * is preceded by one that says how many, naming the source as "sandbox". */
bool log_rate_take(struct log_rate *r, const char *sandbox_id);

#define log_debug(...) log_msgf(LOG_LVL_DEBUG, __VA_ARGS__)
#define log_info(...)  log_msgf(LOG_LVL_INFO, __VA_ARGS__)
#define log_warn(...)  log_msgf(LOG_LVL_WARNING, __VA_ARGS__)
#define log_error(...) log_msgf(LOG_LVL_ERROR, __VA_ARGS__)

#endif
