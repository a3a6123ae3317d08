/* test_ref_llama.c — sanity of the independent llama reference (tests/support/ref_llama.h)
 * and of the HF Llama fixture writer (fixture_llama.h), without any model code:
 *   - T = 1 and T = 2 logits against a second, fully spelled-out computation;
 *   - GQA equals MHA with the k/v heads (and conv channels) duplicated, all mixers;
 *   - tied equals untied with lm_head = embed_tokens;
 *   - llama3 rope scaling at its two extremes and in the smooth band;
 *   - HedgeMamba at the contract §3 identity values equals Hedgehog;
 *   - strong decay (A ≪ 0) makes HedgeMamba forget the past; causality, all mixers;
 *   - loss = CE of the logits; stage-1 loss at T = 1 is 0;
 *   - fixture folders (single and sharded, F32/F16/BF16, tied, biases, legacy
 *     inv_freq, minimal config) read back tensor for tensor, config parsed by hm. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "fixture_llama.h"
#include "ref_llama.h"
#include "testutil.h"

/* ---- helpers ---------------------------------------------------------------- */

static struct hm_config tiny(int64_t d, int64_t nh, int64_t nkv, int64_t p, int64_t I, int64_t V,
                             int64_t L)
{
    struct hm_config c;
    memset(&c, 0, sizeof c);
    c.family = HM_FAMILY_LLAMA;
    c.mixer = HM_MIXER_SOFTMAX;
    c.hidden_size = d;
    c.num_attention_heads = nh;
    c.num_key_value_heads = nkv;
    c.head_dim = p;
    c.intermediate_size = I;
    c.vocab_size = V;
    c.num_hidden_layers = L;
    c.max_position_embeddings = 64;
    c.rotary_pct = 1;
    c.rotary_emb_base = 10000;
    c.layer_norm_eps = 1e-5;
    c.hidden_act = HM_ACT_SILU;
    c.conv_width = 4;
    c.components = HM_COMP_ALL;
    return c;
}

static struct tu_ref_table *weights(const struct hm_config *c, uint64_t seed)
{
    struct tu_llama_opts o = {.dtype = HM_DTYPE_F64, .seed = seed};
    return tu_llama_weights(c, &o);
}

static const double *W(struct tu_ref_table *t, const char *fmt, long long l)
{
    char name[200];
    snprintf(name, sizeof name, fmt, l);
    const double *x = tu_ref_table_get(t, name);
    cr_assert(x, "missing %s", name);
    return x;
}

static double *logits_of(const struct hm_config *c, struct tu_ref_table *t,
                         const int32_t *tok, int64_t T)
{
    double *lg = malloc(sizeof(double) * (size_t)(T * c->vocab_size));
    tu_ref_llama_logits(c, tu_ref_table_get, t, tok, T, lg);
    return lg;
}

static double max_abs_diff(const double *a, const double *b, int64_t n)
{
    double m = 0;
    for (int64_t i = 0; i < n; i++)
        m = fmax(m, fabs(a[i] - b[i]));
    return m;
}

static double max_abs(const double *a, int64_t n)
{
    double m = 0;
    for (int64_t i = 0; i < n; i++)
        m = fmax(m, fabs(a[i]));
    return m;
}

static struct tu_ref_table *table_copy(const struct tu_ref_table *t)
{
    struct tu_ref_table *c = tu_ref_table_new();
    for (int64_t i = 0; i < tu_ref_table_count(t); i++) {
        const char *name;
        enum hm_dtype dt;
        int nd;
        const int64_t *sh;
        const double *x;
        tu_ref_table_at(t, i, &name, &dt, &nd, &sh, &x);
        tu_ref_table_put(c, name, dt, nd, sh, x);
    }
    return c;
}

static void gen_tokens(int32_t *tok, int64_t n, int64_t V, uint64_t seed)
{
    for (int64_t i = 0; i < n; i++)
        tok[i] = (int32_t)(tu_rand_u64(&seed) % (uint64_t)V);
}

/* ---- a second, spelled-out computation -------------------------------------- */

/* y [d] = x / sqrt(Σx²/d + eps) ⊙ w */
static void lit_rms(double *y, const double *x, const double *w, int64_t d, double eps)
{
    double ms = 0;
    for (int64_t i = 0; i < d; i++)
        ms += x[i] * x[i] / (double)d;
    for (int64_t i = 0; i < d; i++)
        y[i] = w[i] * (x[i] / sqrt(ms + eps));
}

/* y [out] = Σ_i W[o][i] x[i] (+ b[o]) */
static void lit_mv(double *y, const double *Wm, const double *b, const double *x, int64_t out,
                   int64_t in)
{
    for (int64_t o = 0; o < out; o++) {
        y[o] = b ? b[o] : 0.0;
        for (int64_t i = 0; i < in; i++)
            y[o] += Wm[o * in + i] * x[i];
    }
}

