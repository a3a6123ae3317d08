/* trainer.c — forward + backward of every family × mixer for training (see
 * trainer.h).
 *
 * Gotchas that have caused bugs (or would):
 *  - positions restart at 0 for each of the B sequences: rotary, attention
 *    and their backward run per sequence on T-row slices;
 *  - HF residual order: parallel h' = (mlp + attn) + h; sequential
 *    t = attn + h, h' = mlp + t — the backward mirrors it;
 *  - activation gradients are written by the ops, parameter gradients
 *    accumulate (kernels/backend.h): zero grads once per optimizer step. */
#include "trainer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "forward.h"
#include "model_forward.h"

/* The trainer's state. The forward is the one skeleton (forward.h); the
 * mixers' forward and backward are their units (mixer.h). */
struct hm_trainer {
    struct hm_model *m;              /* borrowed */
    const struct hm_backend *be;    /* borrowed */
    struct hm_train_opts opt;
    int64_t N;                      /* B·T rows */
    struct hm_model *g;              /* owned: gradients */
    struct hm_layer_acts *la;       /* [L] saved activations */
    float *arena;                   /* owned: every activation buffer */
    float *hL, *meanf, *rstdf, *hf; /* final residual, LNf stats, LNf output */
    float *o, *mo;                  /* [N, d] attention output, MLP output */
    float *gbuf, *dmh, *dmg;        /* [N, I] (dmg: llama) */
    float *dh, *dt1, *dt2, *dt3;    /* [N, d] */
    float *datt;                    /* [N, n_h p] gradient of the merged heads */
    float *dqkv;                    /* [N, 3 n_h p] per-head q, k, v grads */
    float *proj, *dproj;            /* llama: [N, qkv_dim] projection and its grad
                                     * (neox: both alias qkv / dqkv) */
    float *dhf;                     /* [N, d] */
    float *dphiq, *dphik;           /* [T, n_h, 2F] one sequence (hedgehog, hedgemamba) */
    float *dys, *dz;                /* [N, n_h p] hedgemamba: scan output and gate grads */
    float *dxraw;                   /* [N, qkv_dim] hedgemamba: grad of the pre-conv qkv */
    float *ddt, *ddtz;              /* [N, n_h] hedgemamba: grads of Δ and its pre-act */
    unsigned active;                /* HM_COMP_* that train (hedgemamba) */
    float *logits, *dlogits;        /* [CE_ROWS, V] */
    float *tlogits, *thf;           /* teacher: [CE_ROWS, V], [N, d] */
    struct hm_model_ws tws;          /* teacher workspace */
    void *att_ws;
    size_t att_ws_size, attb_ws_size;
    int32_t *in, *tg;               /* [N] token ids, targets (backend memory) */
    int32_t *hin, *htg;             /* [N] their host copies (checked, then uploaded) */
    double *sums;                   /* [2] backend: CE and KL sums when the caller gives none */
    float *ot;                      /* [L, N, d] stage 1b: the teacher's attention outputs */
    int64_t align_b;                /* stage 1b: the sequence the teacher runs */
    struct hm_tensor_view *views, *gviews;
    struct hm_opt_param *params;
    int64_t np;
};

void hm_trainer_free(struct hm_trainer *tr)
{
    if (!tr)
        return;
    hm_model_free(tr->g);
    free(tr->la);
    hm_backend_free(tr->be, (void **)&tr->arena);
    hm_backend_free(tr->be, &tr->att_ws);
    hm_backend_free(tr->be, (void **)&tr->in);
    hm_backend_free(tr->be, (void **)&tr->tg);
    hm_backend_free(tr->be, (void **)&tr->sums);
    free(tr->hin);
    free(tr->htg);
    free(tr->views);
    free(tr->gviews);
    free(tr->params);
    hm_model_ws_release(&tr->tws);
    free(tr);
}

void hm_trainer_zero_grad(struct hm_trainer *tr)
{
    hm_backend_fill(tr->be, tr->g->storage, tr->g->n_params, 0.0f);
}

const struct hm_opt_param *hm_trainer_params(const struct hm_trainer *tr, int64_t *np)
{
    *np = tr->np;
    return tr->params;
}

const struct hm_model *hm_trainer_grads(const struct hm_trainer *tr) { return tr->g; }

int hm_train_frozen(const struct hm_train_opts *o, const struct hm_config *c, unsigned active,
                    const struct hm_param_spec *s)
{
    if (o->freeze_embeddings && s->group == HM_PG_EMBED)
        return 1;
    if (o->align_teacher && s->group != HM_PG_MIXER && s->group != HM_PG_FEATURE_MAP &&
        s->group != HM_PG_SSM && s->group != HM_PG_CONV && s->group != HM_PG_GATE)
        return 1;
    if (o->align_teacher && s->layer >= 0 && hm_layer_mixer(c, s->layer) == HM_MIXER_SOFTMAX)
        return 1;
    /* inactive HedgeMamba components keep their stored values (contract §3) */
    return (s->group == HM_PG_SSM && !(active & HM_COMP_SSM)) ||
           (s->group == HM_PG_CONV && !(active & HM_COMP_CONV)) ||
           (s->group == HM_PG_GATE && !(active & HM_COMP_GATE));
}

