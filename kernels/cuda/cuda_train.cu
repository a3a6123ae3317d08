/* cuda_train.cu — the CUDA ops of the training loop (cuda_internal.h):
 * losses (nll_forward, cross_entropy_backward, kl_backward, cosine_loss),
 * the optimizers (adamw_step, sgd_step), sqnorm, first_nonfinite, causal
 * softmax attention (forward, backward) and the KV-cache step
 * (attention_cached). Contracts: kernels/backend.h; oracle:
 * kernels/cpu/ref_*.c.
 *
 * Determinism: every sum is a thread's own loop, a warp's xor butterfly
 * (IEEE addition commutes, so every lane ends with the same bits) or a
 * block's fixed shared-memory tree; no atomics. The scalar results
 * (losses, norms, the non-finite index) come from one block, which adds
 * its fixed-order total into the scalar. These ops have no workspace, so
 * a sum over rows is either recomputed by that one block or, where the
 * gradient is written (=), passed to it through the gradient buffer (see
 * cross_entropy_backward).
 *
 * Where ref rounds in fp32 step by step (AdamW, SGD, attention_cached) the
 * kernels use the _rn intrinsics so that nvcc does not contract a product
 * and a sum into one FMA: they then round exactly as ref does (ref is built
 * for baseline x86-64, without FMA). Where ref sums in double, so do we.
 */
#include "cuda_internal.h"

#include <math.h>
#include <stdint.h>

namespace {

constexpr int kRowThreads = 256; /* one block per row */
constexpr int kOneBlock = 1024;  /* the single block of a scalar result */
constexpr int kOneBlockWarps = kOneBlock / 32;
constexpr unsigned kFull = 0xffffffffu;

/* ---- fixed-order reductions -------------------------------------------- */

struct SumD {
    __device__ double operator()(double a, double b) const { return a + b; }
};
/* ref's `x > m ? x : m`: a NaN never wins (the partials start at −inf) */
struct MaxF {
    __device__ float operator()(float a, float b) const { return b > a ? b : a; }
};
struct MinI {
    __device__ int64_t operator()(int64_t a, int64_t b) const { return b < a ? b : a; }
};

/* The tree over the block (blockDim.x a power of two) of every thread's v,
 * in a fixed order; every thread gets the result. s: [blockDim.x] shared.
 * Called by every thread of the block. */
template <typename T, typename Op>
__device__ T block_tree(T v, T *s, Op op)
{
    const int tid = threadIdx.x;
    s[tid] = v;
    __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w >>= 1) {
        if (tid < w)
            s[tid] = op(s[tid], s[tid + w]);
        __syncthreads();
    }
    T r = s[0];
    __syncthreads(); /* s may be reused at once */
    return r;
}

/* The sum over the warp; every lane gets the same bits. */
__device__ double warp_sum(double v)
{
    for (int off = 16; off > 0; off >>= 1)
        v += __shfl_xor_sync(kFull, v, off);
    return v;
}

/* The max over the warp of values that are never NaN. */
__device__ double warp_max(double v)
{
    for (int off = 16; off > 0; off >>= 1) {
        double o = __shfl_xor_sync(kFull, v, off);
        v = o > v ? o : v;
    }
    return v;
}

/* The max of a row as ref's loop finds it from m = row[0]: a NaN at row[0]
 * stays, later NaNs are skipped. first_nan: isnan(row[0]). */
__device__ double ref_row_max(float m_ignoring_nan, bool first_nan)
{
    return first_nan ? (double)NAN : (double)m_ignoring_nan;
}

/* ---- nll_forward ----------------------------------------------------------
 * One block per row: the max (exact in any order), Σ exp(l − max) in
 * double (each thread's strided loop, then the block tree), then thread 0
 * writes nll and lse. */
