/* neox_train.c — GPT-NeoX forward + backward for training (see neox_train.h).
 *
 * Gotchas that have caused bugs (or would):
 *  - positions restart at 0 for each of the B sequences: rotary, attention
 *    and their backward run per sequence on T-row slices;
 *  - HF residual order: parallel h' = (mlp + attn) + h; sequential
 *    t = attn + h, h' = mlp + t — the backward mirrors it;
 *  - activation gradients are written by the ops, parameter gradients
 *    accumulate (kernels/backend.h): zero grads once per optimizer step. */
#include "neox_train_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void hm_trainer_free(struct hm_trainer *tr)
{
    if (!tr)
        return;
    hm_neox_free(tr->g);
    free(tr->la);
    free(tr->arena);
    free(tr->att_ws);
    free(tr->in);
    free(tr->tg);
    free(tr->views);
    free(tr->gviews);
    free(tr->params);
    hm_neox_ws_release(&tr->tws);
    free(tr);
}

void hm_trainer_zero_grad(struct hm_trainer *tr)
{
    memset(tr->g->storage, 0, sizeof(float) * (size_t)tr->g->n_params);
}

const struct hm_opt_param *hm_trainer_params(const struct hm_trainer *tr, int64_t *np)
{
    *np = tr->np;
    return tr->params;
}

const struct hm_neox *hm_trainer_grads(const struct hm_trainer *tr) { return tr->g; }

static int frozen(const struct hm_trainer *tr, const struct hm_param_spec *s)
{
    if (tr->opt.freeze_embeddings && s->group == HM_PG_EMBED)
        return 1;
    /* inactive HedgeMamba components keep their stored values (SPEC §3) */
    return (s->group == HM_PG_SSM && !(tr->active & HM_COMP_SSM)) ||
           (s->group == HM_PG_CONV && !(tr->active & HM_COMP_CONV)) ||
           (s->group == HM_PG_GATE && !(tr->active & HM_COMP_GATE));
}

void hm_trainer_post_update(struct hm_trainer *tr)
{
    /* A ≤ 0 (SPEC §3 step 6): clamp after every update */
    if (tr->m->cfg.arch != HM_ARCH_HEDGEMAMBA)
        return;
    for (int64_t l = 0; l < tr->m->cfg.num_hidden_layers; l++)
        for (int64_t h = 0; h < tr->m->cfg.num_attention_heads; h++)
            if (tr->m->layers[l].A[h] > 0)
                tr->m->layers[l].A[h] = 0;
}

/* Floats of the activation arena (the layout hm_trainer_new carves). */
static int64_t arena_floats(const struct hm_config *c, const struct hm_train_opts *o)
{
    const int64_t B = o->B, T = o->T, N = B * T, L = c->num_hidden_layers;
    const int64_t d = c->hidden_size, I = c->intermediate_size, V = c->vocab_size;
    const int64_t nh = c->num_attention_heads, R = HM_TRAIN_CE_ROWS;
    const int seq = !c->use_parallel_residual;
    const int64_t F2 = c->arch == HM_ARCH_GPT_NEOX ? 0 : 2 * c->feature_dim;
    const int64_t S = c->arch == HM_ARCH_HEDGEMAMBA; /* 1 if the SSM buffers exist */
    int64_t per_layer = N * d /*h*/ + 2 * N + N * d /*a*/ + 3 * N * d + N * d /*att*/ +
                        B * nh * T + (seq ? N * d : 0) + 2 * N + N * d /*a2*/ + N * I +
                        2 * N * nh * F2 /*phiq, phik*/ +
                        S * (3 * N * d + 2 * N * nh + 2 * N * d) /*xraw, dtz, dt, z, y*/;
    return L * per_layer + N * d /*hL*/ + 2 * N + N * d /*hf*/ + N * d /*o*/ + 2 * N * I +
           4 * N * d + 3 * N * d /*dqkv*/ + N * d /*dhf*/ + 2 * R * V +
           2 * T * nh * F2 /*dphiq, dphik*/ +
           S * (2 * N * d + 3 * N * d + 2 * N * nh) /*dys, dz, dxraw, ddt, ddtz*/ +
           (o->kd_teacher ? R * V + N * d : 0);
}

