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

#include "neox_train_internal.h"

void hm_train_mixer_forward(struct hm_trainer *tr, int64_t l)
{
    const struct hm_backend *be = tr->be;
    const struct hm_neox *m = tr->m;
    const struct hm_config *c = &m->cfg;
    const struct hm_neox_layer *w = &m->layers[l];
    struct layer_acts *a = &tr->la[l];
    const int64_t B = tr->opt.B, T = tr->opt.T, N = tr->N;
    const int64_t d = c->hidden_size, nh = c->num_attention_heads, p = c->head_dim;
    const int64_t r = c->rotary_dims, F = c->feature_dim, F2 = 2 * F;
    const int ssm = c->arch == HM_ARCH_HEDGEMAMBA;

    hm_backend_matmul_forward(be, ssm ? a->xraw : a->qkv, a->a, w->qkv_w, w->qkv_b, N, d, 3 * d);
    if (ssm) {
        hm_backend_matmul_forward(be, a->dtz, a->a, w->dt_w, w->dt_b, N, d, nh);
        hm_backend_softplus_forward(be, a->dt, a->dtz, N * nh);
        hm_backend_matmul_forward(be, a->z, a->a, w->gate_w, w->gate_b, N, d, d);
    }
    for (int64_t b = 0; b < B; b++) {
        float *qkv = a->qkv + b * T * 3 * d;
        if (ssm)
            hm_backend_conv1d_forward(be, qkv, a->xraw + b * T * 3 * d, w->conv_w, w->conv_b, T,
                                      3 * d, c->conv_width);
        hm_backend_rotary_forward(be, qkv, T, nh, r, 3 * d, 3 * p, 0, m->inv_freq);
        hm_backend_rotary_forward(be, qkv + p, T, nh, r, 3 * d, 3 * p, 0, m->inv_freq);
        float *out = a->att + b * T * d, *den = a->lse + b * nh * T;
        if (!a->phiq) {
            hm_backend_attention_forward(be, out, den, qkv, T, nh, p, tr->att_ws,
                                         tr->att_ws_size);
            continue;
        }
        float *pq = a->phiq + b * T * nh * F2, *pk = a->phik + b * T * nh * F2;
        hm_backend_featuremap_forward(be, pq, qkv, w->fq_w, w->fq_b, T, nh, p, F, 3 * d, 3 * p);
        hm_backend_featuremap_forward(be, pk, qkv + p, w->fk_w, w->fk_b, T, nh, p, F, 3 * d,
                                      3 * p);
        if (!ssm)
            hm_backend_linattn_forward(be, out, den, pq, pk, qkv + 2 * p, T, nh, F2, p, 3 * d,
                                       3 * p, HM_LINATTN_EPS, HM_LINATTN_CHUNK, tr->att_ws,
                                       tr->att_ws_size);
        else
            hm_backend_ssm_forward(be, a->y + b * T * d, den, pq, pk, qkv + 2 * p,
                                   a->dt + b * T * nh, w->A, w->D, T, nh, F2, p, 3 * d, 3 * p,
                                   HM_LINATTN_EPS, HM_LINATTN_CHUNK, tr->att_ws,
                                   tr->att_ws_size);
    }
    if (ssm)
        hm_backend_silu_gate_forward(be, a->att, a->y, a->z, N * d);
}

