/* cuda_dense.cu — the CUDA backend's dense ops (cuda_internal.h): products
 * (cuBLAS, fp32 pedantic), LayerNorm / RMSNorm, GELU, add, embeddings,
 * rotary, the GQA expansion, fill / copy2d / clamp, softplus and the SiLU
 * gate. The contracts are kernels/backend.h; the oracle is kernels/cpu/
 * ref_*.c, whose math each kernel repeats (double where ref sums or
 * evaluates in double, fp32 with the same order where ref sums in fp32).
 *
 * Patterns used here:
 *   - elementwise ops: a grid-stride loop over int64 indices (cu_blocks
 *     clamps the grid), one output element per step;
 *   - row reductions (norms): one block of CU_ROW_THREADS per row, each
 *     thread summing its strided elements in order, then a fixed shared-
 *     memory tree (cu_block_sum): the same bits every run;
 *   - column sums over rows (parameter gradients): one thread per column
 *     looping over t in ascending order, which is ref's fp32 order, so the
 *     result is ref's bit for bit; matmul's db (double in ref) uses a tile
 *     of 16 row-groups per column combined in a fixed order.
 * No atomics anywhere; no op needs a workspace. Every launch is skipped
 * when there is nothing to compute (a launch of 0 blocks is an error).
 *
 * fp32 expressions where ref has a product and a sum (rotary, RMSNorm's
 * y) use __fmul_rn / __fadd_rn so nvcc does not contract them into an FMA
 * with a different rounding from ref's. */
#include "cuda_internal.h"
#include "narrow.h"

#include <limits.h>
#include <math.h>

namespace {

constexpr int CU_THREADS = 256;     /* elementwise and column kernels */
constexpr int CU_ROW_THREADS = 256; /* one block per row; a power of two (cu_block_sum) */
constexpr double CU_PI = 3.14159265358979323846;

/* Fixed-order sum over the block (blockDim.x a power of two, sh has
 * blockDim.x doubles); every thread gets the sum; sh is free again on
 * return. */
__device__ double cu_block_sum(double v, double *sh)
{
    const int tid = threadIdx.x;
    sh[tid] = v;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s)
            sh[tid] += sh[tid + s];
        __syncthreads();
    }
    const double r = sh[0];
    __syncthreads();
    return r;
}

__device__ double cu_sigmoid_d(double z) /* ref_ssm.c's sigmoid_d */
{
    if (z >= 0)
        return 1 / (1 + exp(-z));
    const double e = exp(z);
    return e / (1 + e);
}

/* ---- fill / copy / clamp / add -------------------------------------------- */

/* x: [n] */
__global__ void k_fill(float *x, int64_t n, float value)
{
    for (int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; j < n;
         j += (int64_t)gridDim.x * blockDim.x)
        x[j] = value;
}

/* dst: [rows, dst_stride]  src: [rows, src_stride]; cols of each row */
__global__ void k_copy2d(float *dst, int64_t dst_stride, const float *src, int64_t src_stride,
                         int64_t rows, int64_t cols)
{
    const int64_t n = rows * cols;
    for (int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; j < n;
         j += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = j / cols, c = j - r * cols;
        dst[r * dst_stride + c] = src[r * src_stride + c];
    }
}

/* x: [n] in place */
__global__ void k_clamp(float *x, int64_t n, float lo, float hi)
{
    for (int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; j < n;
         j += (int64_t)gridDim.x * blockDim.x) {
        const float v = x[j];
        x[j] = v < lo ? lo : v > hi ? hi : v; /* NaN stays NaN, as in ref */
    }
}

/* y, a, b: [n]; y may alias a or b */
__global__ void k_add(float *y, const float *a, const float *b, int64_t n)
{
    for (int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; j < n;
         j += (int64_t)gridDim.x * blockDim.x)
        y[j] = __fadd_rn(a[j], b[j]);
}

/* ---- matmul ----------------------------------------------------------------- */

/* y: [T, out] = b broadcast over rows  b: [out] */
__global__ void k_bias_rows(float *y, const float *b, int64_t T, int64_t out)
{
    const int64_t n = T * out;
    for (int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; j < n;
         j += (int64_t)gridDim.x * blockDim.x)
        y[j] = b[j % out];
}

constexpr int CU_DB_COLS = 32; /* columns per block (one warp across) */
constexpr int CU_DB_ROWS = 16; /* row-groups per block */

/* db[o] += (float)Σ_t dy[t, o], summed in double like ref. Block
 * (CU_DB_COLS, CU_DB_ROWS): row-group ty sums t ≡ ty (mod CU_DB_ROWS) in
 * ascending order, then ty = 0 adds the row-groups' sums in order 0..15.
 * db: [out]  dy: [T, out] */
