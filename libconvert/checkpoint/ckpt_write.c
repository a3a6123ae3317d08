#include "ckpt_write.h"

#include <stdlib.h>

#include "dtype.h"

struct fill_ctx {
    const struct hm_named_tensor *t;
    enum hm_dtype dtype;
};

/* Whole fp32 tensors converted to dtype, or narrow ones widened (and
 * converted) a piece at a time. */
static enum hm_status fill(void *ctx, int64_t index, size_t off, void *dst, size_t nbytes,
                           struct hm_error *err)
{
    const struct fill_ctx *c = ctx;
    const struct hm_named_tensor *t = &c->t[index];
    const size_t es = hm_dtype_size(c->dtype);
    const int64_t numel = (int64_t)(nbytes / es), at = (int64_t)(off / es);
    if (!t->narrow)
        return hm_from_f32(t->data + at, numel, c->dtype, dst, err);
    if (c->dtype == HM_DTYPE_F32)
        return hm_to_f32(t->narrow + at, t->narrow_dtype, numel, dst, err);
    float *tmp = malloc(sizeof(float) * (size_t)(numel ? numel : 1));
    enum hm_status st = tmp ? hm_to_f32(t->narrow + at, t->narrow_dtype, numel, tmp, err)
                            : hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    if (st == HM_OK)
        st = hm_from_f32(tmp, numel, c->dtype, dst, err);
    free(tmp);
    return st;
}

enum hm_status hm_ckpt_write(const char *path, int flags, const struct hm_config *cfg,
                             const char *provenance, const struct hm_named_tensor *t,
                             int64_t n, enum hm_dtype dtype, const char *const *extra_meta,
                             struct hm_error *err)
{
    if (dtype != HM_DTYPE_F32 && dtype != HM_DTYPE_F16 && dtype != HM_DTYPE_BF16)
        return hm_error_set(err, HM_ERR_UNSUPPORTED, "checkpoints are F32, F16 or BF16");
    struct hm_st_writer *w = hm_st_writer_new();
    struct fill_ctx ctx = {t, dtype};
    enum hm_status st = HM_OK;
    if (!w) {
        st = hm_error_set(err, HM_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (int64_t i = 0; i < n && st == HM_OK; i++) {
        const enum hm_dtype have = t[i].narrow ? t[i].narrow_dtype : HM_DTYPE_F32;
        const void *bytes = t[i].narrow ? (const void *)t[i].narrow : (const void *)t[i].data;
        if (dtype == have)
            st = hm_st_writer_add(w, t[i].name, dtype, t[i].ndim, t[i].shape, bytes, err);
        else if (t[i].narrow)
            st = hm_st_writer_add_pieces(w, t[i].name, dtype, t[i].ndim, t[i].shape, fill, &ctx,
                                         err);
        else
            st = hm_st_writer_add_fill(w, t[i].name, dtype, t[i].ndim, t[i].shape, fill, &ctx,
                                       err);
    }
    if (st == HM_OK)
        st = hm_ckpt_write_writer(w, cfg, provenance, extra_meta, path, flags, err);
out:
    hm_st_writer_free(w);
    return st;
}

enum hm_status hm_ckpt_write_writer(struct hm_st_writer *w, const struct hm_config *cfg,
                                    const char *provenance, const char *const *extra_meta,
                                    const char *path, int flags, struct hm_error *err)
{
    char *cfg_json = hm_config_to_json(cfg);
    if (!cfg_json)
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    enum hm_status st = hm_st_writer_set_metadata(w, "hm.config", cfg_json, err);
    free(cfg_json);
    if (st == HM_OK && provenance)
        st = hm_st_writer_set_metadata(w, "hm.provenance", provenance, err);
    if (st == HM_OK)
        st = hm_st_writer_set_metadata(w, "format", "pt", err);
    for (int i = 0; st == HM_OK && extra_meta && extra_meta[i]; i += 2)
        st = hm_st_writer_set_metadata(w, extra_meta[i], extra_meta[i + 1], err);
    if (st == HM_OK)
        st = hm_st_writer_write_path(w, path, flags, err);
    return st;
}