__global__ void __launch_bounds__(kRowThreads)
    nll_kernel(float *nll, float *lse, const float *logits, const int32_t *targets, int64_t T,
               int64_t V)
{
    __shared__ float smax[kRowThreads];
    __shared__ double ssum[kRowThreads];
    for (int64_t t = blockIdx.x; t < T; t += gridDim.x) {
        const float *row = logits + t * V; /* [V] */
        float m = -INFINITY;
        for (int64_t v = threadIdx.x; v < V; v += blockDim.x) {
            const float x = row[v];
            m = x > m ? x : m;
        }
        const double mx = (double)block_tree(m, smax, MaxF());
        double s = 0;
        for (int64_t v = threadIdx.x; v < V; v += blockDim.x)
            s += exp((double)row[v] - mx);
        s = block_tree(s, ssum, SumD());
        if (threadIdx.x == 0) {
            const double l = mx + log(s);
            if (lse)
                lse[t] = (float)l;
            nll[t] = (float)(l - (double)row[targets[t]]);
        }
    }
}

/* ---- cross_entropy_backward -------------------------------------------------
 * Kernel 1, one block per row: the row's lse (as nll_kernel), the gradient
 * of columns 2.. written; columns 0 and 1 of a counted row (target ≥ 0)
 * hold the row's lse (the bits of the double) for kernel 2. Kernel 2, one
 * block: per row, nll = lse − l[target] (ref's term, bit for bit), summed
 * in a fixed order, and columns 0, 1 rewritten with their gradient from the
 * same lse. V = 1 (no room for the double): kernel 2's form does the whole
 * row in one thread. */
__device__ float ce_grad(float l, double lse, float scale, bool is_target)
{
    /* ref: g = (float)(scale · exp(l − lse)); g[target] −= scale (fp32) */
    const float g = (float)((double)scale * exp((double)l - lse));
    return is_target ? __fsub_rn(g, scale) : g;
}

/* The double's two halves as the bit patterns of two floats (moves only:
 * no arithmetic touches them, so any pattern survives). */
__device__ void ce_put_lse(float *g, double lse)
{
    g[0] = __int_as_float(__double2loint(lse));
    g[1] = __int_as_float(__double2hiint(lse));
}

__device__ double ce_get_lse(const float *g)
{
    return __hiloint2double(__float_as_int(g[1]), __float_as_int(g[0]));
}

__global__ void __launch_bounds__(kRowThreads)
    ce_rows_kernel(float *dlogits, const float *logits, const int32_t *targets, int64_t T,
                   int64_t V, float scale)
{
    __shared__ float smax[kRowThreads];
    __shared__ double ssum[kRowThreads];
    for (int64_t t = blockIdx.x; t < T; t += gridDim.x) {
        const float *l = logits + t * V; /* [V] */
        float *g = dlogits + t * V;      /* [V] */
        const int32_t tg = targets[t];
        if (tg < 0) { /* ignored row: zero gradient, no loss (block-uniform) */
            for (int64_t v = threadIdx.x; v < V; v += blockDim.x)
                g[v] = 0.0f;
            continue;
        }
        float m = -INFINITY;
        for (int64_t v = threadIdx.x; v < V; v += blockDim.x) {
            const float x = l[v];
            m = x > m ? x : m;
        }
        const double mx = ref_row_max(block_tree(m, smax, MaxF()), isnan(l[0]));
        double se = 0;
        for (int64_t v = threadIdx.x; v < V; v += blockDim.x)
            se += exp((double)l[v] - mx);
        se = block_tree(se, ssum, SumD());
        const double lse = mx + log(se);
        for (int64_t v = 2 + threadIdx.x; v < V; v += blockDim.x)
            g[v] = ce_grad(l[v], lse, scale, v == tg);
        if (threadIdx.x == 0)
            ce_put_lse(g, lse);
    }
}

/* One block. stashed: kernel 1 ran (V ≥ 2) and left each counted row's lse
 * in its columns 0, 1; otherwise (V = 1) each thread does its rows alone. */
__global__ void __launch_bounds__(kOneBlock)
    ce_finish_kernel(double *loss, float *dlogits, const float *logits, const int32_t *targets,
                     int64_t T, int64_t V, float scale, bool stashed)
{
    __shared__ double ssum[kOneBlock];
    double acc = 0;
    for (int64_t t = threadIdx.x; t < T; t += blockDim.x) {
        const float *l = logits + t * V;
        float *g = dlogits + t * V;
        const int32_t tg = targets[t];
        if (tg < 0) {
            if (!stashed)
                for (int64_t v = 0; v < V; v++)
                    g[v] = 0.0f;
            continue;
        }
        double lse;
        if (stashed) {
            lse = ce_get_lse(g);
        } else { /* ref's loops, one thread */
            double mx = l[0];
            for (int64_t v = 1; v < V; v++)
                if (l[v] > mx)
                    mx = l[v];
            double se = 0;
            for (int64_t v = 0; v < V; v++)
                se += exp((double)l[v] - mx);
            lse = mx + log(se);
        }
        acc += lse - (double)l[tg];
        const int64_t nv = stashed ? 2 : V;
        for (int64_t v = 0; v < nv; v++)
            g[v] = ce_grad(l[v], lse, scale, v == tg);
    }
    acc = block_tree(acc, ssum, SumD());
    if (threadIdx.x == 0)
        *loss += acc;
}

