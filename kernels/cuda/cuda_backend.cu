/* cuda_backend.cu — the CUDA backend's context, memory and vtable
 * (cuda_internal.h). Opening it without a usable device is an error that
 * says why (no device, no driver, a driver older than the toolkit). The
 * device is the one of this process's local rank (device_select.h). */
#include "cuda_internal.h"
#include "device_select.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void cu_record(void *ctx, const char *file, int line, const char *what, const char *detail)
{
    cu_ctx *c = cu_of(ctx);
    if (c->status != HM_OK)
        return;
    const char *base = strrchr(file, '/');
    c->status = hm_error_set(&c->err, HM_ERR_BACKEND, "cuda: %s failed at %s:%d: %s", what,
                             base ? base + 1 : file, line, detail);
}

static const char *env_lookup(const char *name) { return getenv(name); }

/* Without a driver or a device the backend is absent (HM_ERR_UNSUPPORTED:
 * tests skip, unless HM_REQUIRE_CUDA=1); a driver that is there but cannot
 * run this build (older than the runtime, broken) is an error. */
static enum hm_status cu_open(void **out, struct hm_error *err)
{
    *out = NULL;
    int n = 0, drv = 0, rt = 0;
    cudaDriverGetVersion(&drv); /* 0: no driver is installed */
    cudaRuntimeGetVersion(&rt);
    if (drv == 0)
        return hm_error_set(err, HM_ERR_UNSUPPORTED,
                            "no NVIDIA driver found, so no CUDA device can be used "
                            "(libcuda.so.1 was not found): install the NVIDIA driver, or use "
                            "--device cpu");
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e == cudaErrorNoDevice || (e == cudaSuccess && n == 0))
        return hm_error_set(err, HM_ERR_UNSUPPORTED, "no CUDA device is visible (%s)",
                            e == cudaSuccess ? "0 devices" : cudaGetErrorString(e));
    if (e == cudaErrorInsufficientDriver)
        return hm_error_set(err, HM_ERR_BACKEND,
                            "the CUDA driver (CUDA %d.%d) is older than this build's runtime "
                            "(CUDA %d.%d): update the driver, or build with an older toolkit",
                            drv / 1000, drv % 1000 / 10, rt / 1000, rt % 1000 / 10);
    if (e != cudaSuccess)
        return hm_error_set(err, HM_ERR_BACKEND, "the CUDA driver cannot be used: %s",
                            cudaGetErrorString(e));
    char why[256];
    int dev = hm_device_select(env_lookup, n, why, sizeof why);
    if (dev < 0)
        return hm_error_set(err, HM_ERR_BACKEND, "cannot choose a CUDA device: %s", why);
    if ((e = cudaSetDevice(dev)) != cudaSuccess)
        return hm_error_set(err, HM_ERR_BACKEND, "cannot use CUDA device %d (%s): %s", dev, why,
                            cudaGetErrorString(e));
    cu_ctx *c = static_cast<cu_ctx *>(calloc(1, sizeof *c));
    if (!c)
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    if ((e = cudaGetDevice(&c->device)) != cudaSuccess ||
        (e = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking)) != cudaSuccess) {
        free(c);
        return hm_error_set(err, HM_ERR_BACKEND, "cannot start CUDA: %s", cudaGetErrorString(e));
    }
    cublasStatus_t s = cublasCreate(&c->blas);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasSetStream(c->blas, c->stream);
    /* fp32 products stay fp32 (no TF32): within 1e-5 of ref */
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasSetMathMode(c->blas, CUBLAS_PEDANTIC_MATH);
    if (s != CUBLAS_STATUS_SUCCESS) {
        cudaStreamDestroy(c->stream);
        free(c);
        return hm_error_set(err, HM_ERR_BACKEND, "cannot start cuBLAS: %s",
                            cublasGetStatusString(s));
    }
    *out = c;
    return HM_OK;
}

static void cu_close(void *ctx)
{
    cu_ctx *c = cu_of(ctx);
    if (!c)
        return;
    cudaStreamSynchronize(c->stream);
    cublasDestroy(c->blas);
    cudaStreamDestroy(c->stream);
    free(c);
}

static enum hm_status cu_sync(void *ctx, struct hm_error *err)
{
    cu_ctx *c = cu_of(ctx);
    CU_CHECK(ctx, cudaStreamSynchronize(c->stream));
    enum hm_status st = c->status;
    if (st != HM_OK && err)
        *err = c->err;
    c->status = HM_OK;
    return st;
}

static void *cu_mem_alloc(void *ctx, size_t bytes)
{
    void *p = NULL;
    /* ops run on the stream: an allocation must not be handed out while
     * the stream still uses the memory a free returned */
    if (cudaMallocAsync(&p, bytes ? bytes : 1, cu_stream(ctx)) != cudaSuccess) {
        cudaGetLastError(); /* out of memory is the caller's NULL, not a sticky error */
        return NULL;
    }
    return p;
}

static void cu_mem_free(void *ctx, void *p)
{
    if (p)
        CU_CHECK(ctx, cudaFreeAsync(p, cu_stream(ctx)));
}

/* Upload and download complete before they return: the host buffer is the
 * caller's again. */
static void cu_mem_upload(void *ctx, void *dst, const void *src, size_t bytes)
{
    CU_CHECK(ctx, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, cu_stream(ctx)));
    CU_CHECK(ctx, cudaStreamSynchronize(cu_stream(ctx)));
}

static void cu_mem_download(void *ctx, void *dst, const void *src, size_t bytes)
{
    CU_CHECK(ctx, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, cu_stream(ctx)));
    CU_CHECK(ctx, cudaStreamSynchronize(cu_stream(ctx)));
}

/* In member order: supports (NULL: every op), sync, close, the ops of
 * ops.def, memory. */
static const struct hm_backend_ops g_cuda_ops = {
    NULL, cu_sync, cu_close,
#define HM_OP(name, fast, flops, params, args) cu_##name,
#define HM_OP_SIZE(name, fast, params, args) cu_##name,
#include "ops.def"
#undef HM_OP
#undef HM_OP_SIZE
    cu_mem_alloc, cu_mem_free, cu_mem_upload, cu_mem_download,
};

extern "C" const struct hm_backend_desc hm_backend_desc_cuda = {"cuda", &g_cuda_ops, cu_open};
