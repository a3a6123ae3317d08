/* recurrent.c — one token at a time through any model (recurrent.h).
 * The same skeleton as hm_model_hidden (the family's norm, projection and
 * MLP helpers of model.c) with T = 1 and carried state; positions count up
 * from 0 for rotary.
 *
 * Mixer state per layer:
 *  - softmax: the KV cache, rotated keys and values per key/value head
 *    [pos, n_kv, p] each, grown by doubling (its size is the context's);
 *  - hedgehog, hedgemamba: the conv window [K−1, qkv_dim] (hedgemamba) and
 *    S [n_h, 2F, p + 1]: constant size. Hedgehog is the HedgeMamba
 *    recurrence with Δ = 1, A = 0, D = 0 (SPEC §2 = §3 at the identity). */
#include "recurrent.h"

#include <stdlib.h>
#include <string.h>

struct hm_model_state {
    int64_t pos;
    int64_t L, win_floats, ssm_floats;
    float *store;                 /* owned: windows and states of every layer */
    float **win;                  /* [L] → [K−1, qkv_dim] (hedgemamba) */
    float **ssm;                  /* [L] → [n_h, 2F, p + 1] (students) */
    float **kc, **vc;             /* [L] → [kv_cap, n_kv, p] (softmax; owned) */
    int64_t kv_cap;               /* positions the caches hold */
    float *h, *a, *xraw, *proj, *heads, *q, *att, *o, *a2, *mh, *mg, *mo, *phiq, *phik, *dt,
        *z, *y, *v, *one, *zeros, *scores;
    float *scratch;               /* owned: the per-token vectors above */
};

void hm_model_state_free(struct hm_model_state *s)
{
    if (!s)
        return;
    for (int64_t l = 0; s->kc && l < s->L; l++) {
        free(s->kc[l]);
        free(s->vc[l]);
    }
    free(s->kc);
    free(s->vc);
    free(s->store);
    free(s->win);
    free(s->ssm);
    free(s->scratch);
    free(s->scores);
    free(s);
}

void hm_model_state_reset(struct hm_model_state *s)
{
    s->pos = 0;
    memset(s->store, 0, sizeof(float) * (size_t)(s->L * (s->win_floats + s->ssm_floats)));
}

int64_t hm_model_state_floats(const struct hm_model_state *s, int64_t n_kv, int64_t p)
{
    return s->L * (s->win_floats + s->ssm_floats + (s->kc ? 2 * s->pos * n_kv * p : 0));
}

enum hm_status hm_model_state_new(const struct hm_model *m, struct hm_model_state **out,
                                  struct hm_error *err)
{
    *out = NULL;
    const struct hm_config *c = &m->cfg;
    const int64_t L = c->num_hidden_layers, d = c->hidden_size, I = c->intermediate_size;
    const int64_t nh = c->num_attention_heads, p = c->head_dim, F2 = 2 * c->feature_dim;
    const int64_t Q = c->qkv_dim, Da = c->attn_dim;
    const int softmax = c->mixer == HM_MIXER_SOFTMAX;
    struct hm_model_state *s = calloc(1, sizeof *s);
    if (!s)
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    s->L = L;
    s->win_floats = c->mixer == HM_MIXER_HEDGEMAMBA ? (c->conv_width - 1) * Q : 0;
    s->ssm_floats = softmax ? 0 : nh * F2 * (p + 1);
    s->store = calloc((size_t)(L * (s->win_floats + s->ssm_floats)) + 1, sizeof(float));
    s->win = calloc((size_t)L + 1, sizeof(float *));
    s->ssm = calloc((size_t)L + 1, sizeof(float *));
    if (softmax) {
        s->kc = calloc((size_t)L + 1, sizeof(float *));
        s->vc = calloc((size_t)L + 1, sizeof(float *));
    }
    const int64_t n = 2 * Q + 3 * Da + 2 * Da + 5 * Da + 6 * d + 3 * I + 2 * nh * F2 + 3 * nh;
    s->scratch = calloc((size_t)n, sizeof(float));
    if (!s->store || !s->win || !s->ssm || !s->scratch || (softmax && (!s->kc || !s->vc))) {
        hm_model_state_free(s);
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    }
    for (int64_t l = 0; l < L; l++) {
        s->win[l] = s->store + l * (s->win_floats + s->ssm_floats);
        s->ssm[l] = s->win[l] + s->win_floats;
    }
    float *q = s->scratch;
#define TAKE(ptr, k) (ptr) = q, q += (k)
    TAKE(s->xraw, Q);
    TAKE(s->proj, Q);
    TAKE(s->heads, 3 * Da);
    TAKE(s->q, Da);
    TAKE(s->v, Da);
    TAKE(s->att, Da);
    TAKE(s->z, Da);
    TAKE(s->y, Da);
    TAKE(s->h, d);
    TAKE(s->a, d);
    TAKE(s->o, d);
    TAKE(s->a2, d);
    TAKE(s->mo, d);
    TAKE(s->mh, I);
    TAKE(s->mg, I);
    TAKE(s->phiq, nh * F2);
    TAKE(s->phik, nh * F2);
    TAKE(s->dt, nh);
    TAKE(s->one, nh);
    TAKE(s->zeros, nh);
#undef TAKE
    for (int64_t h = 0; h < nh; h++)
        s->one[h] = 1.0f;
    *out = s;
    return HM_OK;
}