/* t = h + o;  h' = t + down(silu(gate(n)) ⊙ up(n)),  n = RMSNorm2(t) */
static void lit_mlp(struct tu_ref_table *t, const struct hm_config *c, long long l, double *h,
                    const double *o)
{
    const int64_t d = c->hidden_size, I = c->intermediate_size;
    const int mb = c->mlp_bias;
    double n[64], g[64], u[64], dn[64];
    for (int64_t i = 0; i < d; i++)
        h[i] += o[i];
    lit_rms(n, h, W(t, "model.layers.%lld.post_attention_layernorm.weight", l), d,
            c->layer_norm_eps);
    lit_mv(g, W(t, "model.layers.%lld.mlp.gate_proj.weight", l),
           mb ? W(t, "model.layers.%lld.mlp.gate_proj.bias", l) : NULL, n, I, d);
    lit_mv(u, W(t, "model.layers.%lld.mlp.up_proj.weight", l),
           mb ? W(t, "model.layers.%lld.mlp.up_proj.bias", l) : NULL, n, I, d);
    for (int64_t i = 0; i < I; i++)
        g[i] = g[i] / (1.0 + exp(-g[i])) * u[i];
    lit_mv(dn, W(t, "model.layers.%lld.mlp.down_proj.weight", l),
           mb ? W(t, "model.layers.%lld.mlp.down_proj.bias", l) : NULL, g, d, I);
    for (int64_t i = 0; i < d; i++)
        h[i] += dn[i];
}

static void lit_head(struct tu_ref_table *t, const struct hm_config *c, const double *h,
                     double *logits)
{
    double n[64];
    lit_rms(n, h, tu_ref_table_get(t, "model.norm.weight"), c->hidden_size, c->layer_norm_eps);
    const double *head = tu_ref_table_get(t, c->tie_word_embeddings ? "model.embed_tokens.weight"
                                                                    : "lm_head.weight");
    lit_mv(logits, head, NULL, n, c->vocab_size, c->hidden_size);
}

/* (a) T = 1, n_kv = n_h: attention of one token is v itself and rotary at 0 is the
 * identity, so o = Wo (Wv a + bv) + bo: q and k must not matter at all. */
Test(ref_llama, t1_equals_literal)
{
    struct hm_config c = tiny(12, 3, 3, 4, 20, 17, 2);
    c.attention_bias = c.mlp_bias = 1;
    struct tu_ref_table *t = weights(&c, 11);
    for (int32_t tok = 0; tok < 17; tok += 5) {
        double h[64], a[64], v[64], o[64], want[64];
        memcpy(h, tu_ref_table_get(t, "model.embed_tokens.weight") + tok * 12, sizeof(double) * 12);
        for (long long l = 0; l < 2; l++) {
            lit_rms(a, h, W(t, "model.layers.%lld.input_layernorm.weight", l), 12, 1e-5);
            lit_mv(v, W(t, "model.layers.%lld.self_attn.v_proj.weight", l),
                   W(t, "model.layers.%lld.self_attn.v_proj.bias", l), a, 12, 12);
            lit_mv(o, W(t, "model.layers.%lld.self_attn.o_proj.weight", l),
                   W(t, "model.layers.%lld.self_attn.o_proj.bias", l), v, 12, 12);
            lit_mlp(t, &c, l, h, o);
        }
        lit_head(t, &c, h, want);
        double *got = logits_of(&c, t, &tok, 1);
        const double err = max_abs_diff(got, want, 17);
        cr_assert(err <= 1e-12 * fmax(1, max_abs(want, 17)), "token %d: max |Δ| %g", tok, err);
        cr_assert(max_abs(want, 17) > 0.3, "logits are O(1): %g", max_abs(want, 17));
        free(got);
    }
    tu_ref_table_free(t);
}

/* rotate_half on pairs (0,2), (1,3) of a p = 4 head by angles th0, th1 (fp32 cos/sin) */
static void lit_rot4(double *x, float th0, float th1)
{
    const double c0 = (float)cos((double)th0), s0 = (float)sin((double)th0);
    const double c1 = (float)cos((double)th1), s1 = (float)sin((double)th1);
    const double x0 = x[0], x1 = x[1], x2 = x[2], x3 = x[3];
    x[0] = x0 * c0 - x2 * s0;
    x[2] = x2 * c0 + x0 * s0;
    x[1] = x1 * c1 - x3 * s1;
    x[3] = x3 * c1 + x1 * s1;
}

/* T = 2, one head, p = 4, rope_theta 100 (inv_freq = [1, fp32(0.1)]): the second
 * position attends to both with rotated q1, k0 (unrotated at 0), k1. */
Test(ref_llama, t2_rotary_equals_literal)
{
    struct hm_config c = tiny(4, 1, 1, 4, 6, 9, 1);
    c.rotary_emb_base = 100;
    struct tu_ref_table *t = weights(&c, 5);
    const int32_t tok[2] = {3, 7};
    double h[2][4], a[2][4], q[2][4], k[2][4], v[2][4], want[2][9];
    for (int s = 0; s < 2; s++) {
        memcpy(h[s], tu_ref_table_get(t, "model.embed_tokens.weight") + tok[s] * 4,
               sizeof(double) * 4);
        lit_rms(a[s], h[s], W(t, "model.layers.%lld.input_layernorm.weight", 0), 4, 1e-5);
        lit_mv(q[s], W(t, "model.layers.%lld.self_attn.q_proj.weight", 0), NULL, a[s], 4, 4);
        lit_mv(k[s], W(t, "model.layers.%lld.self_attn.k_proj.weight", 0), NULL, a[s], 4, 4);
        lit_mv(v[s], W(t, "model.layers.%lld.self_attn.v_proj.weight", 0), NULL, a[s], 4, 4);
    }
    lit_rot4(q[1], 1.0f, 1.0f * 0.1f);
    lit_rot4(k[1], 1.0f, 1.0f * 0.1f);
    double s0 = 0, s1 = 0, att[2][4];
    for (int i = 0; i < 4; i++) {
        s0 += q[1][i] * k[0][i] / 2.0; /* sqrt(p) = 2 */
        s1 += q[1][i] * k[1][i] / 2.0;
    }
    const double w0 = 1 / (1 + exp(s1 - s0)), w1 = 1 / (1 + exp(s0 - s1));
    for (int i = 0; i < 4; i++) {
        att[0][i] = v[0][i];
        att[1][i] = w0 * v[0][i] + w1 * v[1][i];
    }
    for (int s = 0; s < 2; s++) {
        double o[4];
        lit_mv(o, W(t, "model.layers.%lld.self_attn.o_proj.weight", 0), NULL, att[s], 4, 4);
        lit_mlp(t, &c, 0, h[s], o);
        lit_head(t, &c, h[s], want[s]);
    }
    double *got = logits_of(&c, t, tok, 2);
    const double err = max_abs_diff(got, &want[0][0], 18);
    cr_assert(err <= 1e-12, "max |Δ| %g", err);
    cr_assert(fabs(w0 - 0.5) > 1e-3, "attention weights are not trivial (w0 = %g)", w0);
    free(got);
    tu_ref_table_free(t);
}

