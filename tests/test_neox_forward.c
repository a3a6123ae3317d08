/* test_neox_forward.c — the GPT-NeoX forward pass against an independent
 * double-precision implementation written here (naive per-head loops, no
 * kernels/ code), on HF-style fixtures (tests/support/fixture.h).
 *
 * Criterion: max|Δlogit| / max|logit| ≤ 1e-4 on both backends. Observed
 * (printed by every test on stderr): ~1e-7 to 1e-6 on all fixtures
 * (F32, F16, BF16, 3 shards, sequential residual + gelu_new, rotary_pct 1.0,
 * T = 300). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "model.h"
#include "model_forward.h"
#include "testutil.h"
#include "fixture.h"
#include "threads.h"

/* ---- the independent double-precision reference ---------------------------- */

static double *ld(const struct hm_ckpt *ck, const char *name, int64_t n0, int64_t n1)
{
    int64_t shape[2] = {n0, n1}, n = n1 ? n0 * n1 : n0;
    float *f = malloc(sizeof(float) * (size_t)n);
    double *v = malloc(sizeof(double) * (size_t)n);
    struct hm_error err;
    enum hm_status st = hm_ckpt_load_f32(ck, name, n1 ? 2 : 1, shape, f, &err);
    cr_assert_eq(st, HM_OK, "%s: %s", name, err.msg);
    for (int64_t i = 0; i < n; i++)
        v[i] = f[i];
    free(f);
    return v;
}

static double *ldl(const struct hm_ckpt *ck, int64_t l, const char *suffix, int64_t n0, int64_t n1)
{
    char name[160];
    snprintf(name, sizeof name, "gpt_neox.layers.%lld.%s", (long long)l, suffix);
    return ld(ck, name, n0, n1);
}

static void d_layernorm(double *y, const double *x, const double *w, const double *b, int64_t T,
                        int64_t d, double eps)
{
    for (int64_t t = 0; t < T; t++) {
        double m = 0, v = 0;
        for (int64_t i = 0; i < d; i++)
            m += x[t * d + i] / (double)d;
        for (int64_t i = 0; i < d; i++)
            v += (x[t * d + i] - m) * (x[t * d + i] - m) / (double)d;
        for (int64_t i = 0; i < d; i++)
            y[t * d + i] = (x[t * d + i] - m) / sqrt(v + eps) * w[i] + b[i];
    }
}

/* y[T,out] = x[T,in] W[out,in]^T + b */
static void d_linear(double *y, const double *x, const double *w, const double *b, int64_t T,
                     int64_t in, int64_t out)
{
    for (int64_t t = 0; t < T; t++)
        for (int64_t o = 0; o < out; o++) {
            double a = b ? b[o] : 0;
            for (int64_t i = 0; i < in; i++)
                a += x[t * in + i] * w[o * in + i];
            y[t * out + o] = a;
        }
}

