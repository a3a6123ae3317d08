/* Stage 2 end to end: hm-map-ssm is exact on random Hedgehog checkpoints
 * whose feature maps are not the identity (hm-verify mapping exit 0), any
 * single mapped tensor perturbed by 1e-3 is caught with its location (exit
 * 1), unreadable inputs give exit 2; the recurrent form equals the chunked
 * one; inactive components stay at their identity values through
 * hm-finetune and A stays ≤ 0; the naive baseline follows contract §3.
 * --decay-from: the mean attention distance against an independent double
 * softmax (and GQA against its expansion), the bisection against G's
 * definition, the tool end to end (local heads decay, uniform ones do not,
 * hm-verify mapping proves the rest with A = 0 and refuses an A > 0). */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "map_decay.h"
#include "model_views.h"
#include "presets.h"
#include "ref_neox.h"
#include "safetensors.h"
#include "testutil.h"
#include "tokfile.h"

static char *g_dir;

/* A hedgehog checkpoint with random skeleton and non-identity feature maps. */
static void setup(void)
{
    g_dir = tu_mkdtemp("mapssm");
    struct hm_config c;
    hm_config_defaults(&c);
    c.mixer = HM_MIXER_HEDGEHOG;
    c.vocab_size = 257;
    c.hidden_size = 32;
    c.num_hidden_layers = 2;
    c.num_attention_heads = 4;
    c.intermediate_size = 64;
    c.feature_dim = 6;
    c.use_parallel_residual = 1;
    cr_assert_eq(hm_config_finish(&c, NULL), HM_OK);
    struct hm_model *m;
    cr_assert_eq(hm_model_new(&c, &m, NULL), HM_OK);
    hm_model_init_random(m, 21, 0.2);
    uint64_t s = 5;
    /* no weight at a special value (LayerNorm weight 1 makes Σ a = 0 exactly,
     * which hides perturbations that shift every channel alike) */
    struct hm_tensor_view *v;
    int64_t nv = hm_model_views(m, &v);
    for (int64_t i = 0; i < nv; i++)
        if (v[i].spec.group == HM_PG_NORM || v[i].spec.group == HM_PG_MIXER)
            for (int64_t k = 0; k < v[i].numel; k++)
                v[i].data[k] += (float)(0.1 * tu_rand_normal(&s));
    free(v);
    for (int64_t l = 0; l < c.num_hidden_layers; l++) {
        int64_t nw = c.num_attention_heads * c.head_dim * c.feature_dim;
        int64_t nb = c.num_attention_heads * c.feature_dim;
        for (int64_t i = 0; i < nw; i++) {
            m->layers[l].fq_w[i] += (float)(0.5 * tu_rand_normal(&s));
            m->layers[l].fk_w[i] += (float)(0.5 * tu_rand_normal(&s));
        }
        for (int64_t i = 0; i < nb; i++) {
            m->layers[l].fq_b[i] = (float)(0.3 * tu_rand_normal(&s));
            m->layers[l].fk_b[i] = (float)(0.3 * tu_rand_normal(&s));
        }
    }
    char *p = tu_path(g_dir, "hh.st");
    cr_assert_eq(hm_model_save(m, p, 0, NULL, HM_DTYPE_F32, NULL, NULL), HM_OK);
    hm_model_free(m);
    free(p);
    char cmd[4096], *err = NULL;
    snprintf(cmd, sizeof cmd,
             "cd %s && %s/hm-map-ssm hh.st -o hm.st -q && "
             "%s/hm-tokenize --bytes %s/cs336_corpus.en -o data.tok -q",
             g_dir, HM_BIN_DIR, HM_BIN_DIR, HM_SHARED_DATA);
    cr_assert_eq(tu_run(cmd, NULL, &err), 0, "%s", err);
    free(err);
}

TestSuite(map_ssm, .init = setup, .timeout = 600);

static int verify(const char *args, cJSON **json, char **err)
{
    char cmd[4096], *out = NULL;
    snprintf(cmd, sizeof cmd, "cd %s && %s/hm-verify --json %s", g_dir, HM_BIN_DIR, args);
    int rc = tu_run(cmd, &out, err);
    *json = cJSON_Parse(out);
    free(out);
    return rc;
}

