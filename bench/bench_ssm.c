/* bench_ssm.c — stage-2 (HedgeMamba) selective scan cost per token against
 * the stage-1 linear attention and the teacher's causal softmax attention
 * forward, at Pythia-70m and -160m head shapes, with the same-run sgemm
 * peak (shared/BENCH.md).
 *
 *   build/bench/bench_ssm [--threads N] [--reps R] [--seq-len T]
 * (--seq-len T also sets the T of --pair)
 *
 * One layer, one sequence, fast backend, F2 = 2p (F = p = 64):
 *   softmax   hm_backend_attention_forward on the fused qkv
 *   la fwd    hm_backend_linattn_forward (C = 64)
 *   la f+b    la fwd + hm_backend_linattn_backward (dφq, dφk, dv)
 *   ssm fwd   hm_backend_ssm_forward (chunked, C = 64)
 *   ssm f+b   ssm fwd + hm_backend_ssm_backward (dC, dB, dv, dΔ, dA, dD)
 * FLOPs per token, layer and head (BENCH.md counting; backward = 2x forward),
 * the same for ssm and la: 2·C·F2 (C Bᵀ, full C×C square) + 2·C·(p+1)
 * (M V̂) + 2·F2·(p+1) (chunk state) + 2·F2·(p+1) (carried-in state).
 * Decays, normalizers, scans are not counted (so a ratio ssm/la is the
 * price of the selectivity). Softmax attention forward: 4·T·d.
 * Every repetition times the sgemm peak and then each variant back to back;
 * ratios are medians of per-repetition ratios (min-max). Then the chunk
 * size C is swept (16, 32, 64, 128) on ssm f+b.
 *
 *   build/bench/bench_ssm --pair [--threads N] [--reps R]
 *
 * Training-shaped pair: scan f+b next to linear-attention f+b, both at
 * their default chunk (argument 0, as the trainer calls them), one call per
 * sequence of a batch, alternating ssm/la every repetition; shapes 70m
 * (d 512, 8 heads, p 64, F2 128, T 512, batch 2) and the tiny demo (d 128,
 * 4 heads, p 32, F2 64, T 128, batch 16). Prints ms per batch (medians),
 * the median per-repetition ratio ssm/la and each one's FLOP rate as a
 * fraction of the same-run sgemm (FLOPs as above at each one's chunk).
 * --chunk C: the scan at chunk C instead (la stays at its default). */
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
    int64_t T, nh, p, F2, d;
    float *qkv, *C, *B, *dt, *A, *D, *y, *den, *dy, *dC, *dB, *dqkv, *ddt, *dA, *dD, *out, *lse;
    void *ws;
    size_t ws_size;
};

static double flops_fwd(const struct bufs *b, int64_t C)
{
    double F2 = (double)b->F2, p1 = (double)b->p + 1;
    return (double)b->nh * (2.0 * (double)C * F2 + 2.0 * (double)C * p1 + 4.0 * F2 * p1) *
           (double)b->T;
}

static double t_softmax(const struct hm_backend *be, struct bufs *b)
{
    double t0 = hm_bench_now();
    hm_backend_attention_forward(be, b->out, b->lse, b->qkv, b->T, b->nh, b->p, b->ws,
                                 b->ws_size);
    return hm_bench_now() - t0;
}

static double t_la(const struct hm_backend *be, struct bufs *b, int backward)
{
    const int64_t T = b->T, nh = b->nh, p = b->p, F2 = b->F2, ld = 3 * b->d;
    double t0 = hm_bench_now();
    hm_backend_linattn_forward(be, b->y, b->den, b->C, b->B, b->qkv + 2 * p, T, nh, F2, p, ld,
                               3 * p, 1e-6f, 64, NULL, b->ws, b->ws_size);
    if (backward)
        hm_backend_linattn_backward(be, b->dC, b->dB, b->dqkv + 2 * p, b->dy, b->y, b->den, b->C,
                                    b->B, b->qkv + 2 * p, T, nh, F2, p, ld, 3 * p, 64, NULL, b->ws,
                                    b->ws_size);
    return hm_bench_now() - t0;
}

