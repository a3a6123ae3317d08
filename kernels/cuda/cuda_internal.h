/* cuda_internal.h — what the CUDA backend's files share (CUDA C++; private
 * to kernels/cuda/). The backend implements every op of kernels/ops.def on
 * device memory (kernels/backend.h has the contracts):
 *   cuda_backend.cu   the context (device, stream, cuBLAS handle), memory,
 *                     the first failure, the vtable and its descriptor;
 *   cuda_dense.cu     products (cuBLAS), norms, activations (GELU, softplus,
 *                     the SiLU gate), rotary, embeddings, the GQA
 *                     expansion, fill/copy/clamp;
 *   cuda_train.cu     losses, the optimizers, norms of gradients, the
 *                     non-finite search;
 *   cuda_attention.cu softmax attention (training and the KV-cache step);
 *   cuda_reduce.cuh   the fixed-order block and warp reductions they share;
 *   cuda_featuremap.cu  the Hedgehog feature maps;
 *   cuda_linear.cu    linear attention and the HedgeMamba scan (one set of
 *                     kernels), its chunk carry and one-token step;
 *   cuda_conv.cu      the HedgeMamba causal depthwise conv;
 *   cuda_stage1.cu    the stage-1 objectives besides the cosine loss (mse_loss,
 *                     attn_ce_loss).
 *
 * Rules every kernel follows:
 *   - Everything runs on the context's stream (cu_stream(ctx)); nothing
 *     synchronizes except upload, download and sync.
 *   - After every launch: CU_LAUNCHED(ctx); every CUDA/cuBLAS call through
 *     CU_CHECK / CUBLAS_CHECK. A failure is recorded (the first one wins)
 *     and reported by hm_backend_sync; ops never abort.
 *   - Determinism: no atomics in sums, no order that depends on the
 *     schedule: a reduction is one thread's loop or a block's fixed tree.
 *     The same inputs give the same bits run to run.
 *   - fp32 storage and fp32 (or double where ref uses double) accumulation,
 *     within 1e-5 relative of ref (contract §10).
 *   - Ops never allocate: scratch comes from the caller's workspace, whose
 *     size the op's *_ws_size reports (0 is fine when none is needed).
 */
#ifndef HM_CUDA_INTERNAL_H
#define HM_CUDA_INTERNAL_H

#include <cublas_v2.h>
#include <cuda_runtime.h>

extern "C" {
#include "backend_impl.h"
}

struct cu_ctx {
    int device;
    cudaStream_t stream;
    cublasHandle_t blas;
    enum hm_status status; /* the first failure since the last sync */
    struct hm_error err;
};

static inline cu_ctx *cu_of(void *ctx) { return static_cast<cu_ctx *>(ctx); }
static inline cudaStream_t cu_stream(void *ctx) { return cu_of(ctx)->stream; }
static inline cublasHandle_t cu_blas(void *ctx) { return cu_of(ctx)->blas; }

/* Records a failure (the first one since the last sync is kept):
 * "<what> failed at <file>:<line>: <detail>". */
void cu_record(void *ctx, const char *file, int line, const char *what, const char *detail);

#define CU_CHECK(ctx, call)                                                          \
    do {                                                                             \
        cudaError_t cu_e_ = (call);                                                  \
        if (cu_e_ != cudaSuccess)                                                    \
            cu_record((ctx), __FILE__, __LINE__, #call, cudaGetErrorString(cu_e_));  \
    } while (0)
#define CU_LAUNCHED(ctx) CU_CHECK((ctx), cudaGetLastError())
#define CUBLAS_CHECK(ctx, call)                                                      \
    do {                                                                             \
        cublasStatus_t cu_s_ = (call);                                               \
        if (cu_s_ != CUBLAS_STATUS_SUCCESS)                                          \
            cu_record((ctx), __FILE__, __LINE__, #call, cublasGetStatusString(cu_s_)); \
    } while (0)

/* Blocks of `threads` covering n items (at least 1; grid x ≤ 2^31 − 1). */
static inline unsigned cu_blocks(int64_t n, int threads)
{
    int64_t b = (n + threads - 1) / threads;
    return (unsigned)(b < 1 ? 1 : b > 2147483647 ? 2147483647 : b);
}

/* The sum over a full warp by xor butterfly: addition commutes, so every
 * lane holds the same bits (a fixed-order reduction). */
static __device__ __forceinline__ double cu_warp_sum(double v)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* The op implementations, one per ops.def entry: cu_<name>(ctx, params). */
#define HM_OP(name, fast, flops, params, args) void cu_##name(void *ctx, HM_UNPAREN params);
#define HM_OP_SIZE(name, fast, params, args) size_t cu_##name(void *ctx, HM_UNPAREN params);
#include "ops.def"
#undef HM_OP
#undef HM_OP_SIZE

#endif
