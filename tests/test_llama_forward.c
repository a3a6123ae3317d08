/* test_llama_forward.c — the llama family of libconvert/forward/ against the
 * independent double implementation tests/support/ref_llama.c, and the
 * decoding step of every family × mixer against the full forward.
 *
 *  - HF Llama folders (tests/support/fixture_llama.c) in F32/F16/BF16,
 *    single file and shards, legacy inv_freq buffers: GQA untied, tied
 *    embeddings, attention_bias + mlp_bias, rope_scaling llama3 on sequences
 *    long enough that the scaled low frequencies matter, explicit head_dim
 *    ≠ d / n_h. max|Δ| / max|ref| ≤ 1e-4 on both backends.
 *  - Students of llama teachers (hedgehog, hedgemamba with random non-
 *    identity SSM weights, GQA) loaded by name into hm's model: logits
 *    against the reference (≤ 1e-4).
 *  - hm_model_step token by token equals hm_model_forward at every position
 *    (≤ 1e-5 relative) for softmax (KV cache), hedgehog and hedgemamba, in
 *    both families.
 *  - Decoding on the checked backend (every buffer placed through the
 *    backend: KV caches, states, scratch, ids, logits) equals ref's bit for
 *    bit: chunked prefill with every row's logits, steps, a state copy and a
 *    batch step, reset; an unplaced model, or a step on another backend than
 *    the state's, is refused. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "checkpoint.h"
#include "fixture_llama.h"
#include "model.h"
#include "model_forward.h"
#include "recurrent.h"
#include "ref_llama.h"
#include "testutil.h"

static const char *backends[] = {"ref", "fast"};

static struct hm_config llama_cfg(int64_t d, int64_t L, int64_t nh, int64_t nkv, int64_t hd,
                                  int64_t I, int64_t V)
{
    struct hm_config c;
    hm_config_defaults(&c);
    c.family = HM_FAMILY_LLAMA;
    c.hidden_size = d;
    c.num_hidden_layers = L;
    c.num_attention_heads = nh;
    c.num_key_value_heads = nkv;
    c.head_dim = hd;
    c.intermediate_size = I;
    c.vocab_size = V;
    c.layer_norm_eps = 1e-5;
    c.rotary_emb_base = 10000;
    c.max_position_embeddings = 4096;
    struct hm_error err;
    cr_assert_eq(hm_config_finish(&c, &err), HM_OK, "%s", err.msg);
    return c;
}

/* max |a − b| / max |b| */
static double rel_err(const float *a, const double *b, int64_t n)
{
    double mx = 0, mb = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - b[i]);
        mx = e > mx || isnan(e) ? e : mx;
        mb = fabs(b[i]) > mb ? fabs(b[i]) : mb;
    }
    return mx / (mb > 0 ? mb : 1);
}

static double rel_err_f(const float *a, const float *b, int64_t n)
{
    double *bd = malloc(sizeof(double) * (size_t)n);
    for (int64_t i = 0; i < n; i++)
        bd[i] = b[i];
    double e = rel_err(a, bd, n);
    free(bd);
    return e;
}

static int32_t *rand_tokens(int64_t T, int64_t V, uint64_t seed)
{
    int32_t *t = malloc(sizeof(int32_t) * (size_t)T);
    for (int64_t i = 0; i < T; i++)
        t[i] = (int32_t)(tu_rand_u64(&seed) % (uint64_t)V);
    return t;
}

/* hm's logits for tokens on every backend against the reference's (m is
 * placed on each backend in turn). */
static void check_logits(const char *what, struct hm_model *m, struct tu_ref_table *tab,
                         const int32_t *tok, int64_t T, double tol)
{
    const int64_t V = m->cfg.vocab_size;
    double *want = malloc(sizeof(double) * (size_t)(T * V));
    tu_ref_llama_logits(&m->cfg, tu_ref_table_get, tab, tok, T, want);
    float *got = malloc(sizeof(float) * (size_t)(T * V));
    for (int k = 0; k < 2; k++) {
        struct hm_model_ws ws;
        struct hm_error err;
        hm_model_ws_init(&ws);
        cr_assert_eq(hm_model_place(m, hm_backend_get(backends[k]), &err), HM_OK, "%s", err.msg);
        cr_assert_eq(hm_model_forward(m, hm_backend_get(backends[k]), tok, T, got, &ws, &err),
                     HM_OK, "%s", err.msg);
        double e = rel_err(got, want, T * V);
        fprintf(stderr, "%s (%s): max|d|/max|ref| = %.3g\n", what, backends[k], e);
        cr_expect(e <= tol, "%s (%s): %.3g > %.3g", what, backends[k], e, tol);
        hm_model_ws_release(&ws);
    }
    free(want);
    free(got);
}