/* ---- (b) GQA = MHA with repeated k/v heads ------------------------------------- */

/* dst rows [rep·nkv·p, cols] ← src rows [nkv·p, cols], head h of dst = head h / rep of src */
static void repeat_heads(double *dst, const double *src, int64_t nkv, int64_t rep, int64_t p,
                         int64_t cols)
{
    for (int64_t h = 0; h < nkv * rep; h++)
        memcpy(dst + h * p * cols, src + (h / rep) * p * cols, sizeof(double) * (size_t)(p * cols));
}

static void put_repeated(struct tu_ref_table *dst, struct tu_ref_table *src, const char *name,
                         int64_t nkv, int64_t rep, int64_t p)
{
    const int64_t i = tu_ref_table_find(src, name);
    if (i < 0)
        return;
    const int64_t *sh;
    int nd;
    const double *x;
    tu_ref_table_at(src, i, NULL, NULL, &nd, &sh, &x);
    const int64_t cols = nd == 2 ? sh[1] : 1, shape[2] = {nkv * rep * p, cols};
    double *y = malloc(sizeof(double) * (size_t)(shape[0] * cols));
    repeat_heads(y, x, nkv, rep, p, cols);
    tu_ref_table_put(dst, name, HM_DTYPE_F64, nd, shape, y);
    free(y);
}

/* conv1d over [q | k | v]: q channels kept, k and v channel blocks repeated per head */
static void put_repeated_conv(struct tu_ref_table *dst, struct tu_ref_table *src,
                              const char *name, int64_t nh, int64_t nkv, int64_t p, int64_t K)
{
    const double *x = tu_ref_table_get(src, name);
    const int nd = strstr(name, ".weight") ? 2 : 1;
    const int64_t cols = nd == 2 ? K : 1, C = 3 * nh * p, shape[2] = {C, K};
    double *y = malloc(sizeof(double) * (size_t)(C * cols));
    memcpy(y, x, sizeof(double) * (size_t)(nh * p * cols));
    repeat_heads(y + nh * p * cols, x + nh * p * cols, nkv, nh / nkv, p, cols);
    repeat_heads(y + 2 * nh * p * cols, x + (nh + nkv) * p * cols, nkv, nh / nkv, p, cols);
    tu_ref_table_put(dst, name, HM_DTYPE_F64, nd, shape, y);
    free(y);
}

/* The n_kv = n_h model equivalent to the GQA weights gqa of c. */
static struct tu_ref_table *mha_of(struct tu_ref_table *gqa, const struct hm_config *c)
{
    struct tu_ref_table *m = table_copy(gqa);
    const int64_t nh = c->num_attention_heads, nkv = c->num_key_value_heads, p = c->head_dim;
    const char *sfx[4] = {"k_proj.weight", "k_proj.bias", "v_proj.weight", "v_proj.bias"};
    char name[200];
    for (long long l = 0; l < c->num_hidden_layers; l++) {
        for (int k = 0; k < 4; k++) {
            snprintf(name, sizeof name, "model.layers.%lld.self_attn.%s", l, sfx[k]);
            put_repeated(m, gqa, name, nkv, nh / nkv, p);
        }
        for (int k = 0; k < 2 && c->mixer == HM_MIXER_HEDGEMAMBA; k++) {
            snprintf(name, sizeof name, "model.layers.%lld.self_attn.conv1d.%s", l,
                     k ? "bias" : "weight");
            put_repeated_conv(m, gqa, name, nh, nkv, p, c->conv_width);
        }
    }
    return m;
}

Test(ref_llama, gqa_equals_repeated_mha)
{
    const enum hm_mixer mixers[3] = {HM_MIXER_SOFTMAX, HM_MIXER_HEDGEHOG, HM_MIXER_HEDGEMAMBA};
    for (int mi = 0; mi < 3; mi++) {
        struct hm_config c = tiny(16, 4, 2, 6, 24, 19, 2);
        c.mixer = mixers[mi];
        c.attention_bias = 1;
        c.feature_dim = 5;
        struct tu_ref_table *g = weights(&c, 21);
        struct tu_llama_student_opts so = {.dtype = HM_DTYPE_F64, .seed = 3, .fmap_std = 0.3,
                                           .ssm_random = 1};
        tu_llama_add_student(g, &c, &so);
        struct tu_ref_table *m = mha_of(g, &c);
        struct hm_config cm = c;
        cm.num_key_value_heads = 4;
        int32_t tok[9];
        gen_tokens(tok, 9, 19, 77);
        double *lg = logits_of(&c, g, tok, 9), *lm = logits_of(&cm, m, tok, 9);
        const double err = max_abs_diff(lg, lm, 9 * 19);
        cr_assert(err <= 1e-12, "mixer %d: max |Δ| %g", mi, err);
        free(lg);
        free(lm);
        tu_ref_table_free(g);
        tu_ref_table_free(m);
    }
}