size_t hm_trainer_activation_bytes(const struct hm_config *cfg, const struct hm_train_opts *o)
{
    return sizeof(float) * (size_t)arena_floats(cfg, o);
}

enum hm_status hm_trainer_new(struct hm_neox *model, const struct hm_backend *be,
                              const struct hm_train_opts *opts, struct hm_trainer **out,
                              struct hm_error *err)
{
    *out = NULL;
    const struct hm_config *c = &model->cfg;
    if (opts->B < 1 || opts->T < 1 || opts->accum < 1)
        return hm_error_set(err, HM_ERR_INVALID, "batch, seq_len and accum must be positive");
    if (opts->kd_teacher && opts->kd_teacher->cfg.vocab_size != c->vocab_size)
        return hm_error_set(err, HM_ERR_INVALID,
                            "teacher vocabulary (%lld) differs from the student's (%lld)",
                            (long long)opts->kd_teacher->cfg.vocab_size,
                            (long long)c->vocab_size);
    struct hm_trainer *tr = calloc(1, sizeof *tr);
    if (!tr)
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    tr->m = model;
    tr->be = be;
    tr->opt = *opts;
    hm_neox_ws_init(&tr->tws);
    const int64_t B = opts->B, T = opts->T, N = B * T, L = c->num_hidden_layers;
    const int64_t d = c->hidden_size, I = c->intermediate_size, V = c->vocab_size;
    const int64_t nh = c->num_attention_heads, R = HM_TRAIN_CE_ROWS;
    const int seq = !c->use_parallel_residual;
    const int64_t F2 = c->arch == HM_ARCH_GPT_NEOX ? 0 : 2 * c->feature_dim;
    tr->N = N;
    enum hm_status st = hm_neox_new(c, &tr->g, err);
    if (st != HM_OK)
        goto fail;
    /* one arena for every activation */
    int64_t total = arena_floats(c, opts);
    tr->arena = malloc(sizeof(float) * (size_t)total);
    tr->la = calloc((size_t)L + 1, sizeof *tr->la);
    tr->in = malloc(sizeof(int32_t) * (size_t)N);
    tr->tg = malloc(sizeof(int32_t) * (size_t)N);
    if (!tr->arena || !tr->la || !tr->in || !tr->tg) {
        st = hm_error_set(err, HM_ERR_NOMEM,
                          "out of memory for %.1f GB of activations (lower --batch or --seq-len)",
                          (double)total * 4e-9);
        goto fail;
    }
    float *p = tr->arena;
#define TAKE(ptr, n) do { (ptr) = p; p += (n); } while (0)
    for (int64_t l = 0; l < L; l++) {
        struct layer_acts *a = &tr->la[l];
        TAKE(a->h, N * d);
        TAKE(a->mean1, N);
        TAKE(a->rstd1, N);
        TAKE(a->a, N * d);
        TAKE(a->qkv, 3 * N * d);
        TAKE(a->att, N * d);
        TAKE(a->lse, B * nh * T);
        if (F2) {
            TAKE(a->phiq, N * nh * F2);
            TAKE(a->phik, N * nh * F2);
        }
        if (c->arch == HM_ARCH_HEDGEMAMBA) {
            TAKE(a->xraw, 3 * N * d);
            TAKE(a->dtz, N * nh);
            TAKE(a->dt, N * nh);
            TAKE(a->z, N * d);
            TAKE(a->y, N * d);
        }
        if (seq)
            TAKE(a->t, N * d);
        TAKE(a->mean2, N);
        TAKE(a->rstd2, N);
        TAKE(a->a2, N * d);
        TAKE(a->mh, N * I);
    }
    TAKE(tr->hL, N * d);
    TAKE(tr->meanf, N);
    TAKE(tr->rstdf, N);
    TAKE(tr->hf, N * d);
    TAKE(tr->o, N * d);
    TAKE(tr->gbuf, N * I);
    TAKE(tr->dmh, N * I);
    TAKE(tr->dh, N * d);
    TAKE(tr->dt1, N * d);
    TAKE(tr->dt2, N * d);
    TAKE(tr->dt3, N * d);
    TAKE(tr->dqkv, 3 * N * d);
    TAKE(tr->dhf, N * d);
    if (F2) {
        TAKE(tr->dphiq, T * nh * F2);
        TAKE(tr->dphik, T * nh * F2);
    }
    if (c->arch == HM_ARCH_HEDGEMAMBA) {
        TAKE(tr->dys, N * d);
        TAKE(tr->dz, N * d);
        TAKE(tr->dxraw, 3 * N * d);
        TAKE(tr->ddt, N * nh);
        TAKE(tr->ddtz, N * nh);
    }
    tr->active = c->arch == HM_ARCH_HEDGEMAMBA ? c->components : HM_COMP_ALL;
    TAKE(tr->logits, R * V);
    TAKE(tr->dlogits, R * V);
    if (opts->kd_teacher) {
        TAKE(tr->tlogits, R * V);
        TAKE(tr->thf, N * d);
    }
#undef TAKE
    const int64_t hp = c->head_dim;
    size_t fws, bws;
    if (c->arch == HM_ARCH_HEDGEMAMBA) {
        fws = hm_backend_ssm_ws_size(be, T, nh, F2, hp, HM_LINATTN_CHUNK);
        bws = hm_backend_ssm_backward_ws_size(be, T, nh, F2, hp, HM_LINATTN_CHUNK);
    } else if (F2) {
        fws = hm_backend_linattn_ws_size(be, T, nh, F2, hp, HM_LINATTN_CHUNK);
        bws = hm_backend_linattn_backward_ws_size(be, T, nh, F2, hp, HM_LINATTN_CHUNK);
    } else {
        fws = hm_backend_attention_ws_size(be, T, nh, hp);
        bws = hm_backend_attention_backward_ws_size(be, T, nh, hp);
    }
    tr->att_ws_size = fws > bws ? fws : bws;
    tr->attb_ws_size = bws;
    tr->att_ws = malloc(tr->att_ws_size ? tr->att_ws_size : 1);
    int64_t nv = hm_neox_views(model, &tr->views), ngv = hm_neox_views(tr->g, &tr->gviews);
    if (!tr->att_ws || nv < 0 || ngv != nv) {
        st = hm_error_set(err, HM_ERR_NOMEM, "out of memory");
        goto fail;
    }
    tr->params = calloc((size_t)nv + 1, sizeof *tr->params);
    if (!tr->params) {
        st = hm_error_set(err, HM_ERR_NOMEM, "out of memory");
        goto fail;
    }
    for (int64_t i = 0; i < nv; i++) {
        if (frozen(tr, &tr->views[i].spec))
            continue;
        tr->params[tr->np++] = (struct hm_opt_param){tr->views[i].spec.name, tr->views[i].data,
                                                     tr->gviews[i].data, tr->views[i].numel,
                                                     tr->views[i].spec.is_matrix};
    }
    *out = tr;
    return HM_OK;
fail:
    hm_trainer_free(tr);
    return st;
}

