/* cuda_stage1.cu — the stage-1 objectives besides cosine_loss
 * (cuda_train.cu): mse_loss and attn_ce_loss. Contracts: kernels/backend.h;
 * oracle: kernels/cpu/ref_stage1.c. Rules of cuda_internal.h: no atomics,
 * every sum a thread's own loop, a warp's butterfly or a fixed serial pass,
 * so the same inputs give the same bits run to run.
 *
 * mse_loss: da elementwise (the same double expression as ref: bit for
 * bit); the loss in one block, a warp per row (lane-strided sums, the
 * butterfly), per-warp row sums in row order, then the warps in order (the
 * structure of cosine_loss_kernel).
 *
 * attn_ce_loss, per head h and query t (ref's loops, spread out):
 *   1. one thread per row (h, t): ref's three passes over s ≤ t, in ref's
 *      order, recomputing the scores each pass: m, Z, D, C and CE_th into
 *      the workspace;
 *   2. (dphiq) one warp per (h, t): the lanes compute g_ts for 32 keys at
 *      a time (each lane its own serial dot products, as ref), then every
 *      lane adds g_ts φk_s into its own features, s ascending (ref's order);
 *   3. (dphik) one warp per (h, s): the same over queries t ≥ s ascending;
 *   4. one thread: Σ_h Σ_t CE_th in ref's order, / n_h, into *loss.
 * O(T²(p + F2)) per head in each of 1–3; nothing T×T is stored. */
#include "cuda_internal.h"
#include "cuda_reduce.cuh"

#include <math.h>
#include <stdint.h>

namespace {

constexpr int kOneBlock = 1024;
constexpr int kOneBlockWarps = kOneBlock / 32;
constexpr int kWarps = 8;     /* warps per block of the per-row gradient kernels */
constexpr int kRegs = 4;      /* features per lane per pass: 32 · kRegs per pass */

/* ---- mse_loss ---------------------------------------------------------------- */

__global__ void __launch_bounds__(kRowThreads)
    mse_grad_kernel(float *da, const float *a, const float *b, int64_t n, double g2)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        da[i] = (float)(g2 * ((double)a[i] - (double)b[i]));
}

__global__ void __launch_bounds__(kOneBlock)
    mse_loss_kernel(double *loss, const float *a, const float *b, int64_t N, int64_t d)
{
    __shared__ double swarp[kOneBlockWarps];
    const int lane = threadIdx.x & 31, wp = threadIdx.x >> 5;
    double acc = 0;
    for (int64_t t = wp; t < N; t += kOneBlockWarps) {
        const float *ar = a + t * d, *br = b + t * d; /* [d] each */
        double s = 0;
        for (int64_t i = lane; i < d; i += 32) {
            const double e = (double)ar[i] - (double)br[i];
            s += e * e;
        }
        acc += cu_warp_sum(s) / (double)d;
    }
    const double total = block_warps_total(acc, swarp, kOneBlockWarps);
    if (threadIdx.x == 0)
        *loss += total;
}

/* ---- attn_ce_loss -------------------------------------------------------------- */

struct CeArgs {
    const float *phiq, *phik, *q, *k; /* as the op's */
    int64_t T, n_h, F2, p, rs, hs;
    double eps, inv_sqrt_p, c;        /* c = scale / n_h */
    double *m, *Z, *D, *C, *ce;      /* [n_h, T] each: the row statistics */
};

__device__ double dot_d(const float *a, const float *b, int64_t n)
{
    double s = 0;
    for (int64_t i = 0; i < n; i++)
        s += (double)a[i] * b[i];
    return s;
}

__device__ double score(const CeArgs &a, int64_t h, int64_t t, int64_t s)
{
    return dot_d(a.q + t * a.rs + h * a.hs, a.k + s * a.rs + h * a.hs, a.p) * a.inv_sqrt_p;
}

__device__ double phidot(const CeArgs &a, int64_t h, int64_t t, int64_t s)
{
    return dot_d(a.phiq + (t * a.n_h + h) * a.F2, a.phik + (s * a.n_h + h) * a.F2, a.F2);
}

/* g_ts = c (C_t − w_ts) / D_t, w = P / (A + δ), from row t's statistics. */
__device__ double grad_ts(const CeArgs &a, int64_t h, int64_t t, int64_t s)
{
    const int64_t r = h * a.T + t;
    const double P = exp(score(a, h, t, s) - a.m[r]) / a.Z[r];
    const double A = phidot(a, h, t, s) / a.D[r];
    return a.c * ((a.C[r] - P / (A + HM_ATTN_CE_DELTA)) / a.D[r]);
}

__global__ void __launch_bounds__(128) ce_stats_kernel(CeArgs a)
{
    const int64_t r = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= a.n_h * a.T)
        return;
    const int64_t h = r / a.T, t = r % a.T;
    double m = -INFINITY, D = 0, Z = 0, C = 0, ce = 0;
    for (int64_t s = 0; s <= t; s++) {
        const double z = score(a, h, t, s);
        m = z > m ? z : m;
        D += phidot(a, h, t, s);
    }
    D += a.eps;
    for (int64_t s = 0; s <= t; s++)
        Z += exp(score(a, h, t, s) - m);
    for (int64_t s = 0; s <= t; s++) {
        const double P = exp(score(a, h, t, s) - m) / Z, A = phidot(a, h, t, s) / D;
        ce -= P * log(A + HM_ATTN_CE_DELTA);
        C += P / (A + HM_ATTN_CE_DELTA) * A;
    }
    a.m[r] = m;
    a.Z[r] = Z;
    a.D[r] = D;
    a.C[r] = C;
    a.ce[r] = ce;
}