struct fx_case {
    const char *name;
    int64_t d, L, nh, nkv, hd, I, V, T;
    int tied, attn_bias, mlp_bias, llama3, nshards;
    enum hm_dtype dtype;
    double theta;
};

static void run_case(const struct fx_case *f)
{
    struct hm_config c = llama_cfg(f->d, f->L, f->nh, f->nkv, f->hd, f->I, f->V);
    c.tie_word_embeddings = f->tied;
    c.attention_bias = f->attn_bias;
    c.mlp_bias = f->mlp_bias;
    if (f->theta > 0)
        c.rotary_emb_base = f->theta;
    if (f->llama3) {
        c.rope_scaling.type = HM_ROPE_LLAMA3;
        c.rope_scaling.factor = 8;
        c.rope_scaling.low_freq_factor = 1;
        c.rope_scaling.high_freq_factor = 4;
        c.rope_scaling.original_max_position_embeddings = 64;
    }
    struct hm_error err;
    cr_assert_eq(hm_config_finish(&c, &err), HM_OK, "%s", err.msg);
    char *dir = tu_mkdtemp(f->name);
    struct tu_llama_opts o = {.dtype = f->dtype, .nshards = f->nshards, .legacy_inv_freq = 1,
                              .seed = 17};
    struct tu_ref_table *tab = tu_make_llama(dir, &c, &o);
    struct hm_ckpt *ck = NULL;
    cr_assert_eq(hm_ckpt_open(dir, &ck, &err), HM_OK, "%s", err.msg);
    const struct hm_config *rc = hm_ckpt_config(ck);
    cr_assert_eq(rc->family, HM_FAMILY_LLAMA);
    cr_assert_eq(rc->num_key_value_heads, c.num_key_value_heads);
    cr_assert_eq(rc->head_dim, c.head_dim);
    cr_assert_eq(rc->tie_word_embeddings, f->tied);
    struct hm_model *m = NULL;
    cr_assert_eq(hm_model_load(ck, &m, &err), HM_OK, "%s", err.msg);
    if (f->tied)
        cr_assert_eq(m->embed_out, m->embed_in, "tied: one tensor");
    int32_t *tok = rand_tokens(f->T, f->V, 99);
    check_logits(f->name, m, tab, tok, f->T, 1e-4);
    free(tok);
    hm_model_free(m);
    hm_ckpt_close(ck);
    tu_ref_table_free(tab);
    free(dir);
}

