/* bench_linattn.c — stage-1 (Hedgehog) attention cost per token against the
 * teacher's causal softmax attention forward, at Pythia-70m and -160m head
 * shapes, with the same-run sgemm peak (shared/BENCH.md).
 *
 *   build/bench/bench_linattn [--threads N] [--reps R] [--seq-len T]
 *
 * One layer, one sequence, fast backend, F = p = 64 (F2 = 128):
 *   softmax   hm_backend_attention_forward on the fused qkv
 *   hh fwd    feature maps of q and k + chunked linear attention forward
 *   hh f+b    hh fwd + linear attention backward (dφq, dφk; v is frozen;
 *             the forward's chunk states handed over, as stage 1 does)
 *             + feature map backward (dW, db; q, k are frozen): the stage-1
 *             training step of one layer's attention
 * FLOPs per token and layer (BENCH.md counting; backward = 2x forward):
 *   softmax attention forward 4·T·d (the full square);
 *   feature maps 2·n_h·p·F each; chunked attention per head
 *   2·C·F2 (ΦQ ΦK^T, full C×C square) + 2·C·(p+1) (A V̂) + 2·F2·(p+1)
 *   (chunk state) + 2·F2·(p+1) (carried-in state).
 *   Softmaxes, normalizations and scans are not counted.
 * Every repetition times the sgemm peak and then each variant back to back
 * (A B C A B C ...); ratios are medians of per-repetition ratios (min-max).
 * Then the chunk size C is swept (16, 32, 64, 128) on hh f+b.
 *
 * Measured 2026-12-02 (session 7: causal tiles skip their zero side; 2-core
 * shared VM, 2 threads, 5 reps; sgemm 179-188 GFLOP/s):
 *            hh fwd/softmax fwd  hh f+b/softmax fwd  hh f+b % of sgemm
 *   70m  512        1.08               2.73               60.0
 *   160m 512        1.09               3.39               47.9
 *   70m  2048       0.36               0.95               49.2
 *   160m 2048       0.35               0.92               48.9
 * (the FLOP rate counts the full C×C squares, which the kernels no longer
 * compute: above the diagonal they are zeros.) Chunk sweep, f+b time
 * relative to C = 64: C 16 1.37-1.63, C 32 1.08-1.20, C 128 1.00-1.05: 64
 * and 128 tie within noise, 64 kept as the default. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "bench_common.h"
#include "threads.h"

#define MAXREP 64

static void fill(float *v, int64_t n, uint64_t *s, float scale, float mean)
{
    for (int64_t i = 0; i < n; i++) {
        *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
        v[i] = mean + scale * ((float)(*s >> 40) / (float)(1 << 24) - 0.5f);
    }
}

struct bufs {
    int64_t T, nh, p, F, d;
    float *qkv, *Wq, *bq, *Wk, *bk, *phiq, *phik, *y, *den, *dy, *dphiq, *dphik, *dW, *db;
    float *out, *lse;
    float *saved; /* the chunk states forward → backward, as stage 1 keeps them */
    void *ws;
    size_t ws_size;
};

static double flops_hh_fwd(const struct bufs *b, int64_t C)
{
    double F2 = 2.0 * (double)b->F, p = (double)b->p, nh = (double)b->nh;
    double fm = 2 * 2.0 * nh * p * (double)b->F;
    double la = nh * (2.0 * (double)C * F2 + 2.0 * (double)C * (p + 1) + 4.0 * F2 * (p + 1));
    return (fm + la) * (double)b->T;
}

static double t_softmax(const struct hm_backend *be, struct bufs *b)
{
    double t0 = hm_bench_now();
    hm_backend_attention_forward(be, b->out, b->lse, b->qkv, b->T, b->nh, b->p, b->ws,
                                 b->ws_size);
    return hm_bench_now() - t0;
}