/* Room for one more position in every layer's KV cache. */
static enum hm_status kv_reserve(struct hm_model_state *s, const struct hm_config *c,
                                 struct hm_error *err)
{
    if (s->pos < s->kv_cap)
        return HM_OK;
    const int64_t row = c->num_key_value_heads * c->head_dim;
    const int64_t cap = s->kv_cap ? 2 * s->kv_cap : 64;
    if (cap > ((int64_t)1 << 40) / row)
        return hm_error_set(err, HM_ERR_NOMEM, "KV cache too large");
    for (int64_t l = 0; l < s->L; l++) {
        float *k = realloc(s->kc[l], sizeof(float) * (size_t)(cap * row));
        if (k)
            s->kc[l] = k;
        float *v = realloc(s->vc[l], sizeof(float) * (size_t)(cap * row));
        if (v)
            s->vc[l] = v;
        if (!k || !v)
            return hm_error_set(err, HM_ERR_NOMEM, "out of memory for the KV cache");
    }
    float *sc = realloc(s->scores, sizeof(float) * (size_t)cap);
    if (!sc)
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory for the KV cache");
    s->scores = sc;
    s->kv_cap = cap;
    return HM_OK;
}

/* The mixer of layer l on one token: s->a → s->att [n_h p]. */
static enum hm_status mixer_step(const struct hm_model *m, const struct hm_backend *be,
                                 struct hm_model_state *s, int64_t l, struct hm_error *err)
{
    const struct hm_config *c = &m->cfg;
    const struct hm_layer *ly = &m->layers[l];
    const int64_t d = c->hidden_size, nh = c->num_attention_heads, nkv = c->num_key_value_heads;
    const int64_t p = c->head_dim, r = c->rotary_dims, F = c->feature_dim, F2 = 2 * F;
    const int64_t Q = c->qkv_dim, Da = c->attn_dim, rs = 3 * Da;
    const int ssm = c->mixer == HM_MIXER_HEDGEMAMBA, llama = c->family == HM_FAMILY_LLAMA;
    float *heads = llama ? s->heads : s->proj;
    hm_backend_matmul_forward(be, ssm ? s->xraw : s->proj, s->a, ly->qkv_w, ly->qkv_b, 1, d, Q);
    if (ssm)
        hm_backend_conv1d_step(be, s->proj, s->xraw, s->win[l], ly->conv_w, ly->conv_b, Q,
                               c->conv_width);
    if (llama)
        hm_backend_qkv_expand_forward(be, heads, s->proj, 1, nh, nkv, p);
    hm_backend_rotary_forward(be, heads, 1, nh, r, rs, 3 * p, s->pos, m->inv_freq);
    hm_backend_rotary_forward(be, heads + p, 1, nh, r, rs, 3 * p, s->pos, m->inv_freq);
    /* per-head slices gathered contiguous: q, v [n_h p] */
    for (int64_t h = 0; h < nh; h++) {
        memcpy(s->q + h * p, heads + h * 3 * p, sizeof(float) * (size_t)p);
        memcpy(s->v + h * p, heads + h * 3 * p + 2 * p, sizeof(float) * (size_t)p);
    }
    if (c->mixer == HM_MIXER_SOFTMAX) {
        enum hm_status st = kv_reserve(s, c, err);
        if (st != HM_OK)
            return st;
        const int64_t grp = nh / nkv;
        for (int64_t g = 0; g < nkv; g++) {
            const float *src = heads + g * grp * 3 * p; /* the group's first query head */
            memcpy(s->kc[l] + (s->pos * nkv + g) * p, src + p, sizeof(float) * (size_t)p);
            memcpy(s->vc[l] + (s->pos * nkv + g) * p, src + 2 * p, sizeof(float) * (size_t)p);
        }
        hm_backend_attention_decode(be, s->att, s->q, s->kc[l], s->vc[l], s->pos + 1, nh, nkv, p,
                                    s->scores);
        return HM_OK;
    }
    hm_backend_featuremap_forward(be, s->phiq, heads, ly->fq_w, ly->fq_b, 1, nh, p, F, rs, 3 * p);
    hm_backend_featuremap_forward(be, s->phik, heads + p, ly->fk_w, ly->fk_b, 1, nh, p, F, rs,
                                  3 * p);
    if (ssm) {
        hm_backend_matmul_forward(be, s->dt, s->a, ly->dt_w, ly->dt_b, 1, d, nh);
        hm_backend_softplus_forward(be, s->dt, s->dt, nh);
        hm_backend_ssm_step(be, s->y, s->ssm[l], s->phiq, s->phik, s->v, s->dt, ly->A, ly->D, nh,
                            F2, p, HM_LINATTN_EPS);
        hm_backend_matmul_forward(be, s->z, s->a, ly->gate_w, ly->gate_b, 1, d, Da);
        hm_backend_silu_gate_forward(be, s->att, s->y, s->z, Da);
    } else {
        hm_backend_ssm_step(be, s->att, s->ssm[l], s->phiq, s->phik, s->v, s->one, s->zeros,
                            s->zeros, nh, F2, p, HM_LINATTN_EPS);
    }
    return HM_OK;
}

