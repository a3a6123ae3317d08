/* fast_ops.c — the fast CPU ops: OpenBLAS sgemm (HM_HAVE_BLAS) and OpenMP
 * loops. Semantics: kernels/backend.h; checked against ref_ops.c by
 * tests/test_kernels_cpu.c.
 *
 * Threading: BLAS is only called outside OpenMP parallel regions (we link the
 * OpenMP build of OpenBLAS, so sgemm uses the same pool, sized by
 * hm_threads_set). Elementwise loops use `omp parallel for` with static
 * schedules and a size threshold so tiny calls stay serial. */
#include <math.h>
#include <string.h>

#include "cpu_ops.h"
#include "cpu_simd.h"
#include "cpu_vexp.h"
#include "narrow.h"

#ifdef HM_HAVE_BLAS
#include <cblas.h>
#endif

/* Below this many elements an elementwise op runs on one thread. */
#define HM_PAR_MIN 32768

/* Rows per call up to which matmul streams the weights once (decoding: one
 * token per sequence of a batch): sgemm would first copy (pack) all of w,
 * which at a few rows costs more than the product. */
#define HM_MATMUL_FEW_ROWS 16

/* y[T,out] = x[T,in] · w[out,in]^T + b, T ≤ HM_MATMUL_FEW_ROWS: each weight
 * row is read once (from memory) and dotted with the T rows of x (cached). */
HM_CLONES static void matmul_few_rows(float *y, const float *x, const float *w, const float *b,
                                      int64_t T, int64_t in, int64_t out)
{
#pragma omp parallel for schedule(static) if (out * in >= HM_PAR_MIN)
    for (int64_t o = 0; o < out; o++) {
        const float *wr = w + o * in;
        const float bo = b ? b[o] : 0.0f;
        int64_t t = 0;
        for (; t + 4 <= T; t += 4) { /* four rows per pass over wr */
            const float *x0 = x + t * in, *x1 = x0 + in, *x2 = x1 + in, *x3 = x2 + in;
            float a0 = 0, a1 = 0, a2 = 0, a3 = 0;
#pragma omp simd reduction(+ : a0, a1, a2, a3)
            for (int64_t i = 0; i < in; i++) {
                a0 += x0[i] * wr[i];
                a1 += x1[i] * wr[i];
                a2 += x2[i] * wr[i];
                a3 += x3[i] * wr[i];
            }
            y[t * out + o] = a0 + bo;
            y[(t + 1) * out + o] = a1 + bo;
            y[(t + 2) * out + o] = a2 + bo;
            y[(t + 3) * out + o] = a3 + bo;
        }
        for (; t < T; t++) {
            const float *xr = x + t * in;
            float acc = 0;
#pragma omp simd reduction(+ : acc)
            for (int64_t i = 0; i < in; i++)
                acc += xr[i] * wr[i];
            y[t * out + o] = acc + bo;
        }
    }
}

void hm_fast_matmul_forward(HM_CPU_CTX, float *y, const float *x, const float *w, const float *b,
                            int64_t T, int64_t in, int64_t out)
{
    if (T <= HM_MATMUL_FEW_ROWS) {
        matmul_few_rows(y, x, w, b, T, in, out);
        return;
    }
#ifdef HM_HAVE_BLAS
    if (T > 0 && out > 0 && in > 0 && T <= INT32_MAX && in <= INT32_MAX && out <= INT32_MAX) {
        if (b) {
#pragma omp parallel for schedule(static) if (T * out >= HM_PAR_MIN)
            for (int64_t t = 0; t < T; t++)
                memcpy(y + t * out, b, sizeof(float) * (size_t)out);
        }
        /* y[T,out] (+)= x[T,in] · w[out,in]^T */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)T, (int)out, (int)in, 1.0f,
                    x, (int)in, w, (int)in, b ? 1.0f : 0.0f, y, (int)out);
        return;
    }
#endif
    /* no BLAS (or sizes beyond its int API): blocked OpenMP loop */
#pragma omp parallel for collapse(2) schedule(static) if (T * out * in >= HM_PAR_MIN)
    for (int64_t t = 0; t < T; t++)
        for (int64_t o = 0; o < out; o++) {
            const float *xr = x + t * in, *wr = w + o * in;
            float acc = 0;
#pragma omp simd reduction(+ : acc)
            for (int64_t i = 0; i < in; i++)
                acc += xr[i] * wr[i];
            y[t * out + o] = acc + (b ? b[o] : 0.0f);
        }
}

/* One row: two passes with double sums (vector lanes of doubles; a serial
 * double sum per element was latency bound, ~4 cycles an element), then
 * the scaled output. */
HM_CLONES static void layernorm_row(float *yr, float *mean, float *rstd, const float *xr,
                                    const float *w, const float *b, int64_t d, float eps)
{
    double s = 0;
#pragma omp simd reduction(+ : s)
    for (int64_t i = 0; i < d; i++)
        s += xr[i];
    const float m = (float)(s / (double)d);
    double v = 0;
#pragma omp simd reduction(+ : v)
    for (int64_t i = 0; i < d; i++) {
        const float c = xr[i] - m;
        v += (double)(c * c);
    }
    const float rs = (float)(1.0 / sqrt(v / (double)d + (double)eps));
    if (mean)
        *mean = m;
    if (rstd)
        *rstd = rs;
#pragma omp simd
    for (int64_t i = 0; i < d; i++)
        yr[i] = (xr[i] - m) * rs * w[i] + b[i];
}

