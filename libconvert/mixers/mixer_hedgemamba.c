/* mixer_hedgemamba.c — the stage-2 mixer (contract §3), on a = norm1(h):
 *   xraw = a Wqkv^T + b; proj = causal depthwise conv(xraw) (no activation);
 *   heads (rotated) → C = φq(q), B = φk(k); Δ = softplus(a Wdt^T + bdt);
 *   S_t = exp(Δ_t A) S_{t−1} + Δ_t B_t [v_t; 1]^T; n = C_t^T S_t;
 *   y = n[0:p] / (n[p] + ε) + D v_t; att = y ⊙ silu(a Wg^T + bg).
 * The conv runs per sequence (it must not cross sequences) over the whole
 * projection output: NeoX's fused interleaved 3d channels, llama's
 * [q | k | v]. Components that are not active (cfg.components) keep their
 * stored values and get no parameter gradient; the gradient still flows
 * through them to their inputs (they may hold non-identity values, e.g. a
 * naive init). */
#include <math.h>
#include <string.h>

#include "mixer.h"
#include "model.h"

static size_t hb_ws(const struct hm_config *c, const struct hm_backend *be, int64_t T)
{
    return hm_backend_ssm_ws_size(be, T, c->num_attention_heads, 2 * c->feature_dim,
                                  c->head_dim, HM_LINATTN_CHUNK);
}

static size_t hb_bws(const struct hm_config *c, const struct hm_backend *be, int64_t T)
{
    return hm_backend_ssm_backward_ws_size(be, T, c->num_attention_heads, 2 * c->feature_dim,
                                           c->head_dim, HM_LINATTN_CHUNK);
}

static void hb_proj_forward(const struct hm_mix *x)
{
    const struct hm_config *c = &x->m->cfg;
    const struct hm_layer *ly = &x->m->layers[x->l];
    const struct hm_layer_acts *a = x->a;
    const int64_t d = c->hidden_size, Q = c->qkv_dim, T = x->T, K = c->conv_width;
    hm_backend_matmul_forward(x->be, a->xraw, a->a, ly->qkv_w, ly->qkv_b, x->B * T, d, Q);
    if (x->st && T == 1) { /* one step of B sequences, each its own window */
        for (int64_t b = 0; b < x->B; b++)
            hm_backend_conv1d_step(x->be, a->proj + b * Q, a->xraw + b * Q, hm_mix_state(x, b)->win,
                                   ly->conv_w, ly->conv_b, Q, K);
        return;
    }
    if (x->st) {
        /* a prefill chunk: the conv reads [window (K−1 rows) ; chunk], and the
         * window becomes the last K−1 input rows */
        struct hm_mixer_state *st = hm_mix_state(x, 0);
        const int64_t W = K - 1;
        hm_backend_copy2d(x->be, st->conv_in, Q, st->win, Q, W, Q);
        hm_backend_copy2d(x->be, st->conv_in + W * Q, Q, a->xraw, Q, T, Q);
        hm_backend_conv1d_forward(x->be, st->conv_out, st->conv_in, ly->conv_w, ly->conv_b, W + T,
                                  Q, K);
        hm_backend_copy2d(x->be, a->proj, Q, st->conv_out + W * Q, Q, T, Q);
        hm_backend_copy2d(x->be, st->win, Q, st->conv_in + T * Q, Q, W, Q);
        return;
    }
    for (int64_t b = 0; b < x->B; b++)
        hm_backend_conv1d_forward(x->be, a->proj + b * T * Q, a->xraw + b * T * Q, ly->conv_w,
                                  ly->conv_b, T, Q, K);
}

