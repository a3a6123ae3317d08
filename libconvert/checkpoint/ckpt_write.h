/* ckpt_write.h — write a model checkpoint the way every hm tool does:
 * safetensors, tensors converted from F32 to the chosen dtype one at a time
 * while streaming, `hm.config` and `hm.provenance` metadata, atomic output. */
#ifndef HM_CKPT_WRITE_H
#define HM_CKPT_WRITE_H

#include <stdint.h>
#include "config.h"
#include "hm_error.h"
#include "safetensors.h"

struct hm_named_tensor {
    const char *name;
    int ndim;
    const int64_t *shape;  /* [ndim] */
    const float *data;     /* [numel], borrowed until the write returns; or NULL and: */
    const uint16_t *narrow; /* [numel] bf16/f16 bits (narrow_dtype), borrowed, host memory:
                             * written as they are when dtype is theirs, else widened a
                             * piece at a time (HM_ST_FILL_PIECE) */
    enum hm_dtype narrow_dtype;
};

/* Write tensors t[n] to path ("-" = stdout) in dtype (F32/F16/BF16).
 * provenance: the full hm.provenance chain (JSON array text) or NULL.
 * extra_meta: NULL-terminated key/value pairs to add, or NULL.
 * flags: HM_AFILE_FORCE to replace an existing file. */
enum hm_status hm_ckpt_write(const char *path, int flags, const struct hm_config *cfg,
                             const char *provenance, const struct hm_named_tensor *t,
                             int64_t n, enum hm_dtype dtype, const char *const *extra_meta,
                             struct hm_error *err);

/* The common tail of every model write: add hm.config (cfg), hm.provenance
 * (when not NULL), format "pt" and extra_meta pairs to w, then write w
 * atomically to path. w stays owned by the caller. */
enum hm_status hm_ckpt_write_writer(struct hm_st_writer *w, const struct hm_config *cfg,
                                    const char *provenance, const char *const *extra_meta,
                                    const char *path, int flags, struct hm_error *err);

#endif
