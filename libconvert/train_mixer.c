/* train_mixer.c — the mixer part of training: forward with saved values and
 * backward, for the three archs (softmax attention, Hedgehog linear
 * attention, HedgeMamba SSM). Per-sequence ops (conv, rotary, attention,
 * scans) run on T-row slices: positions restart at 0 for each sequence and
 * nothing leaks across sequence boundaries (the conv included).
 *
 * HedgeMamba (SPEC §3), per layer on a = LN1(h):
 *   xraw = a Wqkv^T + b; c = conv(xraw); rotary on c's q, k;
 *   C = φq(q), B = φk(k); Δ = softplus(a Wdt^T + bdt);
 *   y = scan(C, B, v, Δ, A, D); att = y ⊙ silu(a Wg^T + bg).
 * Components that are not active (cfg.components) keep their stored values
 * and get no parameter gradient; the gradient still flows through them to
 * their inputs (they may hold non-identity values, e.g. a naive init). */
#include <string.h>

#include "trainer_internal.h"

void hm_train_mixer_forward(struct hm_trainer *tr, int64_t l)
{
    const struct hm_backend *be = tr->be;
    const struct hm_model *m = tr->m;
    const struct hm_config *c = &m->cfg;
    const struct hm_layer *w = &m->layers[l];
    struct layer_acts *a = &tr->la[l];
    const int64_t B = tr->opt.B, T = tr->opt.T, N = tr->N;
    const int64_t d = c->hidden_size, nh = c->num_attention_heads, p = c->head_dim;
    const int64_t r = c->rotary_dims, F = c->feature_dim, F2 = 2 * F;
    const int64_t Da = c->attn_dim, H3 = 3 * Da;
    const int ssm = c->mixer == HM_MIXER_HEDGEMAMBA;

    if (ssm) {
        hm_backend_matmul_forward(be, a->dtz, a->a, w->dt_w, w->dt_b, N, d, nh);
        hm_backend_softplus_forward(be, a->dt, a->dtz, N * nh);
        hm_backend_matmul_forward(be, a->z, a->a, w->gate_w, w->gate_b, N, d, Da);
    }
    hm_model_qkv_forward(m, be, w, a->xraw, tr->proj ? tr->proj : a->qkv, a->qkv, a->a, B, T);
    for (int64_t b = 0; b < B; b++) {
        float *qkv = a->qkv + b * T * H3;
        hm_backend_rotary_forward(be, qkv, T, nh, r, H3, 3 * p, 0, m->inv_freq);
        hm_backend_rotary_forward(be, qkv + p, T, nh, r, H3, 3 * p, 0, m->inv_freq);
        float *out = a->att + b * T * Da, *den = a->lse + b * nh * T;
        if (!a->phiq) {
            hm_backend_attention_forward(be, out, den, qkv, T, nh, p, tr->att_ws,
                                         tr->att_ws_size);
            continue;
        }
        float *pq = a->phiq + b * T * nh * F2, *pk = a->phik + b * T * nh * F2;
        hm_backend_featuremap_forward(be, pq, qkv, w->fq_w, w->fq_b, T, nh, p, F, H3, 3 * p);
        hm_backend_featuremap_forward(be, pk, qkv + p, w->fk_w, w->fk_b, T, nh, p, F, H3, 3 * p);
        if (!ssm)
            hm_backend_linattn_forward(be, out, den, pq, pk, qkv + 2 * p, T, nh, F2, p, H3,
                                       3 * p, HM_LINATTN_EPS, HM_LINATTN_CHUNK, tr->att_ws,
                                       tr->att_ws_size);
        else
            hm_backend_ssm_forward(be, a->y + b * T * Da, den, pq, pk, qkv + 2 * p,
                                   a->dt + b * T * nh, w->A, w->D, T, nh, F2, p, H3, 3 * p,
                                   HM_LINATTN_EPS, HM_LINATTN_CHUNK, tr->att_ws,
                                   tr->att_ws_size);
    }
    if (ssm)
        hm_backend_silu_gate_forward(be, a->att, a->y, a->z, N * Da);
}