void hm_trainer_post_update(struct hm_trainer *tr)
{
    for (int64_t l = 0; l < tr->m->cfg.num_hidden_layers; l++) {
        const struct hm_mixer_unit *u = hm_layer_unit(&tr->m->cfg, l);
        if (u->post_update)
            u->post_update(tr->m, tr->be, l);
    }
}

/* Rows of the output layer and loss per pass: N split evenly into chunks
 * of at most max(HM_TRAIN_CE_ROWS, 2^25 / V) rows (logits and their
 * gradient ≤ 256 MiB at any V; at Pythia's V one 512-row pass, whose
 * products run ~15 % faster than at 256 rows). */
static int64_t ce_rows(const struct hm_train_opts *o, int64_t V)
{
    const int64_t N = o->B * o->T;
    int64_t cap = ((int64_t)1 << 25) / (V > 0 ? V : 1);
    cap = cap > HM_TRAIN_CE_ROWS ? cap : HM_TRAIN_CE_ROWS;
    cap = o->ce_rows > 0 ? o->ce_rows : cap;
    int64_t chunks = (N + cap - 1) / cap;
    return chunks > 0 ? (N + chunks - 1) / chunks : 1;
}

/* The arena hm_trainer_new carves: one list of (pointer, floats) so the
 * size and the layout cannot disagree. With tr == NULL only the size is
 * computed (pointers are not written). */
static int64_t carve(struct hm_trainer *tr, const struct hm_config *c,
                     const struct hm_train_opts *o, float *base)
{
    const int64_t B = o->B, T = o->T, N = B * T, L = c->num_hidden_layers;
    const int64_t d = c->hidden_size, I = c->intermediate_size, V = c->vocab_size;
    const int64_t nh = c->num_attention_heads, R = ce_rows(o, V);
    const int64_t Da = c->attn_dim, H3 = 3 * c->attn_dim, Q = c->qkv_dim;
    const int seq = !c->use_parallel_residual, llama = c->qkv_layout == HM_QKV_GQA;
    float *p = base;
    int64_t total = 0;
#define TAKE(ptr, n, when)                                                                    \
    do {                                                                                      \
        if (when) {                                                                           \
            if (tr)                                                                           \
                (ptr) = p, p += (n);                                                          \
            total += (n);                                                                     \
        }                                                                                     \
    } while (0)
    /* stage 1b runs the mixers alone: no residual stream, MLP or logits */
    const int full = o->align_teacher == NULL || o->align_block; /* blocks: whole layers */
    struct hm_layer_acts dummy = {0};
    for (int64_t l = 0; l < L; l++) {
        struct hm_layer_acts *a = tr ? &tr->la[l] : &dummy;
        TAKE(a->h, N * d, full);
        if (o->recompute && l > 0) { /* layer 0's set, shared (trainer.h) */
            if (tr) {
                float *h = a->h;
                *a = tr->la[0];
                a->h = h;
            }
            continue;
        }
        /* a layer's own mixer buffers; the set recompute shares serves all */
        const unsigned bufs = o->recompute ? hm_mixers_bufs(c) : hm_layer_unit(c, l)->bufs;
        const int64_t F2 = bufs & HM_MIX_FMAP ? 2 * c->feature_dim : 0;
        const int ssm = (bufs & HM_MIX_SSM) != 0;
        const int64_t LS = bufs & HM_MIX_LSAVE ? hm_mixer_lsave_floats(c, T) : 0;
        TAKE(a->mean1, N, full);
        TAKE(a->rstd1, N, full);
        TAKE(a->a, N * d, 1);
        TAKE(a->qkv, N * H3, 1);
        TAKE(a->proj, N * Q, 0); /* per-layer: no; the shared tr->proj below */
        TAKE(a->att, N * Da, 1);
        TAKE(a->lse, B * nh * T, 1);
        TAKE(a->phiq, N * nh * F2, F2);
        TAKE(a->phik, N * nh * F2, F2);
        TAKE(a->lsave, B * LS, LS);
        TAKE(a->xraw, N * Q, ssm);
        TAKE(a->dtz, N * nh, ssm);
        TAKE(a->dt, N * nh, ssm);
        TAKE(a->z, N * Da, ssm);
        TAKE(a->y, N * Da, ssm);
        TAKE(a->t, N * d, full && seq);
        TAKE(a->mean2, N, full);
        TAKE(a->rstd2, N, full);
        TAKE(a->a2, N * d, full);
        TAKE(a->mh, N * I, full);
        TAKE(a->mg, N * I, full && llama);
    }
    struct hm_trainer dt = {0};
    struct hm_trainer *t = tr ? tr : &dt;
    const unsigned bufs = hm_mixers_bufs(c); /* the gradients' scratch serves every layer */
    const int64_t F2 = bufs & HM_MIX_FMAP ? 2 * c->feature_dim : 0;
    const int ssm = (bufs & HM_MIX_SSM) != 0;
    TAKE(t->hL, N * d, full);
    TAKE(t->meanf, N, full);
    TAKE(t->rstdf, N, full);
    TAKE(t->hf, N * d, full);
    TAKE(t->o, N * d, 1);
    TAKE(t->mo, N * d, full);
    TAKE(t->gbuf, N * I, full);
    TAKE(t->dmh, N * I, full);
    TAKE(t->dmg, N * I, full && llama);
    TAKE(t->dh, N * d, 1);
    TAKE(t->dt1, N * d, full);
    TAKE(t->dt2, N * d, full);
    TAKE(t->dt3, N * d, 1);
    TAKE(t->datt, N * Da, 1);
    TAKE(t->dqkv, N * H3, 1);
    TAKE(t->proj, N * Q, llama);
    TAKE(t->dproj, N * Q, llama);
    TAKE(t->dhf, N * d, full);
    TAKE(t->dphiq, T * nh * F2, F2);
    TAKE(t->dphik, T * nh * F2, F2);
    TAKE(t->dys, N * Da, ssm);
    TAKE(t->dz, N * Da, ssm);
    TAKE(t->dxraw, N * Q, ssm);
    TAKE(t->ddt, N * nh, ssm);
    TAKE(t->ddtz, N * nh, ssm);
    TAKE(t->logits, R * V, full);
    TAKE(t->dlogits, R * V, full);
    TAKE(t->tlogits, R * V, o->kd_teacher != NULL);
    TAKE(t->thf, N * d, o->kd_teacher != NULL);
    TAKE(t->ot, L * N * d, o->align_teacher != NULL);
#undef TAKE
    return total;
}

