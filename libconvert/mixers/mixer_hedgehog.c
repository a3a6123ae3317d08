/* mixer_hedgehog.c — the stage-1 mixer (contract §2): per head two feature maps
 * φ(x) = [softmax(xW + b), softmax(−(xW + b))] on the rotated q and k, and
 * causal normalized linear attention
 *   y_t = Σ_{s≤t} (φq_t·φk_s) v_s / (Σ_{s≤t} φq_t·φk_s + ε).
 * Its decoding step is the HedgeMamba recurrence at Λ = I (Δ = 1, A = 0,
 * D = 0): S_t = S_{t−1} + φk_t [v_t; 1]^T. The feature-map helpers here are
 * shared with mixer_hedgemamba.c (contract §3 step 4). */
#include <string.h>

#include "mixer.h"
#include "model.h"

void hm_mixer_featuremaps_forward(const struct hm_mix *x, const float *qkv, float *phiq,
                                  float *phik, int64_t T)
{
    const struct hm_config *c = &x->m->cfg;
    const struct hm_layer *ly = &x->m->layers[x->l];
    const int64_t nh = c->num_attention_heads, p = c->head_dim, F = c->feature_dim;
    const int64_t rs = 3 * c->attn_dim;
    hm_backend_featuremap_forward(x->be, phiq, qkv, ly->fq_w, ly->fq_b, T, nh, p, F, rs, 3 * p);
    hm_backend_featuremap_forward(x->be, phik, qkv + p, ly->fk_w, ly->fk_b, T, nh, p, F, rs,
                                  3 * p);
}

void hm_mixer_featuremaps_backward(const struct hm_mix *x, const struct hm_mix_grads *g,
                                   const float *qkv, const float *phiq, const float *phik,
                                   float *dq, int64_t T)
{
    const struct hm_config *c = &x->m->cfg;
    const struct hm_layer *ly = &x->m->layers[x->l];
    const int64_t nh = c->num_attention_heads, p = c->head_dim, F = c->feature_dim;
    const int64_t rs = 3 * c->attn_dim;
    hm_backend_featuremap_backward(x->be, dq, g->g->fq_w, g->g->fq_b, g->dphiq, qkv, phiq,
                                   ly->fq_w, T, nh, p, F, rs, 3 * p);
    hm_backend_featuremap_backward(x->be, dq ? dq + p : NULL, g->g->fk_w, g->g->fk_b, g->dphik,
                                   qkv + p, phik, ly->fk_w, T, nh, p, F, rs, 3 * p);
}

void hm_mixer_featuremaps_identity(struct hm_model *m, int64_t l)
{
    const struct hm_config *c = &m->cfg;
    const int64_t n_h = c->num_attention_heads, p = c->head_dim, F = c->feature_dim;
    struct hm_layer *ly = &m->layers[l];
    float *w[2] = {ly->fq_w, ly->fk_w}, *b[2] = {ly->fq_b, ly->fk_b};
    for (int k = 0; k < 2; k++) {
        memset(w[k], 0, sizeof(float) * (size_t)(n_h * p * F));
        memset(b[k], 0, sizeof(float) * (size_t)(n_h * F));
        for (int64_t h = 0; h < n_h; h++)
            for (int64_t i = 0; i < p && i < F; i++)
                w[k][(h * p + i) * F + i] = 1.0f; /* eye(p, F) */
    }
}

int64_t hm_mixer_lsave_floats(const struct hm_config *c, int64_t T)
{
    return hm_linattn_saved_floats(T, c->num_attention_heads, 2 * c->feature_dim, c->head_dim,
                                   HM_LINATTN_CHUNK);
}

static size_t hh_ws(const struct hm_config *c, const struct hm_backend *be, int64_t T)
{
    return hm_backend_linattn_ws_size(be, T, c->num_attention_heads, 2 * c->feature_dim,
                                      c->head_dim, HM_LINATTN_CHUNK);
}

static size_t hh_bws(const struct hm_config *c, const struct hm_backend *be, int64_t T)
{
    return hm_backend_linattn_backward_ws_size(be, T, c->num_attention_heads,
                                               2 * c->feature_dim, c->head_dim,
                                               HM_LINATTN_CHUNK);
}

