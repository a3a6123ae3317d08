/* test_llama_backward.c — whole-model gradients of llama-family training
 * against central finite differences of the independent double reference
 * (tests/support/ref_llama.c), for every mixer with grouped-query attention:
 *  - stage 2 / fine-tuning (hm_trainer): the gradient is exposed by one
 *    plain SGD step, w1 = w0 − η g, and compared tensor by tensor with the
 *    finite differences of the reference's mean cross-entropy (tied and
 *    untied embeddings, attention biases, inactive HedgeMamba components);
 *  - stage 1 (hm_linearizer on an HF Llama folder): the feature-map
 *    gradients against finite differences of the reference's layer-wise
 *    cosine objective (contract §2);
 *  - stage 1b (hm_trainer_align through the run model): every mixer
 *    tensor's gradient against finite differences of the reference's
 *    teacher-forced alignment loss (tu_ref_llama_align_loss).
 * Tolerance: max|Δ| ≤ 5e-6 · max(1, max|g|) as in test_backward.c. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "checkpoint.h"
#include "fdcheck.h"
#include "fixture_llama.h"
#include "model_run.h"
#include "linearize.h"
#include "model.h"
#include "optim.h"
#include "ref_llama.h"
#include "run.h"
#include "testutil.h"
#include "trainer.h"

#define TOL 5e-6

/* ≥ 0: students made by tiny() are hybrids keeping that layer softmax
 * (contract §11); set by the hybrid tests (each test is its own process). */
static int64_t kept_layer = -1;

static struct hm_config tiny(enum hm_mixer mixer, int tied, int bias)
{
    struct hm_config c;
    hm_config_defaults(&c);
    c.family = HM_FAMILY_LLAMA;
    c.mixer = mixer;
    c.vocab_size = 11;
    c.hidden_size = 8;
    c.num_hidden_layers = 2;
    c.num_attention_heads = 4;
    c.num_key_value_heads = 2;
    c.intermediate_size = 12;
    c.feature_dim = 3;
    c.conv_width = 3;
    c.tie_word_embeddings = tied;
    c.attention_bias = bias;
    c.mlp_bias = bias;
    c.layer_norm_eps = 1e-5;
    if (kept_layer >= 0 && mixer != HM_MIXER_SOFTMAX)
        hm_config_set_kept(&c, kept_layer, 1);
    cr_assert_eq(hm_config_finish(&c, NULL), HM_OK);
    return c;
}

static void fill(struct hm_model *m, uint64_t s)
{
    for (int64_t i = 0; i < m->n_views; i++) {
        struct hm_tensor_view *v = &m->views[i];
        for (int64_t j = 0; j < v->numel; j++) {
            double r = tu_rand_normal(&s);
            v->data[j] = (float)(v->spec.group == HM_PG_NORM ? 1 + 0.2 * r
                                 : v->spec.slot == HM_SLOT_A ? -0.3 - 0.5 * fabs(r)
                                                             : 0.4 * r);
        }
    }
}

struct ce_ctx { const struct hm_config *cfg; struct tu_ref_table *tab; const int32_t *tok; int64_t B, T; };

static double ce_loss(const double *x, void *ctx)
{
    (void)x; /* x is the table's own storage, perturbed in place */
    struct ce_ctx *c = ctx;
    return tu_ref_llama_loss(c->cfg, tu_ref_table_get, c->tab, c->tok, c->B, c->T);
}