static enum hm_status hb_forward(const struct hm_mix *x, struct hm_error *err)
{
    (void)err;
    const struct hm_config *c = &x->m->cfg;
    const struct hm_layer *ly = &x->m->layers[x->l];
    const struct hm_layer_acts *a = x->a;
    const int64_t T = x->T, N = x->B * T, d = c->hidden_size, nh = c->num_attention_heads;
    const int64_t p = c->head_dim, F2 = 2 * c->feature_dim, Da = c->attn_dim, H3 = 3 * Da;
    hm_backend_matmul_forward(x->be, a->dtz, a->a, ly->dt_w, ly->dt_b, N, d, nh);
    hm_backend_softplus_forward(x->be, a->dt, a->dtz, N * nh);
    if (x->st && T == 1) { /* one step of B sequences: row b against its state */
        hm_mixer_featuremaps_forward(x, a->qkv, a->phiq, a->phik, x->B);
        for (int64_t b = 0; b < x->B; b++) {
            struct hm_mixer_state *st = hm_mix_state(x, b);
            hm_backend_copy2d(x->be, st->v, p, a->qkv + b * H3 + 2 * p, 3 * p, nh, p);
            hm_backend_ssm_step(x->be, a->y + b * Da, st->S, a->phiq + b * nh * F2,
                                a->phik + b * nh * F2, st->v, a->dt + b * nh, ly->A, ly->D, nh,
                                F2, p, HM_LINATTN_EPS);
        }
    } else {
        for (int64_t b = 0; b < x->B; b++) {
            const float *qkv = a->qkv + b * T * H3;
            float *pq = a->phiq + b * T * nh * F2, *pk = a->phik + b * T * nh * F2;
            hm_mixer_featuremaps_forward(x, qkv, pq, pk, T);
            hm_backend_ssm_forward(x->be, a->y + b * T * Da, a->lse ? a->lse + b * nh * T : NULL,
                                   pq, pk, qkv + 2 * p, a->dt + b * T * nh, ly->A, ly->D, T, nh,
                                   F2, p, H3, 3 * p, HM_LINATTN_EPS, HM_LINATTN_CHUNK, x->ws,
                                   x->ws_size);
        }
        if (x->st) /* a prefill chunk: add the carried state's share, advance it */
            hm_backend_ssm_chunk_carry(x->be, a->y, a->lse, a->phiq, a->phik, a->qkv + 2 * p,
                                       a->dt, ly->A, ly->D, hm_mix_state(x, 0)->S, T, nh, F2, p,
                                       H3, 3 * p);
    }
    hm_backend_matmul_forward(x->be, a->z, a->a, ly->gate_w, ly->gate_b, N, d, Da);
    hm_backend_silu_gate_forward(x->be, a->att, a->y, a->z, N * Da);
    return HM_OK;
}

static void hb_backward(const struct hm_mix *x, const struct hm_mix_grads *g)
{
    const struct hm_config *c = &x->m->cfg;
    const struct hm_layer *ly = &x->m->layers[x->l];
    const struct hm_layer_acts *a = x->a;
    const int64_t T = x->T, N = x->B * T, nh = c->num_attention_heads, p = c->head_dim;
    const int64_t F2 = 2 * c->feature_dim, Da = c->attn_dim, H3 = 3 * Da;
    const int act_ssm = (g->active & HM_COMP_SSM) != 0;
    /* split d(att) through the gate */
    hm_backend_silu_gate_backward(x->be, g->dys, g->dz, g->datt, a->y, a->z, N * Da);
    for (int64_t b = 0; b < x->B; b++) {
        const float *qkv = a->qkv + b * T * H3;
        const float *pq = a->phiq + b * T * nh * F2, *pk = a->phik + b * T * nh * F2;
        float *dq = g->dqkv + b * T * H3;
        hm_backend_ssm_backward(x->be, g->dphiq, g->dphik, dq + 2 * p, g->ddt + b * T * nh,
                                act_ssm ? g->g->A : NULL, act_ssm ? g->g->D : NULL,
                                g->dys + b * T * Da, a->y + b * T * Da, a->lse + b * nh * T, pq,
                                pk, qkv + 2 * p, a->dt + b * T * nh, ly->A, ly->D, T, nh, F2, p,
                                H3, 3 * p, HM_LINATTN_CHUNK, x->ws, x->ws_size);
        hm_mixer_featuremaps_backward(x, g, qkv, pq, pk, dq, T);
    }
}

static const float *hb_proj_backward(const struct hm_mix *x, const struct hm_mix_grads *g,
                                     const float *dproj, float *dxraw)
{
    const struct hm_config *c = &x->m->cfg;
    const struct hm_layer *ly = &x->m->layers[x->l];
    const int64_t T = x->T, Q = c->qkv_dim, K = c->conv_width;
    const int act = (g->active & HM_COMP_CONV) != 0;
    for (int64_t b = 0; b < x->B; b++)
        hm_backend_conv1d_backward(x->be, dxraw + b * T * Q, act ? g->g->conv_w : NULL,
                                   act ? g->g->conv_b : NULL, dproj + b * T * Q,
                                   x->a->xraw + b * T * Q, ly->conv_w, T, Q, K);
    return dxraw;
}

