/* test_eval.c — the built hm-eval on fixtures: PPL = exp(mean NLL) with the
 * NLL recomputed here from --dump-logits (own log-softmax in double), window
 * semantics (incomplete last window dropped), --max-tokens, bits per byte,
 * backends, multiple choice and error exits; and the library's batched NLL
 * and logits (hm_model_nll_batch, hm_model_forward_batch) against B = 1 for
 * every family × mixer. */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bundle_fixture.h"
#include "checkpoint.h"
#include "fixture.h"
#include "model.h"
#include "model_forward.h"
#include "safetensors.h"
#include "testutil.h"
#include "tokfile.h"

#define EVAL HM_BIN_DIR "/hm-eval"

TestSuite(eval, .timeout = 120);

static char *make_model(const char *tag, int64_t V)
{
    struct hm_config c;
    hm_config_defaults(&c);
    c.hidden_size = 32; /* p = 16, r = 4 */
    c.num_attention_heads = 2;
    c.intermediate_size = 40;
    c.vocab_size = V;
    c.num_hidden_layers = 2;
    c.max_position_embeddings = 64;
    struct hm_error err;
    cr_assert_eq(hm_config_finish(&c, &err), HM_OK, "%s", err.msg);
    char *dir = tu_mkdtemp(tag);
    struct tu_pythia_opts o = {.dtype = HM_DTYPE_F16, .seed = 11, .std = 0.2,
                               .legacy_buffers = 1, .buffer_positions = 4};
    tu_make_pythia(dir, &c, &o);
    return dir;
}

/* Token file of n ids drawn below V (every 9th is eot). owned path. */
static char *make_tokens(const char *dir, const char *name, int64_t n, int64_t V, uint32_t eot,
                         int32_t **ids_out)
{
    char *p = tu_path(dir, name);
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)n);
    uint64_t s = 99;
    for (int64_t i = 0; i < n; i++)
        ids[i] = i % 9 == 8 ? (int32_t)eot : (int32_t)(tu_rand_u64(&s) % (uint64_t)V);
    struct hm_tok_writer *w = NULL;
    struct hm_error err;
    cr_assert_eq(hm_tok_writer_open(p, (uint64_t)V, eot, HM_TOK_FORCE, &w, &err), HM_OK, "%s",
                 err.msg);
    cr_assert_eq(hm_tok_writer_append(w, ids, n, &err), HM_OK, "%s", err.msg);
    cr_assert_eq(hm_tok_writer_commit(w, &err), HM_OK, "%s", err.msg);
    if (ids_out)
        *ids_out = ids;
    else
        free(ids);
    return p;
}

static cJSON *run_json(const char *args, char **errout)
{
    char cmd[4096], *out = NULL, *err = NULL;
    snprintf(cmd, sizeof cmd, "%s %s --json", EVAL, args);
    int rc = tu_run(cmd, &out, &err);
    cr_assert_eq(rc, 0, "%s: exit %d, stderr: %s", cmd, rc, err);
    cJSON *j = cJSON_Parse(out);
    cr_assert(j, "not JSON: %s", out);
    cr_assert_eq(cJSON_GetObjectItem(j, "version")->valueint, 1);
    free(out);
    if (errout)
        *errout = err;
    else
        free(err);
    return j;
}

static double num(const cJSON *j, const char *k)
{
    const cJSON *v = cJSON_GetObjectItem(j, k);
    cr_assert(cJSON_IsNumber(v), "missing number '%s'", k);
    return v->valuedouble;
}

/* Mean NLL over the first `windows` windows of the dumped logits, in double. */
static double nll_from_dump(const char *dump, const int32_t *ids, int64_t L, int64_t V,
                            int64_t windows, int64_t *nwin)
{
    struct hm_st_file *f = NULL;
    struct hm_error err;
    cr_assert_eq(hm_st_open(dump, &f, &err), HM_OK, "%s", err.msg);
    int64_t i = hm_st_find(f, "logits");
    cr_assert_geq(i, 0);
    const struct hm_st_tensor *t = hm_st_tensor_at(f, i);
    cr_assert_eq(t->dtype, HM_DTYPE_F32);
    cr_assert_eq(t->ndim, 3);
    cr_assert_eq(t->shape[1], L);
    cr_assert_eq(t->shape[2], V);
    *nwin = t->shape[0];
    const float *lg = hm_st_data_view(f, i);
    double sum = 0;
    for (int64_t w = 0; w < windows; w++)
        for (int64_t s = 0; s < L; s++) {
            const float *row = lg + (w * L + s) * V;
            double mx = -INFINITY, z = 0;
            for (int64_t v = 0; v < V; v++)
                mx = fmax(mx, row[v]);
            for (int64_t v = 0; v < V; v++)
                z += exp((double)row[v] - mx);
            sum += mx + log(z) - row[ids[w * L + s + 1]];
        }
    hm_st_close(f);
    return sum / (double)(windows * L);
}