static int64_t arena_floats(const struct hm_config *c, const struct hm_train_opts *o)
{
    return carve(NULL, c, o, NULL);
}

size_t hm_trainer_activation_bytes(const struct hm_config *cfg, const struct hm_train_opts *o)
{
    return sizeof(float) * (size_t)arena_floats(cfg, o);
}

enum hm_status hm_trainer_new(struct hm_model *model, const struct hm_backend *be,
                              const struct hm_train_opts *opts, struct hm_trainer **out,
                              struct hm_error *err)
{
    *out = NULL;
    const struct hm_config *c = &model->cfg;
    if (opts->B < 1 || opts->T < 1 || opts->accum < 1)
        return hm_error_set(err, HM_ERR_INVALID, "batch, seq_len and accum must be positive");
    if (!(opts->ce_weight >= 0) || !isfinite(opts->ce_weight))
        return hm_error_set(err, HM_ERR_INVALID, "the cross-entropy weight must be finite and "
                            ">= 0, got %g", opts->ce_weight);
    if (opts->kd_teacher && (!(opts->kd_temperature > 0) || !isfinite(opts->kd_temperature)))
        return hm_error_set(err, HM_ERR_INVALID, "the distillation temperature must be finite "
                            "and > 0, got %g", opts->kd_temperature);
    if (opts->kd_teacher && opts->kd_teacher->cfg.vocab_size != c->vocab_size)
        return hm_error_set(err, HM_ERR_INVALID,
                            "teacher vocabulary (%lld) differs from the student's (%lld)",
                            (long long)opts->kd_teacher->cfg.vocab_size,
                            (long long)c->vocab_size);
    const struct hm_model *at = opts->align_teacher;
    if (opts->align_block && !at)
        return hm_error_set(err, HM_ERR_INVALID, "stage 1b on blocks needs an alignment teacher");
    if (at && opts->kd_teacher)
        return hm_error_set(err, HM_ERR_INVALID, "alignment and distillation are separate runs");
    if (at && opts->recompute)
        return hm_error_set(err, HM_ERR_INVALID, "stage 1b (alignment) keeps each mixer's "
                            "activations: it has no layer forward to recompute");
    if (at && at->cfg.mixer != HM_MIXER_SOFTMAX)
        return hm_error_set(err, HM_ERR_INVALID,
                            "the alignment teacher must be a softmax model, not %s",
                            hm_arch_name(&at->cfg));
    if (at && (at->cfg.num_hidden_layers != c->num_hidden_layers ||
               at->cfg.hidden_size != c->hidden_size ||
               at->cfg.num_attention_heads != c->num_attention_heads ||
               at->cfg.head_dim != c->head_dim || at->cfg.vocab_size != c->vocab_size ||
               at->cfg.norm_kind != c->norm_kind || at->cfg.qkv_layout != c->qkv_layout))
        return hm_error_set(err, HM_ERR_INVALID,
                            "the alignment teacher's skeleton (%lld layers, hidden %lld, %lld "
                            "heads of %lld) differs from the student's (%lld, %lld, %lld, %lld)",
                            (long long)at->cfg.num_hidden_layers, (long long)at->cfg.hidden_size,
                            (long long)at->cfg.num_attention_heads, (long long)at->cfg.head_dim,
                            (long long)c->num_hidden_layers, (long long)c->hidden_size,
                            (long long)c->num_attention_heads, (long long)c->head_dim);
    struct hm_trainer *tr = calloc(1, sizeof *tr);
    if (!tr)
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    tr->m = model;
    tr->be = be;
    tr->opt = *opts;
    hm_model_ws_init(&tr->tws);
    const int64_t B = opts->B, T = opts->T, N = B * T, L = c->num_hidden_layers;
    tr->N = N;
    enum hm_status st = hm_model_check_placed(model, be, err);
    if (st == HM_OK) { /* gradients for all but the frozen embeddings, which no op writes */
        unsigned char *skip = calloc((size_t)model->n_views + 1, 1);
        for (int64_t i = 0; skip && i < model->n_views; i++)
            skip[i] = opts->freeze_embeddings && model->views[i].spec.group == HM_PG_EMBED;
        st = skip ? hm_model_new_without(c, skip, &tr->g, err)
                  : hm_error_set(err, HM_ERR_NOMEM, "out of memory");
        free(skip);
    }
    if (st == HM_OK)
        st = hm_model_place(tr->g, be, err); /* gradients: one flat allocation */
    if (st != HM_OK)
        goto fail;
    /* one arena for every activation */
    int64_t total = arena_floats(c, opts);
    tr->arena = hm_backend_alloc(be, sizeof(float) * (size_t)total);
    tr->la = calloc((size_t)L + 1, sizeof *tr->la);
    tr->in = hm_backend_alloc(be, sizeof(int32_t) * (size_t)N);
    tr->tg = hm_backend_alloc(be, sizeof(int32_t) * (size_t)N);
    tr->sums = hm_backend_alloc(be, 2 * sizeof(double));
    tr->hin = malloc(sizeof(int32_t) * (size_t)N);
    tr->htg = malloc(sizeof(int32_t) * (size_t)N);
    if (!tr->arena || !tr->la || !tr->in || !tr->tg || !tr->sums || !tr->hin || !tr->htg) {
        st = hm_error_set(err, HM_ERR_NOMEM,
                          "out of memory for %.1f GB of activations (lower --batch or --seq-len)",
                          (double)total * 4e-9);
        goto fail;
    }
    carve(tr, c, opts, tr->arena);
    for (int64_t l = 0; l < L; l++) /* neox: the fused projection is the per-head layout */
        tr->la[l].proj = c->qkv_layout == HM_QKV_GQA ? tr->proj : tr->la[l].qkv;
    if (c->qkv_layout != HM_QKV_GQA)
        tr->dproj = tr->dqkv;
    /* the components mask is HedgeMamba's; the other mixers have none of them */
    tr->active = c->components;
    tr->att_ws_size = hm_mixers_ws_size(c, be, T, 1);
    tr->attb_ws_size = tr->att_ws_size;
    tr->att_ws = hm_backend_alloc(be, tr->att_ws_size);
    int64_t nv = hm_model_views(model, &tr->views), ngv = hm_model_views(tr->g, &tr->gviews);
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
        if (hm_train_frozen(&tr->opt, c, tr->active, &tr->views[i].spec))
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

/* The skeleton's arguments for the trainer's layers: no hooks, no decoding
 * state (the mixers cannot fail then) */
#define FWD_OF(tr)                                                                         \
    {.B = (tr)->opt.B, .T = (tr)->opt.T, .la = (tr)->la, .h_out = (tr)->hL, .o = (tr)->o,  \
     .m = (tr)->mo, .act = (tr)->gbuf, .ws = (tr)->att_ws, .ws_size = (tr)->att_ws_size}

static void forward_layers(struct hm_trainer *tr)
{
    const struct hm_fwd f = FWD_OF(tr);
    (void)hm_model_layers_forward(tr->m, tr->be, tr->in, &f, NULL);
    hm_model_norm_forward(tr->m, tr->be, tr->hf, tr->meanf, tr->rstdf, tr->hL, tr->m->lnf_w,
                          tr->m->lnf_b, tr->N);
}

/* Output layer + loss, ce_rows() rows at a time; fills tr->dhf and adds
 * the cross-entropy and τ²·KL sums to sums[0], sums[1] (backend memory).
 * The CE gradient is scaled by ce_weight (its sum is not: CE is measured
 * at any weight). */
static void loss_and_head(struct hm_trainer *tr, double *sums)
{
    const struct hm_backend *be = tr->be;
    const struct hm_model *m = tr->m, *tm = tr->opt.kd_teacher;
    const int64_t N = tr->N, d = m->cfg.hidden_size, V = m->cfg.vocab_size;
    const double scale = 1.0 / ((double)N * (double)tr->opt.accum);
    float *dW = tr->opt.freeze_embeddings ? NULL : tr->g->embed_out;
    const int64_t R = ce_rows(&tr->opt, V);
    for (int64_t r0 = 0; r0 < N; r0 += R) {
        int64_t rows = N - r0 < R ? N - r0 : R;
        hm_model_head(m, tr->logits, tr->hf + r0 * d, rows);
        hm_backend_cross_entropy_backward(be, sums, tr->dlogits, tr->logits, tr->tg + r0, rows, V,
                                          (float)(scale * tr->opt.ce_weight));
        if (tm && tr->opt.kd_weight != 0) {
            hm_model_head(tm, tr->tlogits, tr->thf + r0 * d, rows);
            hm_backend_kl_backward(be, sums + 1, tr->dlogits, tr->logits, tr->tlogits, rows, V,
                                   tr->opt.kd_weight, scale, tr->opt.kd_temperature);
        }
        if (dW) /* the head trains: its gradient with the input's */
            hm_backend_matmul_backward(be, tr->dhf + r0 * d, dW, NULL, tr->dlogits,
                                       tr->hf + r0 * d, m->embed_out, rows, d, V);
        else /* frozen, perhaps narrow: the input's gradient alone */
            hm_model_head_backward(m, tr->dhf + r0 * d, tr->dlogits, rows);
    }
}

void hm_trainer_loss(const struct hm_trainer *tr, const double sums[2], struct hm_train_loss *loss)
{
    loss->ce = sums[0] / (double)tr->N;
    loss->kl = sums[1] / (double)tr->N;
    loss->total = tr->opt.ce_weight * loss->ce + tr->opt.kd_weight * loss->kl;
}

/* The family's norm backward: dx written, dw/db accumulate (db unused by
 * RMSNorm). */
static void norm_backward(const struct hm_trainer *tr, float *dx, float *dw, float *db,
                          const float *dy, const float *x, const float *mean, const float *rstd,
                          const float *w)
{
    const struct hm_config *c = &tr->m->cfg;
    if (c->norm_kind == HM_NORM_RMS)
        hm_backend_rmsnorm_backward(tr->be, dx, dw, dy, x, rstd, w, tr->N, c->hidden_size);
    else
        hm_backend_layernorm_backward(tr->be, dx, dw, db, dy, x, mean, rstd, w, tr->N,
                                      c->hidden_size);
}

/* MLP backward: dy [N, d] (its output grad) → tr->dt1 [N, d] (its input
 * grad); parameter grads accumulate into gw. Uses gbuf, dmh, dmg, dt3. */
static void mlp_backward(struct hm_trainer *tr, const struct hm_layer *w, struct hm_layer *gw,
                         const struct hm_layer_acts *a, const float *dy)
{
    const struct hm_backend *be = tr->be;
    const struct hm_config *c = &tr->m->cfg;
    const int64_t N = tr->N, d = c->hidden_size, I = c->intermediate_size;
    if (c->mlp_kind == HM_MLP_SWIGLU) {
        /* act = silu(g) ⊙ up; out = act W2^T */
        hm_backend_silu_gate_forward(be, tr->gbuf, a->mh, a->mg, N * I);
        hm_backend_matmul_backward(be, tr->dmh, gw->fc2_w, gw->fc2_b, dy, tr->gbuf, w->fc2_w, N,
                                   I, d);
        hm_backend_silu_gate_backward(be, tr->gbuf, tr->dmg, tr->dmh, a->mh, a->mg, N * I);
        hm_backend_matmul_backward(be, tr->dt1, gw->fc1_w, gw->fc1_b, tr->gbuf, a->a2, w->fc1_w,
                                   N, d, I);
        hm_backend_matmul_backward(be, tr->dt3, gw->fcg_w, gw->fcg_b, tr->dmg, a->a2, w->fcg_w,
                                   N, d, I);
        hm_backend_add_forward(be, tr->dt1, tr->dt1, tr->dt3, N * d);
        return;
    }
    const enum hm_gelu_kind gk = c->hidden_act == HM_ACT_GELU ? HM_GELU_ERF : HM_GELU_TANH;
    hm_backend_gelu_forward(be, tr->gbuf, a->mh, N * I, gk);
    hm_backend_matmul_backward(be, tr->dmh, gw->fc2_w, gw->fc2_b, dy, tr->gbuf, w->fc2_w, N, I,
                               d);
    hm_backend_gelu_backward(be, tr->dmh, tr->dmh, a->mh, N * I, gk);
    hm_backend_matmul_backward(be, tr->dt1, gw->fc1_w, gw->fc1_b, tr->dmh, a->a2, w->fc1_w, N, d,
                               I);
}

/* The mixer of layer l backward: tr->datt [N, n_h p] → da [N, d], the
 * gradient of its input (norm1's output), all mixer inputs summed (da NULL:
 * parameter gradients only). Order:
 * the unit's backward (to per-head q, k, v), rotary, the GQA expansion
 * (llama), the unit's projection backward (hedgemamba: the conv), the
 * projection matmul, then the unit's other input terms (Δ, gate). */
static void mixer_backward(struct hm_trainer *tr, int64_t l, float *da)
{
    const struct hm_backend *be = tr->be;
    const struct hm_model *m = tr->m;
    const struct hm_config *c = &m->cfg;
    const struct hm_mixer_unit *u = hm_layer_unit(c, l);
    struct hm_layer_acts *a = &tr->la[l];
    struct hm_layer *gw = &tr->g->layers[l];
    const int64_t B = tr->opt.B, T = tr->opt.T, N = tr->N;
    const int64_t d = c->hidden_size, nh = c->num_attention_heads, p = c->head_dim;
    const int64_t r = c->rotary_dims, H3 = 3 * c->attn_dim, Q = c->qkv_dim;
    const struct hm_mix x = {.m = m, .be = be, .l = l, .B = B, .T = T, .a = a, .ws = tr->att_ws,
                             .ws_size = tr->attb_ws_size};
    const struct hm_mix_grads g = {gw, tr->active, tr->datt, tr->dqkv, tr->dys, tr->dz,
                                   tr->ddt, tr->ddtz, tr->dphiq, tr->dphik, tr->dt3};
    u->backward(&x, &g);
    for (int64_t b = 0; b < B; b++) {
        float *dq = tr->dqkv + b * T * H3;
        hm_backend_rotary_backward(be, dq, T, nh, r, H3, 3 * p, 0, m->inv_freq);
        hm_backend_rotary_backward(be, dq + p, T, nh, r, H3, 3 * p, 0, m->inv_freq);
    }
    if (c->qkv_layout == HM_QKV_GQA)
        hm_backend_qkv_expand_backward(be, tr->dproj, tr->dqkv, N, nh, c->num_key_value_heads, p);
    const float *dp = u->proj_backward ? u->proj_backward(&x, &g, tr->dproj, tr->dxraw)
                                       : tr->dproj;
    hm_backend_matmul_backward(be, da, gw->qkv_w, gw->qkv_b, dp, a->a, m->layers[l].qkv_w, N, d,
                               Q);
    if (u->backward_tail)
        u->backward_tail(&x, &g, da);
}

/* Layer l backward from its activations tr->la[l]: tr->dh, the gradient of
 * its output, becomes the gradient of its input; parameter gradients
 * accumulate. */
static void layer_backward(struct hm_trainer *tr, int64_t l)
{
    const struct hm_backend *be = tr->be;
    const struct hm_model *m = tr->m;
    const struct hm_config *c = &m->cfg;
    const int64_t N = tr->N, d = c->hidden_size;
    const struct hm_layer *w = &m->layers[l];
    struct hm_layer *gw = &tr->g->layers[l];
    struct hm_layer_acts *a = &tr->la[l];
    const float *mlp_in = a->t ? a->t : a->h;
    /* MLP branch: dh is the gradient of its output */
    mlp_backward(tr, w, gw, a, tr->dh);
    norm_backward(tr, tr->dt2, gw->ln2_w, gw->ln2_b, tr->dt1, mlp_in, a->mean2, a->rstd2,
                  w->ln2_w);
    /* sequential: dt = dh + dnorm2; the attention branch sees dt */
    if (a->t)
        hm_backend_add_forward(be, tr->dh, tr->dh, tr->dt2, N * d);
    /* attention branch */
    hm_backend_matmul_backward(be, tr->datt, gw->dense_w, gw->dense_b, tr->dh, a->att,
                               w->dense_w, N, c->attn_dim, d);
    mixer_backward(tr, l, tr->dt1);
    norm_backward(tr, tr->dt3, gw->ln1_w, gw->ln1_b, tr->dt1, a->h, a->mean1, a->rstd1,
                  w->ln1_w);
    hm_backend_add_forward(be, tr->dh, tr->dh, tr->dt3, N * d);
    if (!a->t)
        hm_backend_add_forward(be, tr->dh, tr->dh, tr->dt2, N * d);
}

static void backward_layers(struct hm_trainer *tr)
{
    const struct hm_backend *be = tr->be;
    const struct hm_model *m = tr->m;
    struct hm_model *g = tr->g;
    const int64_t N = tr->N, L = m->cfg.num_hidden_layers, d = m->cfg.hidden_size;
    norm_backward(tr, tr->dh, g->lnf_w, g->lnf_b, tr->dhf, tr->hL, tr->meanf, tr->rstdf,
                  m->lnf_w);
    for (int64_t l = L - 1; l >= 0; l--) {
        if (tr->opt.recompute && l < L - 1) /* the shared set holds layer L−1's */
            (void)hm_model_layer_forward(m, be, l, &(struct hm_fwd)FWD_OF(tr), NULL);
        layer_backward(tr, l);
    }
    if (!tr->opt.freeze_embeddings)
        hm_backend_embedding_backward(be, g->embed_in, tr->dh, tr->in, N, d);
}

/* Checks tokens [B, T + 1] (host) against the vocabulary, splits them into
 * inputs and targets (hin, htg) and uploads both. */
static enum hm_status load_tokens(struct hm_trainer *tr, const int32_t *tokens,
                                  struct hm_error *err)
{
    const int64_t B = tr->opt.B, T = tr->opt.T, V = tr->m->cfg.vocab_size;
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++) {
            int32_t x = tokens[b * (T + 1) + t], y = tokens[b * (T + 1) + t + 1];
            if (x < 0 || x >= V || y < 0 || y >= V)
                return hm_error_set(err, HM_ERR_INVALID,
                                    "token id %d is outside the model's vocabulary of %lld",
                                    (x < 0 || x >= V) ? x : y, (long long)V);
            tr->hin[b * T + t] = x;
            tr->htg[b * T + t] = y;
        }
    hm_backend_upload(tr->be, tr->in, tr->hin, sizeof(int32_t) * (size_t)tr->N);
    hm_backend_upload(tr->be, tr->tg, tr->htg, sizeof(int32_t) * (size_t)tr->N);
    return HM_OK;
}

