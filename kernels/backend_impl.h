/* backend_impl.h — private: what a backend implements (conventions 12).
 *
 * Only backend implementations (kernels/cpu/, kernels/checked/, a device
 * library) and the registry (dispatch.c) include this; callers see the
 * opaque struct hm_backend and the wrappers of backend.h. */
#ifndef HM_BACKEND_IMPL_H
#define HM_BACKEND_IMPL_H

#include "backend.h"

/* The vtable: one member per kernels/ops.def entry, plus the lifecycle and
 * memory. Op members are required; a backend may leave one NULL only when
 * its `supports` answers 0 for it (calling it is then an error naming it). */
struct hm_backend_ops {
    /* (optional) 1 if this backend runs op for the element count hint
     * numel (0 = unknown); NULL: every non-NULL member is supported. */
    int (*supports)(void *ctx, enum hm_op op, int64_t numel);
    /* (optional) report and clear the first failure since the last call. */
    enum hm_status (*sync)(void *ctx, struct hm_error *err);
    /* (optional) release ctx (hm_backend_close). */
    void (*close)(void *ctx);

#define HM_OP(name, fast, flops, params, args) void (*name)(void *ctx, HM_UNPAREN params);
#define HM_OP_SIZE(name, fast, params, args) size_t (*name)(void *ctx, HM_UNPAREN params);
#include "ops.def"
#undef HM_OP
#undef HM_OP_SIZE

    /* memory (optional as a group; NULL: host memory, malloc/free/memcpy) */
    void *(*mem_alloc)(void *ctx, size_t bytes);
    void (*mem_free)(void *ctx, void *p);
    void (*mem_upload)(void *ctx, void *dst, const void *src, size_t bytes);
    void (*mem_download)(void *ctx, void *dst, const void *src, size_t bytes);
};

/* What the registry knows of a backend: its name and how to open it.
 * open: *ctx = the new context (may stay NULL); HM_OK or an error. */
struct hm_backend_desc {
    const char *name;
    const struct hm_backend_ops *ops;
    enum hm_status (*open)(void **ctx, struct hm_error *err); /* (optional) */
};

/* The CPU backends' descriptors (cpu/cpu_backend.c, checked/checked.c). */
extern const struct hm_backend_desc hm_backend_desc_ref;
extern const struct hm_backend_desc hm_backend_desc_fast;
extern const struct hm_backend_desc hm_backend_desc_checked;
/* The CUDA backend (kernels/cuda/) is lib/libhm_cuda.so, built where nvcc
 * is: its descriptor `hm_backend_desc_cuda` is loaded by name (dispatch.c). */

/* Adds a backend library's descriptor (a device backend calls it before
 * the first hm_backend_open; at most 8). desc: borrowed for the program. */
void hm_backend_register(const struct hm_backend_desc *desc);

#endif
