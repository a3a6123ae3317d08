/* fast_ssm_ops.c — fast CPU HedgeMamba conv and pointwise ops (contract §3):
 * causal depthwise conv (forward, backward) over channel blocks with
 * OpenMP, softplus and the SiLU gate. Semantics: kernels/backend.h; checked
 * against ref_ssm.c by tests/test_ssm.c.
 *
 * Gotchas that have caused bugs:
 *   - the conv backward is where naive peers are weak (BENCH.md): each
 *     thread owns a block of channels, so dw/dbias need no reduction and
 *     the per-block sums are added once at the end (they accumulate, +=);
 *   - softplus and sigmoid must not overflow for large |z|: both are
 *     written with exp(−|z|) ≤ 1. */
#include <math.h>
#include <string.h>

#include "cpu_simd.h"
#include "cpu_ssm.h"
#include "cpu_v16.h"
#include "cpu_vexp.h"

#define HM_PAR_MIN 32768
#define CONV_CB 64   /* channels per conv block (conv_col_sums: four vectors) */
#define CONV_KMAX 16 /* wider convs run the ref loops */
#define CONV_TB 128  /* rows per forward task */
#define CONV_RB 16   /* rows per backward dw / dbias register sum */
#define PW_BLK 4096  /* elements per pointwise task */

static int64_t imin(int64_t a, int64_t b) { return a < b ? a : b; }

/* ---- causal depthwise conv ------------------------------------------------ */

/* o[j] = init[j] (init NULL: 0) + Σ_{k0 ≤ k < K} wt[k][j] · src[(k − k0)·step + j]
 * for j < nc: one register sum per channel over the taps in increasing k,
 * 16 channels a vector. The forward reads its rows downwards (step C), the
 * backward's dx upwards (step −C). */
static inline __attribute__((always_inline)) void conv_taps(float *o, const float *init,
                                                            float (*wt)[CONV_CB], int64_t k0,
                                                            int64_t K, const float *src,
                                                            int64_t step, int64_t nc)
{
    int64_t j = 0;
    for (; j + 16 <= nc; j += 16) {
        hm_v16 a = init ? hm_v16_load(init + j) : (hm_v16){0};
        for (int64_t k = k0; k < K; k++)
            a += hm_v16_load(wt[k] + j) * hm_v16_load(src + (k - k0) * step + j);
        hm_v16_store(o + j, a);
    }
    for (; j < nc; j++) {
        float a = init ? init[j] : 0;
        for (int64_t k = k0; k < K; k++)
            a += wt[k][j] * src[(k - k0) * step + j];
        o[j] = a;
    }
}

/* Rows [t0, t1) of channels [c0, c0 + nc), nc ≤ CONV_CB. Each output
 * is one register sum (bias, then the taps in increasing k), vectorized
 * across channels; a sum kept in memory across the taps is a store-to-load
 * chain per tap (2× slower). */
HM_CLONES static void conv_fwd_block(float *c, const float *x, const float *w, const float *bias,
                                     int64_t t0, int64_t t1, int64_t c0, int64_t nc, int64_t C,
                                     int64_t K)
{
    float wt[CONV_KMAX][CONV_CB], b0[CONV_CB];
    for (int64_t k = 0; k < K; k++)
        for (int64_t j = 0; j < nc; j++)
            wt[k][j] = w[(c0 + j) * K + k];
    for (int64_t j = 0; j < nc; j++)
        b0[j] = bias ? bias[c0 + j] : 0;
    for (int64_t t = t0; t < t1; t++) {
        const int64_t k0 = t < K - 1 ? K - 1 - t : 0; /* taps before row 0 are zero */
        conv_taps(c + t * C + c0, b0, wt, k0, K, x + (t - (K - 1) + k0) * C + c0, C, nc);
    }
}

/* Tasks of CONV_TB rows × CONV_CB channels (rows are independent). */
void hm_fast_conv1d_forward(HM_CPU_CTX, float *c, const float *x, const float *w, const float *bias,
                            int64_t T, int64_t C, int64_t K)
{
    if (K > CONV_KMAX || K < 1) {
        hm_ref_conv1d_forward(ctx, c, x, w, bias, T, C, K);
        return;
    }
    const int64_t nb = (C + CONV_CB - 1) / CONV_CB, ntb = (T + CONV_TB - 1) / CONV_TB;
#pragma omp parallel for schedule(static) if (T * C * K >= HM_PAR_MIN)
    for (int64_t task = 0; task < nb * ntb; task++) {
        const int64_t c0 = task % nb * CONV_CB, t0 = task / nb * CONV_TB;
        conv_fwd_block(c, x, w, bias, t0, imin(t0 + CONV_TB, T), c0, imin(CONV_CB, C - c0), C,
                       K);
    }
}

