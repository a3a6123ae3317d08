#include "ckpt_write.h"

#include <stdlib.h>

#include "dtype.h"

struct fill_ctx {
    const struct hm_named_tensor *t;
    enum hm_dtype dtype;
};

static enum hm_status fill(void *ctx, int64_t index, void *dst, size_t nbytes,
                           struct hm_error *err)
{
    const struct fill_ctx *c = ctx;
    int64_t numel = (int64_t)(nbytes / hm_dtype_size(c->dtype));
    return hm_from_f32(c->t[index].data, numel, c->dtype, dst, err);
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
        if (dtype == HM_DTYPE_F32)
            st = hm_st_writer_add(w, t[i].name, dtype, t[i].ndim, t[i].shape, t[i].data, err);
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