__global__ void k_colsum_db(float *db, const float *dy, int64_t T, int64_t out)
{
    __shared__ double sh[CU_DB_ROWS][CU_DB_COLS + 1];
    const int tx = threadIdx.x, ty = threadIdx.y;
    for (int64_t o0 = (int64_t)blockIdx.x * CU_DB_COLS; o0 < out;
         o0 += (int64_t)gridDim.x * CU_DB_COLS) {
        const int64_t o = o0 + tx;
        double s = 0;
        if (o < out)
            for (int64_t t = ty; t < T; t += CU_DB_ROWS)
                s += (double)dy[t * out + o];
        sh[ty][tx] = s;
        __syncthreads();
        if (ty == 0 && o < out) {
            double tot = 0;
            for (int r = 0; r < CU_DB_ROWS; r++)
                tot += sh[r][tx];
            db[o] += (float)tot;
        }
        __syncthreads();
    }
}

/* cuBLAS takes int sizes: in and out must fit; T is cut into pieces. */
constexpr int64_t CU_GEMM_MAX = INT_MAX;

bool cu_gemm_dims_ok(void *ctx, const char *op, int64_t in, int64_t out)
{
    if (in <= CU_GEMM_MAX && out <= CU_GEMM_MAX)
        return true;
    cu_record(ctx, __FILE__, __LINE__, op, "a matrix dimension exceeds cuBLAS's int range");
    return false;
}

void cu_fill_launch(void *ctx, float *x, int64_t n, float value)
{
    if (n <= 0)
        return;
    k_fill<<<cu_blocks(n, CU_THREADS), CU_THREADS, 0, cu_stream(ctx)>>>(x, n, value);
    CU_LAUNCHED(ctx);
}

/* ---- layernorm ---------------------------------------------------------------- */

/* One block per row: mean, biased variance (two passes, double), then
 * y = (x − m)·rs·w + b in double. Each thread writes only the elements it
 * read, after the last barrier, so y may alias x.
 * y, x: [T, d]  mean, rstd: [T] or NULL  w, b: [d] */
__global__ void k_layernorm_fwd(float *y, float *mean, float *rstd, const float *x, const float *w,
                                const float *b, int64_t T, int64_t d, float eps)
{
    __shared__ double sh[CU_ROW_THREADS];
    for (int64_t t = blockIdx.x; t < T; t += gridDim.x) {
        const float *xr = x + t * d;
        double m = 0, v = 0;
        for (int64_t i = threadIdx.x; i < d; i += blockDim.x)
            m += (double)xr[i];
        m = cu_block_sum(m, sh) / (double)d;
        for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
            const double c = (double)xr[i] - m;
            v += c * c;
        }
        v = cu_block_sum(v, sh) / (double)d;
        const double rs = 1.0 / sqrt(v + (double)eps);
        if (threadIdx.x == 0) {
            if (mean)
                mean[t] = (float)m;
            if (rstd)
                rstd[t] = (float)rs;
        }
        for (int64_t i = threadIdx.x; i < d; i += blockDim.x)
            y[t * d + i] = (float)__dadd_rn(__dmul_rn(__dmul_rn((double)xr[i] - m, rs), (double)w[i]),
                                            (double)b[i]);
    }
}

/* dx row: rstd·(g − mean(g) − xhat·mean(g·xhat)), g = dy·w, in double.
 * dx, dy, x: [T, d]  mean, rstd: [T]  w: [d] */
__global__ void k_layernorm_bwd_dx(float *dx, const float *dy, const float *x, const float *mean,
                                   const float *rstd, const float *w, int64_t T, int64_t d)
{
    __shared__ double sh[CU_ROW_THREADS];
    for (int64_t t = blockIdx.x; t < T; t += gridDim.x) {
        const float *xr = x + t * d, *dyr = dy + t * d;
        const double mt = (double)mean[t], rt = (double)rstd[t];
        double mg = 0, mgx = 0;
        for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
            const double xhat = ((double)xr[i] - mt) * rt;
            const double g = (double)dyr[i] * (double)w[i];
            mg += g;
            mgx += g * xhat;
        }
        mg = cu_block_sum(mg, sh) / (double)d;
        mgx = cu_block_sum(mgx, sh) / (double)d;
        for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
            const double xhat = ((double)xr[i] - mt) * rt;
            const double g = (double)dyr[i] * (double)w[i];
            dx[t * d + i] = (float)(rt * (g - mg - xhat * mgx));
        }
    }
}

/* dw[i] += (float)(dy·xhat), db[i] += dy: one thread per column i, t
 * ascending, fp32 accumulation: ref's order and roundings exactly. (A
 * faster version would split t over row-groups of a tile with double
 * partial sums, at the price of ref's exact bits.)
 * dw, db: [d] or NULL (not both)  dy, x: [T, d]  mean, rstd: [T] */
__global__ void k_layernorm_bwd_dwdb(float *dw, float *db, const float *dy, const float *x,
                                     const float *mean, const float *rstd, int64_t T, int64_t d)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < d;
         i += (int64_t)gridDim.x * blockDim.x) {
        float aw = dw ? dw[i] : 0.0f, ab = db ? db[i] : 0.0f;
#pragma unroll 4
        for (int64_t t = 0; t < T; t++) {
            const float g = dy[t * d + i];
            if (dw) {
                const double xhat = ((double)x[t * d + i] - (double)mean[t]) * (double)rstd[t];
                aw = __fadd_rn(aw, (float)((double)g * xhat));
            }
            if (db)
                ab = __fadd_rn(ab, g);
        }
        if (dw)
            dw[i] = aw;
        if (db)
            db[i] = ab;
    }
}