Test(map_ssm, mapping_is_exact)
{
    cJSON *j;
    char *err;
    int rc = verify("mapping hh.st hm.st --data data.tok --seq-len 64 --max-windows 3", &j, &err);
    cr_assert_eq(rc, 0, "verify exit %d: %s", rc, err);
    cr_assert(cJSON_IsTrue(cJSON_GetObjectItem(j, "equivalent")));
    double rel = cJSON_GetObjectItem(j, "max_rel")->valuedouble;
    cr_assert(rel <= 1e-5, "max rel %g", rel);
    cr_assert_eq(cJSON_GetArraySize(cJSON_GetObjectItem(j, "layers")), 2);
    cJSON_Delete(j);
    free(err);
    /* and with random tokens, a long sequence */
    rc = verify("mapping hh.st hm.st --random-tokens 700 --seed 3", &j, &err);
    cr_assert_eq(rc, 0, "%s", err);
    cJSON_Delete(j);
    free(err);
}

/* Rewrite g_dir/in into g_dir/out with tensor `name` edited: element index
 * set to value, or (index < 0) every element moved by ±delta (a seeded
 * random sign per element: a uniform shift would hide in the softmax's
 * shift invariance). */
static void edit_tensor(const char *in_name, const char *name, int64_t index, float value,
                        float delta, const char *out)
{
    char *in = tu_path(g_dir, in_name), *op = tu_path(g_dir, out);
    struct hm_st_file *f;
    cr_assert_eq(hm_st_open(in, &f, NULL), HM_OK);
    struct hm_st_writer *w = hm_st_writer_new();
    float *copy = NULL;
    for (int64_t i = 0; i < hm_st_n_tensors(f); i++) {
        const struct hm_st_tensor *t = hm_st_tensor_at(f, i);
        const void *data = hm_st_data_view(f, i);
        if (strcmp(t->name, name) == 0) {
            cr_assert_eq(t->dtype, HM_DTYPE_F32);
            copy = malloc(t->nbytes);
            memcpy(copy, data, t->nbytes);
            uint64_t s = 17;
            for (int64_t k = 0; k < t->numel && index < 0; k++)
                copy[k] += (tu_rand_u64(&s) & 1) ? delta : -delta;
            if (index >= 0)
                copy[index] = value;
            data = copy;
        }
        cr_assert_eq(hm_st_writer_add(w, t->name, t->dtype, t->ndim, t->shape, data, NULL), HM_OK);
    }
    cr_assert_not_null(copy, "no tensor %s", name);
    for (int64_t i = 0; i < hm_st_n_metadata(f); i++)
        hm_st_writer_set_metadata(w, hm_st_metadata_key(f, i), hm_st_metadata_value(f, i), NULL);
    cr_assert_eq(hm_st_writer_write_path(w, op, 1, NULL), HM_OK);
    hm_st_writer_free(w);
    hm_st_close(f);
    free(copy);
    free(in);
    free(op);
}

/* hm.st with `name` perturbed by ±delta. */
static void perturb(const char *name, float delta, const char *out)
{
    edit_tensor("hm.st", name, -1, 0.0f, delta, out);
}

Test(map_ssm, any_perturbed_tensor_is_caught_with_its_layer)
{
    const char *names[] = {"conv1d.weight", "conv1d.bias", "dt_proj.weight", "A", "D",
                           "gate_proj.weight", "gate_proj.bias", "feature_map_q.weight",
                           "feature_map_k.bias", "query_key_value.weight", "dense.bias"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        char full[256], args[512];
        snprintf(full, sizeof full, "gpt_neox.layers.1.attention.%s", names[i]);
        perturb(full, 1e-3f, "bad.st");
        snprintf(args, sizeof args, "mapping hh.st bad.st --data data.tok --seq-len 64");
        cJSON *j;
        char *err;
        int rc = verify(args, &j, &err);
        cr_expect_eq(rc, 1, "%s perturbed by 1e-3: exit %d (%s)", names[i], rc, err);
        if (rc == 1) {
            cJSON *where = cJSON_GetObjectItem(j, "where");
            cr_expect_eq((int)cJSON_GetObjectItem(where, "layer")->valuedouble, 1,
                         "%s: reported at the wrong layer", names[i]);
            cr_expect_str_eq(cJSON_GetObjectItem(where, "what")->valuestring, "mixer");
        }
        cJSON_Delete(j);
        free(err);
    }
    /* The one exact symmetry of the mapping: with A = 0, a per-head constant
     * Δ scales the numerator and the ones-channel normalizer alike, so a
     * perturbed dt_proj.bias gives an equivalent model (up to ε). */
    perturb("gpt_neox.layers.1.attention.dt_proj.bias", 1e-3f, "sym.st");
    cJSON *j;
    char *err;
    cr_expect_eq(verify("mapping hh.st sym.st --data data.tok --seq-len 64", &j, &err), 0);
    cJSON_Delete(j);
    free(err);
}

