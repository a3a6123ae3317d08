/* cuda_reduce.cuh — fixed-order reductions the CUDA kernels share
 * (cuda_internal.h: no atomics, the same bits run to run). CUDA C++, for
 * kernels/cuda/ only. */
#ifndef HM_CUDA_REDUCE_CUH
#define HM_CUDA_REDUCE_CUH

#include <stdint.h>

namespace {

constexpr int kRowThreads = 256; /* one block per row */
constexpr unsigned kFull = 0xffffffffu;

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

/* One block's per-warp sums added in warp order: lane 0 of warp w leaves acc
 * in s[w] (s: nwarps doubles of shared memory); thread 0 gets their sum,
 * the other threads 0. Every thread of the block must call it. */
__device__ double block_warps_total(double acc, double *s, int nwarps)
{
    if ((threadIdx.x & 31) == 0)
        s[threadIdx.x >> 5] = acc;
    __syncthreads();
    double total = 0;
    if (threadIdx.x == 0)
        for (int i = 0; i < nwarps; i++)
            total += s[i];
    return total;
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

} /* namespace */

#endif
