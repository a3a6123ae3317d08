#include "neox_views.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt_write.h"

static float *resolve(const struct hm_neox *m, const struct hm_param_spec *s)
{
    if (s->layer < 0) {
        if (strcmp(s->name, "gpt_neox.embed_in.weight") == 0)
            return m->embed_in;
        if (strcmp(s->name, "embed_out.weight") == 0)
            return m->embed_out;
        if (strcmp(s->name, "gpt_neox.final_layer_norm.weight") == 0)
            return m->lnf_w;
        if (strcmp(s->name, "gpt_neox.final_layer_norm.bias") == 0)
            return m->lnf_b;
        return NULL;
    }
    const struct hm_neox_layer *ly = &m->layers[s->layer];
    /* "gpt_neox.layers.{l}.<suffix>" */
    const char *suffix = strchr(s->name + strlen("gpt_neox.layers."), '.') + 1;
    static const struct { const char *suffix; size_t off; } map[] = {
        {"input_layernorm.weight", offsetof(struct hm_neox_layer, ln1_w)},
        {"input_layernorm.bias", offsetof(struct hm_neox_layer, ln1_b)},
        {"post_attention_layernorm.weight", offsetof(struct hm_neox_layer, ln2_w)},
        {"post_attention_layernorm.bias", offsetof(struct hm_neox_layer, ln2_b)},
        {"attention.query_key_value.weight", offsetof(struct hm_neox_layer, qkv_w)},
        {"attention.query_key_value.bias", offsetof(struct hm_neox_layer, qkv_b)},
        {"attention.dense.weight", offsetof(struct hm_neox_layer, dense_w)},
        {"attention.dense.bias", offsetof(struct hm_neox_layer, dense_b)},
        {"mlp.dense_h_to_4h.weight", offsetof(struct hm_neox_layer, fc1_w)},
        {"mlp.dense_h_to_4h.bias", offsetof(struct hm_neox_layer, fc1_b)},
        {"mlp.dense_4h_to_h.weight", offsetof(struct hm_neox_layer, fc2_w)},
        {"mlp.dense_4h_to_h.bias", offsetof(struct hm_neox_layer, fc2_b)},
        {"attention.feature_map_q.weight", offsetof(struct hm_neox_layer, fq_w)},
        {"attention.feature_map_q.bias", offsetof(struct hm_neox_layer, fq_b)},
        {"attention.feature_map_k.weight", offsetof(struct hm_neox_layer, fk_w)},
        {"attention.feature_map_k.bias", offsetof(struct hm_neox_layer, fk_b)},
        {"attention.conv1d.weight", offsetof(struct hm_neox_layer, conv_w)},
        {"attention.conv1d.bias", offsetof(struct hm_neox_layer, conv_b)},
        {"attention.dt_proj.weight", offsetof(struct hm_neox_layer, dt_w)},
        {"attention.dt_proj.bias", offsetof(struct hm_neox_layer, dt_b)},
        {"attention.A", offsetof(struct hm_neox_layer, A)},
        {"attention.D", offsetof(struct hm_neox_layer, D)},
        {"attention.gate_proj.weight", offsetof(struct hm_neox_layer, gate_w)},
        {"attention.gate_proj.bias", offsetof(struct hm_neox_layer, gate_b)},
    };
    for (size_t i = 0; i < sizeof map / sizeof *map; i++)
        if (strcmp(suffix, map[i].suffix) == 0)
            return *(float *const *)((const char *)ly + map[i].off);
    return NULL;
}

int64_t hm_neox_views(const struct hm_neox *m, struct hm_tensor_view **out)
{
    struct hm_param_spec *specs = NULL;
    *out = NULL;
    int64_t n = hm_param_specs(&m->cfg, &specs);
    if (n < 0)
        return -1;
    struct hm_tensor_view *v = calloc((size_t)n + 1, sizeof *v);
    if (!v) {
        free(specs);
        return -1;
    }
    for (int64_t i = 0; i < n; i++) {
        v[i].spec = specs[i];
        v[i].data = resolve(m, &specs[i]);
        v[i].numel = 1;
        for (int k = 0; k < specs[i].ndim; k++)
            v[i].numel *= specs[i].shape[k];
    }
    free(specs);
    *out = v;
    return n;
}

enum hm_status hm_neox_save(const struct hm_neox *m, const char *path, int flags,
                            const char *provenance, enum hm_dtype dtype,
                            const char *const *extra_meta, struct hm_error *err)
{
    struct hm_tensor_view *v = NULL;
    int64_t n = hm_neox_views(m, &v);
    if (n < 0)
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    struct hm_named_tensor *t = calloc((size_t)n + 1, sizeof *t);
    if (!t) {
        free(v);
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    }
    for (int64_t i = 0; i < n; i++)
        t[i] = (struct hm_named_tensor){v[i].spec.name, v[i].spec.ndim, v[i].spec.shape,
                                        v[i].data};
    enum hm_status st = hm_ckpt_write(path, flags, &m->cfg, provenance, t, n, dtype,
                                      extra_meta, err);
    free(t);
    free(v);
    return st;
}