static double t_ssm(const struct hm_backend *be, struct bufs *b, int64_t C, int backward)
{
    const int64_t T = b->T, nh = b->nh, p = b->p, F2 = b->F2, ld = 3 * b->d;
    double t0 = hm_bench_now();
    hm_backend_ssm_forward(be, b->y, b->den, b->C, b->B, b->qkv + 2 * p, b->dt, b->A, b->D, T,
                           nh, F2, p, ld, 3 * p, 1e-6f, C, b->ws, b->ws_size);
    if (backward)
        hm_backend_ssm_backward(be, b->dC, b->dB, b->dqkv + 2 * p, b->ddt, b->dA, b->dD, b->dy,
                                b->y, b->den, b->C, b->B, b->qkv + 2 * p, b->dt, b->A, b->D, T,
                                nh, F2, p, ld, 3 * p, C, b->ws, b->ws_size);
    return hm_bench_now() - t0;
}

static int run(const char *label, int64_t d, int64_t nh, int64_t T, int reps, int threads)
{
    const struct hm_backend *be = hm_backend_get("fast");
    struct bufs b = {.T = T, .nh = nh, .p = d / nh, .F2 = 2 * (d / nh), .d = d};
    const int64_t p = b.p, F2 = b.F2, cs[4] = {16, 32, 64, 128};
    size_t ws = hm_backend_attention_ws_size(be, T, nh, p), a;
    for (int i = 0; i < 4; i++) {
        a = hm_backend_ssm_ws_size(be, T, nh, F2, p, cs[i]);
        ws = a > ws ? a : ws;
        a = hm_backend_ssm_backward_ws_size(be, T, nh, F2, p, cs[i]);
        ws = a > ws ? a : ws;
    }
    a = hm_backend_linattn_backward_ws_size(be, T, nh, F2, p, 64);
    ws = a > ws ? a : ws;
    uint64_t s = 7;
#define ALLOC(f, n, sc, mu) (b.f = malloc(sizeof(float) * (size_t)(n)), fill(b.f, (n), &s, sc, mu))
    ALLOC(qkv, T * 3 * d, 1.0f, 0.0f);
    ALLOC(C, T * nh * F2, 0.5f, 0.5f); /* positive like feature maps */
    ALLOC(B, T * nh * F2, 0.5f, 0.5f);
    ALLOC(dt, T * nh, 1.0f, 1.0f);      /* Δ in [0.5, 1.5] */
    ALLOC(A, nh, 1.0f, -1.0f);          /* A in [−1.5, −0.5] */
    ALLOC(D, nh, 0.2f, 0.0f);
    ALLOC(y, T * d, 1.0f, 0.0f);
    ALLOC(den, nh * T, 1.0f, 1.0f);
    ALLOC(dy, T * d, 1.0f, 0.0f);
    ALLOC(dC, T * nh * F2, 1.0f, 0.0f);
    ALLOC(dB, T * nh * F2, 1.0f, 0.0f);
    ALLOC(dqkv, T * 3 * d, 1.0f, 0.0f);
    ALLOC(ddt, T * nh, 1.0f, 0.0f);
    ALLOC(dA, nh, 0.0f, 0.0f);
    ALLOC(dD, nh, 0.0f, 0.0f);
    ALLOC(out, T * d, 1.0f, 0.0f);
    ALLOC(lse, nh * T, 1.0f, 0.0f);
#undef ALLOC
    b.ws = malloc(ws);
    b.ws_size = ws;
    if (!b.ws) {
        fprintf(stderr, "bench_ssm: error: out of memory\n");
        return 1;
    }
    memset(b.ws, 0, ws);
    double peak[MAXREP], r_f[MAXREP], r_fb[MAXREP], r_sm[MAXREP], eff[MAXREP], effla[MAXREP];
    double tsm[MAXREP], tsf[MAXREP], tsfb[MAXREP], sweep[4][MAXREP];
    for (int r = -1; r < reps; r++) { /* r = -1: warm-up */
        double pk = r >= 0 ? hm_bench_sgemm_gflops(threads) : 0;
        double sm = t_softmax(be, &b), lf = t_la(be, &b, 0), lfb = t_la(be, &b, 1);
        double sf = t_ssm(be, &b, 64, 0), sfb = t_ssm(be, &b, 64, 1);
        if (r < 0)
            continue;
        peak[r] = pk, tsm[r] = sm, tsf[r] = sf, tsfb[r] = sfb;
        r_f[r] = sf / lf, r_fb[r] = sfb / lfb, r_sm[r] = sf / sm;
        eff[r] = 3 * flops_fwd(&b, 64) / sfb * 1e-9 / pk;
        effla[r] = 3 * flops_fwd(&b, 64) / lfb * 1e-9 / pk;
    }
    for (int r = 0; r < reps; r++)
        for (int i = 0; i < 4; i++)
            sweep[i][r] = t_ssm(be, &b, cs[i], 1);
    struct hm_bench_stats sp = hm_bench_stats(peak, reps), s1 = hm_bench_stats(r_f, reps);
    struct hm_bench_stats s2 = hm_bench_stats(r_fb, reps), s3 = hm_bench_stats(r_sm, reps);
    struct hm_bench_stats se = hm_bench_stats(eff, reps), sl = hm_bench_stats(effla, reps);
    double us = 1e6 / (double)T;
    printf("%-4s T %5lld (d %lld, %lld heads, p %lld, F2 %lld), %d threads, sgemm %.1f GFLOP/s "
           "(min-max %.1f-%.1f)\n",
           label, (long long)T, (long long)d, (long long)nh, (long long)p, (long long)F2, threads,
           sp.median, sp.min, sp.max);
    printf("  per token and layer: softmax fwd %.2f us, ssm fwd %.2f us, ssm fwd+bwd %.2f us "
           "(medians of %d)\n",
           hm_bench_stats(tsm, reps).median * us, hm_bench_stats(tsf, reps).median * us,
           hm_bench_stats(tsfb, reps).median * us, reps);
    printf("  ssm fwd / la fwd = %.2f (min-max %.2f-%.2f); ssm f+b / la f+b = %.2f (min-max "
           "%.2f-%.2f); ssm fwd / softmax fwd = %.2f (min-max %.2f-%.2f)\n",
           s1.median, s1.min, s1.max, s2.median, s2.min, s2.max, s3.median, s3.min, s3.max);
    printf("  FLOP rate f+b: ssm %.1f%% of sgemm (min-max %.1f-%.1f%%), la %.1f%%\n",
           100 * se.median, 100 * se.min, 100 * se.max, 100 * sl.median);
    double best = 1e30, ref = hm_bench_stats(sweep[2], reps).median;
    int bi = 0;
    printf("  chunk sweep (ssm f+b, median, relative to C = 64):");
    for (int i = 0; i < 4; i++) {
        double m = hm_bench_stats(sweep[i], reps).median;
        printf(" C %lld %.2f", (long long)cs[i], m / ref);
        if (m < best)
            best = m, bi = i;
    }
    printf("; best C = %lld\n", (long long)cs[bi]);
    free(b.qkv), free(b.C), free(b.B), free(b.dt), free(b.A), free(b.D), free(b.y), free(b.den);
    free(b.dy), free(b.dC), free(b.dB), free(b.dqkv), free(b.ddt), free(b.dA), free(b.dD);
    free(b.out), free(b.lse), free(b.ws);
    return 0;
}