static void hb_backward_tail(const struct hm_mix *x, const struct hm_mix_grads *g, float *da)
{
    const struct hm_config *c = &x->m->cfg;
    const struct hm_layer *ly = &x->m->layers[x->l];
    const struct hm_layer_acts *a = x->a;
    const int64_t N = x->B * x->T, d = c->hidden_size, nh = c->num_attention_heads;
    const int64_t Da = c->attn_dim;
    const int act_ssm = (g->active & HM_COMP_SSM) != 0, act_gate = (g->active & HM_COMP_GATE) != 0;
    float *dtmp = da ? g->da_tmp : NULL; /* da NULL: parameter gradients only */
    hm_backend_softplus_backward(x->be, g->ddtz, g->ddt, a->dtz, N * nh);
    hm_backend_matmul_backward(x->be, dtmp, act_ssm ? g->g->dt_w : NULL,
                               act_ssm ? g->g->dt_b : NULL, g->ddtz, a->a, ly->dt_w, N, d, nh);
    if (da)
        hm_backend_add_forward(x->be, da, da, g->da_tmp, N * d);
    hm_backend_matmul_backward(x->be, dtmp, act_gate ? g->g->gate_w : NULL,
                               act_gate ? g->g->gate_b : NULL, g->dz, a->a, ly->gate_w, N, d, Da);
    if (da)
        hm_backend_add_forward(x->be, da, da, g->da_tmp, N * d);
}

/* contract §3's table: the mixer computes exactly the stage-1 linear attention. */
static void hb_identity(struct hm_model *m, int64_t l)
{
    const struct hm_config *c = &m->cfg;
    const int64_t n_h = c->num_attention_heads, d = c->hidden_size, K = c->conv_width;
    const int64_t Q = c->qkv_dim, Da = c->attn_dim;
    struct hm_layer *ly = &m->layers[l];
    memset(ly->conv_w, 0, sizeof(float) * (size_t)(Q * K));
    memset(ly->conv_b, 0, sizeof(float) * (size_t)Q);
    for (int64_t ch = 0; ch < Q; ch++)
        ly->conv_w[ch * K + K - 1] = 1.0f; /* the last tap is the current token */
    memset(ly->dt_w, 0, sizeof(float) * (size_t)(n_h * d));
    memset(ly->gate_w, 0, sizeof(float) * (size_t)(Da * d));
    for (int64_t h = 0; h < n_h; h++) {
        ly->dt_b[h] = (float)HM_DT_BIAS_IDENTITY;
        ly->A[h] = 0.0f;
        ly->D[h] = 0.0f;
    }
    for (int64_t i = 0; i < Da; i++)
        ly->gate_b[i] = (float)HM_GATE_BIAS_IDENTITY;
    hm_mixer_featuremaps_identity(m, l);
}

/* A ≤ 0 (contract §3 step 6): clamp after every update. */
static void hb_post_update(struct hm_model *m, const struct hm_backend *be, int64_t l)
{
    hm_backend_clamp(be, m->layers[l].A, m->cfg.num_attention_heads, -INFINITY, 0.0f);
}

static int64_t hb_state_floats(const struct hm_config *c)
{
    return c->num_attention_heads * 2 * c->feature_dim * (c->head_dim + 1) +
           (c->conv_width - 1) * c->qkv_dim;
}

/* the linear attention, the depthwise conv 2K per channel, and the gate and
 * Δ products */
static double hb_flops(const struct hm_config *c, int64_t T)
{
    double d = (double)c->hidden_size;
    return hm_mixer_linattn_flops(c, T) + 2.0 * (double)c->conv_width * (double)c->qkv_dim +
           2.0 * d * ((double)c->attn_dim + (double)c->num_attention_heads);
}

const struct hm_mixer_unit hm_mixer_hedgemamba = {
    .name = "hedgemamba",
    .bufs = HM_MIX_FMAP | HM_MIX_SSM,
    .ws_size = hb_ws,
    .backward_ws_size = hb_bws,
    .proj_forward = hb_proj_forward,
    .forward = hb_forward,
    .backward = hb_backward,
    .proj_backward = hb_proj_backward,
    .backward_tail = hb_backward_tail,
    .identity = hb_identity,
    .post_update = hb_post_update,
    .state_floats = hb_state_floats,
    .flops_per_token = hb_flops,
};