/* ---- rmsnorm ------------------------------------------------------------------ */

/* One block per row: r = (float)(1 / sqrt(Σx²/d + eps)) (sum in double),
 * y = (x·r)·w in fp32. y may alias x (as in layernorm).
 * y, x: [T, d]  rstd: [T] or NULL  w: [d] */
__global__ void k_rmsnorm_fwd(float *y, float *rstd, const float *x, const float *w, int64_t T,
                              int64_t d, float eps)
{
    __shared__ double sh[CU_ROW_THREADS];
    for (int64_t t = blockIdx.x; t < T; t += gridDim.x) {
        const float *xr = x + t * d;
        double ss = 0;
        for (int64_t i = threadIdx.x; i < d; i += blockDim.x)
            ss += (double)xr[i] * (double)xr[i];
        ss = cu_block_sum(ss, sh);
        const float r = (float)(1.0 / sqrt(ss / (double)d + (double)eps));
        if (rstd && threadIdx.x == 0)
            rstd[t] = r;
        for (int64_t i = threadIdx.x; i < d; i += blockDim.x)
            y[t * d + i] = __fmul_rn(__fmul_rn(xr[i], r), w[i]);
    }
}

/* dx = r·dy·w − x·c, c = (Σ dy·w·x)·r³/d, in double.
 * dx, dy, x: [T, d]  rstd: [T]  w: [d] */
__global__ void k_rmsnorm_bwd_dx(float *dx, const float *dy, const float *x, const float *rstd,
                                 const float *w, int64_t T, int64_t d)
{
    __shared__ double sh[CU_ROW_THREADS];
    for (int64_t t = blockIdx.x; t < T; t += gridDim.x) {
        const float *xr = x + t * d, *gr = dy + t * d;
        const double r = (double)rstd[t];
        double dot = 0;
        for (int64_t i = threadIdx.x; i < d; i += blockDim.x)
            dot += (double)gr[i] * (double)w[i] * (double)xr[i];
        dot = cu_block_sum(dot, sh);
        const double c = dot * r * r * r / (double)d;
        for (int64_t i = threadIdx.x; i < d; i += blockDim.x)
            dx[t * d + i] = (float)(r * (double)gr[i] * (double)w[i] - (double)xr[i] * c);
    }
}

/* dw[i] += (float)(dy·x·r): one thread per column, t ascending, fp32
 * accumulation as ref (see k_layernorm_bwd_dwdb).
 * dw: [d]  dy, x: [T, d]  rstd: [T] */
__global__ void k_rmsnorm_bwd_dw(float *dw, const float *dy, const float *x, const float *rstd,
                                 int64_t T, int64_t d)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < d;
         i += (int64_t)gridDim.x * blockDim.x) {
        float a = dw[i];
#pragma unroll 4
        for (int64_t t = 0; t < T; t++)
            a = __fadd_rn(a, (float)((double)dy[t * d + i] * (double)x[t * d + i] *
                                     (double)rstd[t]));
        dw[i] = a;
    }
}

/* ---- gelu ----------------------------------------------------------------------- */

__device__ double cu_gelu(double v, int kind)
{
    if (kind == HM_GELU_TANH)
        return 0.5 * v * (1.0 + tanh(sqrt(2.0 / CU_PI) * (v + 0.044715 * v * v * v)));
    return 0.5 * v * (1.0 + erf(v / sqrt(2.0)));
}

__device__ double cu_gelu_grad(double x, int kind) /* ref_backward.c's gelu_grad */
{
    if (kind == HM_GELU_ERF) {
        const double cdf = 0.5 * (1.0 + erf(x / sqrt(2.0)));
        const double pdf = exp(-0.5 * x * x) / sqrt(2.0 * CU_PI);
        return cdf + x * pdf;
    }
    const double c = sqrt(2.0 / CU_PI);
    const double u = c * (x + 0.044715 * x * x * x);
    const double th = tanh(u);
    const double du = c * (1.0 + 3.0 * 0.044715 * x * x);
    return 0.5 * (1.0 + th) + 0.5 * x * (1.0 - th * th) * du;
}

/* y, x: [n]; y may alias x */
__global__ void k_gelu_fwd(float *y, const float *x, int64_t n, int kind)
{
    for (int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; j < n;
         j += (int64_t)gridDim.x * blockDim.x)
        y[j] = (float)cu_gelu((double)x[j], kind);
}

/* dx, dy, x: [n]; dx may alias dy */
__global__ void k_gelu_bwd(float *dx, const float *dy, const float *x, int64_t n, int kind)
{
    for (int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; j < n;
         j += (int64_t)gridDim.x * blockDim.x)
        dx[j] = (float)((double)dy[j] * cu_gelu_grad((double)x[j], kind));
}