/* over_keys: 1 → one warp per query row (h, t) sums g_ts φk_s over s ≤ t into dphiq;
 *            0 → one warp per key row (h, s) sums g_ts φq_t over t ≥ s into dphik. */
__global__ void __launch_bounds__(kWarps * 32) ce_grad_kernel(CeArgs a, float *out, int over_keys)
{
    __shared__ double sg[kWarps][32];
    const int lane = threadIdx.x & 31, wp = threadIdx.x >> 5;
    const int64_t r = (int64_t)blockIdx.x * kWarps + wp;
    if (r >= a.n_h * a.T) /* the whole warp leaves together */
        return;
    const int64_t h = r / a.T, i = r % a.T;
    /* the other index's range */
    const int64_t lo = over_keys ? 0 : i, hi = over_keys ? i + 1 : a.T;
    for (int64_t f0 = 0; f0 < a.F2; f0 += 32 * kRegs) {
        double acc[kRegs];
        for (int j = 0; j < kRegs; j++)
            acc[j] = 0;
        for (int64_t j0 = lo; j0 < hi; j0 += 32) {
            const int64_t j = j0 + lane;
            double g = 0;
            if (j < hi)
                g = over_keys ? grad_ts(a, h, i, j) : grad_ts(a, h, j, i);
            sg[wp][lane] = g;
            __syncwarp();
            const int n = hi - j0 < 32 ? (int)(hi - j0) : 32;
            for (int u = 0; u < n; u++) {
                const double gu = sg[wp][u];
                /* the φk row of s = j0 + u, or the φq row of t = j0 + u */
                const float *row = (over_keys ? a.phik : a.phiq) + ((j0 + u) * a.n_h + h) * a.F2;
                for (int v = 0; v < kRegs; v++) {
                    const int64_t f = f0 + lane + 32 * v;
                    if (f < a.F2)
                        acc[v] += gu * row[f];
                }
            }
            __syncwarp();
        }
        for (int v = 0; v < kRegs; v++) {
            const int64_t f = f0 + lane + 32 * v;
            if (f < a.F2)
                out[(i * a.n_h + h) * a.F2 + f] = (float)acc[v];
        }
    }
}

__global__ void ce_sum_kernel(double *loss, const double *ce, int64_t n_h, int64_t T)
{
    double total = 0;
    for (int64_t h = 0; h < n_h; h++) {
        double s = 0;
        for (int64_t t = 0; t < T; t++)
            s += ce[h * T + t];
        total += s;
    }
    *loss += total / (double)n_h;
}

} /* namespace */

/* loss: [1]  da: [N, d] or NULL  a, b: [N, d] */
void cu_mse_loss(void *ctx, double *loss, float *da, const float *a, const float *b, int64_t N,
                 int64_t d, float scale)
{
    if (N <= 0 || d <= 0)
        return;
    if (da) {
        const int64_t n = N * d;
        const unsigned grid = cu_blocks(n, kRowThreads) < 65536u ? cu_blocks(n, kRowThreads)
                                                                 : 65536u;
        mse_grad_kernel<<<grid, kRowThreads, 0, cu_stream(ctx)>>>(
            da, a, b, n, 2.0 * (double)scale / (double)d);
        CU_LAUNCHED(ctx);
    }
    mse_loss_kernel<<<1, kOneBlock, 0, cu_stream(ctx)>>>(loss, a, b, N, d);
    CU_LAUNCHED(ctx);
}

/* The row statistics m, Z, D, C, CE: [5, n_h, T] doubles. */
size_t cu_attn_ce_loss_ws_size(void *ctx, int64_t T, int64_t n_h, int64_t F2, int64_t p)
{
    (void)ctx, (void)F2, (void)p;
    return sizeof(double) * (size_t)(5 * n_h * T);
}

/* loss: [1]  dphiq, dphik: [T, n_h, F2] or NULL  phiq, phik: [T, n_h, F2]
 * q, k: strided (qk_row_stride, qk_head_stride)  ws: ≥ cu_attn_ce_loss_ws_size */
void cu_attn_ce_loss(void *ctx, double *loss, float *dphiq, float *dphik, const float *phiq,
                     const float *phik, const float *q, const float *k, int64_t T, int64_t n_h,
                     int64_t F2, int64_t p, int64_t qk_row_stride, int64_t qk_head_stride,
                     float eps, float scale, void *ws, size_t ws_size)
{
    if (T <= 0 || n_h <= 0)
        return;
    const int64_t R = n_h * T;
    if (!ws || ws_size < sizeof(double) * (size_t)(5 * R)) {
        cu_record(ctx, __FILE__, __LINE__, "attn_ce_loss", "workspace smaller than its *_ws_size");
        return;
    }
    double *st = static_cast<double *>(ws);
    const CeArgs a = {phiq, phik, q, k, T, n_h, F2, p, qk_row_stride, qk_head_stride,
                      (double)eps, 1.0 / sqrt((double)p), (double)scale / (double)n_h,
                      st, st + R, st + 2 * R, st + 3 * R, st + 4 * R};
    ce_stats_kernel<<<cu_blocks(R, 128), 128, 0, cu_stream(ctx)>>>(a);
    CU_LAUNCHED(ctx);
    if (dphiq) {
        ce_grad_kernel<<<cu_blocks(R, kWarps), kWarps * 32, 0, cu_stream(ctx)>>>(a, dphiq, 1);
        CU_LAUNCHED(ctx);
    }
    if (dphik) {
        ce_grad_kernel<<<cu_blocks(R, kWarps), kWarps * 32, 0, cu_stream(ctx)>>>(a, dphik, 0);
        CU_LAUNCHED(ctx);
    }
    ce_sum_kernel<<<1, 1, 0, cu_stream(ctx)>>>(loss, st + 4 * R, n_h, T);
    CU_LAUNCHED(ctx);
}
