/* backend.c — backend registry and the dispatching wrappers. */
#include "backend.h"

#include <math.h>
#include <string.h>

#include "cpu/cpu_backward.h"
#include "cpu/cpu_family.h"
#include "cpu/cpu_linattn.h"
#include "cpu/cpu_ops.h"
#include "cpu/cpu_ssm.h"
#include "cpu/cpu_train.h"
#include "op_profile.h"

#include <stdlib.h>

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
        .featuremap_forward = hm_ref_featuremap_forward,
        .featuremap_backward = hm_ref_featuremap_backward,
        .linattn_ws_size = hm_ref_linattn_ws_size,
        .linattn_forward = hm_ref_linattn_forward,
        .linattn_backward_ws_size = hm_ref_linattn_backward_ws_size,
        .linattn_backward = hm_ref_linattn_backward,
        .cosine_loss = hm_ref_cosine_loss,
        .conv1d_forward = hm_ref_conv1d_forward,
        .conv1d_backward = hm_ref_conv1d_backward,
        .conv1d_step = hm_ref_conv1d_step,
        .softplus_forward = hm_ref_softplus_forward,
        .softplus_backward = hm_ref_softplus_backward,
        .silu_gate_forward = hm_ref_silu_gate_forward,
        .silu_gate_backward = hm_ref_silu_gate_backward,
        .ssm_ws_size = hm_ref_ssm_ws_size,
        .ssm_forward = hm_ref_ssm_forward,
        .ssm_backward_ws_size = hm_ref_ssm_backward_ws_size,
        .ssm_backward = hm_ref_ssm_backward,
        .ssm_step = hm_ref_ssm_step,
        .ssm_chunk_carry = hm_ref_ssm_chunk_carry,
        .rmsnorm_forward = hm_ref_rmsnorm_forward,
        .rmsnorm_backward = hm_ref_rmsnorm_backward,
        .qkv_expand_forward = hm_ref_qkv_expand_forward,
        .qkv_expand_backward = hm_ref_qkv_expand_backward,
        .attention_cached = hm_ref_attention_cached,
        .adamw_step = hm_ref_adamw_step,
        .sgd_step = hm_ref_sgd_step,
        .sqnorm = hm_ref_sqnorm,
        .first_nonfinite = hm_ref_first_nonfinite,
        .kl_backward = hm_ref_kl_backward,
        .fill = hm_ref_fill,
        .copy2d = hm_ref_copy2d,
        .clamp = hm_ref_clamp,
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
        .rotary_backward = hm_fast_rotary_backward,
        .attention_backward_ws_size = hm_fast_attention_backward_ws_size,
        .attention_backward = hm_fast_attention_backward,
        .cross_entropy_backward = hm_fast_cross_entropy_backward,
        .featuremap_forward = hm_fast_featuremap_forward,
        .featuremap_backward = hm_fast_featuremap_backward,
        .linattn_ws_size = hm_fast_linattn_ws_size,
        .linattn_forward = hm_fast_linattn_forward,
        .linattn_backward_ws_size = hm_fast_linattn_backward_ws_size,
        .linattn_backward = hm_fast_linattn_backward,
        .cosine_loss = hm_fast_cosine_loss,
        .conv1d_forward = hm_fast_conv1d_forward,
        .conv1d_backward = hm_fast_conv1d_backward,
        .softplus_forward = hm_fast_softplus_forward,
        .softplus_backward = hm_fast_softplus_backward,
        .silu_gate_forward = hm_fast_silu_gate_forward,
        .silu_gate_backward = hm_fast_silu_gate_backward,
        .ssm_ws_size = hm_fast_ssm_ws_size,
        .ssm_forward = hm_fast_ssm_forward,
        .ssm_backward_ws_size = hm_fast_ssm_backward_ws_size,
        .ssm_backward = hm_fast_ssm_backward,
        .rmsnorm_forward = hm_fast_rmsnorm_forward,
        .rmsnorm_backward = hm_fast_rmsnorm_backward,
        .qkv_expand_forward = hm_fast_qkv_expand_forward,
        .qkv_expand_backward = hm_fast_qkv_expand_backward,
        .attention_cached = hm_fast_attention_cached,
        .adamw_step = hm_fast_adamw_step,
        .sgd_step = hm_fast_sgd_step,
        .sqnorm = hm_fast_sqnorm,
        .kl_backward = hm_fast_kl_backward,
        .fill = hm_fast_fill,
        /* conv1d_step, ssm_step, copy2d, clamp, first_nonfinite:
         * ref (O(state) per token, or tiny) */
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
    return be->ops.supports ? be->ops.supports(be->ctx, op, numel) : 1;
}

