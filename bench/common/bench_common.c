/* bench_common.c — see bench_common.h. */
#include "bench_common.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "threads.h"

#ifdef HM_HAVE_BLAS
#include <cblas.h>
#endif

double hm_bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double hm_bench_sgemm_gflops(int threads)
{
    const int n = 2048, reps = 2;
    hm_threads_set(threads);
    float *a = malloc(sizeof(float) * (size_t)n * n), *b = malloc(sizeof(float) * (size_t)n * n);
    float *c = malloc(sizeof(float) * (size_t)n * n);
    if (!a || !b || !c) {
        free(a), free(b), free(c);
        return -1;
    }
    for (long i = 0; i < (long)n * n; i++) {
        a[i] = (float)((i * 7 % 13) - 6) * 0.01f;
        b[i] = (float)((i * 5 % 11) - 5) * 0.01f;
    }
    double best = 1e30;
    for (int r = 0; r <= reps; r++) { /* r = 0 is the warm-up */
        double t0 = hm_bench_now();
#ifdef HM_HAVE_BLAS
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f,
                    c, n);
#else
        hm_backend_matmul_forward(hm_backend_get("fast"), c, a, b, NULL, n, n, n);
#endif
        double dt = hm_bench_now() - t0;
        if (r > 0 && dt < best)
            best = dt;
    }
    free(a), free(b), free(c);
    return 2.0 * n * (double)n * n / best * 1e-9;
}

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

struct hm_bench_stats hm_bench_stats(const double *v, int n)
{
    struct hm_bench_stats s = {0, 0, 0, n};
    if (n < 1)
        return s;
    double *w = malloc(sizeof(double) * (size_t)n);
    if (!w)
        return s;
    memcpy(w, v, sizeof(double) * (size_t)n);
    qsort(w, (size_t)n, sizeof(double), cmp_double);
    s.min = w[0];
    s.max = w[n - 1];
    s.median = n % 2 ? w[n / 2] : 0.5 * (w[n / 2 - 1] + w[n / 2]);
    free(w);
    return s;
}
