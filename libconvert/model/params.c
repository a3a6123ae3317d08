/* params.c — the one tensor table (see params.h).
 *
 * One row per tensor kind: its name in each family (NULL = the family has
 * none), the mixers that have it, its shape in symbolic dimensions, its
 * group, whether weight decay applies, and the condition under which a
 * family stores it (llama biases are optional, a tied lm_head is absent).
 * Row order is the storage order and the order of hm_param_specs().
 *
 * Gotchas:
 *  - llama's q_proj, k_proj, v_proj rows share HM_SLOT_QKV_W and must stay
 *    adjacent (weights, then biases): the skeleton runs them as one matmul
 *    whose output is [q | k | v] (contract §1b, the order the HedgeMamba conv
 *    reads);
 *  - the NeoX order is the one every landed checkpoint and the tests'
 *    double reference (flat vector in spec order) rely on: do not reorder. */
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

/* symbolic dimensions */
enum dim { X_, XD, XI, XV, XQKV, XATT, XKV, XNH, XP, XF, XK };

enum cond { ALWAYS = 0, ATTN_BIAS, MLP_BIAS, UNTIED };

#define MX_ALL 7u
#define MX_SOFTMAX (1u << HM_MIXER_SOFTMAX)
#define MX_FMAP ((1u << HM_MIXER_HEDGEHOG) | (1u << HM_MIXER_HEDGEMAMBA))
#define MX_SSM (1u << HM_MIXER_HEDGEMAMBA)

struct tdef {
    const char *name[HM_FAMILY_COUNT]; /* full name, or the suffix after the layer prefix */
    int per_layer;
    unsigned mixers;
    enum cond cond;
    enum hm_slot slot;
    enum hm_param_group group;
    int is_matrix;
    int ndim;
    enum dim shape[3];
};

static const char *layer_prefix[HM_FAMILY_COUNT] = {"gpt_neox.layers.", "model.layers."};

#define G(nx, ll, slot, grp, mat, nd, a, b) {{nx, ll}, 0, MX_ALL, ALWAYS, slot, grp, mat, nd, {a, b, X_}}
static const struct tdef head_rows[] = {
    G("gpt_neox.embed_in.weight", "model.embed_tokens.weight", HM_SLOT_EMBED, HM_PG_EMBED, 1, 2,
      XV, XD),
};
static const struct tdef tail_rows[] = {
    G("gpt_neox.final_layer_norm.weight", "model.norm.weight", HM_SLOT_NORMF_W, HM_PG_NORM, 0, 1,
      XD, X_),
    G("gpt_neox.final_layer_norm.bias", NULL, HM_SLOT_NORMF_B, HM_PG_NORM, 0, 1, XD, X_),
    {{"embed_out.weight", "lm_head.weight"}, 0, MX_ALL, UNTIED, HM_SLOT_HEAD, HM_PG_EMBED, 1, 2,
     {XV, XD, X_}},
};
#undef G

#define L_(nx, ll, mx, cond, slot, grp, mat, nd, a, b, c) \
    {{nx, ll}, 1, mx, cond, slot, grp, mat, nd, {a, b, c}}
