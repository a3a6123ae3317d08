/* test_import_llama2c.c — hm-import llama2c (contract §1b): the real pretrained
 * stories260K checkpoint and synthetic ones (tied and untied, GQA and MHA)
 * convert with every tensor bit-identical to the raw file's floats and wq/wk
 * rows exactly HF's permutation (computed here independently); in double
 * precision, llama2.c's adjacent-pair RoPE on the raw weights and HF's
 * rotate_half on the converted ones give the same q·k; hostile files
 * (truncated, lying headers, bad dims, overflow, trailing bytes, NaN/Inf,
 * directories, FIFOs, v1 exports) are refused naming the file, leaving no
 * output. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint.h"
#include "hash.h"
#include "import_llama2c.h"
#include "provenance.h"
#include "testutil.h"

#define STORIES HM_SHARED_DATA "/llama2c_stories260K.bin"
#define IMPORT HM_BIN_DIR "/hm-import"

/* A llama2.c header; vocab < 0 means untied (wcls follows). */
struct dims {
    int32_t d, hidden, layers, heads, kv, vocab, seq;
};

/* Byte offsets of the raw arrays, derived here from the format description
 * (llama2.c run.c order), independently of the library's layout code. */
struct raw {
    const unsigned char *bytes;
    size_t len;
    struct dims k;
    int64_t V, p;
    size_t emb, rms_att, wq, wk, wv, wo, rms_ffn, w1, w2, w3, rms_final, wcls, end;
};

static void raw_layout(struct raw *r, const void *bytes, size_t len, struct dims k)
{
    r->bytes = bytes;
    r->len = len;
    r->k = k;
    r->V = k.vocab < 0 ? -(int64_t)k.vocab : k.vocab;
    r->p = k.d / k.heads;
    const size_t d = (size_t)k.d, L = (size_t)k.layers, I = (size_t)k.hidden;
    const size_t kvd = (size_t)(k.kv * r->p), V = (size_t)r->V;
    size_t o = 28;
    r->emb = o, o += 4 * V * d;
    r->rms_att = o, o += 4 * L * d;
    r->wq = o, o += 4 * L * d * d;
    r->wk = o, o += 4 * L * kvd * d;
    r->wv = o, o += 4 * L * kvd * d;
    r->wo = o, o += 4 * L * d * d;
    r->rms_ffn = o, o += 4 * L * d;
    r->w1 = o, o += 4 * L * I * d;
    r->w2 = o, o += 4 * L * d * I;
    r->w3 = o, o += 4 * L * I * d;
    r->rms_final = o, o += 4 * d;
    o += 4 * 2 * (size_t)k.seq * (size_t)(r->p / 2); /* freq_cis_real, freq_cis_imag */
    r->wcls = o;
    if (k.vocab < 0)
        o += 4 * V * d;
    r->end = o;
}

/* A synthetic llama2.c file with N(0, 0.5²) weights. owned: free(). */
static unsigned char *make_file(struct dims k, uint64_t seed, size_t *len)
{
    struct raw r;
    raw_layout(&r, NULL, 0, k);
    unsigned char *b = malloc(r.end);
    int32_t hdr[7] = {k.d, k.hidden, k.layers, k.heads, k.kv, k.vocab, k.seq};
    memcpy(b, hdr, sizeof hdr);
    for (size_t o = 28; o < r.end; o += 4) {
        float f = (float)(0.5 * tu_rand_normal(&seed));
        memcpy(b + o, &f, 4);
    }
    *len = r.end;
    return b;
}

static void set_f(unsigned char *b, size_t off, float f) { memcpy(b + off, &f, 4); }

static const struct dims STORIES_DIMS = {64, 172, 5, 8, 4, 512, 512};
static const struct dims GQA_UNTIED = {16, 24, 2, 4, 2, -11, 7};
static const struct dims MHA_TIED = {12, 20, 3, 2, 2, 9, 5};

static void skip_without_stories(void)
{
    if (access(STORIES, R_OK) != 0)
        cr_skip_test("shared data '%s' is absent", STORIES);
}