/* logits: [T, V] */
static void reference_logits(const struct hm_ckpt *ck, const int32_t *tok, int64_t T,
                             double *logits)
{
    const struct hm_config *c = hm_ckpt_config(ck);
    int64_t d = c->hidden_size, V = c->vocab_size, I = c->intermediate_size;
    int64_t nh = c->num_attention_heads, p = d / nh, r = (int64_t)((double)p * c->rotary_pct);
    double *emb = ld(ck, "gpt_neox.embed_in.weight", V, d);
    double *h = calloc((size_t)(T * d), sizeof(double)), *a = calloc((size_t)(T * d), 8);
    double *qkv = calloc((size_t)(T * 3 * d), 8), *att = calloc((size_t)(T * d), 8);
    double *o = calloc((size_t)(T * d), 8), *a2 = calloc((size_t)(T * d), 8);
    double *mh = calloc((size_t)(T * I), 8), *mo = calloc((size_t)(T * d), 8);
    double *sc = calloc((size_t)T, 8);
    for (int64_t t = 0; t < T; t++)
        memcpy(h + t * d, emb + tok[t] * d, sizeof(double) * (size_t)d);
    for (int64_t l = 0; l < c->num_hidden_layers; l++) {
        double *ln1w = ldl(ck, l, "input_layernorm.weight", d, 0);
        double *ln1b = ldl(ck, l, "input_layernorm.bias", d, 0);
        double *ln2w = ldl(ck, l, "post_attention_layernorm.weight", d, 0);
        double *ln2b = ldl(ck, l, "post_attention_layernorm.bias", d, 0);
        double *wq = ldl(ck, l, "attention.query_key_value.weight", 3 * d, d);
        double *bq = ldl(ck, l, "attention.query_key_value.bias", 3 * d, 0);
        double *wd = ldl(ck, l, "attention.dense.weight", d, d);
        double *bd = ldl(ck, l, "attention.dense.bias", d, 0);
        double *w1 = ldl(ck, l, "mlp.dense_h_to_4h.weight", I, d);
        double *b1 = ldl(ck, l, "mlp.dense_h_to_4h.bias", I, 0);
        double *w2 = ldl(ck, l, "mlp.dense_4h_to_h.weight", d, I);
        double *b2 = ldl(ck, l, "mlp.dense_4h_to_h.bias", d, 0);
        d_layernorm(a, h, ln1w, ln1b, T, d, c->layer_norm_eps);
        d_linear(qkv, a, wq, bq, T, d, 3 * d);
        /* rotary on q and k of every head: fp32 inv_freq and fp32 angle (contract §1) */
        for (int64_t t = 0; t < T; t++)
            for (int64_t hd = 0; hd < nh; hd++)
                for (int s = 0; s < 2; s++) {
                    double *x = qkv + t * 3 * d + hd * 3 * p + s * p;
                    for (int64_t j = 0; j < r / 2; j++) {
                        float e = (float)(2 * j) / (float)r;
                        float inv = 1.0f / (float)pow(c->rotary_emb_base, e);
                        float th = (float)t * inv;
                        double cs = cos((double)th), sn = sin((double)th);
                        double x1 = x[j], x2 = x[j + r / 2];
                        x[j] = x1 * cs - x2 * sn;
                        x[j + r / 2] = x2 * cs + x1 * sn;
                    }
                }
        for (int64_t hd = 0; hd < nh; hd++)
            for (int64_t t = 0; t < T; t++) {
                double mx = -INFINITY, sum = 0;
                for (int64_t s = 0; s <= t; s++) {
                    double dot = 0;
                    for (int64_t i = 0; i < p; i++)
                        dot += qkv[t * 3 * d + hd * 3 * p + i] * qkv[s * 3 * d + hd * 3 * p + p + i];
                    sc[s] = dot / sqrt((double)p);
                    mx = fmax(mx, sc[s]);
                }
                for (int64_t s = 0; s <= t; s++)
                    sum += (sc[s] = exp(sc[s] - mx));
                for (int64_t i = 0; i < p; i++) {
                    double acc = 0;
                    for (int64_t s = 0; s <= t; s++)
                        acc += sc[s] / sum * qkv[s * 3 * d + hd * 3 * p + 2 * p + i];
                    att[t * d + hd * p + i] = acc;
                }
            }
        d_linear(o, att, wd, bd, T, d, d);
        if (!c->use_parallel_residual)
            for (int64_t i = 0; i < T * d; i++)
                h[i] += o[i];
        d_layernorm(a2, h, ln2w, ln2b, T, d, c->layer_norm_eps);
        d_linear(mh, a2, w1, b1, T, d, I);
        for (int64_t i = 0; i < T * I; i++) {
            double x = mh[i];
            mh[i] = c->hidden_act == HM_ACT_GELU
                        ? 0.5 * x * (1 + erf(x / sqrt(2.0)))
                        : 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
        }
        d_linear(mo, mh, w2, b2, T, I, d);
        for (int64_t i = 0; i < T * d; i++)
            h[i] += mo[i] + (c->use_parallel_residual ? o[i] : 0);
        double *all[] = {ln1w, ln1b, ln2w, ln2b, wq, bq, wd, bd, w1, b1, w2, b2};
        for (size_t k = 0; k < sizeof all / sizeof all[0]; k++)
            free(all[k]);
    }
    double *fw = ld(ck, "gpt_neox.final_layer_norm.weight", d, 0);
    double *fb = ld(ck, "gpt_neox.final_layer_norm.bias", d, 0);
    double *eo = ld(ck, "embed_out.weight", V, d);
    d_layernorm(a, h, fw, fb, T, d, c->layer_norm_eps);
    d_linear(logits, a, eo, NULL, T, d, V);
    free(emb), free(h), free(a), free(qkv), free(att), free(o), free(a2), free(mh), free(mo);
    free(sc), free(fw), free(fb), free(eo);
}

