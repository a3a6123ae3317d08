/* linearize.c — stage 1, teacher-forced layer-wise feature-map training
 * (see linearize.h).
 *
 * Gotchas:
 *  - the student layer starts from the teacher's ROTATED q and k (the hook
 *    hands over qkv after rotary): contract §2 puts rotary before the feature map;
 *  - the loss weight of one token of one layer is 1 / (L · B · T · accum), so
 *    accumulated micro-batches equal one big batch;
 *  - dense is the teacher's and frozen: only its input gradient is formed;
 *  - attn-ce compares attention weights, not outputs: it runs the feature
 *    maps alone (no linear attention, no dense) and hands dφq, dφk straight
 *    to the feature-map backward. */
#include "linearize.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt_write.h"
#include "mixer.h"
#include "model_forward.h"
#include "model_views.h"
#include "params.h"


struct hm_linearizer {
    const struct hm_ckpt *ck;     /* borrowed */
    const struct hm_backend *be;  /* borrowed */
    struct hm_model *teacher;      /* owned, softmax (gpt_neox or llama) */
    struct hm_model *student;      /* owned, hedgehog; shares the teacher's tensors */
    int64_t B, T, accum, L;
    int64_t ns;                   /* the layers that train (not kept softmax) */
    struct hm_model_ws tws;        /* the teacher (hooked) */
    float *arena;                 /* owned: the per-layer scratch below */
    float *phiq, *phik, *dphiq, *dphik; /* [T, n_h, 2F] */
    float *y, *dy;                /* [T, n_h p] student attention, its grad */
    float *os, *dos;              /* [T, d] after dense, its grad */
    float *den;                   /* [n_h, T] */
    float *lsave;                 /* chunk states forward → backward (hm_mixer_lsave_floats) */
    void *ws;
    size_t ws_size;          /* max of the forward and backward workspaces */
    float *gstore;                /* owned: feature-map gradients */
    struct hm_layer *g;           /* [L] feature-map gradients (fq_*, fk_* set) */
    struct hm_opt_param *params;  /* [4 ns] */
    char *names;                  /* [4L][HM_PARAM_NAME_MAX] */
    double *sums;                 /* [L] backend: per-layer loss sums (hm_linearizer_eval) */
    double *cur;                  /* [L] backend: where this pass's layer sums go */
    int want_grad;
    double scale;
    enum hm_lin_objective objective;
    struct hm_model_ws vws;        /* validation */
};

void hm_linearizer_free(struct hm_linearizer *lz)
{
    if (!lz)
        return;
    hm_model_free(lz->student); /* borrows the teacher's tensors */
    hm_model_free(lz->teacher);
    hm_model_ws_release(&lz->tws);
    hm_model_ws_release(&lz->vws);
    hm_backend_free(lz->be, (void **)&lz->arena);
    hm_backend_free(lz->be, &lz->ws);
    hm_backend_free(lz->be, (void **)&lz->gstore);
    hm_backend_free(lz->be, (void **)&lz->sums);
    free(lz->g);
    free(lz->params);
    free(lz->names);
    free(lz);
}

struct hm_model *hm_linearizer_student(struct hm_linearizer *lz) { return lz->student; }

static const char *const objective_names[] = {"cos", "mse", "attn-ce"};

const char *hm_lin_objective_name(enum hm_lin_objective o)
{
    return (unsigned)o < 3 ? objective_names[o] : "?";
}

int hm_lin_objective_parse(const char *s, enum hm_lin_objective *out)
{
    for (int i = 0; i < 3; i++)
        if (strcmp(s, objective_names[i]) == 0) {
            *out = (enum hm_lin_objective)i;
            return 0;
        }
    return -1;
}

enum hm_status hm_linearizer_set_objective(struct hm_linearizer *lz, enum hm_lin_objective o,
                                           struct hm_error *err)
{
    if ((unsigned)o > HM_LIN_OBJECTIVE_ATTN_CE)
        return hm_error_set(err, HM_ERR_INVALID, "unknown stage-1 objective %d", (int)o);
    if (o == HM_LIN_OBJECTIVE_ATTN_CE) {
        const struct hm_config *c = &lz->student->cfg;
        size_t need = hm_backend_attn_ce_loss_ws_size(lz->be, lz->T, c->num_attention_heads,
                                                      2 * c->feature_dim, c->head_dim);
        if (need > lz->ws_size) {
            void *ws = hm_backend_alloc(lz->be, need);
            if (!ws)
                return hm_error_set(err, HM_ERR_NOMEM,
                                    "out of memory for the attn-ce workspace (%zu bytes)", need);
            hm_backend_free(lz->be, &lz->ws);
            lz->ws = ws;
            lz->ws_size = need;
        }
    }
    lz->objective = o;
    return HM_OK;
}

