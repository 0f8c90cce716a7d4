#include "err.h"

#include <stdio.h>
#include <string.h>

static void vfill(struct sbx_err *err, int code, const char *fmt, va_list ap)
{
    err->code = code;
    vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
}

int sbx_fail(struct sbx_err *err, int code, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vfill(err, code, fmt, ap);
        va_end(ap);
    }
    return -1;
}

int sbx_fail_errno(struct sbx_err *err, int code, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vfill(err, code, fmt, ap);
        va_end(ap);
        size_t len = strlen(err->msg);
        snprintf(err->msg + len, sizeof(err->msg) - len, ": %s", strerror(code));
    }
    return -1;
}

int sbx_err_wrap(struct sbx_err *err, const char *fmt, ...)
{
    if (!err)
        return -1;
    char prefix[256];
    char old[SBX_ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof(prefix), fmt, ap);
    va_end(ap);
    memcpy(old, err->msg, sizeof(old));
    /* Truncation of very long chains is fine: the innermost detail is at the end. */
    int n = snprintf(err->msg, sizeof(err->msg), "%s: ", prefix);
    if (n > 0 && (size_t)n < sizeof(err->msg))
        memcpy(err->msg + n, old, strnlen(old, sizeof(err->msg) - (size_t)n - 1) + 1);
    err->msg[sizeof(err->msg) - 1] = '\0';
    return -1;
}

void sbx_err_clear(struct sbx_err *err)
{
    if (err) {
        err->code = 0;
        err->msg[0] = '\0';
    }
}