/* ---- fixtures ------------------------------------------------------------------ */

struct fx {
    int64_t d, n_h, I, V, L;
    double rotary_pct;
    int parallel;
    enum hm_act act;
    enum hm_dtype dtype;
    int nshards;
};

static void make_cfg(const struct fx *f, struct hm_config *c)
{
    hm_config_defaults(c);
    c->hidden_size = f->d;
    c->num_attention_heads = f->n_h;
    c->intermediate_size = f->I;
    c->vocab_size = f->V;
    c->num_hidden_layers = f->L;
    c->rotary_pct = f->rotary_pct;
    c->use_parallel_residual = f->parallel;
    c->hidden_act = f->act;
    c->max_position_embeddings = 2048;
    struct hm_error err;
    cr_assert_eq(hm_config_finish(c, &err), HM_OK, "%s", err.msg);
}

static double worst_seen;

/* Builds the fixture, runs both backends on each T and compares. */
static void run_case(const char *tag, const struct fx *f, const int64_t *Ts, int nT)
{
    struct hm_config cfg;
    make_cfg(f, &cfg);
    char *dir = tu_mkdtemp(tag);
    struct tu_pythia_opts o = {.dtype = f->dtype, .nshards = f->nshards, .legacy_buffers = 1,
                               .buffer_positions = 8, .seed = 42, .std = 0.1};
    tu_make_pythia(dir, &cfg, &o);
    struct hm_ckpt *ck = NULL;
    struct hm_model *m = NULL;
    struct hm_error err;
    cr_assert_eq(hm_ckpt_open(dir, &ck, &err), HM_OK, "%s", err.msg);
    cr_assert_eq(hm_model_load(ck, &m, &err), HM_OK, "%s", err.msg);
    const char *names[2] = {"ref", "fast"};
    struct hm_model_ws ws[2];
    hm_model_ws_init(&ws[0]);
    hm_model_ws_init(&ws[1]);
    uint64_t s = 7;
    for (int k = 0; k < nT; k++) {
        int64_t T = Ts[k], V = f->V;
        int32_t *tok = malloc(sizeof(int32_t) * (size_t)T);
        for (int64_t t = 0; t < T; t++)
            tok[t] = (int32_t)(tu_rand_u64(&s) % (uint64_t)V);
        double *want = malloc(sizeof(double) * (size_t)(T * V));
        reference_logits(ck, tok, T, want);
        double mx = 0;
        for (int64_t i = 0; i < T * V; i++)
            mx = fmax(mx, fabs(want[i]));
        float *got = malloc(sizeof(float) * (size_t)(T * V));
        float *nll = malloc(sizeof(float) * (size_t)T);
        for (int b = 0; b < 2; b++) {
            const struct hm_backend *be = hm_backend_get(names[b]);
            /* one model, two backends: moved to each before its use */
            cr_assert_eq(hm_model_place(m, be, &err), HM_OK, "%s", err.msg);
            cr_assert_eq(hm_model_forward(m, be, tok, T, got, &ws[b], &err), HM_OK, "%s", err.msg);
            double md = 0;
            for (int64_t i = 0; i < T * V; i++)
                md = fmax(md, fabs(got[i] - want[i]));
            double rel = md / mx;
            worst_seen = fmax(worst_seen, rel);
            fprintf(stderr, "neox %-10s T=%-4lld %-4s max|dlogit|/max|logit| = %.2e (max|logit| %.3g)\n",
                    tag, (long long)T, names[b], rel, mx);
            cr_expect(rel <= 1e-4, "%s T=%lld %s: relative error %.3g > 1e-4", tag, (long long)T,
                      names[b], rel);
            /* nll against the reference logits: targets = next tokens (cyclic) */
            int32_t *tg = malloc(sizeof(int32_t) * (size_t)T);
            for (int64_t t = 0; t < T; t++)
                tg[t] = tok[(t + 1) % T];
            cr_assert_eq(hm_model_nll(m, be, tok, tg, T, nll, &ws[b], &err), HM_OK, "%s", err.msg);
            for (int64_t t = 0; t < T; t++) {
                double lmx = -INFINITY, sum = 0;
                for (int64_t v = 0; v < V; v++)
                    lmx = fmax(lmx, want[t * V + v]);
                for (int64_t v = 0; v < V; v++)
                    sum += exp(want[t * V + v] - lmx);
                double w = lmx + log(sum) - want[t * V + tg[t]];
                cr_expect(fabs(nll[t] - w) <= 1e-4 * (1 + fabs(w)), "%s T=%lld %s nll[%lld] %g vs %g",
                          tag, (long long)T, names[b], (long long)t, nll[t], w);
            }
            free(tg);
        }
        free(tok), free(want), free(got), free(nll);
    }
    hm_model_ws_release(&ws[0]);
    hm_model_ws_release(&ws[1]);
    hm_model_free(m);
    hm_ckpt_close(ck);
    free(dir);
}