static double t_hh(const struct hm_backend *be, struct bufs *b, int64_t C, int backward)
{
    const int64_t T = b->T, nh = b->nh, p = b->p, F = b->F, ld = 3 * b->d;
    double t0 = hm_bench_now();
    hm_backend_featuremap_forward(be, b->phiq, b->qkv, b->Wq, b->bq, T, nh, p, F, ld, 3 * p);
    hm_backend_featuremap_forward(be, b->phik, b->qkv + p, b->Wk, b->bk, T, nh, p, F, ld, 3 * p);
    hm_backend_linattn_forward(be, b->y, b->den, b->phiq, b->phik, b->qkv + 2 * p, T, nh, 2 * F,
                               p, ld, 3 * p, 1e-6f, C, backward ? b->saved : NULL, b->ws,
                               b->ws_size);
    if (backward) {
        hm_backend_linattn_backward(be, b->dphiq, b->dphik, NULL, b->dy, b->y, b->den, b->phiq,
                                    b->phik, b->qkv + 2 * p, T, nh, 2 * F, p, ld, 3 * p, C,
                                    b->saved, b->ws, b->ws_size);
        hm_backend_featuremap_backward(be, NULL, b->dW, b->db, b->dphiq, b->qkv, b->phiq, b->Wq, T,
                                       nh, p, F, ld, 3 * p);
        hm_backend_featuremap_backward(be, NULL, b->dW, b->db, b->dphik, b->qkv + p, b->phik,
                                       b->Wk, T, nh, p, F, ld, 3 * p);
    }
    return hm_bench_now() - t0;
}

static int run(const char *label, int64_t d, int64_t nh, int64_t T, int reps, int threads)
{
    const struct hm_backend *be = hm_backend_get("fast");
    struct bufs b = {.T = T, .nh = nh, .p = d / nh, .F = d / nh, .d = d};
    const int64_t p = b.p, F = b.F, F2 = 2 * F, cs[4] = {16, 32, 64, 128};
    size_t ws = hm_backend_attention_ws_size(be, T, nh, p);
    for (int i = 0; i < 4; i++) {
        size_t a = hm_backend_linattn_ws_size(be, T, nh, F2, p, cs[i]);
        size_t c = hm_backend_linattn_backward_ws_size(be, T, nh, F2, p, cs[i]);
        ws = a > ws ? a : ws;
        ws = c > ws ? c : ws;
    }
    uint64_t s = 7;
#define ALLOC(f, n) (b.f = malloc(sizeof(float) * (size_t)(n)), fill(b.f, (n), &s, 1.0f, 0.0f))
    ALLOC(qkv, T * 3 * d);
    ALLOC(Wq, nh * p * F);
    ALLOC(Wk, nh * p * F);
    ALLOC(bq, nh * F);
    ALLOC(bk, nh * F);
    ALLOC(phiq, T * nh * F2);
    ALLOC(phik, T * nh * F2);
    ALLOC(y, T * d);
    ALLOC(den, nh * T);
    ALLOC(dy, T * d);
    ALLOC(dphiq, T * nh * F2);
    ALLOC(dphik, T * nh * F2);
    ALLOC(saved, hm_linattn_saved_floats(T, nh, F2, p, cs[0])); /* the most chunks */
    ALLOC(dW, nh * p * F);
    ALLOC(db, nh * F);
    ALLOC(out, T * d);
    ALLOC(lse, nh * T);
#undef ALLOC
    b.ws = malloc(ws);
    b.ws_size = ws;
    if (!b.ws) {
        fprintf(stderr, "bench_linattn: error: out of memory\n");
        return 1;
    }
    memset(b.ws, 0, ws);
    double peak[MAXREP], rf[MAXREP], rfb[MAXREP], eff[MAXREP], ts[MAXREP], tf[MAXREP];
    double tfb[MAXREP], sweep[4][MAXREP];
    for (int r = -1; r < reps; r++) { /* r = -1: warm-up */
        double pk = r >= 0 ? hm_bench_sgemm_gflops(threads) : 0;
        double a = t_softmax(be, &b), f = t_hh(be, &b, 64, 0), fb = t_hh(be, &b, 64, 1);
        if (r < 0)
            continue;
        peak[r] = pk, ts[r] = a, tf[r] = f, tfb[r] = fb;
        rf[r] = f / a, rfb[r] = fb / a;
        eff[r] = 3 * flops_hh_fwd(&b, 64) / fb * 1e-9 / pk;
    }
    for (int r = 0; r < reps; r++)
        for (int i = 0; i < 4; i++)
            sweep[i][r] = t_hh(be, &b, cs[i], 1);
    struct hm_bench_stats sp = hm_bench_stats(peak, reps), s1 = hm_bench_stats(rf, reps);
    struct hm_bench_stats s2 = hm_bench_stats(rfb, reps), se = hm_bench_stats(eff, reps);
    struct hm_bench_stats sts = hm_bench_stats(ts, reps), stf = hm_bench_stats(tf, reps);
    struct hm_bench_stats stfb = hm_bench_stats(tfb, reps);
    double us = 1e6 / (double)T;
    printf("%-4s T %5lld (d %lld, %lld heads, p = F = %lld), %d threads, sgemm %.1f GFLOP/s "
           "(min-max %.1f-%.1f)\n",
           label, (long long)T, (long long)d, (long long)nh, (long long)p, threads, sp.median,
           sp.min, sp.max);
    printf("  per token and layer: softmax fwd %.2f us, hh fwd %.2f us, hh fwd+bwd %.2f us "
           "(medians of %d)\n",
           sts.median * us, stf.median * us, stfb.median * us, reps);
    printf("  hh fwd / softmax fwd = %.2f (min-max %.2f-%.2f); hh fwd+bwd / softmax fwd = %.2f "
           "(min-max %.2f-%.2f)\n",
           s1.median, s1.min, s1.max, s2.median, s2.min, s2.max);
    printf("  hh fwd+bwd FLOP rate = %.1f%% of sgemm (min-max %.1f-%.1f%%); softmax fwd = "
           "%.1f%%\n",
           100 * se.median, 100 * se.min, 100 * se.max,
           100 * 4.0 * (double)T * (double)d * (double)T / sts.median * 1e-9 / sp.median);
    double best = 1e30;
    int bi = 0;
    printf("  chunk sweep (hh fwd+bwd, median, relative to C = 64):");
    double ref = hm_bench_stats(sweep[2], reps).median;
    for (int i = 0; i < 4; i++) {
        double m = hm_bench_stats(sweep[i], reps).median;
        printf(" C %lld %.2f", (long long)cs[i], m / ref);
        if (m < best)
            best = m, bi = i;
    }
    printf("; best C = %lld\n", (long long)cs[bi]);
    free(b.qkv), free(b.Wq), free(b.bq), free(b.Wk), free(b.bk), free(b.phiq), free(b.phik);
    free(b.y), free(b.den), free(b.dy), free(b.dphiq), free(b.dphik), free(b.dW), free(b.db);
    free(b.out), free(b.lse), free(b.saved), free(b.ws);
    return 0;
}