static const struct tdef layer_rows[] = {
    L_("input_layernorm.weight", "input_layernorm.weight", MX_ALL, ALWAYS, HM_SLOT_LN1_W,
       HM_PG_NORM, 0, 1, XD, X_, X_),
    L_("input_layernorm.bias", NULL, MX_ALL, ALWAYS, HM_SLOT_LN1_B, HM_PG_NORM, 0, 1, XD, X_, X_),
    L_("post_attention_layernorm.weight", "post_attention_layernorm.weight", MX_ALL, ALWAYS,
       HM_SLOT_LN2_W, HM_PG_NORM, 0, 1, XD, X_, X_),
    L_("post_attention_layernorm.bias", NULL, MX_ALL, ALWAYS, HM_SLOT_LN2_B, HM_PG_NORM, 0, 1, XD,
       X_, X_),
    L_("attention.query_key_value.weight", "self_attn.q_proj.weight", MX_ALL, ALWAYS,
       HM_SLOT_QKV_W, HM_PG_MIXER, 1, 2, XQKV, XD, X_), /* llama: [n_h p, d] (XQKV → XATT) */
    L_(NULL, "self_attn.k_proj.weight", MX_ALL, ALWAYS, HM_SLOT_QKV_W, HM_PG_MIXER, 1, 2, XKV, XD,
       X_),
    L_(NULL, "self_attn.v_proj.weight", MX_ALL, ALWAYS, HM_SLOT_QKV_W, HM_PG_MIXER, 1, 2, XKV, XD,
       X_),
    L_("attention.query_key_value.bias", "self_attn.q_proj.bias", MX_ALL, ATTN_BIAS,
       HM_SLOT_QKV_B, HM_PG_MIXER, 0, 1, XQKV, X_, X_),
    L_(NULL, "self_attn.k_proj.bias", MX_ALL, ATTN_BIAS, HM_SLOT_QKV_B, HM_PG_MIXER, 0, 1, XKV,
       X_, X_),
    L_(NULL, "self_attn.v_proj.bias", MX_ALL, ATTN_BIAS, HM_SLOT_QKV_B, HM_PG_MIXER, 0, 1, XKV,
       X_, X_),
    L_("attention.dense.weight", "self_attn.o_proj.weight", MX_ALL, ALWAYS, HM_SLOT_DENSE_W,
       HM_PG_MIXER, 1, 2, XD, XATT, X_),
    L_("attention.dense.bias", "self_attn.o_proj.bias", MX_ALL, ATTN_BIAS, HM_SLOT_DENSE_B,
       HM_PG_MIXER, 0, 1, XD, X_, X_),
    L_("attention.feature_map_q.weight", "self_attn.feature_map_q.weight", MX_FMAP, ALWAYS,
       HM_SLOT_FQ_W, HM_PG_FEATURE_MAP, 1, 3, XNH, XP, XF),
    L_("attention.feature_map_q.bias", "self_attn.feature_map_q.bias", MX_FMAP, ALWAYS,
       HM_SLOT_FQ_B, HM_PG_FEATURE_MAP, 0, 2, XNH, XF, X_),
    L_("attention.feature_map_k.weight", "self_attn.feature_map_k.weight", MX_FMAP, ALWAYS,
       HM_SLOT_FK_W, HM_PG_FEATURE_MAP, 1, 3, XNH, XP, XF),
    L_("attention.feature_map_k.bias", "self_attn.feature_map_k.bias", MX_FMAP, ALWAYS,
       HM_SLOT_FK_B, HM_PG_FEATURE_MAP, 0, 2, XNH, XF, X_),
    L_("attention.conv1d.weight", "self_attn.conv1d.weight", MX_SSM, ALWAYS, HM_SLOT_CONV_W,
       HM_PG_CONV, 1, 2, XQKV, XK, X_),
    L_("attention.conv1d.bias", "self_attn.conv1d.bias", MX_SSM, ALWAYS, HM_SLOT_CONV_B,
       HM_PG_CONV, 0, 1, XQKV, X_, X_),
    L_("attention.dt_proj.weight", "self_attn.dt_proj.weight", MX_SSM, ALWAYS, HM_SLOT_DT_W,
       HM_PG_SSM, 1, 2, XNH, XD, X_),
    L_("attention.dt_proj.bias", "self_attn.dt_proj.bias", MX_SSM, ALWAYS, HM_SLOT_DT_B,
       HM_PG_SSM, 0, 1, XNH, X_, X_),
    L_("attention.A", "self_attn.A", MX_SSM, ALWAYS, HM_SLOT_A, HM_PG_SSM, 0, 1, XNH, X_, X_),
    L_("attention.D", "self_attn.D", MX_SSM, ALWAYS, HM_SLOT_D, HM_PG_SSM, 0, 1, XNH, X_, X_),
    L_("attention.gate_proj.weight", "self_attn.gate_proj.weight", MX_SSM, ALWAYS,
       HM_SLOT_GATE_W, HM_PG_GATE, 1, 2, XATT, XD, X_),
    L_("attention.gate_proj.bias", "self_attn.gate_proj.bias", MX_SSM, ALWAYS, HM_SLOT_GATE_B,
       HM_PG_GATE, 0, 1, XATT, X_, X_),
    L_(NULL, "mlp.gate_proj.weight", MX_ALL, ALWAYS, HM_SLOT_FCG_W, HM_PG_MLP, 1, 2, XI, XD, X_),
    L_(NULL, "mlp.gate_proj.bias", MX_ALL, MLP_BIAS, HM_SLOT_FCG_B, HM_PG_MLP, 0, 1, XI, X_, X_),
    L_("mlp.dense_h_to_4h.weight", "mlp.up_proj.weight", MX_ALL, ALWAYS, HM_SLOT_FC1_W,
       HM_PG_MLP, 1, 2, XI, XD, X_),
    L_("mlp.dense_h_to_4h.bias", "mlp.up_proj.bias", MX_ALL, MLP_BIAS, HM_SLOT_FC1_B, HM_PG_MLP,
       0, 1, XI, X_, X_),
    L_("mlp.dense_4h_to_h.weight", "mlp.down_proj.weight", MX_ALL, ALWAYS, HM_SLOT_FC2_W,
       HM_PG_MLP, 1, 2, XD, XI, X_),
    L_("mlp.dense_4h_to_h.bias", "mlp.down_proj.bias", MX_ALL, MLP_BIAS, HM_SLOT_FC2_B,
       HM_PG_MLP, 0, 1, XD, X_, X_),
};
#undef L_