/* ---- embedding ------------------------------------------------------------------ */

/* y: [T, d]  ids: [T]  table: [V, d] */
__global__ void k_embedding_fwd(float *y, const int32_t *ids, const float *table, int64_t T,
                                int64_t d)
{
    const int64_t n = T * d;
    for (int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; j < n;
         j += (int64_t)gridDim.x * blockDim.x) {
        const int64_t t = j / d, i = j - t * d;
        y[j] = table[(int64_t)ids[t] * d + i];
    }
}

/* y: [N, d] ← widen(x[ids ? ids[i] : i]) (kernels/narrow.h) */
__global__ void k_widen_rows(float *y, const int32_t *ids, const uint16_t *x, int64_t N,
                             int64_t d, int f16)
{
    const int64_t n = N * d;
    for (int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; j < n;
         j += (int64_t)gridDim.x * blockDim.x) {
        const int64_t t = j / d, i = j - t * d;
        const uint16_t b = x[(ids ? (int64_t)ids[t] : t) * d + i];
        y[j] = f16 ? hm_f16_f32(b) : hm_bf16_f32(b);
    }
}

constexpr int CU_EMB_THREADS = 128; /* columns per block */
constexpr int CU_EMB_TILE = 1024;   /* ids staged in shared memory at a time */
constexpr int CU_EMB_GROUPS = 64;   /* most id groups (gridDim.y) */

/* dtable[ids[t]] += dy[t], without atomics: thread (column i, group g =
 * blockIdx.y) owns column i of every table row whose id ≡ g (mod G) and
 * walks t in ascending order, so each element gets ref's fp32 additions in
 * ref's order (bit for bit). A run of one id is summed in a register
 * (the same additions). Negative ids match no group (skipped).
 * dtable: [V, d]  dy: [T, d]  ids: [T] */
__global__ void k_embedding_bwd(float *dtable, const float *dy, const int32_t *ids, int64_t T,
                                int64_t d)
{
    __shared__ int32_t sid[CU_EMB_TILE];
    const int G = (int)gridDim.y, g = (int)blockIdx.y;
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    int64_t cur = -1; /* the id whose element is held in acc */
    float acc = 0.0f;
    for (int64_t t0 = 0; t0 < T; t0 += CU_EMB_TILE) {
        const int64_t nt = T - t0 < CU_EMB_TILE ? T - t0 : CU_EMB_TILE;
        __syncthreads();
        for (int k = threadIdx.x; k < nt; k += blockDim.x)
            sid[k] = ids[t0 + k];
        __syncthreads();
        if (i >= d)
            continue;
        for (int k = 0; k < nt; k++) {
            const int32_t id = sid[k];
            if (id < 0 || id % G != g)
                continue;
            if (id != cur) {
                if (cur >= 0)
                    dtable[cur * d + i] = acc;
                cur = id;
                acc = dtable[cur * d + i];
            }
            acc = __fadd_rn(acc, dy[(t0 + k) * d + i]);
        }
    }
    if (i < d && cur >= 0)
        dtable[cur * d + i] = acc;
}

/* ---- rotary --------------------------------------------------------------------- */

/* One thread per (t, j < r/2), looping over heads like ref: θ = (float)
 * (pos0 + t) · inv_freq[j] in fp32, cos/sin in double rounded to fp32;
 * forward R(θ), backward R(θ)^T, products and sums in fp32 without FMA.
 * x: element (t, h, i) at x[t row_stride + h head_stride + i]  inv_freq: [r/2] */
__global__ void k_rotary(float *x, int64_t T, int64_t n_h, int64_t half, int64_t row_stride,
                         int64_t head_stride, int64_t pos0, const float *inv_freq, int backward)
{
    const int64_t n = T * half;
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t t = e / half, j = e - t * half;
        const float theta = __fmul_rn((float)(pos0 + t), inv_freq[j]);
        const float c = (float)cos((double)theta), s = (float)sin((double)theta);
        for (int64_t h = 0; h < n_h; h++) {
            float *v = x + t * row_stride + h * head_stride;
            const float a = v[j], b = v[j + half];
            if (!backward) {
                v[j] = __fsub_rn(__fmul_rn(a, c), __fmul_rn(b, s));
                v[j + half] = __fadd_rn(__fmul_rn(b, c), __fmul_rn(a, s));
            } else {
                v[j] = __fadd_rn(__fmul_rn(a, c), __fmul_rn(b, s));
                v[j + half] = __fsub_rn(__fmul_rn(b, c), __fmul_rn(a, s));
            }
        }
    }
}

void cu_rotary_launch(void *ctx, float *x, int64_t T, int64_t n_h, int64_t r, int64_t row_stride,
                      int64_t head_stride, int64_t pos0, const float *inv_freq, int backward)
{
    const int64_t half = r / 2;
    if (T <= 0 || n_h <= 0 || half <= 0)
        return;
    k_rotary<<<cu_blocks(T * half, CU_THREADS), CU_THREADS, 0, cu_stream(ctx)>>>(
        x, T, n_h, half, row_stride, head_stride, pos0, inv_freq, backward);
    CU_LAUNCHED(ctx);
}

