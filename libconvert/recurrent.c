/* recurrent.c — one token at a time through a student model (recurrent.h).
 * Mirrors hm_neox_hidden + hm_neox_mixer_block with T = 1 and carried
 * states; positions count up from 0 for rotary. */
#include "recurrent.h"

#include <stdlib.h>
#include <string.h>

struct hm_neox_state {
    int64_t pos;
    int64_t L, win_floats, ssm_floats;
    float *store;                 /* owned: windows and states of every layer */
    float **win;                  /* [L] → [K−1, 3d] (hedgemamba) */
    float **ssm;                  /* [L] → [n_h, 2F, p + 1] */
    float *h, *a, *xraw, *qkv, *att, *o, *a2, *mh, *mo, *phiq, *phik, *dt, *z, *y, *one;
    float *zeros;                 /* [n_h] A = D = 0 for hedgehog */
    float *scratch;               /* owned: the per-token vectors above */
};

void hm_neox_state_free(struct hm_neox_state *s)
{
    if (!s)
        return;
    free(s->store);
    free(s->win);
    free(s->ssm);
    free(s->scratch);
    free(s);
}

void hm_neox_state_reset(struct hm_neox_state *s)
{
    s->pos = 0;
    memset(s->store, 0, sizeof(float) * (size_t)(s->L * (s->win_floats + s->ssm_floats)));
}

enum hm_status hm_neox_state_new(const struct hm_neox *m, struct hm_neox_state **out,
                                 struct hm_error *err)
{
    *out = NULL;
    const struct hm_config *c = &m->cfg;
    if (c->arch == HM_ARCH_GPT_NEOX)
        return hm_error_set(err, HM_ERR_UNSUPPORTED,
                            "a gpt_neox teacher has no recurrent form (it needs a KV cache)");
    const int64_t L = c->num_hidden_layers, d = c->hidden_size, I = c->intermediate_size;
    const int64_t nh = c->num_attention_heads, p = c->head_dim, F2 = 2 * c->feature_dim;
    struct hm_neox_state *s = calloc(1, sizeof *s);
    if (!s)
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    s->L = L;
    s->win_floats = c->arch == HM_ARCH_HEDGEMAMBA ? (c->conv_width - 1) * 3 * d : 0;
    s->ssm_floats = nh * F2 * (p + 1);
    s->store = calloc((size_t)(L * (s->win_floats + s->ssm_floats)) + 1, sizeof(float));
    s->win = calloc((size_t)L + 1, sizeof(float *));
    s->ssm = calloc((size_t)L + 1, sizeof(float *));
    int64_t n = 3 * d /*xraw*/ + 3 * d /*qkv*/ + 8 * d + 2 * I + 2 * nh * F2 + 2 * nh + 2 * nh;
    s->scratch = calloc((size_t)n, sizeof(float));
    if (!s->store || !s->win || !s->ssm || !s->scratch) {
        hm_neox_state_free(s);
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    }
    for (int64_t l = 0; l < L; l++) {
        s->win[l] = s->store + l * (s->win_floats + s->ssm_floats);
        s->ssm[l] = s->win[l] + s->win_floats;
    }
    float *q = s->scratch;
    s->xraw = q, q += 3 * d;
    s->qkv = q, q += 3 * d;
    s->h = q, q += d;
    s->a = q, q += d;
    s->att = q, q += d;
    s->o = q, q += d;
    s->a2 = q, q += d;
    s->mo = q, q += d;
    s->z = q, q += d;
    s->y = q, q += d;
    s->mh = q, q += I;
    q += I;
    s->phiq = q, q += nh * F2;
    s->phik = q, q += nh * F2;
    s->dt = q, q += nh;
    s->one = q, q += nh;
    s->zeros = q;
    for (int64_t h = 0; h < nh; h++)
        s->one[h] = 1.0f;
    *out = s;
    return HM_OK;
}

