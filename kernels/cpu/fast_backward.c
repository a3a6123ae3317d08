/* fast_backward.c — fast CPU backward ops: OpenBLAS sgemm outside parallel
 * regions, OpenMP loops elsewhere. Semantics: cpu_backward.h; checked
 * against ref_backward.c by tests/test_backward.c. Without BLAS, the GEMM
 * ops fall back to the reference loops. */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "cpu_backward.h"
#include "cpu_ops.h"
#include "cpu_simd.h"
#include "cpu_vexp.h"

#ifdef HM_HAVE_BLAS
#include <cblas.h>
#endif

#define HM_PAR_MIN 32768

static int fits_int(int64_t a, int64_t b, int64_t c)
{
    return a > 0 && b > 0 && c > 0 && a <= INT32_MAX && b <= INT32_MAX && c <= INT32_MAX;
}

void hm_fast_matmul_backward(HM_CPU_CTX, float *dx, float *dw, float *db, const float *dy, const float *x,
                             const float *w, int64_t T, int64_t in, int64_t out)
{
#ifdef HM_HAVE_BLAS
    if (fits_int(T, in, out)) {
        if (dx) /* dx[T,in] = dy[T,out] · w[out,in] */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)T, (int)in, (int)out,
                        1.0f, dy, (int)out, w, (int)in, 0.0f, dx, (int)in);
        if (dw) /* dw[out,in] += dy^T · x */
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)out, (int)in, (int)T,
                        1.0f, dy, (int)out, x, (int)in, 1.0f, dw, (int)in);
        if (db) {
            /* column sums of dy[T,out], blocks of 64 columns per task */
            int64_t nb = (out + 63) / 64;
#pragma omp parallel for schedule(static) if (T * out >= HM_PAR_MIN)
            for (int64_t blk = 0; blk < nb; blk++) {
                int64_t o0 = blk * 64, o1 = o0 + 64 < out ? o0 + 64 : out;
                float acc[64] = {0};
                for (int64_t t = 0; t < T; t++) {
                    const float *r = dy + t * out;
#pragma omp simd
                    for (int64_t o = o0; o < o1; o++)
                        acc[o - o0] += r[o];
                }
                for (int64_t o = o0; o < o1; o++)
                    db[o] += acc[o - o0];
            }
        }
        return;
    }
#endif
    hm_ref_matmul_backward(ctx, dx, dw, db, dy, x, w, T, in, out);
}

/* dx of one row. */
HM_CLONES static void layernorm_dx_row(float *dxr, const float *dyr, const float *xr,
                                       const float *w, float mu, float rs, int64_t d)
{
    float mg = 0, mgx = 0;
#pragma omp simd reduction(+ : mg, mgx)
    for (int64_t i = 0; i < d; i++) {
        float g = dyr[i] * w[i];
        mg += g;
        mgx += g * ((xr[i] - mu) * rs);
    }
    mg /= (float)d;
    mgx /= (float)d;
#pragma omp simd
    for (int64_t i = 0; i < d; i++)
        dxr[i] = rs * (dyr[i] * w[i] - mg - ((xr[i] - mu) * rs) * mgx);
}

/* dw, db of columns [i0, i1) (≤ 64), summed over the T rows in order. */
HM_CLONES static void layernorm_dwb_block(float *dw, float *db, const float *dy, const float *x,
                                          const float *mean, const float *rstd, int64_t T,
                                          int64_t d, int64_t i0, int64_t i1)
{
    float aw[64] = {0}, ab[64] = {0};
    for (int64_t t = 0; t < T; t++) {
        const float *xr = x + t * d, *dyr = dy + t * d;
        const float mu = mean[t], rs = rstd[t];
#pragma omp simd
        for (int64_t i = i0; i < i1; i++) {
            aw[i - i0] += dyr[i] * ((xr[i] - mu) * rs);
            ab[i - i0] += dyr[i];
        }
    }
    for (int64_t i = i0; i < i1; i++) {
        if (dw)
            dw[i] += aw[i - i0];
        if (db)
            db[i] += ab[i - i0];
    }
}