enum hm_status hm_backend_sync(const struct hm_backend *be, struct hm_error *err)
{
    return be->ops.sync ? be->ops.sync(be->ctx, err) : HM_OK;
}

void hm_rotary_inv_freq(float *inv_freq, int64_t r, double base)
{
    for (int64_t j = 0; j < r / 2; j++) {
        float e = (float)(2 * j) / (float)r;        /* torch: arange(0, r, 2).float() / r */
        float pw = (float)pow(base, (double)e);     /* base ** e, fp32 result */
        inv_freq[j] = 1.0f / pw;                    /* 1.0 / (...) in fp32 */
    }
}

/* Wrappers: the backend's member, or ref when it is NULL, timed while
 * op profiling is on (op_profile.h). HM_CALL for void members, HM_CALL_RET
 * stores a member's result in `var`, HM_CALL_FLOPS counts the call's FLOPs. */
#define HM_DISPATCH(be, member, ...)                                                     \
    ((be)->ops.member ? (be)->ops.member((be)->ctx, __VA_ARGS__)                            \
                      : g_ref.ops.member(g_ref.ctx, __VA_ARGS__))
#define HM_CALL_FLOPS(flops, be, member, ...)                                            \
    do {                                                                                  \
        struct hm_op_timer hm_t_;                                                         \
        hm_op_timer_begin(&hm_t_, #member);                                               \
        HM_DISPATCH(be, member, __VA_ARGS__);                                             \
        hm_op_timer_end(&hm_t_, (flops));                                                 \
    } while (0)
#define HM_CALL(be, member, ...) HM_CALL_FLOPS(0, be, member, __VA_ARGS__)
#define HM_CALL_RET(var, be, member, ...)                                                \
    do {                                                                                  \
        struct hm_op_timer hm_t_;                                                         \
        hm_op_timer_begin(&hm_t_, #member);                                               \
        (var) = HM_DISPATCH(be, member, __VA_ARGS__);                                     \
        hm_op_timer_end(&hm_t_, 0);                                                       \
    } while (0)

void hm_backend_matmul_forward(const struct hm_backend *be, float *y, const float *x,
                               const float *w, const float *b, int64_t T, int64_t in,
                               int64_t out)
{
    HM_CALL_FLOPS(2.0 * (double)T * (double)in * (double)out, be, matmul_forward, y, x, w, b, T,
                  in, out);
}

void hm_backend_layernorm_forward(const struct hm_backend *be, float *y, float *mean,
                                  float *rstd, const float *x, const float *w, const float *b,
                                  int64_t T, int64_t d, float eps)
{
    HM_CALL(be, layernorm_forward, y, mean, rstd, x, w, b, T, d, eps);
}

void hm_backend_gelu_forward(const struct hm_backend *be, float *y, const float *x, int64_t n,
                             enum hm_gelu_kind kind)
{
    HM_CALL(be, gelu_forward, y, x, n, kind);
}

void hm_backend_rotary_forward(const struct hm_backend *be, float *x, int64_t T, int64_t n_h,
                               int64_t r, int64_t row_stride, int64_t head_stride,
                               int64_t pos0, const float *inv_freq)
{
    HM_CALL(be, rotary_forward, x, T, n_h, r, row_stride, head_stride, pos0, inv_freq);
}

size_t hm_backend_attention_ws_size(const struct hm_backend *be, int64_t T, int64_t n_h,
                                    int64_t p)
{
    /* the workspace size and the kernel must come from the same backend */
    if (be->ops.attention_forward)
        return be->ops.attention_ws_size ? be->ops.attention_ws_size(be->ctx, T, n_h, p) : 0;
    return g_ref.ops.attention_ws_size(g_ref.ctx, T, n_h, p);
}

void hm_backend_attention_forward(const struct hm_backend *be, float *out, float *lse,
                                  const float *qkv, int64_t T, int64_t n_h, int64_t p,
                                  void *ws, size_t ws_size)
{
    HM_CALL(be, attention_forward, out, lse, qkv, T, n_h, p, ws, ws_size);
}

void hm_backend_add_forward(const struct hm_backend *be, float *y, const float *a,
                            const float *b, int64_t n)
{
    HM_CALL(be, add_forward, y, a, b, n);
}

void hm_backend_embedding_forward(const struct hm_backend *be, float *y, const int32_t *ids,
                                  const float *table, int64_t T, int64_t d)
{
    HM_CALL(be, embedding_forward, y, ids, table, T, d);
}

void hm_backend_nll_forward(const struct hm_backend *be, float *nll, float *lse,
                            const float *logits, const int32_t *targets, int64_t T, int64_t V)
{
    HM_CALL(be, nll_forward, nll, lse, logits, targets, T, V);
}

/* ---- backward wrappers ---------------------------------------------------- */

void hm_backend_matmul_backward(const struct hm_backend *be, float *dx, float *dw, float *db,
                                const float *dy, const float *x, const float *w, int64_t T,
                                int64_t in, int64_t out)
{
    HM_CALL_FLOPS(2.0 * (double)T * (double)in * (double)out * ((dx != NULL) + (dw != NULL)), be,
                  matmul_backward, dx, dw, db, dy, x, w, T, in, out);
}

void hm_backend_layernorm_backward(const struct hm_backend *be, float *dx, float *dw, float *db,
                                   const float *dy, const float *x, const float *mean,
                                   const float *rstd, const float *w, int64_t T, int64_t d)
{
    HM_CALL(be, layernorm_backward, dx, dw, db, dy, x, mean, rstd, w, T, d);
}

void hm_backend_gelu_backward(const struct hm_backend *be, float *dx, const float *dy,
                              const float *x, int64_t n, enum hm_gelu_kind kind)
{
    HM_CALL(be, gelu_backward, dx, dy, x, n, kind);
}

void hm_backend_rotary_backward(const struct hm_backend *be, float *dx, int64_t T, int64_t n_h,
                                int64_t r, int64_t row_stride, int64_t head_stride,
                                int64_t pos0, const float *inv_freq)
{
    HM_CALL(be, rotary_backward, dx, T, n_h, r, row_stride, head_stride, pos0, inv_freq);
}

size_t hm_backend_attention_backward_ws_size(const struct hm_backend *be, int64_t T,
                                             int64_t n_h, int64_t p)
{
    /* the workspace must match the member that will run */
    if (be->ops.attention_backward)
        return be->ops.attention_backward_ws_size(be->ctx, T, n_h, p);
    return g_ref.ops.attention_backward_ws_size(g_ref.ctx, T, n_h, p);
}

void hm_backend_attention_backward(const struct hm_backend *be, float *dqkv, const float *dout,
                                   const float *qkv, const float *out, const float *lse,
                                   int64_t T, int64_t n_h, int64_t p, void *ws, size_t ws_size)
{
    HM_CALL(be, attention_backward, dqkv, dout, qkv, out, lse, T, n_h, p, ws, ws_size);
}

void hm_backend_embedding_backward(const struct hm_backend *be, float *dtable, const float *dy,
                                   const int32_t *ids, int64_t T, int64_t d)
{
    HM_CALL(be, embedding_backward, dtable, dy, ids, T, d);
}

double hm_backend_cross_entropy_backward(const struct hm_backend *be, float *dlogits,
                                         const float *logits, const int32_t *targets,
                                         int64_t T, int64_t V, float scale)
{
    double r;
    HM_CALL_RET(r, be, cross_entropy_backward, dlogits, logits, targets, T, V, scale);
    return r;
}

/* ---- Hedgehog linear attention wrappers (SPEC §2) ------------------------- */

void hm_backend_featuremap_forward(const struct hm_backend *be, float *phi, const float *x,
                                   const float *W, const float *b, int64_t T, int64_t n_h,
                                   int64_t p, int64_t F, int64_t row_stride,
                                   int64_t head_stride)
{
    HM_CALL(be, featuremap_forward, phi, x, W, b, T, n_h, p, F, row_stride, head_stride);
}

void hm_backend_featuremap_backward(const struct hm_backend *be, float *dx, float *dW,
                                    float *db, const float *dphi, const float *x,
                                    const float *phi, const float *W, int64_t T, int64_t n_h,
                                    int64_t p, int64_t F, int64_t row_stride,
                                    int64_t head_stride)
{
    HM_CALL(be, featuremap_backward, dx, dW, db, dphi, x, phi, W, T, n_h, p, F, row_stride,
                                     head_stride);
}

size_t hm_backend_linattn_ws_size(const struct hm_backend *be, int64_t T, int64_t n_h,
                                  int64_t F2, int64_t p, int64_t chunk)
{
    /* the workspace must match the member that will run */
    if (be->ops.linattn_forward)
        return be->ops.linattn_ws_size ? be->ops.linattn_ws_size(be->ctx, T, n_h, F2, p, chunk) : 0;
    return g_ref.ops.linattn_ws_size(g_ref.ctx, T, n_h, F2, p, chunk);
}

size_t hm_backend_linattn_backward_ws_size(const struct hm_backend *be, int64_t T, int64_t n_h,
                                           int64_t F2, int64_t p, int64_t chunk)
{
    if (be->ops.linattn_backward)
        return be->ops.linattn_backward_ws_size
                   ? be->ops.linattn_backward_ws_size(be->ctx, T, n_h, F2, p, chunk)
                   : 0;
    return g_ref.ops.linattn_backward_ws_size(g_ref.ctx, T, n_h, F2, p, chunk);
}

void hm_backend_linattn_forward(const struct hm_backend *be, float *y, float *den,
                                const float *phiq, const float *phik, const float *v,
                                int64_t T, int64_t n_h, int64_t F2, int64_t p,
                                int64_t v_row_stride, int64_t v_head_stride, float eps,
                                int64_t chunk, float *saved, void *ws, size_t ws_size)
{
    HM_CALL(be, linattn_forward, y, den, phiq, phik, v, T, n_h, F2, p, v_row_stride,
                                 v_head_stride, eps, chunk, saved, ws, ws_size);
}

void hm_backend_linattn_backward(const struct hm_backend *be, float *dphiq, float *dphik,
                                 float *dv, const float *dy, const float *y, const float *den,
                                 const float *phiq, const float *phik, const float *v,
                                 int64_t T, int64_t n_h, int64_t F2, int64_t p,
                                 int64_t v_row_stride, int64_t v_head_stride, int64_t chunk,
                                 const float *saved, void *ws, size_t ws_size)
{
    HM_CALL(be, linattn_backward, dphiq, dphik, dv, dy, y, den, phiq, phik, v, T, n_h, F2, p,
                                  v_row_stride, v_head_stride, chunk, saved, ws, ws_size);
}

double hm_backend_cosine_loss(const struct hm_backend *be, float *da, const float *a,
                              const float *b, int64_t N, int64_t d, float scale)
{
    double r;
    HM_CALL_RET(r, be, cosine_loss, da, a, b, N, d, scale);
    return r;
}

/* ---- HedgeMamba mixer wrappers (SPEC §3) ---------------------------------- */

void hm_backend_conv1d_forward(const struct hm_backend *be, float *c, const float *x,
                               const float *w, const float *bias, int64_t T, int64_t C,
                               int64_t K)
{
    HM_CALL(be, conv1d_forward, c, x, w, bias, T, C, K);
}

void hm_backend_conv1d_backward(const struct hm_backend *be, float *dx, float *dw,
                                float *dbias, const float *dc, const float *x, const float *w,
                                int64_t T, int64_t C, int64_t K)
{
    HM_CALL(be, conv1d_backward, dx, dw, dbias, dc, x, w, T, C, K);
}

void hm_backend_conv1d_step(const struct hm_backend *be, float *c_t, const float *x_t,
                            float *window, const float *w, const float *bias, int64_t C,
                            int64_t K)
{
    HM_CALL(be, conv1d_step, c_t, x_t, window, w, bias, C, K);
}

void hm_backend_softplus_forward(const struct hm_backend *be, float *y, const float *z,
                                 int64_t n)
{
    HM_CALL(be, softplus_forward, y, z, n);
}

void hm_backend_softplus_backward(const struct hm_backend *be, float *dz, const float *dy,
                                  const float *z, int64_t n)
{
    HM_CALL(be, softplus_backward, dz, dy, z, n);
}

void hm_backend_silu_gate_forward(const struct hm_backend *be, float *out, const float *y,
                                  const float *z, int64_t n)
{
    HM_CALL(be, silu_gate_forward, out, y, z, n);
}

void hm_backend_silu_gate_backward(const struct hm_backend *be, float *dy, float *dz,
                                   const float *dout, const float *y, const float *z, int64_t n)
{
    HM_CALL(be, silu_gate_backward, dy, dz, dout, y, z, n);
}

size_t hm_backend_ssm_ws_size(const struct hm_backend *be, int64_t T, int64_t n_h, int64_t F2,
                              int64_t p, int64_t chunk)
{
    /* the workspace must match the member that will run */
    if (be->ops.ssm_forward)
        return be->ops.ssm_ws_size ? be->ops.ssm_ws_size(be->ctx, T, n_h, F2, p, chunk) : 0;
    return g_ref.ops.ssm_ws_size(g_ref.ctx, T, n_h, F2, p, chunk);
}

size_t hm_backend_ssm_backward_ws_size(const struct hm_backend *be, int64_t T, int64_t n_h,
                                       int64_t F2, int64_t p, int64_t chunk)
{
    if (be->ops.ssm_backward)
        return be->ops.ssm_backward_ws_size
                   ? be->ops.ssm_backward_ws_size(be->ctx, T, n_h, F2, p, chunk)
                   : 0;
    return g_ref.ops.ssm_backward_ws_size(g_ref.ctx, T, n_h, F2, p, chunk);
}

void hm_backend_ssm_forward(const struct hm_backend *be, float *y, float *den, const float *C,
                            const float *B, const float *v, const float *dt, const float *A,
                            const float *D, int64_t T, int64_t n_h, int64_t F2, int64_t p,
                            int64_t v_row_stride, int64_t v_head_stride, float eps,
                            int64_t chunk, void *ws, size_t ws_size)
{
    HM_CALL(be, ssm_forward, y, den, C, B, v, dt, A, D, T, n_h, F2, p, v_row_stride,
                             v_head_stride, eps, chunk, ws, ws_size);
}

void hm_backend_ssm_backward(const struct hm_backend *be, float *dC, float *dB, float *dv,
                             float *ddt, float *dA, float *dD, const float *dy, const float *y,
                             const float *den, const float *C, const float *B, const float *v,
                             const float *dt, const float *A, const float *D, int64_t T,
                             int64_t n_h, int64_t F2, int64_t p, int64_t v_row_stride,
                             int64_t v_head_stride, int64_t chunk, void *ws, size_t ws_size)
{
    HM_CALL(be, ssm_backward, dC, dB, dv, ddt, dA, dD, dy, y, den, C, B, v, dt, A, D, T, n_h, F2,
                              p, v_row_stride, v_head_stride, chunk, ws, ws_size);
}

void hm_backend_ssm_step(const struct hm_backend *be, float *y_t, float *S, const float *C_t,
                         const float *B_t, const float *v_t, const float *dt_t, const float *A,
                         const float *D, int64_t n_h, int64_t F2, int64_t p, float eps)
{
    HM_CALL(be, ssm_step, y_t, S, C_t, B_t, v_t, dt_t, A, D, n_h, F2, p, eps);
}

void hm_backend_rmsnorm_forward(const struct hm_backend *be, float *y, float *rstd,
                                const float *x, const float *w, int64_t T, int64_t d, float eps)
{
    HM_CALL(be, rmsnorm_forward, y, rstd, x, w, T, d, eps);
}

void hm_backend_rmsnorm_backward(const struct hm_backend *be, float *dx, float *dw,
                                 const float *dy, const float *x, const float *rstd,
                                 const float *w, int64_t T, int64_t d)
{
    HM_CALL(be, rmsnorm_backward, dx, dw, dy, x, rstd, w, T, d);
}

void hm_backend_qkv_expand_forward(const struct hm_backend *be, float *y, const float *x,
                                   int64_t T, int64_t n_h, int64_t n_kv, int64_t p)
{
    HM_CALL(be, qkv_expand_forward, y, x, T, n_h, n_kv, p);
}

void hm_backend_qkv_expand_backward(const struct hm_backend *be, float *dx, const float *dy,
                                    int64_t T, int64_t n_h, int64_t n_kv, int64_t p)
{
    HM_CALL(be, qkv_expand_backward, dx, dy, T, n_h, n_kv, p);
}

int64_t hm_backend_attention_cached_scratch_floats(int64_t T, int64_t n, int64_t n_h)
{
    return n * (T > n_h ? T : n_h);
}

void hm_backend_attention_cached(const struct hm_backend *be, float *out, const float *q,
                                 int64_t q_row_stride, int64_t q_head_stride, const float *kc,
                                 const float *vc, int64_t P0, int64_t T, int64_t n_h,
                                 int64_t n_kv, int64_t p, float *scratch)
{
    HM_CALL(be, attention_cached, out, q, q_row_stride, q_head_stride, kc, vc, P0, T, n_h, n_kv,
            p, scratch);
}

void hm_backend_adamw_step(const struct hm_backend *be, float *w, const float *g, float *m, float *v,
                           int64_t n, const struct hm_adamw_args *a)
{
    HM_CALL(be, adamw_step, w, g, m, v, n, a);
}

void hm_backend_sgd_step(const struct hm_backend *be, float *w, const float *g, int64_t n,
                         float lr)
{
    HM_CALL(be, sgd_step, w, g, n, lr);
}

double hm_backend_sqnorm(const struct hm_backend *be, const float *x, int64_t n)
{
    double r;
    HM_CALL_RET(r, be, sqnorm, x, n);
    return r;
}

int64_t hm_backend_first_nonfinite(const struct hm_backend *be, const float *x, int64_t n)
{
    int64_t r;
    HM_CALL_RET(r, be, first_nonfinite, x, n);
    return r;
}

double hm_backend_kl_backward(const struct hm_backend *be, float *dlogits, const float *logits,
                              const float *tlogits, int64_t T, int64_t V, double w,
                              double scale)
{
    double r;
    HM_CALL_RET(r, be, kl_backward, dlogits, logits, tlogits, T, V, w, scale);
    return r;
}

void hm_backend_fill(const struct hm_backend *be, float *x, int64_t n, float value)
{
    HM_CALL(be, fill, x, n, value);
}

void hm_backend_copy2d(const struct hm_backend *be, float *dst, int64_t dst_stride,
                       const float *src, int64_t src_stride, int64_t rows, int64_t cols)
{
    HM_CALL(be, copy2d, dst, dst_stride, src, src_stride, rows, cols);
}

void hm_backend_clamp(const struct hm_backend *be, float *x, int64_t n, float lo, float hi)
{
    HM_CALL(be, clamp, x, n, lo, hi);
}

void *hm_backend_alloc(const struct hm_backend *be, size_t bytes)
{
    if (be->ops.mem_alloc)
        return be->ops.mem_alloc(be->ctx, bytes);
    return malloc(bytes ? bytes : 1);
}

void hm_backend_free(const struct hm_backend *be, void **p)
{
    if (!p || !*p)
        return;
    if (be->ops.mem_free)
        be->ops.mem_free(be->ctx, *p);
    else
        free(*p);
    *p = NULL;
}

void hm_backend_upload(const struct hm_backend *be, void *dst, const void *src, size_t bytes)
{
    if (be->ops.mem_upload)
        be->ops.mem_upload(be->ctx, dst, src, bytes);
    else
        memcpy(dst, src, bytes);
}

void hm_backend_download(const struct hm_backend *be, void *dst, const void *src, size_t bytes)
{
    if (be->ops.mem_download)
        be->ops.mem_download(be->ctx, dst, src, bytes);
    else
        memcpy(dst, src, bytes);
}

void hm_backend_ssm_chunk_carry(const struct hm_backend *be, float *y, float *den,
                                const float *C, const float *B, const float *v, const float *dt,
                                const float *A, const float *D, float *S, int64_t T,
                                int64_t n_h, int64_t F2, int64_t p, int64_t v_row_stride,
                                int64_t v_head_stride)
{
    HM_CALL(be, ssm_chunk_carry, y, den, C, B, v, dt, A, D, S, T, n_h, F2, p, v_row_stride,
            v_head_stride);
}