enum hm_status hm_trainer_accumulate(struct hm_trainer *tr, const int32_t *tokens,
                                     double *sums, struct hm_train_loss *loss,
                                     struct hm_error *err)
{
    const int64_t B = tr->opt.B, T = tr->opt.T;
    enum hm_status st = load_tokens(tr, tokens, err);
    if (st != HM_OK)
        return st;
    const struct hm_backend *be = tr->be;
    if (tr->opt.kd_teacher) {
        const int64_t d = tr->m->cfg.hidden_size;
        for (int64_t b = 0; b < B; b++) {
            st = hm_model_hidden(tr->opt.kd_teacher, be, tr->hin + b * T, T, &tr->tws, NULL,
                                 err);
            if (st != HM_OK)
                return st;
            hm_backend_copy2d(be, tr->thf + b * T * d, d, tr->tws.hf, d, T, d);
        }
    }
    double *acc = sums ? sums : tr->sums;
    if (!sums) {
        const double zero[2] = {0, 0};
        hm_backend_upload(be, tr->sums, zero, sizeof zero);
    }
    forward_layers(tr);
    loss_and_head(tr, acc);
    backward_layers(tr);
    if (loss) {
        double h[2];
        hm_backend_download(be, h, acc, sizeof h);
        hm_trainer_loss(tr, h, loss);
    }
    return hm_backend_sync(be, err);
}