/* Import in through the library (cli = 0) or hm-import (cli = 1). */
static struct hm_ckpt *import(const char *in, const char *out, int cli)
{
    struct hm_error err;
    hm_error_clear(&err);
    if (cli) {
        char cmd[4096], *e = NULL;
        snprintf(cmd, sizeof cmd, "'%s' llama2c '%s' -o '%s' -q", IMPORT, in, out);
        int rc = tu_run(cmd, NULL, &e);
        cr_assert_eq(rc, 0, "%s: exit %d: %s", cmd, rc, e);
        cr_expect_str_empty(e, "-q still printed: %s", e);
        free(e);
    } else {
        struct hm_llama2c *m;
        cr_assert_eq(hm_llama2c_open(in, &m, &err), HM_OK, "%s: %s", in, err.msg);
        cr_assert_eq(hm_llama2c_write(m, out, 0, NULL, &err), HM_OK, "%s", err.msg);
        hm_llama2c_close(m);
    }
    struct hm_ckpt *ck;
    cr_assert_eq(hm_ckpt_open(out, &ck, &err), HM_OK, "%s: %s", out, err.msg);
    return ck;
}

static const unsigned char *view(const struct hm_ckpt *ck, const char *name, int64_t rows,
                                 int64_t cols)
{
    int64_t i = hm_ckpt_find(ck, name);
    cr_assert_geq(i, 0, "tensor '%s' is missing", name);
    const struct hm_ckpt_tensor *t = hm_ckpt_tensor_at(ck, i);
    cr_assert_eq(t->dtype, HM_DTYPE_F32, "%s: not F32", name);
    cr_assert_eq(t->ndim, cols ? 2 : 1, "%s: ndim %d", name, t->ndim);
    cr_assert_eq(t->shape[0], rows, "%s: shape[0] %lld, want %lld", name,
                 (long long)t->shape[0], (long long)rows);
    if (cols)
        cr_assert_eq(t->shape[1], cols, "%s: shape[1] %lld, want %lld", name,
                     (long long)t->shape[1], (long long)cols);
    return hm_ckpt_data_view(ck, i);
}

/* Tensor `name` holds the raw bytes at off unchanged. */
static void expect_same(const struct hm_ckpt *ck, const char *name, int64_t rows, int64_t cols,
                        const struct raw *r, size_t off)
{
    const unsigned char *v = view(ck, name, rows, cols);
    size_t n = 4 * (size_t)rows * (size_t)(cols ? cols : 1);
    cr_expect(memcmp(v, r->bytes + off, n) == 0, "%s differs from the raw floats", name);
}

/* HF permutation, computed backwards from the destination: row r < p/2 of a
 * head holds raw row 2r (the first of each adjacent pair), row r >= p/2 holds
 * raw row 2(r - p/2) + 1 (the second). */
static int64_t hf_row_source(int64_t r, int64_t p)
{
    return r < p / 2 ? 2 * r : 2 * (r - p / 2) + 1;
}

static void expect_permuted(const struct hm_ckpt *ck, const char *name, int64_t heads,
                            int64_t p, int64_t cols, const struct raw *r, size_t off)
{
    const unsigned char *v = view(ck, name, heads * p, cols);
    const size_t row = 4 * (size_t)cols;
    for (int64_t h = 0; h < heads; h++)
        for (int64_t rr = 0; rr < p; rr++) {
            int64_t src = h * p + hf_row_source(rr, p), dst = h * p + rr;
            cr_expect(memcmp(v + (size_t)dst * row, r->bytes + off + (size_t)src * row, row) == 0,
                      "%s: row %lld is not raw row %lld", name, (long long)dst, (long long)src);
        }
}

/* Every tensor, name and shape, bit for bit; nothing else in the file. */
static void check_tensors(const struct hm_ckpt *ck, const struct raw *r)
{
    const struct dims k = r->k;
    const int64_t d = k.d, I = k.hidden, p = r->p, V = r->V;
    const size_t qsz = 4 * (size_t)(d * d), kvsz = 4 * (size_t)(k.kv * p * d);
    const size_t isz = 4 * (size_t)(I * d);
    char nm[128];
    expect_same(ck, "model.embed_tokens.weight", V, d, r, r->emb);
    for (int64_t l = 0; l < k.layers; l++) {
        const size_t ll = (size_t)l;
#define N(s) (snprintf(nm, sizeof nm, "model.layers.%lld.%s", (long long)l, s), nm)
        expect_same(ck, N("input_layernorm.weight"), d, 0, r, r->rms_att + ll * 4 * (size_t)d);
        expect_permuted(ck, N("self_attn.q_proj.weight"), k.heads, p, d, r, r->wq + ll * qsz);
        expect_permuted(ck, N("self_attn.k_proj.weight"), k.kv, p, d, r, r->wk + ll * kvsz);
        expect_same(ck, N("self_attn.v_proj.weight"), k.kv * p, d, r, r->wv + ll * kvsz);
        expect_same(ck, N("self_attn.o_proj.weight"), d, k.heads * p, r, r->wo + ll * qsz);
        expect_same(ck, N("post_attention_layernorm.weight"), d, 0, r,
                    r->rms_ffn + ll * 4 * (size_t)d);
        expect_same(ck, N("mlp.gate_proj.weight"), I, d, r, r->w1 + ll * isz);
        expect_same(ck, N("mlp.up_proj.weight"), I, d, r, r->w3 + ll * isz);
        expect_same(ck, N("mlp.down_proj.weight"), d, I, r, r->w2 + ll * isz);
#undef N
    }
    expect_same(ck, "model.norm.weight", d, 0, r, r->rms_final);
    int untied = k.vocab < 0;
    if (untied)
        expect_same(ck, "lm_head.weight", V, d, r, r->wcls);
    else
        cr_expect_eq(hm_ckpt_find(ck, "lm_head.weight"), -1, "tied model has an lm_head");
    cr_expect_eq(hm_ckpt_n_tensors(ck), 1 + 9 * k.layers + 1 + untied, "tensor count %lld",
                 (long long)hm_ckpt_n_tensors(ck));
}

