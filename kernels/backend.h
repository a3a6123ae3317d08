/* backend.h — the op interface every model in hm runs on (STYLE 12, 13).
 *
 * A backend is a vtable of ops (struct hm_backend_ops) plus a name. Two CPU
 * backends are always built, selectable at run time:
 *   "ref"  plain single-threaded loops, written for clarity; the oracle every
 *          other backend is tested against (tests/test_kernels_cpu.c);
 *   "fast" OpenBLAS sgemm (when built with HM_HAVE_BLAS) + OpenMP loops.
 *          "cpu" is an alias of "fast".
 * Later backends (CUDA) add a vtable; callers never #ifdef.
 *
 * Calling convention:
 *   - Callers use the hm_backend_<op>_forward() wrappers below. A wrapper
 *     dispatches to the backend's member, or, when the member is NULL (every
 *     op member is optional), to the ref implementation. Backward ops will
 *     slot in beside each forward op as <op>_backward members and wrappers.
 *   - Every tensor is fp32, row-major, contiguous unless a stride says
 *     otherwise; shapes are given in the comment of each argument.
 *   - Ops never allocate: scratch memory is a caller-owned workspace whose
 *     size the matching *_ws_size() function reports; reuse it across calls
 *     (BENCH.md: a fresh mmap per large allocation halves throughput).
 *   - Ops cannot fail on the CPU (preconditions are the caller's duty and
 *     are documented per op). Asynchronous backends record their first
 *     failure and report it through hm_backend_sync().
 *   - Threads: the fast backend uses the OpenMP pool sized by hm_threads_set
 *     (kernels/threads.h); it never calls BLAS inside an OpenMP parallel
 *     region. Do not call ops from inside your own parallel region.
 *   - Outputs never alias inputs unless the op says so.
 */
#ifndef HM_BACKEND_H
#define HM_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "hm_error.h"

enum hm_op {
    HM_OP_MATMUL = 0,
    HM_OP_LAYERNORM,
    HM_OP_GELU,
    HM_OP_ROTARY,
    HM_OP_ATTENTION,
    HM_OP_ADD,
    HM_OP_EMBEDDING,
    HM_OP_NLL,
    HM_OP_COUNT
};

enum hm_gelu_kind {
    HM_GELU_ERF = 0, /* 0.5 x (1 + erf(x / sqrt 2)), HF "gelu" */
    HM_GELU_TANH,    /* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), HF "gelu_new" */
};

/* The vtable. Every op member is optional: NULL means "use ref". */
struct hm_backend_ops {
    /* (optional) 1 if this backend runs op with the given element count
     * hint (0 = unknown); a NULL member means "supports everything". */
    int (*supports)(enum hm_op op, int64_t numel);
    /* (optional) report and clear the first failure since the last call;
     * CPU backends never fail and leave this NULL. */
    enum hm_status (*sync)(struct hm_error *err);

    void (*matmul_forward)(float *y, const float *x, const float *w, const float *b,
                           int64_t T, int64_t in, int64_t out);
    void (*layernorm_forward)(float *y, float *mean, float *rstd, const float *x,
                              const float *w, const float *b, int64_t T, int64_t d,
                              float eps);
    void (*gelu_forward)(float *y, const float *x, int64_t n, enum hm_gelu_kind kind);
    void (*rotary_forward)(float *x, int64_t T, int64_t n_h, int64_t r, int64_t row_stride,
                           int64_t head_stride, int64_t pos0, const float *inv_freq);
    size_t (*attention_ws_size)(int64_t T, int64_t n_h, int64_t p);
    void (*attention_forward)(float *out, float *lse, const float *qkv, int64_t T,
                              int64_t n_h, int64_t p, void *ws, size_t ws_size);
    void (*add_forward)(float *y, const float *a, const float *b, int64_t n);
    void (*embedding_forward)(float *y, const int32_t *ids, const float *table, int64_t T,
                              int64_t d);
    void (*nll_forward)(float *nll, float *lse, const float *logits, const int32_t *targets,
                        int64_t T, int64_t V);

    /* backward ops (kernels/backend.h, second part) */
    void (*matmul_backward)(float *dx, float *dw, float *db, const float *dy, const float *x,
                            const float *w, int64_t T, int64_t in, int64_t out);
    void (*layernorm_backward)(float *dx, float *dw, float *db, const float *dy, const float *x,
                               const float *mean, const float *rstd, const float *w, int64_t T,
                               int64_t d);
    void (*gelu_backward)(float *dx, const float *dy, const float *x, int64_t n,
                          enum hm_gelu_kind kind);
    void (*rotary_backward)(float *dx, int64_t T, int64_t n_h, int64_t r, int64_t row_stride,
                            int64_t head_stride, int64_t pos0, const float *inv_freq);
    size_t (*attention_backward_ws_size)(int64_t T, int64_t n_h, int64_t p);
    void (*attention_backward)(float *dqkv, const float *dout, const float *qkv,
                               const float *out, const float *lse, int64_t T, int64_t n_h,
                               int64_t p, void *ws, size_t ws_size);
    void (*embedding_backward)(float *dtable, const float *dy, const int32_t *ids, int64_t T,
                               int64_t d);
    double (*cross_entropy_backward)(float *dlogits, const float *logits,
                                     const int32_t *targets, int64_t T, int64_t V, float scale);
};

