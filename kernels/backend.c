/* backend.c — backend registry and the dispatching wrappers. */
#include "backend.h"

#include <math.h>
#include <string.h>

#include "cpu/cpu_backward.h"
#include "cpu/cpu_ops.h"

static const struct hm_backend g_ref = {
    .name = "ref",
    .ops = {
        .matmul_forward = hm_ref_matmul_forward,
        .layernorm_forward = hm_ref_layernorm_forward,
        .gelu_forward = hm_ref_gelu_forward,
        .rotary_forward = hm_ref_rotary_forward,
        .attention_ws_size = hm_ref_attention_ws_size,
        .attention_forward = hm_ref_attention_forward,
        .add_forward = hm_ref_add_forward,
        .embedding_forward = hm_ref_embedding_forward,
        .nll_forward = hm_ref_nll_forward,
        .matmul_backward = hm_ref_matmul_backward,
        .layernorm_backward = hm_ref_layernorm_backward,
        .gelu_backward = hm_ref_gelu_backward,
        .rotary_backward = hm_ref_rotary_backward,
        .attention_backward_ws_size = hm_ref_attention_backward_ws_size,
        .attention_backward = hm_ref_attention_backward,
        .embedding_backward = hm_ref_embedding_backward,
        .cross_entropy_backward = hm_ref_cross_entropy_backward,
    },
};

static const struct hm_backend g_fast = {
    .name = "fast",
    .ops = {
        .matmul_forward = hm_fast_matmul_forward,
        .layernorm_forward = hm_fast_layernorm_forward,
        .gelu_forward = hm_fast_gelu_forward,
        .rotary_forward = hm_fast_rotary_forward,
        .attention_ws_size = hm_fast_attention_ws_size,
        .attention_forward = hm_fast_attention_forward,
        .add_forward = hm_fast_add_forward,
        .embedding_forward = hm_fast_embedding_forward,
        .nll_forward = hm_fast_nll_forward,
        .matmul_backward = hm_fast_matmul_backward,
        .layernorm_backward = hm_fast_layernorm_backward,
        .gelu_backward = hm_fast_gelu_backward,
        .attention_backward_ws_size = hm_fast_attention_backward_ws_size,
        .attention_backward = hm_fast_attention_backward,
        .cross_entropy_backward = hm_fast_cross_entropy_backward,
    },
};

const struct hm_backend *hm_backend_get(const char *name)
{
    if (!name)
        return NULL;
    if (strcmp(name, "ref") == 0)
        return &g_ref;
    if (strcmp(name, "fast") == 0 || strcmp(name, "cpu") == 0)
        return &g_fast;
    return NULL;
}

const char *hm_backend_names(void) { return "ref|fast|cpu"; }

int hm_backend_supports(const struct hm_backend *be, enum hm_op op, int64_t numel)
{
    if ((int)op < 0 || op >= HM_OP_COUNT)
        return 0;
    return be->ops.supports ? be->ops.supports(op, numel) : 1;
}

enum hm_status hm_backend_sync(const struct hm_backend *be, struct hm_error *err)
{
    return be->ops.sync ? be->ops.sync(err) : HM_OK;
}

void hm_rotary_inv_freq(float *inv_freq, int64_t r, double base)
{
    for (int64_t j = 0; j < r / 2; j++) {
        float e = (float)(2 * j) / (float)r;        /* torch: arange(0, r, 2).float() / r */
        float pw = (float)pow(base, (double)e);     /* base ** e, fp32 result */
        inv_freq[j] = 1.0f / pw;                    /* 1.0 / (...) in fp32 */
    }
}

/* Wrappers: the backend's member, or ref when it is NULL. */
#define HM_PICK(be, member) ((be)->ops.member ? (be)->ops.member : g_ref.ops.member)

void hm_backend_matmul_forward(const struct hm_backend *be, float *y, const float *x,
                               const float *w, const float *b, int64_t T, int64_t in,
                               int64_t out)
{
    HM_PICK(be, matmul_forward)(y, x, w, b, T, in, out);
}

void hm_backend_layernorm_forward(const struct hm_backend *be, float *y, float *mean,
                                  float *rstd, const float *x, const float *w, const float *b,
                                  int64_t T, int64_t d, float eps)
{
    HM_PICK(be, layernorm_forward)(y, mean, rstd, x, w, b, T, d, eps);
}

void hm_backend_gelu_forward(const struct hm_backend *be, float *y, const float *x, int64_t n,
                             enum hm_gelu_kind kind)
{
    HM_PICK(be, gelu_forward)(y, x, n, kind);
}