static void check_config(const struct hm_ckpt *ck, struct dims k)
{
    const struct hm_config *c = hm_ckpt_config(ck);
    cr_expect_str_eq(hm_ckpt_config_source(ck), "hm.config");
    cr_expect_eq(c->family, HM_FAMILY_LLAMA);
    cr_expect_eq(c->mixer, HM_MIXER_SOFTMAX);
    cr_expect_str_eq(hm_arch_name(c), "llama");
    cr_expect_eq(c->vocab_size, k.vocab < 0 ? -k.vocab : k.vocab);
    cr_expect_eq(c->hidden_size, k.d);
    cr_expect_eq(c->intermediate_size, k.hidden);
    cr_expect_eq(c->num_hidden_layers, k.layers);
    cr_expect_eq(c->num_attention_heads, k.heads);
    cr_expect_eq(c->num_key_value_heads, k.kv);
    cr_expect_eq(c->head_dim, k.d / k.heads);
    cr_expect_eq(c->max_position_embeddings, k.seq);
    cr_expect_eq(c->layer_norm_eps, 1e-5, "rms_norm_eps %.17g", c->layer_norm_eps);
    cr_expect_eq(c->rotary_emb_base, 10000.0, "rope_theta %.17g", c->rotary_emb_base);
    cr_expect_eq(c->rotary_dims, k.d / k.heads);
    cr_expect_eq(c->tie_word_embeddings, k.vocab > 0);
    cr_expect_eq(c->attention_bias, 0);
    cr_expect_eq(c->mlp_bias, 0);
    cr_expect_eq(c->hidden_act, HM_ACT_SILU);
    cr_expect_eq(c->rope_scaling.type, HM_ROPE_NONE);
    const char *cj = hm_ckpt_metadata_get(ck, "hm.config");
    cr_assert(cj);
    cr_expect(strstr(cj, "\"model_type\":\"llama\"") || strstr(cj, "\"model_type\": \"llama\""),
              "hm.config: %s", cj);
}

/* ---- RoPE semantics, in double ------------------------------------------ */

/* llama2.c: pairs (2i, 2i+1) rotated by pos · 10000^(-2i/p). */
static void rot_llama2c(double *v, int64_t p, int64_t pos)
{
    for (int64_t i = 0; i < p / 2; i++) {
        double th = (double)pos * pow(10000.0, -2.0 * (double)i / (double)p);
        double a = v[2 * i], b = v[2 * i + 1], c = cos(th), s = sin(th);
        v[2 * i] = a * c - b * s;
        v[2 * i + 1] = a * s + b * c;
    }
}

/* HF rotate_half: x·cos + rotate_half(x)·sin, cos/sin = cat(freqs, freqs),
 * inv_freq[j] = 1 / 10000^(2j/p). */
static void rot_hf(double *v, int64_t p, int64_t pos)
{
    const int64_t h = p / 2;
    double *o = malloc((size_t)p * sizeof *o);
    for (int64_t j = 0; j < p; j++) {
        double th = (double)pos / pow(10000.0, 2.0 * (double)(j % h) / (double)p);
        double rh = j < h ? -v[j + h] : v[j - h];
        o[j] = v[j] * cos(th) + rh * sin(th);
    }
    memcpy(v, o, (size_t)p * sizeof *o);
    free(o);
}