/* --pair: scan f+b and la f+b at the default chunks, batch of sequences. */
static int run_pair(const char *label, int64_t d, int64_t nh, int64_t T, int64_t nb, int reps,
                    int threads, int64_t sc)
{
    const struct hm_backend *be = hm_backend_get("fast");
    struct bufs b = {.T = T, .nh = nh, .p = d / nh, .F2 = 2 * (d / nh), .d = d};
    const int64_t p = b.p, F2 = b.F2;
    size_t ws = hm_backend_ssm_ws_size(be, T, nh, F2, p, sc), a;
    a = hm_backend_ssm_backward_ws_size(be, T, nh, F2, p, sc);
    ws = a > ws ? a : ws;
    a = hm_backend_linattn_ws_size(be, T, nh, F2, p, 0);
    ws = a > ws ? a : ws;
    a = hm_backend_linattn_backward_ws_size(be, T, nh, F2, p, 0);
    ws = a > ws ? a : ws;
    uint64_t s = 11;
    const int64_t NT = nb * T;
#define ALLOC(f, n, sc, mu) (b.f = malloc(sizeof(float) * (size_t)(n)), fill(b.f, (n), &s, sc, mu))
    ALLOC(qkv, NT * 3 * d, 1.0f, 0.0f);
    ALLOC(C, NT * nh * F2, 0.5f, 0.5f);
    ALLOC(B, NT * nh * F2, 0.5f, 0.5f);
    ALLOC(dt, NT * nh, 1.0f, 1.0f);
    ALLOC(A, nh, 1.0f, -1.0f);
    ALLOC(D, nh, 0.2f, 0.0f);
    ALLOC(y, NT * d, 1.0f, 0.0f);
    ALLOC(den, nb * nh * T, 1.0f, 1.0f);
    ALLOC(dy, NT * d, 1.0f, 0.0f);
    ALLOC(dC, T * nh * F2, 1.0f, 0.0f);
    ALLOC(dB, T * nh * F2, 1.0f, 0.0f);
    ALLOC(dqkv, NT * 3 * d, 1.0f, 0.0f);
    ALLOC(ddt, NT * nh, 1.0f, 0.0f);
    ALLOC(dA, nh, 0.0f, 0.0f);
    ALLOC(dD, nh, 0.0f, 0.0f);
#undef ALLOC
    b.out = b.lse = NULL;
    b.ws = malloc(ws);
    b.ws_size = ws;
    if (!b.ws) {
        fprintf(stderr, "bench_ssm: error: out of memory\n");
        return 1;
    }
    memset(b.ws, 0, ws);
    const int64_t ld = 3 * d;
    double peak[MAXREP], ts[MAXREP], tl[MAXREP], rat[MAXREP], es[MAXREP], el[MAXREP];
    for (int r = -1; r < reps; r++) {
        double pk = r >= 0 ? hm_bench_sgemm_gflops(threads) : 0, t[2];
        for (int w = 0; w < 2; w++) { /* alternate which goes first */
            int which = (r + w) & 1; /* 0: ssm, 1: la */
            double t0 = hm_bench_now();
            for (int64_t q = 0; q < nb; q++) {
                const float *qv = b.qkv + q * T * ld + 2 * p, *Cq = b.C + q * T * nh * F2;
                const float *Bq = b.B + q * T * nh * F2, *dyq = b.dy + q * T * d;
                float *yq = b.y + q * T * d, *dq = b.den + q * nh * T;
                float *dvq = b.dqkv + q * T * ld + 2 * p;
                if (!which) {
                    const float *dtq = b.dt + q * T * nh;
                    hm_backend_ssm_forward(be, yq, dq, Cq, Bq, qv, dtq, b.A, b.D, T, nh, F2, p,
                                           ld, 3 * p, 1e-6f, sc, b.ws, b.ws_size);
                    hm_backend_ssm_backward(be, b.dC, b.dB, dvq, b.ddt + q * T * nh, b.dA, b.dD,
                                            dyq, yq, dq, Cq, Bq, qv, dtq, b.A, b.D, T, nh, F2,
                                            p, ld, 3 * p, sc, b.ws, b.ws_size);
                } else {
                    hm_backend_linattn_forward(be, yq, dq, Cq, Bq, qv, T, nh, F2, p, ld, 3 * p,
                                               1e-6f, 0, NULL, b.ws, b.ws_size);
                    hm_backend_linattn_backward(be, b.dC, b.dB, dvq, dyq, yq, dq, Cq, Bq, qv, T,
                                                nh, F2, p, ld, 3 * p, 0, NULL, b.ws, b.ws_size);
                }
            }
            t[which] = hm_bench_now() - t0;
        }
        if (r < 0)
            continue;
        peak[r] = pk, ts[r] = t[0], tl[r] = t[1], rat[r] = t[0] / t[1];
        es[r] = 3 * flops_fwd(&b, sc ? sc : HM_SSM_CHUNK_DEFAULT) * (double)nb / t[0] * 1e-9 / pk;
        el[r] = 3 * flops_fwd(&b, HM_LINATTN_CHUNK_DEFAULT) * (double)nb / t[1] * 1e-9 / pk;
    }
    struct hm_bench_stats sp = hm_bench_stats(peak, reps), ss = hm_bench_stats(ts, reps);
    struct hm_bench_stats sl = hm_bench_stats(tl, reps), sr = hm_bench_stats(rat, reps);
    struct hm_bench_stats se = hm_bench_stats(es, reps), sq = hm_bench_stats(el, reps);
    printf("%-4s T %lld x batch %lld (d %lld, %lld heads, p %lld, F2 %lld), %d threads, sgemm "
           "%.1f GFLOP/s; chunks ssm %d, la %d\n",
           label, (long long)T, (long long)nb, (long long)d, (long long)nh, (long long)p,
           (long long)F2, threads, sp.median, (int)(sc ? sc : HM_SSM_CHUNK_DEFAULT),
           HM_LINATTN_CHUNK_DEFAULT);
    printf("  f+b per batch: ssm %.3f ms (min-max %.3f-%.3f), la %.3f ms (min-max %.3f-%.3f); "
           "ssm/la = %.2f (min-max %.2f-%.2f); of sgemm: ssm %.1f%%, la %.1f%% (medians of %d)\n",
           1e3 * ss.median, 1e3 * ss.min, 1e3 * ss.max, 1e3 * sl.median, 1e3 * sl.min,
           1e3 * sl.max, sr.median, sr.min, sr.max, 100 * se.median, 100 * sq.median, reps);
    free(b.qkv), free(b.C), free(b.B), free(b.dt), free(b.A), free(b.D), free(b.y), free(b.den);
    free(b.dy), free(b.dC), free(b.dB), free(b.dqkv), free(b.ddt), free(b.dA), free(b.dD);
    free(b.ws);
    return 0;
}