Test(eval, ppl_equals_exp_mean_nll_from_dumped_logits)
{
    char *dir = make_model("eval-ppl", 97);
    int32_t *ids;
    char *tok = make_tokens(dir, "t.tok", 100, 97, 0, &ids); /* 99/16 = 6 windows, 3 left */
    char *dump = tu_path(dir, "logits.safetensors");
    char args[2048];
    snprintf(args, sizeof args, "%s --data %s --seq-len 16 --dump-logits %s", dir, tok, dump);
    cJSON *j = run_json(args, NULL);
    cr_expect_eq(num(j, "windows"), 6);
    cr_expect_eq(num(j, "targets"), 96);
    cr_expect(cJSON_IsNull(cJSON_GetObjectItem(j, "bits_per_byte")));
    int64_t nwin;
    double mean = nll_from_dump(dump, ids, 16, 97, 6, &nwin);
    cr_expect_eq(nwin, 6);
    double got = num(j, "mean_nll"), ppl = num(j, "ppl");
    fprintf(stderr, "eval: mean nll %.9f (hm-eval) vs %.9f (recomputed), ppl %.6f\n", got,
            mean, ppl);
    cr_expect(fabs(got - mean) <= 1e-6 * fabs(mean), "mean nll %.9g vs %.9g", got, mean);
    cr_expect(fabs(ppl - exp(mean)) <= 1e-6 * exp(mean), "ppl %.9g vs exp %.9g", ppl, exp(mean));

    /* without the dump: same numbers (chunked NLL path); ref backend agrees */
    snprintf(args, sizeof args, "%s --data %s --seq-len 16", dir, tok);
    cJSON *j2 = run_json(args, NULL);
    cr_expect(fabs(num(j2, "mean_nll") - got) <= 1e-6 * got);
    snprintf(args, sizeof args, "%s --data %s --seq-len 16 --backend ref --threads 1", dir, tok);
    cJSON *j3 = run_json(args, NULL);
    cr_expect(fabs(num(j3, "mean_nll") - got) <= 1e-5 * got);

    /* --max-tokens caps targets to whole windows: 40 -> 2 windows */
    snprintf(args, sizeof args, "%s --data %s --seq-len 16 --max-tokens 40", dir, tok);
    cJSON *j4 = run_json(args, NULL);
    cr_expect_eq(num(j4, "windows"), 2);
    cr_expect_eq(num(j4, "targets"), 32);
    double m2 = nll_from_dump(dump, ids, 16, 97, 2, &nwin);
    cr_expect(fabs(num(j4, "mean_nll") - m2) <= 1e-6 * m2, "%.9g vs %.9g",
              num(j4, "mean_nll"), m2);

    /* an existing dump is kept without -f */
    char cmd[2048], *err = NULL;
    snprintf(cmd, sizeof cmd, "%s %s --data %s --seq-len 16 --dump-logits %s", EVAL, dir, tok,
             dump);
    cr_expect_eq(tu_run(cmd, NULL, &err), 1);
    cr_expect(strstr(err, dump) != NULL, "%s", err);
    free(err);
    cJSON_Delete(j), cJSON_Delete(j2), cJSON_Delete(j3), cJSON_Delete(j4);
    free(ids), free(tok), free(dump), free(dir);
}

Test(eval, window_boundaries)
{
    char *dir = make_model("eval-win", 97);
    int64_t n[] = {97, 96, 17, 16};   /* tokens */
    int64_t want[] = {6, 5, 1, 0};    /* windows of 16 */
    for (int k = 0; k < 4; k++) {
        char name[32], cmd[2048], *out = NULL, *err = NULL;
        snprintf(name, sizeof name, "n%lld.tok", (long long)n[k]);
        char *tok = make_tokens(dir, name, n[k], 97, 0, NULL);
        snprintf(cmd, sizeof cmd, "%s %s --data %s --seq-len 16 --json", EVAL, dir, tok);
        int rc = tu_run(cmd, &out, &err);
        if (want[k] == 0) {
            cr_expect_eq(rc, 1, "%lld tokens: rc %d", (long long)n[k], rc);
            cr_expect(strstr(err, tok) != NULL, "%s", err);
        } else {
            cr_assert_eq(rc, 0, "%s", err);
            cJSON *j = cJSON_Parse(out);
            cr_expect_eq(num(j, "windows"), want[k], "%lld tokens", (long long)n[k]);
            cr_expect_eq(num(j, "targets"), want[k] * 16);
            cJSON_Delete(j);
        }
        free(out), free(err), free(tok);
    }
    free(dir);
}