/* o[j] += Σ_{t<n} g[t·C + j] · x[t·xs + j] for j < nc, each sum in a
 * register over the n rows in increasing t; a full block of CONV_CB = 64
 * channels as four vectors side by side (independent chains). dbias passes
 * a row of ones at xs = 0: fma(g, 1, a) rounds as g + a does. */
_Static_assert(CONV_CB == 64, "conv_col_sums holds a full block in four 16-lane sums");

static inline __attribute__((always_inline)) void conv_col_sums(float *o, const float *g,
                                                                const float *x, int64_t xs,
                                                                int64_t n, int64_t C,
                                                                int64_t nc)
{
    int64_t j = 0;
    if (nc == CONV_CB) {
        hm_v16 a0 = hm_v16_load(o), a1 = hm_v16_load(o + 16);
        hm_v16 a2 = hm_v16_load(o + 32), a3 = hm_v16_load(o + 48);
        for (int64_t t = 0; t < n; t++) {
            const float *gt = g + t * C, *xt = x + t * xs;
            a0 += hm_v16_load(gt) * hm_v16_load(xt);
            a1 += hm_v16_load(gt + 16) * hm_v16_load(xt + 16);
            a2 += hm_v16_load(gt + 32) * hm_v16_load(xt + 32);
            a3 += hm_v16_load(gt + 48) * hm_v16_load(xt + 48);
        }
        hm_v16_store(o, a0);
        hm_v16_store(o + 16, a1);
        hm_v16_store(o + 32, a2);
        hm_v16_store(o + 48, a3);
        j = nc;
    }
    for (; j + 16 <= nc; j += 16) {
        hm_v16 a = hm_v16_load(o + j);
        for (int64_t t = 0; t < n; t++)
            a += hm_v16_load(g + t * C + j) * hm_v16_load(x + t * xs + j);
        hm_v16_store(o + j, a);
    }
    for (; j < nc; j++) {
        float a = o[j];
        for (int64_t t = 0; t < n; t++)
            a += g[t * C + j] * x[t * xs + j];
        o[j] = a;
    }
}

/* All rows of channels [c0, c0 + nc): dx[s] = Σ_k w[k] dc[s + K − 1 − k],
 * dw[k] += Σ_t dc[t] x[t − K + 1 + k], dbias += Σ_t dc[t]. As in the
 * forward, every sum stays in a register over its terms (dx: the taps in
 * increasing k; dw, dbias: CONV_RB rows at a time, in increasing t). */
HM_CLONES static void conv_bwd_block(float *dx, float *dw, float *dbias, const float *dc,
                                     const float *x, const float *w, int64_t T, int64_t c0,
                                     int64_t nc, int64_t C, int64_t K)
{
    float wt[CONV_KMAX][CONV_CB], gw[CONV_KMAX][CONV_CB], gb[CONV_CB], ones[CONV_CB];
    for (int64_t k = 0; k < K; k++)
        for (int64_t j = 0; j < nc; j++) {
            wt[k][j] = w[(c0 + j) * K + k];
            gw[k][j] = 0;
        }
    for (int64_t j = 0; j < nc; j++) {
        gb[j] = 0;
        ones[j] = 1;
    }
    for (int64_t r0 = 0; r0 < T; r0 += CONV_RB) {
        const int64_t r1 = imin(T, r0 + CONV_RB);
        if (dx)
            for (int64_t t = r0; t < r1; t++) {
                const int64_t k0 = t + K - 1 >= T ? t + K - T : 0; /* taps past T − 1 */
                conv_taps(dx + t * C + c0, NULL, wt, k0, K, dc + (t + K - 1 - k0) * C + c0, -C,
                          nc); /* from the row of tap k0 up */
            }
        if (dw)
            for (int64_t k = 0; k < K; k++) {
                const int64_t s0 = r0 > K - 1 - k ? r0 : K - 1 - k; /* x row ≥ 0 */
                if (s0 >= r1)
                    continue;
                conv_col_sums(gw[k], dc + s0 * C + c0, x + (s0 - (K - 1) + k) * C + c0, C,
                              r1 - s0, C, nc);
            }
        if (dbias)
            conv_col_sums(gb, dc + r0 * C + c0, ones, 0, r1 - r0, C, nc);
    }
    for (int64_t j = 0; j < nc; j++) {
        if (dw)
            for (int64_t k = 0; k < K; k++)
                dw[(c0 + j) * K + k] += gw[k][j];
        if (dbias)
            dbias[c0 + j] += gb[j];
    }
}

