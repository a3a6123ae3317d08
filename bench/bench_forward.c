/* bench_forward.c — GPT-NeoX forward tokens/s and FLOP rate at Pythia-70m
 * and -160m shapes, against the same-run sgemm peak (shared/BENCH.md).
 *
 *   build/bench/bench_forward [--threads N] [--backend ref|fast] [--seq-len T]
 *                             [--reps R] [--model 70m|160m|all]
 *
 * Weights are random (built in memory, no files). FLOPs per token, counted as
 * BENCH.md (hm_model_flops_per_token): 2 per weight-matrix entry (qkv, dense,
 * dense_h_to_4h, dense_4h_to_h of every layer, and embed_out 2·V·d; embed_in
 * is a lookup and costs nothing) + 4·T·d per layer for causal softmax
 * attention (the full T×T square, though only the triangle is computed).
 * Norms, GELU, softmax, rotary and biases are not counted.
 *
 * The machines are shared and noisy, so every repetition times the sgemm
 * peak and then one forward pass back to back (A B A B ...); the reported
 * ratio is the median of the per-repetition ratios, with min-max. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "model.h"
#include "model_forward.h"
#include "threads.h"

static void fill(float *v, int64_t n, uint64_t *s, float scale, float mean)
{
    for (int64_t i = 0; i < n; i++) {
        *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
        v[i] = mean + scale * ((float)(*s >> 40) / (float)(1 << 24) - 0.5f);
    }
}

static int run(const char *label, int64_t d, int64_t L, int64_t nh, int64_t I, int64_t T,
               const struct hm_backend *be, int reps, int threads)
{
    struct hm_config c;
    struct hm_error err;
    hm_config_defaults(&c);
    c.hidden_size = d, c.num_hidden_layers = L, c.num_attention_heads = nh;
    c.intermediate_size = I, c.vocab_size = 50304, c.max_position_embeddings = 2048;
    struct hm_model *m = NULL;
    if (hm_config_finish(&c, &err) != HM_OK || hm_model_new(&c, &m, &err) != HM_OK) {
        fprintf(stderr, "bench_forward: %s\n", err.msg);
        return 1;
    }
    uint64_t s = 1;
    fill(m->storage, m->n_params, &s, 0.07f, 0.0f); /* ~N(0, 0.02²)-sized weights */
    for (int64_t l = 0; l < L; l++) {
        fill(m->layers[l].ln1_w, d, &s, 0.1f, 1.0f);
        fill(m->layers[l].ln2_w, d, &s, 0.1f, 1.0f);
    }
    fill(m->lnf_w, d, &s, 0.1f, 1.0f);
    if (hm_model_place(m, be, &err) != HM_OK) {
        fprintf(stderr, "bench_forward: %s\n", err.msg);
        return 1;
    }
    int32_t *tok = malloc(sizeof(int32_t) * (size_t)T);
    float *logits = malloc(sizeof(float) * (size_t)(T * c.vocab_size));
    for (int64_t t = 0; t < T; t++)
        tok[t] = (int32_t)((t * 7919) % c.vocab_size);
    struct hm_model_ws ws;
    hm_model_ws_init(&ws);
    double flops = hm_model_flops_per_token(&c, T) * (double)T, sec[64], peak[64], ratio[64];
    if (reps > 64)
        reps = 64;
    for (int r = -1; r < reps; r++) { /* r = -1: warm-up (allocates the workspace) */
        if (r >= 0)
            peak[r] = hm_bench_sgemm_gflops(threads);
        double t0 = hm_bench_now();
        if (hm_model_forward(m, be, tok, T, logits, &ws, &err) != HM_OK) {
            fprintf(stderr, "bench_forward: %s\n", err.msg);
            return 1;
        }
        if (r >= 0) {
            sec[r] = hm_bench_now() - t0;
            ratio[r] = flops / sec[r] * 1e-9 / peak[r];
        }
    }
    struct hm_bench_stats st = hm_bench_stats(sec, reps), sp = hm_bench_stats(peak, reps);
    struct hm_bench_stats sr = hm_bench_stats(ratio, reps);
    printf("%-4s d %lld L %lld heads %lld I %lld T %lld, %s, %d threads: %.1f tokens/s "
           "(median of %d, min-max %.1f-%.1f), %.2f GFLOP/seq, %.1f GFLOP/s; sgemm %.1f GFLOP/s "
           "(min-max %.1f-%.1f); forward/sgemm = %.1f%% (median of per-rep ratios, min-max "
           "%.1f-%.1f%%)\n",
           label, (long long)d, (long long)L, (long long)nh, (long long)I, (long long)T, hm_backend_name(be),
           threads, (double)T / st.median, reps, (double)T / st.max, (double)T / st.min,
           flops * 1e-9, flops / st.median * 1e-9, sp.median, sp.min, sp.max, 100 * sr.median,
           100 * sr.min, 100 * sr.max);
    hm_model_ws_release(&ws);
    hm_model_free(m);
    free(tok), free(logits);
    return 0;
}

int main(int argc, char **argv)
{
    int threads = 2, reps = 5;
    int64_t T = 512;
    const char *backend = "fast", *model = "all";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        char *end = NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            printf("usage: bench_forward [--threads N] [--backend ref|fast] [--seq-len T] "
                   "[--reps R] [--model 70m|160m|all]\n");
            return 0;
        } else if (v && !strcmp(a, "--threads")) {
            threads = (int)strtol(v, &end, 10), i++;
        } else if (v && !strcmp(a, "--reps")) {
            reps = (int)strtol(v, &end, 10), i++;
        } else if (v && !strcmp(a, "--seq-len")) {
            T = strtoll(v, &end, 10), i++;
        } else if (v && !strcmp(a, "--backend")) {
            backend = v, i++;
        } else if (v && !strcmp(a, "--model")) {
            model = v, i++;
        } else {
            fprintf(stderr, "bench_forward: error: bad argument '%s'\n", a);
            return 2;
        }
        if (end && *end) {
            fprintf(stderr, "bench_forward: error: bad number '%s'\n", v);
            return 2;
        }
    }
    const struct hm_backend *be = hm_backend_get(backend);
    if (!be || threads < 1 || reps < 1 || T < 1) {
        fprintf(stderr, "bench_forward: error: bad --backend, --threads, --reps or --seq-len\n");
        return 2;
    }
    hm_threads_set(threads);
    printf("FLOPs: 2/weight entry/token (qkv, dense, mlp, embed_out) + 4*T*d/layer attention; "
           "norms, gelu, softmax, rotary, biases not counted\n");
    int rc = 0;
    if (!strcmp(model, "70m") || !strcmp(model, "all"))
        rc |= run("70m", 512, 6, 8, 2048, T, be, reps, threads);
    if (!strcmp(model, "160m") || !strcmp(model, "all"))
        rc |= run("160m", 768, 12, 12, 3072, T, be, reps, threads);
    return rc;
}