Test(map_ssm, exit_codes_and_recurrent)
{
    cJSON *j;
    char *err;
    cr_assert_eq(verify("mapping hh.st missing.st --random-tokens 8", &j, &err), 2);
    cr_assert(strstr(err, "'missing.st'"), "%s", err);
    cJSON_Delete(j);
    free(err);
    cr_assert_eq(verify("mapping hh.st hm.st", &j, &err), 2); /* no tokens: usage */
    cJSON_Delete(j);
    free(err);
    /* chunked vs token-by-token, both archs */
    int rc = verify("recurrent hm.st --random-tokens 300", &j, &err);
    cr_assert_eq(rc, 0, "%s", err);
    cr_assert(cJSON_GetObjectItem(j, "max_rel")->valuedouble <= 1e-5);
    cJSON_Delete(j);
    free(err);
    rc = verify("recurrent hh.st --data data.tok --seq-len 100 --max-windows 2", &j, &err);
    cr_assert_eq(rc, 0, "%s", err);
    cJSON_Delete(j);
    free(err);
}

Test(map_ssm, logits_against_a_stored_reference)
{
    char cmd[4096], *err = NULL;
    snprintf(cmd, sizeof cmd,
             "cd %s && %s/hm-eval hh.st --data data.tok --seq-len 48 --max-tokens 144 "
             "--dump-logits ref.st -q > /dev/null", g_dir, HM_BIN_DIR);
    cr_assert_eq(tu_run(cmd, NULL, &err), 0, "%s", err);
    free(err);
    cJSON *j;
    /* the mapped model reproduces the hedgehog's stored logits */
    int rc = verify("logits hm.st --reference ref.st --data data.tok", &j, &err);
    cr_assert_eq(rc, 0, "%s", err);
    cr_assert(cJSON_GetObjectItem(j, "max_rel")->valuedouble <= 1e-5);
    cJSON_Delete(j);
    free(err);
    /* a perturbed model does not */
    perturb("gpt_neox.layers.0.attention.gate_proj.weight", 1e-3f, "bad.st");
    rc = verify("logits bad.st --reference ref.st --data data.tok --tolerance 1e-5", &j, &err);
    cr_assert_eq(rc, 1, "%s", err);
    cJSON_Delete(j);
    free(err);
    /* a reference of other windows cannot be checked */
    rc = verify("logits hm.st --reference hh.st --data data.tok", &j, &err);
    cr_assert_eq(rc, 2);
    cr_assert(strstr(err, "no F32 tensor 'logits'"), "%s", err);
    cJSON_Delete(j);
    free(err);
}

Test(map_ssm, inactive_components_stay_at_identity)
{
    char cmd[4096], *err;
    snprintf(cmd, sizeof cmd,
             "cd %s && %s/hm-map-ssm hh.st -o ssm-only.st --components ssm -q && "
             "%s/hm-finetune ssm-only.st -o tuned.st --data data.tok --steps 6 --batch 2 "
             "--seq-len 32 --lr 1e-2 -q",
             g_dir, HM_BIN_DIR, HM_BIN_DIR);
    cr_assert_eq(tu_run(cmd, NULL, &err), 0, "%s", err);
    free(err);
    char *a = tu_path(g_dir, "ssm-only.st"), *b = tu_path(g_dir, "tuned.st");
    struct hm_st_file *fa, *fb;
    cr_assert_eq(hm_st_open(a, &fa, NULL), HM_OK);
    cr_assert_eq(hm_st_open(b, &fb, NULL), HM_OK);
    int changed_ssm = 0;
    for (int64_t i = 0; i < hm_st_n_tensors(fa); i++) {
        const struct hm_st_tensor *t = hm_st_tensor_at(fa, i);
        int64_t j = hm_st_find(fb, t->name);
        cr_assert_geq(j, 0);
        int same = memcmp(hm_st_data_view(fa, i), hm_st_data_view(fb, j), t->nbytes) == 0;
        if (strstr(t->name, "conv1d.") || strstr(t->name, "gate_proj.") ||
            strstr(t->name, "embed_in") || strstr(t->name, "embed_out"))
            cr_expect(same, "frozen tensor '%s' changed", t->name);
        if (strstr(t->name, "dt_proj.weight") && !same)
            changed_ssm = 1;
        if (strstr(t->name, ".attention.A")) {
            const float *A = hm_st_data_view(fb, j);
            for (int64_t k = 0; k < t->numel; k++)
                cr_expect(A[k] <= 0.0f, "A[%lld] = %g > 0 after training", (long long)k, A[k]);
        }
    }
    cr_expect(changed_ssm, "the active ssm component did not train");
    cJSON *cfg = cJSON_Parse(hm_st_metadata_get(fb, "hm.config"));
    cJSON *comp = cJSON_GetObjectItem(cfg, "components");
    cr_assert_eq(cJSON_GetArraySize(comp), 1);
    cr_assert_str_eq(cJSON_GetArrayItem(comp, 0)->valuestring, "ssm");
    cJSON_Delete(cfg);
    hm_st_close(fa);
    hm_st_close(fb);
    free(a);
    free(b);
}