enum hm_status hm_neox_step(const struct hm_neox *m, const struct hm_backend *be,
                            struct hm_neox_state *s, int32_t token, float *logits,
                            struct hm_error *err)
{
    const struct hm_config *c = &m->cfg;
    const int64_t d = c->hidden_size, I = c->intermediate_size, nh = c->num_attention_heads;
    const int64_t p = c->head_dim, r = c->rotary_dims, F = c->feature_dim, F2 = 2 * F;
    const int ssm = c->arch == HM_ARCH_HEDGEMAMBA;
    const float eps = (float)c->layer_norm_eps;
    const enum hm_gelu_kind act = c->hidden_act == HM_ACT_GELU_TANH ? HM_GELU_TANH : HM_GELU_ERF;
    if (token < 0 || token >= c->vocab_size)
        return hm_error_set(err, HM_ERR_INVALID, "token id %d is outside the vocabulary (%lld)",
                            token, (long long)c->vocab_size);
    hm_backend_embedding_forward(be, s->h, &token, m->embed_in, 1, d);
    for (int64_t l = 0; l < c->num_hidden_layers; l++) {
        const struct hm_neox_layer *ly = &m->layers[l];
        hm_backend_layernorm_forward(be, s->a, NULL, NULL, s->h, ly->ln1_w, ly->ln1_b, 1, d, eps);
        if (ssm) {
            hm_backend_matmul_forward(be, s->xraw, s->a, ly->qkv_w, ly->qkv_b, 1, d, 3 * d);
            hm_backend_conv1d_step(be, s->qkv, s->xraw, s->win[l], ly->conv_w, ly->conv_b,
                                   3 * d, c->conv_width);
        } else {
            hm_backend_matmul_forward(be, s->qkv, s->a, ly->qkv_w, ly->qkv_b, 1, d, 3 * d);
        }
        hm_backend_rotary_forward(be, s->qkv, 1, nh, r, 3 * d, 3 * p, s->pos, m->inv_freq);
        hm_backend_rotary_forward(be, s->qkv + p, 1, nh, r, 3 * d, 3 * p, s->pos, m->inv_freq);
        hm_backend_featuremap_forward(be, s->phiq, s->qkv, ly->fq_w, ly->fq_b, 1, nh, p, F, 3 * d,
                                      3 * p);
        hm_backend_featuremap_forward(be, s->phik, s->qkv + p, ly->fk_w, ly->fk_b, 1, nh, p, F,
                                      3 * d, 3 * p);
        /* v of head h sits at qkv + h·3p + 2p: gather it contiguous [n_h·p] */
        for (int64_t h = 0; h < nh; h++)
            memcpy(s->o + h * p, s->qkv + h * 3 * p + 2 * p, sizeof(float) * (size_t)p);
        if (ssm) {
            hm_backend_matmul_forward(be, s->dt, s->a, ly->dt_w, ly->dt_b, 1, d, nh);
            hm_backend_softplus_forward(be, s->dt, s->dt, nh);
            hm_backend_ssm_step(be, s->y, s->ssm[l], s->phiq, s->phik, s->o, s->dt, ly->A, ly->D,
                                nh, F2, p, HM_LINATTN_EPS);
            hm_backend_matmul_forward(be, s->z, s->a, ly->gate_w, ly->gate_b, 1, d, d);
            hm_backend_silu_gate_forward(be, s->att, s->y, s->z, d);
        } else {
            hm_backend_ssm_step(be, s->att, s->ssm[l], s->phiq, s->phik, s->o, s->one, s->zeros,
                                s->zeros, nh, F2, p, HM_LINATTN_EPS);
        }
        hm_backend_matmul_forward(be, s->o, s->att, ly->dense_w, ly->dense_b, 1, d, d);
        if (!c->use_parallel_residual)
            hm_backend_add_forward(be, s->h, s->o, s->h, d);
        hm_backend_layernorm_forward(be, s->a2, NULL, NULL, s->h, ly->ln2_w, ly->ln2_b, 1, d, eps);
        hm_backend_matmul_forward(be, s->mh, s->a2, ly->fc1_w, ly->fc1_b, 1, d, I);
        hm_backend_gelu_forward(be, s->mh, s->mh, I, act);
        hm_backend_matmul_forward(be, s->mo, s->mh, ly->fc2_w, ly->fc2_b, 1, I, d);
        if (c->use_parallel_residual)
            hm_backend_add_forward(be, s->mo, s->mo, s->o, d);
        hm_backend_add_forward(be, s->h, s->mo, s->h, d);
    }
    s->pos++;
    if (!logits)
        return HM_OK;
    hm_backend_layernorm_forward(be, s->a, NULL, NULL, s->h, m->lnf_w, m->lnf_b, 1, d, eps);
    hm_backend_matmul_forward(be, logits, s->a, m->embed_out, NULL, 1, d, m->cfg.vocab_size);
    return hm_backend_sync(be, err);
}