/* Per channel block (it owns dw and dbias of its channels: no reduction). */
void hm_fast_conv1d_backward(HM_CPU_CTX, float *dx, float *dw, float *dbias, const float *dc,
                             const float *x, const float *w, int64_t T, int64_t C, int64_t K)
{
    if (K > CONV_KMAX || K < 1) {
        hm_ref_conv1d_backward(ctx, dx, dw, dbias, dc, x, w, T, C, K);
        return;
    }
    const int64_t nb = (C + CONV_CB - 1) / CONV_CB;
#pragma omp parallel for schedule(static) if (T * C * K >= HM_PAR_MIN)
    for (int64_t blk = 0; blk < nb; blk++) {
        const int64_t c0 = blk * CONV_CB;
        conv_bwd_block(dx, dw, dbias, dc, x, w, T, c0, imin(CONV_CB, C - c0), C, K);
    }
}

/* ---- pointwise ----------------------------------------------------------------- */

void hm_fast_softplus_forward(HM_CPU_CTX, float *y, const float *z, int64_t n)
{
#pragma omp parallel for simd schedule(static) if (n >= HM_PAR_MIN)
    for (int64_t i = 0; i < n; i++) {
        const float x = z[i];
        y[i] = (x > 0 ? x : 0) + log1pf(expf(-fabsf(x)));
    }
}

/* σ(x) without overflow: e = exp(−|x|) ≤ 1 (cpu_vexp.h: vectorizes). */
static inline __attribute__((always_inline)) float sigmoid_f(float x)
{
    const float e = hm_vexpf(-fabsf(x)), r = 1 / (1 + e);
    return x >= 0 ? r : e * r;
}

HM_CLONES static void softplus_bwd_span(float *dz, const float *dy, const float *z, int64_t n)
{
#pragma omp simd
    for (int64_t i = 0; i < n; i++)
        dz[i] = dy[i] * sigmoid_f(z[i]);
}

HM_CLONES static void silu_fwd_span(float *out, const float *y, const float *z, int64_t n)
{
#pragma omp simd
    for (int64_t i = 0; i < n; i++)
        out[i] = y[i] * (z[i] * sigmoid_f(z[i]));
}

HM_CLONES static void silu_bwd_span(float *dy, float *dz, const float *dout, const float *y,
                                    const float *z, int64_t n)
{
    if (dy && dz) {
#pragma omp simd
        for (int64_t i = 0; i < n; i++) {
            const float g = dout[i], zz = z[i], s = sigmoid_f(zz), yy = y[i];
            dy[i] = g * (zz * s);
            dz[i] = g * yy * (s * (1 + zz * (1 - s)));
        }
    } else if (dy) {
#pragma omp simd
        for (int64_t i = 0; i < n; i++)
            dy[i] = dout[i] * (z[i] * sigmoid_f(z[i]));
    } else if (dz) {
#pragma omp simd
        for (int64_t i = 0; i < n; i++) {
            const float zz = z[i], s = sigmoid_f(zz);
            dz[i] = dout[i] * y[i] * (s * (1 + zz * (1 - s)));
        }
    }
}

/* Spans of PW_BLK elements in parallel (aliasing as backend.h allows: each
 * element is read before it is written, in the same iteration). */
#define PW_SPANS(n, call)                                                                      \
    do {                                                                                       \
        const int64_t nb_ = ((n) + PW_BLK - 1) / PW_BLK;                                       \
        _Pragma("omp parallel for schedule(static) if ((n) >= HM_PAR_MIN)")                    \
        for (int64_t b_ = 0; b_ < nb_; b_++) {                                                 \
            const int64_t i0 = b_ * PW_BLK, m = imin(PW_BLK, (n) - i0);                        \
            call;                                                                              \
        }                                                                                      \
    } while (0)

void hm_fast_softplus_backward(HM_CPU_CTX, float *dz, const float *dy, const float *z, int64_t n)
{
    PW_SPANS(n, softplus_bwd_span(dz + i0, dy + i0, z + i0, m));
}

void hm_fast_silu_gate_forward(HM_CPU_CTX, float *out, const float *y, const float *z, int64_t n)
{
    PW_SPANS(n, silu_fwd_span(out + i0, y + i0, z + i0, m));
}

void hm_fast_silu_gate_backward(HM_CPU_CTX, float *dy, float *dz, const float *dout, const float *y,
                                const float *z, int64_t n)
{
    PW_SPANS(n, silu_bwd_span(dy ? dy + i0 : NULL, dz ? dz + i0 : NULL, dout + i0, y + i0,
                              z + i0, m));
}