void hm_fast_layernorm_backward(HM_CPU_CTX, float *dx, float *dw, float *db, const float *dy,
                                const float *x, const float *mean, const float *rstd,
                                const float *w, int64_t T, int64_t d)
{
    if (dx) {
#pragma omp parallel for schedule(static) if (T * d >= HM_PAR_MIN)
        for (int64_t t = 0; t < T; t++)
            layernorm_dx_row(dx + t * d, dy + t * d, x + t * d, w, mean[t], rstd[t], d);
    }
    if (dw || db) {
        int64_t nb = (d + 63) / 64;
#pragma omp parallel for schedule(static) if (T * d >= HM_PAR_MIN)
        for (int64_t blk = 0; blk < nb; blk++) {
            int64_t i0 = blk * 64, i1 = i0 + 64 < d ? i0 + 64 : d;
            layernorm_dwb_block(dw, db, dy, x, mean, rstd, T, d, i0, i1);
        }
    }
}

/* dx = dy·(Φ(x) + x·φ(x)) (erf) or the tanh form's derivative, vectorized
 * with cpu_vexp.h (dx may alias dy). */
HM_CLONES static void gelu_backward_span(float *dx, const float *dy, const float *x, int64_t n,
                                         int tanh_kind)
{
    const float inv_sqrt2 = 0.70710678118654752f, inv_sqrt2pi = 0.39894228040143268f;
    const float c = 0.79788456080286536f, k = 0.044715f;
    if (!tanh_kind) {
#pragma omp simd
        for (int64_t i = 0; i < n; i++) {
            float v = x[i];
            float cdf = 0.5f * (1.0f + hm_verff(v * inv_sqrt2));
            float pdf = hm_vexpf(-0.5f * v * v) * inv_sqrt2pi;
            dx[i] = dy[i] * (cdf + v * pdf);
        }
    } else {
#pragma omp simd
        for (int64_t i = 0; i < n; i++) {
            float v = x[i];
            float th = hm_vtanhf_gelu(c * (v + k * v * v * v));
            float du = c * (1.0f + 3.0f * k * v * v);
            dx[i] = dy[i] * (0.5f * (1.0f + th) + 0.5f * v * (1.0f - th * th) * du);
        }
    }
}

void hm_fast_gelu_backward(HM_CPU_CTX, float *dx, const float *dy, const float *x, int64_t n,
                           enum hm_gelu_kind kind)
{
    int64_t nb = (n + 4095) / 4096; /* blocks of 4096 elements */
#pragma omp parallel for schedule(static) if (n >= HM_PAR_MIN)
    for (int64_t b = 0; b < nb; b++) {
        int64_t i0 = b * 4096, i1 = i0 + 4096 < n ? i0 + 4096 : n;
        gelu_backward_span(dx + i0, dy + i0, x + i0, i1 - i0, kind == HM_GELU_TANH);
    }
}

void hm_fast_cross_entropy_backward(HM_CPU_CTX, double *loss, float *dlogits, const float *logits,
                                      const int32_t *targets, int64_t T, int64_t V, float scale)
{
    double total = 0;
#pragma omp parallel for schedule(static) reduction(+ : total) if (T * V >= HM_PAR_MIN)
    for (int64_t t = 0; t < T; t++) {
        const float *l = logits + t * V;
        float *g = dlogits + t * V;
        if (targets[t] < 0) {
            memset(g, 0, sizeof(float) * (size_t)V);
            continue;
        }
        float mx = hm_fast_row_max(l, V);
        double se = hm_fast_row_exp(g, l, mx, V);
        double lse = (double)mx + log(se);
        hm_fast_row_scale(g, (float)(scale / se), V);
        g[targets[t]] -= scale;
        total += lse - (double)l[targets[t]];
    }
    *loss += total;
}
