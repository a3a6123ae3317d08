/* neox.c — GPT-NeoX teacher: weights and forward pass (SPEC §1). See neox.h.
 *
 * Gotchas that have caused bugs:
 *  - real Pythia files hold legacy buffers (attention.bias U8, masked_bias
 *    F16 -inf, rotary_emb.inv_freq); they are never read here;
 *  - the residual order matters only to the last ulp, but we follow HF:
 *    parallel  h = (mlp + attn) + h;  sequential  t = attn + h, h = mlp + t;
 *  - positions restart at 0 for every sequence (rotary pos0 = 0). */
#include "neox.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int64_t layer_floats(int64_t d, int64_t I)
{
    return 4 * d + 3 * d * d + 3 * d + d * d + d + I * d + I + d * I + d;
}

enum hm_status hm_neox_new(const struct hm_config *cfg, struct hm_neox **out,
                           struct hm_error *err)
{
    *out = NULL;
    const int fmaps = cfg->arch != HM_ARCH_GPT_NEOX;
    const int ssm = cfg->arch == HM_ARCH_HEDGEMAMBA;
    int64_t d = cfg->hidden_size, I = cfg->intermediate_size, V = cfg->vocab_size;
    int64_t L = cfg->num_hidden_layers, n_h = cfg->num_attention_heads;
    if (d <= 0 || I <= 0 || V <= 0 || L < 0 || n_h <= 0 || d % n_h || cfg->head_dim <= 0 ||
        cfg->rotary_dims < 0 || cfg->rotary_dims > cfg->head_dim || cfg->rotary_dims % 2)
        return hm_error_set(err, HM_ERR_INVALID, "inconsistent gpt_neox config");
    /* total floats, with overflow checks */
    int64_t per = 0, total = 0, t1, t2;
    if (hm_mul_i64(d, d, &t1) || hm_mul_i64(I, d, &t2) || hm_mul_i64(t1, 4, &t1) ||
        hm_mul_i64(t2, 2, &t2) || hm_add_i64(t1, t2, &per) ||
        hm_add_i64(per, 9 * d + I, &per) || hm_mul_i64(per, L, &total) ||
        hm_mul_i64(V, d, &t1) || hm_mul_i64(t1, 2, &t1) || hm_add_i64(total, t1, &total) ||
        hm_add_i64(total, 2 * d, &total) || total > (int64_t)(SIZE_MAX / sizeof(float)) / 2)
        return hm_error_set(err, HM_ERR_NOMEM, "model size overflows");
    if (per != layer_floats(d, I))
        return hm_error_set(err, HM_ERR_INVALID, "internal size mismatch");
    /* feature maps: q and k, W [n_h, p, F] and b [n_h, F] each */
    int64_t F = cfg->feature_dim, fm = 0;
    if (fmaps && (F < 1 || hm_mul_i64(n_h * (cfg->head_dim + 1), 2 * F, &fm) ||
                  hm_mul_i64(fm, L, &t1) || hm_add_i64(total, t1, &total)))
        return hm_error_set(err, HM_ERR_NOMEM, "model size overflows");
    /* HedgeMamba: conv [3d, K] + [3d], dt_proj [n_h, d] + [n_h], A, D, gate [d, d] + [d] */
    int64_t K = cfg->conv_width, sm = 3 * d * K + 3 * d + n_h * d + 3 * n_h + d * d + d;
    if (ssm && (K < 1 || hm_mul_i64(sm, L, &t1) || hm_add_i64(total, t1, &total)))
        return hm_error_set(err, HM_ERR_NOMEM, "model size overflows");

