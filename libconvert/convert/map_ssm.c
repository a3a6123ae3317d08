/* map_ssm.c — the exact Hedgehog → HedgeMamba mapping (see map_ssm.h). */
#include "map_ssm.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "batches.h"
#include "ckpt_write.h"
#include "model.h"
#include "params.h"

enum hm_status hm_map_ssm_config(const struct hm_config *in, const struct hm_map_opts *o,
                                 struct hm_config *out, struct hm_error *err)
{
    if (in->mixer == HM_MIXER_HEDGEMAMBA)
        return hm_error_set(err, HM_ERR_INVALID, "the input is already a hedgemamba model");
    *out = *in;
    if (in->mixer == HM_MIXER_SOFTMAX)
        out->feature_dim = o->feature_dim;
    out->mixer = HM_MIXER_HEDGEMAMBA;
    for (int64_t l = 0; l < in->num_hidden_layers && l < HM_KEPT_MAX; l++) {
        if (!(o->keep[l >> 6] >> (l & 63) & 1))
            continue;
        /* a hedgehog layer's attention tensors may have trained (stage 1b) */
        if (in->mixer == HM_MIXER_HEDGEHOG && hm_layer_mixer(in, l) != HM_MIXER_SOFTMAX)
            return hm_error_set(err, HM_ERR_INVALID,
                                "layer %lld of the hedgehog input is linear attention, and its "
                                "attention tensors need not be the teacher's: keep it from "
                                "stage 1 on (hm-linearize --keep-attention), or map from the "
                                "teacher", (long long)l);
        hm_config_set_kept(out, l, 1);
    }
    out->conv_width = o->conv_width;
    out->components = o->components;
    out->decay_init = o->decay_A ? HM_DECAY_TEACHER : HM_DECAY_IDENTITY;
    if (o->decay_A && o->init == HM_MAP_RANDOM)
        return hm_error_set(err, HM_ERR_INVALID,
                            "a decay from teacher statistics needs the identity init");
    if (o->decay_A && !(o->components & HM_COMP_SSM))
        return hm_error_set(err, HM_ERR_INVALID,
                            "a decay from teacher statistics needs the ssm component active "
                            "(an inactive one keeps A = 0)");
    return hm_config_finish(out, err);
}

/* The mixer tensors the naive baseline re-draws (everything of the
 * attention block; feature maps included). */
static int is_mixer(enum hm_param_group g)
{
    return g == HM_PG_MIXER || g == HM_PG_FEATURE_MAP || g == HM_PG_SSM || g == HM_PG_CONV ||
           g == HM_PG_GATE;
}

/* Values of a new (or re-drawn) tensor v: [numel]. Identity values come
 * from the mixer's own identity init (hm_model_new → hm_model_mixer_identity,
 * given as ident); the naive baseline draws contract §3's random values. */
static void init_tensor(float *v, const float *ident, int64_t numel,
                        const struct hm_param_spec *s, const struct hm_config *c,
                        const struct hm_map_opts *o, uint64_t *rng)
{
    if (o->init != HM_MAP_RANDOM) {
        memcpy(v, ident, sizeof(float) * (size_t)numel);
        return;
    }
    float fill = 0.0f;
    double std = 0.0;
    if (s->slot == HM_SLOT_DT_B)
        fill = (float)HM_DT_BIAS_IDENTITY;
    else if (s->slot == HM_SLOT_GATE_B)
        fill = (float)HM_GATE_BIAS_IDENTITY;
    else if (s->slot == HM_SLOT_A)
        fill = -1.0f;
    else if (s->is_matrix)
        std = s->slot == HM_SLOT_CONV_W ? sqrt(1.0 / (double)c->conv_width) : 0.02;
    for (int64_t i = 0; i < numel; i++)
        v[i] = std > 0 ? (float)(std * hm_rand_normal(rng)) : fill;
}

enum hm_status hm_map_ssm_write(const struct hm_ckpt *ck, const struct hm_map_opts *o,
                                const char *path, int flags, const char *provenance,
                                struct hm_error *err)
{
    struct hm_config cfg;
    enum hm_status st = hm_model_check_tensors(ck, err);
    if (st == HM_OK)
        st = hm_map_ssm_config(hm_ckpt_config(ck), o, &cfg, err);
    if (st != HM_OK)
        return st;
    struct hm_model *ident = NULL; /* every tensor at its identity value */
    if ((st = hm_model_new(&cfg, &ident, err)) != HM_OK)
        return st;
    const int64_t ns = ident->n_views;
    struct hm_st_writer *w = hm_st_writer_new();
    float **owned = calloc((size_t)(ns > 0 ? ns : 1), sizeof(float *));
    uint64_t rng = o->seed;
    if (!w || !owned) {
        st = hm_error_set(err, HM_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (int64_t i = 0; i < ns && st == HM_OK; i++) {
        const struct hm_param_spec *s = &ident->views[i].spec;
        int64_t j = hm_ckpt_find(ck, s->name);
        int redraw = o->init == HM_MAP_RANDOM && is_mixer(s->group) &&
                     hm_layer_mixer(&cfg, s->layer) != HM_MIXER_SOFTMAX; /* kept: the teacher's */
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
            st = hm_ckpt_writer_add_tensor(w, s->name, ck, j, err);
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
        init_tensor(owned[i], ident->views[i].data, numel, s, &cfg, o, &rng);
        if (s->slot == HM_SLOT_A && o->decay_A)
            memcpy(owned[i], o->decay_A + s->layer * cfg.num_attention_heads,
                   sizeof(float) * (size_t)numel);
        st = hm_st_writer_add(w, s->name, HM_DTYPE_F32, s->ndim, s->shape, owned[i], err);
    }
    if (st == HM_OK)
        st = hm_ckpt_write_writer(w, &cfg, provenance, NULL, path, flags, err);
out:
    for (int64_t i = 0; owned && i < ns; i++)
        free(owned[i]);
    free(owned);
    hm_model_free(ident);
    hm_st_writer_free(w);
    return st;
}