int main(int argc, char **argv)
{
    int threads = 2, reps = 5;
    int64_t T = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        char *end = NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            printf("usage: bench_linattn [--threads N] [--reps R] [--seq-len T]\n");
            return 0;
        } else if (v && !strcmp(a, "--threads")) {
            threads = (int)strtol(v, &end, 10), i++;
        } else if (v && !strcmp(a, "--reps")) {
            reps = (int)strtol(v, &end, 10), i++;
        } else if (v && !strcmp(a, "--seq-len")) {
            T = strtoll(v, &end, 10), i++;
        } else {
            fprintf(stderr, "bench_linattn: error: bad argument '%s'\n", a);
            return 2;
        }
        if (end && *end) {
            fprintf(stderr, "bench_linattn: error: bad number '%s'\n", v);
            return 2;
        }
    }
    if (threads < 1 || reps < 1 || reps > MAXREP || T < 0) {
        fprintf(stderr, "bench_linattn: error: bad --threads, --reps (1..%d) or --seq-len\n",
                MAXREP);
        return 2;
    }
    hm_threads_set(threads);
    printf("FLOPs: softmax attention 4*T*d/token/layer; hh = feature maps 2*n_h*p*F each + "
           "chunked attention 2C*F2 + 2C*(p+1) + 4*F2*(p+1) per head; backward = 2x forward; "
           "softmax, normalizers, scans not counted\n");
    int64_t Ts[2] = {512, 2048};
    int rc = 0;
    for (int i = 0; i < 2; i++) {
        int64_t t = T ? T : Ts[i];
        rc |= run("70m", 512, 8, t, reps, threads);
        rc |= run("160m", 768, 12, t, reps, threads);
        if (T)
            break;
    }
    return rc;
}