    struct hm_neox *m = calloc(1, sizeof *m);
    if (!m)
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory for the model");
    m->cfg = *cfg;
    m->n_params = total;
    m->storage = calloc((size_t)(total > 0 ? total : 1), sizeof(float));
    m->layers = calloc((size_t)(L > 0 ? L : 1), sizeof *m->layers);
    m->inv_freq = calloc((size_t)(cfg->rotary_dims / 2 + 1), sizeof(float));
    if (!m->storage || !m->layers || !m->inv_freq) {
        hm_neox_free(m);
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory for %lld model weights",
                            (long long)total);
    }
    float *p = m->storage;
#define TAKE(ptr, n) do { (ptr) = p; p += (n); } while (0)
    TAKE(m->embed_in, V * d);
    for (int64_t l = 0; l < L; l++) {
        struct hm_neox_layer *ly = &m->layers[l];
        TAKE(ly->ln1_w, d); TAKE(ly->ln1_b, d);
        TAKE(ly->ln2_w, d); TAKE(ly->ln2_b, d);
        TAKE(ly->qkv_w, 3 * d * d); TAKE(ly->qkv_b, 3 * d);
        TAKE(ly->dense_w, d * d); TAKE(ly->dense_b, d);
        TAKE(ly->fc1_w, I * d); TAKE(ly->fc1_b, I);
        TAKE(ly->fc2_w, d * I); TAKE(ly->fc2_b, d);
        if (fmaps) {
            int64_t hp = cfg->head_dim;
            TAKE(ly->fq_w, n_h * hp * F); TAKE(ly->fq_b, n_h * F);
            TAKE(ly->fk_w, n_h * hp * F); TAKE(ly->fk_b, n_h * F);
        }
        if (ssm) {
            TAKE(ly->conv_w, 3 * d * K); TAKE(ly->conv_b, 3 * d);
            TAKE(ly->dt_w, n_h * d); TAKE(ly->dt_b, n_h);
            TAKE(ly->A, n_h); TAKE(ly->D, n_h);
            TAKE(ly->gate_w, d * d); TAKE(ly->gate_b, d);
        }
        hm_neox_mixer_identity(m, l);
    }
    TAKE(m->lnf_w, d); TAKE(m->lnf_b, d);
    TAKE(m->embed_out, V * d);
#undef TAKE
    hm_rotary_inv_freq(m->inv_freq, cfg->rotary_dims, cfg->rotary_emb_base);
    *out = m;
    return HM_OK;
}

void hm_neox_free(struct hm_neox *m)
{
    if (!m)
        return;
    free(m->storage);
    free(m->layers);
    free(m->inv_freq);
    free(m);
}

void hm_neox_mixer_identity(struct hm_neox *m, int64_t l)
{
    const int64_t n_h = m->cfg.num_attention_heads, p = m->cfg.head_dim;
    const int64_t F = m->cfg.feature_dim, d = m->cfg.hidden_size, K = m->cfg.conv_width;
    struct hm_neox_layer *ly = &m->layers[l];
    if (!ly->fq_w)
        return;
    if (ly->conv_w) {
        memset(ly->conv_w, 0, sizeof(float) * (size_t)(3 * d * K));
        memset(ly->conv_b, 0, sizeof(float) * (size_t)(3 * d));
        for (int64_t ch = 0; ch < 3 * d; ch++)
            ly->conv_w[ch * K + K - 1] = 1.0f; /* the last tap is the current token */
        memset(ly->dt_w, 0, sizeof(float) * (size_t)(n_h * d));
        memset(ly->gate_w, 0, sizeof(float) * (size_t)(d * d));
        for (int64_t h = 0; h < n_h; h++) {
            ly->dt_b[h] = (float)HM_DT_BIAS_IDENTITY;
            ly->A[h] = 0.0f;
            ly->D[h] = 0.0f;
        }
        for (int64_t i = 0; i < d; i++)
            ly->gate_b[i] = (float)HM_GATE_BIAS_IDENTITY;
    }
    float *w[2] = {ly->fq_w, ly->fk_w}, *b[2] = {ly->fq_b, ly->fk_b};
    for (int k = 0; k < 2; k++) {
        memset(w[k], 0, sizeof(float) * (size_t)(n_h * p * F));
        memset(b[k], 0, sizeof(float) * (size_t)(n_h * F));
        for (int64_t h = 0; h < n_h; h++)
            for (int64_t i = 0; i < p && i < F; i++)
                w[k][(h * p + i) * F + i] = 1.0f; /* eye(p, F) */
    }
}

