/* cuda_attention.cu — causal softmax attention on the device
 * (cuda_internal.h): the memory-efficient forward and backward of training
 * (no T×T matrix in global memory) and the KV-cache step
 * (attention_cached). Contracts: kernels/backend.h; oracle:
 * kernels/cpu/ref_attention.c. Determinism: every sum is a thread's own
 * loop, a warp's xor butterfly or a block's fixed tree; no atomics. Where
 * ref rounds in fp32 step by step (attention_cached) the kernels use the
 * _rn intrinsics, so nvcc does not contract into an FMA. */
#include "cuda_internal.h"
#include "cuda_reduce.cuh"

#include <math.h>
#include <stdint.h>

namespace {

/* ---- causal softmax attention (training) -----------------------------------
 * qkv: [T, 3 n_h p], row t head h: q at t·3d + h·3p, k at + p, v at + 2p.
 * Memory-efficient: no T×T matrix anywhere. Forward, one block per (W query
 * rows, head), one warp per query row; the block walks key tiles of 32
 * (K, V in shared memory, K rows padded to an odd stride so that lane j
 * reading key j has no bank conflicts); lane j scores key j with ref's
 * sequential double dot (the same bits as ref's score), then the warp does
 * an online-softmax update in double: max and Σ by butterfly, the
 * accumulator (lane-owned columns, double, in shared memory) rescaled and
 * summed over the tile's keys in key order. out = acc / l, lse = m + log l.
 * A faster version would keep q and the accumulator in registers (p fixed
 * per instantiation), take 64–128 query rows per block with mma tiles.
 *
 * Backward recomputes P = exp(s·scale − lse) from the saved lse, rounding P
 * and dP to fp32 as ref does, ds = P (dP − D_i) with D_i = Σ dO_i·O_i
 * (ref's sequential double dot). dq: one warp per query row walks key
 * tiles (dq_i = Σ_j ds_ij·scale·k_j in key order). dk, dv: one warp per key
 * row walks query tiles from the block's first key (dk_j = Σ_i
 * ds_ij·scale·q_i, dv_j = Σ_i P_ij dO_i in query order). Both accumulate in
 * double (ref adds fp32-rounded terms in fp32; the double sum is within
 * ref's own rounding of it). No atomics: each output element belongs to
 * one lane. */

constexpr int kTile = 32;

__host__ __device__ inline int odd_stride(int64_t p)
{
    return (int)(p | 1);
}

/* smem bytes of the forward kernel with W warps */
size_t attn_fwd_smem(int W, int64_t p)
{
    return sizeof(double) * (size_t)(W * p + W * kTile) +
           sizeof(float) * (size_t)(kTile * odd_stride(p) + kTile * p + W * p);
}

__global__ void __launch_bounds__(256)
    attn_fwd_kernel(float *out, float *lse, const float *qkv, int64_t T, int64_t n_h, int64_t p)
{
    extern __shared__ double smem_d[];
    const int W = blockDim.x >> 5, lane = threadIdx.x & 31, wp = threadIdx.x >> 5;
    const int ks = odd_stride(p);
    double *acc = smem_d;                                  /* [W][p] */
    double *Ps = acc + W * p;                              /* [W][32] */
    float *Ks = reinterpret_cast<float *>(Ps + W * kTile); /* [32][ks] */
    float *Vs = Ks + kTile * ks;                           /* [32][p] */
    float *Qs = Vs + kTile * p;                            /* [W][p] */

    const int64_t d = n_h * p, ld = 3 * d, h = blockIdx.y;
    const double scale = 1.0 / sqrt((double)p);
    const float *base = qkv + h * 3 * p;
    const int64_t t0 = (int64_t)blockIdx.x * W, t = t0 + wp;
    const bool active = t < T;
    double *myacc = acc + wp * p;
    double *myP = Ps + wp * kTile;
    const float *myq = Qs + wp * p;
    for (int64_t c = lane; c < p; c += 32) {
        Qs[wp * p + c] = active ? base[t * ld + c] : 0.0f;
        myacc[c] = 0;
    }
    double m = -INFINITY, l = 0;
    const int64_t tlast = (t0 + W < T ? t0 + W : T) - 1; /* the block's last query row */
    for (int64_t s0 = 0; s0 <= tlast; s0 += kTile) {
        __syncthreads(); /* the previous tile is consumed (and Qs written) */
        const int nk = (int)(T - s0 < kTile ? T - s0 : kTile);
        for (int e = threadIdx.x; e < nk * (int)p; e += blockDim.x) {
            const int r = e / (int)p, c = e - r * (int)p;
            const float *src = base + (s0 + r) * ld;
            Ks[r * ks + c] = src[p + c];
            Vs[r * p + c] = src[2 * p + c];
        }
        __syncthreads();
        if (!active || s0 > t) /* warp-uniform */
            continue;
        const int64_t s = s0 + lane;
        double sc = -INFINITY;
        if (s <= t) {
            const float *kr = Ks + lane * ks;
            double a = 0;
            for (int64_t c = 0; c < p; c++)
                a += (double)myq[c] * (double)kr[c];
            sc = a * scale;
        }
        const double tm = warp_max(isnan(sc) ? -INFINITY : sc);
        const double m_new = tm > m ? tm : m;
        const double alpha = exp(m - m_new);
        const double pj = s <= t ? exp(sc - m_new) : 0.0;
        l = l * alpha + cu_warp_sum(pj);
        m = m_new;
        myP[lane] = pj;
        __syncwarp();
        const int jn = (int)(t - s0 + 1 < kTile ? t - s0 + 1 : kTile);
        for (int64_t c = lane; c < p; c += 32) {
            double a = myacc[c] * alpha;
            for (int j = 0; j < jn; j++)
                a += myP[j] * (double)Vs[j * p + c];
            myacc[c] = a;
        }
        __syncwarp();
    }
    if (active) {
        for (int64_t c = lane; c < p; c += 32)
            out[t * d + h * p + c] = (float)(myacc[c] / l);
        if (lse && lane == 0)
            lse[h * T + t] = (float)(m + log(l));
    }
}

/* smem bytes of the dq kernel with W warps */
size_t attn_dq_smem(int W, int64_t p)
{
    return sizeof(double) * (size_t)(W * p + W * kTile) +
           sizeof(float) * (size_t)(2 * kTile * odd_stride(p) + 2 * W * p);
}

/* ref's D_i = Σ_c dO_i[c]·O_i[c], sequential in double. */
__device__ double attn_D(const float *dor, const float *orow, int64_t p)
{
    double D = 0;
    for (int64_t c = 0; c < p; c++)
        D += (double)dor[c] * orow[c];
    return D;
}

__global__ void __launch_bounds__(256)
    attn_dq_kernel(float *dqkv, const float *dout, const float *qkv, const float *out,
                   const float *lse, int64_t T, int64_t n_h, int64_t p)
{
    extern __shared__ double smem_d[];
    const int W = blockDim.x >> 5, lane = threadIdx.x & 31, wp = threadIdx.x >> 5;
    const int ks = odd_stride(p);
    double *acc = smem_d;                                  /* [W][p] */
    double *Ss = acc + W * p;                              /* [W][32] ds·scale */
    float *Ks = reinterpret_cast<float *>(Ss + W * kTile); /* [32][ks] */
    float *Vs = Ks + kTile * ks;                           /* [32][ks] */
    float *Qs = Vs + kTile * ks;                           /* [W][p] */
    float *Os = Qs + W * p;                                /* [W][p] dO rows */

    const int64_t d = n_h * p, ld = 3 * d, h = blockIdx.y;
    const double scale = 1.0 / sqrt((double)p);
    const float *base = qkv + h * 3 * p;
    const int64_t i0 = (int64_t)blockIdx.x * W, i = i0 + wp;
    const bool active = i < T;
    double *myacc = acc + wp * p;
    double *myS = Ss + wp * kTile;
    const float *myq = Qs + wp * p, *mydo = Os + wp * p;
    for (int64_t c = lane; c < p; c += 32) {
        Qs[wp * p + c] = active ? base[i * ld + c] : 0.0f;
        Os[wp * p + c] = active ? dout[i * d + h * p + c] : 0.0f;
        myacc[c] = 0;
    }
    __syncwarp();
    double D = 0, lse_i = 0;
    if (active) {
        if (lane == 0)
            D = attn_D(mydo, out + i * d + h * p, p);
        D = __shfl_sync(kFull, D, 0);
        lse_i = (double)lse[h * T + i];
    }
    const int64_t ilast = (i0 + W < T ? i0 + W : T) - 1;
    for (int64_t s0 = 0; s0 <= ilast; s0 += kTile) {
        __syncthreads();
        const int nk = (int)(T - s0 < kTile ? T - s0 : kTile);
        for (int e = threadIdx.x; e < nk * (int)p; e += blockDim.x) {
            const int r = e / (int)p, c = e - r * (int)p;
            const float *src = base + (s0 + r) * ld;
            Ks[r * ks + c] = src[p + c];
            Vs[r * ks + c] = src[2 * p + c];
        }
        __syncthreads();
        if (!active || s0 > i)
            continue;
        const int64_t j = s0 + lane;
        double ds = 0;
        if (j <= i) {
            const float *kr = Ks + lane * ks, *vr = Vs + lane * ks;
            double s = 0, dp = 0;
            for (int64_t c = 0; c < p; c++) {
                s += (double)myq[c] * kr[c];
                dp += (double)mydo[c] * vr[c];
            }
            const float P = (float)exp(s * scale - lse_i), dP = (float)dp;
            ds = (double)P * ((double)dP - D);
        }
        myS[lane] = ds * scale;
        __syncwarp();
        const int jn = (int)(i - s0 + 1 < kTile ? i - s0 + 1 : kTile);
        for (int64_t c = lane; c < p; c += 32) {
            double a = myacc[c];
            for (int jj = 0; jj < jn; jj++)
                a += myS[jj] * (double)Ks[jj * ks + c];
            myacc[c] = a;
        }
        __syncwarp();
    }
    if (active)
        for (int64_t c = lane; c < p; c += 32)
            dqkv[i * ld + h * 3 * p + c] = (float)myacc[c];
}

/* smem bytes of the dk/dv kernel with W warps */
size_t attn_dkv_smem(int W, int64_t p)
{
    return sizeof(double) * (size_t)(2 * W * p + 2 * W * kTile + kTile) +
           sizeof(float) * (size_t)(2 * kTile * odd_stride(p) + 2 * W * p);
}

__global__ void __launch_bounds__(256)
    attn_dkv_kernel(float *dqkv, const float *dout, const float *qkv, const float *out,
                    const float *lse, int64_t T, int64_t n_h, int64_t p)
{
    extern __shared__ double smem_d[];
    const int W = blockDim.x >> 5, lane = threadIdx.x & 31, wp = threadIdx.x >> 5;
    const int ks = odd_stride(p);
    double *accK = smem_d;                             /* [W][p] */
    double *accV = accK + W * p;                       /* [W][p] */
    double *Pd = accV + W * p;                         /* [W][32] P */
    double *Sd = Pd + W * kTile;                       /* [W][32] ds·scale */
    double *Ds = Sd + W * kTile;                       /* [32] D of the tile rows */
    float *Qs = reinterpret_cast<float *>(Ds + kTile); /* [32][ks] */
    float *Os = Qs + kTile * ks;                       /* [32][ks] dO rows */
    float *Kw = Os + kTile * ks;                       /* [W][p] */
    float *Vw = Kw + W * p;                            /* [W][p] */

    const int64_t d = n_h * p, ld = 3 * d, h = blockIdx.y;
    const double scale = 1.0 / sqrt((double)p);
    const float *base = qkv + h * 3 * p;
    const int64_t j0 = (int64_t)blockIdx.x * W, j = j0 + wp;
    const bool active = j < T;
    double *myK = accK + wp * p, *myV = accV + wp * p;
    double *myP = Pd + wp * kTile, *myS = Sd + wp * kTile;
    const float *myk = Kw + wp * p, *myv = Vw + wp * p;
    for (int64_t c = lane; c < p; c += 32) {
        Kw[wp * p + c] = active ? base[j * ld + p + c] : 0.0f;
        Vw[wp * p + c] = active ? base[j * ld + 2 * p + c] : 0.0f;
        myK[c] = 0;
        myV[c] = 0;
    }
    for (int64_t q0 = j0; q0 < T; q0 += kTile) {
        __syncthreads(); /* the previous tile is consumed (and Kw, Vw written) */
        const int nq = (int)(T - q0 < kTile ? T - q0 : kTile);
        for (int e = threadIdx.x; e < nq * (int)p; e += blockDim.x) {
            const int r = e / (int)p, c = e - r * (int)p;
            Qs[r * ks + c] = base[(q0 + r) * ld + c];
            Os[r * ks + c] = dout[(q0 + r) * d + h * p + c];
        }
        __syncthreads();
        if (threadIdx.x < (unsigned)nq)
            Ds[threadIdx.x] =
                attn_D(Os + threadIdx.x * ks, out + (q0 + threadIdx.x) * d + h * p, p);
        __syncthreads();
        if (!active || q0 + nq - 1 < j) /* no query row of the tile sees key j */
            continue;
        const int64_t i = q0 + lane;
        double P = 0, dss = 0;
        if (i < T && i >= j) {
            const float *qr = Qs + lane * ks, *dor = Os + lane * ks;
            double s = 0, dp = 0;
            for (int64_t c = 0; c < p; c++) {
                s += (double)qr[c] * myk[c];
                dp += (double)dor[c] * myv[c];
            }
            const float Pf = (float)exp(s * scale - (double)lse[h * T + i]), dPf = (float)dp;
            P = Pf;
            dss = (double)Pf * ((double)dPf - Ds[lane]) * scale;
        }
        myP[lane] = P;
        myS[lane] = dss;
        __syncwarp();
        const int rlo = (int)(j > q0 ? j - q0 : 0);
        for (int64_t c = lane; c < p; c += 32) {
            double ak = myK[c], av = myV[c];
            for (int r = rlo; r < nq; r++) {
                av += myP[r] * (double)Os[r * ks + c];
                ak += myS[r] * (double)Qs[r * ks + c];
            }
            myK[c] = ak;
            myV[c] = av;
        }
        __syncwarp();
    }
    if (active)
        for (int64_t c = lane; c < p; c += 32) {
            dqkv[j * ld + h * 3 * p + p + c] = (float)myK[c];
            dqkv[j * ld + h * 3 * p + 2 * p + c] = (float)myV[c];
        }
}

/* Picks the warps per block (8, 4, 2, 1) whose shared memory fits the
 * default 48 KiB, else the largest that fits the opt-in limit (raising the
 * kernel's limit); 0 when none fits (a head size far past any model's). */
template <typename Kernel>
int attn_pick_warps(void *ctx, Kernel kernel, size_t (*smem)(int, int64_t), int64_t p,
                    size_t *bytes)
{
    for (int W = 8; W >= 1; W /= 2)
        if (smem(W, p) <= 48 * 1024) {
            *bytes = smem(W, p);
            return W;
        }
    int dev = 0, optin = 0;
    CU_CHECK(ctx, cudaGetDevice(&dev));
    CU_CHECK(ctx, cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    for (int W = 8; W >= 1; W /= 2)
        if (smem(W, p) <= (size_t)optin) {
            *bytes = smem(W, p);
            CU_CHECK(ctx, cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               (int)*bytes));
            return W;
        }
    cu_record(ctx, __FILE__, __LINE__, "attention", "head size too large for shared memory");
    return 0;
}

/* ---- attention_cached ---------------------------------------------------------
 * ref's float arithmetic step by step: per (row t, head h) one block;
 * scores a = Σ_i q_i k_i (fp32, sequential, no FMA), × scale, into the
 * scratch row; max; e = expf(score − max) with Σ e in double (block tree);
 * weights (float)(e / Σ); out_i = Σ_s w_s v_{s,i} (fp32, sequential over s,
 * one thread per column, as ref). The scratch holds R = max(T, n_h) rows of
 * n = P0 + T scores, so the T·n_h rows run in groups of R, one launch each.
 * A faster version would split s over threads (flash-decoding) with a
 * double or fixed-order combine. */
__global__ void __launch_bounds__(kRowThreads)
    attn_cached_kernel(float *out, const float *q, int64_t q_row_stride, int64_t q_head_stride,
                       const float *kc, const float *vc, int64_t P0, int64_t n_h, int64_t n_kv,
                       int64_t p, float scale, float *scratch, int64_t n, int64_t row0,
                       int64_t rows)
{
    __shared__ float smax[kRowThreads];
    __shared__ double ssum[kRowThreads];
    const int64_t r = blockIdx.x;
    if (r >= rows) /* block-uniform */
        return;
    const int64_t idx = row0 + r, t = idx / n_h, h = idx - t * n_h, g = h / (n_h / n_kv);
    const int64_t nt = P0 + t + 1;
    const float *qh = q + t * q_row_stride + h * q_head_stride; /* [p] */
    float *sc = scratch + r * n;                                /* [nt] */
    float m = -INFINITY;
    for (int64_t s = threadIdx.x; s < nt; s += blockDim.x) {
        const float *kr = kc + (s * n_kv + g) * p;
        float a = 0.0f;
        for (int64_t i = 0; i < p; i++)
            a = __fadd_rn(a, __fmul_rn(qh[i], kr[i]));
        a = __fmul_rn(a, scale);
        sc[s] = a;
        m = a > m ? a : m;
    }
    m = block_tree(m, smax, MaxF());
    double sum = 0;
    for (int64_t s = threadIdx.x; s < nt; s += blockDim.x) {
        const float e = expf(__fsub_rn(sc[s], m));
        sc[s] = e;
        sum += e;
    }
    sum = block_tree(sum, ssum, SumD());
    for (int64_t s = threadIdx.x; s < nt; s += blockDim.x)
        sc[s] = (float)((double)sc[s] / sum);
    __syncthreads(); /* the weights (global memory) are visible to the block */
    float *o = out + (t * n_h + h) * p;
    for (int64_t c = threadIdx.x; c < p; c += blockDim.x) {
        float a = 0.0f;
        for (int64_t s = 0; s < nt; s++)
            a = __fadd_rn(a, __fmul_rn(sc[s], vc[(s * n_kv + g) * p + c]));
        o[c] = a;
    }
}

} /* namespace */