int hm_linearizer_sizes(const struct hm_config *tc, int64_t feature_dim,
                        const struct hm_backend *be, int64_t T, struct hm_lin_sizes *out)
{
    struct hm_config sc = *tc;
    struct hm_error err;
    sc.mixer = HM_MIXER_HEDGEHOG;
    sc.feature_dim = feature_dim;
    if (hm_config_finish(&sc, &err) != HM_OK)
        return -1;
    const int64_t d = sc.hidden_size, nh = sc.num_attention_heads, p = sc.head_dim;
    const int64_t F = sc.feature_dim, F2 = 2 * F, Da = sc.attn_dim;
    const int64_t floats = 4 * T * nh * F2 + 2 * T * d + 2 * T * Da + nh * T +
                           hm_mixer_lsave_floats(&sc, T);
    const size_t wf = hm_backend_linattn_ws_size(be, T, nh, F2, p, HM_LINATTN_CHUNK);
    const size_t wb = hm_backend_linattn_backward_ws_size(be, T, nh, F2, p, HM_LINATTN_CHUNK);
    *out = (struct hm_lin_sizes){.layers = sc.num_hidden_layers,
                                 .fm_floats = 2 * nh * p * F + 2 * nh * F,
                                 .scratch_bytes = sizeof(float) * (size_t)floats,
                                 .ws_bytes = wf > wb ? wf : wb};
    return 0;
}

