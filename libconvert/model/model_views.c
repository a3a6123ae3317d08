#include "model_views.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt_write.h"

int64_t hm_model_views(const struct hm_model *m, struct hm_tensor_view **out)
{
    *out = calloc((size_t)m->n_views + 1, sizeof **out);
    if (!*out)
        return -1;
    memcpy(*out, m->views, sizeof **out * (size_t)m->n_views);
    return m->n_views;
}

enum hm_status hm_model_save(const struct hm_model *m, const char *path, int flags,
                            const char *provenance, enum hm_dtype dtype,
                            const char *const *extra_meta, struct hm_error *err)
{
    struct hm_tensor_view *v = NULL;
    int64_t n = hm_model_views(m, &v);
    if (n < 0)
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    struct hm_named_tensor *t = calloc((size_t)n + 1, sizeof *t);
    if (!t) {
        free(v);
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    }
    /* narrow layer matrices live in the one widened-layer buffer: such a
     * model (a frozen teacher) is run, not saved; narrow embeddings (a
     * trainee's frozen ones) are written from their bits */
    int layer_narrow = 0;
    for (int64_t i = 0; i < n; i++)
        layer_narrow |= v[i].narrow && v[i].data;
    if (layer_narrow || m->base) {
        free(t);
        free(v);
        return hm_error_set(err, HM_ERR_INVALID, "a model with narrow layers or shared weights "
                            "is run, not saved (hm_model_load_narrow, hm_model_extend)");
    }
    const struct hm_model_narrow *nw = m->narrow;
    const enum hm_dtype ndt = nw && nw->kind == HM_NARROW_F16 ? HM_DTYPE_F16 : HM_DTYPE_BF16;
    /* a model on a device is downloaded into a host copy first (its narrow
     * bits too); host memory (ref, fast) is written from where it is */
    float *host = NULL;
    uint16_t *hbits = NULL;
    if (m->be && !hm_backend_host_memory(m->be)) {
        host = malloc(sizeof(float) * (size_t)(m->n_params > 0 ? m->n_params : 1));
        hbits = nw ? malloc(sizeof(uint16_t) * (size_t)(nw->n_bits > 0 ? nw->n_bits : 1)) : NULL;
        if (!host || (nw && !hbits)) {
            free(host);
            free(hbits);
            free(t);
            free(v);
            return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
        }
        hm_backend_download(m->be, host, m->storage, sizeof(float) * (size_t)m->n_params);
        if (nw)
            hm_backend_download(m->be, hbits, nw->bits, sizeof(uint16_t) * (size_t)nw->n_bits);
    }
    for (int64_t i = 0; i < n; i++) {
        t[i] = (struct hm_named_tensor){.name = v[i].spec.name, .ndim = v[i].spec.ndim,
                                        .shape = v[i].spec.shape};
        if (!v[i].narrow) {
            t[i].data = host ? host + (v[i].data - m->storage) : v[i].data;
        } else {
            t[i].narrow = hbits ? hbits + (v[i].narrow - nw->bits) : v[i].narrow;
            t[i].narrow_dtype = ndt;
        }
    }
    enum hm_status st = hm_ckpt_write(path, flags, &m->cfg, provenance, t, n, dtype,
                                      extra_meta, err);
    free(host);
    free(hbits);
    free(t);
    free(v);
    return st;
}