static void stage2_check(enum hm_mixer mixer, int tied, int bias, unsigned components,
                         const char *bename)
{
    struct hm_config c = tiny(mixer, tied, bias);
    c.components = components;
    struct hm_model *m = NULL;
    cr_assert_eq(hm_model_new(&c, &m, NULL), HM_OK);
    fill(m, 7 + (uint64_t)mixer);
    struct hm_error err;
    cr_assert_eq(hm_model_place(m, hm_backend_get(bename), &err), HM_OK, "%s", err.msg);
    struct tu_ref_table *tab = tu_ref_table_from_model(m);
    const int64_t B = 2, T = 5;
    int32_t tok[12] = {1, 4, 9, 10, 0, 3, 7, 7, 2, 5, 6, 8};
    struct hm_train_opts o = {.B = B, .T = T, .accum = 1, .kd_temperature = 1, .ce_weight = 1};
    struct hm_trainer *tr = NULL;
    cr_assert_eq(hm_trainer_new(m, hm_backend_get(bename), &o, &tr, NULL), HM_OK);
    hm_trainer_zero_grad(tr);
    struct hm_train_loss loss;
    cr_assert_eq(hm_trainer_accumulate(tr, tok, NULL, &loss, NULL), HM_OK);
    struct ce_ctx cc = {&c, tab, tok, B, T};
    const double ref = ce_loss(NULL, &cc);
    cr_expect(fabs(loss.ce - ref) < 1e-5 * fabs(ref), "loss %.9g vs ref %.9g", loss.ce, ref);
    /* one SGD step: w1 = w0 − η g exposes the gradient */
    int64_t np;
    const struct hm_opt_param *pp = hm_trainer_params(tr, &np);
    struct hm_opt_param *p = malloc(sizeof *p * (size_t)(np + 1));
    memcpy(p, pp, sizeof *p * (size_t)np);
    float **w0 = calloc((size_t)np + 1, sizeof *w0);
    for (int64_t i = 0; i < np; i++) {
        w0[i] = malloc(sizeof(float) * (size_t)p[i].n);
        memcpy(w0[i], p[i].w, sizeof(float) * (size_t)p[i].n);
    }
    struct hm_optim opt;
    struct hm_optim_cfg oc;
    hm_optim_cfg_defaults(&oc, HM_OPTIM_SGD, 0);
    cr_assert_eq(hm_optim_init(&opt, &oc, hm_backend_get(bename), p, np, NULL), HM_OK);
    const double eta = 0.5;
    double sq = 0;
    hm_grad_sqnorm(hm_backend_get(bename), p, np, &sq);
    hm_optim_step(&opt, hm_backend_get(bename), p, np, eta, sqrt(sq));
    int checked = 0;
    for (int64_t i = 0; i < np; i++) {
        double *x = (double *)tu_ref_table_get(tab, p[i].name);
        cr_assert(x, "reference lacks '%s'", p[i].name);
        double *g = malloc(sizeof(double) * (size_t)p[i].n);
        tu_fd_grad(g, x, p[i].n, ce_loss, &cc);
        float *exposed = malloc(sizeof(float) * (size_t)p[i].n);
        for (int64_t j = 0; j < p[i].n; j++)
            exposed[j] = (float)(((double)w0[i][j] - (double)p[i].w[j]) / eta);
        /* the step rounds w1 to fp32: allow that rounding in the exposed grad */
        double maxw = 0;
        for (int64_t j = 0; j < p[i].n; j++)
            maxw = fabs(w0[i][j]) > maxw ? fabs(w0[i][j]) : maxw;
        tu_check_fd(p[i].name, exposed, g, p[i].n, TOL + 2.4e-7 * maxw / eta);
        tu_check_fd(p[i].name, p[i].g, g, p[i].n, TOL);
        checked++;
        free(g);
        free(exposed);
    }
    /* the frozen/inactive tensors are not in the optimizer's list */
    int64_t want = 0;
    for (int64_t i = 0; i < m->n_views; i++) {
        enum hm_param_group gr = m->views[i].spec.group;
        want += !((gr == HM_PG_SSM && !(components & HM_COMP_SSM)) ||
                  (gr == HM_PG_CONV && !(components & HM_COMP_CONV)) ||
                  (gr == HM_PG_GATE && !(components & HM_COMP_GATE)));
    }
    cr_expect_eq(np, mixer == HM_MIXER_HEDGEMAMBA ? want : m->n_views);
    fprintf(stderr, "%s tied=%d bias=%d (%s): %d tensors checked\n", hm_mixer_name(mixer), tied,
            bias, bename, checked);
    hm_optim_release(&opt);
    for (int64_t i = 0; i < np; i++)
        free(w0[i]);
    free(w0);
    free(p);
    hm_trainer_free(tr);
    tu_ref_table_free(tab);
    hm_model_free(m);
}