/* (c) tied: no lm_head.weight, the head is embed_tokens */
Test(ref_llama, tied_equals_untied_copy)
{
    struct hm_config c = tiny(8, 2, 1, 4, 16, 13, 2);
    c.tie_word_embeddings = 1;
    struct tu_ref_table *t = weights(&c, 8);
    cr_assert_eq(tu_ref_table_find(t, "lm_head.weight"), -1);
    struct tu_ref_table *u = table_copy(t);
    const int64_t shape[2] = {13, 8};
    tu_ref_table_put(u, "lm_head.weight", HM_DTYPE_F64, 2, shape,
                     tu_ref_table_get(t, "model.embed_tokens.weight"));
    struct hm_config cu = c;
    cu.tie_word_embeddings = 0;
    int32_t tok[6];
    gen_tokens(tok, 6, 13, 4);
    double *a = logits_of(&c, t, tok, 6), *b = logits_of(&cu, u, tok, 6);
    cr_assert_eq(max_abs_diff(a, b, 6 * 13), 0.0);
    free(a);
    free(b);
    tu_ref_table_free(t);
    tu_ref_table_free(u);
}

/* ---- (d) llama3 rope scaling ----------------------------------------------------- */

static struct hm_config llama3(int64_t orig)
{
    struct hm_config c = tiny(16, 2, 2, 8, 16, 11, 1);
    c.rope_scaling.type = HM_ROPE_LLAMA3;
    c.rope_scaling.factor = 8;
    c.rope_scaling.low_freq_factor = 1;
    c.rope_scaling.high_freq_factor = 4;
    c.rope_scaling.original_max_position_embeddings = orig;
    return c;
}

/* Every wavelength 2π/inv_freq (≤ 2π·10000^(6/8) ≈ 6283) is below original/high:
 * nothing changes, down to the logits. */
Test(ref_llama, llama3_high_freq_unchanged)
{
    struct hm_config c = llama3(1000000000), u = c;
    u.rope_scaling.type = HM_ROPE_NONE;
    double a[4], b[4];
    tu_ref_llama_inv_freq(&c, a);
    tu_ref_llama_inv_freq(&u, b);
    for (int j = 0; j < 4; j++)
        cr_assert_eq(a[j], b[j], "j %d", j);
    cr_assert_eq(b[0], 1.0);
    cr_assert_eq(b[1], (double)(1.0f / (float)pow(10000.0, 0.25)));
    struct tu_ref_table *t = weights(&c, 2);
    int32_t tok[7];
    gen_tokens(tok, 7, 11, 9);
    double *la = logits_of(&c, t, tok, 7), *lb = logits_of(&u, t, tok, 7);
    cr_assert_eq(max_abs_diff(la, lb, 7 * 11), 0.0);
    free(la);
    free(lb);
    tu_ref_table_free(t);
}

/* original 1: every wavelength (≥ 2π) exceeds original/low = 1: all divided by factor,
 * and the logits move (rotary matters at T = 7). */
Test(ref_llama, llama3_low_freq_divided)
{
    struct hm_config c = llama3(1), u = c;
    u.rope_scaling.type = HM_ROPE_NONE;
    double a[4], b[4];
    tu_ref_llama_inv_freq(&c, a);
    tu_ref_llama_inv_freq(&u, b);
    for (int j = 0; j < 4; j++)
        cr_assert_eq(a[j], (double)(float)(b[j] / 8), "j %d: %.9g vs %.9g", j, a[j], b[j] / 8);
    struct tu_ref_table *t = weights(&c, 2);
    int32_t tok[7];
    gen_tokens(tok, 7, 11, 9);
    double *la = logits_of(&c, t, tok, 7), *lb = logits_of(&u, t, tok, 7);
    cr_assert(max_abs_diff(la, lb, 7 * 11) > 1e-4, "scaling has an effect");
    cr_assert_eq(max_abs_diff(la, lb, 11), 0.0, "position 0 is not rotated");
    free(la);
    free(lb);
    tu_ref_table_free(t);
}

/* Llama 3.1 values (θ 500000, p 128, factor 8, low 1, high 4, original 8192): the
 * smooth band interpolates, per j, between inv/factor and inv, continuously: each
 * scaled value is inv·((1 − s)/factor + s) with s = (8192/λ − 1)/3, λ = 2π/inv. */
