/* test_generate.c — contract §8: the sampler (libconvert/decode/sample.c) against an
 * independent double computation and by its frequencies; hm-generate
 * against greedy loops written here with the model API (hm_model_step only,
 * never the prefill the tool uses) for both families and all three mixers;
 * the pretrained stories260K teacher reproducing llama2.c's documented
 * greedy sample through the CLI; sampling reproducibility, top-k 1 and a
 * tiny top-p equal to greedy, stop strings, refusals, the --ids / --json /
 * --bench outputs. */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "batches.h"
#include "checkpoint.h"
#include "gen_text.h"
#include "model.h"
#include "model_views.h"
#include "recurrent.h"
#include "sample.h"
#include "testutil.h"

#define GEN HM_BIN_DIR "/hm-generate"
#define STORIES HM_SHARED_DATA "/llama2c_stories260K.bin"
#define TOK512 HM_SHARED_DATA "/llama2c_tok512.bin"

/* ---- the sampler ------------------------------------------------------------ */

/* The distribution of sample.h steps 2–6 computed independently: a full
 * sort, normalized probabilities, cumulative mass compared with P. */
struct ent {
    float l;
    int id;
};

static int cmp_ent(const void *x, const void *y)
{
    const struct ent *a = x, *b = y;
    if (a->l != b->l)
        return a->l > b->l ? -1 : 1;
    return a->id - b->id;
}

/* probs: [V]; *margin: how far the top-p boundary's cumulative mass lies
 * from P (a tiny margin would let rounding pick another set). */
static void ref_probs(const float *l, int V, double T, int K, double P, double *probs,
                      double *margin)
{
    struct ent *e = malloc(sizeof *e * (size_t)V);
    for (int i = 0; i < V; i++)
        e[i] = (struct ent){l[i], i};
    qsort(e, (size_t)V, sizeof *e, cmp_ent);
    int n = K > 0 && K < V ? K : V;
    double z = 0, mx = (double)e[0].l / T;
    for (int j = 0; j < n; j++)
        z += exp((double)e[j].l / T - mx);
    *margin = 1;
    if (P < 1) {
        double c = 0;
        int j = 0;
        for (; j < n; j++) {
            double q = exp((double)e[j].l / T - mx) / z;
            if (c + q >= P) {
                *margin = fmin(c + q - P, P - c);
                break;
            }
            c += q;
        }
        n = j + 1 < n ? j + 1 : n;
    }
    double w = 0;
    for (int j = 0; j < n; j++)
        w += exp((double)e[j].l / T - mx);
    memset(probs, 0, sizeof(double) * (size_t)V);
    for (int j = 0; j < n; j++)
        probs[e[j].id] = exp((double)e[j].l / T - mx) / w;
    free(e);
}

static void fixed_logits(float *l, int V, uint64_t seed)
{
    for (int i = 0; i < V; i++)
        l[i] = (float)(2.0 * tu_rand_normal(&seed));
    l[3] = l[7];       /* a tie */
    l[11] = -INFINITY; /* a masked token */
}

Test(sample, splitmix64_matches_the_reference_generator)
{
    /* Vigna's splitmix64.c seeded with 0: the first outputs */
    uint64_t s = 0;
    cr_expect_eq(hm_splitmix64(&s), 0xE220A8397B1DCDAFull);
    cr_expect_eq(hm_splitmix64(&s), 0x6E789E6AA1B965F4ull);
    uint64_t a = 0;
    double u = hm_uniform53(&a);
    cr_expect_eq(u, (double)(0xE220A8397B1DCDAFull >> 11) * 0x1.0p-53);
    cr_expect(u >= 0 && u < 1);
}

Test(sample, probabilities_equal_the_truncated_renormalized_softmax)
{
    enum { V = 97 };
    float l[V];
    fixed_logits(l, V, 42);
    const struct {
        double T;
        int K;
        double P;
    } cases[] = {{1, 0, 1}, {0.7, 0, 1}, {1.3, 10, 1}, {1, 0, 0.5}, {0.8, 20, 0.9},
                 {2, 1, 1},  {1, 0, 1e-9}, {1, 96, 0.99}, {1, 500, 0.3}, {0.05, 0, 0.95}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        struct hm_sample_params p = {cases[c].T, cases[c].K, cases[c].P};
        struct hm_sampler *s = NULL;
        struct hm_error err;
        cr_assert_eq(hm_sampler_new(V, &p, 1, &s, &err), HM_OK, "%s", err.msg);
        double got[V], want[V], margin;
        const uint64_t rng0 = hm_sampler_rng_state(s);
        cr_assert_eq(hm_sampler_probs(s, l, got, &err), HM_OK, "%s", err.msg);
        cr_expect_eq(hm_sampler_rng_state(s), rng0, "probs drew a random number");
        ref_probs(l, V, p.temperature, (int)p.top_k, p.top_p, want, &margin);
        cr_assert(margin > 1e-12, "case %zu: the test's P sits on a boundary", c);
        double worst = 0, sum = 0;
        int kept = 0, want_kept = 0;
        for (int i = 0; i < V; i++) {
            worst = fmax(worst, fabs(got[i] - want[i]));
            sum += got[i];
            kept += got[i] > 0;
            want_kept += want[i] > 0;
        }
        cr_expect_eq(kept, want_kept, "case %zu: %d tokens kept, want %d", c, kept, want_kept);
        cr_expect(worst <= 1e-14, "case %zu: max |p - ref| %.3g", c, worst);
        cr_expect(fabs(sum - 1) <= 1e-12, "case %zu: sum %.17g", c, sum);
        cr_expect_eq(got[11], 0.0, "case %zu: the -inf token has mass", c);
        hm_sampler_free(s);
    }
}