/* ---- kl_backward ----------------------------------------------------------
 * dlogits accumulates (+=), so nothing can be passed through it. Kernel 1,
 * one block per row: kl_row's gradient exactly (max from element 0, Σ exp
 * in double, lse's, then g += (float)(w·scale·(p_s − p_t))). Kernel 2, one
 * block, one warp per row: KL(p_t ‖ p_s) recomputed in one pass with online
 * max/sum per lane, KL = Σ p_t (lt − ls) − (lse_t − lse_s) (= Σ p_t (log p_t
 * − log p_s), all in double), rows summed per warp in row order, then the
 * 32 warps in order. A faster version would keep the per-row KL in a
 * workspace of T doubles; the op has none, so kernel 2 reads both logit
 * arrays once more on one SM. */
__global__ void __launch_bounds__(kRowThreads)
    kl_rows_kernel(float *dlogits, const float *logits, const float *tlogits, int64_t T, int64_t V,
                   double w, double scale)
{
    __shared__ float smax[kRowThreads];
    __shared__ double ssum[kRowThreads];
    for (int64_t t = blockIdx.x; t < T; t += gridDim.x) {
        const float *ls = logits + t * V, *lt = tlogits + t * V; /* [V] each */
        float *g = dlogits + t * V;                              /* [V] */
        float ms_ = -INFINITY, mt_ = -INFINITY;
        for (int64_t v = threadIdx.x; v < V; v += blockDim.x) {
            const float a = ls[v], b = lt[v];
            ms_ = a > ms_ ? a : ms_;
            mt_ = b > mt_ ? b : mt_;
        }
        const double ms = ref_row_max(block_tree(ms_, smax, MaxF()), isnan(ls[0]));
        const double mt = ref_row_max(block_tree(mt_, smax, MaxF()), isnan(lt[0]));
        double ss = 0, st = 0;
        for (int64_t v = threadIdx.x; v < V; v += blockDim.x) {
            ss += exp((double)ls[v] - ms);
            st += exp((double)lt[v] - mt);
        }
        ss = block_tree(ss, ssum, SumD());
        st = block_tree(st, ssum, SumD());
        const double lss = ms + log(ss), lst = mt + log(st);
        for (int64_t v = threadIdx.x; v < V; v += blockDim.x) {
            const double lps = (double)ls[v] - lss, lpt = (double)lt[v] - lst, pt = exp(lpt);
            g[v] = __fadd_rn(g[v], (float)(w * scale * (exp(lps) - pt)));
        }
    }
}

/* Online (max, Σ exp(x − max)) of one lane; a = Σ exp(x − max)·y rides on
 * the same max (the teacher's). */
struct Online {
    double m, s, a;
};

__device__ void online_add(Online &o, double x, double y)
{
    if (x == INFINITY) { /* ref: exp(inf − inf) in its sum makes the row NaN */
        o.s = NAN;
    } else if (x > o.m) {
        const double f = exp(o.m - x); /* 0 while o.m = −inf */
        o.s = o.s * f + 1.0;
        o.a = o.a * f + y;
        o.m = x;
    } else if (x == -INFINITY) { /* weight exactly 0; ref's 0·(−inf) is NaN */
        o.a += 0.0 * y;
    } else { /* a NaN x poisons s and a, as in ref */
        const double e = exp(x - o.m);
        o.s += e;
        o.a += e * y;
    }
}

__device__ Online online_merge(Online o, Online p)
{
    const double m = p.m > o.m ? p.m : o.m;
    const double fo = o.m == -INFINITY ? 0.0 : exp(o.m - m);
    const double fp = p.m == -INFINITY ? 0.0 : exp(p.m - m);
    Online r;
    r.m = m;
    r.s = o.s * fo + p.s * fp;
    r.a = o.a * fo + p.a * fp;
    return r;
}

