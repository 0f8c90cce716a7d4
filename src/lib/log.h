/* Structured logs: one JSON object per line, to stderr or a file. Never to stdout, which
 * belongs to the protocol when serving over stdio. */
#ifndef SBX_LOG_H
#define SBX_LOG_H

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

/* msg is free text; kv is an optional list of "key", "value" string pairs ended by NULL. */
void log_emit(enum log_level lvl, const char *msg, ...) __attribute__((sentinel));
void log_msgf(enum log_level lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_debug(...) log_msgf(LOG_LVL_DEBUG, __VA_ARGS__)
#define log_info(...)  log_msgf(LOG_LVL_INFO, __VA_ARGS__)
#define log_warn(...)  log_msgf(LOG_LVL_WARNING, __VA_ARGS__)
#define log_error(...) log_msgf(LOG_LVL_ERROR, __VA_ARGS__)

#endif
