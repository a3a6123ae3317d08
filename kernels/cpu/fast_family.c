/* fast_family.c — OpenMP versions of the llama-family ops (cpu_family.h),
 * checked against ref_family.c in tests/test_kernels_cpu.c. */
#include <math.h>
#include <string.h>

#include "cpu_family.h"

#define HM_PAR_MIN 32768

void hm_fast_rmsnorm_forward(HM_CPU_CTX, float *y, float *rstd, const float *x, const float *w, int64_t T,
                             int64_t d, float eps)
{
#pragma omp parallel for schedule(static) if (T * d >= HM_PAR_MIN)
    for (int64_t t = 0; t < T; t++) {
        const float *xt = x + t * d;
        double ss = 0;
        for (int64_t i = 0; i < d; i++)
            ss += (double)xt[i] * (double)xt[i];
        const float r = (float)(1.0 / sqrt(ss / (double)d + (double)eps));
        if (rstd)
            rstd[t] = r;
        float *yt = y + t * d;
#pragma omp simd
        for (int64_t i = 0; i < d; i++)
            yt[i] = xt[i] * r * w[i];
    }
}

void hm_fast_rmsnorm_backward(HM_CPU_CTX, float *dx, float *dw, const float *dy, const float *x,
                              const float *rstd, const float *w, int64_t T, int64_t d)
{
    if (dx) {
#pragma omp parallel for schedule(static) if (T * d >= HM_PAR_MIN)
        for (int64_t t = 0; t < T; t++) {
            const float *xt = x + t * d, *gt = dy + t * d;
            const double r = rstd[t];
            double dot = 0;
            for (int64_t i = 0; i < d; i++)
                dot += (double)gt[i] * (double)w[i] * (double)xt[i];
            const double c = dot * r * r * r / (double)d;
            for (int64_t i = 0; i < d; i++)
                dx[t * d + i] = (float)(r * (double)gt[i] * (double)w[i] - (double)xt[i] * c);
        }
    }
    if (dw) {
        /* columns in parallel: each thread owns its dw entries */
#pragma omp parallel for schedule(static) if (T * d >= HM_PAR_MIN)
        for (int64_t i = 0; i < d; i++) {
            double acc = 0;
            for (int64_t t = 0; t < T; t++)
                acc += (double)dy[t * d + i] * (double)x[t * d + i] * (double)rstd[t];
            dw[i] += (float)acc;
        }
    }
}

void hm_fast_qkv_expand_forward(HM_CPU_CTX, float *y, const float *x, int64_t T, int64_t n_h, int64_t n_kv,
                                int64_t p)
{
    const int64_t in = (n_h + 2 * n_kv) * p;
#pragma omp parallel for schedule(static) if (T * in >= HM_PAR_MIN)
    for (int64_t t = 0; t < T; t++)
        hm_qkv_expand_row(y + t * 3 * n_h * p, x + t * in, n_h, n_kv, p);
}

void hm_fast_qkv_expand_backward(HM_CPU_CTX, float *dx, const float *dy, int64_t T, int64_t n_h,
                                 int64_t n_kv, int64_t p)
{
    const int64_t in = (n_h + 2 * n_kv) * p, grp = n_h / n_kv;
#pragma omp parallel for schedule(static) if (T * in >= HM_PAR_MIN)
    for (int64_t t = 0; t < T; t++) {
        float *xr = dx + t * in;
        const float *yr = dy + t * 3 * n_h * p;
        for (int64_t h = 0; h < n_h; h++)
            memcpy(xr + h * p, yr + h * 3 * p, sizeof(float) * (size_t)p);
        /* each kv head: the sum over its group, in head order (as ref) */
        for (int64_t g = 0; g < n_kv; g++)
            for (int s = 1; s <= 2; s++) {
                float *dst = xr + (n_h + (s - 1) * n_kv) * p + g * p;
                memset(dst, 0, sizeof(float) * (size_t)p);
                for (int64_t h = g * grp; h < (g + 1) * grp; h++)
                    for (int64_t i = 0; i < p; i++)
                        dst[i] += yr[h * 3 * p + s * p + i];
            }
    }
}