static void forward_layers(struct hm_trainer *tr)
{
    const struct hm_backend *be = tr->be;
    const struct hm_neox *m = tr->m;
    const struct hm_config *c = &m->cfg;
    const int64_t N = tr->N, L = c->num_hidden_layers;
    const int64_t d = c->hidden_size, I = c->intermediate_size;
    const float eps = (float)c->layer_norm_eps;
    const enum hm_gelu_kind gk = c->hidden_act == HM_ACT_GELU ? HM_GELU_ERF : HM_GELU_TANH;

    hm_backend_embedding_forward(be, tr->la[0].h, tr->in, m->embed_in, N, d);
    for (int64_t l = 0; l < L; l++) {
        const struct hm_neox_layer *w = &m->layers[l];
        struct layer_acts *a = &tr->la[l];
        float *hn = l + 1 < L ? tr->la[l + 1].h : tr->hL;
        hm_backend_layernorm_forward(be, a->a, a->mean1, a->rstd1, a->h, w->ln1_w, w->ln1_b, N,
                                     d, eps);
        hm_train_mixer_forward(tr, l);
        hm_backend_matmul_forward(be, tr->o, a->att, w->dense_w, w->dense_b, N, d, d);
        const float *mlp_in = a->h;
        if (a->t) {
            hm_backend_add_forward(be, a->t, tr->o, a->h, N * d);
            mlp_in = a->t;
        }
        hm_backend_layernorm_forward(be, a->a2, a->mean2, a->rstd2, mlp_in, w->ln2_w, w->ln2_b,
                                     N, d, eps);
        hm_backend_matmul_forward(be, a->mh, a->a2, w->fc1_w, w->fc1_b, N, d, I);
        hm_backend_gelu_forward(be, tr->gbuf, a->mh, N * I, gk);
        hm_backend_matmul_forward(be, hn, tr->gbuf, w->fc2_w, w->fc2_b, N, I, d);
        if (a->t) {
            hm_backend_add_forward(be, hn, hn, a->t, N * d);
        } else {
            hm_backend_add_forward(be, hn, hn, tr->o, N * d);
            hm_backend_add_forward(be, hn, hn, a->h, N * d);
        }
    }
    hm_backend_layernorm_forward(be, tr->hf, tr->meanf, tr->rstdf, tr->hL, m->lnf_w, m->lnf_b, N,
                                 d, eps);
}