Test(map_ssm, naive_and_skip_stage1_baselines)
{
    char cmd[4096], *err;
    snprintf(cmd, sizeof cmd,
             "cd %s && %s/hm-map-ssm hh.st -o naive.st --init random --seed 9 -q && "
             "%s/hm-map-ssm hh.st -o naive2.st --init random --seed 9 -q",
             g_dir, HM_BIN_DIR, HM_BIN_DIR);
    cr_assert_eq(tu_run(cmd, NULL, &err), 0, "%s", err);
    free(err);
    {
        /* seeded: the same tensors (the files differ in provenance only) */
        char *a = tu_path(g_dir, "naive.st"), *b = tu_path(g_dir, "naive2.st");
        struct hm_st_file *fa, *fb;
        cr_assert_eq(hm_st_open(a, &fa, NULL), HM_OK);
        cr_assert_eq(hm_st_open(b, &fb, NULL), HM_OK);
        cr_assert_eq(hm_st_n_tensors(fa), hm_st_n_tensors(fb));
        for (int64_t t = 0; t < hm_st_n_tensors(fa); t++)
            cr_assert(memcmp(hm_st_data_view(fa, t), hm_st_data_view(fb, t),
                             hm_st_tensor_at(fa, t)->nbytes) == 0,
                      "naive init differs in '%s'", hm_st_tensor_at(fa, t)->name);
        hm_st_close(fa);
        hm_st_close(fb);
        free(a);
        free(b);
    }
    char *p = tu_path(g_dir, "naive.st"), *q = tu_path(g_dir, "hh.st");
    struct hm_st_file *f, *h;
    cr_assert_eq(hm_st_open(p, &f, NULL), HM_OK);
    cr_assert_eq(hm_st_open(q, &h, NULL), HM_OK);
    /* MLP and norms copied; qkv re-drawn with std 0.02; A = -1; gate bias identity */
    const char *copied = "gpt_neox.layers.0.mlp.dense_h_to_4h.weight";
    int64_t i = hm_st_find(f, copied), k = hm_st_find(h, copied);
    cr_assert(memcmp(hm_st_data_view(f, i), hm_st_data_view(h, k), hm_st_tensor_at(f, i)->nbytes) == 0);
    i = hm_st_find(f, "gpt_neox.layers.0.attention.query_key_value.weight");
    const float *w = hm_st_data_view(f, i);
    double ss = 0;
    for (int64_t n = 0; n < hm_st_tensor_at(f, i)->numel; n++)
        ss += (double)w[n] * w[n];
    double std = sqrt(ss / (double)hm_st_tensor_at(f, i)->numel);
    cr_expect(fabs(std - 0.02) < 0.002, "qkv std %g", std);
    const float *A = hm_st_data_view(f, hm_st_find(f, "gpt_neox.layers.1.attention.A"));
    cr_expect_eq(A[0], -1.0f);
    const float *gb = hm_st_data_view(f, hm_st_find(f, "gpt_neox.layers.1.attention.gate_proj.bias"));
    cr_expect_eq(gb[3], (float)1.2784645427610738);
    hm_st_close(f);
    hm_st_close(h);
    free(p);
    free(q);
}

/* ---- hm-map-ssm --decay-from: A from the teacher's attention -------------------- */

/* A tiny neox teacher; q/k rows of every layer scaled by qk_scale so that
 * its attention is far from uniform. */
static struct hm_model *decay_teacher(uint64_t seed, double qk_scale, double rotary_pct)
{
    struct hm_config c;
    hm_config_defaults(&c);
    c.vocab_size = 61;
    c.hidden_size = 32;
    c.num_hidden_layers = 2;
    c.num_attention_heads = 4;
    c.intermediate_size = 48;
    c.rotary_pct = rotary_pct;
    cr_assert_eq(hm_config_finish(&c, NULL), HM_OK);
    struct hm_model *m;
    cr_assert_eq(hm_model_new(&c, &m, NULL), HM_OK);
    hm_model_init_random(m, seed, 0.3);
    const int64_t d = c.hidden_size, p = c.head_dim;
    for (int64_t l = 0; l < c.num_hidden_layers; l++)
        for (int64_t r = 0; r < 3 * d; r++)
            if ((r % (3 * p)) / p < 2) /* q and k rows of the fused layout */
                for (int64_t i = 0; i < d; i++)
                    m->layers[l].qkv_w[r * d + i] *= (float)qk_scale;
    return m;
}