Test(sample, draws_follow_the_distribution)
{
    enum { V = 40, N = 400000 };
    float l[V];
    fixed_logits(l, V, 7);
    struct hm_sample_params p = {0.9, 12, 0.85};
    struct hm_sampler *s = NULL;
    struct hm_error err;
    cr_assert_eq(hm_sampler_new(V, &p, 12345, &s, &err), HM_OK, "%s", err.msg);
    double probs[V];
    cr_assert_eq(hm_sampler_probs(s, l, probs, &err), HM_OK);
    long count[V] = {0};
    for (int i = 0; i < N; i++) {
        int32_t t;
        cr_assert_eq(hm_sampler_sample(s, l, &t, &err), HM_OK, "%s", err.msg);
        cr_assert(t >= 0 && t < V);
        count[t]++;
    }
    double chi2 = 0;
    int dof = -1;
    for (int i = 0; i < V; i++) {
        if (probs[i] == 0) {
            cr_expect_eq(count[i], 0, "token %d outside the kept set drawn %ld times", i,
                         count[i]);
            continue;
        }
        const double e = probs[i] * N;
        chi2 += (count[i] - e) * (count[i] - e) / e;
        dof++;
        cr_expect(fabs(count[i] - e) <= 6 * sqrt(e) + 1, "token %d: %ld draws, expected %.0f", i,
                  count[i], e);
    }
    /* chi-square with dof ≤ 11: the 1e-6 tail is below 50 */
    cr_expect(chi2 < 50, "chi2 %.2f with %d degrees of freedom", chi2, dof);
    hm_sampler_free(s);
}

Test(sample, greedy_and_its_limits)
{
    float l[6] = {0.5f, 2.0f, -1.0f, 2.0f, 1.9999f, -INFINITY};
    cr_expect_eq(hm_sample_argmax(l, 6), 1, "lowest id on ties");
    const struct hm_sample_params ps[] = {{0, 0, 1}, {1.5, 1, 1}, {1.5, 0, 1e-12},
                                          {0.3, 1, 0.5}};
    for (int k = 0; k < 4; k++) {
        struct hm_sampler *s = NULL;
        cr_assert_eq(hm_sampler_new(6, &ps[k], (uint64_t)k, &s, NULL), HM_OK);
        for (int i = 0; i < 50; i++) {
            int32_t t = -1;
            cr_assert_eq(hm_sampler_sample(s, l, &t, NULL), HM_OK);
            cr_expect_eq(t, 1, "params %d draw %d gave %d", k, i, t);
        }
        hm_sampler_free(s);
    }
}

Test(sample, same_seed_same_tokens_and_bad_input_refused)
{
    enum { V = 300 };
    float l[V];
    for (int i = 0; i < V; i++)
        l[i] = (float)(0.01 * (i % 17));
    struct hm_sample_params p = {1, 0, 1};
    int32_t a[64], b[64], c[64];
    struct hm_sampler *s1, *s2, *s3;
    cr_assert_eq(hm_sampler_new(V, &p, 9, &s1, NULL), HM_OK);
    cr_assert_eq(hm_sampler_new(V, &p, 9, &s2, NULL), HM_OK);
    cr_assert_eq(hm_sampler_new(V, &p, 10, &s3, NULL), HM_OK);
    int differ = 0;
    for (int i = 0; i < 64; i++) {
        hm_sampler_sample(s1, l, &a[i], NULL);
        hm_sampler_sample(s2, l, &b[i], NULL);
        hm_sampler_sample(s3, l, &c[i], NULL);
        cr_expect_eq(a[i], b[i]);
        differ += a[i] != c[i];
    }
    cr_expect(differ > 32, "seeds 9 and 10 agree on %d of 64 draws", 64 - differ);
    struct hm_error err;
    l[5] = NAN;
    cr_expect_eq(hm_sampler_sample(s1, l, &a[0], &err), HM_ERR_NUMERIC);
    l[5] = INFINITY;
    cr_expect_eq(hm_sampler_sample(s1, l, &a[0], &err), HM_ERR_NUMERIC);
    hm_sampler_free(s1), hm_sampler_free(s2), hm_sampler_free(s3);
    const struct hm_sample_params bad[] = {{-1, 0, 1}, {1, -1, 1}, {1, 0, 0}, {1, 0, 1.5},
                                           {NAN, 0, 1}};
    for (int k = 0; k < 5; k++) {
        struct hm_sampler *s = NULL;
        cr_expect_eq(hm_sampler_new(V, &bad[k], 0, &s, &err), HM_ERR_INVALID, "bad params %d", k);
        cr_expect_null(s);
    }
}

/* ---- the settled text ------------------------------------------------------------ */

