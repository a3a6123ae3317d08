/* cuda_conv.cu — the HedgeMamba causal depthwise conv (contract §3) on the
 * device: forward, backward and the one-token step. Semantics:
 * kernels/backend.h; the oracle is kernels/cpu/ref_ssm.c. Rules:
 * cuda_internal.h (one stream, no atomics, fixed-order sums, no allocation). */
#include "cuda_internal.h"

namespace {
/* ---- conv ----------------------------------------------------------------------- */

/* One thread per (t, ch), ref's order. */
__global__ void k_conv_fwd(float *c, const float *x, const float *w, const float *bias, int64_t T,
                           int64_t C, int64_t K)
{
    for (int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; idx < T * C;
         idx += (int64_t)gridDim.x * blockDim.x) {
        const int64_t t = idx / C, ch = idx % C;
        double s = bias ? bias[ch] : 0;
        for (int64_t k = 0; k < K; k++) {
            const int64_t src = t - (K - 1) + k;
            if (src >= 0)
                s += (double)w[ch * K + k] * x[src * C + ch];
        }
        c[idx] = (float)s;
    }
}

/* dx: one thread per (s, ch). */
__global__ void k_conv_dx(float *dx, const float *dc, const float *w, int64_t T, int64_t C,
                          int64_t K)
{
    for (int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; idx < T * C;
         idx += (int64_t)gridDim.x * blockDim.x) {
        const int64_t s = idx / C, ch = idx % C;
        double g = 0;
        for (int64_t k = 0; k < K; k++) {
            const int64_t t = s + (K - 1) - k;
            if (t < T)
                g += (double)w[ch * K + k] * dc[t * C + ch];
        }
        dx[idx] = (float)g;
    }
}

/* dw (one thread per (ch, k), idx < C K) and dbias (one thread per ch,
 * idx ≥ C K): each a loop over t in order, in double, as ref. */
__global__ void k_conv_dw(float *dw, float *dbias, const float *dc, const float *x, int64_t T,
                          int64_t C, int64_t K)
{
    const int64_t nw = dw ? C * K : 0, n = nw + (dbias ? C : 0);
    for (int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; idx < n;
         idx += (int64_t)gridDim.x * blockDim.x) {
        double g = 0;
        if (idx < nw) {
            const int64_t ch = idx / K, k = idx % K;
            for (int64_t t = 0; t < T; t++) {
                const int64_t src = t - (K - 1) + k;
                if (src >= 0)
                    g += (double)dc[t * C + ch] * x[src * C + ch];
            }
            dw[idx] += (float)g;
        } else {
            const int64_t ch = idx - nw;
            for (int64_t t = 0; t < T; t++)
                g += dc[t * C + ch];
            dbias[ch] += (float)g;
        }
    }
}

/* One thread per channel: the output, then the channel's window column shifted. */
__global__ void k_conv_step(float *c_t, const float *x_t, float *window, const float *w,
                            const float *bias, int64_t C, int64_t K)
{
    for (int64_t ch = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; ch < C;
         ch += (int64_t)gridDim.x * blockDim.x) {
        const float xv = x_t[ch];
        double s = bias ? bias[ch] : 0;
        for (int64_t k = 0; k < K - 1; k++)
            s += (double)w[ch * K + k] * window[k * C + ch];
        if (K >= 1)
            s += (double)w[ch * K + K - 1] * xv;
        c_t[ch] = (float)s;
        if (K > 1) {
            for (int64_t k = 0; k < K - 2; k++)
                window[k * C + ch] = window[(k + 1) * C + ch];
            window[(K - 2) * C + ch] = xv;
        }
    }
}

} /* namespace */

/* ---- the ops ------------------------------------------------------------------- */

/* c, x: [T, C]  w: [C, K]  bias: [C] or NULL */
void cu_conv1d_forward(void *ctx, float *c, const float *x, const float *w, const float *bias,
                       int64_t T, int64_t C, int64_t K)
{
    if (T <= 0 || C <= 0)
        return;
    k_conv_fwd<<<cu_blocks(T * C, 256), 256, 0, cu_stream(ctx)>>>(c, x, w, bias, T, C, K);
    CU_LAUNCHED(ctx);
}

/* dx: [T, C] or NULL  dw: [C, K] or NULL (+=)  dbias: [C] or NULL (+=)  dc, x: [T, C] */
void cu_conv1d_backward(void *ctx, float *dx, float *dw, float *dbias, const float *dc,
                        const float *x, const float *w, int64_t T, int64_t C, int64_t K)
{
    if (T <= 0 || C <= 0)
        return;
    cudaStream_t st = cu_stream(ctx);
    if (dx) {
        k_conv_dx<<<cu_blocks(T * C, 256), 256, 0, st>>>(dx, dc, w, T, C, K);
        CU_LAUNCHED(ctx);
    }
    const int64_t n = (dw ? C * K : 0) + (dbias ? C : 0);
    if (n > 0) {
        k_conv_dw<<<cu_blocks(n, 256), 256, 0, st>>>(dw, dbias, dc, x, T, C, K);
        CU_LAUNCHED(ctx);
    }
}

/* c_t, x_t: [C]  window: [K − 1, C]  w: [C, K]  bias: [C] or NULL */
void cu_conv1d_step(void *ctx, float *c_t, const float *x_t, float *window, const float *w,
                    const float *bias, int64_t C, int64_t K)
{
    if (C <= 0)
        return;
    k_conv_step<<<cu_blocks(C, 256), 256, 0, cu_stream(ctx)>>>(c_t, x_t, window, w, bias, C, K);
    CU_LAUNCHED(ctx);
}