Test(llama_forward, hf_folders_match_the_double_reference)
{
    const struct fx_case cases[] = {
        {"gqa_untied", 48, 2, 6, 2, 0, 80, 97, 23, 0, 0, 0, 0, 0, HM_DTYPE_F32, 0},
        {"gqa_untied_shards_f16", 32, 3, 4, 2, 0, 64, 61, 17, 0, 0, 0, 0, 3, HM_DTYPE_F16, 0},
        {"tied_bf16", 32, 2, 4, 4, 0, 48, 50, 19, 1, 0, 0, 0, 2, HM_DTYPE_BF16, 0},
        {"attention_and_mlp_bias", 40, 2, 4, 1, 0, 72, 64, 21, 0, 1, 1, 0, 0, HM_DTYPE_F32, 0},
        /* low frequencies matter only over long ranges: theta 500 and T 300 make
         * the scaled band visible (original context 64) */
        {"rope_llama3_long", 32, 2, 2, 1, 0, 48, 40, 300, 0, 0, 0, 1, 0, HM_DTYPE_F32, 500},
        {"head_dim_explicit", 40, 2, 4, 2, 16, 56, 53, 29, 0, 1, 0, 0, 0, HM_DTYPE_F32, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        run_case(&cases[i]);
}

Test(llama_forward, llama3_scaling_changes_the_logits)
{
    /* guard against a test that cannot fail: the scaled model differs */
    struct hm_config a = llama_cfg(32, 1, 2, 1, 0, 48, 40), b = a;
    a.rotary_emb_base = b.rotary_emb_base = 500;
    b.rope_scaling.type = HM_ROPE_LLAMA3;
    b.rope_scaling.factor = 8;
    b.rope_scaling.low_freq_factor = 1;
    b.rope_scaling.high_freq_factor = 4;
    b.rope_scaling.original_max_position_embeddings = 64;
    struct hm_error err;
    cr_assert_eq(hm_config_finish(&b, &err), HM_OK);
    float fa[8], fb[8];
    hm_model_inv_freq(&a, fa);
    hm_model_inv_freq(&b, fb);
    double want[8];
    tu_ref_llama_inv_freq(&b, want);
    int differ = 0;
    for (int j = 0; j < 8; j++) {
        differ += fa[j] != fb[j];
        cr_expect(fabs(fb[j] - want[j]) <= 2e-7 * want[j], "inv_freq[%d] %.9g vs %.9g", j, fb[j],
                  want[j]);
    }
    cr_assert(differ >= 2, "llama3 scaling changed only %d frequencies", differ);
}

/* ---- students and the decoding step --------------------------------------------- */

/* Random weights through the views; norms near 1, A < 0 for hedgemamba. */
static void fill_random(struct hm_model *m, uint64_t seed)
{
    for (int64_t i = 0; i < m->n_views; i++) {
        const struct hm_tensor_view *v = &m->views[i];
        const enum hm_param_group g = v->spec.group;
        for (int64_t k = 0; k < v->numel; k++) {
            double r = tu_rand_normal(&seed);
            float *x = v->data + k;
            if (g == HM_PG_NORM)
                *x = (float)(1.0 + 0.1 * r);
            else if (v->spec.slot == HM_SLOT_A)
                *x = (float)(-0.2 - 0.3 * fabs(r));
            else if (v->spec.slot == HM_SLOT_DT_B || v->spec.slot == HM_SLOT_GATE_B)
                *x += (float)(0.2 * r); /* around the identity values */
            else if (v->spec.slot == HM_SLOT_CONV_W)
                *x += (float)(0.3 * r);
            else
                *x = (float)(0.2 * r);
        }
    }
}

Test(llama_forward, gqa_students_match_the_double_reference)
{
    const enum hm_mixer mixers[] = {HM_MIXER_SOFTMAX, HM_MIXER_HEDGEHOG, HM_MIXER_HEDGEMAMBA};
    for (int k = 0; k < 3; k++) {
        struct hm_config c = llama_cfg(32, 2, 4, 2, 0, 40, 37);
        c.mixer = mixers[k];
        c.feature_dim = 6;
        c.attention_bias = k == 2;
        struct hm_error err;
        cr_assert_eq(hm_config_finish(&c, &err), HM_OK, "%s", err.msg);
        struct hm_model *m = NULL;
        cr_assert_eq(hm_model_new(&c, &m, &err), HM_OK, "%s", err.msg);
        fill_random(m, 5 + (uint64_t)k);
        struct tu_ref_table *tab = tu_ref_table_from_model(m);
        int32_t *tok = rand_tokens(19, c.vocab_size, 3);
        check_logits(hm_mixer_name(c.mixer), m, tab, tok, 19, 1e-4);
        free(tok);
        tu_ref_table_free(tab);
        hm_model_free(m);
    }
}

static void step_equals_forward(struct hm_config c, int64_t T, uint64_t seed)
{
    struct hm_error err;
    cr_assert_eq(hm_config_finish(&c, &err), HM_OK, "%s", err.msg);
    struct hm_model *m = NULL;
    cr_assert_eq(hm_model_new(&c, &m, &err), HM_OK, "%s", err.msg);
    fill_random(m, seed);
    const int64_t V = c.vocab_size;
    int32_t *tok = rand_tokens(T, V, seed + 1);
    float *full = malloc(sizeof(float) * (size_t)(T * V));
    float *step = malloc(sizeof(float) * (size_t)(T * V));
    const struct hm_backend *be = hm_backend_get("fast");
    cr_assert_eq(hm_model_place(m, be, &err), HM_OK, "%s", err.msg);
    struct hm_model_ws ws;
    hm_model_ws_init(&ws);
    cr_assert_eq(hm_model_forward(m, be, tok, T, full, &ws, &err), HM_OK, "%s", err.msg);
    struct hm_model_state *s = NULL;
    cr_assert_eq(hm_model_state_new(m, &s, &err), HM_OK, "%s", err.msg);
    for (int round = 0; round < 2; round++) { /* reset gives the same again */
        for (int64_t t = 0; t < T; t++)
            cr_assert_eq(hm_model_step(m, be, s, tok[t], step + t * V, &err), HM_OK, "%s",
                         err.msg);
        double *fd = malloc(sizeof(double) * (size_t)(T * V));
        for (int64_t i = 0; i < T * V; i++)
            fd[i] = full[i];
        double e = rel_err(step, fd, T * V);
        fprintf(stderr, "step vs forward %s/%s T=%lld: %.3g\n", hm_family_name(c.family),
                hm_mixer_name(c.mixer), (long long)T, e);
        cr_expect(e <= 1e-5, "%s/%s: step vs forward %.3g", hm_family_name(c.family),
                  hm_mixer_name(c.mixer), e);
        free(fd);
        hm_model_state_reset(s);
    }
    /* chunked prefill (chunks of 16: the state crosses several chunk
     * boundaries) hands its state to the step: prefill 37 tokens with every
     * row's logits, then step the rest; and a prefill of the whole sequence
     * asking only for the last row */
    double *fd = malloc(sizeof(double) * (size_t)(T * V));
    for (int64_t i = 0; i < T * V; i++)
        fd[i] = full[i];
    memset(step, 0, sizeof(float) * (size_t)(T * V));
    const int64_t P = 37;
    cr_assert_eq(hm_model_prefill(m, be, s, tok, P, 16, step, NULL, &err), HM_OK, "%s", err.msg);
    for (int64_t t = P; t < T; t++)
        cr_assert_eq(hm_model_step(m, be, s, tok[t], step + t * V, &err), HM_OK, "%s", err.msg);
    double e = rel_err(step, fd, T * V);
    fprintf(stderr, "prefill(16-chunks) + step vs forward %s/%s: %.3g\n",
            hm_family_name(c.family), hm_mixer_name(c.mixer), e);
    cr_expect(e <= 1e-5, "%s/%s: prefill + step vs forward %.3g", hm_family_name(c.family),
              hm_mixer_name(c.mixer), e);
    hm_model_state_reset(s);
    float *last = malloc(sizeof(float) * (size_t)V);
    cr_assert_eq(hm_model_prefill(m, be, s, tok, T, 0, NULL, last, &err), HM_OK, "%s", err.msg);
    e = rel_err(last, fd + (T - 1) * V, V);
    cr_expect(e <= 1e-5, "%s/%s: prefill last row %.3g", hm_family_name(c.family),
              hm_mixer_name(c.mixer), e);
    /* and the state it left continues like the step's */
    float *next = malloc(sizeof(float) * (size_t)V);
    cr_assert_eq(hm_model_step(m, be, s, tok[0], next, &err), HM_OK, "%s", err.msg);
    cr_assert(isfinite(next[0]));
    free(last), free(next), free(fd);
    hm_model_state_free(s);
    /* a batch step: three other sequences prefilled to different lengths
     * (one chunk of up to 100 rows, past the KV cache's first 64), then
     * stepped together, the batch shrinking as each reaches T; every row's
     * logits against that sequence's own full forward */
    enum { NB = 3 };
    const int64_t P0[NB] = {5, 100, 37};
    struct hm_model_state *bs[NB];
    int32_t *btok[NB];
    float *bfull[NB];
    for (int b = 0; b < NB; b++) {
        btok[b] = rand_tokens(T, V, seed + 40 + (uint64_t)b);
        bfull[b] = malloc(sizeof(float) * (size_t)(T * V));
        cr_assert_eq(hm_model_forward(m, be, btok[b], T, bfull[b], &ws, &err), HM_OK, "%s",
                     err.msg);
        cr_assert_eq(hm_model_state_new(m, &bs[b], &err), HM_OK, "%s", err.msg);
        const int64_t Pb = P0[b] < T ? P0[b] : T - 1;
        cr_assert_eq(hm_model_prefill(m, be, bs[b], btok[b], Pb, 0, step, NULL, &err), HM_OK,
                     "%s", err.msg);
        e = rel_err_f(step, bfull[b], Pb * V);
        cr_expect(e <= 1e-5, "%s/%s: one-chunk prefill of %lld rows %.3g",
                  hm_family_name(c.family), hm_mixer_name(c.mixer), (long long)Pb, e);
    }
    double worst = 0;
    for (;;) {
        struct hm_model_state *act[NB];
        int32_t tk[NB];
        int idx[NB], n = 0;
        for (int b = 0; b < NB; b++)
            if (hm_model_state_pos(bs[b]) < T) {
                idx[n] = b;
                tk[n] = btok[b][hm_model_state_pos(bs[b])];
                act[n++] = bs[b];
            }
        if (n == 0)
            break;
        int64_t at[NB];
        for (int i = 0; i < n; i++)
            at[i] = hm_model_state_pos(act[i]);
        cr_assert_eq(hm_model_step_batch(m, be, act, n, tk, step, &err), HM_OK, "%s", err.msg);
        for (int i = 0; i < n; i++) {
            double ei = rel_err_f(step + i * V, bfull[idx[i]] + at[i] * V, V);
            worst = ei > worst ? ei : worst;
        }
    }
    fprintf(stderr, "batch step vs forward %s/%s: %.3g\n", hm_family_name(c.family),
            hm_mixer_name(c.mixer), worst);
    cr_expect(worst <= 1e-5, "%s/%s: batch step vs forward %.3g", hm_family_name(c.family),
              hm_mixer_name(c.mixer), worst);
    struct hm_model_state *twice[2] = {bs[0], bs[0]};
    int32_t tk2[2] = {0, 0};
    cr_expect_neq(hm_model_step_batch(m, be, twice, 2, tk2, NULL, &err), HM_OK,
                  "one state twice in a batch is refused");
    for (int b = 0; b < NB; b++)
        hm_model_state_free(bs[b]), free(btok[b]), free(bfull[b]);
    hm_model_ws_release(&ws);
    free(tok), free(full), free(step);
    hm_model_free(m);
}

Test(llama_forward, step_equals_forward_for_every_family_and_mixer)
{
    const enum hm_mixer mixers[] = {HM_MIXER_SOFTMAX, HM_MIXER_HEDGEHOG, HM_MIXER_HEDGEMAMBA};
    for (int k = 0; k < 3; k++) {
        /* llama with GQA; 150 tokens: the KV cache grows past its first 64 */
        struct hm_config c = llama_cfg(32, 2, 4, 2, 0, 40, 37);
        c.mixer = mixers[k];
        c.feature_dim = 8;
        step_equals_forward(c, 150, 11 + (uint64_t)k);
        struct hm_config n;
        hm_config_defaults(&n);
        n.mixer = mixers[k];
        n.hidden_size = 32;
        n.num_hidden_layers = 2;
        n.num_attention_heads = 4;
        n.intermediate_size = 40;
        n.vocab_size = 37;
        n.feature_dim = 8;
        n.use_parallel_residual = k != 1;
        step_equals_forward(n, 70, 21 + (uint64_t)k);
    }
}

/* Everything decoding computes for m on backend `name` into out (the
 * caller compares backends): prefill of P rows in chunks of 16 with every
 * row's logits, steps to T (the KV cache grows past 64 rows), a prefill of
 * another state asking for its last row only, that state copied and both
 * stepped as one batch, and one step after a reset. */
static int64_t decode_all(struct hm_model *m, const char *name, const int32_t *tok, int64_t T,
                          float *out)
{
    const struct hm_backend *be = hm_backend_get(name);
    const int64_t V = m->cfg.vocab_size, P = 37;
    struct hm_error err;
    cr_assert_eq(hm_model_place(m, be, &err), HM_OK, "%s", err.msg);
    struct hm_model_state *s = NULL, *s2 = NULL, *s3 = NULL;
    cr_assert_eq(hm_model_state_new(m, &s, &err), HM_OK, "%s", err.msg);
    cr_assert_eq(hm_model_state_new(m, &s2, &err), HM_OK, "%s", err.msg);
    cr_assert_eq(hm_model_state_new(m, &s3, &err), HM_OK, "%s", err.msg);
    int64_t n = 0;
    cr_assert_eq(hm_model_prefill(m, be, s, tok, P, 16, out, NULL, &err), HM_OK, "%s", err.msg);
    n += P * V;
    for (int64_t t = P; t < T; t++, n += V)
        cr_assert_eq(hm_model_step(m, be, s, tok[t], out + n, &err), HM_OK, "%s", err.msg);
    cr_assert_eq(hm_model_prefill(m, be, s2, tok + 3, 70, 0, NULL, out + n, &err), HM_OK, "%s",
                 err.msg);
    n += V;
    cr_assert_eq(hm_model_state_copy(s3, s2, &m->cfg, &err), HM_OK, "%s", err.msg);
    struct hm_model_state *bs[3] = {s2, s3, s};
    const int32_t bt[3] = {tok[1], tok[2], tok[3]};
    for (int r = 0; r < 3; r++, n += 3 * V)
        cr_assert_eq(hm_model_step_batch(m, be, bs, 3, bt, out + n, &err), HM_OK, "%s",
                     err.msg);
    hm_model_state_reset(s);
    cr_assert_eq(hm_model_step(m, be, s, tok[5], out + n, &err), HM_OK, "%s", err.msg);
    n += V;
    /* a step on another backend than the state's is refused */
    const struct hm_backend *other = hm_backend_get(strcmp(name, "ref") ? "ref" : "fast");
    cr_expect_neq(hm_model_step(m, other, s, tok[0], NULL, &err), HM_OK,
                  "a step on another backend than the state's");
    hm_model_state_free(s), hm_model_state_free(s2), hm_model_state_free(s3);
    return n;
}

Test(llama_forward, decoding_on_checked_equals_ref_bit_for_bit)
{
    const enum hm_mixer mixers[] = {HM_MIXER_SOFTMAX, HM_MIXER_HEDGEHOG, HM_MIXER_HEDGEMAMBA};
    for (int fam = 0; fam < 2; fam++)
        for (int k = 0; k < 3; k++) {
            struct hm_config c;
            if (fam == 0) {
                c = llama_cfg(32, 2, 4, 2, 0, 40, 37);
            } else {
                hm_config_defaults(&c);
                c.hidden_size = 32;
                c.num_hidden_layers = 2;
                c.num_attention_heads = 4;
                c.intermediate_size = 40;
                c.vocab_size = 37;
                c.use_parallel_residual = k != 1;
            }
            c.mixer = mixers[k];
            c.feature_dim = 8;
            struct hm_error err;
            cr_assert_eq(hm_config_finish(&c, &err), HM_OK, "%s", err.msg);
            struct hm_model *m = NULL;
            cr_assert_eq(hm_model_new(&c, &m, &err), HM_OK, "%s", err.msg);
            fill_random(m, 31 + (uint64_t)k);
            struct hm_model_state *s = NULL;
            cr_expect_neq(hm_model_state_new(m, &s, &err), HM_OK,
                          "a state of an unplaced model is refused");
            const int64_t T = 100, V = c.vocab_size, cap = (T + 12) * V;
            int32_t *tok = rand_tokens(T, V, 7 + (uint64_t)k);
            float *a = calloc((size_t)cap, sizeof(float));
            float *b = calloc((size_t)cap, sizeof(float));
            const int64_t na = decode_all(m, "ref", tok, T, a);
            const int64_t nb = decode_all(m, "checked", tok, T, b);
            cr_assert_eq(na, nb);
            cr_assert(na <= cap);
            int64_t first = -1;
            for (int64_t i = 0; i < na && first < 0; i++)
                if (memcmp(&a[i], &b[i], sizeof(float)) != 0)
                    first = i;
            cr_expect_eq(first, -1, "%s/%s: checked differs from ref at float %lld (%g vs %g)",
                         hm_family_name(c.family), hm_mixer_name(c.mixer), (long long)first,
                         first >= 0 ? a[first] : 0.0, first >= 0 ? b[first] : 0.0);
            free(a), free(b), free(tok);
            hm_model_free(m);
        }
}