void hm_backend_rotary_forward(const struct hm_backend *be, float *x, int64_t T, int64_t n_h,
                               int64_t r, int64_t row_stride, int64_t head_stride,
                               int64_t pos0, const float *inv_freq)
{
    HM_PICK(be, rotary_forward)(x, T, n_h, r, row_stride, head_stride, pos0, inv_freq);
}

size_t hm_backend_attention_ws_size(const struct hm_backend *be, int64_t T, int64_t n_h,
                                    int64_t p)
{
    /* the workspace size and the kernel must come from the same backend */
    if (be->ops.attention_forward)
        return be->ops.attention_ws_size ? be->ops.attention_ws_size(T, n_h, p) : 0;
    return g_ref.ops.attention_ws_size(T, n_h, p);
}

void hm_backend_attention_forward(const struct hm_backend *be, float *out, float *lse,
                                  const float *qkv, int64_t T, int64_t n_h, int64_t p,
                                  void *ws, size_t ws_size)
{
    HM_PICK(be, attention_forward)(out, lse, qkv, T, n_h, p, ws, ws_size);
}

void hm_backend_add_forward(const struct hm_backend *be, float *y, const float *a,
                            const float *b, int64_t n)
{
    HM_PICK(be, add_forward)(y, a, b, n);
}

void hm_backend_embedding_forward(const struct hm_backend *be, float *y, const int32_t *ids,
                                  const float *table, int64_t T, int64_t d)
{
    HM_PICK(be, embedding_forward)(y, ids, table, T, d);
}

void hm_backend_nll_forward(const struct hm_backend *be, float *nll, float *lse,
                            const float *logits, const int32_t *targets, int64_t T, int64_t V)
{
    HM_PICK(be, nll_forward)(nll, lse, logits, targets, T, V);
}

/* ---- backward wrappers ---------------------------------------------------- */

void hm_backend_matmul_backward(const struct hm_backend *be, float *dx, float *dw, float *db,
                                const float *dy, const float *x, const float *w, int64_t T,
                                int64_t in, int64_t out)
{
    HM_PICK(be, matmul_backward)(dx, dw, db, dy, x, w, T, in, out);
}

void hm_backend_layernorm_backward(const struct hm_backend *be, float *dx, float *dw, float *db,
                                   const float *dy, const float *x, const float *mean,
                                   const float *rstd, const float *w, int64_t T, int64_t d)
{
    HM_PICK(be, layernorm_backward)(dx, dw, db, dy, x, mean, rstd, w, T, d);
}

void hm_backend_gelu_backward(const struct hm_backend *be, float *dx, const float *dy,
                              const float *x, int64_t n, enum hm_gelu_kind kind)
{
    HM_PICK(be, gelu_backward)(dx, dy, x, n, kind);
}

void hm_backend_rotary_backward(const struct hm_backend *be, float *dx, int64_t T, int64_t n_h,
                                int64_t r, int64_t row_stride, int64_t head_stride,
                                int64_t pos0, const float *inv_freq)
{
    HM_PICK(be, rotary_backward)(dx, T, n_h, r, row_stride, head_stride, pos0, inv_freq);
}

size_t hm_backend_attention_backward_ws_size(const struct hm_backend *be, int64_t T,
                                             int64_t n_h, int64_t p)
{
    /* the workspace must match the member that will run */
    if (be->ops.attention_backward)
        return be->ops.attention_backward_ws_size(T, n_h, p);
    return g_ref.ops.attention_backward_ws_size(T, n_h, p);
}

void hm_backend_attention_backward(const struct hm_backend *be, float *dqkv, const float *dout,
                                   const float *qkv, const float *out, const float *lse,
                                   int64_t T, int64_t n_h, int64_t p, void *ws, size_t ws_size)
{
    HM_PICK(be, attention_backward)(dqkv, dout, qkv, out, lse, T, n_h, p, ws, ws_size);
}

void hm_backend_embedding_backward(const struct hm_backend *be, float *dtable, const float *dy,
                                   const int32_t *ids, int64_t T, int64_t d)
{
    HM_PICK(be, embedding_backward)(dtable, dy, ids, T, d);
}

double hm_backend_cross_entropy_backward(const struct hm_backend *be, float *dlogits,
                                         const float *logits, const int32_t *targets,
                                         int64_t T, int64_t V, float scale)
{
    return HM_PICK(be, cross_entropy_backward)(dlogits, logits, targets, T, V, scale);
}