/* ---- GQA expansion ------------------------------------------------------------- */

/* y[t, h, s, i] from x [T, (n_h + 2 n_kv) p] = [q | k | v].
 * y: [T, n_h, 3, p]  x: [T, (n_h + 2 n_kv) p] */
__global__ void k_qkv_expand_fwd(float *y, const float *x, int64_t T, int64_t n_h, int64_t n_kv,
                                 int64_t p)
{
    const int64_t in = (n_h + 2 * n_kv) * p, grp = n_h / n_kv, n = T * n_h * 3 * p;
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n;
         e += (int64_t)gridDim.x * blockDim.x) {
        int64_t r = e;
        const int64_t i = r % p;
        r /= p;
        const int64_t s = r % 3;
        r /= 3;
        const int64_t h = r % n_h, t = r / n_h;
        const int64_t g = h / grp;
        const int64_t col = s == 0 ? h * p + i : s == 1 ? n_h * p + g * p + i
                                                        : (n_h + n_kv) * p + g * p + i;
        y[e] = x[t * in + col];
    }
}

/* dx written, one thread per element: a q column is 0 + dy; a k or v
 * column of group g is 0 + Σ_h dy over the group's heads h ascending, in
 * fp32 — ref's memset-then-add order.
 * dx: [T, (n_h + 2 n_kv) p]  dy: [T, n_h, 3, p] */
__global__ void k_qkv_expand_bwd(float *dx, const float *dy, int64_t T, int64_t n_h, int64_t n_kv,
                                 int64_t p)
{
    const int64_t in = (n_h + 2 * n_kv) * p, grp = n_h / n_kv, n = T * in;
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t t = e / in, col = e - t * in;
        const float *go = dy + t * 3 * n_h * p;
        float acc = 0.0f;
        if (col < n_h * p) {
            const int64_t h = col / p, i = col - h * p;
            acc = __fadd_rn(acc, go[h * 3 * p + i]);
        } else {
            const int64_t kv = col - n_h * p;         /* into [k | v] */
            const int64_t s = kv < n_kv * p ? 1 : 2; /* k or v */
            const int64_t c = kv - (s - 1) * n_kv * p;
            const int64_t g = c / p, i = c - g * p;
            for (int64_t h = g * grp; h < (g + 1) * grp; h++)
                acc = __fadd_rn(acc, go[h * 3 * p + s * p + i]);
        }
        dx[e] = acc;
    }
}

/* ---- softplus and the SiLU gate ----------------------------------------------- */

/* y, z: [n]; y may alias z */
__global__ void k_softplus_fwd(float *y, const float *z, int64_t n)
{
    for (int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; j < n;
         j += (int64_t)gridDim.x * blockDim.x) {
        const double x = z[j]; /* max(z, 0) + log1p(exp(−|z|)): no overflow */
        y[j] = (float)((x > 0 ? x : 0) + log1p(exp(-fabs(x))));
    }
}

/* dz, dy, z: [n]; dz may alias dy */
__global__ void k_softplus_bwd(float *dz, const float *dy, const float *z, int64_t n)
{
    for (int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; j < n;
         j += (int64_t)gridDim.x * blockDim.x)
        dz[j] = (float)((double)dy[j] * cu_sigmoid_d((double)z[j]));
}

/* out, y, z: [n]; out may alias y or z */
__global__ void k_silu_gate_fwd(float *out, const float *y, const float *z, int64_t n)
{
    for (int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; j < n;
         j += (int64_t)gridDim.x * blockDim.x) {
        const double zz = z[j], yy = y[j];
        out[j] = (float)(yy * zz * cu_sigmoid_d(zz));
    }
}

/* dy, dz: [n] or NULL (either may alias dout)  dout, y, z: [n] */
__global__ void k_silu_gate_bwd(float *dy, float *dz, const float *dout, const float *y,
                                const float *z, int64_t n)
{
    for (int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; j < n;
         j += (int64_t)gridDim.x * blockDim.x) {
        const double g = dout[j], zz = z[j], sg = cu_sigmoid_d(zz), yy = y[j];
        if (dy)
            dy[j] = (float)(g * zz * sg);
        if (dz)
            dz[j] = (float)(g * yy * sg * (1 + zz * (1 - sg)));
    }
}

} // namespace

/* ==== the ops ===================================================================== */

/* y = x W^T + b: y [T, out] row-major is y^T [out, T] column-major (ld
 * out) = op(w)·x with w read as the column-major [in, out] (ld in),
 * transposed, and x as the column-major [in, T] (ld in). The bias is first
 * broadcast into y, then the GEMM adds (β = 1); without a bias β = 0.
 * y: [T, out]  x: [T, in]  w: [out, in]  b: [out] or NULL */
