/* map_ssm.c — the exact Hedgehog → HedgeMamba mapping (see map_ssm.h). */
#include "map_ssm.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "batches.h"
#include "ckpt_write.h"
#include "neox.h"
#include "params.h"

enum hm_status hm_map_ssm_config(const struct hm_config *in, const struct hm_map_opts *o,
                                 struct hm_config *out, struct hm_error *err)
{
    if (in->arch == HM_ARCH_HEDGEMAMBA)
        return hm_error_set(err, HM_ERR_INVALID, "the input is already a hedgemamba model");
    *out = *in;
    if (in->arch == HM_ARCH_GPT_NEOX)
        out->feature_dim = o->feature_dim;
    out->arch = HM_ARCH_HEDGEMAMBA;
    out->conv_width = o->conv_width;
    out->components = o->components;
    return hm_config_finish(out, err);
}

/* The mixer tensors the naive baseline re-draws (everything of the
 * attention block; feature maps included). */
static int is_mixer(enum hm_param_group g)
{
    return g == HM_PG_MIXER || g == HM_PG_FEATURE_MAP || g == HM_PG_SSM || g == HM_PG_CONV ||
           g == HM_PG_GATE;
}

static int has_suffix(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

/* Values of a new (or re-drawn) tensor; v: [numel]. */
static void init_tensor(float *v, int64_t numel, const struct hm_param_spec *s,
                        const struct hm_config *c, const struct hm_map_opts *o, uint64_t *rng)
{
    const int rnd = o->init == HM_MAP_RANDOM;
    const int64_t K = c->conv_width, p = c->head_dim, F = c->feature_dim;
    float fill = 0.0f;
    double std = 0.0;
    if (has_suffix(s->name, "dt_proj.bias"))
        fill = (float)HM_DT_BIAS_IDENTITY;
    else if (has_suffix(s->name, "gate_proj.bias"))
        fill = (float)HM_GATE_BIAS_IDENTITY;
    else if (has_suffix(s->name, "attention.A"))
        fill = rnd ? -1.0f : 0.0f;
    else if (rnd && s->ndim >= 2 && !has_suffix(s->name, ".bias"))
        std = has_suffix(s->name, "conv1d.weight") ? sqrt(1.0 / (double)K) : 0.02;
    for (int64_t i = 0; i < numel; i++)
        v[i] = std > 0 ? (float)(std * hm_rand_normal(rng)) : fill;
    if (rnd)
        return;
    if (has_suffix(s->name, "conv1d.weight"))
        for (int64_t ch = 0; ch < s->shape[0]; ch++)
            v[ch * K + K - 1] = 1.0f;
    if (has_suffix(s->name, "feature_map_q.weight") || has_suffix(s->name, "feature_map_k.weight"))
        for (int64_t h = 0; h < s->shape[0]; h++)
            for (int64_t i = 0; i < p && i < F; i++)
                v[(h * p + i) * F + i] = 1.0f;
}

enum hm_status hm_map_ssm_write(const struct hm_ckpt *ck, const struct hm_map_opts *o,
                                const char *path, int flags, const char *provenance,
                                struct hm_error *err)
{
    struct hm_config cfg;
    enum hm_status st = hm_map_ssm_config(hm_ckpt_config(ck), o, &cfg, err);
    if (st != HM_OK)
        return st;
    struct hm_param_spec *specs = NULL;
    int64_t ns = hm_param_specs(&cfg, &specs);
    struct hm_st_writer *w = hm_st_writer_new();
    float **owned = calloc((size_t)(ns > 0 ? ns : 1), sizeof(float *));
    uint64_t rng = o->seed;
    if (ns < 0 || !w || !owned) {
        st = hm_error_set(err, HM_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (int64_t i = 0; i < ns && st == HM_OK; i++) {
        const struct hm_param_spec *s = &specs[i];
        int64_t j = hm_ckpt_find(ck, s->name);
        int redraw = o->init == HM_MAP_RANDOM && is_mixer(s->group);
        if (j >= 0 && !redraw) {
            /* copied byte for byte; the shape must be what the config says */
            const struct hm_ckpt_tensor *t = hm_ckpt_tensor_at(ck, j);
            int same = t->ndim == s->ndim;
            for (int k = 0; same && k < s->ndim; k++)
                same = t->shape[k] == s->shape[k];
            if (!same) {
                st = hm_error_set(err, HM_ERR_INVALID, "tensor '%s' has the wrong shape",
                                  s->name);
                break;
            }
            st = hm_st_writer_add(w, s->name, t->dtype, t->ndim, t->shape,
                                  hm_ckpt_data_view(ck, j), err);
            continue;
        }
        if (j < 0 && !is_mixer(s->group)) {
            st = hm_error_set(err, HM_ERR_INVALID, "tensor '%s' is missing", s->name);
            break;
        }
        if (j < 0 && s->group == HM_PG_MIXER) {
            st = hm_error_set(err, HM_ERR_INVALID, "tensor '%s' is missing", s->name);
            break;
        }
        int64_t numel = 1;
        for (int k = 0; k < s->ndim; k++)
            numel *= s->shape[k];
        owned[i] = malloc(sizeof(float) * (size_t)(numel > 0 ? numel : 1));
        if (!owned[i]) {
            st = hm_error_set(err, HM_ERR_NOMEM, "out of memory");
            break;
        }
        init_tensor(owned[i], numel, s, &cfg, o, &rng);
        st = hm_st_writer_add(w, s->name, HM_DTYPE_F32, s->ndim, s->shape, owned[i], err);
    }
    if (st == HM_OK)
        st = hm_ckpt_write_writer(w, &cfg, provenance, NULL, path, flags, err);
out:
    for (int64_t i = 0; owned && i < ns; i++)
        free(owned[i]);
    free(owned);
    free(specs);
    hm_st_writer_free(w);
    return st;
}