int main(int argc, char **argv)
{
    int threads = 2, reps = 5, pair = 0;
    int64_t T = 0, chunk = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        char *end = NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            printf("usage: bench_ssm [--threads N] [--reps R] [--seq-len T] "
                   "[--pair [--chunk C]]\n");
            return 0;
        } else if (!strcmp(a, "--pair")) {
            pair = 1;
        } else if (v && !strcmp(a, "--threads")) {
            threads = (int)strtol(v, &end, 10), i++;
        } else if (v && !strcmp(a, "--reps")) {
            reps = (int)strtol(v, &end, 10), i++;
        } else if (v && !strcmp(a, "--chunk")) {
            chunk = strtoll(v, &end, 10), i++;
        } else if (v && !strcmp(a, "--seq-len")) {
            T = strtoll(v, &end, 10), i++;
        } else {
            fprintf(stderr, "bench_ssm: error: bad argument '%s'\n", a);
            return 2;
        }
        if (end && *end) {
            fprintf(stderr, "bench_ssm: error: bad number '%s'\n", v);
            return 2;
        }
    }
    if (threads < 1 || reps < 1 || reps > MAXREP || T < 0 || chunk < 0) {
        fprintf(stderr, "bench_ssm: error: bad --threads, --reps (1..%d) or --seq-len\n", MAXREP);
        return 2;
    }
    hm_threads_set(threads);
    if (pair) {
        printf("FLOPs: as below, at each one's chunk; backward = 2x forward\n");
        int rc = run_pair("70m", 512, 8, T ? T : 512, 2, reps, threads, chunk);
        return rc | run_pair("tiny", 128, 4, T ? T : 128, 16, reps, threads, chunk);
    }
    printf("FLOPs: per head 2C*F2 + 2C*(p+1) + 4*F2*(p+1) per token for ssm and la alike "
           "(decays, normalizers, scans not counted); backward = 2x forward; softmax attention "
           "4*T*d\n");
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