static enum hm_status hh_forward(const struct hm_mix *x, struct hm_error *err)
{
    (void)err;
    const struct hm_config *c = &x->m->cfg;
    const int64_t T = x->T, nh = c->num_attention_heads, p = c->head_dim;
    const int64_t F2 = 2 * c->feature_dim, Da = c->attn_dim, H3 = 3 * Da;
    const struct hm_layer_acts *a = x->a;
    if (x->st && T == 1) { /* one step of B sequences: row b against its state */
        hm_mixer_featuremaps_forward(x, a->qkv, a->phiq, a->phik, x->B);
        for (int64_t b = 0; b < x->B; b++) {
            struct hm_mixer_state *st = hm_mix_state(x, b);
            hm_backend_copy2d(x->be, st->v, p, a->qkv + b * H3 + 2 * p, 3 * p, nh, p);
            hm_backend_ssm_step(x->be, a->att + b * Da, st->S, a->phiq + b * nh * F2,
                                a->phik + b * nh * F2, st->v, st->one, st->zero, st->zero, nh,
                                F2, p, HM_LINATTN_EPS);
        }
        return HM_OK;
    }
    for (int64_t b = 0; b < x->B; b++) {
        const float *qkv = a->qkv + b * T * H3;
        float *pq = a->phiq + b * T * nh * F2, *pk = a->phik + b * T * nh * F2;
        hm_mixer_featuremaps_forward(x, qkv, pq, pk, T);
        float *sv = a->lsave ? a->lsave + b * hm_mixer_lsave_floats(c, T) : NULL;
        hm_backend_linattn_forward(x->be, a->att + b * T * Da, a->lse ? a->lse + b * nh * T : NULL,
                                   pq, pk, qkv + 2 * p, T, nh, F2, p, H3, 3 * p, HM_LINATTN_EPS,
                                   HM_LINATTN_CHUNK, sv, x->ws, x->ws_size);
    }
    if (x->st) /* a prefill chunk: add the carried state's share, advance it */
        hm_backend_ssm_chunk_carry(x->be, a->att, a->lse, a->phiq, a->phik, a->qkv + 2 * p, NULL,
                                   NULL, NULL, hm_mix_state(x, 0)->S, T, nh, F2, p, H3,
                                   3 * p);
    return HM_OK;
}

static void hh_backward(const struct hm_mix *x, const struct hm_mix_grads *g)
{
    const struct hm_config *c = &x->m->cfg;
    const int64_t T = x->T, nh = c->num_attention_heads, p = c->head_dim;
    const int64_t F2 = 2 * c->feature_dim, Da = c->attn_dim, H3 = 3 * Da;
    const struct hm_layer_acts *a = x->a;
    for (int64_t b = 0; b < x->B; b++) {
        const float *qkv = a->qkv + b * T * H3;
        const float *pq = a->phiq + b * T * nh * F2, *pk = a->phik + b * T * nh * F2;
        float *dq = g->dqkv ? g->dqkv + b * T * H3 : NULL;
        const float *sv = a->lsave ? a->lsave + b * hm_mixer_lsave_floats(c, T) : NULL;
        hm_backend_linattn_backward(x->be, g->dphiq, g->dphik, dq ? dq + 2 * p : NULL,
                                    g->datt + b * T * Da, a->att + b * T * Da,
                                    a->lse + b * nh * T, pq, pk, qkv + 2 * p, T, nh, F2, p, H3,
                                    3 * p, HM_LINATTN_CHUNK, sv, x->ws, x->ws_size);
        hm_mixer_featuremaps_backward(x, g, qkv, pq, pk, dq, T);
    }
}

static int64_t hh_state_floats(const struct hm_config *c)
{
    return c->num_attention_heads * 2 * c->feature_dim * (c->head_dim + 1);
}

double hm_mixer_linattn_flops(const struct hm_config *c, int64_t T)
{
    double p = (double)c->head_dim, F = (double)c->feature_dim, M = 2.0 * F;
    double C = (double)(T < HM_LINATTN_CHUNK_DEFAULT ? T : HM_LINATTN_CHUNK_DEFAULT);
    return (double)c->num_attention_heads *
           (4.0 * p * F + 2.0 * C * M + 2.0 * C * (p + 1.0) + 4.0 * M * (p + 1.0));
}

const struct hm_mixer_unit hm_mixer_hedgehog = {
    .name = "hedgehog",
    .bufs = HM_MIX_FMAP | HM_MIX_LSAVE,
    .ws_size = hh_ws,
    .backward_ws_size = hh_bws,
    .forward = hh_forward,
    .backward = hh_backward,
    .identity = hm_mixer_featuremaps_identity,
    .state_floats = hh_state_floats,
    .flops_per_token = hm_mixer_linattn_flops,
};