static enum hm_status load1(const struct hm_ckpt *ck, const char *name, float *dst, int ndim,
                            int64_t s0, int64_t s1, struct hm_error *err)
{
    int64_t shape[2] = {s0, s1};
    return hm_ckpt_load_f32(ck, name, ndim, shape, dst, err);
}

static enum hm_status load_featuremaps(const struct hm_ckpt *ck, struct hm_neox *m, int64_t l,
                                       struct hm_error *err)
{
    const int64_t n_h = m->cfg.num_attention_heads, p = m->cfg.head_dim;
    const int64_t F = m->cfg.feature_dim;
    struct hm_neox_layer *ly = &m->layers[l];
    struct { const char *suffix; float *dst; int ndim; int64_t shape[3]; } t[] = {
        {"feature_map_q.weight", ly->fq_w, 3, {n_h, p, F}},
        {"feature_map_q.bias", ly->fq_b, 2, {n_h, F, 0}},
        {"feature_map_k.weight", ly->fk_w, 3, {n_h, p, F}},
        {"feature_map_k.bias", ly->fk_b, 2, {n_h, F, 0}},
    };
    char name[192];
    for (size_t k = 0; k < sizeof t / sizeof t[0]; k++) {
        snprintf(name, sizeof name, "gpt_neox.layers.%lld.attention.%s", (long long)l,
                 t[k].suffix);
        enum hm_status st = hm_ckpt_load_f32(ck, name, t[k].ndim, t[k].shape, t[k].dst, err);
        if (st != HM_OK)
            return st;
    }
    if (!ly->conv_w)
        return HM_OK;
    const int64_t d = m->cfg.hidden_size, K = m->cfg.conv_width;
    struct { const char *suffix; float *dst; int ndim; int64_t shape[2]; } s[] = {
        {"conv1d.weight", ly->conv_w, 2, {3 * d, K}}, {"conv1d.bias", ly->conv_b, 1, {3 * d, 0}},
        {"dt_proj.weight", ly->dt_w, 2, {n_h, d}}, {"dt_proj.bias", ly->dt_b, 1, {n_h, 0}},
        {"A", ly->A, 1, {n_h, 0}}, {"D", ly->D, 1, {n_h, 0}},
        {"gate_proj.weight", ly->gate_w, 2, {d, d}}, {"gate_proj.bias", ly->gate_b, 1, {d, 0}},
    };
    for (size_t k = 0; k < sizeof s / sizeof s[0]; k++) {
        snprintf(name, sizeof name, "gpt_neox.layers.%lld.attention.%s", (long long)l,
                 s[k].suffix);
        enum hm_status st = hm_ckpt_load_f32(ck, name, s[k].ndim, s[k].shape, s[k].dst, err);
        if (st != HM_OK)
            return st;
    }
    return HM_OK;
}