Test(llama_backward, teacher_untied_ref) { stage2_check(HM_MIXER_SOFTMAX, 0, 0, HM_COMP_ALL, "ref"); }
Test(llama_backward, teacher_tied_bias_fast) { stage2_check(HM_MIXER_SOFTMAX, 1, 1, HM_COMP_ALL, "fast"); }
Test(llama_backward, hedgehog_fast) { stage2_check(HM_MIXER_HEDGEHOG, 0, 1, HM_COMP_ALL, "fast"); }
Test(llama_backward, hedgemamba_ref) { stage2_check(HM_MIXER_HEDGEMAMBA, 1, 0, HM_COMP_ALL, "ref"); }
Test(llama_backward, hedgemamba_bias_fast) { stage2_check(HM_MIXER_HEDGEMAMBA, 0, 1, HM_COMP_ALL, "fast"); }
Test(llama_backward, hedgemamba_gate_only_fast)
{
    stage2_check(HM_MIXER_HEDGEMAMBA, 0, 0, HM_COMP_GATE, "fast");
}

/* ---- stage 1 ------------------------------------------------------------------ */
struct s1_ctx {
    const struct hm_config *tc, *sc;
    struct tu_ref_table *teacher, *student;
    const int32_t *tok;
    int64_t T;
};

static double s1_loss(const double *x, void *ctx)
{
    (void)x;
    struct s1_ctx *c = ctx;
    return tu_ref_llama_stage1_loss(c->tc, tu_ref_table_get, c->teacher, c->sc, tu_ref_table_get,
                                    c->student, c->tok, c->T);
}

Test(llama_backward, stage1_feature_maps)
{
    struct hm_config tc = tiny(HM_MIXER_SOFTMAX, 1, 1);
    char *dir = tu_mkdtemp("s1llama");
    struct tu_llama_opts fo = {.dtype = HM_DTYPE_F32, .seed = 3, .std = 0.4};
    struct tu_ref_table *teacher = tu_make_llama(dir, &tc, &fo);
    struct hm_ckpt *ck = NULL;
    struct hm_error err;
    cr_assert_eq(hm_ckpt_open(dir, &ck, &err), HM_OK, "%s", err.msg);
    const int64_t T = 6;
    struct hm_linearizer *lz = NULL;
    cr_assert_eq(hm_linearizer_new(ck, 3, NULL, hm_backend_get("fast"), 1, T, 1, &lz, &err), HM_OK,
                 "%s", err.msg);
    struct hm_model *st = hm_linearizer_student(lz);
    /* feature maps away from the identity so every gradient entry matters */
    uint64_t s = 17;
    for (int64_t i = 0; i < st->n_views; i++)
        if (st->views[i].spec.group == HM_PG_FEATURE_MAP)
            for (int64_t j = 0; j < st->views[i].numel; j++)
                st->views[i].data[j] += (float)(0.5 * tu_rand_normal(&s));
    struct tu_ref_table *student = tu_ref_table_from_model(st);
    struct hm_run_model rm;
    hm_linearizer_run_model(lz, &rm);
    int32_t tok[7] = {3, 9, 1, 10, 4, 4, 7};
    double loss, aux[2], sums[64] = {0}; /* host memory: the fast backend's */
    cr_assert(rm.n_sums >= 1 && rm.n_sums <= 64, "n_sums %d", rm.n_sums);
    cr_assert_eq(rm.n_aux, 2);
    rm.zero_grad(rm.ctx);
    cr_assert_eq(rm.accumulate(rm.ctx, tok, sums, &err), HM_OK, "%s", err.msg);
    rm.loss_of(rm.ctx, sums, &loss, aux);
    struct s1_ctx c = {&tc, &st->cfg, teacher, student, tok, T};
    const double ref = s1_loss(NULL, &c);
    cr_expect(fabs(loss - ref) <= 1e-5 * fabs(ref) + 1e-7, "stage-1 loss %.9g vs ref %.9g", loss,
              ref);
    int64_t np;
    const struct hm_opt_param *p = rm.params(rm.ctx, &np);
    cr_assert_eq(np, 4 * tc.num_hidden_layers);
    for (int64_t i = 0; i < np; i++) {
        double *x = (double *)tu_ref_table_get(student, p[i].name);
        cr_assert(x, "reference lacks '%s'", p[i].name);
        double *g = malloc(sizeof(double) * (size_t)p[i].n);
        tu_fd_grad(g, x, p[i].n, s1_loss, &c);
        tu_check_fd(p[i].name, p[i].g, g, p[i].n, TOL);
        free(g);
    }
    hm_linearizer_free(lz);
    hm_ckpt_close(ck);
    tu_ref_table_free(teacher);
    tu_ref_table_free(student);
    free(dir);
}