Test(ref_llama, llama3_smooth_band)
{
    struct hm_config c = tiny(4096, 32, 8, 128, 16, 11, 1);
    c.rotary_emb_base = 500000;
    c.rope_scaling.type = HM_ROPE_LLAMA3;
    c.rope_scaling.factor = 8;
    c.rope_scaling.low_freq_factor = 1;
    c.rope_scaling.high_freq_factor = 4;
    c.rope_scaling.original_max_position_embeddings = 8192;
    struct hm_config u = c;
    u.rope_scaling.type = HM_ROPE_NONE;
    double a[64], b[64];
    tu_ref_llama_inv_freq(&c, a);
    tu_ref_llama_inv_freq(&u, b);
    int n_hi = 0, n_mid = 0, n_lo = 0;
    for (int j = 0; j < 64; j++) {
        const double lam = 2 * M_PI / b[j];
        if (lam < 2048) {
            cr_assert_eq(a[j], b[j], "j %d high band", j);
            n_hi++;
        } else if (lam > 8192) {
            cr_assert_eq(a[j], (double)(float)(b[j] / 8), "j %d low band", j);
            n_lo++;
        } else {
            const double s = (8192 / lam - 1) / 3, want = b[j] * ((1 - s) / 8 + s);
            cr_assert(fabs(a[j] - want) <= 1e-7 * want, "j %d: %.9g vs %.9g", j, a[j], want);
            cr_assert(a[j] < b[j] && a[j] > b[j] / 8, "j %d strictly inside", j);
            n_mid++;
        }
        if (j > 0)
            cr_assert(a[j] < a[j - 1], "monotone at j %d", j);
    }
    cr_assert(n_hi > 0 && n_mid > 0 && n_lo > 0, "bands %d %d %d", n_hi, n_mid, n_lo);
}

/* ---- (e) students ------------------------------------------------------------------ */

static struct tu_ref_table *student(const struct hm_config *c, uint64_t seed, int ssm_random)
{
    struct tu_ref_table *t = weights(c, seed);
    struct tu_llama_student_opts so = {.dtype = HM_DTYPE_F64, .seed = seed + 1, .fmap_std = 0.5,
                                       .ssm_random = ssm_random};
    tu_llama_add_student(t, c, &so);
    return t;
}

Test(ref_llama, hedgemamba_identity_equals_hedgehog)
{
    struct hm_config c = tiny(16, 4, 2, 4, 24, 23, 2);
    c.mixer = HM_MIXER_HEDGEMAMBA;
    c.feature_dim = 6;
    c.attention_bias = c.mlp_bias = 1;
    struct tu_ref_table *t = student(&c, 31, 0);
    struct hm_config hh = c;
    hh.mixer = HM_MIXER_HEDGEHOG;
    int32_t tok[11];
    gen_tokens(tok, 11, 23, 5);
    double *a = logits_of(&c, t, tok, 11), *b = logits_of(&hh, t, tok, 11);
    const double err = max_abs_diff(a, b, 11 * 23);
    fprintf(stderr, "hedgemamba identity vs hedgehog: max |Δ| %.3g (max |logit| %.3g)\n", err,
            max_abs(b, 11 * 23));
    cr_assert(err <= 1e-10, "max |Δ| %g", err);
    /* and the student is not the teacher */
    struct hm_config te = c;
    te.mixer = HM_MIXER_SOFTMAX;
    double *s = logits_of(&te, t, tok, 11);
    cr_assert(max_abs_diff(s, b, 11 * 23) > 1e-3);
    free(a);
    free(b);
    free(s);
    tu_ref_table_free(t);
}

/* A ≪ 0 makes α ≈ 0: the state holds only the current token, y_t ≈ v_t (identity
 * conv, gate, D = 0), so position t's logits equal those of the one-token sequence
 * [tok_t] up to the 1e-6 normalizer and α = e^{-500}. */
Test(ref_llama, hedgemamba_strong_decay_forgets)
{
    struct hm_config c = tiny(16, 4, 2, 4, 24, 23, 2);
    c.mixer = HM_MIXER_HEDGEMAMBA;
    struct tu_ref_table *t = student(&c, 41, 0);
    const int64_t sh[1] = {4};
    const double A[4] = {-500, -500, -500, -500};
    for (long long l = 0; l < 2; l++) {
        char name[200];
        snprintf(name, sizeof name, "model.layers.%lld.self_attn.A", l);
        tu_ref_table_put(t, name, HM_DTYPE_F64, 1, sh, A);
    }
    int32_t tok[6];
    gen_tokens(tok, 6, 23, 6);
    double *lg = logits_of(&c, t, tok, 6);
    for (int s = 0; s < 6; s++) {
        double *one = logits_of(&c, t, &tok[s], 1);
        const double err = max_abs_diff(one, lg + s * 23, 23);
        cr_assert(err <= 1e-4, "position %d: max |Δ| %g", s, err);
        free(one);
    }
    /* the default decay (A = 0) does remember */
    struct tu_ref_table *r = student(&c, 41, 0);
    double *lr = logits_of(&c, r, tok, 6);
    cr_assert(max_abs_diff(lr + 5 * 23, lg + 5 * 23, 23) > 1e-3);
    free(lg);
    free(lr);
    tu_ref_table_free(t);
    tu_ref_table_free(r);
}

/* Logits at positions < t0 do not depend on tokens at ≥ t0 (bitwise), for every mixer;
 * and the later positions do. */
Test(ref_llama, causal_all_mixers)
{
    const enum hm_mixer mixers[3] = {HM_MIXER_SOFTMAX, HM_MIXER_HEDGEHOG, HM_MIXER_HEDGEMAMBA};
    for (int mi = 0; mi < 3; mi++) {
        struct hm_config c = tiny(16, 4, 1, 4, 24, 23, 2);
        c.mixer = mixers[mi];
        c.conv_width = 3;
        struct tu_ref_table *t = student(&c, 51, 1);
        int32_t a[10], b[10];
        gen_tokens(a, 10, 23, 7);
        memcpy(b, a, sizeof a);
        for (int s = 6; s < 10; s++)
            b[s] = (a[s] + 1 + s) % 23;
        double *la = logits_of(&c, t, a, 10), *lb = logits_of(&c, t, b, 10);
        cr_assert_eq(max_abs_diff(la, lb, 6 * 23), 0.0, "mixer %d", mi);
        cr_assert(max_abs_diff(la + 9 * 23, lb + 9 * 23, 23) > 1e-6, "mixer %d", mi);
        free(la);
        free(lb);
        tu_ref_table_free(t);
    }
}