static void setup(void) { hm_threads_set(2); }
TestSuite(neox_forward, .init = setup, .timeout = 120);

static const struct fx BASE = {.d = 48, .n_h = 3, .I = 100, .V = 97, .L = 2, .rotary_pct = 0.25,
                               .parallel = 1, .act = HM_ACT_GELU, .dtype = HM_DTYPE_F32};
static const int64_t TS[] = {1, 7, 33};

Test(neox_forward, f32) { run_case("f32", &BASE, TS, 3); }

Test(neox_forward, f16)
{
    struct fx f = BASE;
    f.dtype = HM_DTYPE_F16;
    run_case("f16", &f, TS, 3);
}

Test(neox_forward, bf16)
{
    struct fx f = BASE;
    f.dtype = HM_DTYPE_BF16;
    run_case("bf16", &f, TS, 3);
}

Test(neox_forward, sharded)
{
    struct fx f = BASE;
    f.nshards = 3;
    f.dtype = HM_DTYPE_F16;
    run_case("sharded", &f, TS + 1, 2);
}

Test(neox_forward, sequential_gelu_new)
{
    struct fx f = BASE;
    f.parallel = 0;
    f.act = HM_ACT_GELU_TANH;
    run_case("seq-tanh", &f, TS, 3);
}

Test(neox_forward, rotary_full)
{
    struct fx f = BASE;
    f.rotary_pct = 1.0;
    f.n_h = 4;
    f.d = 32;
    run_case("rot1.0", &f, TS + 1, 2);
}

/* Positions up to 299: the fp32 angle (float)pos * inv_freq differs from
 * the exact product by up to ~1e-5 rad here. */
Test(neox_forward, long_sequence)
{
    struct fx f = BASE;
    f.L = 1;
    f.dtype = HM_DTYPE_BF16;
    int64_t T[] = {300};
    run_case("t300", &f, T, 1);
}