/* Stage 1b's teacher hook: keep layer l's norm1 output (the student layer's
 * input) and attention output (its target) for the sequence being run. */
static enum hm_status align_hook(void *ctx, int64_t l, const float *a_in, const float *qkv,
                                 const float *o_t, int64_t T, int64_t d, struct hm_error *err)
{
    struct hm_trainer *tr = ctx;
    const int64_t row = tr->align_b * T;
    (void)qkv;
    (void)err;
    hm_backend_copy2d(tr->be, tr->la[l].a + row * d, d, a_in, d, T, d);
    hm_backend_copy2d(tr->be, tr->ot + (l * tr->N + row) * d, d, o_t, d, T, d);
    return HM_OK;
}

/* Stage 1b on blocks: the teacher's residual stream entering layer l (the
 * student layer's input) and, for l ≥ 1, leaving layer l − 1 (its target). */
static enum hm_status stream_hook(void *ctx, int64_t l, const float *h, int64_t T, int64_t d,
                                  struct hm_error *err)
{
    struct hm_trainer *tr = ctx;
    const int64_t row = tr->align_b * T, L = tr->m->cfg.num_hidden_layers;
    (void)err;
    if (l < L)
        hm_backend_copy2d(tr->be, tr->la[l].h + row * d, d, h, d, T, d);
    if (l > 0)
        hm_backend_copy2d(tr->be, tr->ot + ((l - 1) * tr->N + row) * d, d, h, d, T, d);
    return HM_OK;
}

