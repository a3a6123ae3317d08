#include "params.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"

static const char *group_names[HM_PG_COUNT] = {
    "embeddings", "attention", "mlp", "norms", "feature_maps", "ssm", "conv", "gate",
    "buffers", "other"};

const char *hm_param_group_name(enum hm_param_group g)
{
    return (unsigned)g < HM_PG_COUNT ? group_names[g] : "other";
}

static int has_suffix(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

enum hm_param_group hm_param_group_of(const char *name)
{
    if (hm_is_ignored_buffer(name))
        return HM_PG_BUFFER;
    if (strcmp(name, "gpt_neox.embed_in.weight") == 0 || strcmp(name, "embed_out.weight") == 0)
        return HM_PG_EMBED;
    if (strncmp(name, "gpt_neox.final_layer_norm.", 26) == 0 ||
        strstr(name, ".input_layernorm.") || strstr(name, ".post_attention_layernorm."))
        return HM_PG_NORM;
    if (strstr(name, ".attention.feature_map_q.") || strstr(name, ".attention.feature_map_k."))
        return HM_PG_FEATURE_MAP;
    if (strstr(name, ".attention.conv1d."))
        return HM_PG_CONV;
    if (strstr(name, ".attention.gate_proj."))
        return HM_PG_GATE;
    if (strstr(name, ".attention.dt_proj.") || has_suffix(name, ".attention.A") ||
        has_suffix(name, ".attention.D"))
        return HM_PG_SSM;
    if (strstr(name, ".attention.query_key_value.") || strstr(name, ".attention.dense."))
        return HM_PG_MIXER;
    if (strstr(name, ".mlp.dense_h_to_4h.") || strstr(name, ".mlp.dense_4h_to_h."))
        return HM_PG_MLP;
    return HM_PG_OTHER;
}

struct spec_list {
    struct hm_param_spec *v;
    int64_t n;
};

static void add(struct spec_list *s, int64_t layer, const char *suffix, int ndim, int64_t a,
                int64_t b, int64_t c, int is_matrix)
{
    struct hm_param_spec *p = &s->v[s->n++];
    if (layer >= 0)
        snprintf(p->name, sizeof p->name, "gpt_neox.layers.%lld.%s", (long long)layer, suffix);
    else
        snprintf(p->name, sizeof p->name, "%s", suffix);
    p->ndim = ndim;
    p->shape[0] = a;
    p->shape[1] = b;
    p->shape[2] = c;
    p->layer = layer;
    p->is_matrix = is_matrix;
    p->group = hm_param_group_of(p->name);
}

int64_t hm_param_specs(const struct hm_config *cfg, struct hm_param_spec **out)
{
    int64_t L = cfg->num_hidden_layers, d = cfg->hidden_size, I = cfg->intermediate_size;
    int64_t V = cfg->vocab_size, nh = cfg->num_attention_heads, p = cfg->head_dim;
    int64_t F = cfg->feature_dim, K = cfg->conv_width;
    struct spec_list s = {calloc((size_t)(L * 32 + 8), sizeof(struct hm_param_spec)), 0};
    if (!s.v)
        return -1;
    add(&s, -1, "gpt_neox.embed_in.weight", 2, V, d, 0, 1);
    for (int64_t l = 0; l < L; l++) {
        add(&s, l, "input_layernorm.weight", 1, d, 0, 0, 0);
        add(&s, l, "input_layernorm.bias", 1, d, 0, 0, 0);
        add(&s, l, "post_attention_layernorm.weight", 1, d, 0, 0, 0);
        add(&s, l, "post_attention_layernorm.bias", 1, d, 0, 0, 0);
        add(&s, l, "attention.query_key_value.weight", 2, 3 * d, d, 0, 1);
        add(&s, l, "attention.query_key_value.bias", 1, 3 * d, 0, 0, 0);
        add(&s, l, "attention.dense.weight", 2, d, d, 0, 1);
        add(&s, l, "attention.dense.bias", 1, d, 0, 0, 0);
        if (cfg->arch != HM_ARCH_GPT_NEOX) {
            add(&s, l, "attention.feature_map_q.weight", 3, nh, p, F, 1);
            add(&s, l, "attention.feature_map_q.bias", 2, nh, F, 0, 0);
            add(&s, l, "attention.feature_map_k.weight", 3, nh, p, F, 1);
            add(&s, l, "attention.feature_map_k.bias", 2, nh, F, 0, 0);
        }
        if (cfg->arch == HM_ARCH_HEDGEMAMBA) {
            add(&s, l, "attention.conv1d.weight", 2, 3 * d, K, 0, 1);
            add(&s, l, "attention.conv1d.bias", 1, 3 * d, 0, 0, 0);
            add(&s, l, "attention.dt_proj.weight", 2, nh, d, 0, 1);
            add(&s, l, "attention.dt_proj.bias", 1, nh, 0, 0, 0);
            add(&s, l, "attention.A", 1, nh, 0, 0, 0);
            add(&s, l, "attention.D", 1, nh, 0, 0, 0);
            add(&s, l, "attention.gate_proj.weight", 2, d, d, 0, 1);
            add(&s, l, "attention.gate_proj.bias", 1, d, 0, 0, 0);
        }
        add(&s, l, "mlp.dense_h_to_4h.weight", 2, I, d, 0, 1);
        add(&s, l, "mlp.dense_h_to_4h.bias", 1, I, 0, 0, 0);
        add(&s, l, "mlp.dense_4h_to_h.weight", 2, d, I, 0, 1);
        add(&s, l, "mlp.dense_4h_to_h.bias", 1, d, 0, 0, 0);
    }
    add(&s, -1, "gpt_neox.final_layer_norm.weight", 1, d, 0, 0, 0);
    add(&s, -1, "gpt_neox.final_layer_norm.bias", 1, d, 0, 0, 0);
    add(&s, -1, "embed_out.weight", 2, V, d, 0, 1);
    *out = s.v;
    return s.n;
}

int64_t hm_param_count(const struct hm_config *cfg)
{
    struct hm_param_spec *s = NULL;
    int64_t n = hm_param_specs(cfg, &s), total = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t k = 1;
        for (int d = 0; d < s[i].ndim; d++)
            k *= s[i].shape[d];
        total += k;
    }
    free(s);
    return n < 0 ? -1 : total;
}