static int32_t *random_tokens(int64_t n, int64_t V, uint64_t seed)
{
    int32_t *t = malloc(sizeof(int32_t) * (size_t)n);
    for (int64_t i = 0; i < n; i++)
        t[i] = (int32_t)(tu_rand_u64(&seed) % (uint64_t)V);
    return t;
}

/* md of one layer's fused rotated qkv [T, 3d] (double), by its own loops. */
static void ref_distance(const double *qkv, int64_t T, int64_t nh, int64_t p, double *md)
{
    const int64_t row = 3 * nh * p;
    double *e = malloc(sizeof(double) * (size_t)T);
    for (int64_t h = 0; h < nh; h++)
        for (int64_t t = 0; t < T; t++) {
            double mx = -INFINITY, z = 0, zd = 0;
            for (int64_t s = 0; s <= t; s++) {
                double dot = 0;
                for (int64_t i = 0; i < p; i++)
                    dot += qkv[t * row + h * 3 * p + i] * qkv[s * row + h * 3 * p + p + i];
                e[s] = dot / sqrt((double)p);
                mx = fmax(mx, e[s]);
            }
            for (int64_t s = 0; s <= t; s++) {
                z += exp(e[s] - mx);
                zd += exp(e[s] - mx) * (double)(t - s);
            }
            md[h] += zd / z;
        }
    free(e);
}

Test(map_decay, distance_matches_an_independent_softmax)
{
    struct hm_model *m = decay_teacher(11, 4.0, 0.5);
    const struct hm_config *c = &m->cfg;
    const int64_t W = 3, T = 37, L = c->num_hidden_layers, nh = c->num_attention_heads;
    const int64_t d = c->hidden_size;
    int32_t *tok = random_tokens(W * T, c->vocab_size, 5);
    /* the reference: tests/support/ref_neox.c's double forward, own softmax */
    int64_t nw;
    double *w = tu_ref_params_from_model(m, &nw);
    double *qkv = malloc(sizeof(double) * (size_t)(L * T * 3 * d));
    double *o = malloc(sizeof(double) * (size_t)(L * T * d));
    double *want = calloc((size_t)(L * nh), sizeof(double)), got[8];
    for (int64_t k = 0; k < W; k++) {
        tu_ref_neox_layers(c, w, tok + k * T, T, qkv, o);
        for (int64_t l = 0; l < L; l++)
            ref_distance(qkv + l * T * 3 * d, T, nh, c->head_dim, want + l * nh);
    }
    const struct hm_backend *be = hm_backend_get("fast");
    struct hm_error err;
    cr_assert_eq(hm_model_place(m, be, &err), HM_OK, "%s", err.msg);
    cr_assert_eq(hm_decay_attn_distance(m, be, tok, W, T, got, &err), HM_OK, "%s", err.msg);
    double worst = 0, far = 0;
    for (int64_t i = 0; i < L * nh; i++) {
        want[i] /= (double)(W * T);
        worst = fmax(worst, fabs(got[i] - want[i]));
        far = fmax(far, fabs(want[i] - (T - 1) / 4.0));
        cr_expect(got[i] >= 0 && got[i] <= (T - 1) / 2.0, "md[%lld] = %g", (long long)i, got[i]);
    }
    /* observed 4.9e-6 (fp32 q, k vs the double forward) */
    cr_expect(worst < 1e-4, "md differs from the reference by %g", worst);
    cr_expect(far > 1.0, "every head is near-uniform (max |md - (T-1)/4| = %g): tests nothing",
              far);
    free(w), free(qkv), free(o), free(want), free(tok);
    hm_model_free(m);
}

/* GQA: the hook's q, k are per query head, so a llama with 2 kv heads gives
 * the md of the same model with each kv head copied to its query heads. */