/* ---- stage 1b ----------------------------------------------------------------- */
struct align_ctx {
    const struct hm_config *tc, *sc;
    struct tu_ref_table *teacher, *student;
    const int32_t *tok;
    int64_t B, T;
    int mse;
};

static double align_loss(const double *x, void *ctx)
{
    (void)x;
    struct align_ctx *c = ctx;
    return tu_ref_llama_align_loss(c->tc, tu_ref_table_get, c->teacher, c->sc, tu_ref_table_get,
                                   c->student, c->tok, c->B, c->T, c->mse);
}

static void align_check(enum hm_mixer mixer, unsigned components, const char *bename, int mse)
{
    const struct hm_backend *be = hm_backend_get(bename);
    struct hm_config tc = tiny(HM_MIXER_SOFTMAX, 1, 1), sc = tiny(mixer, 1, 1);
    sc.components = components;
    struct hm_model *teacher = NULL, *m = NULL;
    cr_assert_eq(hm_model_new(&tc, &teacher, NULL), HM_OK);
    cr_assert_eq(hm_model_new(&sc, &m, NULL), HM_OK);
    fill(teacher, 5);
    fill(m, 9 + (uint64_t)mixer); /* a student unlike its teacher: every term matters */
    struct hm_error err;
    cr_assert_eq(hm_model_place(teacher, be, &err), HM_OK, "%s", err.msg);
    cr_assert_eq(hm_model_place(m, be, &err), HM_OK, "%s", err.msg);
    struct tu_ref_table *tt = tu_ref_table_from_model(teacher), *st = tu_ref_table_from_model(m);
    const int64_t B = 2, T = 5;
    int32_t tok[12] = {1, 4, 9, 10, 0, 3, 7, 7, 2, 5, 6, 8};
    struct hm_train_opts o = {.B = B, .T = T, .accum = 1, .freeze_embeddings = 1,
                              .align_teacher = teacher, .align_mse = mse == 1,
                              .align_block = mse == 2};
    struct hm_trainer *tr = NULL;
    cr_assert_eq(hm_trainer_new(m, be, &o, &tr, &err), HM_OK, "%s", err.msg);
    struct hm_model_run nr = {.model = m, .trainer = tr, .be = be, .align = 1};
    struct hm_run_model rm;
    hm_model_run_init(&nr, &rm);
    cr_assert_eq(rm.n_sums, (int)sc.num_hidden_layers);
    double sums[8] = {0}, loss, aux[8]; /* host memory: ref's and fast's */
    rm.zero_grad(rm.ctx);
    cr_assert_eq(rm.accumulate(rm.ctx, tok, sums, &err), HM_OK, "%s", err.msg);
    rm.loss_of(rm.ctx, sums, &loss, aux);
    struct align_ctx c = {&tc, &sc, tt, st, tok, B, T, mse};
    const double ref = align_loss(NULL, &c);
    cr_expect(fabs(loss - ref) <= 1e-5 * fabs(ref) + 1e-7, "align loss %.9g vs ref %.9g", loss,
              ref);
    if (kept_layer < 0)
        cr_expect(fabs(aux[0] + aux[1] - 2 * loss) < 1e-12, "layer losses average to the loss");
    else /* the kept layer has no loss; the other is the mean */
        cr_expect(aux[kept_layer] == 0 && fabs(aux[1 - kept_layer] - loss) < 1e-12,
                  "kept layer %lld: layer losses %g %g, loss %g", (long long)kept_layer, aux[0],
                  aux[1], loss);
    int64_t np;
    const struct hm_opt_param *p = rm.params(rm.ctx, &np);
    int64_t want = 0;
    for (int64_t i = 0; i < m->n_views; i++) {
        const struct hm_param_spec *s = &m->views[i].spec;
        if (s->layer == kept_layer)
            continue; /* a kept layer is the teacher's: frozen */
        int mix = s->group == HM_PG_MIXER || s->group == HM_PG_FEATURE_MAP ||
                  (s->group == HM_PG_SSM && (components & HM_COMP_SSM)) ||
                  (s->group == HM_PG_CONV && (components & HM_COMP_CONV)) ||
                  (s->group == HM_PG_GATE && (components & HM_COMP_GATE));
        want += mix;
    }
    cr_expect_eq(np, want, "%lld trainable tensors, want the %lld mixer tensors", (long long)np,
                 (long long)want);
    for (int64_t i = 0; i < np; i++) {
        cr_assert(p[i].name && (strstr(p[i].name, "self_attn") || strstr(p[i].name, "attention")),
                  "'%s' is not a mixer tensor", p[i].name);
        double *x = (double *)tu_ref_table_get(st, p[i].name);
        cr_assert(x, "reference lacks '%s'", p[i].name);
        double *g = malloc(sizeof(double) * (size_t)p[i].n);
        tu_fd_grad(g, x, p[i].n, align_loss, &c);
        tu_check_fd(p[i].name, p[i].g, g, p[i].n, TOL);
        free(g);
    }
    fprintf(stderr, "stage 1b %s %s (%s): %lld tensors checked\n", hm_mixer_name(mixer),
            mse == 2 ? "block" : mse ? "mse" : "cos", bename, (long long)np);
    hm_model_run_release(&nr);
    hm_trainer_free(tr);
    tu_ref_table_free(tt);
    tu_ref_table_free(st);
    hm_model_free(m);
    hm_model_free(teacher);
}