/* Set every layer's self_attn.<suffix> [n] to the constant v. */
static void put_layers_const(struct tu_ref_table *t, const struct hm_config *c,
                             const char *suffix, int64_t n, double v)
{
    double *x = malloc(sizeof(double) * (size_t)n);
    for (int64_t i = 0; i < n; i++)
        x[i] = v;
    for (long long l = 0; l < c->num_hidden_layers; l++) {
        char name[200];
        snprintf(name, sizeof name, "model.layers.%lld.self_attn.%s", l, suffix);
        const int64_t i = tu_ref_table_find(t, name);
        cr_assert(i >= 0, "%s", name);
        int nd;
        const int64_t *sh;
        cr_assert_eq(tu_ref_table_at(t, i, NULL, NULL, &nd, &sh, NULL), n, "%s", name);
        tu_ref_table_put(t, name, HM_DTYPE_F64, nd, sh, x);
    }
    free(x);
}

/* Scale every layer's o_proj.weight by f. */
static void scale_o_proj(struct tu_ref_table *t, const struct hm_config *c, double f)
{
    const int64_t n = c->hidden_size * c->num_attention_heads * c->head_dim;
    for (long long l = 0; l < c->num_hidden_layers; l++) {
        char name[200];
        snprintf(name, sizeof name, "model.layers.%lld.self_attn.o_proj.weight", l);
        const int64_t i = tu_ref_table_find(t, name);
        int nd;
        const int64_t *sh;
        const double *w;
        tu_ref_table_at(t, i, NULL, NULL, &nd, &sh, &w);
        double *x = malloc(sizeof(double) * (size_t)n);
        for (int64_t k = 0; k < n; k++)
            x[k] = w[k] * f;
        tu_ref_table_put(t, name, HM_DTYPE_F64, nd, sh, x);
        free(x);
    }
}

/* A constant gate (weight 0, bias 0.9) is o_proj scaled by silu(0.9), at any T; the
 * skip D = 0.7 at T = 1 is o_proj scaled by 1.7 (y = v·a/(a + ε) + D v). */
Test(ref_llama, hedgemamba_gate_and_skip)
{
    struct hm_config c = tiny(16, 4, 2, 4, 24, 23, 2);
    c.mixer = HM_MIXER_HEDGEMAMBA;
    struct hm_config hh = c;
    hh.mixer = HM_MIXER_HEDGEHOG;
    int32_t tok[7];
    gen_tokens(tok, 7, 23, 12);
    struct tu_ref_table *t = student(&c, 91, 0), *r = student(&c, 91, 0);
    put_layers_const(t, &c, "gate_proj.bias", 16, 0.9);
    scale_o_proj(r, &c, 0.9 / (1 + exp(-0.9)));
    double *a = logits_of(&c, t, tok, 7), *b = logits_of(&hh, r, tok, 7);
    cr_assert(max_abs_diff(a, b, 7 * 23) <= 1e-10, "gate: %g", max_abs_diff(a, b, 7 * 23));
    free(a);
    free(b);
    tu_ref_table_free(t);
    tu_ref_table_free(r);
    t = student(&c, 92, 0);
    r = student(&c, 92, 0);
    put_layers_const(t, &c, "D", 4, 0.7);
    scale_o_proj(r, &c, 1.7);
    a = logits_of(&c, t, tok, 1);
    b = logits_of(&hh, r, tok, 1);
    cr_assert(max_abs_diff(a, b, 23) <= 1e-5, "skip: %g", max_abs_diff(a, b, 23));
    free(a);
    free(b);
    tu_ref_table_free(t);
    tu_ref_table_free(r);
}

/* α = exp(Δ·A) with Δ = softplus(bias) when dt_proj.weight = 0: (Δ 1, A −0.4) and
 * (Δ 2, A −0.2) decay alike, and Δ scales numerator and normalizer of y alike, so the
 * logits agree up to the ε = 1e-6 term; a real decay changes them. */
Test(ref_llama, hedgemamba_decay_is_dt_times_A)
{
    struct hm_config c = tiny(16, 4, 2, 4, 24, 23, 2);
    c.mixer = HM_MIXER_HEDGEMAMBA;
    int32_t tok[9];
    gen_tokens(tok, 9, 23, 13);
    struct tu_ref_table *t1 = student(&c, 93, 0), *t2 = student(&c, 93, 0);
    struct tu_ref_table *t0 = student(&c, 93, 0);
    put_layers_const(t1, &c, "A", 4, -0.4);
    put_layers_const(t2, &c, "A", 4, -0.2);
    put_layers_const(t2, &c, "dt_proj.bias", 4, log(expm1(2.0)));
    double *a = logits_of(&c, t1, tok, 9), *b = logits_of(&c, t2, tok, 9);
    double *z = logits_of(&c, t0, tok, 9);
    cr_assert(max_abs_diff(a, b, 9 * 23) <= 1e-5, "%g", max_abs_diff(a, b, 9 * 23));
    cr_assert(max_abs_diff(a, z, 9 * 23) > 1e-3, "%g", max_abs_diff(a, z, 9 * 23));
    free(a);
    free(b);
    free(z);
    tu_ref_table_free(t0);
    tu_ref_table_free(t1);
    tu_ref_table_free(t2);
}

