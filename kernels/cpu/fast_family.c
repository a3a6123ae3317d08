/* fast_family.c — OpenMP versions of the llama-family ops (cpu_family.h),
 * checked against ref_family.c in tests/test_kernels_cpu.c. */
#include <math.h>
#include <string.h>

#include "cpu_family.h"
#include "cpu_simd.h"

#define HM_PAR_MIN 32768

/* One row; the double sum in vector lanes (a serial one is latency bound). */
HM_CLONES static void rmsnorm_row(float *yt, float *rstd, const float *xt, const float *w,
                                  int64_t d, float eps)
{
    double ss = 0;
#pragma omp simd reduction(+ : ss)
    for (int64_t i = 0; i < d; i++)
        ss += (double)xt[i] * (double)xt[i];
    const float r = (float)(1.0 / sqrt(ss / (double)d + (double)eps));
    if (rstd)
        *rstd = r;
#pragma omp simd
    for (int64_t i = 0; i < d; i++)
        yt[i] = xt[i] * r * w[i];
}

void hm_fast_rmsnorm_forward(HM_CPU_CTX, float *y, float *rstd, const float *x, const float *w, int64_t T,
                             int64_t d, float eps)
{
#pragma omp parallel for schedule(static) if (T * d >= HM_PAR_MIN)
    for (int64_t t = 0; t < T; t++)
        rmsnorm_row(y + t * d, rstd ? rstd + t : NULL, x + t * d, w, d, eps);
}

HM_CLONES static void rmsnorm_dx_row(float *dxt, const float *gt, const float *xt,
                                     const float *w, double r, int64_t d)
{
    double dot = 0;
#pragma omp simd reduction(+ : dot)
    for (int64_t i = 0; i < d; i++)
        dot += (double)gt[i] * (double)w[i] * (double)xt[i];
    const double c = dot * r * r * r / (double)d;
#pragma omp simd
    for (int64_t i = 0; i < d; i++)
        dxt[i] = (float)(r * (double)gt[i] * (double)w[i] - (double)xt[i] * c);
}

/* dw of columns [i0, i1) (≤ 64): double sums over the T rows in order. */
HM_CLONES static void rmsnorm_dw_block(float *dw, const float *dy, const float *x,
                                       const float *rstd, int64_t T, int64_t d, int64_t i0,
                                       int64_t i1)
{
    double acc[64] = {0};
    for (int64_t t = 0; t < T; t++) {
        const float *gt = dy + t * d, *xt = x + t * d;
        const double r = rstd[t];
#pragma omp simd
        for (int64_t i = i0; i < i1; i++)
            acc[i - i0] += (double)gt[i] * (double)xt[i] * r;
    }
    for (int64_t i = i0; i < i1; i++)
        dw[i] += (float)acc[i - i0];
}

void hm_fast_rmsnorm_backward(HM_CPU_CTX, float *dx, float *dw, const float *dy, const float *x,
                              const float *rstd, const float *w, int64_t T, int64_t d)
{
    if (dx) {
#pragma omp parallel for schedule(static) if (T * d >= HM_PAR_MIN)
        for (int64_t t = 0; t < T; t++)
            rmsnorm_dx_row(dx + t * d, dy + t * d, x + t * d, w, rstd[t], d);
    }
    if (dw) {
        /* blocks of 64 columns in parallel: each thread owns its dw entries
         * and walks the rows in order (a column walk was a stride-d read) */
        const int64_t nb = (d + 63) / 64;
#pragma omp parallel for schedule(static) if (T * d >= HM_PAR_MIN)
        for (int64_t blk = 0; blk < nb; blk++) {
            const int64_t i0 = blk * 64, i1 = i0 + 64 < d ? i0 + 64 : d;
            rmsnorm_dw_block(dw, dy, x, rstd, T, d, i0, i1);
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
