/* bench_common.h — shared helpers of the benchmarks (shared/BENCH.md).
 *
 * Speed claims are ratios against a plain fp32 sgemm timed in the same
 * process with the same threads (hm_bench_sgemm_gflops), never absolute
 * times. */
#ifndef HM_BENCH_COMMON_H
#define HM_BENCH_COMMON_H

/* Monotonic seconds. */
double hm_bench_now(void);

/* GFLOP/s of a 2048 × 2048 × 2048 fp32 sgemm (2·n³ FLOPs), best of a few
 * repetitions after a warm-up, with `threads` threads (sets the pool via
 * hm_threads_set, which stays set on return). Uses cblas_sgemm when built
 * with OpenBLAS, else the fast backend's matmul. Returns -1 on allocation
 * failure. */
double hm_bench_sgemm_gflops(int threads);

struct hm_bench_stats {
    double median, min, max;
    int n;
};

/* Median (mean of the two middle values for even n), min and max of v: [n]
 * (v is not modified). n >= 1. */
struct hm_bench_stats hm_bench_stats(const double *v, int n);

#endif