enum hm_status hm_neox_load(const struct hm_ckpt *ck, struct hm_neox **out,
                            struct hm_error *err)
{
    *out = NULL;
    const struct hm_config *cfg = hm_ckpt_config(ck);
    struct hm_neox *m = NULL;
    enum hm_status st = hm_neox_new(cfg, &m, err);
    if (st != HM_OK)
        return st;
    int64_t d = cfg->hidden_size, I = cfg->intermediate_size, V = cfg->vocab_size;
    char name[192];
    st = load1(ck, "gpt_neox.embed_in.weight", m->embed_in, 2, V, d, err);
    for (int64_t l = 0; st == HM_OK && l < cfg->num_hidden_layers; l++) {
        struct hm_neox_layer *ly = &m->layers[l];
        struct { const char *suffix; float *dst; int ndim; int64_t s0, s1; } t[] = {
            {"input_layernorm.weight", ly->ln1_w, 1, d, 0},
            {"input_layernorm.bias", ly->ln1_b, 1, d, 0},
            {"post_attention_layernorm.weight", ly->ln2_w, 1, d, 0},
            {"post_attention_layernorm.bias", ly->ln2_b, 1, d, 0},
            {"attention.query_key_value.weight", ly->qkv_w, 2, 3 * d, d},
            {"attention.query_key_value.bias", ly->qkv_b, 1, 3 * d, 0},
            {"attention.dense.weight", ly->dense_w, 2, d, d},
            {"attention.dense.bias", ly->dense_b, 1, d, 0},
            {"mlp.dense_h_to_4h.weight", ly->fc1_w, 2, I, d},
            {"mlp.dense_h_to_4h.bias", ly->fc1_b, 1, I, 0},
            {"mlp.dense_4h_to_h.weight", ly->fc2_w, 2, d, I},
            {"mlp.dense_4h_to_h.bias", ly->fc2_b, 1, d, 0},
        };
        for (size_t k = 0; st == HM_OK && k < sizeof t / sizeof t[0]; k++) {
            snprintf(name, sizeof name, "gpt_neox.layers.%lld.%s", (long long)l, t[k].suffix);
            st = load1(ck, name, t[k].dst, t[k].ndim, t[k].s0, t[k].s1, err);
        }
        if (st == HM_OK && ly->fq_w)
            st = load_featuremaps(ck, m, l, err);
    }
    if (st == HM_OK)
        st = load1(ck, "gpt_neox.final_layer_norm.weight", m->lnf_w, 1, d, 0, err);
    if (st == HM_OK)
        st = load1(ck, "gpt_neox.final_layer_norm.bias", m->lnf_b, 1, d, 0, err);
    if (st == HM_OK)
        st = load1(ck, "embed_out.weight", m->embed_out, 2, V, d, err);
    if (st != HM_OK) {
        hm_neox_free(m);
        return st;
    }
    *out = m;
    return HM_OK;
}

/* ---- workspace ------------------------------------------------------------ */

void hm_neox_ws_init(struct hm_neox_ws *ws) { memset(ws, 0, sizeof *ws); }

void hm_neox_ws_release(struct hm_neox_ws *ws)
{
    if (!ws)
        return;
    float **bufs[] = {&ws->h, &ws->a, &ws->qkv, &ws->att, &ws->o, &ws->a2,
                      &ws->mh, &ws->m, &ws->hf, &ws->logits, &ws->phiq, &ws->phik,
                      &ws->xraw, &ws->dt, &ws->z, &ws->y};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        free(*bufs[i]);
    free(ws->att_ws);
    memset(ws, 0, sizeof *ws);
}

static enum hm_status grow(float **buf, int64_t n, struct hm_error *err)
{
    free(*buf);
    *buf = NULL;
    if (n < 0 || (uint64_t)n > SIZE_MAX / sizeof(float) ||
        !(*buf = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1))))
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory for activations (%lld floats)",
                            (long long)n);
    return HM_OK;
}