Test(eval, bits_per_byte_and_mc)
{
    char *dir = make_model("eval-bpb", 257);
    int32_t *ids;
    char *tok = make_tokens(dir, "b.tok", 50, 257, 256, &ids);
    char args[2048];
    snprintf(args, sizeof args, "%s --data %s --seq-len 8", dir, tok);
    cJSON *j = run_json(args, NULL);
    int64_t bytes = 0;
    for (int64_t i = 1; i <= 6 * 8; i++)
        bytes += ids[i] != 256;
    double want = num(j, "mean_nll") * 48 / log(2.0) / (double)bytes;
    cr_expect(fabs(num(j, "bits_per_byte") - want) <= 1e-9 * want);
    cJSON_Delete(j);

    /* multiple choice, recomputed with the library */
    char *mc = tu_path(dir, "mc.jsonl");
    const char *lines = "{\"context\": \"The cat\", \"choices\": [\" sat\", \" xq\"], \"label\": 0}\n"
                        "\n"
                        "{\"context\": \"\", \"choices\": [\"ab\", \"b\", \"zzz\"], \"label\": 2}\n";
    tu_write_file(mc, lines, strlen(lines));
    snprintf(args, sizeof args, "%s --mc %s --bytes", dir, mc);
    j = run_json(args, NULL);
    const cJSON *m = cJSON_GetObjectItem(j, "mc");
    cr_assert(m);
    cr_expect_eq(num(m, "questions"), 2);

    struct hm_ckpt *ck;
    struct hm_model *model;
    struct hm_error err;
    cr_assert_eq(hm_ckpt_open(dir, &ck, &err), HM_OK);
    cr_assert_eq(hm_model_load(ck, &model, &err), HM_OK);
    cr_assert_eq(hm_model_place(model, hm_backend_get("ref"), &err), HM_OK, "%s", err.msg);
    struct hm_model_ws ws;
    hm_model_ws_init(&ws);
    const char *ctxs[2] = {"The cat", "\x01"}; /* "\x01" marks the eot prefix */
    const char *chs[2][3] = {{" sat", " xq", NULL}, {"ab", "b", "zzz"}};
    int labels[2] = {0, 2}, acc = 0, accn = 0;
    for (int q = 0; q < 2; q++) {
        double best = -INFINITY, bestn = -INFINITY;
        int bi = -1, bn = -1;
        for (int k = 0; k < 3 && chs[q][k]; k++) {
            int32_t seq[64];
            int n = 0;
            if (q == 1)
                seq[n++] = 256;
            else
                for (const char *p = ctxs[q]; *p; p++)
                    seq[n++] = (unsigned char)*p;
            int nctx = n;
            for (const char *p = chs[q][k]; *p; p++)
                seq[n++] = (unsigned char)*p;
            float nll[64];
            cr_assert_eq(hm_model_nll(model, hm_backend_get("ref"), seq, seq + 1, n - 1, nll, &ws,
                                     &err), HM_OK);
            double ll = 0;
            for (int t = nctx - 1; t < n - 1; t++)
                ll -= nll[t];
            double lln = ll / (double)strlen(chs[q][k]);
            if (ll > best)
                best = ll, bi = k;
            if (lln > bestn)
                bestn = lln, bn = k;
        }
        acc += bi == labels[q];
        accn += bn == labels[q];
    }
    cr_expect(fabs(num(m, "acc") - acc / 2.0) < 1e-12, "acc %g vs %g", num(m, "acc"), acc / 2.0);
    cr_expect(fabs(num(m, "acc_norm") - accn / 2.0) < 1e-12);
    hm_model_ws_release(&ws);
    hm_model_free(model);
    hm_ckpt_close(ck);
    cJSON_Delete(j);
    free(ids), free(tok), free(mc), free(dir);
}

