/* bench_linearize — stage-1 cost per token against the teacher's forward
 * cost, measured in the same run (issue 12 asks ≤ 1.3× the layers-only
 * forward; bench/README.md has the floor), and the stage-1 memory
 * beyond the weights for a given depth (run it with --layers 2 and 8 at the
 * same width: the difference must not grow with depth).
 *
 * Teacher forward, two ways, over the B sequences: the full forward to
 * logits (hm_model_nll: what a forward pass of the teacher costs, and what
 * BENCH.md counts — embed_out is 2·V·d FLOPs per token) and the layers only
 * (hm_model_hidden, the stricter baseline: the part stage 1 also runs).
 * Stage 1: one accumulate() of the run-model vtable on the same batch
 * (teacher layers + per-layer student forward/backward of the feature
 * maps, linear attention and dense input gradient). Alternating, medians of
 * --reps, and the ratio paired within each repetition.
 *
 * --profile prints the per-op time table of the stage-1 steps
 * (kernels/op_profile.h).
 *
 * usage: bench_linearize [--shape tiny|70m|160m] [--layers L] [--seq T]
 *                        [--batch B] [--reps N] [--threads N] [--profile] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "bench_common.h"
#include "op_profile.h"
#include "checkpoint.h"
#include "linearize.h"
#include "model_forward.h"
#include "model_views.h"
#include "params.h"
#include "presets.h"
#include "threads.h"

static double rss_mb(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss / 1024.0;
}

int main(int argc, char **argv)
{
    const char *shape = "70m";
    int64_t T = 512, B = 2, reps = 3, layers = 0;
    int threads = 2, profile = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--profile")) {
            profile = 1;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "bench_linearize: '%s' needs a value\n", argv[i]);
            return 2;
        }
        if (!strcmp(argv[i], "--shape")) shape = argv[++i];
        else if (!strcmp(argv[i], "--seq")) T = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--batch")) B = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--reps")) reps = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--layers")) layers = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--threads")) threads = atoi(argv[++i]);
        else {
            fprintf(stderr, "bench_linearize: unknown option '%s'\n", argv[i]);
            return 2;
        }
    }
    struct hm_config cfg;
    if (hm_config_preset(shape, &cfg) != 0) {
        fprintf(stderr, "bench_linearize: unknown shape '%s'\n", shape);
        return 2;
    }
    if (layers > 0) {
        cfg.num_hidden_layers = layers;
        hm_config_finish(&cfg, NULL);
    }
    hm_threads_set(threads);
    const struct hm_backend *be = hm_backend_get("fast");
    struct hm_error err;
    struct hm_model *m;
    if (hm_model_new(&cfg, &m, &err) != HM_OK) {
        fprintf(stderr, "bench_linearize: %s\n", err.msg);
        return 1;
    }
    hm_model_init_random(m, 1, 0.02);
    char path[] = "/tmp/hm-bench-linearize-XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    if (hm_model_save(m, path, 1, NULL, HM_DTYPE_F32, NULL, &err) != HM_OK) {
        fprintf(stderr, "bench_linearize: %s\n", err.msg);
        return 1;
    }
    hm_model_free(m);
    struct hm_ckpt *ck;
    struct hm_linearizer *lz;
    if (hm_ckpt_open(path, &ck, &err) != HM_OK ||
        hm_linearizer_new(ck, 0, NULL, be, B, T, 1, &lz, &err) != HM_OK) {
        fprintf(stderr, "bench_linearize: %s\n", err.msg);
        return 1;
    }
    unlink(path); /* the mapping stays valid */
    struct hm_run_model rm;
    hm_linearizer_run_model(lz, &rm);
    int32_t *tok = malloc(sizeof(int32_t) * (size_t)(B * (T + 1)));
    uint64_t s = 7;
    for (int64_t i = 0; i < B * (T + 1); i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        tok[i] = (int32_t)((s >> 33) % (uint64_t)cfg.vocab_size);
    }
    /* the teacher alone (its own model inside the linearizer is not exposed:
     * load it again the same way) */
    struct hm_model *teacher;
    if (hm_model_load(ck, &teacher, &err) != HM_OK || hm_model_place(teacher, be, &err) != HM_OK) {
        fprintf(stderr, "bench_linearize: %s\n", err.msg);
        return 1;
    }
    struct hm_model_ws ws;
    hm_model_ws_init(&ws);
    double *tt = malloc(sizeof(double) * (size_t)reps), *ts = malloc(sizeof(double) * (size_t)reps);
    double *tf = malloc(sizeof(double) * (size_t)reps);
    float *nll = malloc(sizeof(float) * (size_t)T);
    double loss, *aux = calloc((size_t)(rm.n_aux > 0 ? rm.n_aux : 1), sizeof(double));
    /* the step's loss sums: backend memory, zeroed before each step */
    const size_t sums_bytes = sizeof(double) * (size_t)rm.n_sums;
    double *sums = hm_backend_alloc(be, sums_bytes), *hsums = calloc((size_t)rm.n_sums, sizeof(double));
    if (!sums || !hsums || !aux) {
        fprintf(stderr, "bench_linearize: out of memory\n");
        return 1;
    }
    for (int64_t k = -1; k < reps; k++) {
        double t0 = hm_bench_now();
        for (int64_t b = 0; b < B; b++)
            hm_model_hidden(teacher, be, tok + b * (T + 1), T, &ws, NULL, &err);
        double t1 = hm_bench_now();
        if (k == 0 && profile)
            hm_op_profile_start(); /* clears the table */
        hm_op_profile_on = profile && k >= 0;
        rm.zero_grad(rm.ctx);
        memset(hsums, 0, sums_bytes);
        hm_backend_upload(be, sums, hsums, sums_bytes);
        if (rm.accumulate(rm.ctx, tok, sums, &err) != HM_OK) {
            fprintf(stderr, "bench_linearize: %s\n", err.msg);
            return 1;
        }
        hm_backend_download(be, hsums, sums, sums_bytes);
        rm.loss_of(rm.ctx, hsums, &loss, aux);
        double t2 = hm_bench_now();
        hm_op_profile_on = 0;
        for (int64_t b = 0; b < B; b++)
            hm_model_nll(teacher, be, tok + b * (T + 1), tok + b * (T + 1) + 1, T, nll, &ws, &err);
        double t3 = hm_bench_now();
        if (k >= 0) {
            tt[k] = t1 - t0;
            ts[k] = t2 - t1;
            tf[k] = t3 - t2;
        }
    }
    struct hm_bench_stats st = hm_bench_stats(tt, (int)reps), ss = hm_bench_stats(ts, (int)reps);
    struct hm_bench_stats sf = hm_bench_stats(tf, (int)reps);
    double weights_mb = 4.0 * (double)hm_param_count(&cfg) / (1 << 20);
    printf("bench_linearize: shape %s, %lld layers, batch %lld x seq %lld, %d threads\n", shape,
           (long long)cfg.num_hidden_layers, (long long)B, (long long)T, threads);
    printf("  teacher forward to logits: median %.3f s (%.3f-%.3f)\n", sf.median, sf.min, sf.max);
    printf("  teacher layers only:       median %.3f s (%.3f-%.3f)\n", st.median, st.min, st.max);
    printf("  stage-1 step:              median %.3f s (%.3f-%.3f)\n", ss.median, ss.min, ss.max);
    printf("  stage-1 cost / teacher forward cost (logits): %.2f\n", ss.median / sf.median);
    printf("  stage-1 cost / teacher layers only:           %.2f\n", ss.median / st.median);
    /* the same ratio paired within each repetition (the teacher's forward
     * and the stage-1 step ran back to back: less exposed to drift) */
    double *pr = malloc(sizeof(double) * (size_t)reps);
    for (int64_t k = 0; k < reps; k++)
        pr[k] = ts[k] / tt[k];
    struct hm_bench_stats sp = hm_bench_stats(pr, (int)reps);
    printf("  per-repetition ratios, median (min-max):      %.2f (%.2f-%.2f)\n", sp.median, sp.min,
           sp.max);
    free(pr);
    if (profile) {
        double total = 0;
        for (int64_t k = 0; k < reps; k++)
            total += ts[k];
        hm_op_profile_print(stdout, total, (int)reps);
    }
    double rss = rss_mb();
    /* four copies of the weights are resident: the bench's own teacher, the
     * linearizer's teacher and student, and the mapped checkpoint's pages */
    printf("  peak RSS %.1f MB; weights %.1f MB x 4 (bench teacher, linearizer teacher and "
           "student, mapped file) -> beyond weights %.1f MB\n", rss, weights_mb,
           rss - 4 * weights_mb);
    free(tt);
    free(ts);
    free(tf);
    free(nll);
    free(aux);
    free(hsums);
    hm_backend_free(be, (void **)&sums);
    free(tok);
    hm_model_ws_release(&ws);
    hm_model_free(teacher);
    hm_linearizer_free(lz);
    hm_ckpt_close(ck);
    return 0;
}
