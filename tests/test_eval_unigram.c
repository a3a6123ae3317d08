/* hm-eval --unigram: the add-one smoothed unigram baseline, recomputed here
 * from the token files with the same window semantics (contract §7). */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "testutil.h"
#include "tokfile.h"

/* Frees j and every string of the NULL-terminated list. */
static void release(cJSON *j, char **strs)
{
    cJSON_Delete(j);
    for (; *strs; strs++)
        free(*strs);
}

Test(eval_unigram, matches_independent_count)
{
    char *dir = tu_mkdtemp("unigram");
    char cmd[4096], *out, *err;
    snprintf(cmd, sizeof cmd,
             "cd %s && %s/hm-tokenize --bytes %s/cs336_corpus.en -o a.tok -q && "
             "%s/hm-tokenize --bytes %s/cs336_tinystories_sample.txt -o b.tok -q && "
             "%s/hm-eval --unigram a.tok --data b.tok --seq-len 50 --json",
             dir, HM_BIN_DIR, HM_SHARED_DATA, HM_BIN_DIR, HM_SHARED_DATA, HM_BIN_DIR);
    cr_assert_eq(tu_run(cmd, &out, &err), 0, "%s", err);
    cJSON *j = cJSON_Parse(out);
    cr_assert_not_null(j, "%s", out);
    char *pa = tu_path(dir, "a.tok"), *pb = tu_path(dir, "b.tok");
    struct hm_tok_file *a, *b;
    cr_assert_eq(hm_tok_open(pa, &a, NULL), HM_OK);
    cr_assert_eq(hm_tok_open(pb, &b, NULL), HM_OK);
    double cnt[257] = {0};
    for (int64_t i = 0; i < hm_tok_count(a); i++)
        cnt[hm_tok_get(a, i)]++;
    int64_t L = 50, W = (hm_tok_count(b) - 1) / L;
    double sum = 0;
    for (int64_t t = 1; t <= W * L; t++)
        sum -= log((cnt[hm_tok_get(b, t)] + 1) / ((double)hm_tok_count(a) + 257));
    double mean = sum / (double)(W * L);
    cr_assert_eq((int64_t)cJSON_GetObjectItem(j, "targets")->valuedouble, W * L);
    /* per-target NLLs pass through fp32 like every model's: 1e-6 relative */
    cr_assert_float_eq(cJSON_GetObjectItem(j, "mean_nll")->valuedouble, mean, 1e-6 * mean);
    cr_assert_float_eq(cJSON_GetObjectItem(j, "ppl")->valuedouble, exp(mean), 1e-6 * exp(mean));
    hm_tok_close(a);
    hm_tok_close(b);
    release(j, (char *[]){out, err, pa, pb, dir, NULL});
}

/* A token file's declared vocabulary costs nothing: memory follows the ids
 * it holds (a 2^31 declaration used to ask for 16 GB and fail naming no
 * file); the NLL of an unseen id is −log(1 / (N + V)) with the declared V. */
Test(eval_unigram, huge_declared_vocab_is_cheap)
{
    char *dir = tu_mkdtemp("unigram_vocab");
    char *pa = tu_path(dir, "a.tok"), *pb = tu_path(dir, "b.tok");
    const uint64_t V = (uint64_t)1 << 31;
    int32_t ids[9] = {1, 2, 3, 1, 2, 1, 5, 7, 1};
    const char *paths[2] = {pa, pb};
    for (int k = 0; k < 2; k++) {
        struct hm_tok_writer *w;
        cr_assert_eq(hm_tok_writer_open(paths[k], V, 1, 0, &w, NULL), HM_OK);
        cr_assert_eq(hm_tok_writer_append(w, ids, 9, NULL), HM_OK);
        cr_assert_eq(hm_tok_writer_commit(w, NULL), HM_OK);
    }
    char cmd[4096], *out, *err;
    /* 1 GB of address space: the old code's calloc(2^31 doubles) fails */
    snprintf(cmd, sizeof cmd,
             "ldd %s/hm-eval | grep -q libasan || ulimit -v 1000000; "
             "timeout 30 %s/hm-eval --unigram %s --data %s --seq-len 4 --json",
             HM_BIN_DIR, HM_BIN_DIR, pa, pb);
    cr_assert_eq(tu_run(cmd, &out, &err), 0, "%s", err);
    cJSON *j = cJSON_Parse(out);
    cr_assert_not_null(j, "%s", out);
    double cnt[8] = {0}, sum = 0, denom = 9.0 + (double)V;
    for (int i = 0; i < 9; i++)
        cnt[ids[i]]++;
    for (int t = 1; t <= 8; t++) /* W = (9 - 1) / 4 = 2 windows */
        sum -= log((cnt[ids[t]] + 1) / denom);
    double mean = sum / 8;
    cr_assert_float_eq(cJSON_GetObjectItem(j, "mean_nll")->valuedouble, mean, 1e-6 * mean);
    release(j, (char *[]){out, err, pa, pb, dir, NULL});
}