Test(neox_forward, errors)
{
    struct fx f = BASE;
    f.L = 1;
    struct hm_config cfg;
    make_cfg(&f, &cfg);
    char *dir = tu_mkdtemp("errs");
    struct tu_pythia_opts o = {.dtype = HM_DTYPE_F32, .seed = 3};
    tu_make_pythia(dir, &cfg, &o);
    struct hm_ckpt *ck = NULL;
    struct hm_model *m = NULL;
    struct hm_error err;
    cr_assert_eq(hm_ckpt_open(dir, &ck, &err), HM_OK, "%s", err.msg);
    cr_assert_eq(hm_model_load(ck, &m, &err), HM_OK, "%s", err.msg);
    struct hm_model_ws ws;
    hm_model_ws_init(&ws);
    int32_t tok[3] = {1, 97, 2};
    float lg[3 * 97];
    /* a model not placed on the backend is refused, naming where it is */
    int32_t ok[3] = {1, 2, 3};
    cr_expect_eq(hm_model_forward(m, hm_backend_get("fast"), ok, 3, lg, &ws, &err), HM_ERR_INVALID);
    cr_expect(strstr(err.msg, "host memory") && strstr(err.msg, "fast"), "%s", err.msg);
    cr_assert_eq(hm_model_place(m, hm_backend_get("fast"), &err), HM_OK, "%s", err.msg);
    cr_expect_eq(hm_model_forward(m, hm_backend_get("fast"), tok, 3, lg, &ws, &err), HM_ERR_INVALID);
    cr_expect(strstr(err.msg, "97") && strstr(err.msg, "position 1"), "%s", err.msg);
    cr_assert_eq(hm_model_place(m, hm_backend_get("ref"), &err), HM_OK, "%s", err.msg);
    tok[1] = -1;
    cr_expect_eq(hm_model_forward(m, hm_backend_get("ref"), tok, 3, lg, &ws, &err), HM_ERR_INVALID);
    cr_expect(strstr(err.msg, "-1"), "%s", err.msg);
    cr_expect_eq(hm_model_forward(m, hm_backend_get("ref"), tok, 0, lg, &ws, &err), HM_ERR_INVALID);
    hm_model_ws_release(&ws);
    hm_model_free(m);
    hm_ckpt_close(ck);

    /* a checkpoint whose config claims a different size: the loader names the tensor */
    cfg.intermediate_size = 101;
    char *cp = tu_path(dir, "config.json");
    size_t n;
    char *txt = tu_read_file(cp, &n);
    char *at = strstr(txt, "\"intermediate_size\": 100");
    cr_assert(at);
    memcpy(at, "\"intermediate_size\": 101", 24);
    tu_write_file(cp, txt, n);
    cr_assert_eq(hm_ckpt_open(dir, &ck, &err), HM_OK, "%s", err.msg);
    cr_expect_neq(hm_model_load(ck, &m, &err), HM_OK);
    cr_expect(strstr(err.msg, "dense_h_to_4h.weight") != NULL, "%s", err.msg);
    hm_ckpt_close(ck);
    free(txt), free(cp), free(dir);
}

/* The hook sees every layer once, in order, with the attention input and output. */
struct hook_log { int64_t calls, last; double sum_o; };
static enum hm_status on_layer(void *ctx, int64_t layer, const float *a_in, const float *qkv,
                               const float *o, int64_t T, int64_t d, struct hm_error *err)
{
    struct hook_log *h = ctx;
    cr_expect_eq(layer, h->last + 1);
    h->last = layer;
    h->calls++;
    for (int64_t i = 0; i < T * d; i++)
        h->sum_o += fabs(o[i]) + 0 * a_in[i] + 0 * qkv[i];
    if (layer == 1)
        return hm_error_set(err, HM_ERR_INVALID, "stop at layer 1");
    return HM_OK;
}

Test(neox_forward, layer_hook)
{
    struct fx f = BASE;
    f.L = 3;
    struct hm_config cfg;
    make_cfg(&f, &cfg);
    char *dir = tu_mkdtemp("hook");
    struct tu_pythia_opts o = {.dtype = HM_DTYPE_F32, .seed = 5};
    tu_make_pythia(dir, &cfg, &o);
    struct hm_ckpt *ck = NULL;
    struct hm_model *m = NULL;
    struct hm_error err;
    cr_assert_eq(hm_ckpt_open(dir, &ck, &err), HM_OK, "%s", err.msg);
    cr_assert_eq(hm_model_load(ck, &m, &err), HM_OK, "%s", err.msg);
    struct hm_model_ws ws;
    hm_model_ws_init(&ws);
    cr_assert_eq(hm_model_place(m, hm_backend_get("fast"), &err), HM_OK, "%s", err.msg);
    struct hook_log log = {.last = -1};
    struct hm_model_hooks hooks = {.on_layer = on_layer, .ctx = &log};
    int32_t tok[5] = {1, 2, 3, 4, 5};
    cr_expect_eq(hm_model_hidden(m, hm_backend_get("fast"), tok, 5, &ws, &hooks, &err),
                 HM_ERR_INVALID);
    cr_expect_str_eq(err.msg, "stop at layer 1");
    cr_expect_eq(log.calls, 2);
    cr_expect_gt(log.sum_o, 0);
    hm_model_ws_release(&ws);
    hm_model_free(m);
    hm_ckpt_close(ck);
    free(dir);
}