/* y[rows] = W x for W: [rows, cols] fp32 at w (unaligned bytes). */
static void matvec(double *y, const unsigned char *w, int64_t rows, int64_t cols,
                   const double *x)
{
    for (int64_t r = 0; r < rows; r++) {
        double s = 0;
        for (int64_t c = 0; c < cols; c++) {
            float f;
            memcpy(&f, w + 4 * (size_t)(r * cols + c), 4);
            s += (double)f * x[c];
        }
        y[r] = s;
    }
}

/* For layer l: q·k per (query head, its kv head) at several position pairs,
 * llama2.c convention on the raw file vs HF convention on the checkpoint. */
static void check_rope_layer(const struct hm_ckpt *ck, const struct raw *r, int64_t l,
                             uint64_t seed)
{
    const struct dims k = r->k;
    const int64_t d = k.d, p = r->p, qd = k.heads * p, kvd = k.kv * p;
    char nq[96], nk[96];
    snprintf(nq, sizeof nq, "model.layers.%lld.self_attn.q_proj.weight", (long long)l);
    snprintf(nk, sizeof nk, "model.layers.%lld.self_attn.k_proj.weight", (long long)l);
    const unsigned char *wq = view(ck, nq, qd, d), *wk = view(ck, nk, kvd, d);
    const unsigned char *rq = r->bytes + r->wq + (size_t)l * 4 * (size_t)(qd * d);
    const unsigned char *rk = r->bytes + r->wk + (size_t)l * 4 * (size_t)(kvd * d);
    double *x = malloc((size_t)d * sizeof *x), *y = malloc((size_t)d * sizeof *y);
    double *q0 = malloc((size_t)qd * sizeof *q0), *q1 = malloc((size_t)qd * sizeof *q1);
    double *k0 = malloc((size_t)kvd * sizeof *k0), *k1 = malloc((size_t)kvd * sizeof *k1);
    static const int64_t pos[][2] = {{0, 0}, {1, 0}, {3, 3}, {7, 2}, {37, 11}, {200, 199},
                                     {511, 0}, {511, 480}};
    double worst = 0;
    for (int trial = 0; trial < 3; trial++) {
        for (int64_t i = 0; i < d; i++)
            x[i] = tu_rand_normal(&seed), y[i] = tu_rand_normal(&seed);
        for (size_t pi = 0; pi < sizeof pos / sizeof pos[0]; pi++) {
            const int64_t mq = pos[pi][0], nkp = pos[pi][1];
            matvec(q0, rq, qd, d, x);
            matvec(q1, wq, qd, d, x);
            matvec(k0, rk, kvd, d, y);
            matvec(k1, wk, kvd, d, y);
            for (int64_t h = 0; h < k.heads; h++)
                rot_llama2c(q0 + h * p, p, mq), rot_hf(q1 + h * p, p, mq);
            for (int64_t g = 0; g < k.kv; g++)
                rot_llama2c(k0 + g * p, p, nkp), rot_hf(k1 + g * p, p, nkp);
            for (int64_t h = 0; h < k.heads; h++) {
                const int64_t g = h / (k.heads / k.kv);
                const double *a0 = q0 + h * p, *a1 = q1 + h * p;
                const double *b0 = k0 + g * p, *b1 = k1 + g * p;
                double dot0 = 0, dot1 = 0, na = 0, nb = 0;
                for (int64_t j = 0; j < p; j++) {
                    dot0 += a0[j] * b0[j];
                    dot1 += a1[j] * b1[j];
                    na += a0[j] * a0[j];
                    nb += b0[j] * b0[j];
                    /* rotated vectors are the same numbers, permuted */
                    double u = a1[j], w = a0[hf_row_source(j, p)];
                    cr_assert(fabs(u - w) <= 1e-12 * (1 + fabs(w)),
                              "layer %lld head %lld pos %lld: rotated q[%lld] %.17g vs "
                              "llama2.c %.17g", (long long)l, (long long)h, (long long)mq,
                              (long long)j, u, w);
                }
                double scale = fmax(fabs(dot0), sqrt(na * nb));
                double rel = fabs(dot0 - dot1) / (scale > 0 ? scale : 1);
                worst = fmax(worst, rel);
                cr_assert(rel <= 1e-9,
                          "layer %lld head %lld (kv %lld) pos %lld/%lld: q.k %.17g (llama2.c) "
                          "vs %.17g (hf), rel %.3g", (long long)l, (long long)h, (long long)g,
                          (long long)mq, (long long)nkp, dot0, dot1, rel);
            }
        }
    }
    /* observed: ~1e-16 (only summation order differs) */
    cr_log_info("layer %lld: worst q.k relative difference %.3g", (long long)l, worst);
    free(x), free(y), free(q0), free(q1), free(k0), free(k1);
}