Test(map_decay, gqa_equals_its_expansion)
{
    struct hm_config c;
    hm_config_defaults(&c);
    c.family = HM_FAMILY_LLAMA;
    c.vocab_size = 41;
    c.hidden_size = 32;
    c.num_hidden_layers = 2;
    c.num_attention_heads = 4;
    c.num_key_value_heads = 2;
    c.intermediate_size = 40;
    c.max_position_embeddings = 128;
    cr_assert_eq(hm_config_finish(&c, NULL), HM_OK);
    struct hm_config e = c;
    e.num_key_value_heads = 4;
    cr_assert_eq(hm_config_finish(&e, NULL), HM_OK);
    struct hm_model *g, *x;
    cr_assert_eq(hm_model_new(&c, &g, NULL), HM_OK);
    cr_assert_eq(hm_model_new(&e, &x, NULL), HM_OK);
    hm_model_init_random(g, 3, 0.5);
    const int64_t p = c.head_dim, d = c.hidden_size, nh = 4;
    for (int64_t i = 0; i < x->n_views; i++) {
        const struct hm_tensor_view *v = &x->views[i];
        const struct hm_tensor_view *s = NULL;
        for (int64_t j = 0; j < g->n_views; j++)
            if (strcmp(g->views[j].spec.name, v->spec.name) == 0)
                s = &g->views[j];
        cr_assert_not_null(s, "%s", v->spec.name);
        if (s->numel == v->numel) {
            memcpy(v->data, s->data, sizeof(float) * (size_t)v->numel);
            continue;
        }
        for (int64_t h = 0; h < nh; h++) /* k_proj / v_proj: head h reads group h / 2 */
            memcpy(v->data + h * p * d, s->data + (h / 2) * p * d, sizeof(float) * (size_t)(p * d));
    }
    const int64_t W = 2, T = 29;
    int32_t *tok = random_tokens(W * T, c.vocab_size, 9);
    const struct hm_backend *be = hm_backend_get("fast");
    double mg[8], mx[8];
    cr_assert_eq(hm_model_place(g, be, NULL), HM_OK);
    cr_assert_eq(hm_model_place(x, be, NULL), HM_OK);
    cr_assert_eq(hm_decay_attn_distance(g, be, tok, W, T, mg, NULL), HM_OK);
    cr_assert_eq(hm_decay_attn_distance(x, be, tok, W, T, mx, NULL), HM_OK);
    for (int64_t i = 0; i < 2 * nh; i++)
        /* observed 7e-8: the fast q/k/v product of 8 vs 12 heads rounds apart */
        cr_expect(fabs(mg[i] - mx[i]) <= 1e-6 * (1 + mx[i]), "head %lld: GQA %.12g, MHA %.12g",
                  (long long)i, mg[i], mx[i]);
    free(tok);
    hm_model_free(g);
    hm_model_free(x);
}

/* G_T(α) by its definition, with pow. */
static double ref_G(double a, int64_t T)
{
    double total = 0;
    for (int64_t t = 0; t < T; t++) {
        double s0 = 0, s1 = 0;
        for (int64_t k = 0; k <= t; k++) {
            s0 += pow(a, (double)k);
            s1 += (double)k * pow(a, (double)k);
        }
        total += s1 / s0;
    }
    return total / (double)T;
}

Test(map_decay, bisection_solves_the_mean_distance)
{
    const int64_t Ts[] = {2, 3, 16, 256, 1024};
    for (size_t i = 0; i < sizeof Ts / sizeof *Ts; i++) {
        const int64_t T = Ts[i];
        const double g1 = (double)(T - 1) / 4.0;
        cr_expect(fabs(hm_decay_mean_distance(1.0, T) - g1) <= 1e-12 * T, "G_%lld(1)",
                  (long long)T);
        const double as[] = {0.0, 0.3, 0.9, 0.999};
        for (size_t k = 0; k < sizeof as / sizeof *as; k++)
            cr_expect(fabs(hm_decay_mean_distance(as[k], T) - ref_G(as[k], T)) <= 1e-10 * (1 + g1),
                      "G_%lld(%g)", (long long)T, as[k]);
        const double fr[] = {1e-9, 1e-3, 0.1, 0.5, 0.9, 0.999, 0.999999};
        double prev = 0;
        for (size_t k = 0; k < sizeof fr / sizeof *fr; k++) {
            double md = fr[k] * g1, a = hm_decay_alpha(md, T);
            cr_expect(a > 0 && a <= 1, "alpha %g", a);
            cr_expect(a > prev, "alpha is not increasing in md");
            prev = a;
            double g = hm_decay_mean_distance(a, T);
            cr_expect(fabs(g - md) <= 1e-9, "T %lld md %.17g: G(alpha = %.17g) = %.17g",
                      (long long)T, md, a, g);
        }
        /* the α = 1 edge: md at or above G(1) (uniform attention) is no decay */
        cr_expect_eq(hm_decay_alpha(g1, T), 1.0);
        cr_expect_eq(hm_decay_alpha(g1 + 1, T), 1.0);
        cr_expect_eq(log(hm_decay_alpha(g1, T)), 0.0);
        /* attention only to itself: the floor, A finite */
        cr_expect_eq(hm_decay_alpha(0.0, T), HM_DECAY_ALPHA_MIN);
        cr_expect(isfinite(log(hm_decay_alpha(0.0, T))));
    }
    cr_expect_eq(hm_decay_alpha(0.0, 1), 1.0); /* T = 1: G ≡ 0 */
}

