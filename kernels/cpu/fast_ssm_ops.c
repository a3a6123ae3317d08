/* fast_ssm_ops.c — fast CPU HedgeMamba conv and pointwise ops (SPEC §3):
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

#include "cpu_ssm.h"

#define HM_PAR_MIN 32768
#define CONV_CB 32   /* channels per conv block */
#define CONV_KMAX 16 /* wider convs run the ref loops */

static int64_t imin(int64_t a, int64_t b) { return a < b ? a : b; }

/* ---- causal depthwise conv ------------------------------------------------ */

void hm_fast_conv1d_forward(HM_CPU_CTX, float *c, const float *x, const float *w, const float *bias,
                            int64_t T, int64_t C, int64_t K)
{
    if (K > CONV_KMAX || K < 1) {
        hm_ref_conv1d_forward(ctx, c, x, w, bias, T, C, K);
        return;
    }
    const int64_t nb = (C + CONV_CB - 1) / CONV_CB;
#pragma omp parallel for schedule(static) if (T * C * K >= HM_PAR_MIN)
    for (int64_t blk = 0; blk < nb; blk++) {
        const int64_t c0 = blk * CONV_CB, nc = imin(CONV_CB, C - c0);
        float wt[CONV_KMAX][CONV_CB], acc[CONV_CB];
        for (int64_t k = 0; k < K; k++)
            for (int64_t j = 0; j < CONV_CB; j++)
                wt[k][j] = j < nc ? w[(c0 + j) * K + k] : 0;
        for (int64_t t = 0; t < T; t++) {
            for (int64_t j = 0; j < nc; j++)
                acc[j] = bias ? bias[c0 + j] : 0;
            for (int64_t k = 0; k < K; k++) {
                int64_t src = t - (K - 1) + k;
                if (src < 0)
                    continue;
                const float *xr = x + src * C + c0, *wk = wt[k];
#pragma omp simd
                for (int64_t j = 0; j < nc; j++)
                    acc[j] += wk[j] * xr[j];
            }
            memcpy(c + t * C + c0, acc, sizeof(float) * (size_t)nc);
        }
    }
}

/* Per channel block (it owns dw and dbias of its channels: no reduction):
 * dx[s] = Σ_k w[k] dc[s + K − 1 − k], dw[k] += Σ_t dc[t] x[t − K + 1 + k]. */
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
        const int64_t c0 = blk * CONV_CB, nc = imin(CONV_CB, C - c0);
        float wt[CONV_KMAX][CONV_CB], gw[CONV_KMAX][CONV_CB], gb[CONV_CB], acc[CONV_CB];
        for (int64_t k = 0; k < K; k++)
            for (int64_t j = 0; j < CONV_CB; j++) {
                wt[k][j] = j < nc ? w[(c0 + j) * K + k] : 0;
                gw[k][j] = 0;
            }
        for (int64_t j = 0; j < CONV_CB; j++)
            gb[j] = 0;
        for (int64_t t = 0; t < T; t++) {
            const float *g = dc + t * C + c0;
            if (dx) {
                for (int64_t j = 0; j < nc; j++)
                    acc[j] = 0;
                for (int64_t k = 0; k < K; k++) {
                    int64_t tt = t + (K - 1) - k;
                    if (tt >= T)
                        continue;
                    const float *gr = dc + tt * C + c0, *wk = wt[k];
#pragma omp simd
                    for (int64_t j = 0; j < nc; j++)
                        acc[j] += wk[j] * gr[j];
                }
                memcpy(dx + t * C + c0, acc, sizeof(float) * (size_t)nc);
            }
            if (dw)
                for (int64_t k = 0; k < K; k++) {
                    int64_t src = t - (K - 1) + k;
                    if (src < 0)
                        continue;
                    const float *xr = x + src * C + c0;
                    float *o = gw[k];
#pragma omp simd
                    for (int64_t j = 0; j < nc; j++)
                        o[j] += g[j] * xr[j];
                }
            if (dbias)
#pragma omp simd
                for (int64_t j = 0; j < nc; j++)
                    gb[j] += g[j];
        }
        for (int64_t j = 0; j < nc; j++) {
            if (dw)
                for (int64_t k = 0; k < K; k++)
                    dw[(c0 + j) * K + k] += gw[k][j];
            if (dbias)
                dbias[c0 + j] += gb[j];
        }
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

/* σ(x) without overflow: e = exp(−|x|) ≤ 1. */
static inline float sigmoid_f(float x)
{
    const float e = expf(-fabsf(x));
    return x >= 0 ? 1 / (1 + e) : e / (1 + e);
}

void hm_fast_softplus_backward(HM_CPU_CTX, float *dz, const float *dy, const float *z, int64_t n)
{
#pragma omp parallel for simd schedule(static) if (n >= HM_PAR_MIN)
    for (int64_t i = 0; i < n; i++)
        dz[i] = dy[i] * sigmoid_f(z[i]);
}

void hm_fast_silu_gate_forward(HM_CPU_CTX, float *out, const float *y, const float *z, int64_t n)
{
#pragma omp parallel for simd schedule(static) if (n >= HM_PAR_MIN)
    for (int64_t i = 0; i < n; i++)
        out[i] = y[i] * (z[i] * sigmoid_f(z[i]));
}

void hm_fast_silu_gate_backward(HM_CPU_CTX, float *dy, float *dz, const float *dout, const float *y,
                                const float *z, int64_t n)
{
#pragma omp parallel for schedule(static) if (n >= HM_PAR_MIN)
    for (int64_t i = 0; i < n; i++) {
        const float g = dout[i], zz = z[i], s = sigmoid_f(zz), yy = y[i];
        if (dy)
            dy[i] = g * (zz * s);
        if (dz)
            dz[i] = g * yy * (s * (1 + zz * (1 - s)));
    }
}