/* ---- the real pretrained checkpoint -------------------------------------- */

TestSuite(import_llama2c, .timeout = 300);

Test(import_llama2c, stories260k_header)
{
    skip_without_stories();
    struct hm_llama2c *m;
    struct hm_error err;
    cr_assert_eq(hm_llama2c_open(STORIES, &m, &err), HM_OK, "%s", err.msg);
    const struct hm_llama2c_header *h = hm_llama2c_get_header(m);
    cr_expect_eq(h->dim, 64);
    cr_expect_eq(h->hidden_dim, 172);
    cr_expect_eq(h->n_layers, 5);
    cr_expect_eq(h->n_heads, 8);
    cr_expect_eq(h->n_kv_heads, 4);
    cr_expect_eq(h->vocab_size, 512);
    cr_expect_eq(h->shared_classifier, 1);
    cr_expect_eq(h->seq_len, 512);
    cr_expect_eq(h->head_size, 8);
    cr_expect_eq(h->file_bytes, 1056540u);
    cr_expect_eq(hm_llama2c_n_tensors(m), 47);
    /* 512·64 + 5·(2·64 + 64·64·2 + 32·64·2 + 3·172·64) + 64 */
    cr_expect_eq(hm_llama2c_n_params(m), 260032, "%lld", (long long)hm_llama2c_n_params(m));
    cr_expect_eq(hm_llama2c_check_finite(m, &err), HM_OK, "%s", err.msg);
    hm_llama2c_close(m);
}

Test(import_llama2c, stories260k_cli)
{
    skip_without_stories();
    char *dir = tu_mkdtemp("import"), *out = tu_path(dir, "stories.safetensors");
    size_t len;
    unsigned char *bytes = (unsigned char *)tu_read_file(STORIES, &len);
    struct raw r;
    raw_layout(&r, bytes, len, STORIES_DIMS);
    cr_assert_eq(r.end, len, "the shared file is not the documented one");
    struct hm_ckpt *ck = import(STORIES, out, 1);
    check_config(ck, STORIES_DIMS);
    check_tensors(ck, &r);
    /* provenance: one hm-import entry with the input's xxh3 */
    const char *prov = hm_ckpt_metadata_get(ck, "hm.provenance");
    cr_assert(prov, "no hm.provenance");
    cr_expect_eq(hm_provenance_count(prov), 1, "%s", prov);
    uint64_t x;
    char hex[17];
    cr_assert_eq(hm_xxh3_file(STORIES, &x, NULL), HM_OK);
    hm_xxh3_hex(x, hex);
    cr_expect(strstr(prov, "\"hm-import\"") && strstr(prov, hex), "provenance: %s", prov);
    hm_ckpt_close(ck);
    free(bytes), free(out), free(dir);
}

Test(import_llama2c, stories260k_rope_semantics)
{
    skip_without_stories();
    char *dir = tu_mkdtemp("import"), *out = tu_path(dir, "s.safetensors");
    size_t len;
    unsigned char *bytes = (unsigned char *)tu_read_file(STORIES, &len);
    struct raw r;
    raw_layout(&r, bytes, len, STORIES_DIMS);
    struct hm_ckpt *ck = import(STORIES, out, 0);
    for (int64_t l = 0; l < STORIES_DIMS.layers; l++)
        check_rope_layer(ck, &r, l, 1000 + (uint64_t)l);
    hm_ckpt_close(ck);
    free(bytes), free(out), free(dir);
}

/* ---- synthetic checkpoints ----------------------------------------------- */