/* The whole tool: a teacher whose heads 0 and 1 of every layer attend
 * locally and heads 2 and 3 uniformly (q = k = 0), its hedgehog, and the
 * mapped model. Local: q = k = a (e_1 + e_5) before rotary (p = 8, all dims
 * rotate), so the score is 2a² cos(0.1 (t − s)) / sqrt(8), about
 * c − c (t − s)² / 200 with c = 20 (head 0) or 5 (head 1): a Gaussian
 * window of a few tokens (σ² = 100 / c). */
Test(map_decay, tool_local_heads_decay_and_mapping_holds, .timeout = 300)
{
    char *dir = tu_mkdtemp("mapdecay");
    struct hm_model *t = decay_teacher(13, 1.0, 1.0);
    const struct hm_config *c = &t->cfg;
    const int64_t d = c->hidden_size, p = c->head_dim, L = c->num_hidden_layers;
    for (int64_t l = 0; l < L; l++)
        for (int64_t h = 0; h < 4; h++)
            for (int64_t s = 0; s < 2; s++)
                for (int64_t i = 0; i < p; i++) {
                    int64_t r = h * 3 * p + s * p + i;
                    memset(t->layers[l].qkv_w + r * d, 0, sizeof(float) * (size_t)d);
                    double a = sqrt(sqrt(8.0) * (h == 0 ? 20.0 : 5.0) / 2);
                    t->layers[l].qkv_b[r] = h < 2 && (i == 1 || i == 5) ? (float)a : 0.0f;
                }
    struct hm_config hc = *c;
    hc.mixer = HM_MIXER_HEDGEHOG;
    hc.feature_dim = 5;
    cr_assert_eq(hm_config_finish(&hc, NULL), HM_OK);
    struct hm_model *hh;
    cr_assert_eq(hm_model_new(&hc, &hh, NULL), HM_OK);
    hm_model_init_random(hh, 99, 0.3); /* feature maps not the identity */
    for (int64_t i = 0; i < t->n_views; i++)
        for (int64_t j = 0; j < hh->n_views; j++)
            if (strcmp(t->views[i].spec.name, hh->views[j].spec.name) == 0)
                memcpy(hh->views[j].data, t->views[i].data,
                       sizeof(float) * (size_t)t->views[i].numel);
    char *tp = tu_path(dir, "teacher.st"), *hp = tu_path(dir, "hh.st");
    char *dp = tu_path(dir, "data.tok");
    cr_assert_eq(hm_model_save(t, tp, 0, NULL, HM_DTYPE_F32, NULL, NULL), HM_OK);
    cr_assert_eq(hm_model_save(hh, hp, 0, NULL, HM_DTYPE_F32, NULL, NULL), HM_OK);
    struct hm_tok_writer *tw;
    cr_assert_eq(hm_tok_writer_open(dp, (uint64_t)c->vocab_size, 0, 0, &tw, NULL), HM_OK);
    int32_t *tok = random_tokens(1000, c->vocab_size, 17);
    cr_assert_eq(hm_tok_writer_append(tw, tok, 1000, NULL), HM_OK);
    cr_assert_eq(hm_tok_writer_commit(tw, NULL), HM_OK);
    free(tok);
    hm_model_free(t);
    hm_model_free(hh);
    char cmd[4096], *out = NULL, *err = NULL;
    snprintf(cmd, sizeof cmd,
             "cd %s && %s/hm-map-ssm hh.st -o dec.st --decay-from data.tok --decay-windows 3 "
             "--seq-len 64 --json && %s/hm-map-ssm teacher.st -o dec2.st --decay-from data.tok "
             "--decay-windows 3 --seq-len 64 -q", dir, HM_BIN_DIR, HM_BIN_DIR);
    cr_assert_eq(tu_run(cmd, &out, &err), 0, "%s", err);
    cJSON *j = cJSON_Parse(out), *dec = cJSON_GetObjectItem(j, "decay");
    cr_assert_not_null(dec, "%s", out);
    cr_expect_eq(cJSON_GetObjectItem(dec, "windows")->valuedouble, 3);
    free(out), free(err);
    /* the stored A: local heads decay, uniform heads do not; the JSON and
     * the teacher itself give the same values */
    char *op = tu_path(dir, "dec.st"), *op2 = tu_path(dir, "dec2.st");
    struct hm_st_file *f, *f2;
    cr_assert_eq(hm_st_open(op, &f, NULL), HM_OK);
    cr_assert_eq(hm_st_open(op2, &f2, NULL), HM_OK);
    for (int64_t l = 0; l < L; l++) {
        char name[128];
        snprintf(name, sizeof name, "gpt_neox.layers.%lld.attention.A", (long long)l);
        const float *A = hm_st_data_view(f, hm_st_find(f, name));
        const float *A2 = hm_st_data_view(f2, hm_st_find(f2, name));
        cJSON *jA = cJSON_GetArrayItem(cJSON_GetObjectItem(dec, "A"), (int)l);
        cJSON *jm = cJSON_GetArrayItem(cJSON_GetObjectItem(dec, "md"), (int)l);
        for (int h = 0; h < 4; h++) {
            double md = cJSON_GetArrayItem(jm, h)->valuedouble;
            cr_expect(memcmp(&A[h], &A2[h], sizeof(float)) == 0, "teacher and hedgehog differ");
            cr_expect_eq((float)cJSON_GetArrayItem(jA, h)->valuedouble, A[h]);
            /* observed md 2.95 (A −0.266) and 5.61 (A −0.134) of G(1) = 15.75 */
            if (h < 2)
                cr_expect(md < (h ? 7.0 : 4.0) && A[h] < (h ? -0.1f : -0.2f),
                          "local head %lld.%d: md %g, A %g", (long long)l, h, md, A[h]);
            else
                cr_expect(A[h] <= 0.0f && A[h] > -1e-6f && fabs(md - 63 / 4.0) < 1e-9,
                          "uniform head %lld.%d: md %g, A %g", (long long)l, h, md, A[h]);
        }
    }
    cJSON *cfg = cJSON_Parse(hm_st_metadata_get(f, "hm.config"));
    cr_expect_str_eq(cJSON_GetObjectItem(cfg, "decay_init")->valuestring, "teacher");
    cJSON_Delete(cfg);
    cJSON *prov = cJSON_Parse(hm_st_metadata_get(f, "hm.provenance"));
    cJSON *last = cJSON_GetArrayItem(prov, cJSON_GetArraySize(prov) - 1);
    cJSON *in2 = cJSON_GetArrayItem(cJSON_GetObjectItem(last, "inputs"), 1);
    cr_expect_str_eq(cJSON_GetObjectItem(in2, "path")->valuestring, "data.tok");
    cr_expect_eq(strlen(cJSON_GetObjectItem(in2, "xxh3")->valuestring), 16);
    cJSON_Delete(prov);
    hm_st_close(f);
    hm_st_close(f2);
    cJSON_Delete(j);
    /* hm-verify mapping: everything but A is the exact mapping */
    snprintf(cmd, sizeof cmd, "cd %s && %s/hm-verify --json mapping hh.st dec.st --data data.tok "
             "--seq-len 64", dir, HM_BIN_DIR);
    int rc = tu_run(cmd, &out, &err);
    cr_assert_eq(rc, 0, "exit %d: %s %s", rc, out, err);
    j = cJSON_Parse(out);
    cr_expect_str_eq(cJSON_GetObjectItem(j, "decay_init")->valuestring, "teacher");
    cr_expect(strstr(cJSON_GetObjectItem(j, "note")->valuestring, "checked with A = 0"));
    cJSON_Delete(j);
    free(out), free(err);
    /* an A > 0 is no decay: not equivalent, naming the tensor */
    g_dir = dir;
    edit_tensor("dec.st", "gpt_neox.layers.1.attention.A", 2, 0.25f, 0.0f, "pos.st");
    snprintf(cmd, sizeof cmd, "cd %s && %s/hm-verify mapping hh.st pos.st --data data.tok "
             "--seq-len 64", dir, HM_BIN_DIR);
    rc = tu_run(cmd, &out, &err);
    cr_expect_eq(rc, 1, "A > 0: exit %d: %s", rc, out);
    cr_expect(strstr(out, "'gpt_neox.layers.1.attention.A' head 2"), "%s", out);
    free(out), free(err);
    free(tp), free(hp), free(dp), free(op), free(op2), free(dir);
}
