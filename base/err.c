/* err.c: result-code names, per-handle error messages, always-on checks
 * and logging. */
#include "base.h"

#include <stdlib.h>
#include <string.h>

static const char *const rc_names[] = {
    "ok", "out of memory", "I/O error", "malformed input", "invalid argument",
    "unsupported", "out of range", "capacity reached", "cancelled", "denied",
    "not found", "timed out", "invalid state", "internal error",
};

const char *hx_rc_str(int rc)
{
    if (rc < 0 || (size_t)rc >= sizeof rc_names / sizeof rc_names[0])
        return "unknown error";
    return rc_names[rc];
}

int hx_err_setv(hx_err *err, int rc, const char *fmt, va_list ap)
{
    if (!err) return rc;
    err->rc = rc;
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    return rc;
}

int hx_err_set(hx_err *err, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    hx_err_setv(err, rc, fmt, ap);
    va_end(ap);
    return rc;
}

int hx_err_wrap(hx_err *dst, const hx_err *src, const char *prefix)
{
    if (!dst || dst == src) return src ? src->rc : HX_ERR_INTERNAL;
    if (prefix)
        return hx_err_set(dst, src->rc, "%s: %s", prefix, src->msg);
    return hx_err_set(dst, src->rc, "%s", src->msg);
}

void hx_err_clear(hx_err *err)
{
    if (!err) return;
    err->rc = HX_OK;
    err->msg[0] = '\0';
}

void hx_check_failed(const char *file, int line, const char *what)
{
    fprintf(stderr, "hearth: internal check failed at %s:%d: %s\n", file,
            line, what);
    abort();
}

static int log_debug_on(void)
{
    static int on = -1;
    if (on < 0) {
        const char *v = getenv("HEARTH_LOG");
        on = v && strcmp(v, "debug") == 0;
    }
    return on;
}

void hx_log_debug(const char *fmt, ...)
{
    if (!log_debug_on()) return;
    va_list ap;
    va_start(ap, fmt);
    fputs("hearth: debug: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

void hx_log_warn(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("hearth: warning: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}
