#include "hm_error.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void hm_error_clear(struct hm_error *err)
{
    if (!err)
        return;
    err->status = HM_OK;
    err->offset = -1;
    err->sys_errno = 0;
    err->msg[0] = '\0';
}

static void vset(struct hm_error *err, enum hm_status status, int64_t offset,
                 int errnum, const char *fmt, va_list ap)
{
    err->status = status;
    err->offset = offset;
    err->sys_errno = errnum;
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    if (offset >= 0) {
        size_t n = strlen(err->msg);
        snprintf(err->msg + n, sizeof err->msg - n, " (at byte %lld)",
                 (long long)offset);
    }
    if (errnum) {
        size_t n = strlen(err->msg);
        snprintf(err->msg + n, sizeof err->msg - n, ": %s", strerror(errnum));
    }
}

enum hm_status hm_error_set(struct hm_error *err, enum hm_status status,
                            const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vset(err, status, -1, 0, fmt, ap);
        va_end(ap);
    }
    return status;
}

enum hm_status hm_error_set_at(struct hm_error *err, enum hm_status status,
                               int64_t offset, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vset(err, status, offset, 0, fmt, ap);
        va_end(ap);
    }
    return status;
}

enum hm_status hm_error_set_errno(struct hm_error *err, enum hm_status status,
                                  int errnum, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vset(err, status, -1, errnum, fmt, ap);
        va_end(ap);
    }
    return status;
}

void hm_error_prefix(struct hm_error *err, const char *fmt, ...)
{
    if (!err)
        return;
    char head[512], old[sizeof err->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(head, sizeof head, fmt, ap);
    va_end(ap);
    memcpy(old, err->msg, sizeof old);
    snprintf(err->msg, sizeof err->msg, "%s%s", head, old);
}

const char *hm_status_str(enum hm_status status)
{
    switch (status) {
    case HM_OK: return "ok";
    case HM_ERR_IO: return "i/o error";
    case HM_ERR_FORMAT: return "malformed input";
    case HM_ERR_INVALID: return "invalid input";
    case HM_ERR_NOMEM: return "out of memory";
    case HM_ERR_UNSUPPORTED: return "unsupported";
    case HM_ERR_NUMERIC: return "non-finite value";
    case HM_ERR_BACKEND: return "backend error";
    }
    return "unknown error";
}

int hm_mul_i64(int64_t a, int64_t b, int64_t *out)
{
    return __builtin_mul_overflow(a, b, out) ? -1 : 0;
}

int hm_add_i64(int64_t a, int64_t b, int64_t *out)
{
    return __builtin_add_overflow(a, b, out) ? -1 : 0;
}

int hm_mul_size(size_t a, size_t b, size_t *out)
{
    return __builtin_mul_overflow(a, b, out) ? -1 : 0;
}

int hm_add_size(size_t a, size_t b, size_t *out)
{
    return __builtin_add_overflow(a, b, out) ? -1 : 0;
}