__device__ Online warp_online(Online o)
{
    for (int off = 16; off > 0; off >>= 1) {
        Online p;
        p.m = __shfl_xor_sync(kFull, o.m, off);
        p.s = __shfl_xor_sync(kFull, o.s, off);
        p.a = __shfl_xor_sync(kFull, o.a, off);
        /* merge in lane order so both lanes of a pair compute the same bits */
        o = (threadIdx.x & off) ? online_merge(p, o) : online_merge(o, p);
    }
    return o;
}

__global__ void __launch_bounds__(kOneBlock)
    kl_loss_kernel(double *loss, const float *logits, const float *tlogits, int64_t T, int64_t V)
{
    __shared__ double swarp[kOneBlockWarps];
    const int lane = threadIdx.x & 31, wp = threadIdx.x >> 5;
    double acc = 0;
    for (int64_t t = wp; t < T; t += kOneBlockWarps) {
        const float *ls = logits + t * V, *lt = tlogits + t * V; /* [V] each */
        Online os = {-INFINITY, 0, 0}, ot = {-INFINITY, 0, 0};
        for (int64_t v = lane; v < V; v += 32) {
            const double a = ls[v], b = lt[v];
            online_add(os, a, 0.0);
            online_add(ot, b, b - a);
        }
        os = warp_online(os);
        ot = warp_online(ot);
        /* ref's max starts at element 0: a NaN there makes the row NaN */
        if (isnan(ls[0]) || isnan(lt[0]))
            os.s = NAN;
        const double lss = os.m + log(os.s), lst = ot.m + log(ot.s);
        acc += ot.a / ot.s - (lst - lss);
    }
    if (lane == 0)
        swarp[wp] = acc;
    __syncthreads();
    if (threadIdx.x == 0) {
        double total = 0;
        for (int i = 0; i < kOneBlockWarps; i++)
            total += swarp[i];
        *loss += total;
    }
}

/* ---- cosine_loss ------------------------------------------------------------
 * One warp per row computes aa, bb, ab (lane-strided double sums, then the
 * butterfly), the same function in both kernels, so both see the same
 * sums. Kernel 1 (when da is wanted): 8 warps per block, writes da. Kernel
 * 2, one block: per-row losses summed per warp in row order, then the 32
 * warps in order. */
struct Dots {
    double aa, bb, ab;
};

__device__ Dots row_dots(const float *ar, const float *br, int64_t d)
{
    const int lane = threadIdx.x & 31;
    Dots r = {0, 0, 0};
    for (int64_t i = lane; i < d; i += 32) {
        const double a = ar[i], b = br[i];
        r.aa += a * a;
        r.bb += b * b;
        r.ab += a * b;
    }
    r.aa = warp_sum(r.aa);
    r.bb = warp_sum(r.bb);
    r.ab = warp_sum(r.ab);
    return r;
}

constexpr int kCosWarps = 8;

__global__ void __launch_bounds__(256)
    cosine_grad_kernel(float *da, const float *a, const float *b, int64_t N, int64_t d, float scale)
{
    const int lane = threadIdx.x & 31, wp = threadIdx.x >> 5;
    for (int64_t t = (int64_t)blockIdx.x * kCosWarps + wp; t < N;
         t += (int64_t)gridDim.x * kCosWarps) {
        const float *ar = a + t * d, *br = b + t * d; /* [d] each */
        float *g = da + t * d;                        /* [d] */
        const Dots s = row_dots(ar, br, d);
        if (s.aa == 0 || s.bb == 0) {
            for (int64_t i = lane; i < d; i += 32)
                g[i] = 0.0f;
            continue;
        }
        const double na = sqrt(s.aa), nb = sqrt(s.bb), c = s.ab / (na * nb);
        for (int64_t i = lane; i < d; i += 32)
            g[i] = (float)((double)scale * -((double)br[i] / (na * nb) - c * (double)ar[i] / s.aa));
    }
}