#define NROWS(a) (sizeof(a) / sizeof((a)[0]))

static int64_t dim_value(const struct hm_config *c, enum dim x)
{
    switch (x) {
    case XD: return c->hidden_size;
    case XI: return c->intermediate_size;
    case XV: return c->vocab_size;
    /* the NeoX fused qkv is 3d; llama's q_proj alone is n_h p */
    case XQKV: return c->family == HM_FAMILY_LLAMA ? c->attn_dim : c->qkv_dim;
    case XATT: return c->attn_dim;
    case XKV: return c->num_key_value_heads * c->head_dim;
    case XNH: return c->num_attention_heads;
    case XP: return c->head_dim;
    case XF: return c->feature_dim;
    case XK: return c->conv_width;
    default: return 0;
    }
}

/* Whether the row exists in layer l (-1: a model-level row): its mixer is
 * the layer's (a hybrid's kept layers are softmax). */
static int present(const struct tdef *t, const struct hm_config *c, int64_t l)
{
    if (!t->name[c->family] || !(t->mixers & (1u << hm_layer_mixer(c, l))))
        return 0;
    switch (t->cond) {
    case ATTN_BIAS: return c->attention_bias;
    case MLP_BIAS: return c->mlp_bias;
    case UNTIED: return !c->tie_word_embeddings;
    default: return 1;
    }
}

/* The mixer's conv runs over the whole projection output (contract §3, §1b). */
static void fix_conv_rows(const struct tdef *t, const struct hm_config *c, int64_t *shape)
{
    if (c->family == HM_FAMILY_LLAMA && (t->slot == HM_SLOT_CONV_W || t->slot == HM_SLOT_CONV_B))
        shape[0] = c->qkv_dim;
}