/* Stage 1b on blocks, after the teacher's pass: each student layer from the
 * teacher's h_l, its output against the teacher's h_{l+1}, its backward.
 * Last layer first: layer l writes its output over layer l + 1's input,
 * which that layer has used by then. */
static void align_blocks(struct hm_trainer *tr, double *sums, double scale)
{
    const struct hm_model *m = tr->m;
    const int64_t N = tr->N, L = m->cfg.num_hidden_layers, d = m->cfg.hidden_size;
    for (int64_t l = L - 1; l >= 0; l--) {
        if (hm_layer_mixer(&m->cfg, l) == HM_MIXER_SOFTMAX)
            continue; /* a kept layer is the teacher's own: nothing to align */
        (void)hm_model_layer_forward(m, tr->be, l, &(struct hm_fwd)FWD_OF(tr), NULL);
        const float *out = l + 1 < L ? tr->la[l + 1].h : tr->hL;
        hm_backend_mse_loss(tr->be, sums + l, tr->dh, out, tr->ot + l * N * d, N, d,
                            (float)scale);
        layer_backward(tr, l);
    }
}

/* The layers stage 1b aligns: a hybrid's student layers (at least 1). */
static int64_t align_layers(const struct hm_config *c)
{
    const int64_t n = c->num_hidden_layers - hm_config_kept_count(c);
    return n > 0 ? n : 1;
}