enum hm_status hm_model_step(const struct hm_model *m, const struct hm_backend *be,
                             struct hm_model_state *s, int32_t token, float *logits,
                             struct hm_error *err)
{
    const struct hm_config *c = &m->cfg;
    const int64_t d = c->hidden_size;
    if (token < 0 || token >= c->vocab_size)
        return hm_error_set(err, HM_ERR_INVALID, "token id %d is outside the vocabulary (%lld)",
                            token, (long long)c->vocab_size);
    hm_backend_embedding_forward(be, s->h, &token, m->embed_in, 1, d);
    for (int64_t l = 0; l < c->num_hidden_layers; l++) {
        const struct hm_layer *ly = &m->layers[l];
        hm_model_norm_forward(m, be, s->a, NULL, NULL, s->h, ly->ln1_w, ly->ln1_b, 1);
        enum hm_status st = mixer_step(m, be, s, l, err);
        if (st != HM_OK)
            return st;
        hm_backend_matmul_forward(be, s->o, s->att, ly->dense_w, ly->dense_b, 1, c->attn_dim, d);
        if (!c->use_parallel_residual)
            hm_backend_add_forward(be, s->h, s->o, s->h, d);
        hm_model_norm_forward(m, be, s->a2, NULL, NULL, s->h, ly->ln2_w, ly->ln2_b, 1);
        hm_model_mlp_forward(m, be, ly, s->mo, s->mh, s->mg, s->mh, s->a2, 1);
        if (c->use_parallel_residual)
            hm_backend_add_forward(be, s->mo, s->mo, s->o, d);
        hm_backend_add_forward(be, s->h, s->mo, s->h, d);
    }
    s->pos++;
    if (!logits)
        return HM_OK;
    hm_model_norm_forward(m, be, s->a, NULL, NULL, s->h, m->lnf_w, m->lnf_b, 1);
    hm_backend_matmul_forward(be, logits, s->a, m->embed_out, NULL, 1, d, m->cfg.vocab_size);
    return hm_backend_sync(be, err);
}
