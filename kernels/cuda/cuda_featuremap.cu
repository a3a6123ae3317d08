/* cuda_featuremap.cu — the Hedgehog feature maps (contract §2) on the
 * device: φ(x) = [softmax(u); softmax(−u)], u = x W + b per head, and their
 * backward. Semantics: kernels/backend.h; the oracle is
 * kernels/cpu/ref_linattn.c (double accumulation). Rules: cuda_internal.h
 * (one stream, no atomics, fixed-order sums, no allocation). */
#include "cuda_internal.h"

#include <math.h>

namespace {

constexpr int NE = 256; /* threads of the dW / db kernel */
/* ---- feature maps ----------------------------------------------------------- */

/* u_j = b_j + Σ_i x_i W_ij in ref's order (recomputed per pass, as ref does). */
__device__ double fm_u(const float *xr, const float *Wh, const float *bh, int64_t p, int64_t F,
                       int64_t j)
{
    double u = bh[j];
    for (int64_t i = 0; i < p; i++)
        u += (double)xr[i] * Wh[i * F + j];
    return u;
}

/* One warp per (t, h) row; lanes over j. max/min are exact in any order
 * (fmax/fmin skip NaN like ref's comparisons); the sums are xor trees. */
__global__ void k_fm_fwd(float *phi, const float *x, const float *W, const float *b, int64_t T,
                         int64_t n_h, int64_t p, int64_t F, int64_t rs, int64_t hs)
{
    const int lane = threadIdx.x & 31;
    const int64_t wpb = blockDim.x / 32, rows = T * n_h;
    for (int64_t row = (int64_t)blockIdx.x * wpb + threadIdx.x / 32; row < rows;
         row += (int64_t)gridDim.x * wpb) {
        const int64_t t = row / n_h, h = row % n_h;
        const float *xr = x + t * rs + h * hs, *Wh = W + h * p * F, *bh = b + h * F;
        float *ph = phi + row * 2 * F;
        double mx = -INFINITY, mn = INFINITY, sp = 0, sm = 0;
        for (int64_t j = lane; j < F; j += 32) {
            const double u = fm_u(xr, Wh, bh, p, F, j);
            mx = fmax(mx, u);
            mn = fmin(mn, u);
        }
        for (int o = 16; o > 0; o >>= 1) {
            mx = fmax(mx, __shfl_xor_sync(0xffffffffu, mx, o));
            mn = fmin(mn, __shfl_xor_sync(0xffffffffu, mn, o));
        }
        for (int64_t j = lane; j < F; j += 32) {
            const double u = fm_u(xr, Wh, bh, p, F, j);
            sp += exp(u - mx);
            sm += exp(mn - u);
        }
        sp = cu_warp_sum(sp);
        sm = cu_warp_sum(sm);
        for (int64_t j = lane; j < F; j += 32) {
            const double u = fm_u(xr, Wh, bh, p, F, j);
            ph[j] = (float)(exp(u - mx) / sp);
            ph[F + j] = (float)(exp(mn - u) / sm);
        }
    }
}

/* du_j = s_j (g_j − Σ s·g) − s'_j (g'_j − Σ s'·g'), as ref's HM_REF_DU. */
__device__ double fm_du(const float *ph, const float *g, int64_t F, int64_t j, double dp, double dm)
{
    return (double)ph[j] * (g[j] - dp) - (double)ph[F + j] * (g[F + j] - dm);
}

/* dx: one warp per (t, h) row; lanes over i, each a loop over j (ref's order). */
__global__ void k_fm_bwd_dx(float *dx, const float *dphi, const float *phi, const float *W,
                            int64_t T, int64_t n_h, int64_t p, int64_t F, int64_t rs, int64_t hs)
{
    const int lane = threadIdx.x & 31;
    const int64_t wpb = blockDim.x / 32, rows = T * n_h;
    for (int64_t row = (int64_t)blockIdx.x * wpb + threadIdx.x / 32; row < rows;
         row += (int64_t)gridDim.x * wpb) {
        const int64_t t = row / n_h, h = row % n_h;
        const float *ph = phi + row * 2 * F, *g = dphi + row * 2 * F, *Wh = W + h * p * F;
        double dp = 0, dm = 0;
        for (int64_t j = lane; j < F; j += 32) {
            dp += (double)ph[j] * g[j];
            dm += (double)ph[F + j] * g[F + j];
        }
        dp = cu_warp_sum(dp);
        dm = cu_warp_sum(dm);
        float *dxr = dx + t * rs + h * hs;
        for (int64_t i = lane; i < p; i += 32) {
            double s = 0;
            for (int64_t j = 0; j < F; j++)
                s += (double)Wh[i * F + j] * fm_du(ph, g, F, j, dp, dm);
            dxr[i] = (float)s;
        }
    }
}

/* dW, db: ref adds (float) terms to the float gradient row by row in t order,
 * so each thread owns one element (h, i, j) (i < max(p, 1); i = 0 also owns
 * db[h, j]) and walks t in order; the 8 warps of the block compute Σ s·g and
 * Σ s'·g' for 8 rows at a time. Grid: n_h × ceil(max(p,1)·F / NE) blocks. */
__global__ void __launch_bounds__(NE)
k_fm_bwd_dw(float *dW, float *db, const float *dphi, const float *x, const float *phi, int64_t T,
            int64_t n_h, int64_t p, int64_t F, int64_t rs, int64_t hs)
{
    constexpr int WARPS = NE / 32;
    __shared__ double sdp[WARPS], sdm[WARPS];
    const int lane = threadIdx.x & 31, warp = threadIdx.x / 32;
    const int64_t PE = (p > 0 ? p : 1) * F, tiles = (PE + NE - 1) / NE;
    for (int64_t blk = blockIdx.x; blk < n_h * tiles; blk += gridDim.x) {
        const int64_t h = blk / tiles, e = (blk % tiles) * NE + threadIdx.x;
        const bool valid = e < PE;
        const int64_t i = valid ? e / F : 0, j = valid ? e % F : 0;
        const bool own_w = valid && dW && i < p, own_b = valid && db && i == 0;
        float aw = own_w ? dW[h * p * F + i * F + j] : 0.0f;
        float ab = own_b ? db[h * F + j] : 0.0f;
        for (int64_t t0 = 0; t0 < T; t0 += WARPS) {
            const int64_t tw = t0 + warp;
            if (tw < T) {
                const float *ph = phi + (tw * n_h + h) * 2 * F, *g = dphi + (tw * n_h + h) * 2 * F;
                double dp = 0, dm = 0;
                for (int64_t jj = lane; jj < F; jj += 32) {
                    dp += (double)ph[jj] * g[jj];
                    dm += (double)ph[F + jj] * g[F + jj];
                }
                dp = cu_warp_sum(dp);
                dm = cu_warp_sum(dm);
                if (lane == 0) {
                    sdp[warp] = dp;
                    sdm[warp] = dm;
                }
            }
            __syncthreads();
            const int nt = (int)(T - t0 < WARPS ? T - t0 : WARPS);
            if (own_w || own_b)
                for (int w = 0; w < nt; w++) {
                    const int64_t t = t0 + w;
                    const float *ph = phi + (t * n_h + h) * 2 * F, *g = dphi + (t * n_h + h) * 2 * F;
                    const double du = fm_du(ph, g, F, j, sdp[w], sdm[w]);
                    if (own_w)
                        aw += (float)((double)x[t * rs + h * hs + i] * du);
                    if (own_b)
                        ab += (float)du;
                }
            __syncthreads();
        }
        if (own_w)
            dW[h * p * F + i * F + j] = aw;
        if (own_b)
            db[h * F + j] = ab;
    }
}

} /* namespace */