Test(gen_text, holds_back_stop_prefixes_and_unfinished_characters)
{
    struct hm_tokenizer *tok = NULL;
    cr_assert_eq(hm_tokenizer_bytes(&tok, NULL), HM_OK);
    const char *stops[] = {"abc", "\xe2\x82\xac!"};
    struct hm_gen_text *g = NULL;
    const int32_t prompt[] = {'>'};
    cr_assert_eq(hm_gen_text_new(tok, prompt, 1, stops, 2, &g, NULL), HM_OK);
    /* x a b d : "ab" waits, then goes out with d; € waits for its last byte,
     * then for "!" (it starts the second stop string); a b c stops */
    const char *in = "xabd\xe2\x82\xac?ab" "c";
    const char *want[] = {"x", "", "", "abd", "", "", "", "\xe2\x82\xac?", "", "", ""};
    for (int i = 0; in[i]; i++) {
        const char *out;
        size_t n;
        int stop;
        cr_assert_eq(hm_gen_text_push(g, (unsigned char)in[i], &out, &n, &stop, NULL), HM_OK);
        cr_expect(n == strlen(want[i]) && memcmp(out, want[i], n) == 0,
                  "token %d released %zu bytes '%.*s', want '%s'", i, n, (int)n, out, want[i]);
        cr_expect_eq(stop, in[i + 1] ? -1 : 0, "token %d: stop %d", i, stop);
    }
    size_t n;
    const char *v = hm_gen_text_view(g, &n);
    cr_expect(n == 8 && memcmp(v, "xabd\xe2\x82\xac?", 8) == 0, "text '%.*s'", (int)n, v);
    const char *rest;
    hm_gen_text_finish(g, &rest, &n);
    cr_expect_eq(n, 0, "bytes after the stop: %zu", n);
    hm_gen_text_free(g);
    /* an unfinished character at the end comes out at finish */
    cr_assert_eq(hm_gen_text_new(tok, prompt, 1, NULL, 0, &g, NULL), HM_OK);
    const char *out;
    int stop;
    cr_assert_eq(hm_gen_text_push(g, 0xE2, &out, &n, &stop, NULL), HM_OK);
    cr_expect_eq(n, 0);
    hm_gen_text_finish(g, &rest, &n);
    cr_expect(n == 1 && (unsigned char)rest[0] == 0xE2);
    hm_gen_text_free(g);
    hm_tokenizer_free(tok);
}

/* ---- models on disk ----------------------------------------------------------- */

static void fill_random(struct hm_model *m, uint64_t seed)
{
    for (int64_t i = 0; i < m->n_views; i++) {
        const struct hm_tensor_view *v = &m->views[i];
        for (int64_t k = 0; k < v->numel; k++) {
            double r = tu_rand_normal(&seed);
            float *x = v->data + k;
            if (v->spec.group == HM_PG_NORM)
                *x = (float)(1.0 + 0.1 * r);
            else if (v->spec.slot == HM_SLOT_A)
                *x = (float)(-0.2 - 0.3 * fabs(r));
            else if (v->spec.slot == HM_SLOT_DT_B || v->spec.slot == HM_SLOT_GATE_B)
                *x += (float)(0.2 * r);
            else if (v->spec.slot == HM_SLOT_CONV_W)
                *x += (float)(0.3 * r);
            else
                *x = (float)(0.3 * r);
        }
    }
}

/* A random model of family × mixer saved under dir; V 257 for neox (so
 * --bytes decodes it). max_pos: the config's position limit. owned: free(). */
static char *make_model_v(const char *dir, enum hm_family fam, enum hm_mixer mix,
                          int64_t max_pos, int64_t V, uint64_t seed)
{
    struct hm_config c;
    hm_config_defaults(&c);
    c.family = fam;
    c.mixer = mix;
    c.hidden_size = 32;
    c.num_hidden_layers = 2;
    c.num_attention_heads = 4;
    c.intermediate_size = 48;
    c.feature_dim = 8;
    c.max_position_embeddings = max_pos;
    if (fam == HM_FAMILY_LLAMA) {
        c.num_key_value_heads = 2;
        c.vocab_size = 61;
        c.rotary_pct = 1;
        c.use_parallel_residual = 0;
        c.hidden_act = HM_ACT_SILU;
        c.attention_bias = c.mlp_bias = 0;
    } else {
        c.vocab_size = 257;
    }
    if (V)
        c.vocab_size = V;
    struct hm_error err;
    cr_assert_eq(hm_config_finish(&c, &err), HM_OK, "%s", err.msg);
    struct hm_model *m = NULL;
    cr_assert_eq(hm_model_new(&c, &m, &err), HM_OK, "%s", err.msg);
    fill_random(m, seed);
    char name[64];
    snprintf(name, sizeof name, "%s-%s.safetensors", hm_family_name(fam), hm_mixer_name(mix));
    char *path = tu_path(dir, name);
    cr_assert_eq(hm_model_save(m, path, 0, NULL, HM_DTYPE_F32, NULL, &err), HM_OK, "%s", err.msg);
    hm_model_free(m);
    return path;
}

static char *make_model(const char *dir, enum hm_family fam, enum hm_mixer mix, int64_t max_pos,
                        uint64_t seed)
{
    return make_model_v(dir, fam, mix, max_pos, 0, seed);
}

/* The checkpoint at path, placed on the fast backend (greedy_loop's). */
static struct hm_model *load(const char *path)
{
    struct hm_ckpt *ck = NULL;
    struct hm_model *m = NULL;
    struct hm_error err;
    cr_assert_eq(hm_ckpt_open(path, &ck, &err), HM_OK, "%s", err.msg);
    cr_assert_eq(hm_model_load(ck, &m, &err), HM_OK, "%s", err.msg);
    hm_ckpt_close(ck);
    cr_assert_eq(hm_model_place(m, hm_backend_get("fast"), &err), HM_OK, "%s", err.msg);
    return m;
}

/* The test's own greedy loop: every prompt token through hm_model_step
 * (not the prefill), argmax with the lowest id on ties, n new tokens. */