/* ---- the ops ---------------------------------------------------------------- */

size_t cu_attention_ws_size(void *ctx, int64_t T, int64_t n_h, int64_t p)
{
    return 0; /* no workspace: the online softmax keeps one row's state per warp */
}

/* out: [T, n_h p]  lse: [n_h, T] or NULL  qkv: [T, 3 n_h p]  ws: unused */
void cu_attention_forward(void *ctx, float *out, float *lse, const float *qkv, int64_t T,
                          int64_t n_h, int64_t p, void *ws, size_t ws_size)
{
    if (T <= 0 || n_h <= 0 || p <= 0)
        return;
    if (n_h > 65535) {
        cu_record(ctx, __FILE__, __LINE__, "attention_forward", "more than 65535 heads");
        return;
    }
    size_t bytes = 0;
    const int W = attn_pick_warps(ctx, attn_fwd_kernel, attn_fwd_smem, p, &bytes);
    if (!W)
        return;
    const dim3 grid(cu_blocks(T, W), (unsigned)n_h);
    attn_fwd_kernel<<<grid, W * 32, bytes, cu_stream(ctx)>>>(out, lse, qkv, T, n_h, p);
    CU_LAUNCHED(ctx);
}

size_t cu_attention_backward_ws_size(void *ctx, int64_t T, int64_t n_h, int64_t p)
{
    return 0; /* no workspace: P and dS are recomputed from lse per tile */
}