struct hm_backend {
    const char *name;            /* "ref", "fast", later "cuda" */
    struct hm_backend_ops ops;
};

/* Borrowed: a static backend ("ref", "fast" or its alias "cpu"), valid for
 * the whole program; NULL for an unknown name. */
const struct hm_backend *hm_backend_get(const char *name);

/* "ref|fast|cpu" for usage texts. */
const char *hm_backend_names(void);

/* 1 if be runs op (see supports above). */
int hm_backend_supports(const struct hm_backend *be, enum hm_op op, int64_t numel);

/* HM_OK, or the first failure of an asynchronous backend (fills err). */
enum hm_status hm_backend_sync(const struct hm_backend *be, struct hm_error *err);

/* ---- forward ops ----------------------------------------------------------
 * Each has a future hm_backend_<op>_backward() beside it. */

/* nn.Linear: y = x W^T + b.
 *   y: [T, out]  x: [T, in]  w: [out, in]  b: [out] or NULL (no bias) */
void hm_backend_matmul_forward(const struct hm_backend *be, float *y, const float *x,
                               const float *w, const float *b, int64_t T, int64_t in,
                               int64_t out);

/* LayerNorm over the last dim: y = (x - mean) / sqrt(var_biased + eps) * w + b.
 *   y: [T, d] (may alias x)  x: [T, d]  w, b: [d]
 *   mean, rstd: [T] or NULL — saved statistics for the backward pass */
void hm_backend_layernorm_forward(const struct hm_backend *be, float *y, float *mean,
                                  float *rstd, const float *x, const float *w, const float *b,
                                  int64_t T, int64_t d, float eps);

/* y: [n] (may alias x)  x: [n] */
void hm_backend_gelu_forward(const struct hm_backend *be, float *y, const float *x, int64_t n,
                             enum hm_gelu_kind kind);

/* NeoX rotary ("rotate_half"), in place, on the first r dims of every head:
 *   element (t, h, i) is x[t * row_stride + h * head_stride + i], i < r;
 *   for i < r/2, θ = (float)(pos0 + t) * inv_freq[i] (fp32 product),
 *   y[i] = x[i] cos θ − x[i + r/2] sin θ, y[i + r/2] = x[i + r/2] cos θ + x[i] sin θ
 *   with cos/sin of the fp32 θ rounded to fp32. Dims r.. are untouched.
 *   x: [T, row_stride] (heads n_h)  inv_freq: [r/2] from hm_rotary_inv_freq.
 * For the fused interleaved qkv of SPEC §1 ([T, 3d], head h at column h*3p):
 *   q: x = qkv,     row_stride = 3d, head_stride = 3p
 *   k: x = qkv + p, row_stride = 3d, head_stride = 3p                  */
void hm_backend_rotary_forward(const struct hm_backend *be, float *x, int64_t T, int64_t n_h,
                               int64_t r, int64_t row_stride, int64_t head_stride,
                               int64_t pos0, const float *inv_freq);

/* inv_freq[j] = 1 / base^(2j/r) for j < r/2, exactly as HF computes it in
 * fp32: e = (float)(2j) / (float)r, pw = base^e rounded to fp32,
 * inv_freq[j] = 1.0f / pw (fp32 division).   inv_freq: [r/2] */
void hm_rotary_inv_freq(float *inv_freq, int64_t r, double base);

/* Bytes of workspace attention_forward needs for these sizes (with the
 * current thread count; a smaller workspace only lowers the parallelism). */
size_t hm_backend_attention_ws_size(const struct hm_backend *be, int64_t T, int64_t n_h,
                                    int64_t p);

/* Causal softmax attention per head, softmax(q k^T / sqrt(p) + mask) v.
 *   out: [T, n_h * p] heads merged head-major (column h*p + i)
 *   lse: [n_h, T] or NULL — log-sum-exp of each scaled score row (backward)
 *   qkv: [T, 3 * n_h * p] fused interleaved: column h*3p + s*p + i
 *        (s = 0 q, 1 k, 2 v), rotary already applied
 *   ws: [ws_size] bytes, at least hm_backend_attention_ws_size(...) */