static void greedy_loop(const struct hm_model *m, const int32_t *prompt, int64_t P, int64_t n,
                        int32_t *out)
{
    const int64_t V = m->cfg.vocab_size;
    float *lg = malloc(sizeof(float) * (size_t)V);
    struct hm_model_state *s = NULL;
    struct hm_error err;
    const struct hm_backend *be = hm_backend_get("fast");
    cr_assert_eq(hm_model_state_new(m, &s, &err), HM_OK, "%s", err.msg);
    for (int64_t i = 0; i < P; i++)
        cr_assert_eq(hm_model_step(m, be, s, prompt[i], lg, &err), HM_OK, "%s", err.msg);
    for (int64_t i = 0; i < n; i++) {
        int32_t best = 0;
        for (int64_t v = 1; v < V; v++)
            if (lg[v] > lg[best])
                best = (int32_t)v;
        out[i] = best;
        if (i + 1 < n)
            cr_assert_eq(hm_model_step(m, be, s, best, lg, &err), HM_OK, "%s", err.msg);
    }
    hm_model_state_free(s);
    free(lg);
}

/* Runs hm-generate with args; returns the exit status, *out stdout. */
static int gen(char **out, char **errout, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int gen(char **out, char **errout, const char *fmt, ...)
{
    char args[8192], cmd[8400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof cmd, "OMP_NUM_THREADS=2 %s %s", GEN, args);
    int rc = tu_run(cmd, out, errout);
    cr_assert(rc < 128, "hm-generate crashed (%d): %s", rc, cmd);
    return rc;
}

/* "1 2 3\n" → ids; returns the count. */
static int64_t parse_ids(const char *s, int32_t *ids, int64_t cap)
{
    int64_t n = 0;
    char *end;
    for (;;) {
        long v = strtol(s, &end, 10);
        if (end == s)
            return n;
        cr_assert(n < cap);
        ids[n++] = (int32_t)v;
        s = end;
    }
}

static char *ids_list(const int32_t *ids, int64_t n)
{
    char *s = malloc((size_t)n * 12 + 1);
    size_t k = 0;
    for (int64_t i = 0; i < n; i++)
        k += (size_t)sprintf(s + k, i ? ",%d" : "%d", ids[i]);
    s[k] = '\0';
    return s;
}

Test(generate, greedy_cli_equals_a_step_loop_for_every_family_and_mixer, .timeout = 300)
{
    char *dir = tu_mkdtemp("gen");
    const enum hm_mixer mixers[] = {HM_MIXER_SOFTMAX, HM_MIXER_HEDGEHOG, HM_MIXER_HEDGEMAMBA};
    for (int f = 0; f < 2; f++)
        for (int k = 0; k < 3; k++) {
            char *path = make_model(dir, (enum hm_family)f, mixers[k], 4096, 100 + 10 * f + k);
            struct hm_model *m = load(path);
            const int64_t V = m->cfg.vocab_size, P = 150, N = 40;
            int32_t prompt[150], want[40], got[64];
            uint64_t rs = 5 + (uint64_t)k;
            for (int i = 0; i < P; i++)
                prompt[i] = (int32_t)(hm_splitmix64(&rs) % (uint64_t)V);
            greedy_loop(m, prompt, P, N, want);
            char *list = ids_list(prompt, P);
            /* the default chunks (several for the prompt of 150) and chunks of 16 */
            const char *chunks[] = {"", "--prefill-chunk 16"};
            for (int c = 0; c < 2; c++) {
                char *out = NULL, *err = NULL;
                int rc = gen(&out, &err, "'%s' --prompt-ids %s --temperature 0 --max-new-tokens "
                             "%lld --ids --ignore-eot %s", path, list, (long long)N, chunks[c]);
                cr_assert_eq(rc, 0, "%s: %s", path, err);
                int64_t n = parse_ids(out, got, 64);
                cr_expect_eq(n, N, "%s: %lld ids", path, (long long)n);
                int64_t same = 0;
                while (same < n && same < N && got[same] == want[same])
                    same++;
                cr_expect_eq(same, N, "%s/%s %s: CLI and step loop agree on %lld of %lld tokens",
                             hm_family_name(m->cfg.family), hm_mixer_name(m->cfg.mixer),
                             chunks[c], (long long)same, (long long)N);
                free(out), free(err);
            }
            /* the greedy first token as the end-of-text id: nothing is generated */
            char *out = NULL, *err = NULL;
            int rc = gen(&out, &err, "'%s' --prompt-ids %s --temperature 0 --eot-id %d --json",
                         path, list, want[0]);
            cr_assert_eq(rc, 0, "%s", err);
            cJSON *j = cJSON_Parse(out);
            cr_assert(j, "not JSON: %s", out);
            cr_expect_str_eq(cJSON_GetObjectItem(j, "stop_reason")->valuestring, "end_of_text");
            cr_expect_eq(cJSON_GetObjectItem(j, "end_id")->valueint, want[0]);
            cr_expect_eq(cJSON_GetArraySize(cJSON_GetObjectItem(j, "new_ids")), 0);
            cJSON_Delete(j);
            free(out), free(err);
    free(list);
            hm_model_free(m);
            free(path);
        }
    free(dir);
}

Test(generate, sampling_is_reproducible_and_truncations_reach_greedy, .timeout = 120)
{
    char *dir = tu_mkdtemp("gen");
    char *path = make_model(dir, HM_FAMILY_NEOX, HM_MIXER_HEDGEMAMBA, 4096, 77);
    const char *p = "--bytes --prompt 'Hello' --max-new-tokens 48 --ids --ignore-eot";
    char *a, *b, *c, *g, *k1, *tp, *e;
    cr_assert_eq(gen(&a, &e, "'%s' %s --seed 1 --temperature 1.5", path, p), 0, "%s", e);
    free(e);
    cr_assert_eq(gen(&b, &e, "'%s' %s --seed 1 --temperature 1.5", path, p), 0);
    free(e);
    cr_assert_eq(gen(&c, &e, "'%s' %s --seed 2 --temperature 1.5", path, p), 0);
    free(e);
    cr_expect_str_eq(a, b, "same seed, different tokens");
    cr_expect_str_neq(a, c, "seeds 1 and 2 gave the same 48 tokens");
    cr_assert_eq(gen(&g, &e, "'%s' %s --temperature 0", path, p), 0);
    free(e);
    cr_assert_eq(gen(&k1, &e, "'%s' %s --seed 3 --temperature 1.5 --top-k 1", path, p), 0);
    free(e);
    cr_assert_eq(gen(&tp, &e, "'%s' %s --seed 4 --temperature 1.5 --top-p 1e-9", path, p), 0);
    free(e);
    cr_expect_str_eq(k1, g, "top-k 1 differs from greedy");
    cr_expect_str_eq(tp, g, "top-p 1e-9 differs from greedy");
    cr_expect_str_neq(a, g, "sampling at T 1.5 equals greedy (the test could not fail)");
    free(a), free(b), free(c), free(g), free(k1);
    free(tp), free(path);
    free(dir);
}

Test(generate, position_limit_vocabulary_and_usage, .timeout = 120)
{
    char *dir = tu_mkdtemp("gen");
    char *teacher = make_model(dir, HM_FAMILY_NEOX, HM_MIXER_SOFTMAX, 64, 3);
    char *student = make_model(dir, HM_FAMILY_NEOX, HM_MIXER_HEDGEHOG, 64, 4);
    char *out, *err;
    /* 10 + 54 = 64 fits; 10 + 55 does not, for the teacher only */
    const char *ids = "1,2,3,4,5,6,7,8,9,10";
    cr_expect_eq(gen(&out, &err, "'%s' --prompt-ids %s --max-new-tokens 54 --ids --ignore-eot",
                     teacher, ids), 0, "%s", err);
    free(out), free(err);
    cr_expect_eq(gen(&out, &err, "'%s' --prompt-ids %s --max-new-tokens 55 --ids", teacher, ids),
                 1);
    cr_expect_str_empty(out);
    cr_expect(strstr(err, "position limit") && strstr(err, teacher), "message: %s", err);
    free(out), free(err);
    cr_expect_eq(gen(&out, &err, "'%s' --prompt-ids %s --max-new-tokens 200 --ids --ignore-eot",
                     student, ids), 0, "%s", err);
    int32_t got[256];
    cr_expect_eq(parse_ids(out, got, 256), 200, "the student stopped early: %s", out);
    free(out), free(err);
    cr_expect_eq(gen(&out, &err, "'%s' --bench --context 100 --decode-tokens 4", teacher), 1);
    free(out), free(err);
    /* ids outside the vocabulary: refused naming the file */
    cr_expect_eq(gen(&out, &err, "'%s' --prompt-ids 1,257", student), 1);
    cr_expect(strstr(err, "257") && strstr(err, student), "message: %s", err);
    free(out), free(err);
    const char *bad[] = {"--prompt-ids 1,,2", "--prompt-ids ''", "--prompt-ids -1",
                         "--prompt x --prompt-ids 1", "--top-p 0 --bytes", "--temperature -1",
                         "--top-k -2", "--context 5", "--bench", "--ids --json --bytes",
                         "--bytes --stop ''"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        cr_expect_eq(gen(&out, &err, "'%s' %s", student, bad[i]), 2, "%s: %s", bad[i], err);
        cr_expect_str_empty(out, "%s", bad[i]);
        free(out), free(err);
    }
    /* no tokenizer: --prompt is a usage error, --prompt-ids prints ids */
    cr_expect_eq(gen(&out, &err, "'%s' --prompt hi", student), 2);
    free(out);
    free(err);
    cr_expect_eq(gen(&out, &err, "'%s' --prompt-ids 5 --max-new-tokens 3 --ignore-eot", student),
                 0);
    cr_expect_eq(parse_ids(out, got, 256), 3, "%s", out);
    free(out), free(err);
    free(teacher), free(student);
    free(dir);
}

Test(generate, json_ids_and_text_agree, .timeout = 120)
{
    char *dir = tu_mkdtemp("gen");
    char *path = make_model(dir, HM_FAMILY_NEOX, HM_MIXER_SOFTMAX, 4096, 11);
    const char *p = "--bytes --prompt 'caf\xc3\xa9 ' --max-new-tokens 30 --seed 5 --ignore-eot";
    char *text, *ids, *js, *e;
    cr_assert_eq(gen(&text, &e, "'%s' %s", path, p), 0, "%s", e);
    free(e);
    cr_assert_eq(gen(&ids, &e, "'%s' %s --ids", path, p), 0);
    free(e);
    cr_assert_eq(gen(&js, &e, "'%s' %s --json", path, p), 0);
    free(e);
    cJSON *j = cJSON_Parse(js);
    cr_assert(j, "not JSON: %s", js);
    cJSON *pid = cJSON_GetObjectItem(j, "prompt_ids"), *nid = cJSON_GetObjectItem(j, "new_ids");
    cr_expect_eq(cJSON_GetArraySize(pid), 6); /* c a f 0xC3 0xA9 ' ' */
    cr_expect_eq(cJSON_GetArrayItem(pid, 3)->valueint, 0xC3);
    int32_t v[64];
    int64_t n = parse_ids(ids, v, 64);
    cr_expect_eq(n, 30);
    cr_assert_eq(cJSON_GetArraySize(nid), n);
    /* the streamed text is the new ids' bytes exactly (id 256 decodes to
     * "<|endoftext|>"; compared up to a NUL byte, where the C string ends) */
    char want[64 * 16];
    size_t wl = 0;
    int ascii = 1;
    for (int64_t i = 0; i < n; i++) {
        cr_expect_eq(cJSON_GetArrayItem(nid, (int)i)->valueint, v[i]);
        if (v[i] == 256) {
            memcpy(want + wl, "<|endoftext|>", 13);
            wl += 13;
        } else {
            want[wl++] = (char)v[i];
            ascii &= v[i] > 0 && v[i] < 0x80;
        }
    }
    want[wl] = '\0';
    cr_expect_eq(strlen(text), strlen(want), "streamed %zu bytes, want %zu", strlen(text),
                 strlen(want));
    cr_expect(memcmp(text, want, strlen(want)) == 0, "the streamed bytes differ from the ids'");
    if (ascii) /* JSON text holds valid UTF-8 only */
        cr_expect_str_eq(cJSON_GetObjectItem(j, "text")->valuestring, text);
    cr_expect_str_eq(cJSON_GetObjectItem(j, "stop_reason")->valuestring, "max_new_tokens");
    cr_expect_eq(cJSON_GetObjectItem(j, "tokens")->valueint, 30);
    cr_expect(cJSON_IsNull(cJSON_GetObjectItem(j, "end_id")));
    cr_expect(cJSON_GetObjectItem(j, "decode_tokens_per_s")->valuedouble > 0);
    cJSON_Delete(j);
    free(text), free(ids), free(js), free(path);
    free(dir);
}

Test(generate, bench_json_has_positive_fields, .timeout = 120)
{
    char *dir = tu_mkdtemp("gen");
    const enum hm_mixer mixers[] = {HM_MIXER_SOFTMAX, HM_MIXER_HEDGEMAMBA};
    for (int k = 0; k < 2; k++) {
        char *path = make_model(dir, HM_FAMILY_LLAMA, mixers[k], 4096, 9);
        char *out, *err;
        cr_assert_eq(gen(&out, &err, "'%s' --bench --context 300 --batch 3 --decode-tokens 5 "
                         "--json --threads 2", path), 0, "%s", err);
        cJSON *j = cJSON_Parse(out);
        cr_assert(j, "not JSON: %s", out);
        const char *pos[] = {"prefill_tokens_per_s", "decode_tokens_per_s", "peak_rss_bytes",
                             "state_bytes", "weights_bytes", "prefill_s", "decode_s"};
        for (size_t i = 0; i < sizeof pos / sizeof *pos; i++) {
            cJSON *x = cJSON_GetObjectItem(j, pos[i]);
            cr_expect(cJSON_IsNumber(x) && x->valuedouble > 0, "%s: %s", pos[i], out);
        }
        cr_expect_eq(cJSON_GetObjectItem(j, "context")->valueint, 300);
        cr_expect_eq(cJSON_GetObjectItem(j, "batch")->valueint, 3);
        cr_expect_eq(cJSON_GetObjectItem(j, "threads")->valueint, 2);
        cr_expect_str_eq(cJSON_GetObjectItem(j, "mixer")->valuestring, hm_mixer_name(mixers[k]));
        cJSON_Delete(j);
        free(out), free(err);
    free(path);
    }
    free(dir);
}

Test(generate, neox_tokenizer_streaming_equals_the_final_text, .timeout = 120)
{
    const char *tok = HM_SHARED_DATA "/gpt-neox-20b_tokenizer.json";
    FILE *f = fopen(tok, "rb");
    if (!f)
        cr_skip_test("no shared data at %s", HM_SHARED_DATA);
    fclose(f);
    /* a random student with Pythia's padded vocabulary: sampling at T 1
     * picks byte-level pieces that split UTF-8 characters, which the stream
     * must hold back until they are whole (or the text's end) */
    char *dir = tu_mkdtemp("gen");
    char *path = make_model_v(dir, HM_FAMILY_NEOX, HM_MIXER_HEDGEHOG, 4096, 50304, 31);
    for (int seed = 1; seed <= 3; seed++) {
        char *text, *js, *e;
        const char *fl =
            "--temperature 1 --max-new-tokens 80 --ignore-eot --prompt 'Caf\xc3\xa9 \xe2\x82\xac'";
        cr_assert_eq(gen(&text, &e, "'%s' --tokenizer '%s' %s --seed %d", path, tok, fl, seed), 0,
                     "%s", e);
        free(e);
        cr_assert_eq(gen(&js, &e, "'%s' --tokenizer '%s' %s --seed %d --json", path, tok, fl,
                         seed), 0, "%s", e);
        free(e);
        cJSON *j = cJSON_Parse(js);
        cr_assert(j, "not JSON: %.200s", js);
        const char *t = cJSON_GetObjectItem(j, "text")->valuestring;
        cr_expect_str_eq(text, t, "seed %d: streamed text differs from the final decode", seed);
        cJSON *nid = cJSON_GetObjectItem(j, "new_ids");
        for (int i = 0; i < cJSON_GetArraySize(nid); i++)
            cr_expect(cJSON_GetArrayItem(nid, i)->valueint < 50277,
                      "id %d has no piece in the tokenizer", cJSON_GetArrayItem(nid, i)->valueint);
        /* a stop string taken from the text: cut before its first occurrence */
        const char *s = t + strlen(t) / 2;
        while (*s && !(s[0] > ' ' && s[0] < 127 && s[0] != '\'' && s[1] > ' ' && s[1] < 127 &&
                       s[1] != '\''))
            s++;
        if (s[0] && s[1]) {
            char stop[3] = {s[0], s[1], 0};
            size_t cut = (size_t)(strstr(t, stop) - t);
            char *o2;
            cr_assert_eq(gen(&o2, &e, "'%s' --tokenizer '%s' %s --seed %d --stop '%s'", path, tok,
                             fl, seed, stop), 0, "%s", e);
            free(e);
            cr_expect_eq(strlen(o2), cut, "stop '%s': %zu bytes, want %zu", stop, strlen(o2), cut);
            cr_expect(strncmp(o2, t, cut) == 0, "stop '%s'", stop);
            free(o2);
        }
        cJSON_Delete(j);
        free(text), free(js);
    }
    free(path), free(dir);
}

/* The id of byte-level piece `piece` (UTF-8 of its byte-to-unicode chars)
 * in a tokenizer.json's model.vocab. */
static int vocab_id(cJSON *vocab, const char *piece)
{
    cJSON *x = cJSON_GetObjectItemCaseSensitive(vocab, piece);
    cr_assert(cJSON_IsNumber(x), "no piece '%s' in the vocabulary", piece);
    return x->valueint;
}

Test(generate, split_utf8_characters_are_held_back_until_whole, .timeout = 120)
{
    const char *tok = HM_SHARED_DATA "/gpt-neox-20b_tokenizer.json";
    FILE *f = fopen(tok, "rb");
    if (!f)
        cr_skip_test("no shared data at %s", HM_SHARED_DATA);
    fclose(f);
    size_t len;
    char *json = tu_read_file(tok, &len);
    cJSON *tj = cJSON_ParseWithLength(json, len);
    cr_assert(tj);
    cJSON *vocab = cJSON_GetObjectItem(cJSON_GetObjectItem(tj, "model"), "vocab");
    /* "€" = E2 82 AC, the byte-level pieces "â" "Ĥ" "¬" (GPT-2's byte-to-unicode) */
    const int chain[4] = {vocab_id(vocab, "A"), vocab_id(vocab, "\xc3\xa2"),
                          vocab_id(vocab, "\xc4\xa4"), vocab_id(vocab, "\xc2\xac")};
    cJSON_Delete(tj);
    free(json);
    /* A model whose greedy next token depends on the current one only: every
     * layer weight is zero (h = embed_in[token]), embed_in[chain[k]] = e_k, and
     * embed_out[chain[k + 1]] = e_k, so LN(e_k) · embed_out^T peaks at the
     * successor: A → â → Ĥ → ¬ → A ..., i.e. the text "€A€A...". */
    struct hm_config c;
    hm_config_defaults(&c);
    c.hidden_size = 32;
    c.num_hidden_layers = 1;
    c.num_attention_heads = 4;
    c.intermediate_size = 8;
    c.vocab_size = 50304;
    c.max_position_embeddings = 4096;
    struct hm_error err;
    cr_assert_eq(hm_config_finish(&c, &err), HM_OK, "%s", err.msg);
    struct hm_model *m = NULL;
    cr_assert_eq(hm_model_new(&c, &m, &err), HM_OK, "%s", err.msg);
    for (int i = 0; i < 32; i++)
        m->lnf_w[i] = 1;
    for (int k = 0; k < 4; k++) {
        m->embed_in[chain[k] * 32 + k] = 1;
        m->embed_out[chain[(k + 1) % 4] * 32 + k] = 1;
    }
    char *dir = tu_mkdtemp("gen");
    char *path = tu_path(dir, "chain.safetensors");
    cr_assert_eq(hm_model_save(m, path, 0, NULL, HM_DTYPE_F32, NULL, &err), HM_OK, "%s", err.msg);
    hm_model_free(m);
    char *out, *e;
    cr_assert_eq(gen(&out, &e, "'%s' --tokenizer '%s' --prompt-ids %d --temperature 0 "
                     "--max-new-tokens 14", path, tok, chain[0]), 0, "%s", e);
    free(e);
    /* 14 tokens: (€ A) x 3, then â Ĥ: the unfinished character is written at
     * the end as the decoder gives it (U+FFFD) */
    cr_expect_str_eq(out, "\xe2\x82\xac" "A" "\xe2\x82\xac" "A" "\xe2\x82\xac" "A" "\xef\xbf\xbd");
    free(out);
    cr_assert_eq(gen(&out, &e, "'%s' --tokenizer '%s' --prompt-ids %d --temperature 0 "
                     "--max-new-tokens 14 --stop 'A\xe2\x82\xac' --json", path, tok, chain[0]),
                 0, "%s", e);
    free(e);
    cJSON *j = cJSON_Parse(out);
    cr_assert(j, "%s", out);
    cr_expect_str_eq(cJSON_GetObjectItem(j, "text")->valuestring, "\xe2\x82\xac");
    cr_expect_eq(cJSON_GetArraySize(cJSON_GetObjectItem(j, "new_ids")), 7);
    cJSON_Delete(j);
    free(out);
    cr_assert_eq(gen(&out, &e, "'%s' --tokenizer '%s' --prompt-ids %d --temperature 0 "
                     "--max-new-tokens 14 --stop 'A\xe2\x82\xac'", path, tok, chain[0]), 0, "%s",
                 e);
    free(e);
    cr_expect_str_eq(out, "\xe2\x82\xac");
    free(out);
    free(path), free(dir);
}

/* ---- the pretrained teacher ----------------------------------------------------- */

static char *import_stories(void)
{
    FILE *f = fopen(STORIES, "rb"), *g = fopen(TOK512, "rb");
    if (f)
        fclose(f);
    if (g)
        fclose(g);
    if (!f || !g)
        cr_skip_test("no shared data at %s", HM_SHARED_DATA);
    char *dir = tu_mkdtemp("gen-stories");
    char *out = tu_path(dir, "teacher.safetensors");
    char cmd[4096], *err = NULL;
    snprintf(cmd, sizeof cmd, "%s/hm-import llama2c '%s' -o '%s'", HM_BIN_DIR, STORIES, out);
    cr_assert_eq(tu_run(cmd, NULL, &err), 0, "%s", err);
    free(err), free(dir);
    return out;
}

Test(generate, stories260k_greedy_reproduces_llama2c, .timeout = 120)
{
    char *path = import_stories();
    char *out, *err;
    /* run.c -t 0.0 with its default 256 steps: BOS at position 0, then 256
     * new tokens (the last is printed, never fed) — tests/data/stories260K_greedy.md */
    cr_assert_eq(gen(&out, &err, "'%s' --tokenizer '%s' --temperature 0 --max-new-tokens 256",
                     path, TOK512), 0, "%s", err);
    size_t wlen;
    char *want = tu_read_file(HM_SOURCE_DIR "/tests/data/stories260K_greedy.txt", &wlen);
    cr_assert(wlen > 1 && want[wlen - 1] == '\n');
    want[--wlen] = '\0';
    size_t same = 0, len = strlen(out);
    while (same < len && same < wlen && out[same] == want[same])
        same++;
    cr_expect(len == wlen && same == len, "differs at byte %zu (got %zu bytes, want %zu)", same,
              len, wlen);
    free(out), free(err);
    /* the same through --json: 256 ids, the text, and the first ids of the .md */
    cr_assert_eq(gen(&out, &err, "'%s' --tokenizer '%s' --temperature 0 --max-new-tokens 256 "
                     "--json", path, TOK512), 0, "%s", err);
    cJSON *j = cJSON_Parse(out);
    cr_assert(j);
    cr_expect_str_eq(cJSON_GetObjectItem(j, "text")->valuestring, want);
    cr_expect_eq(cJSON_GetArraySize(cJSON_GetObjectItem(j, "new_ids")), 256);
    cr_expect_eq(cJSON_GetArraySize(cJSON_GetObjectItem(j, "prompt_ids")), 1);
    cr_expect_eq(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "prompt_ids"), 0)->valueint, 1);
    const int first[] = {403, 407, 261, 378, 432, 383};
    for (int i = 0; i < 6; i++)
        cr_expect_eq(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "new_ids"), i)->valueint, first[i]);
    cJSON_Delete(j);
    free(out), free(err);

    /* stop strings: cut before the first occurrence, never printed, also
     * when streamed; a stop string absent from the text changes nothing */
    const char *stops[] = {"Lily", "park.", "\"", ", b", "zzz"};
    for (int k = 0; k < 5; k++) {
        const char *hit = strstr(want, stops[k]);
        size_t cut = hit ? (size_t)(hit - want) : wlen;
        char *js;
        cr_assert_eq(gen(&out, &err, "'%s' --tokenizer '%s' --temperature 0 --max-new-tokens "
                         "256 --stop '%s'", path, TOK512, stops[k]), 0, "%s", err);
        free(err);
        cr_assert_eq(gen(&js, &err, "'%s' --tokenizer '%s' --temperature 0 --max-new-tokens "
                         "256 --stop '%s' --stop 'never-there' --json", path, TOK512, stops[k]),
                     0, "%s", err);
        cr_expect_eq(strlen(out), cut, "stop '%s': %zu bytes, want %zu", stops[k], strlen(out),
                     cut);
        cr_expect(strncmp(out, want, cut) == 0, "stop '%s': %s", stops[k], out);
        j = cJSON_Parse(js);
        cr_assert(j);
        cr_expect_str_eq(cJSON_GetObjectItem(j, "stop_reason")->valuestring,
                         hit ? "stop_string" : "max_new_tokens", "stop '%s'", stops[k]);
        cr_expect_str_eq(cJSON_GetObjectItem(j, "text")->valuestring, out);
        if (hit)
            cr_expect_str_eq(cJSON_GetObjectItem(j, "stop_string")->valuestring, stops[k]);
        cJSON_Delete(j);
        free(out), free(err);
    free(js);
    }

    /* a prompt: llama2.c encodes it after BOS; only the new text is printed */
    cr_assert_eq(gen(&out, &err, "'%s' --tokenizer '%s' --temperature 0 --max-new-tokens 20 "
                     "--prompt 'Once upon a time' --json", path, TOK512), 0, "%s", err);
    j = cJSON_Parse(out);
    cr_assert(j);
    cJSON *pid = cJSON_GetObjectItem(j, "prompt_ids");
    cr_expect_eq(cJSON_GetArrayItem(pid, 0)->valueint, 1, "no BOS first");
    const char *text = cJSON_GetObjectItem(j, "text")->valuestring;
    cr_expect(strncmp(text, ", there was a little girl", 25) == 0, "text: %s", text);
    cJSON_Delete(j);
    free(out), free(err);
    /* sampling: same seed → same text; the stories model's text differs by seed */
    char *s1, *s2, *s3;
    const char *fl = "--temperature 1 --top-p 0.9 --max-new-tokens 60 --ids";
    cr_assert_eq(gen(&s1, &err, "'%s' --tokenizer '%s' %s --seed 1", path, TOK512, fl), 0);
    free(err);
    cr_assert_eq(gen(&s2, &err, "'%s' --tokenizer '%s' %s --seed 1", path, TOK512, fl), 0);
    free(err);
    cr_assert_eq(gen(&s3, &err, "'%s' --tokenizer '%s' %s --seed 2", path, TOK512, fl), 0);
    free(err);
    cr_expect_str_eq(s1, s2);
    cr_expect_str_neq(s1, s3);
    free(s1), free(s2);
    free(s3), free(want);
    free(path);
}