/* ---- the ops ------------------------------------------------------------------- */

/* phi: [T, n_h, 2F]  x: (t, h, i) at x[t rs + h hs + i]  W: [n_h, p, F]  b: [n_h, F] */
void cu_featuremap_forward(void *ctx, float *phi, const float *x, const float *W, const float *b,
                           int64_t T, int64_t n_h, int64_t p, int64_t F, int64_t row_stride,
                           int64_t head_stride)
{
    if (T <= 0 || n_h <= 0 || F <= 0)
        return;
    k_fm_fwd<<<cu_blocks(T * n_h, 4), 128, 0, cu_stream(ctx)>>>(phi, x, W, b, T, n_h, p, F,
                                                                 row_stride, head_stride);
    CU_LAUNCHED(ctx);
}

/* dx: as x or NULL  dW: [n_h, p, F] or NULL (+=)  db: [n_h, F] or NULL (+=)
 * dphi, phi: [T, n_h, 2F]  x: as the forward  W: [n_h, p, F] */
void cu_featuremap_backward(void *ctx, float *dx, float *dW, float *db, const float *dphi,
                            const float *x, const float *phi, const float *W, int64_t T,
                            int64_t n_h, int64_t p, int64_t F, int64_t row_stride,
                            int64_t head_stride)
{
    if (T <= 0 || n_h <= 0)
        return;
    cudaStream_t st = cu_stream(ctx);
    if (dx && p > 0) {
        k_fm_bwd_dx<<<cu_blocks(T * n_h, 4), 128, 0, st>>>(dx, dphi, phi, W, T, n_h, p, F,
                                                            row_stride, head_stride);
        CU_LAUNCHED(ctx);
    }
    if ((dW || db) && F > 0) {
        const int64_t tiles = ((p > 0 ? p : 1) * F + NE - 1) / NE;
        k_fm_bwd_dw<<<cu_blocks(n_h * tiles, 1), NE, 0, st>>>(dW, db, dphi, x, phi, T, n_h, p, F,
                                                         row_stride, head_stride);
        CU_LAUNCHED(ctx);
    }
}