enum hm_status hm_neox_ws_reserve(struct hm_neox_ws *ws, const struct hm_neox *m,
                                  const struct hm_backend *be, int64_t T,
                                  struct hm_error *err)
{
    const struct hm_config *c = &m->cfg;
    int64_t d = c->hidden_size, I = c->intermediate_size, V = c->vocab_size;
    if (T <= 0)
        return hm_error_set(err, HM_ERR_INVALID, "sequence length %lld must be positive",
                            (long long)T);
    if (T > ws->T_cap || d != ws->d || I != ws->I || V != ws->V) {
        int64_t Tn = T;
        int64_t td, ti, tv;
        if (hm_mul_i64(Tn, d, &td) || hm_mul_i64(Tn, I, &ti) ||
            hm_mul_i64(HM_NEOX_NLL_ROWS, V, &tv) || td > INT64_MAX / 3)
            return hm_error_set(err, HM_ERR_NOMEM, "activation size overflows");
        int64_t tf = c->arch == HM_ARCH_GPT_NEOX ? 1 : Tn * c->num_attention_heads * 2 * c->feature_dim;
        struct { float **b; int64_t n; } g[] = {
            {&ws->h, td}, {&ws->a, td}, {&ws->qkv, 3 * td}, {&ws->att, td}, {&ws->o, td},
            {&ws->a2, td}, {&ws->mh, ti}, {&ws->m, td}, {&ws->hf, td}, {&ws->logits, tv},
            {&ws->phiq, tf}, {&ws->phik, tf},
            {&ws->xraw, c->arch == HM_ARCH_HEDGEMAMBA ? 3 * td : 1},
            {&ws->dt, c->arch == HM_ARCH_HEDGEMAMBA ? Tn * c->num_attention_heads : 1},
            {&ws->z, c->arch == HM_ARCH_HEDGEMAMBA ? td : 1},
            {&ws->y, c->arch == HM_ARCH_HEDGEMAMBA ? td : 1}};
        ws->T_cap = 0;
        for (size_t i = 0; i < sizeof g / sizeof g[0]; i++) {
            enum hm_status st = grow(g[i].b, g[i].n, err);
            if (st != HM_OK)
                return st;
        }
        ws->T_cap = Tn;
        ws->d = d;
        ws->I = I;
        ws->V = V;
    }
    size_t need = c->arch == HM_ARCH_GPT_NEOX
                      ? hm_backend_attention_ws_size(be, T, c->num_attention_heads, c->head_dim)
                  : c->arch == HM_ARCH_HEDGEHOG
                      ? hm_backend_linattn_ws_size(be, T, c->num_attention_heads,
                                                   2 * c->feature_dim, c->head_dim,
                                                   HM_LINATTN_CHUNK)
                      : hm_backend_ssm_ws_size(be, T, c->num_attention_heads,
                                               2 * c->feature_dim, c->head_dim, HM_LINATTN_CHUNK);
    if (need > ws->att_ws_size) {
        free(ws->att_ws);
        ws->att_ws_size = 0;
        if (!(ws->att_ws = malloc(need)))
            return hm_error_set(err, HM_ERR_NOMEM, "out of memory for attention workspace");
        ws->att_ws_size = need;
    }
    return HM_OK;
}

/* ---- forward ---------------------------------------------------------------- */

static enum hm_status check_ids(const int32_t *ids, int64_t T, int64_t V, const char *what,
                                struct hm_error *err)
{
    for (int64_t t = 0; t < T; t++)
        if (ids[t] < 0 || ids[t] >= V)
            return hm_error_set(err, HM_ERR_INVALID,
                                "%s id %lld at position %lld is outside the model "
                                "vocabulary (%lld)",
                                what, (long long)ids[t], (long long)t, (long long)V);
    return HM_OK;
}