Test(eval, errors)
{
    char *dir = make_model("eval-err", 97);
    char *tok = make_tokens(dir, "big.tok", 40, 200, 0, NULL); /* ids up to 199 >= 97 */
    char cmd[2048], *out = NULL, *err = NULL;
    snprintf(cmd, sizeof cmd, "%s %s --data %s --seq-len 8", EVAL, dir, tok);
    cr_expect_eq(tu_run(cmd, &out, &err), 1);
    cr_expect(strstr(err, "hm-eval: error: cannot read '") && strstr(err, tok) &&
              strstr(err, "outside the model vocabulary"), "%s", err);
    cr_expect_eq(strlen(out), 0);
    free(out), free(err);

    snprintf(cmd, sizeof cmd, "%s %s --data %s/missing.tok --seq-len 8", EVAL, dir, dir);
    cr_expect_eq(tu_run(cmd, &out, &err), 1);
    cr_expect(strstr(err, "hm-eval: error: cannot read '") && strstr(err, "missing.tok'"), "%s",
              err);
    free(out), free(err);

    snprintf(cmd, sizeof cmd, "%s %s/nope --data %s --seq-len 8", EVAL, dir, tok);
    cr_expect_eq(tu_run(cmd, &out, &err), 1);
    cr_expect(strstr(err, "/nope'") != NULL, "%s", err);
    free(out), free(err);

    /* --mc without a tokenizer takes a bundle's own; dir is no bundle */
    snprintf(cmd, sizeof cmd, "%s %s --mc x", EVAL, dir);
    cr_expect_eq(tu_run(cmd, &out, &err), 1);
    cr_expect(strstr(err, "holds no tokenizer; give --tokenizer FILE or --bytes"), "%s", err);
    free(out), free(err);

    const char *usage_errs[] = {"--data x", "--seq-len 4", "--mc x --tokenizer x --bytes",
                                "--data x --seq-len 0",
                                "--data x --seq-len 4 --backend gpu"};
    for (size_t k = 0; k < sizeof usage_errs / sizeof usage_errs[0]; k++) {
        snprintf(cmd, sizeof cmd, "%s %s %s", EVAL, dir, usage_errs[k]);
        cr_expect_eq(tu_run(cmd, &out, &err), 2, "%s", usage_errs[k]);
        free(out), free(err);
    }
    free(tok), free(dir);
}

/* ---- batched windows (the library) ------------------------------------------- */

/* W windows of T cut from one token stream as hm-eval cuts them, evaluated
 * one at a time and then in batches of B (the last one partial where B does
 * not divide W), through one ws that grows and is reused: each window's
 * NLLs (relative) and logits (max |Δ| / max |logit|) must match B = 1's
 * to 1e-5. Observed: fast (OpenBLAS blocks more rows differently) nll
 * ≤ 4e-7, logits ≤ 9e-7; ref 0 (bit for bit). */