static int add(struct hm_param_spec *out, const struct tdef *t, const struct hm_config *c,
               int64_t layer)
{
    memset(out, 0, sizeof *out);
    if (layer >= 0)
        snprintf(out->name, sizeof out->name, "%s%lld.%s", layer_prefix[c->family],
                 (long long)layer, t->name[c->family]);
    else
        snprintf(out->name, sizeof out->name, "%s", t->name[c->family]);
    out->ndim = t->ndim;
    int64_t numel = 1;
    for (int k = 0; k < t->ndim; k++) {
        out->shape[k] = dim_value(c, t->shape[k]);
    }
    fix_conv_rows(t, c, out->shape);
    for (int k = 0; k < t->ndim; k++)
        if (hm_mul_i64(numel, out->shape[k], &numel))
            return -1;
    out->group = t->group;
    out->layer = layer;
    out->is_matrix = t->is_matrix;
    out->slot = t->slot;
    return 0;
}

int64_t hm_param_specs(const struct hm_config *cfg, struct hm_param_spec **out)
{
    *out = NULL;
    const int64_t L = cfg->num_hidden_layers;
    if (L < 0 || L > 100000)
        return -1;
    size_t cap = NROWS(head_rows) + NROWS(tail_rows) + (size_t)L * NROWS(layer_rows);
    struct hm_param_spec *v = calloc(cap + 1, sizeof *v);
    if (!v)
        return -1;
    int64_t n = 0;
    int bad = 0;
    for (size_t i = 0; i < NROWS(head_rows); i++)
        if (present(&head_rows[i], cfg, -1))
            bad |= add(&v[n++], &head_rows[i], cfg, -1);
    for (int64_t l = 0; l < L; l++)
        for (size_t i = 0; i < NROWS(layer_rows); i++)
            if (present(&layer_rows[i], cfg, l))
                bad |= add(&v[n++], &layer_rows[i], cfg, l);
    for (size_t i = 0; i < NROWS(tail_rows); i++)
        if (present(&tail_rows[i], cfg, -1))
            bad |= add(&v[n++], &tail_rows[i], cfg, -1);
    if (bad) {
        free(v);
        return -1;
    }
    *out = v;
    return n;
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

int hm_param_name(const struct hm_config *cfg, enum hm_slot slot, int64_t l, char *buf,
                  size_t size)
{
    const struct tdef *sets[3] = {head_rows, layer_rows, tail_rows};
    size_t counts[3] = {NROWS(head_rows), NROWS(layer_rows), NROWS(tail_rows)};
    for (int s = 0; s < 3; s++)
        for (size_t i = 0; i < counts[s]; i++) {
            const struct tdef *t = &sets[s][i];
            if (t->slot != slot || !t->name[cfg->family])
                continue;
            if (t->per_layer)
                snprintf(buf, size, "%s%lld.%s", layer_prefix[cfg->family], (long long)l,
                         t->name[cfg->family]);
            else
                snprintf(buf, size, "%s", t->name[cfg->family]);
            return 0;
        }
    return -1;
}

enum hm_param_group hm_param_group_of(const char *name)
{
    if (hm_is_ignored_buffer(name))
        return HM_PG_BUFFER;
    for (int f = 0; f < HM_FAMILY_COUNT; f++) {
        for (size_t i = 0; i < NROWS(head_rows); i++)
            if (head_rows[i].name[f] && strcmp(name, head_rows[i].name[f]) == 0)
                return head_rows[i].group;
        for (size_t i = 0; i < NROWS(tail_rows); i++)
            if (tail_rows[i].name[f] && strcmp(name, tail_rows[i].name[f]) == 0)
                return tail_rows[i].group;
        size_t k = strlen(layer_prefix[f]);
        if (strncmp(name, layer_prefix[f], k) != 0)
            continue;
        const char *s = name + k;
        if (*s < '0' || *s > '9')
            continue;
        while (*s >= '0' && *s <= '9')
            s++;
        if (*s++ != '.')
            continue;
        for (size_t i = 0; i < NROWS(layer_rows); i++)
            if (layer_rows[i].name[f] && strcmp(s, layer_rows[i].name[f]) == 0)
                return layer_rows[i].group;
    }
    return HM_PG_OTHER;
}
