/* Stage 2 end to end: hm-map-ssm is exact on random Hedgehog checkpoints
 * whose feature maps are not the identity (hm-verify mapping exit 0), any
 * single mapped tensor perturbed by 1e-3 is caught with its location (exit
 * 1), unreadable inputs give exit 2; the recurrent form equals the chunked
 * one; inactive components stay at their identity values through
 * hm-finetune and A stays ≤ 0; the naive baseline follows contract §3. */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_views.h"
#include "presets.h"
#include "safetensors.h"
#include "testutil.h"

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

/* Rewrite hm.st with `name` perturbed by ±delta (a seeded random sign per
 * element: a uniform shift would hide in the softmax's shift invariance). */
static void perturb(const char *name, float delta, const char *out)
{
    char *in = tu_path(g_dir, "hm.st"), *op = tu_path(g_dir, out);
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
            for (int64_t k = 0; k < t->numel; k++)
                copy[k] += (tu_rand_u64(&s) & 1) ? delta : -delta;
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