/* dqkv: [T, 3 n_h p] written  dout, out: [T, n_h p]  qkv: [T, 3 n_h p]
 * lse: [n_h, T]  ws: unused */
void cu_attention_backward(void *ctx, float *dqkv, const float *dout, const float *qkv,
                           const float *out, const float *lse, int64_t T, int64_t n_h, int64_t p,
                           void *ws, size_t ws_size)
{
    if (T <= 0 || n_h <= 0 || p <= 0)
        return;
    if (n_h > 65535) {
        cu_record(ctx, __FILE__, __LINE__, "attention_backward", "more than 65535 heads");
        return;
    }
    size_t bytes = 0;
    int W = attn_pick_warps(ctx, attn_dq_kernel, attn_dq_smem, p, &bytes);
    if (!W)
        return;
    attn_dq_kernel<<<dim3(cu_blocks(T, W), (unsigned)n_h), W * 32, bytes, cu_stream(ctx)>>>(
        dqkv, dout, qkv, out, lse, T, n_h, p);
    CU_LAUNCHED(ctx);
    W = attn_pick_warps(ctx, attn_dkv_kernel, attn_dkv_smem, p, &bytes);
    if (!W)
        return;
    attn_dkv_kernel<<<dim3(cu_blocks(T, W), (unsigned)n_h), W * 32, bytes, cu_stream(ctx)>>>(
        dqkv, dout, qkv, out, lse, T, n_h, p);
    CU_LAUNCHED(ctx);
}

/* out: [T, n_h, p]  q: row t head h at q + t q_row_stride + h q_head_stride
 * kc, vc: [P0 + T, n_kv, p]
 * scratch: [hm_backend_attention_cached_scratch_floats(T, P0 + T, n_h)] */
void cu_attention_cached(void *ctx, float *out, const float *q, int64_t q_row_stride,
                         int64_t q_head_stride, const float *kc, const float *vc, int64_t P0,
                         int64_t T, int64_t n_h, int64_t n_kv, int64_t p, float *scratch)
{
    if (T <= 0 || n_h <= 0 || n_kv <= 0 || p <= 0)
        return;
    const int64_t n = P0 + T, R = T > n_h ? T : n_h, total = T * n_h;
    const float scale = 1.0f / sqrtf((float)p);
    for (int64_t row0 = 0; row0 < total; row0 += R) {
        const int64_t rows = total - row0 < R ? total - row0 : R;
        attn_cached_kernel<<<cu_blocks(rows, 1), kRowThreads, 0, cu_stream(ctx)>>>(
            out, q, q_row_stride, q_head_stride, kc, vc, P0, n_h, n_kv, p, scale, scratch, n, row0,
            rows);
        CU_LAUNCHED(ctx);
    }
}