/* A random HedgeMamba (conv, decay, D, gate all active) differs from its Hedgehog. */
Test(ref_llama, hedgemamba_random_is_not_hedgehog)
{
    struct hm_config c = tiny(16, 4, 2, 4, 24, 23, 1);
    c.mixer = HM_MIXER_HEDGEMAMBA;
    struct tu_ref_table *t = student(&c, 61, 1);
    struct hm_config hh = c;
    hh.mixer = HM_MIXER_HEDGEHOG;
    int32_t tok[8];
    gen_tokens(tok, 8, 23, 8);
    double *a = logits_of(&c, t, tok, 8), *b = logits_of(&hh, t, tok, 8);
    cr_assert(max_abs_diff(a, b, 8 * 23) > 1e-2);
    for (int i = 0; i < 8 * 23; i++)
        cr_assert(isfinite(a[i]));
    free(a);
    free(b);
    tu_ref_table_free(t);
}

/* ---- loss and stage 1 ------------------------------------------------------------- */

Test(ref_llama, loss_is_ce_of_logits)
{
    struct hm_config c = tiny(8, 2, 1, 4, 16, 13, 1);
    struct tu_ref_table *t = weights(&c, 71);
    int32_t tok[2 * 6];
    gen_tokens(tok, 12, 13, 10);
    double want = 0;
    for (int b = 0; b < 2; b++) {
        double *lg = logits_of(&c, t, tok + b * 6, 5);
        for (int s = 0; s < 5; s++) {
            double z = 0;
            for (int v = 0; v < 13; v++)
                z += exp(lg[s * 13 + v]);
            want += (log(z) - lg[s * 13 + tok[b * 6 + s + 1]]) / 10.0;
        }
        free(lg);
    }
    const double got = tu_ref_llama_loss(&c, tu_ref_table_get, t, tok, 2, 5);
    cr_assert(fabs(got - want) <= 1e-12, "%.17g vs %.17g", got, want);
    tu_ref_table_free(t);
}

/* T = 1: Hedgehog's output is v·a/(a + 1e-6), parallel to the teacher's v, so the
 * cosine loss is 0; at T = 8 with random maps it is positive and below 2. */
Test(ref_llama, stage1_loss)
{
    struct hm_config c = tiny(16, 4, 2, 4, 24, 23, 2);
    struct hm_config s = c;
    s.mixer = HM_MIXER_HEDGEHOG;
    s.feature_dim = 3;
    struct tu_ref_table *t = weights(&c, 81);
    struct tu_ref_table *st = tu_ref_table_new();
    struct tu_llama_student_opts so = {.dtype = HM_DTYPE_F64, .seed = 5, .fmap_std = 0.5};
    tu_llama_add_student(st, &s, &so);
    int32_t tok[8];
    gen_tokens(tok, 8, 23, 11);
    const double l1 = tu_ref_llama_stage1_loss(&c, tu_ref_table_get, t, &s, tu_ref_table_get, st,
                                               tok, 1);
    cr_assert(fabs(l1) <= 1e-12, "T=1 loss %g", l1);
    const double l8 = tu_ref_llama_stage1_loss(&c, tu_ref_table_get, t, &s, tu_ref_table_get, st,
                                               tok, 8);
    cr_assert(l8 > 1e-4 && l8 < 2, "T=8 loss %g", l8);
    tu_ref_table_free(t);
    tu_ref_table_free(st);
}

/* ---- (f) the fixture writer round-trips -------------------------------------------- */

static void assert_tables_equal(const struct tu_ref_table *want, const struct tu_ref_table *got)
{
    cr_assert_eq(tu_ref_table_count(got), tu_ref_table_count(want));
    for (int64_t i = 0; i < tu_ref_table_count(want); i++) {
        const char *name;
        enum hm_dtype dt;
        int nd;
        const int64_t *sh;
        const double *x;
        const int64_t n = tu_ref_table_at(want, i, &name, &dt, &nd, &sh, &x);
        const int64_t j = tu_ref_table_find(got, name);
        cr_assert(j >= 0, "%s missing", name);
        enum hm_dtype dt2;
        int nd2;
        const int64_t *sh2;
        const double *y;
        cr_assert_eq(tu_ref_table_at(got, j, NULL, &dt2, &nd2, &sh2, &y), n, "%s numel", name);
        cr_assert_eq(dt2, dt, "%s dtype", name);
        cr_assert_eq(nd2, nd, "%s ndim", name);
        for (int k = 0; k < nd; k++)
            cr_assert_eq(sh2[k], sh[k], "%s dim %d", name, k);
        for (int64_t k = 0; k < n; k++)
            cr_assert_eq(y[k], x[k], "%s[%lld]", name, (long long)k);
    }
}

static struct hm_config parse_config(const char *dir)
{
    char *p = tu_path(dir, "config.json");
    size_t len;
    char *json = tu_read_file(p, &len);
    struct hm_config c;
    struct hm_error err;
    cr_assert_eq(hm_config_parse(json, len, &c, &err), HM_OK, "%s", err.msg);
    cr_assert_eq(hm_config_finish(&c, &err), HM_OK, "%s", err.msg);
    free(json);
    free(p);
    return c;
}

static void remove_dir(char *dir)
{
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(tu_run(cmd, NULL, NULL), 0);
    free(dir);
}