void hm_neox_mixer_block(const struct hm_neox *m, const struct hm_backend *be, int64_t l,
                         int64_t T, struct hm_neox_ws *ws)
{
    const struct hm_config *c = &m->cfg;
    const struct hm_neox_layer *ly = &m->layers[l];
    const int64_t n_h = c->num_attention_heads, p = c->head_dim, d = c->hidden_size;
    const int64_t r = c->rotary_dims, F = c->feature_dim;
    if (c->arch == HM_ARCH_HEDGEMAMBA) {
        /* SPEC §3: qkv, causal depthwise conv over the 3d channels (no activation) */
        hm_backend_matmul_forward(be, ws->xraw, ws->a, ly->qkv_w, ly->qkv_b, T, d, 3 * d);
        hm_backend_conv1d_forward(be, ws->qkv, ws->xraw, ly->conv_w, ly->conv_b, T, 3 * d,
                                  c->conv_width);
    } else {
        hm_backend_matmul_forward(be, ws->qkv, ws->a, ly->qkv_w, ly->qkv_b, T, d, 3 * d);
    }
    if (r > 0) {
        hm_backend_rotary_forward(be, ws->qkv, T, n_h, r, 3 * d, 3 * p, 0, m->inv_freq);
        hm_backend_rotary_forward(be, ws->qkv + p, T, n_h, r, 3 * d, 3 * p, 0, m->inv_freq);
    }
    if (c->arch == HM_ARCH_GPT_NEOX) {
        hm_backend_attention_forward(be, ws->att, NULL, ws->qkv, T, n_h, p, ws->att_ws,
                                     ws->att_ws_size);
    } else {
        /* φq = C, φk = B on the rotated q, k (SPEC §2, §3 step 4) */
        hm_backend_featuremap_forward(be, ws->phiq, ws->qkv, ly->fq_w, ly->fq_b, T, n_h, p, F,
                                      3 * d, 3 * p);
        hm_backend_featuremap_forward(be, ws->phik, ws->qkv + p, ly->fk_w, ly->fk_b, T, n_h, p,
                                      F, 3 * d, 3 * p);
    }
    if (c->arch == HM_ARCH_HEDGEHOG) {
        hm_backend_linattn_forward(be, ws->att, NULL, ws->phiq, ws->phik, ws->qkv + 2 * p, T,
                                   n_h, 2 * F, p, 3 * d, 3 * p, HM_LINATTN_EPS, HM_LINATTN_CHUNK,
                                   ws->att_ws, ws->att_ws_size);
    } else if (c->arch == HM_ARCH_HEDGEMAMBA) {
        /* Δ = softplus(a Wdt^T + bdt); scan; y ⊙ silu(a Wg^T + bg) */
        hm_backend_matmul_forward(be, ws->dt, ws->a, ly->dt_w, ly->dt_b, T, d, n_h);
        hm_backend_softplus_forward(be, ws->dt, ws->dt, T * n_h);
        hm_backend_ssm_forward(be, ws->y, NULL, ws->phiq, ws->phik, ws->qkv + 2 * p, ws->dt, ly->A,
                               ly->D, T, n_h, 2 * F, p, 3 * d, 3 * p, HM_LINATTN_EPS,
                               HM_LINATTN_CHUNK, ws->att_ws, ws->att_ws_size);
        hm_backend_matmul_forward(be, ws->z, ws->a, ly->gate_w, ly->gate_b, T, d, d);
        hm_backend_silu_gate_forward(be, ws->att, ws->y, ws->z, T * d);
    }
    hm_backend_matmul_forward(be, ws->o, ws->att, ly->dense_w, ly->dense_b, T, d, d);
}