__global__ void __launch_bounds__(kOneBlock)
    cosine_loss_kernel(double *loss, const float *a, const float *b, int64_t N, int64_t d)
{
    __shared__ double swarp[kOneBlockWarps];
    const int lane = threadIdx.x & 31, wp = threadIdx.x >> 5;
    double acc = 0;
    for (int64_t t = wp; t < N; t += kOneBlockWarps) {
        const Dots s = row_dots(a + t * d, b + t * d, d);
        if (s.aa == 0 || s.bb == 0)
            acc += 1;
        else
            acc += 1 - s.ab / (sqrt(s.aa) * sqrt(s.bb));
    }
    if (lane == 0)
        swarp[wp] = acc;
    __syncthreads();
    if (threadIdx.x == 0) {
        double total = 0;
        for (int i = 0; i < kOneBlockWarps; i++)
            total += swarp[i];
        *loss += total;
    }
}

/* ---- optimizers, norms, the non-finite search ------------------------------ */

/* adamw_one of kernels/cpu/cpu_train.h, rounding step by step as ref. */
__global__ void __launch_bounds__(kRowThreads)
    adamw_kernel(float *w, const float *g, float *m, float *v, int64_t n, struct hm_adamw_args a)
{
    const float one_b1 = __fsub_rn(1.0f, a.beta1), one_b2 = __fsub_rn(1.0f, a.beta2);
    for (int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; j < n;
         j += (int64_t)gridDim.x * blockDim.x) {
        const float gj = __fmul_rn(g[j], a.scale);
        float wj = __fmul_rn(w[j], a.decay);
        const float mj = __fadd_rn(__fmul_rn(a.beta1, m[j]), __fmul_rn(one_b1, gj));
        const float vj = __fadd_rn(__fmul_rn(a.beta2, v[j]), __fmul_rn(__fmul_rn(one_b2, gj), gj));
        const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vj), a.bc2_sqrt), a.eps);
        wj = __fsub_rn(wj, __fmul_rn(a.step_size, __fdiv_rn(mj, denom)));
        m[j] = mj;
        v[j] = vj;
        w[j] = wj;
    }
}

__global__ void __launch_bounds__(kRowThreads)
    sgd_kernel(float *w, const float *g, int64_t n, float lr)
{
    for (int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; j < n;
         j += (int64_t)gridDim.x * blockDim.x)
        w[j] = __fsub_rn(w[j], __fmul_rn(lr, g[j]));
}

/* One block: thread i sums x[i], x[i + 1024], ... in double, then the tree. */
__global__ void __launch_bounds__(kOneBlock) sqnorm_kernel(double *acc, const float *x, int64_t n)
{
    __shared__ double ssum[kOneBlock];
    double s = 0;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
        const double v = x[j];
        s += v * v;
    }
    s = block_tree(s, ssum, SumD());
    if (threadIdx.x == 0)
        *acc += s;
}

/* One block scans chunks of 4·1024 in order; the first chunk with a
 * non-finite value ends the scan, and its least such index (the block's
 * min tree) is the first of x. n = 0 writes −1. */
__global__ void __launch_bounds__(kOneBlock)
    first_nonfinite_kernel(int64_t *index, const float *x, int64_t n)
{
    __shared__ int64_t smin[kOneBlock];
    constexpr int kPer = 4;
    int64_t found = INT64_MAX;
    for (int64_t base = 0; base < n; base += (int64_t)kPer * blockDim.x) {
        for (int k = 0; k < kPer && found == INT64_MAX; k++) {
            const int64_t j = base + (int64_t)k * blockDim.x + threadIdx.x;
            if (j < n && !isfinite(x[j]))
                found = j;
        }
        if (__syncthreads_or(found != INT64_MAX))
            break;
    }
    found = block_tree(found, smin, MinI());
    if (threadIdx.x == 0)
        *index = found == INT64_MAX ? -1 : found;
}

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
        l = l * alpha + warp_sum(pj);
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

unsigned rows_grid(int64_t rows)
{
    return cu_blocks(rows, 1);
}

} /* namespace */

/* ---- the ops ---------------------------------------------------------------- */

/* nll: [T]  lse: [T] or NULL  logits: [T, V]  targets: [T] */
void cu_nll_forward(void *ctx, float *nll, float *lse, const float *logits, const int32_t *targets,
                    int64_t T, int64_t V)
{
    if (T <= 0 || V <= 0)
        return;
    nll_kernel<<<rows_grid(T), kRowThreads, 0, cu_stream(ctx)>>>(nll, lse, logits, targets, T, V);
    CU_LAUNCHED(ctx);
}