void cu_matmul_forward(void *ctx, float *y, const float *x, const float *w, const float *b,
                       int64_t T, int64_t in, int64_t out)
{
    if (T <= 0 || out <= 0)
        return;
    cudaStream_t st = cu_stream(ctx);
    if (b) {
        k_bias_rows<<<cu_blocks(T * out, CU_THREADS), CU_THREADS, 0, st>>>(y, b, T, out);
        CU_LAUNCHED(ctx);
    }
    if (in <= 0) { /* an empty product: y = b, or 0 */
        if (!b)
            cu_fill_launch(ctx, y, T * out, 0.0f);
        return;
    }
    if (!cu_gemm_dims_ok(ctx, "matmul_forward", in, out))
        return;
    const float one = 1.0f, beta = b ? 1.0f : 0.0f;
    for (int64_t t0 = 0; t0 < T; t0 += CU_GEMM_MAX) {
        const int64_t tc = T - t0 < CU_GEMM_MAX ? T - t0 : CU_GEMM_MAX;
        CUBLAS_CHECK(ctx, cublasSgemm(cu_blas(ctx), CUBLAS_OP_T, CUBLAS_OP_N, (int)out, (int)tc,
                                      (int)in, &one, w, (int)in, x + t0 * in, (int)in, &beta,
                                      y + t0 * out, (int)out));
    }
}

/* dx = dy W (written): dx^T [in, T] = w_cm [in, out] · dy^T [out, T].
 * dw += dy^T x: dw_cm [in, out] (ld in) = x_cm [in, T] · (dy_cm [out, T])^T,
 *   β = 1 (accumulates), T cut into pieces that each add.
 * db += Σ_t dy (double, k_colsum_db).
 * dx: [T, in] or NULL  dw: [out, in] or NULL  db: [out] or NULL
 * dy: [T, out]  x: [T, in]  w: [out, in] */
void cu_matmul_backward(void *ctx, float *dx, float *dw, float *db, const float *dy,
                        const float *x, const float *w, int64_t T, int64_t in, int64_t out)
{
    if (T <= 0)
        return;
    cudaStream_t st = cu_stream(ctx);
    if (db && out > 0) {
        const dim3 block(CU_DB_COLS, CU_DB_ROWS);
        k_colsum_db<<<cu_blocks(out, CU_DB_COLS), block, 0, st>>>(db, dy, T, out);
        CU_LAUNCHED(ctx);
    }
    if (in <= 0)
        return;
    if (out <= 0) { /* dx = an empty sum = 0; dw has no elements */
        if (dx)
            cu_fill_launch(ctx, dx, T * in, 0.0f);
        return;
    }
    if ((!dx && !dw) || !cu_gemm_dims_ok(ctx, "matmul_backward", in, out))
        return;
    const float one = 1.0f, zero = 0.0f;
    for (int64_t t0 = 0; t0 < T; t0 += CU_GEMM_MAX) {
        const int64_t tc = T - t0 < CU_GEMM_MAX ? T - t0 : CU_GEMM_MAX;
        if (dx)
            CUBLAS_CHECK(ctx, cublasSgemm(cu_blas(ctx), CUBLAS_OP_N, CUBLAS_OP_N, (int)in,
                                          (int)tc, (int)out, &one, w, (int)in, dy + t0 * out,
                                          (int)out, &zero, dx + t0 * in, (int)in));
        if (dw)
            CUBLAS_CHECK(ctx, cublasSgemm(cu_blas(ctx), CUBLAS_OP_N, CUBLAS_OP_T, (int)in,
                                          (int)out, (int)tc, &one, x + t0 * in, (int)in,
                                          dy + t0 * out, (int)out, &one, dw, (int)in));
    }
}

/* y: [T, d] (may alias x)  mean, rstd: [T] or NULL  x: [T, d]  w, b: [d] */
void cu_layernorm_forward(void *ctx, float *y, float *mean, float *rstd, const float *x,
                          const float *w, const float *b, int64_t T, int64_t d, float eps)
{
    if (T <= 0) /* d = 0 still writes mean/rstd (NaN, as ref's 0/0) */
        return;
    k_layernorm_fwd<<<cu_blocks(T, 1), CU_ROW_THREADS, 0, cu_stream(ctx)>>>(y, mean, rstd, x, w,
                                                                             b, T, d, eps);
    CU_LAUNCHED(ctx);
}

/* dx: [T, d] or NULL (written)  dw, db: [d] or NULL (+=)  dy, x: [T, d]
 * mean, rstd: [T]  w: [d] */
void cu_layernorm_backward(void *ctx, float *dx, float *dw, float *db, const float *dy,
                           const float *x, const float *mean, const float *rstd, const float *w,
                           int64_t T, int64_t d)
{
    if (T <= 0 || d <= 0)
        return;
    cudaStream_t st = cu_stream(ctx);
    if (dx) {
        k_layernorm_bwd_dx<<<cu_blocks(T, 1), CU_ROW_THREADS, 0, st>>>(dx, dy, x, mean, rstd, w,
                                                                        T, d);
        CU_LAUNCHED(ctx);
    }
    if (dw || db) {
        k_layernorm_bwd_dwdb<<<cu_blocks(d, CU_THREADS), CU_THREADS, 0, st>>>(dw, db, dy, x, mean,
                                                                             rstd, T, d);
        CU_LAUNCHED(ctx);
    }
}