/* KL(p_t ‖ p_s) of one row and its gradient w·scale·(p_s − p_t) added to g. */
static double kl_row(float *g, const float *ls, const float *lt, int64_t V, double w,
                     double scale)
{
    double ms = ls[0], mt = lt[0];
    for (int64_t v = 1; v < V; v++) {
        ms = ls[v] > ms ? ls[v] : ms;
        mt = lt[v] > mt ? lt[v] : mt;
    }
    double ss = 0, st = 0;
    for (int64_t v = 0; v < V; v++) {
        ss += exp((double)ls[v] - ms);
        st += exp((double)lt[v] - mt);
    }
    double lss = ms + log(ss), lst = mt + log(st), kl = 0;
    for (int64_t v = 0; v < V; v++) {
        double lps = (double)ls[v] - lss, lpt = (double)lt[v] - lst, pt = exp(lpt);
        kl += pt * (lpt - lps);
        g[v] += (float)(w * scale * (exp(lps) - pt));
    }
    return kl;
}

/* Output layer + loss, HM_TRAIN_CE_ROWS rows at a time; fills tr->dhf. */
static void loss_and_head(struct hm_trainer *tr, struct hm_train_loss *loss)
{
    const struct hm_backend *be = tr->be;
    const struct hm_neox *m = tr->m, *tm = tr->opt.kd_teacher;
    const int64_t N = tr->N, d = m->cfg.hidden_size, V = m->cfg.vocab_size;
    const double scale = 1.0 / ((double)N * (double)tr->opt.accum);
    float *dW = tr->opt.freeze_embeddings ? NULL : tr->g->embed_out;
    double ce = 0, kl = 0;
    for (int64_t r0 = 0; r0 < N; r0 += HM_TRAIN_CE_ROWS) {
        int64_t rows = N - r0 < HM_TRAIN_CE_ROWS ? N - r0 : HM_TRAIN_CE_ROWS;
        hm_backend_matmul_forward(be, tr->logits, tr->hf + r0 * d, m->embed_out, NULL, rows, d,
                                  V);
        ce += hm_backend_cross_entropy_backward(be, tr->dlogits, tr->logits, tr->tg + r0, rows,
                                                V, (float)scale);
        if (tm && tr->opt.kd_weight != 0) {
            hm_backend_matmul_forward(be, tr->tlogits, tr->thf + r0 * d, tm->embed_out, NULL,
                                      rows, d, V);
            for (int64_t i = 0; i < rows; i++)
                kl += kl_row(tr->dlogits + i * V, tr->logits + i * V, tr->tlogits + i * V, V,
                             tr->opt.kd_weight, scale);
        }
        hm_backend_matmul_backward(be, tr->dhf + r0 * d, dW, NULL, tr->dlogits, tr->hf + r0 * d,
                                   m->embed_out, rows, d, V);
    }
    loss->ce = ce / (double)N;
    loss->kl = kl / (double)N;
}