enum hm_status hm_neox_hidden(const struct hm_neox *m, const struct hm_backend *be,
                              const int32_t *tokens, int64_t T, struct hm_neox_ws *ws,
                              const struct hm_neox_hooks *hooks, struct hm_error *err)
{
    const struct hm_config *c = &m->cfg;
    int64_t d = c->hidden_size, I = c->intermediate_size;
    float eps = (float)c->layer_norm_eps;
    enum hm_gelu_kind act = c->hidden_act == HM_ACT_GELU_TANH ? HM_GELU_TANH : HM_GELU_ERF;
    enum hm_status st = check_ids(tokens, T, c->vocab_size, "token", err);
    if (st == HM_OK)
        st = hm_neox_ws_reserve(ws, m, be, T, err);
    if (st != HM_OK)
        return st;

    hm_backend_embedding_forward(be, ws->h, tokens, m->embed_in, T, d);
    for (int64_t l = 0; l < c->num_hidden_layers; l++) {
        const struct hm_neox_layer *ly = &m->layers[l];
        /* attention */
        hm_backend_layernorm_forward(be, ws->a, NULL, NULL, ws->h, ly->ln1_w, ly->ln1_b, T, d,
                                     eps);
        hm_neox_mixer_block(m, be, l, T, ws);
        if (hooks && hooks->on_layer) {
            if ((st = hm_backend_sync(be, err)) != HM_OK)
                return st;
            st = hooks->on_layer(hooks->ctx, l, ws->a, ws->qkv, ws->o, T, d, err);
            if (st != HM_OK)
                return st;
            if (hooks->stop_after_last_hook && l == c->num_hidden_layers - 1)
                return hm_backend_sync(be, err);
        }
        /* MLP */
        if (!c->use_parallel_residual)
            hm_backend_add_forward(be, ws->h, ws->o, ws->h, T * d); /* t = attn + h */
        hm_backend_layernorm_forward(be, ws->a2, NULL, NULL, ws->h, ly->ln2_w, ly->ln2_b, T,
                                     d, eps);
        hm_backend_matmul_forward(be, ws->mh, ws->a2, ly->fc1_w, ly->fc1_b, T, d, I);
        hm_backend_gelu_forward(be, ws->mh, ws->mh, T * I, act);
        hm_backend_matmul_forward(be, ws->m, ws->mh, ly->fc2_w, ly->fc2_b, T, I, d);
        if (c->use_parallel_residual)
            hm_backend_add_forward(be, ws->m, ws->m, ws->o, T * d); /* mlp + attn */
        hm_backend_add_forward(be, ws->h, ws->m, ws->h, T * d);
    }
    hm_backend_layernorm_forward(be, ws->hf, NULL, NULL, ws->h, m->lnf_w, m->lnf_b, T, d, eps);
    return hm_backend_sync(be, err);
}

enum hm_status hm_neox_forward(const struct hm_neox *m, const struct hm_backend *be,
                               const int32_t *tokens, int64_t T, float *logits,
                               struct hm_neox_ws *ws, struct hm_error *err)
{
    enum hm_status st = hm_neox_hidden(m, be, tokens, T, ws, NULL, err);
    if (st != HM_OK)
        return st;
    hm_backend_matmul_forward(be, logits, ws->hf, m->embed_out, NULL, T, m->cfg.hidden_size,
                              m->cfg.vocab_size);
    return hm_backend_sync(be, err);
}

enum hm_status hm_neox_nll(const struct hm_neox *m, const struct hm_backend *be,
                           const int32_t *tokens, const int32_t *targets, int64_t T,
                           float *nll, struct hm_neox_ws *ws, struct hm_error *err)
{
    int64_t d = m->cfg.hidden_size, V = m->cfg.vocab_size;
    enum hm_status st = check_ids(targets, T, V, "target", err);
    if (st == HM_OK)
        st = hm_neox_hidden(m, be, tokens, T, ws, NULL, err);
    if (st != HM_OK)
        return st;
    for (int64_t t0 = 0; t0 < T; t0 += HM_NEOX_NLL_ROWS) {
        int64_t n = T - t0 < HM_NEOX_NLL_ROWS ? T - t0 : HM_NEOX_NLL_ROWS;
        hm_backend_matmul_forward(be, ws->logits, ws->hf + t0 * d, m->embed_out, NULL, n, d, V);
        hm_backend_nll_forward(be, nll + t0, NULL, ws->logits, targets + t0, n, V);
    }
    return hm_backend_sync(be, err);
}

double hm_neox_flops_per_token(const struct hm_config *c, int64_t T)
{
    double d = (double)c->hidden_size, I = (double)c->intermediate_size;
    double V = (double)c->vocab_size, L = (double)c->num_hidden_layers;
    double per_layer = 2.0 * (3 * d * d + d * d + I * d + d * I) + 4.0 * (double)T * d;
    return L * per_layer + 2.0 * V * d;
}