Test(llama_backward, stage1b_hedgemamba_ref) { align_check(HM_MIXER_HEDGEMAMBA, HM_COMP_ALL, "ref", 0); }
Test(llama_backward, stage1b_hedgemamba_fast) { align_check(HM_MIXER_HEDGEMAMBA, HM_COMP_ALL, "fast", 0); }
Test(llama_backward, stage1b_hedgemamba_mse_ref) { align_check(HM_MIXER_HEDGEMAMBA, HM_COMP_ALL, "ref", 1); }
Test(llama_backward, stage1b_hedgemamba_mse_fast) { align_check(HM_MIXER_HEDGEMAMBA, HM_COMP_ALL, "fast", 1); }
Test(llama_backward, stage1b_hedgemamba_no_conv_fast)
{
    align_check(HM_MIXER_HEDGEMAMBA, HM_COMP_SSM | HM_COMP_GATE, "fast", 0);
}
Test(llama_backward, stage1b_hedgehog_mse_fast) { align_check(HM_MIXER_HEDGEHOG, HM_COMP_ALL, "fast", 1); }

/* Hybrids (contract §11): layer kept_layer keeps softmax attention, the
 * other is the student mixer; the same finite differences cover both kinds
 * of layer in one backward. */
Test(llama_backward, hybrid_hedgemamba_kept0_ref)
{
    kept_layer = 0;
    stage2_check(HM_MIXER_HEDGEMAMBA, 0, 1, HM_COMP_ALL, "ref");
}
Test(llama_backward, hybrid_hedgemamba_kept1_fast)
{
    kept_layer = 1;
    stage2_check(HM_MIXER_HEDGEMAMBA, 1, 0, HM_COMP_ALL, "fast");
}
Test(llama_backward, hybrid_hedgehog_kept1_ref)
{
    kept_layer = 1;
    stage2_check(HM_MIXER_HEDGEHOG, 0, 1, HM_COMP_ALL, "ref");
}
Test(llama_backward, hybrid_stage1b_kept0_fast)
{
    kept_layer = 0;
    align_check(HM_MIXER_HEDGEMAMBA, HM_COMP_ALL, "fast", 0);
}
Test(llama_backward, hybrid_stage1b_kept1_ref)
{
    kept_layer = 1;
    align_check(HM_MIXER_HEDGEHOG, HM_COMP_ALL, "ref", 1);
}

/* Stage 1b on whole blocks (MOHAWK's hidden-state alignment): the gradient
 * flows from each block's output through the frozen MLP and norms into the
 * mixer; pure and hybrid students. */
Test(llama_backward, stage1b_block_hedgemamba_ref) { align_check(HM_MIXER_HEDGEMAMBA, HM_COMP_ALL, "ref", 2); }
Test(llama_backward, stage1b_block_hedgemamba_fast) { align_check(HM_MIXER_HEDGEMAMBA, HM_COMP_ALL, "fast", 2); }
Test(llama_backward, stage1b_block_hedgehog_ref) { align_check(HM_MIXER_HEDGEHOG, HM_COMP_ALL, "ref", 2); }
Test(llama_backward, hybrid_stage1b_block_kept1_fast)
{
    kept_layer = 1;
    align_check(HM_MIXER_HEDGEMAMBA, HM_COMP_ALL, "fast", 2);
}