Test(ref_llama, fixture_roundtrip_sharded)
{
    const enum hm_dtype dts[3] = {HM_DTYPE_F32, HM_DTYPE_F16, HM_DTYPE_BF16};
    for (int k = 0; k < 3; k++) {
        struct hm_config c = tiny(16, 4, 2, 6, 24, 29, 3);
        c.attention_bias = k != 1;
        c.mlp_bias = k == 1;
        c.tie_word_embeddings = k == 2;
        c.rotary_emb_base = 500000;
        c.rope_scaling.type = k == 0 ? HM_ROPE_LLAMA3 : HM_ROPE_NONE;
        c.rope_scaling.factor = 8;
        c.rope_scaling.low_freq_factor = 1;
        c.rope_scaling.high_freq_factor = 4;
        c.rope_scaling.original_max_position_embeddings = 32;
        char *dir = tu_mkdtemp("fxllama");
        struct tu_llama_opts o = {.dtype = dts[k], .nshards = k == 1 ? 1 : 3,
                                  .legacy_inv_freq = 1, .seed = 100 + (uint64_t)k};
        struct tu_ref_table *want = tu_make_llama(dir, &c, &o);
        struct tu_ref_table *got = tu_ref_table_from_file(dir);
        cr_assert(got, "read back %s", dir);
        assert_tables_equal(want, got);
        const double *inv = tu_ref_table_get(got, "model.layers.1.self_attn.rotary_emb.inv_freq");
        double inv2[3];
        tu_ref_llama_inv_freq(&c, inv2);
        cr_assert(inv && inv[2] == inv2[2]);
        /* hm's config reader sees the same model */
        struct hm_config r = parse_config(dir);
        cr_assert_eq(r.family, HM_FAMILY_LLAMA);
        cr_assert_eq(r.num_key_value_heads, 2);
        cr_assert_eq(r.head_dim, 6);
        cr_assert_eq(r.attention_bias, c.attention_bias);
        cr_assert_eq(r.mlp_bias, c.mlp_bias);
        cr_assert_eq(r.tie_word_embeddings, c.tie_word_embeddings);
        cr_assert_eq(r.rotary_emb_base, 500000);
        cr_assert_eq(r.layer_norm_eps, 1e-5);
        cr_assert_eq(r.rope_scaling.type, c.rope_scaling.type);
        if (k == 0)
            cr_assert_eq(r.rope_scaling.original_max_position_embeddings, 32);
        /* the reference reads both tables alike */
        int32_t tok[5] = {1, 28, 3, 14, 0};
        double *a = logits_of(&c, want, tok, 5), *b = logits_of(&r, got, tok, 5);
        cr_assert_eq(max_abs_diff(a, b, 5 * 29), 0.0);
        free(a);
        free(b);
        tu_ref_table_free(want);
        tu_ref_table_free(got);
        remove_dir(dir);
    }
}

/* The parameter count matches the written tensors (legacy buffers excluded). */
Test(ref_llama, fixture_param_count)
{
    struct hm_config c = tiny(16, 4, 2, 6, 24, 29, 3);
    c.attention_bias = c.mlp_bias = 1;
    struct tu_ref_table *t = weights(&c, 1);
    int64_t n = 0;
    for (int64_t i = 0; i < tu_ref_table_count(t); i++)
        n += tu_ref_table_at(t, i, NULL, NULL, NULL, NULL, NULL);
    cr_assert_eq(n, tu_llama_param_count(&c));
    tu_ref_table_free(t);
}

/* minimal_config leaves out every field equal to an HF default; hm fills them back. */
Test(ref_llama, fixture_minimal_config_defaults)
{
    struct hm_config c = tiny(16, 4, 4, 4, 24, 29, 1);
    c.layer_norm_eps = 1e-6;
    char *dir = tu_mkdtemp("fxllamamin");
    struct tu_llama_opts o = {.dtype = HM_DTYPE_F32, .minimal_config = 1};
    struct tu_ref_table *t = tu_make_llama(dir, &c, &o);
    char *p = tu_path(dir, "config.json");
    char *json = tu_read_file(p, NULL);
    cr_assert(!strstr(json, "num_key_value_heads") && !strstr(json, "rope_theta") &&
              !strstr(json, "head_dim") && !strstr(json, "rms_norm_eps"), "%s", json);
    struct hm_config r = parse_config(dir);
    cr_assert_eq(r.num_key_value_heads, 4);
    cr_assert_eq(r.head_dim, 4);
    cr_assert_eq(r.layer_norm_eps, 1e-6);
    cr_assert_eq(r.rotary_emb_base, 10000);
    cr_assert_eq(r.tie_word_embeddings, 0);
    cr_assert_eq(r.rope_scaling.type, HM_ROPE_NONE);
    struct tu_ref_table *g = tu_ref_table_from_file(dir);
    assert_tables_equal(t, g);
    free(json);
    free(p);
    tu_ref_table_free(t);
    tu_ref_table_free(g);
    remove_dir(dir);
}

/* A bare safetensors file with no config beside it still loads (tensor by tensor). */
Test(ref_llama, table_from_bare_file)
{
    struct hm_config c = tiny(8, 2, 1, 4, 16, 13, 1);
    char *dir = tu_mkdtemp("fxllamabare");
    struct tu_llama_opts o = {.dtype = HM_DTYPE_BF16};
    struct tu_ref_table *t = tu_make_llama(dir, &c, &o);
    char *cfg = tu_path(dir, "config.json"), *st = tu_path(dir, "model.safetensors");
    cr_assert_eq(unlink(cfg), 0);
    struct tu_ref_table *g = tu_ref_table_from_file(st);
    cr_assert(g);
    assert_tables_equal(t, g);
    free(cfg);
    free(st);
    tu_ref_table_free(t);
    tu_ref_table_free(g);
    remove_dir(dir);
}
