/* hm_error.h — the one error vocabulary of every hm library.
 *
 * Library functions (formats/, libconvert/, kernels/) never print and never
 * exit. They return enum hm_status and, on failure, fill a caller-provided
 * struct hm_error with a lowercase message (no path: the caller that knows
 * the path prefixes it), an optional byte offset and the errno seen.
 * Tools turn that into "hm-x: error: cannot read 'PATH': MESSAGE".
 */
#ifndef HM_ERROR_H
#define HM_ERROR_H

#include <stdint.h>
#include <stddef.h>

enum hm_status {
    HM_OK = 0,
    HM_ERR_IO,       /* open/read/write/rename failed (errno set) */
    HM_ERR_FORMAT,   /* malformed input bytes */
    HM_ERR_INVALID,  /* well-formed but unusable (missing tensor, shape mismatch) */
    HM_ERR_NOMEM,    /* allocation failed or size overflowed */
    HM_ERR_UNSUPPORTED, /* valid but not handled (dtype, arch) */
    HM_ERR_NUMERIC,  /* NaN/Inf met where finite values were required */
    HM_ERR_BACKEND,  /* a backend cannot run what was asked (missing op, device error) */
};

struct hm_error {
    enum hm_status status;
    int64_t offset;  /* byte offset in the input, or -1 when not meaningful */
    int sys_errno;   /* errno at the failure, or 0 */
    char msg[768];
};

/* Clears err (status HM_OK, offset -1, empty message). err may be NULL. */
void hm_error_clear(struct hm_error *err);

/* Records a failure and returns status, so callers write
 *   return hm_error_set(err, HM_ERR_FORMAT, "header is not JSON");
 * err may be NULL (the message is dropped). */
enum hm_status hm_error_set(struct hm_error *err, enum hm_status status,
                            const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Same, with the byte offset where the problem was seen. */
enum hm_status hm_error_set_at(struct hm_error *err, enum hm_status status,
                               int64_t offset, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Same, appending ": strerror(errno)" and keeping errno. */
enum hm_status hm_error_set_errno(struct hm_error *err, enum hm_status status,
                                  int errnum, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Prepends context ("while reading shard 'x': ") to an existing message. */
void hm_error_prefix(struct hm_error *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

const char *hm_status_str(enum hm_status status);

/* Checked arithmetic on sizes (git st_mult). Return 0 on success, -1 on overflow. */
int hm_mul_i64(int64_t a, int64_t b, int64_t *out);
int hm_add_i64(int64_t a, int64_t b, int64_t *out);
int hm_mul_size(size_t a, size_t b, size_t *out);
int hm_add_size(size_t a, size_t b, size_t *out);

#endif