void hm_fast_layernorm_forward(HM_CPU_CTX, float *y, float *mean, float *rstd, const float *x,
                               const float *w, const float *b, int64_t T, int64_t d, float eps)
{
#pragma omp parallel for schedule(static) if (T * d >= HM_PAR_MIN)
    for (int64_t t = 0; t < T; t++)
        layernorm_row(y + t * d, mean ? mean + t : NULL, rstd ? rstd + t : NULL, x + t * d, w, b,
                      d, eps);
}


/* 0.5·x·(1 + erf(x/√2)) with cpu_vexp.h's erf (libm erff does not vectorize). */
HM_CLONES static void gelu_erf_span(float *y, const float *x, int64_t n)
{
#pragma omp simd
    for (int64_t i = 0; i < n; i++)
        y[i] = 0.5f * x[i] * (1.0f + hm_verff(x[i] * 0.7071067811865476f));
}

/* 0.5·x·(1 + tanh(√(2/π)(x + 0.044715 x³))) */
HM_CLONES static void gelu_tanh_span(float *y, const float *x, int64_t n)
{
    const float c = 0.7978845608028654f;
#pragma omp simd
    for (int64_t i = 0; i < n; i++) {
        float v = x[i];
        y[i] = 0.5f * v * (1.0f + hm_vtanhf_gelu(c * (v + 0.044715f * v * v * v)));
    }
}

void hm_fast_gelu_forward(HM_CPU_CTX, float *y, const float *x, int64_t n, enum hm_gelu_kind kind)
{
    int64_t nb = (n + 4095) / 4096; /* blocks of 4096 elements */
#pragma omp parallel for schedule(static) if (n >= HM_PAR_MIN)
    for (int64_t b = 0; b < nb; b++) {
        int64_t i0 = b * 4096, i1 = i0 + 4096 < n ? i0 + 4096 : n;
        if (kind == HM_GELU_TANH)
            gelu_tanh_span(y + i0, x + i0, i1 - i0);
        else
            gelu_erf_span(y + i0, x + i0, i1 - i0);
    }
}

void hm_fast_add_forward(HM_CPU_CTX, float *y, const float *a, const float *b, int64_t n)
{
#pragma omp parallel for simd schedule(static) if (n >= HM_PAR_MIN)
    for (int64_t i = 0; i < n; i++)
        y[i] = a[i] + b[i];
}

void hm_fast_widen_rows(HM_CPU_CTX, float *y, const int32_t *ids, const uint16_t *x, int64_t N,
                        int64_t d, enum hm_narrow kind)
{
#pragma omp parallel for schedule(static) if (N * d >= HM_PAR_MIN)
    for (int64_t i = 0; i < N; i++) {
        const uint16_t *row = x + (ids ? (int64_t)ids[i] : i) * d;
        float *out = y + i * d;
        if (kind == HM_NARROW_F16)
            for (int64_t j = 0; j < d; j++)
                out[j] = hm_f16_f32(row[j]);
        else
#pragma omp simd
            for (int64_t j = 0; j < d; j++)
                out[j] = hm_bf16_f32(row[j]);
    }
}

void hm_fast_embedding_forward(HM_CPU_CTX, float *y, const int32_t *ids, const float *table, int64_t T,
                               int64_t d)
{
#pragma omp parallel for schedule(static) if (T * d >= HM_PAR_MIN)
    for (int64_t t = 0; t < T; t++)
        memcpy(y + t * d, table + (int64_t)ids[t] * d, sizeof(float) * (size_t)d);
}

/* ---- softmax rows (cpu_ops.h) ---- */

/* max of l: [V] */
HM_CLONES float hm_fast_row_max(const float *l, int64_t V)
{
    float mx = l[0];
#pragma omp simd reduction(max : mx)
    for (int64_t v = 1; v < V; v++)
        mx = l[v] > mx ? l[v] : mx;
    return mx;
}

/* g[v] = e^{l[v] − mx} (g may be NULL: the sum only); returns Σ in fp32
 * partial sums of 256 terms folded into a double total. */
HM_CLONES double hm_fast_row_exp(float *g, const float *l, float mx, int64_t V)
{
    double se = 0;
    for (int64_t v0 = 0; v0 < V; v0 += 256) {
        int64_t v1 = v0 + 256 < V ? v0 + 256 : V;
        float part = 0;
        if (g) {
#pragma omp simd reduction(+ : part)
            for (int64_t v = v0; v < v1; v++) {
                float e = hm_vexpf(l[v] - mx);
                g[v] = e;
                part += e;
            }
        } else {
#pragma omp simd reduction(+ : part)
            for (int64_t v = v0; v < v1; v++)
                part += hm_vexpf(l[v] - mx);
        }
        se += part;
    }
    return se;
}

HM_CLONES void hm_fast_row_scale(float *g, float s, int64_t V)
{
#pragma omp simd
    for (int64_t v = 0; v < V; v++)
        g[v] *= s;
}

void hm_fast_nll_forward(HM_CPU_CTX, float *nll, float *lse, const float *logits, const int32_t *targets,
                         int64_t T, int64_t V)
{
#pragma omp parallel for schedule(static) if (T * V >= HM_PAR_MIN)
    for (int64_t t = 0; t < T; t++) {
        const float *row = logits + t * V;
        float mx = hm_fast_row_max(row, V);
        double l = (double)mx + log(hm_fast_row_exp(NULL, row, mx, V));
        if (lse)
            lse[t] = (float)l;
        nll[t] = (float)(l - (double)row[targets[t]]);
    }
}