static void backward_layers(struct hm_trainer *tr)
{
    const struct hm_backend *be = tr->be;
    const struct hm_neox *m = tr->m;
    struct hm_neox *g = tr->g;
    const struct hm_config *c = &m->cfg;
    const int64_t N = tr->N, L = c->num_hidden_layers;
    const int64_t d = c->hidden_size, I = c->intermediate_size;
    const enum hm_gelu_kind gk = c->hidden_act == HM_ACT_GELU ? HM_GELU_ERF : HM_GELU_TANH;

    hm_backend_layernorm_backward(be, tr->dh, g->lnf_w, g->lnf_b, tr->dhf, tr->hL, tr->meanf,
                                  tr->rstdf, m->lnf_w, N, d);
    for (int64_t l = L - 1; l >= 0; l--) {
        const struct hm_neox_layer *w = &m->layers[l];
        struct hm_neox_layer *gw = &g->layers[l];
        struct layer_acts *a = &tr->la[l];
        const float *mlp_in = a->t ? a->t : a->h;
        /* MLP branch: dh is the gradient of its output */
        hm_backend_gelu_forward(be, tr->gbuf, a->mh, N * I, gk);
        hm_backend_matmul_backward(be, tr->dmh, gw->fc2_w, gw->fc2_b, tr->dh, tr->gbuf,
                                   w->fc2_w, N, I, d);
        hm_backend_gelu_backward(be, tr->dmh, tr->dmh, a->mh, N * I, gk);
        hm_backend_matmul_backward(be, tr->dt1, gw->fc1_w, gw->fc1_b, tr->dmh, a->a2, w->fc1_w,
                                   N, d, I);
        hm_backend_layernorm_backward(be, tr->dt2, gw->ln2_w, gw->ln2_b, tr->dt1, mlp_in,
                                      a->mean2, a->rstd2, w->ln2_w, N, d);
        /* sequential: dt = dh + dLN2; the attention branch sees dt */
        if (a->t)
            hm_backend_add_forward(be, tr->dh, tr->dh, tr->dt2, N * d);
        /* attention branch */
        hm_backend_matmul_backward(be, tr->dt1, gw->dense_w, gw->dense_b, tr->dh, a->att,
                                   w->dense_w, N, d, d);
        hm_train_mixer_backward(tr, l);
        hm_backend_layernorm_backward(be, tr->dt3, gw->ln1_w, gw->ln1_b, tr->dt1, a->h,
                                      a->mean1, a->rstd1, w->ln1_w, N, d);
        hm_backend_add_forward(be, tr->dh, tr->dh, tr->dt3, N * d);
        if (!a->t)
            hm_backend_add_forward(be, tr->dh, tr->dh, tr->dt2, N * d);
    }
    if (!tr->opt.freeze_embeddings)
        hm_backend_embedding_backward(be, g->embed_in, tr->dh, tr->in, N, d);
}

enum hm_status hm_trainer_accumulate(struct hm_trainer *tr, const int32_t *tokens,
                                     struct hm_train_loss *loss, struct hm_error *err)
{
    const int64_t B = tr->opt.B, T = tr->opt.T, V = tr->m->cfg.vocab_size;
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++) {
            int32_t x = tokens[b * (T + 1) + t], y = tokens[b * (T + 1) + t + 1];
            if (x < 0 || x >= V || y < 0 || y >= V)
                return hm_error_set(err, HM_ERR_INVALID,
                                    "token id %d is outside the model's vocabulary of %lld",
                                    (x < 0 || x >= V) ? x : y, (long long)V);
            tr->in[b * T + t] = x;
            tr->tg[b * T + t] = y;
        }
    if (tr->opt.kd_teacher) {
        const int64_t d = tr->m->cfg.hidden_size;
        for (int64_t b = 0; b < B; b++) {
            enum hm_status st = hm_neox_hidden(tr->opt.kd_teacher, tr->be, tr->in + b * T, T,
                                               &tr->tws, NULL, err);
            if (st != HM_OK)
                return st;
            memcpy(tr->thf + b * T * d, tr->tws.hf, sizeof(float) * (size_t)(T * d));
        }
    }
    forward_layers(tr);
    loss_and_head(tr, loss);
    backward_layers(tr);
    return HM_OK;
}

double hm_train_flops_per_token(const struct hm_config *c, int64_t T, int freeze_embeddings)
{
    double d = (double)c->hidden_size, I = (double)c->intermediate_size;
    double V = (double)c->vocab_size, L = (double)c->num_hidden_layers;
    double layer_mats = 3 * d * d + d * d + 2 * d * I;
    double f = 6.0 * L * layer_mats;
    f += (freeze_embeddings ? 4.0 : 6.0) * V * d;
    f += 3.0 * 4.0 * (double)T * d * L;
    return f;
}
