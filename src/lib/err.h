/* Structured errors: functions return < 0 and fill a struct sbx_err; callers add context
 * on the way up, and the protocol edge turns it into a JSON-RPC error or an isError result. */
#ifndef SBX_ERR_H
#define SBX_ERR_H

#include <stdarg.h>

#define SBX_ERR_MSG_MAX 1024

struct sbx_err {
    int code; /* errno-style status (positive), 0 when unset */
    char msg[SBX_ERR_MSG_MAX];
};

/* Fill err (if non-NULL) and return -1. */
int sbx_fail(struct sbx_err *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Like sbx_fail, with ": strerror(code)" appended. */
int sbx_fail_errno(struct sbx_err *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Prepend "context: " to an existing message; returns -1. */
int sbx_err_wrap(struct sbx_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sbx_err_clear(struct sbx_err *err);

#endif