void hm_train_mixer_backward(struct hm_trainer *tr, int64_t l)
{
    const struct hm_backend *be = tr->be;
    const struct hm_model *m = tr->m;
    const struct hm_config *c = &m->cfg;
    const struct hm_layer *w = &m->layers[l];
    struct hm_layer *gw = &tr->g->layers[l];
    struct layer_acts *a = &tr->la[l];
    const int64_t B = tr->opt.B, T = tr->opt.T, N = tr->N;
    const int64_t d = c->hidden_size, nh = c->num_attention_heads, p = c->head_dim;
    const int64_t r = c->rotary_dims, F = c->feature_dim, F2 = 2 * F, K = c->conv_width;
    const int64_t Da = c->attn_dim, H3 = 3 * Da, Q = c->qkv_dim;
    const int ssm = c->mixer == HM_MIXER_HEDGEMAMBA;
    const int llama = c->family == HM_FAMILY_LLAMA;
    const int act_ssm = ssm && (tr->active & HM_COMP_SSM);
    const int act_conv = ssm && (tr->active & HM_COMP_CONV);
    const int act_gate = ssm && (tr->active & HM_COMP_GATE);
    /* tr->datt = d(att); for hedgemamba split it through the gate */
    const float *dy = tr->datt;
    if (ssm) {
        hm_backend_silu_gate_backward(be, tr->dys, tr->dz, tr->datt, a->y, a->z, N * Da);
        dy = tr->dys;
    }
    for (int64_t b = 0; b < B; b++) {
        float *dq = tr->dqkv + b * T * H3;
        const float *qkv = a->qkv + b * T * H3, *den = a->lse + b * nh * T;
        const float *dyb = dy + b * T * Da, *out = (ssm ? a->y : a->att) + b * T * Da;
        if (!a->phiq) {
            hm_backend_attention_backward(be, dq, dyb, qkv, out, den, T, nh, p, tr->att_ws,
                                          tr->attb_ws_size);
        } else {
            const float *pq = a->phiq + b * T * nh * F2, *pk = a->phik + b * T * nh * F2;
            if (!ssm)
                hm_backend_linattn_backward(be, tr->dphiq, tr->dphik, dq + 2 * p, dyb, out, den,
                                            pq, pk, qkv + 2 * p, T, nh, F2, p, H3, 3 * p,
                                            HM_LINATTN_CHUNK, tr->att_ws, tr->attb_ws_size);
            else
                hm_backend_ssm_backward(be, tr->dphiq, tr->dphik, dq + 2 * p,
                                        tr->ddt + b * T * nh, act_ssm ? gw->A : NULL,
                                        act_ssm ? gw->D : NULL, dyb, out, den, pq, pk,
                                        qkv + 2 * p, a->dt + b * T * nh, w->A, w->D, T, nh, F2,
                                        p, H3, 3 * p, HM_LINATTN_CHUNK, tr->att_ws,
                                        tr->attb_ws_size);
            hm_backend_featuremap_backward(be, dq, gw->fq_w, gw->fq_b, tr->dphiq, qkv, pq,
                                           w->fq_w, T, nh, p, F, H3, 3 * p);
            hm_backend_featuremap_backward(be, dq + p, gw->fk_w, gw->fk_b, tr->dphik, qkv + p,
                                           pk, w->fk_w, T, nh, p, F, H3, 3 * p);
        }
        hm_backend_rotary_backward(be, dq, T, nh, r, H3, 3 * p, 0, m->inv_freq);
        hm_backend_rotary_backward(be, dq + p, T, nh, r, H3, 3 * p, 0, m->inv_freq);
        /* per-head grads back to the projection layout (llama: sum over groups) */
        float *dproj = tr->dproj + b * T * Q;
        if (llama)
            hm_backend_qkv_expand_backward(be, dproj, dq, T, nh, c->num_key_value_heads, p);
        if (ssm)
            hm_backend_conv1d_backward(be, tr->dxraw + b * T * Q, act_conv ? gw->conv_w : NULL,
                                       act_conv ? gw->conv_b : NULL, dproj,
                                       a->xraw + b * T * Q, w->conv_w, T, Q, K);
    }
    /* d(a) = projection input grad (+ Δ and gate input grads for hedgemamba) */
    hm_backend_matmul_backward(be, tr->dt1, gw->qkv_w, gw->qkv_b, ssm ? tr->dxraw : tr->dproj,
                               a->a, w->qkv_w, N, d, Q);
    if (!ssm)
        return;
    hm_backend_softplus_backward(be, tr->ddtz, tr->ddt, a->dtz, N * nh);
    hm_backend_matmul_backward(be, tr->dt3, act_ssm ? gw->dt_w : NULL, act_ssm ? gw->dt_b : NULL,
                               tr->ddtz, a->a, w->dt_w, N, d, nh);
    hm_backend_add_forward(be, tr->dt1, tr->dt1, tr->dt3, N * d);
    hm_backend_matmul_backward(be, tr->dt3, act_gate ? gw->gate_w : NULL,
                               act_gate ? gw->gate_b : NULL, tr->dz, a->a, w->gate_w, N, d, Da);
    hm_backend_add_forward(be, tr->dt1, tr->dt1, tr->dt3, N * d);
}