enum hm_status hm_linearizer_new(const struct hm_ckpt *ck, int64_t feature_dim,
                                 const uint64_t *keep,
                                 const struct hm_backend *be, int64_t B, int64_t T,
                                 int64_t accum, struct hm_linearizer **out,
                                 struct hm_error *err)
{
    *out = NULL;
    const struct hm_config *tc = hm_ckpt_config(ck);
    if (tc->mixer != HM_MIXER_SOFTMAX)
        return hm_error_set(err, HM_ERR_INVALID,
                            "the teacher must be a softmax model (gpt_neox or llama), not %s",
                            hm_arch_name(tc));
    struct hm_linearizer *lz = calloc(1, sizeof *lz);
    if (!lz)
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    lz->ck = ck;
    lz->be = be;
    lz->B = B;
    lz->T = T;
    lz->accum = accum;
    hm_model_ws_init(&lz->tws);
    hm_model_ws_init(&lz->vws);
    /* one copy of the weights, at the checkpoint's width: the student is the
     * teacher's tensors plus its own feature maps (hm_model_extend) */
    enum hm_status st = hm_model_load_narrow(ck, tc, be, &lz->teacher, err);
    if (st != HM_OK)
        goto fail;
    struct hm_config sc = *tc;
    sc.mixer = HM_MIXER_HEDGEHOG;
    sc.feature_dim = feature_dim;
    if (keep)
        memcpy(sc.kept, keep, sizeof sc.kept);
    if ((st = hm_config_finish(&sc, err)) != HM_OK ||
        (st = hm_model_extend(lz->teacher, &sc, &lz->student, err)) != HM_OK)
        goto fail;
    const int64_t L = sc.num_hidden_layers, d = sc.hidden_size, nh = sc.num_attention_heads;
    const int64_t p = sc.head_dim, F = sc.feature_dim, F2 = 2 * F;
    lz->L = L;
    lz->ns = L - hm_config_kept_count(&sc);
    if (lz->ns < 1) {
        st = hm_error_set(err, HM_ERR_INVALID, "every layer is kept: nothing to linearize");
        goto fail;
    }
    const int64_t Da = sc.attn_dim;
    struct hm_lin_sizes z;
    hm_linearizer_sizes(tc, feature_dim, be, T, &z);
    const int64_t fm = z.fm_floats;
    lz->arena = hm_backend_alloc(be, z.scratch_bytes);
    lz->gstore = hm_backend_alloc(be, sizeof(float) * (size_t)(L * fm + 1));
    lz->g = calloc((size_t)L, sizeof *lz->g);
    lz->params = calloc((size_t)(4 * L), sizeof *lz->params);
    lz->names = calloc((size_t)(4 * L), HM_PARAM_NAME_MAX);
    lz->sums = hm_backend_alloc(be, sizeof(double) * (size_t)L);
    lz->ws_size = z.ws_bytes;
    lz->ws = hm_backend_alloc(be, lz->ws_size ? lz->ws_size : 1);
    if (!lz->arena || !lz->gstore || !lz->g || !lz->params || !lz->names || !lz->sums ||
        !lz->ws) {
        st = hm_error_set(err, HM_ERR_NOMEM, "out of memory for stage-1 buffers");
        goto fail;
    }
    hm_backend_fill(be, lz->gstore, L * fm + 1, 0.0f);
    float *a = lz->arena;
    lz->phiq = a, a += T * nh * F2;
    lz->phik = a, a += T * nh * F2;
    lz->dphiq = a, a += T * nh * F2;
    lz->dphik = a, a += T * nh * F2;
    lz->y = a, a += T * Da;
    lz->os = a, a += T * d;
    lz->dos = a, a += T * d;
    lz->dy = a, a += T * Da;
    lz->den = a, a += nh * T;
    lz->lsave = a;
    float *gp = lz->gstore;
    for (int64_t l = 0, np = 0; l < L; l++) {
        if (hm_layer_mixer(&sc, l) == HM_MIXER_SOFTMAX)
            continue; /* kept: no feature maps */
        struct hm_layer *ly = &lz->student->layers[l];
        struct hm_layer *g = &lz->g[l];
        g->fq_w = gp, gp += nh * p * F;
        g->fq_b = gp, gp += nh * F;
        g->fk_w = gp, gp += nh * p * F;
        g->fk_b = gp, gp += nh * F;
        const enum hm_slot slot[4] = {HM_SLOT_FQ_W, HM_SLOT_FQ_B, HM_SLOT_FK_W, HM_SLOT_FK_B};
        float *w[4] = {ly->fq_w, ly->fq_b, ly->fk_w, ly->fk_b};
        float *gg[4] = {g->fq_w, g->fq_b, g->fk_w, g->fk_b};
        int64_t n[4] = {nh * p * F, nh * F, nh * p * F, nh * F};
        for (int k = 0; k < 4; k++, np++) {
            char *name = lz->names + np * HM_PARAM_NAME_MAX;
            hm_param_name(&sc, slot[k], l, name, HM_PARAM_NAME_MAX);
            lz->params[np] = (struct hm_opt_param){name, w[k], gg[k], n[k], k % 2 == 0};
        }
    }
    *out = lz;
    return HM_OK;
fail:
    hm_linearizer_free(lz);
    return st;
}

/* attn-ce of layer l: the feature maps of the teacher's rotated q and k,
 * the cross-entropy of the attention weights, the maps' backward. */
static void on_layer_attn_ce(struct hm_linearizer *lz, const struct hm_mix *x, const float *qkv,
                             int64_t l, int64_t T)
{
    const struct hm_config *c = &lz->student->cfg;
    const int64_t nh = c->num_attention_heads, p = c->head_dim, F2 = 2 * c->feature_dim;
    const int64_t rs = 3 * c->attn_dim, hs = 3 * p; /* qkv [T, n_h, 3, p] */
    hm_mixer_featuremaps_forward(x, qkv, lz->phiq, lz->phik, T);
    float *dq = lz->want_grad ? lz->dphiq : NULL, *dk = lz->want_grad ? lz->dphik : NULL;
    hm_backend_attn_ce_loss(lz->be, lz->cur + l, dq, dk, lz->phiq, lz->phik, qkv, qkv + p, T, nh,
                            F2, p, rs, hs, HM_LINATTN_EPS, (float)lz->scale, lz->ws,
                            lz->ws_size);
    if (!lz->want_grad)
        return;
    const struct hm_mix_grads g = {.g = &lz->g[l], .dphiq = lz->dphiq, .dphik = lz->dphik};
    hm_mixer_featuremaps_backward(x, &g, qkv, lz->phiq, lz->phik, NULL, T);
}

/* The teacher's hook: run the student's mixer unit (hedgehog) on the
 * teacher's own rotated q, k, v of layer l, then the frozen dense, and the
 * objective against the teacher's attention output (cos, mse); attn-ce
 * compares the attention weights instead. */