static void synthetic(struct dims k, uint64_t seed, int cli)
{
    char *dir = tu_mkdtemp("import"), *in = tu_path(dir, "m.bin");
    char *out = tu_path(dir, "m.safetensors");
    size_t len;
    unsigned char *bytes = make_file(k, seed, &len);
    tu_write_file(in, bytes, len);
    struct raw r;
    raw_layout(&r, bytes, len, k);
    struct hm_ckpt *ck = import(in, out, cli);
    check_config(ck, k);
    check_tensors(ck, &r);
    for (int64_t l = 0; l < k.layers; l++)
        check_rope_layer(ck, &r, l, seed + (uint64_t)l);
    hm_ckpt_close(ck);
    /* the memory constructor converts the same way */
    struct hm_llama2c *m;
    struct hm_error err;
    cr_assert_eq(hm_llama2c_open_memory(bytes, len, &m, &err), HM_OK, "%s", err.msg);
    cr_assert_eq(hm_llama2c_n_tensors(m), 1 + 9 * k.layers + 1 + (k.vocab < 0));
    const struct hm_llama2c_tensor *t = hm_llama2c_tensor_at(m, 2); /* layer 0 q_proj */
    cr_assert_str_eq(t->name, "model.layers.0.self_attn.q_proj.weight");
    float *q = malloc((size_t)t->numel * sizeof *q);
    cr_assert_eq(hm_llama2c_read_tensor(m, 2, q, &err), HM_OK, "%s", err.msg);
    for (int64_t row = 0; row < t->shape[0]; row++) {
        int64_t src = (row / r.p) * r.p + hf_row_source(row % r.p, r.p);
        for (int64_t c = 0; c < k.d; c++)
            cr_assert_eq(memcmp(&q[row * k.d + c], r.bytes + r.wq + 4 * (size_t)(src * k.d + c),
                                4), 0);
    }
    free(q);
    hm_llama2c_close(m);
    free(bytes), free(in), free(out), free(dir);
}

Test(import_llama2c, synthetic_gqa_untied) { synthetic(GQA_UNTIED, 7, 0); }
Test(import_llama2c, synthetic_mha_tied_cli) { synthetic(MHA_TIED, 8, 1); }

/* freq_cis is ignored: non-finite values there do not matter. */
Test(import_llama2c, freq_cis_ignored)
{
    char *dir = tu_mkdtemp("import"), *in = tu_path(dir, "m.bin"), *out = tu_path(dir, "o.st");
    size_t len;
    unsigned char *b = make_file(GQA_UNTIED, 3, &len);
    struct raw r;
    raw_layout(&r, b, len, GQA_UNTIED);
    set_f(b, r.rms_final + 4 * (size_t)GQA_UNTIED.d + 4, NAN);
    tu_write_file(in, b, len);
    hm_ckpt_close(import(in, out, 0));
    free(b), free(in), free(out), free(dir);
}

/* ---- hostile input -------------------------------------------------------- */

struct bad {
    const char *name;
    unsigned char *bytes;
    size_t len;
    const char *want; /* in the library message */
};

static unsigned char *dup_bytes(const unsigned char *b, size_t len, size_t cap)
{
    unsigned char *c = calloc(1, cap > len ? cap : len);
    memcpy(c, b, len);
    return c;
}

static void set_hdr(unsigned char *b, int field, int32_t v) { memcpy(b + 4 * field, &v, 4); }

/* Each hostile case through the library and hm-import: an error naming the
 * cause, exit 1 naming the file, no output and no temp file left. */
static void check_bad(const struct bad *c, const char *dir)
{
    char *in = tu_path(dir, c->name), *out = tu_path(dir, "out.safetensors");
    tu_write_file(in, c->bytes, c->len);
    struct hm_error err;
    hm_error_clear(&err);
    struct hm_llama2c *m = NULL;
    enum hm_status st = hm_llama2c_open(in, &m, &err);
    if (st == HM_OK) {
        st = hm_llama2c_write(m, out, 0, NULL, &err);
        hm_llama2c_close(m);
    }
    cr_expect_neq(st, HM_OK, "%s: accepted", c->name);
    cr_expect(strstr(err.msg, c->want), "%s: message '%s' lacks '%s'", c->name, err.msg,
              c->want);
    char cmd[4096], *e = NULL, *o = NULL;
    snprintf(cmd, sizeof cmd, "'%s' llama2c '%s' -o '%s'", IMPORT, in, out);
    int rc = tu_run(cmd, &o, &e);
    cr_expect_eq(rc, 1, "%s: exit %d (%s)", c->name, rc, e);
    char quoted[4200];
    snprintf(quoted, sizeof quoted, "'%s'", in);
    cr_expect(strncmp(e, "hm-import: error: ", 18) == 0 && strstr(e, quoted) &&
                  strstr(e, c->want),
              "%s: stderr '%s'", c->name, e);
    cr_expect_str_empty(o, "%s: stdout '%s'", c->name, o);
    cr_expect_neq(access(out, F_OK), 0, "%s: output left behind", c->name);
    snprintf(cmd, sizeof cmd, "ls -A '%s' | grep -c tmp", dir);
    free(o);
    tu_run(cmd, &o, NULL);
    cr_expect_eq(atoi(o), 0, "%s: temp file left in %s", c->name, dir);
    unlink(in);
    free(o), free(e), free(in), free(out);
}