void hm_backend_attention_forward(const struct hm_backend *be, float *out, float *lse,
                                  const float *qkv, int64_t T, int64_t n_h, int64_t p,
                                  void *ws, size_t ws_size);

/* y = a + b.   y, a, b: [n]; y may alias a or b. */
void hm_backend_add_forward(const struct hm_backend *be, float *y, const float *a,
                            const float *b, int64_t n);

/* y[t] = table[ids[t]].   y: [T, d]  ids: [T], each 0 <= id < rows of table
 *   (the caller checks)  table: [V, d] */
void hm_backend_embedding_forward(const struct hm_backend *be, float *y, const int32_t *ids,
                                  const float *table, int64_t T, int64_t d);

/* Per-position cross-entropy: nll[t] = logsumexp(logits[t]) − logits[t, targets[t]]
 * (the negative log-softmax at the target), sums kept in double.
 *   nll: [T]  lse: [T] or NULL (log-sum-exp of each row, for backward)
 *   logits: [T, V]  targets: [T], 0 <= target < V (the caller checks) */
void hm_backend_nll_forward(const struct hm_backend *be, float *nll, float *lse,
                            const float *logits, const int32_t *targets, int64_t T, int64_t V);

/* ---- backward ops ----------------------------------------------------------
 * Conventions: gradients of PARAMETERS accumulate (+=), so the caller zeroes
 * them once per optimizer step and can sum micro-batches; gradients of
 * ACTIVATIONS are written (=). A NULL gradient pointer skips that output
 * (frozen weights cost no gradient work). Saved forward values are inputs. */

/* y = x W^T + b:  dx = dy W (written), dw += dy^T x, db += Σ_t dy.
 *   dx: [T, in] or NULL  dw: [out, in] or NULL  db: [out] or NULL
 *   dy: [T, out]  x: [T, in]  w: [out, in] */
void hm_backend_matmul_backward(const struct hm_backend *be, float *dx, float *dw, float *db,
                                const float *dy, const float *x, const float *w, int64_t T,
                                int64_t in, int64_t out);

/* LayerNorm: dx (written), dw += Σ dy·xhat, db += Σ dy.
 *   dx: [T, d] or NULL  dw, db: [d] or NULL  dy, x: [T, d]
 *   mean, rstd: [T] saved by the forward  w: [d] */
void hm_backend_layernorm_backward(const struct hm_backend *be, float *dx, float *dw, float *db,
                                   const float *dy, const float *x, const float *mean,
                                   const float *rstd, const float *w, int64_t T, int64_t d);

/* dx = dy · gelu'(x).   dx: [n] (may alias dy)  dy, x: [n] (x: the input) */
void hm_backend_gelu_backward(const struct hm_backend *be, float *dx, const float *dy,
                              const float *x, int64_t n, enum hm_gelu_kind kind);

/* In place on the gradient of the rotated dims: the transpose rotation
 * R(θ)^T, same angles and rounding as rotary_forward; same layout args. */
void hm_backend_rotary_backward(const struct hm_backend *be, float *dx, int64_t T, int64_t n_h,
                                int64_t r, int64_t row_stride, int64_t head_stride,
                                int64_t pos0, const float *inv_freq);

size_t hm_backend_attention_backward_ws_size(const struct hm_backend *be, int64_t T,
                                             int64_t n_h, int64_t p);

/* Causal softmax attention backward (written, all of q, k, v columns).
 *   dqkv: [T, 3 n_h p] fused interleaved like qkv (gradient w.r.t. the
 *         rotated q, k and v)  dout: [T, n_h p]  qkv: [T, 3 n_h p] as the
 *   forward saw it  out: [T, n_h p] the forward output  lse: [n_h, T]
 *   ws: [ws_size] bytes, ≥ hm_backend_attention_backward_ws_size(...) */
void hm_backend_attention_backward(const struct hm_backend *be, float *dqkv, const float *dout,
                                   const float *qkv, const float *out, const float *lse,
                                   int64_t T, int64_t n_h, int64_t p, void *ws, size_t ws_size);

/* dtable[ids[t]] += dy[t].   dtable: [V, d]  dy: [T, d]  ids: [T] */
void hm_backend_embedding_backward(const struct hm_backend *be, float *dtable, const float *dy,
                                   const int32_t *ids, int64_t T, int64_t d);

/* Cross-entropy on logits: returns Σ_t nll_t (double) and writes
 * dlogits[t] = scale · (softmax(logits[t]) − onehot(targets[t])); rows
 * with targets[t] < 0 are ignored (no loss, zero gradient).
 *   dlogits, logits: [T, V]  targets: [T] */
double hm_backend_cross_entropy_backward(const struct hm_backend *be, float *dlogits,
                                         const float *logits, const int32_t *targets,
                                         int64_t T, int64_t V, float scale);

#endif