/* loss: [1]  dlogits, logits: [T, V]  targets: [T] (< 0: ignored) */
void cu_cross_entropy_backward(void *ctx, double *loss, float *dlogits, const float *logits,
                               const int32_t *targets, int64_t T, int64_t V, float scale)
{
    if (T <= 0 || V <= 0)
        return;
    const bool stashed = V >= 2;
    if (stashed) {
        ce_rows_kernel<<<rows_grid(T), kRowThreads, 0, cu_stream(ctx)>>>(dlogits, logits, targets,
                                                                         T, V, scale);
        CU_LAUNCHED(ctx);
    }
    ce_finish_kernel<<<1, kOneBlock, 0, cu_stream(ctx)>>>(loss, dlogits, logits, targets, T, V,
                                                          scale, stashed);
    CU_LAUNCHED(ctx);
}

/* loss: [1]  dlogits (+=), logits, tlogits: [T, V] */
void cu_kl_backward(void *ctx, double *loss, float *dlogits, const float *logits,
                    const float *tlogits, int64_t T, int64_t V, double w, double scale)
{
    if (T <= 0 || V <= 0)
        return;
    kl_rows_kernel<<<rows_grid(T), kRowThreads, 0, cu_stream(ctx)>>>(dlogits, logits, tlogits, T, V,
                                                                     w, scale);
    CU_LAUNCHED(ctx);
    kl_loss_kernel<<<1, kOneBlock, 0, cu_stream(ctx)>>>(loss, logits, tlogits, T, V);
    CU_LAUNCHED(ctx);
}

/* loss: [1]  da: [N, d] or NULL  a, b: [N, d] */
void cu_cosine_loss(void *ctx, double *loss, float *da, const float *a, const float *b, int64_t N,
                    int64_t d, float scale)
{
    if (N <= 0)
        return;
    if (da) {
        cosine_grad_kernel<<<cu_blocks(N, kCosWarps), kCosWarps * 32, 0, cu_stream(ctx)>>>(
            da, a, b, N, d, scale);
        CU_LAUNCHED(ctx);
    }
    cosine_loss_kernel<<<1, kOneBlock, 0, cu_stream(ctx)>>>(loss, a, b, N, d);
    CU_LAUNCHED(ctx);
}

/* w, m, v: [n] updated  g: [n]  a: host struct (read here, passed by value) */
void cu_adamw_step(void *ctx, float *w, const float *g, float *m, float *v, int64_t n,
                   const struct hm_adamw_args *a)
{
    if (n <= 0)
        return;
    const unsigned grid = cu_blocks(n, kRowThreads) < 65536u ? cu_blocks(n, kRowThreads) : 65536u;
    adamw_kernel<<<grid, kRowThreads, 0, cu_stream(ctx)>>>(w, g, m, v, n, *a);
    CU_LAUNCHED(ctx);
}

/* w: [n] updated  g: [n] */
void cu_sgd_step(void *ctx, float *w, const float *g, int64_t n, float lr)
{
    if (n <= 0)
        return;
    const unsigned grid = cu_blocks(n, kRowThreads) < 65536u ? cu_blocks(n, kRowThreads) : 65536u;
    sgd_kernel<<<grid, kRowThreads, 0, cu_stream(ctx)>>>(w, g, n, lr);
    CU_LAUNCHED(ctx);
}

/* acc: [1] (+=)  x: [n]. One block (no workspace for per-block partials:
 * a faster version would take one). */
void cu_sqnorm(void *ctx, double *acc, const float *x, int64_t n)
{
    if (n <= 0)
        return;
    sqnorm_kernel<<<1, kOneBlock, 0, cu_stream(ctx)>>>(acc, x, n);
    CU_LAUNCHED(ctx);
}

/* index: [1] written  x: [n] (n = 0: −1, one block still runs to write it) */
void cu_first_nonfinite(void *ctx, int64_t *index, const float *x, int64_t n)
{
    first_nonfinite_kernel<<<1, kOneBlock, 0, cu_stream(ctx)>>>(index, x, n < 0 ? 0 : n);
    CU_LAUNCHED(ctx);
}

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