enum hm_status hm_trainer_align(struct hm_trainer *tr, const int32_t *tokens, double *sums,
                                struct hm_error *err)
{
    const struct hm_backend *be = tr->be;
    const struct hm_model *m = tr->m;
    const struct hm_config *c = &m->cfg;
    const int64_t B = tr->opt.B, T = tr->opt.T, N = tr->N, L = c->num_hidden_layers;
    const int64_t d = c->hidden_size, Da = c->attn_dim;
    if (!tr->opt.align_teacher)
        return hm_error_set(err, HM_ERR_INVALID, "the trainer has no alignment teacher");
    enum hm_status st = load_tokens(tr, tokens, err);
    const int blocks = tr->opt.align_block;
    const struct hm_model_hooks hooks = {.on_layer = blocks ? NULL : align_hook,
                                         .on_stream = blocks ? stream_hook : NULL, .ctx = tr,
                                         .stop_after_last_hook = !blocks};
    for (int64_t b = 0; st == HM_OK && b < B; b++) {
        tr->align_b = b;
        st = hm_model_hidden(tr->opt.align_teacher, be, tr->hin + b * T, T, &tr->tws, &hooks,
                             err);
    }
    if (st != HM_OK)
        return st;
    const double scale = 1.0 / ((double)align_layers(c) * (double)N * (double)tr->opt.accum);
    if (blocks) {
        align_blocks(tr, sums, scale);
        return hm_backend_sync(be, err);
    }
    for (int64_t l = 0; l < L; l++) {
        struct hm_layer_acts *a = &tr->la[l];
        if (hm_layer_mixer(c, l) == HM_MIXER_SOFTMAX)
            continue; /* a kept layer is the teacher's own: nothing to align */
        const struct hm_mix x = {.m = m, .be = be, .l = l, .B = B, .T = T, .a = a,
                                 .ws = tr->att_ws, .ws_size = tr->att_ws_size};
        if ((st = hm_model_mixer_forward(&x, tr->o, err)) != HM_OK)
            return st;
        if (tr->opt.align_mse)
            hm_backend_mse_loss(be, sums + l, tr->dh, tr->o, tr->ot + l * N * d, N, d,
                                (float)scale);
        else
            hm_backend_cosine_loss(be, sums + l, tr->dh, tr->o, tr->ot + l * N * d, N, d,
                                   (float)scale);
        hm_backend_matmul_backward(be, tr->datt, tr->g->layers[l].dense_w,
                                   tr->g->layers[l].dense_b, tr->dh, a->att,
                                   m->layers[l].dense_w, N, Da, d);
        mixer_backward(tr, l, NULL); /* the input is the teacher's: no gradient */
    }
    return hm_backend_sync(be, err);
}

void hm_trainer_align_loss(const struct hm_trainer *tr, const double *sums, double *loss,
                           double *aux)
{
    const int64_t L = tr->m->cfg.num_hidden_layers;
    double total = 0;
    for (int64_t l = 0; l < L; l++) {
        aux[l] = sums[l] / (double)tr->N;
        total += aux[l];
    }
    *loss = total / (double)align_layers(&tr->m->cfg);
}

double hm_train_flops_per_token(const struct hm_config *c, int64_t T, int freeze_embeddings)
{
    double d = (double)c->hidden_size, I = (double)c->intermediate_size;
    double V = (double)c->vocab_size, L = (double)c->num_hidden_layers;
    double Da = (double)c->attn_dim;
    double layer_mats = (double)c->qkv_dim * d + Da * d +
                        (c->mlp_kind == HM_MLP_SWIGLU ? 3.0 : 2.0) * d * I;
    double f = 6.0 * L * layer_mats;
    f += (freeze_embeddings ? 4.0 : 6.0) * V * d;
    f += 3.0 * hm_mixers_flops(c, T);
    return f;
}