void hm_train_mixer_backward(struct hm_trainer *tr, int64_t l)
{
    const struct hm_backend *be = tr->be;
    const struct hm_neox *m = tr->m;
    const struct hm_config *c = &m->cfg;
    const struct hm_neox_layer *w = &m->layers[l];
    struct hm_neox_layer *gw = &tr->g->layers[l];
    struct layer_acts *a = &tr->la[l];
    const int64_t B = tr->opt.B, T = tr->opt.T, N = tr->N;
    const int64_t d = c->hidden_size, nh = c->num_attention_heads, p = c->head_dim;
    const int64_t r = c->rotary_dims, F = c->feature_dim, F2 = 2 * F, K = c->conv_width;
    const int ssm = c->arch == HM_ARCH_HEDGEMAMBA;
    const int act_ssm = ssm && (tr->active & HM_COMP_SSM);
    const int act_conv = ssm && (tr->active & HM_COMP_CONV);
    const int act_gate = ssm && (tr->active & HM_COMP_GATE);
    /* tr->dt1 = d(att); for hedgemamba split it through the gate */
    const float *dy = tr->dt1;
    if (ssm) {
        hm_backend_silu_gate_backward(be, tr->dys, tr->dz, tr->dt1, a->y, a->z, N * d);
        dy = tr->dys;
    }
    for (int64_t b = 0; b < B; b++) {
        float *dq = tr->dqkv + b * T * 3 * d;
        const float *qkv = a->qkv + b * T * 3 * d, *den = a->lse + b * nh * T;
        const float *dyb = dy + b * T * d, *out = (ssm ? a->y : a->att) + b * T * d;
        if (!a->phiq) {
            hm_backend_attention_backward(be, dq, dyb, qkv, out, den, T, nh, p, tr->att_ws,
                                          tr->attb_ws_size);
        } else {
            const float *pq = a->phiq + b * T * nh * F2, *pk = a->phik + b * T * nh * F2;
            if (!ssm)
                hm_backend_linattn_backward(be, tr->dphiq, tr->dphik, dq + 2 * p, dyb, out, den,
                                            pq, pk, qkv + 2 * p, T, nh, F2, p, 3 * d, 3 * p,
                                            HM_LINATTN_CHUNK, tr->att_ws, tr->attb_ws_size);
            else
                hm_backend_ssm_backward(be, tr->dphiq, tr->dphik, dq + 2 * p,
                                        tr->ddt + b * T * nh, act_ssm ? gw->A : NULL,
                                        act_ssm ? gw->D : NULL, dyb, out, den, pq, pk,
                                        qkv + 2 * p, a->dt + b * T * nh, w->A, w->D, T, nh, F2,
                                        p, 3 * d, 3 * p, HM_LINATTN_CHUNK, tr->att_ws,
                                        tr->attb_ws_size);
            hm_backend_featuremap_backward(be, dq, gw->fq_w, gw->fq_b, tr->dphiq, qkv, pq,
                                           w->fq_w, T, nh, p, F, 3 * d, 3 * p);
            hm_backend_featuremap_backward(be, dq + p, gw->fk_w, gw->fk_b, tr->dphik, qkv + p,
                                           pk, w->fk_w, T, nh, p, F, 3 * d, 3 * p);
        }
        hm_backend_rotary_backward(be, dq, T, nh, r, 3 * d, 3 * p, 0, m->inv_freq);
        hm_backend_rotary_backward(be, dq + p, T, nh, r, 3 * d, 3 * p, 0, m->inv_freq);
        if (ssm)
            hm_backend_conv1d_backward(be, tr->dxraw + b * T * 3 * d, act_conv ? gw->conv_w : NULL,
                                       act_conv ? gw->conv_b : NULL, dq,
                                       a->xraw + b * T * 3 * d, w->conv_w, T, 3 * d, K);
    }
    /* d(a) = qkv input grad (+ Δ and gate input grads for hedgemamba) */
    hm_backend_matmul_backward(be, tr->dt1, gw->qkv_w, gw->qkv_b, ssm ? tr->dxraw : tr->dqkv,
                               a->a, w->qkv_w, N, d, 3 * d);
    if (!ssm)
        return;
    hm_backend_softplus_backward(be, tr->ddtz, tr->ddt, a->dtz, N * nh);
    hm_backend_matmul_backward(be, tr->dt3, act_ssm ? gw->dt_w : NULL, act_ssm ? gw->dt_b : NULL,
                               tr->ddtz, a->a, w->dt_w, N, d, nh);
    hm_backend_add_forward(be, tr->dt1, tr->dt1, tr->dt3, N * d);
    hm_backend_matmul_backward(be, tr->dt3, act_gate ? gw->gate_w : NULL,
                               act_gate ? gw->gate_b : NULL, tr->dz, a->a, w->gate_w, N, d, d);
    hm_backend_add_forward(be, tr->dt1, tr->dt1, tr->dt3, N * d);
}