static enum hm_status on_layer(void *ctx, int64_t l, const float *a_in, const float *qkv,
                               const float *o_t, int64_t T, int64_t d, struct hm_error *err)
{
    struct hm_linearizer *lz = ctx;
    const struct hm_backend *be = lz->be;
    const struct hm_model *sm = lz->student;
    const struct hm_layer *ly = &sm->layers[l];
    if (hm_layer_mixer(&sm->cfg, l) == HM_MIXER_SOFTMAX)
        return HM_OK; /* a kept layer: the teacher's own attention */
    const int64_t Da = sm->cfg.attn_dim;
    struct hm_layer_acts a = {.a = (float *)a_in, .qkv = (float *)qkv, .att = lz->y,
                              .lse = lz->den, .phiq = lz->phiq, .phik = lz->phik,
                              .lsave = lz->want_grad ? lz->lsave : NULL};
    const struct hm_mix x = {.m = sm, .be = be, .l = l, .B = 1, .T = T, .a = &a, .ws = lz->ws,
                             .ws_size = lz->ws_size};
    if (lz->objective == HM_LIN_OBJECTIVE_ATTN_CE) {
        on_layer_attn_ce(lz, &x, qkv, l, T);
        return HM_OK;
    }
    enum hm_status st = hm_mixer_hedgehog.forward(&x, err);
    if (st != HM_OK)
        return st;
    hm_backend_matmul_forward(be, lz->os, lz->y, ly->dense_w, ly->dense_b, T, Da, d);
    float *dos = lz->want_grad ? lz->dos : NULL;
    if (lz->objective == HM_LIN_OBJECTIVE_MSE)
        hm_backend_mse_loss(be, lz->cur + l, dos, lz->os, o_t, T, d, (float)lz->scale);
    else
        hm_backend_cosine_loss(be, lz->cur + l, dos, lz->os, o_t, T, d, (float)lz->scale);
    if (!lz->want_grad)
        return HM_OK;
    hm_backend_matmul_backward(be, lz->dy, NULL, NULL, lz->dos, lz->y, ly->dense_w, T, Da, d);
    /* only the feature maps train: no input gradients */
    const struct hm_mix_grads g = {.g = &lz->g[l], .datt = lz->dy, .dphiq = lz->dphiq,
                                   .dphik = lz->dphik};
    hm_mixer_hedgehog.backward(&x, &g);
    return HM_OK;
}

static enum hm_status run_sequences(struct hm_linearizer *lz, const int32_t *tokens,
                                    int64_t nseq, int64_t stride, struct hm_error *err)
{
    struct hm_model_hooks hooks = {.on_layer = on_layer, .ctx = lz, .stop_after_last_hook = 1};
    for (int64_t b = 0; b < nseq; b++) {
        enum hm_status st = hm_model_hidden(lz->teacher, lz->be, tokens + b * stride, lz->T,
                                           &lz->tws, &hooks, err);
        if (st != HM_OK)
            return st;
    }
    return HM_OK;
}

static void lz_zero_grad(void *ctx)
{
    struct hm_linearizer *lz = ctx;
    const struct hm_config *c = &lz->student->cfg;
    int64_t fm = 2 * c->num_attention_heads * (c->head_dim + 1) * c->feature_dim;
    hm_backend_fill(lz->be, lz->gstore, lz->L * fm, 0.0f);
}

static enum hm_status lz_accumulate(void *ctx, const int32_t *tokens, double *sums,
                                    struct hm_error *err)
{
    struct hm_linearizer *lz = ctx;
    const double n = (double)(lz->B * lz->T);
    lz->want_grad = 1;
    lz->scale = 1.0 / ((double)lz->ns * n * (double)lz->accum);
    lz->cur = sums;
    return run_sequences(lz, tokens, lz->B, lz->T + 1, err);
}

/* sums: [L] per-layer sums of the objective's per-token loss over the
 * micro-batch's B·T tokens. */
static void lz_loss_of(void *ctx, const double *sums, double *loss, double *aux)
{
    const struct hm_linearizer *lz = ctx;
    const double n = (double)(lz->B * lz->T);
    double total = 0;
    for (int64_t l = 0; l < lz->L; l++) {
        aux[l] = sums[l] / n;
        total += aux[l];
    }
    *loss = total / (double)lz->ns;
}

