/* cuda_train.cu — the CUDA ops of the training loop (cuda_internal.h):
 * losses (nll_forward, cross_entropy_backward, kl_backward, cosine_loss),
 * the optimizers (adamw_step, sgd_step), sqnorm and first_nonfinite
 * (causal softmax attention: cuda_attention.cu). Contracts: kernels/backend.h; oracle:
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
#include "cuda_reduce.cuh"

#include <math.h>
#include <stdint.h>

namespace {

constexpr int kOneBlock = 1024;  /* the single block of a scalar result */
constexpr int kOneBlockWarps = kOneBlock / 32;

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
 * dlogits accumulates (+=), so nothing can be passed through it. The logits
 * are divided by τ where read (a division, as in kl_row: exact at τ = 1 and
 * never fused). Kernel 1, one block per row: kl_row's gradient exactly (max
 * from element 0, then /τ, Σ exp in double, lse's, then
 * g += (float)(w·scale·τ·(p_s − p_t))). Kernel 2, one block, one warp per
 * row: KL(p_t ‖ p_s) recomputed in one pass with online max/sum per lane,
 * KL = Σ p_t (lt − ls) − (lse_t − lse_s) (= Σ p_t (log p_t − log p_s), all
 * in double), rows summed per warp in row order, then the 32 warps in
 * order, times τ². A faster version would keep the per-row KL in a
 * workspace of T doubles; the op has none, so kernel 2 reads both logit
 * arrays once more on one SM. */
__global__ void __launch_bounds__(kRowThreads)
    kl_rows_kernel(float *dlogits, const float *logits, const float *tlogits, int64_t T, int64_t V,
                   double w, double scale, double tau)
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
        const double ms = ref_row_max(block_tree(ms_, smax, MaxF()), isnan(ls[0])) / tau;
        const double mt = ref_row_max(block_tree(mt_, smax, MaxF()), isnan(lt[0])) / tau;
        double ss = 0, st = 0;
        for (int64_t v = threadIdx.x; v < V; v += blockDim.x) {
            ss += exp((double)ls[v] / tau - ms);
            st += exp((double)lt[v] / tau - mt);
        }
        ss = block_tree(ss, ssum, SumD());
        st = block_tree(st, ssum, SumD());
        const double lss = ms + log(ss), lst = mt + log(st), ws = w * scale * tau;
        for (int64_t v = threadIdx.x; v < V; v += blockDim.x) {
            const double lps = (double)ls[v] / tau - lss, lpt = (double)lt[v] / tau - lst;
            const double pt = exp(lpt);
            g[v] = __fadd_rn(g[v], (float)(ws * (exp(lps) - pt)));
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
    kl_loss_kernel(double *loss, const float *logits, const float *tlogits, int64_t T, int64_t V,
                   double tau)
{
    __shared__ double swarp[kOneBlockWarps];
    const int lane = threadIdx.x & 31, wp = threadIdx.x >> 5;
    double acc = 0;
    for (int64_t t = wp; t < T; t += kOneBlockWarps) {
        const float *ls = logits + t * V, *lt = tlogits + t * V; /* [V] each */
        Online os = {-INFINITY, 0, 0}, ot = {-INFINITY, 0, 0};
        for (int64_t v = lane; v < V; v += 32) {
            const double a = ls[v] / tau, b = lt[v] / tau;
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
    const double total = block_warps_total(acc, swarp, kOneBlockWarps);
    if (threadIdx.x == 0)
        *loss += tau * tau * total;
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
    r.aa = cu_warp_sum(r.aa);
    r.bb = cu_warp_sum(r.bb);
    r.ab = cu_warp_sum(r.ab);
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
    const int wp = threadIdx.x >> 5;
    double acc = 0;
    for (int64_t t = wp; t < N; t += kOneBlockWarps) {
        const Dots s = row_dots(a + t * d, b + t * d, d);
        if (s.aa == 0 || s.bb == 0)
            acc += 1;
        else
            acc += 1 - s.ab / (sqrt(s.aa) * sqrt(s.bb));
    }
    const double total = block_warps_total(acc, swarp, kOneBlockWarps);
    if (threadIdx.x == 0)
        *loss += total;
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

} /* namespace */

/* ---- the ops ---------------------------------------------------------------- */

/* nll: [T]  lse: [T] or NULL  logits: [T, V]  targets: [T] */
void cu_nll_forward(void *ctx, float *nll, float *lse, const float *logits, const int32_t *targets,
                    int64_t T, int64_t V)
{
    if (T <= 0 || V <= 0)
        return;
    nll_kernel<<<cu_blocks(T, 1), kRowThreads, 0, cu_stream(ctx)>>>(nll, lse, logits, targets, T, V);
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
        ce_rows_kernel<<<cu_blocks(T, 1), kRowThreads, 0, cu_stream(ctx)>>>(dlogits, logits, targets,
                                                                         T, V, scale);
        CU_LAUNCHED(ctx);
    }
    ce_finish_kernel<<<1, kOneBlock, 0, cu_stream(ctx)>>>(loss, dlogits, logits, targets, T, V,
                                                          scale, stashed);
    CU_LAUNCHED(ctx);
}

/* loss: [1]  dlogits (+=), logits, tlogits: [T, V] */
void cu_kl_backward(void *ctx, double *loss, float *dlogits, const float *logits,
                    const float *tlogits, int64_t T, int64_t V, double w, double scale, double tau)
{
    if (T <= 0 || V <= 0)
        return;
    kl_rows_kernel<<<cu_blocks(T, 1), kRowThreads, 0, cu_stream(ctx)>>>(dlogits, logits, tlogits, T, V,
                                                                     w, scale, tau);
    CU_LAUNCHED(ctx);
    kl_loss_kernel<<<1, kOneBlock, 0, cu_stream(ctx)>>>(loss, logits, tlogits, T, V, tau);
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