/* y: [n] (may alias x)  x: [n] */
void cu_gelu_forward(void *ctx, float *y, const float *x, int64_t n, enum hm_gelu_kind kind)
{
    if (n <= 0)
        return;
    k_gelu_fwd<<<cu_blocks(n, CU_THREADS), CU_THREADS, 0, cu_stream(ctx)>>>(y, x, n, (int)kind);
    CU_LAUNCHED(ctx);
}

/* x: [T, row_stride] (n_h heads, rotated in place)  inv_freq: [r/2] */
void cu_rotary_forward(void *ctx, float *x, int64_t T, int64_t n_h, int64_t r, int64_t row_stride,
                       int64_t head_stride, int64_t pos0, const float *inv_freq)
{
    cu_rotary_launch(ctx, x, T, n_h, r, row_stride, head_stride, pos0, inv_freq, 0);
}

/* y, a, b: [n]; y may alias a or b */
void cu_add_forward(void *ctx, float *y, const float *a, const float *b, int64_t n)
{
    if (n <= 0)
        return;
    k_add<<<cu_blocks(n, CU_THREADS), CU_THREADS, 0, cu_stream(ctx)>>>(y, a, b, n);
    CU_LAUNCHED(ctx);
}

/* y: [T, d]  ids: [T]  table: [V, d] */
void cu_embedding_forward(void *ctx, float *y, const int32_t *ids, const float *table, int64_t T,
                          int64_t d)
{
    if (T <= 0 || d <= 0)
        return;
    k_embedding_fwd<<<cu_blocks(T * d, CU_THREADS), CU_THREADS, 0, cu_stream(ctx)>>>(y, ids, table,
                                                                                    T, d);
    CU_LAUNCHED(ctx);
}

void cu_widen_rows(void *ctx, float *y, const int32_t *ids, const uint16_t *x, int64_t N,
                   int64_t d, enum hm_narrow kind)
{
    if (N <= 0 || d <= 0)
        return;
    k_widen_rows<<<cu_blocks(N * d, CU_THREADS), CU_THREADS, 0, cu_stream(ctx)>>>(
        y, ids, x, N, d, kind == HM_NARROW_F16);
    CU_LAUNCHED(ctx);
}

/* dx: [n] (may alias dy)  dy, x: [n] */
void cu_gelu_backward(void *ctx, float *dx, const float *dy, const float *x, int64_t n,
                      enum hm_gelu_kind kind)
{
    if (n <= 0)
        return;
    k_gelu_bwd<<<cu_blocks(n, CU_THREADS), CU_THREADS, 0, cu_stream(ctx)>>>(dx, dy, x, n,
                                                                            (int)kind);
    CU_LAUNCHED(ctx);
}

/* dx: [T, row_stride] in place, R(θ)^T  inv_freq: [r/2] */
void cu_rotary_backward(void *ctx, float *dx, int64_t T, int64_t n_h, int64_t r,
                        int64_t row_stride, int64_t head_stride, int64_t pos0,
                        const float *inv_freq)
{
    cu_rotary_launch(ctx, dx, T, n_h, r, row_stride, head_stride, pos0, inv_freq, 1);
}

/* dtable: [V, d] (+=)  dy: [T, d]  ids: [T] */
void cu_embedding_backward(void *ctx, float *dtable, const float *dy, const int32_t *ids,
                           int64_t T, int64_t d)
{
    if (T <= 0 || d <= 0)
        return;
    /* about 128 ids per group on average, at most CU_EMB_GROUPS groups */
    int64_t G = T / 128;
    G = G < 1 ? 1 : G > CU_EMB_GROUPS ? CU_EMB_GROUPS : G;
    const dim3 grid(cu_blocks(d, CU_EMB_THREADS), (unsigned)G);
    k_embedding_bwd<<<grid, CU_EMB_THREADS, 0, cu_stream(ctx)>>>(dtable, dy, ids, T, d);
    CU_LAUNCHED(ctx);
}

/* y, z: [n]; y may alias z */
void cu_softplus_forward(void *ctx, float *y, const float *z, int64_t n)
{
    if (n <= 0)
        return;
    k_softplus_fwd<<<cu_blocks(n, CU_THREADS), CU_THREADS, 0, cu_stream(ctx)>>>(y, z, n);
    CU_LAUNCHED(ctx);
}

/* dz, dy, z: [n]; dz may alias dy */
void cu_softplus_backward(void *ctx, float *dz, const float *dy, const float *z, int64_t n)
{
    if (n <= 0)
        return;
    k_softplus_bwd<<<cu_blocks(n, CU_THREADS), CU_THREADS, 0, cu_stream(ctx)>>>(dz, dy, z, n);
    CU_LAUNCHED(ctx);
}