Test(import_llama2c, hostile_files)
{
    char *dir = tu_mkdtemp("import-bad");
    size_t len;
    const struct dims k = GQA_UNTIED;
    unsigned char *ok = make_file(k, 11, &len);
    struct raw r;
    raw_layout(&r, ok, len, k);
    struct bad c[32];
    int n = 0;
#define CASE(nm, b, l, w) (c[n++] = (struct bad){nm, b, l, w})
    CASE("empty.bin", dup_bytes(ok, 0, 1), 0, "shorter than the 28-byte llama2.c header");
    CASE("short.bin", dup_bytes(ok, 10, 10), 10, "file is 10 bytes, shorter than the 28-byte");
    CASE("truncated.bin", dup_bytes(ok, len - 4, len), len - 4, "4 bytes missing (truncated)");
    CASE("trailing.bin", dup_bytes(ok, len, len + 8), len + 8, "8 trailing bytes");
    unsigned char *b;
    b = dup_bytes(ok, len, len), set_hdr(b, 0, 32);
    CASE("lying-dim.bin", b, len, "implies");
    b = dup_bytes(ok, len, len), set_hdr(b, 2, 3);
    CASE("lying-layers.bin", b, len, "implies");
    b = dup_bytes(ok, len, len), set_hdr(b, 5, 11);
    CASE("lying-tied.bin", b, len, "trailing bytes"); /* wcls becomes trailing */
    b = dup_bytes(ok, len, len), set_hdr(b, 3, 0);
    CASE("zero-heads.bin", b, len, "header field 'n_heads' is 0; it must be positive");
    b = dup_bytes(ok, len, len), set_hdr(b, 1, -5);
    CASE("negative-hidden.bin", b, len, "'hidden_dim' is -5");
    b = dup_bytes(ok, len, len), set_hdr(b, 5, 0);
    CASE("zero-vocab.bin", b, len, "'vocab_size' is 0; it must be non-zero");
    b = dup_bytes(ok, len, len), set_hdr(b, 6, -1);
    CASE("negative-seq.bin", b, len, "'seq_len' is -1");
    b = dup_bytes(ok, len, len), set_hdr(b, 3, 3);
    CASE("indivisible.bin", b, len, "dim 16 is not a multiple of n_heads 3");
    b = dup_bytes(ok, len, len), set_hdr(b, 4, 3);
    CASE("kv-not-divisor.bin", b, len, "n_heads 4 is not a multiple of n_kv_heads 3");
    b = dup_bytes(ok, len, len), set_hdr(b, 4, 8);
    CASE("kv-too-many.bin", b, len, "n_heads 4 is not a multiple of n_kv_heads 8");
    b = dup_bytes(ok, len, len), set_hdr(b, 0, 12), set_hdr(b, 3, 4), set_hdr(b, 4, 4);
    CASE("odd-head.bin", b, len, "head size 3");
    b = dup_bytes(ok, len, len), set_hdr(b, 0, 1 << 30), set_hdr(b, 1, 1 << 30);
    set_hdr(b, 2, 1 << 30), set_hdr(b, 3, 1 << 10), set_hdr(b, 4, 1 << 10);
    CASE("overflow.bin", b, len, "header sizes overflow");
    b = dup_bytes(ok, len, len), set_hdr(b, 0, 1 << 30), set_hdr(b, 3, 2), set_hdr(b, 4, 1);
    set_hdr(b, 5, INT32_MIN), set_hdr(b, 1, INT32_MAX), set_hdr(b, 6, INT32_MAX);
    CASE("huge.bin", b, len, "header sizes overflow");
    b = dup_bytes(ok, len, len), set_hdr(b, 0, 1 << 20), set_hdr(b, 3, 1 << 10);
    set_hdr(b, 4, 1 << 10), set_hdr(b, 1, 1 << 20);
    CASE("big-but-finite.bin", b, len, "implies"); /* ~2^44 bytes expected */
    b = dup_bytes(ok, len, len), memcpy(b, "24ka", 4), set_hdr(b, 1, 2);
    CASE("version2.bin", b, len, "llama2.c version 2 export");
    b = dup_bytes(ok, len, len), set_f(b, r.wq + 4 * (size_t)(k.d * k.d) + 20, NAN);
    CASE("nan-wq.bin", b, len, "tensor 'model.layers.1.self_attn.q_proj.weight' (llama2.c 'wq' "
                               "layer 1) holds NaN at element 5");
    b = dup_bytes(ok, len, len), set_f(b, r.emb + 4 * 3, INFINITY);
    CASE("inf-emb.bin", b, len, "'model.embed_tokens.weight' (llama2.c 'token_embedding') holds "
                                "+Inf at element 3");
    b = dup_bytes(ok, len, len), set_f(b, r.wcls + 8, -INFINITY);
    CASE("inf-wcls.bin", b, len, "'lm_head.weight' (llama2.c 'wcls') holds -Inf");
    b = dup_bytes(ok, len, len), set_f(b, r.w2 + 4, NAN);
    CASE("nan-w2.bin", b, len, "'model.layers.0.mlp.down_proj.weight' (llama2.c 'w2' layer 0)");
#undef CASE
    for (int i = 0; i < n; i++) {
        check_bad(&c[i], dir);
        free(c[i].bytes);
    }
    free(ok);
    rmdir(dir);
    free(dir);
}

