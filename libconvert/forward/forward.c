/* forward.c — the forward skeleton (forward.h) and the family pieces it runs
 * (norm, MLP).
 *
 * Gotcha that has caused bugs: the residual order matters only to the last
 * ulp, but we follow HF: parallel  h = (mlp + attn) + h;  sequential
 * t = attn + h, h = mlp + t. */
#include "forward.h"

void hm_model_norm_forward(const struct hm_model *m, const struct hm_backend *be, float *y,
                           float *mean, float *rstd, const float *x, const float *w,
                           const float *b, int64_t T)
{
    const struct hm_config *c = &m->cfg;
    if (c->norm_kind == HM_NORM_RMS)
        hm_backend_rmsnorm_forward(be, y, rstd, x, w, T, c->hidden_size, (float)c->layer_norm_eps);
    else
        hm_backend_layernorm_forward(be, y, mean, rstd, x, w, b, T, c->hidden_size,
                                     (float)c->layer_norm_eps);
}

void hm_model_mlp_forward(const struct hm_model *m, const struct hm_backend *be,
                          const struct hm_layer *ly, float *out, float *hid, float *gate,
                          float *act, const float *x, int64_t T)
{
    const struct hm_config *c = &m->cfg;
    const int64_t d = c->hidden_size, I = c->intermediate_size;
    hm_backend_matmul_forward(be, hid, x, ly->fc1_w, ly->fc1_b, T, d, I);
    if (c->mlp_kind == HM_MLP_SWIGLU) {
        /* SwiGLU: silu(gate) ⊙ up */
        hm_backend_matmul_forward(be, gate, x, ly->fcg_w, ly->fcg_b, T, d, I);
        hm_backend_silu_gate_forward(be, act, hid, gate, T * I);
    } else {
        hm_backend_gelu_forward(be, act, hid, T * I,
                                c->hidden_act == HM_ACT_GELU_TANH ? HM_GELU_TANH : HM_GELU_ERF);
    }
    hm_backend_matmul_forward(be, out, act, ly->fc2_w, ly->fc2_b, T, I, d);
}

enum hm_status hm_model_mixer_forward(const struct hm_mix *x, float *o, struct hm_error *err)
{
    const struct hm_model *m = x->m;
    const struct hm_backend *be = x->be;
    const struct hm_config *c = &m->cfg;
    const struct hm_mixer_unit *u = hm_layer_unit(c, x->l);
    const struct hm_layer *ly = &m->layers[x->l];
    struct hm_layer_acts *a = x->a;
    const int64_t B = x->B, T = x->T, N = B * T, d = c->hidden_size;
    const int64_t nh = c->num_attention_heads, p = c->head_dim, r = c->rotary_dims;
    const int64_t Da = c->attn_dim, H3 = 3 * Da, Q = c->qkv_dim;
    if (u->proj_forward)
        u->proj_forward(x);
    else
        hm_backend_matmul_forward(be, a->proj, a->a, ly->qkv_w, ly->qkv_b, N, d, Q);
    if (c->qkv_layout == HM_QKV_GQA)
        hm_backend_qkv_expand_forward(be, a->qkv, a->proj, N, nh, c->num_key_value_heads, p);
    for (int64_t b = 0; r > 0 && b < B; b++) {
        float *q = a->qkv + b * T * H3;
        const int64_t pos = hm_mix_pos(x, b);
        hm_backend_rotary_forward(be, q, T, nh, r, H3, 3 * p, pos, m->inv_freq);
        hm_backend_rotary_forward(be, q + p, T, nh, r, H3, 3 * p, pos, m->inv_freq);
    }
    enum hm_status st = u->forward(x, err);
    if (st != HM_OK)
        return st;
    hm_backend_matmul_forward(be, o, a->att, ly->dense_w, ly->dense_b, N, Da, d);
    return HM_OK;
}

static enum hm_status stream_hook(const struct hm_model_hooks *hooks,
                                  const struct hm_backend *be, int64_t l, const float *h,
                                  int64_t T, int64_t d, struct hm_error *err)
{
    enum hm_status st = hm_backend_sync(be, err);
    return st == HM_OK ? hooks->on_stream(hooks->ctx, l, h, T, d, err) : st;
}

enum hm_status hm_model_layer_forward(const struct hm_model *m, const struct hm_backend *be,
                                      int64_t l, const struct hm_fwd *f, struct hm_error *err)
{
    const struct hm_config *c = &m->cfg;
    const int64_t L = c->num_hidden_layers, B = f->B, T = f->T, N = B * T;
    const int64_t d = c->hidden_size;
    const struct hm_model_hooks *hooks = f->hooks;
    enum hm_status st;
    hm_model_widen_layer(m, l); /* a narrow model's layer, widened once here */
    const struct hm_layer *ly = &m->layers[l];
    struct hm_layer_acts *a = &f->la[f->shared ? 0 : l];
    float *hn = l + 1 < L ? f->la[f->shared ? 0 : l + 1].h : f->h_out;
    if (hooks && hooks->on_stream && (st = stream_hook(hooks, be, l, a->h, T, d, err)) != HM_OK)
        return st;
    /* mixer */
    hm_model_norm_forward(m, be, a->a, a->mean1, a->rstd1, a->h, ly->ln1_w, ly->ln1_b, N);
    const struct hm_mix x = {.m = m, .be = be, .l = l, .B = B, .T = T, .pos0 = f->pos0,
                             .a = a, .ws = f->ws, .ws_size = f->ws_size, .st = f->st,
                             .pos = f->pos};
    if ((st = hm_model_mixer_forward(&x, f->o, err)) != HM_OK)
        return st;
    if (hooks && hooks->on_layer) {
        if ((st = hm_backend_sync(be, err)) != HM_OK)
            return st;
        st = hooks->on_layer(hooks->ctx, l, a->a, a->qkv, f->o, T, d, err);
        if (st != HM_OK)
            return st;
        if (hooks->stop_after_last_hook && l == L - 1)
            return hm_backend_sync(be, err);
    }
    /* MLP and residuals */
    const float *mlp_in = a->h;
    if (!c->use_parallel_residual) {
        hm_backend_add_forward(be, a->t, f->o, a->h, N * d); /* t = o + h */
        mlp_in = a->t;
    }
    hm_model_norm_forward(m, be, a->a2, a->mean2, a->rstd2, mlp_in, ly->ln2_w, ly->ln2_b, N);
    hm_model_mlp_forward(m, be, ly, f->m, a->mh, a->mg, f->act, a->a2, N);
    if (c->use_parallel_residual) {
        hm_backend_add_forward(be, f->m, f->m, f->o, N * d); /* mlp + o */
        hm_backend_add_forward(be, hn, f->m, a->h, N * d);
    } else {
        hm_backend_add_forward(be, hn, f->m, a->t, N * d);
    }
    return HM_OK;
}

enum hm_status hm_model_layers_forward(const struct hm_model *m, const struct hm_backend *be,
                                       const int32_t *tokens, const struct hm_fwd *f,
                                       struct hm_error *err)
{
    enum hm_status st = HM_OK;
    hm_model_embed(m, f->la[0].h, tokens, f->B * f->T);
    const int64_t L = m->cfg.num_hidden_layers;
    for (int64_t l = 0; st == HM_OK && l < L; l++)
        st = hm_model_layer_forward(m, be, l, f, err);
    if (st == HM_OK && f->hooks && f->hooks->on_stream)
        st = stream_hook(f->hooks, be, L, f->h_out, f->T, m->cfg.hidden_size, err);
    return st;
}