/* out, y, z: [n]; out may alias y or z */
void cu_silu_gate_forward(void *ctx, float *out, const float *y, const float *z, int64_t n)
{
    if (n <= 0)
        return;
    k_silu_gate_fwd<<<cu_blocks(n, CU_THREADS), CU_THREADS, 0, cu_stream(ctx)>>>(out, y, z, n);
    CU_LAUNCHED(ctx);
}

/* dy, dz: [n] or NULL (written)  dout, y, z: [n] */
void cu_silu_gate_backward(void *ctx, float *dy, float *dz, const float *dout, const float *y,
                           const float *z, int64_t n)
{
    if (n <= 0 || (!dy && !dz))
        return;
    k_silu_gate_bwd<<<cu_blocks(n, CU_THREADS), CU_THREADS, 0, cu_stream(ctx)>>>(dy, dz, dout, y,
                                                                                z, n);
    CU_LAUNCHED(ctx);
}

/* y: [T, d] (may alias x)  rstd: [T] or NULL  x: [T, d]  w: [d] */
void cu_rmsnorm_forward(void *ctx, float *y, float *rstd, const float *x, const float *w,
                        int64_t T, int64_t d, float eps)
{
    if (T <= 0) /* d = 0 still writes rstd (NaN, as ref's 0/0) */
        return;
    k_rmsnorm_fwd<<<cu_blocks(T, 1), CU_ROW_THREADS, 0, cu_stream(ctx)>>>(y, rstd, x, w, T, d,
                                                                           eps);
    CU_LAUNCHED(ctx);
}

/* dx: [T, d] or NULL (written)  dw: [d] or NULL (+=)  dy, x: [T, d]  rstd: [T]  w: [d] */
void cu_rmsnorm_backward(void *ctx, float *dx, float *dw, const float *dy, const float *x,
                         const float *rstd, const float *w, int64_t T, int64_t d)
{
    if (T <= 0 || d <= 0)
        return;
    cudaStream_t st = cu_stream(ctx);
    if (dx) {
        k_rmsnorm_bwd_dx<<<cu_blocks(T, 1), CU_ROW_THREADS, 0, st>>>(dx, dy, x, rstd, w, T, d);
        CU_LAUNCHED(ctx);
    }
    if (dw) {
        k_rmsnorm_bwd_dw<<<cu_blocks(d, CU_THREADS), CU_THREADS, 0, st>>>(dw, dy, x, rstd, T, d);
        CU_LAUNCHED(ctx);
    }
}

/* y: [T, n_h, 3, p]  x: [T, (n_h + 2 n_kv) p]; n_h a multiple of n_kv */
void cu_qkv_expand_forward(void *ctx, float *y, const float *x, int64_t T, int64_t n_h,
                           int64_t n_kv, int64_t p)
{
    if (T <= 0 || n_h <= 0 || n_kv <= 0 || p <= 0)
        return;
    k_qkv_expand_fwd<<<cu_blocks(T * n_h * 3 * p, CU_THREADS), CU_THREADS, 0, cu_stream(ctx)>>>(
        y, x, T, n_h, n_kv, p);
    CU_LAUNCHED(ctx);
}

/* dx: [T, (n_h + 2 n_kv) p] (written)  dy: [T, n_h, 3, p] */
void cu_qkv_expand_backward(void *ctx, float *dx, const float *dy, int64_t T, int64_t n_h,
                            int64_t n_kv, int64_t p)
{
    if (T <= 0 || n_h <= 0 || n_kv <= 0 || p <= 0)
        return;
    k_qkv_expand_bwd<<<cu_blocks(T * (n_h + 2 * n_kv) * p, CU_THREADS), CU_THREADS, 0,
                       cu_stream(ctx)>>>(dx, dy, T, n_h, n_kv, p);
    CU_LAUNCHED(ctx);
}

/* x: [n] */
void cu_fill(void *ctx, float *x, int64_t n, float value) { cu_fill_launch(ctx, x, n, value); }

/* dst: rows × cols at row stride dst_stride  src: rows × cols at src_stride */
void cu_copy2d(void *ctx, float *dst, int64_t dst_stride, const float *src, int64_t src_stride,
               int64_t rows, int64_t cols)
{
    if (rows <= 0 || cols <= 0)
        return;
    k_copy2d<<<cu_blocks(rows * cols, CU_THREADS), CU_THREADS, 0, cu_stream(ctx)>>>(
        dst, dst_stride, src, src_stride, rows, cols);
    CU_LAUNCHED(ctx);
}

/* x: [n] */
void cu_clamp(void *ctx, float *x, int64_t n, float lo, float hi)
{
    if (n <= 0)
        return;
    k_clamp<<<cu_blocks(n, CU_THREADS), CU_THREADS, 0, cu_stream(ctx)>>>(x, n, lo, hi);
    CU_LAUNCHED(ctx);
}