enum hm_status hm_linearizer_eval(struct hm_linearizer *lz, const int32_t *tokens, int64_t T,
                                  double *layer_loss, struct hm_error *err)
{
    if (T != lz->T)
        return hm_error_set(err, HM_ERR_INVALID, "eval length %lld differs from %lld",
                            (long long)T, (long long)lz->T);
    lz->want_grad = 0;
    lz->scale = 0;
    for (int64_t l = 0; l < lz->L; l++)
        layer_loss[l] = 0;
    hm_backend_upload(lz->be, lz->sums, layer_loss, sizeof(double) * (size_t)lz->L);
    lz->cur = lz->sums;
    enum hm_status st = run_sequences(lz, tokens, 1, T, err);
    hm_backend_download(lz->be, layer_loss, lz->sums, sizeof(double) * (size_t)lz->L);
    for (int64_t l = 0; l < lz->L; l++)
        layer_loss[l] = layer_loss[l] / (double)T;
    return st;
}

static const struct hm_opt_param *lz_params(void *ctx, int64_t *np)
{
    struct hm_linearizer *lz = ctx;
    *np = 4 * lz->ns;
    return lz->params;
}

/* Validation: the student's next-token cross-entropy (contract §7 windows). */
static enum hm_status lz_val_sum(void *ctx, const int32_t *tokens, int64_t B, int64_t T,
                                 double *sum, struct hm_error *err)
{
    struct hm_linearizer *lz = ctx;
    return hm_model_nll_sum(lz->student, lz->be, tokens, B, T, &lz->vws, sum, err);
}

static enum hm_status lz_save(void *ctx, const char *path, int flags, const char *prov,
                              struct hm_error *err)
{
    return hm_linearizer_save(ctx, path, flags, prov, err);
}

void hm_linearizer_run_model(struct hm_linearizer *lz, struct hm_run_model *rm)
{
    *rm = (struct hm_run_model){.ctx = lz, .cfg = &lz->student->cfg, .be = lz->be, .zero_grad = lz_zero_grad,
                                .accumulate = lz_accumulate, .n_sums = (int)lz->L,
                                .loss_of = lz_loss_of, .n_aux = (int)lz->L,
                                .aux_name = "layer_loss", .params = lz_params,
                                .val_sum = lz_val_sum, .save = lz_save};
}

enum hm_status hm_linearizer_save(const struct hm_linearizer *lz, const char *path, int flags,
                                  const char *provenance, struct hm_error *err)
{
    struct hm_st_writer *w = hm_st_writer_new();
    float *host = NULL;
    enum hm_status st = HM_OK;
    if (!w) {
        st = hm_error_set(err, HM_ERR_NOMEM, "out of memory");
        goto out;
    }
    /* the teacher's tensors, byte for byte (legacy buffers dropped) */
    for (int64_t i = 0; st == HM_OK && i < hm_ckpt_n_tensors(lz->ck); i++) {
        const struct hm_ckpt_tensor *t = hm_ckpt_tensor_at(lz->ck, i);
        if (hm_param_group_of(t->name) == HM_PG_BUFFER)
            continue;
        st = hm_ckpt_writer_add_tensor(w, t->name, lz->ck, i, err);
    }
    const struct hm_config *c = &lz->student->cfg;
    const int64_t nh = c->num_attention_heads, p = c->head_dim, F = c->feature_dim;
    /* the feature maps live on the backend: a host copy, param by param */
    int64_t total = 0;
    for (int64_t k = 0; k < 4 * lz->ns; k++)
        total += lz->params[k].n;
    host = malloc(sizeof(float) * (size_t)(total + 1));
    if (st == HM_OK && !host)
        st = hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    for (int64_t k = 0, at = 0; st == HM_OK && k < 4 * lz->ns; at += lz->params[k].n, k++) {
        int64_t shw[3] = {nh, p, F}, shb[2] = {nh, F};
        hm_backend_download(lz->be, host + at, lz->params[k].w,
                            sizeof(float) * (size_t)lz->params[k].n);
        st = hm_st_writer_add(w, lz->params[k].name, HM_DTYPE_F32, k % 2 == 0 ? 3 : 2,
                              k % 2 == 0 ? shw : shb, host + at, err);
    }
    if (st == HM_OK)
        st = hm_ckpt_write_writer(w, &lz->student->cfg, provenance, NULL, path, flags, err);
out:
    hm_st_writer_free(w);
    free(host);
    return st;
}