Test(import_llama2c, not_regular_files)
{
    char *dir = tu_mkdtemp("import-nonreg"), *fifo = tu_path(dir, "fifo.bin");
    char *out = tu_path(dir, "o.st");
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    struct hm_error err;
    struct hm_llama2c *m;
    cr_expect_neq(hm_llama2c_open(dir, &m, &err), HM_OK);
    cr_expect(strstr(err.msg, "is a directory"), "%s", err.msg);
    cr_expect_neq(hm_llama2c_open(fifo, &m, &err), HM_OK); /* must not block */
    cr_expect(strstr(err.msg, "not a regular file"), "%s", err.msg);
    const char *ins[] = {dir, fifo, "/nonexistent/stories.bin"};
    const char *want[] = {"is a directory", "not a regular file", "No such file"};
    for (int i = 0; i < 3; i++) {
        char cmd[4096], *e = NULL;
        snprintf(cmd, sizeof cmd, "'%s' llama2c '%s' -o '%s'", IMPORT, ins[i], out);
        int rc = tu_run(cmd, NULL, &e);
        cr_expect_eq(rc, 1, "%s: exit %d", ins[i], rc);
        char q[4200];
        snprintf(q, sizeof q, "cannot read '%s'", ins[i]);
        cr_expect(strstr(e, q) && strstr(e, want[i]), "%s: %s", ins[i], e);
        free(e);
    }
    cr_expect_neq(access(out, F_OK), 0);
    unlink(fifo);
    rmdir(dir);
    free(fifo), free(out), free(dir);
}

/* Overwrite rules: no -f refuses and keeps the file, -f replaces, -o = input
 * is refused even with -f. */
Test(import_llama2c, output_rules)
{
    char *dir = tu_mkdtemp("import-out"), *in = tu_path(dir, "m.bin");
    char *out = tu_path(dir, "o.st");
    size_t len;
    unsigned char *b = make_file(MHA_TIED, 5, &len);
    tu_write_file(in, b, len);
    tu_write_file(out, "keep", 4);
    char cmd[4096], *e = NULL;
    snprintf(cmd, sizeof cmd, "'%s' llama2c '%s' -o '%s'", IMPORT, in, out);
    cr_expect_eq(tu_run(cmd, NULL, &e), 1);
    cr_expect(strstr(e, "exists") && strstr(e, "o.st'"), "%s", e);
    free(e);
    size_t n;
    char *kept = tu_read_file(out, &n);
    cr_expect(n == 4 && memcmp(kept, "keep", 4) == 0, "output changed without -f");
    free(kept);
    snprintf(cmd, sizeof cmd, "'%s' llama2c '%s' -o '%s' -f -q", IMPORT, in, out);
    cr_expect_eq(tu_run(cmd, NULL, &e), 0, "%s", e);
    free(e);
    snprintf(cmd, sizeof cmd, "'%s' llama2c '%s' -o '%s' -f", IMPORT, in, in);
    cr_expect_eq(tu_run(cmd, NULL, &e), 1);
    cr_expect(strstr(e, "is the input"), "%s", e);
    free(e);
    char *again = tu_read_file(in, &n);
    cr_expect(n == len && memcmp(again, b, len) == 0, "the input was modified");
    free(again);
    unlink(in), unlink(out), rmdir(dir);
    free(b), free(in), free(out), free(dir);
}