static void batch_matches_single(enum hm_family fam, enum hm_mixer mix)
{
    char *dir = tu_mkdtemp("eval-batch");
    char *path = tu_path(dir, "m.safetensors");
    tu_bundle_model(path, fam, mix, HM_DTYPE_F32, NULL, 21 + (uint64_t)fam * 3 + (uint64_t)mix);
    struct hm_ckpt *ck;
    struct hm_model *m;
    struct hm_error err;
    cr_assert_eq(hm_ckpt_open(path, &ck, &err), HM_OK, "%s", err.msg);
    cr_assert_eq(hm_model_load(ck, &m, &err), HM_OK, "%s", err.msg);
    hm_ckpt_close(ck);
    const int64_t W = 7, T = 37, V = m->cfg.vocab_size;
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)(W * T + 1));
    uint64_t s = 5;
    for (int64_t i = 0; i <= W * T; i++)
        ids[i] = (int32_t)(tu_rand_u64(&s) % (uint64_t)V);
    int32_t *in = malloc(sizeof(int32_t) * (size_t)(W * T)); /* [W, T] */
    int32_t *tg = malloc(sizeof(int32_t) * (size_t)(W * T)); /* [W, T] */
    for (int64_t w = 0; w < W; w++)
        for (int64_t t = 0; t < T; t++) {
            in[w * T + t] = ids[w * T + t];
            tg[w * T + t] = ids[w * T + t + 1];
        }
    float *one = malloc(sizeof(float) * (size_t)(W * T)); /* [W, T] B = 1 */
    float *got = malloc(sizeof(float) * (size_t)(W * T)); /* [W, T] batched */
    float *lg1 = malloc(sizeof(float) * (size_t)(W * T * V)); /* [W, T, V] */
    float *lgb = malloc(sizeof(float) * (size_t)(W * T * V));
    const char *bes[2] = {"fast", "ref"};
    const int64_t Bs[] = {2, 3, 7, 4};
    for (int k = 0; k < 2; k++) {
        const struct hm_backend *be = hm_backend_get(bes[k]);
        cr_assert_eq(hm_model_place(m, be, &err), HM_OK, "%s", err.msg); /* moved per backend */
        struct hm_model_ws ws1, wsb;
        hm_model_ws_init(&ws1);
        hm_model_ws_init(&wsb);
        for (int64_t w = 0; w < W; w++) {
            cr_assert_eq(hm_model_nll(m, be, in + w * T, tg + w * T, T, one + w * T, &ws1, &err),
                         HM_OK, "%s", err.msg);
            cr_assert_eq(hm_model_forward(m, be, in + w * T, T, lg1 + w * T * V, &ws1, &err),
                         HM_OK, "%s", err.msg);
        }
        for (size_t bi = 0; bi < sizeof Bs / sizeof Bs[0]; bi++) {
            const int64_t B = Bs[bi];
            for (int64_t w0 = 0; w0 < W; w0 += B) {
                const int64_t n = W - w0 < B ? W - w0 : B;
                cr_assert_eq(hm_model_nll_batch(m, be, in + w0 * T, tg + w0 * T, n, T,
                                                got + w0 * T, &wsb, &err), HM_OK, "%s", err.msg);
                cr_assert_eq(hm_model_forward_batch(m, be, in + w0 * T, NULL, n, T,
                                                    lgb + w0 * T * V, NULL, &wsb, &err),
                             HM_OK, "%s", err.msg);
            }
            double worst = 0, worst_lg = 0;
            for (int64_t i = 0; i < W * T; i++) {
                double d = fabs((double)got[i] - one[i]) / (fabs(one[i]) + 1e-3);
                worst = fmax(worst, d);
                cr_expect(d <= 1e-5, "%s %s %s B=%lld: window %lld row %lld nll %.9g vs %.9g",
                          hm_family_name(fam), hm_mixer_name(mix), bes[k], (long long)B,
                          (long long)(i / T), (long long)(i % T), got[i], one[i]);
            }
            double mx = 0; /* logits: max |Δ| / max |logit| (contract §7) */
            for (int64_t i = 0; i < W * T * V; i++) {
                worst_lg = fmax(worst_lg, fabs((double)lgb[i] - lg1[i]));
                mx = fmax(mx, fabs(lg1[i]));
            }
            worst_lg /= mx;
            cr_expect(worst_lg <= 1e-5, "%s %s %s B=%lld: logits differ by %.3g (relative)",
                      hm_family_name(fam), hm_mixer_name(mix), bes[k], (long long)B, worst_lg);
            fprintf(stderr,
                    "eval batch %-5s %-10s %-4s B=%lld: max rel diff nll %.2e logits %.2e\n",
                    hm_family_name(fam), hm_mixer_name(mix), bes[k], (long long)B, worst,
                    worst_lg);
        }
        hm_model_ws_release(&ws1);
        hm_model_ws_release(&wsb);
    }
    /* the estimate tools size batches with grows with B, by less than B times (the mixer
     * workspace is one sequence's, shared), and reports an overflow as SIZE_MAX */
    const struct hm_backend *fast = hm_backend_get("fast");
    size_t b1 = hm_model_ws_bytes(&m->cfg, fast, 1, T), b3 = hm_model_ws_bytes(&m->cfg, fast, 3, T);
    cr_expect(b1 > 0 && b3 > 2 * b1 && b3 < 3 * b1 + 1, "ws bytes %zu (B = 1), %zu (B = 3)", b1,
              b3);
    cr_expect_eq(hm_model_ws_bytes(&m->cfg, fast, INT64_MAX / 2, T), SIZE_MAX);
    free(ids), free(in), free(tg), free(one), free(got), free(lg1), free(lgb);
    hm_model_free(m);
    free(path), free(dir);
}

Test(eval, batch_neox_softmax) { batch_matches_single(HM_FAMILY_NEOX, HM_MIXER_SOFTMAX); }
Test(eval, batch_neox_hedgehog) { batch_matches_single(HM_FAMILY_NEOX, HM_MIXER_HEDGEHOG); }
Test(eval, batch_neox_hedgemamba) { batch_matches_single(HM_FAMILY_NEOX, HM_MIXER_HEDGEMAMBA); }
Test(eval, batch_llama_softmax) { batch_matches_single(HM_FAMILY_LLAMA, HM_MIXER_SOFTMAX); }
Test(eval, batch_llama_hedgehog) { batch_matches_single(HM_FAMILY_LLAMA, HM_MIXER_HEDGEHOG); }
Test(eval, batch_llama_hedgemamba) { batch_matches_single(HM_FAMILY_LLAMA, HM_MIXER_HEDGEMAMBA); }
