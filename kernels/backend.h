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

/* Every op of the table (the forward/backward pairs and their workspace
 * sizes share one entry): what `supports` answers for, so a device backend
 * can decline an op and the caller fall back to the CPU. */
enum hm_op {
    HM_OP_MATMUL = 0,
    HM_OP_LAYERNORM,
    HM_OP_GELU,
    HM_OP_ROTARY,
    HM_OP_ATTENTION,
    HM_OP_ADD,
    HM_OP_EMBEDDING,
    HM_OP_NLL,
    HM_OP_RMSNORM,
    HM_OP_QKV_EXPAND,
    HM_OP_ATTENTION_CACHED,
    HM_OP_CROSS_ENTROPY,
    HM_OP_FEATUREMAP,
    HM_OP_LINATTN,
    HM_OP_COSINE_LOSS,
    HM_OP_CONV1D,
    HM_OP_SOFTPLUS,
    HM_OP_SILU_GATE,
    HM_OP_SSM,
    HM_OP_ADAMW,
    HM_OP_SGD,
    HM_OP_SQNORM,
    HM_OP_FIRST_NONFINITE,
    HM_OP_KL,
    HM_OP_FILL,
    HM_OP_COPY2D,
    HM_OP_CLAMP,
    HM_OP_COUNT
};

/* One AdamW update's constants (SPEC §4; hm_optim_step computes them). */
struct hm_adamw_args {
    float scale;      /* gradient clip factor (1 = none), applied as g is read (g is not written) */
    float decay;      /* 1 − lr·weight_decay (matrices), else 1 */
    float beta1, beta2, eps;
    float step_size;  /* lr / (1 − β1^t) */
    float bc2_sqrt;   /* sqrt(1 − β2^t) */
};

enum hm_gelu_kind {
    HM_GELU_ERF = 0, /* 0.5 x (1 + erf(x / sqrt 2)), HF "gelu" */
    HM_GELU_TANH,    /* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), HF "gelu_new" */
};

/* The vtable. Every op member is optional: NULL means "use ref". */
struct hm_backend_ops {
    /* (optional) 1 if this backend runs op with the given element count
     * hint (0 = unknown); a NULL member means "supports everything". */
    int (*supports)(void *ctx, enum hm_op op, int64_t numel);
    /* (optional) report and clear the first failure since the last call;
     * CPU backends never fail and leave this NULL. */
    enum hm_status (*sync)(void *ctx, struct hm_error *err);

    void (*matmul_forward)(void *ctx, float *y, const float *x, const float *w, const float *b,
                           int64_t T, int64_t in, int64_t out);
    void (*layernorm_forward)(void *ctx, float *y, float *mean, float *rstd, const float *x,
                              const float *w, const float *b, int64_t T, int64_t d,
                              float eps);
    void (*gelu_forward)(void *ctx, float *y, const float *x, int64_t n, enum hm_gelu_kind kind);
    void (*rotary_forward)(void *ctx, float *x, int64_t T, int64_t n_h, int64_t r, int64_t row_stride,
                           int64_t head_stride, int64_t pos0, const float *inv_freq);
    size_t (*attention_ws_size)(void *ctx, int64_t T, int64_t n_h, int64_t p);
    void (*attention_forward)(void *ctx, float *out, float *lse, const float *qkv, int64_t T,
                              int64_t n_h, int64_t p, void *ws, size_t ws_size);
    void (*add_forward)(void *ctx, float *y, const float *a, const float *b, int64_t n);
    void (*embedding_forward)(void *ctx, float *y, const int32_t *ids, const float *table, int64_t T,
                              int64_t d);
    void (*nll_forward)(void *ctx, float *nll, float *lse, const float *logits, const int32_t *targets,
                        int64_t T, int64_t V);

    /* backward ops (kernels/backend.h, second part) */
    void (*matmul_backward)(void *ctx, float *dx, float *dw, float *db, const float *dy, const float *x,
                            const float *w, int64_t T, int64_t in, int64_t out);
    void (*layernorm_backward)(void *ctx, float *dx, float *dw, float *db, const float *dy, const float *x,
                               const float *mean, const float *rstd, const float *w, int64_t T,
                               int64_t d);
    void (*gelu_backward)(void *ctx, float *dx, const float *dy, const float *x, int64_t n,
                          enum hm_gelu_kind kind);
    void (*rotary_backward)(void *ctx, float *dx, int64_t T, int64_t n_h, int64_t r, int64_t row_stride,
                            int64_t head_stride, int64_t pos0, const float *inv_freq);
    size_t (*attention_backward_ws_size)(void *ctx, int64_t T, int64_t n_h, int64_t p);
    void (*attention_backward)(void *ctx, float *dqkv, const float *dout, const float *qkv,
                               const float *out, const float *lse, int64_t T, int64_t n_h,
                               int64_t p, void *ws, size_t ws_size);
    void (*embedding_backward)(void *ctx, float *dtable, const float *dy, const int32_t *ids, int64_t T,
                               int64_t d);
    double (*cross_entropy_backward)(void *ctx, float *dlogits, const float *logits,
                                     const int32_t *targets, int64_t T, int64_t V, float scale);

    /* Hedgehog linear attention (SPEC §2; wrappers at the end of this file) */
    void (*featuremap_forward)(void *ctx, float *phi, const float *x, const float *W, const float *b,
                               int64_t T, int64_t n_h, int64_t p, int64_t F,
                               int64_t row_stride, int64_t head_stride);
    void (*featuremap_backward)(void *ctx, float *dx, float *dW, float *db, const float *dphi,
                                const float *x, const float *phi, const float *W, int64_t T,
                                int64_t n_h, int64_t p, int64_t F, int64_t row_stride,
                                int64_t head_stride);
    size_t (*linattn_ws_size)(void *ctx, int64_t T, int64_t n_h, int64_t F2, int64_t p, int64_t chunk);
    void (*linattn_forward)(void *ctx, float *y, float *den, const float *phiq, const float *phik,
                            const float *v, int64_t T, int64_t n_h, int64_t F2, int64_t p,
                            int64_t v_row_stride, int64_t v_head_stride, float eps,
                            int64_t chunk, float *saved, void *ws, size_t ws_size);
    size_t (*linattn_backward_ws_size)(void *ctx, int64_t T, int64_t n_h, int64_t F2, int64_t p,
                                       int64_t chunk);
    void (*linattn_backward)(void *ctx, float *dphiq, float *dphik, float *dv, const float *dy,
                             const float *y, const float *den, const float *phiq,
                             const float *phik, const float *v, int64_t T, int64_t n_h,
                             int64_t F2, int64_t p, int64_t v_row_stride, int64_t v_head_stride,
                             int64_t chunk, const float *saved, void *ws, size_t ws_size);
    double (*cosine_loss)(void *ctx, float *da, const float *a, const float *b, int64_t N, int64_t d,
                          float scale);

    /* HedgeMamba mixer (SPEC §3; wrappers at the end of this file) */
    void (*conv1d_forward)(void *ctx, float *c, const float *x, const float *w, const float *bias,
                           int64_t T, int64_t C, int64_t K);
    void (*conv1d_backward)(void *ctx, float *dx, float *dw, float *dbias, const float *dc, const float *x,
                            const float *w, int64_t T, int64_t C, int64_t K);
    void (*conv1d_step)(void *ctx, float *c_t, const float *x_t, float *window, const float *w,
                        const float *bias, int64_t C, int64_t K);
    void (*softplus_forward)(void *ctx, float *y, const float *z, int64_t n);
    void (*softplus_backward)(void *ctx, float *dz, const float *dy, const float *z, int64_t n);
    void (*silu_gate_forward)(void *ctx, float *out, const float *y, const float *z, int64_t n);
    void (*silu_gate_backward)(void *ctx, float *dy, float *dz, const float *dout, const float *y,
                               const float *z, int64_t n);
    size_t (*ssm_ws_size)(void *ctx, int64_t T, int64_t n_h, int64_t F2, int64_t p, int64_t chunk);
    void (*ssm_forward)(void *ctx, float *y, float *den, const float *C, const float *B, const float *v,
                        const float *dt, const float *A, const float *D, int64_t T, int64_t n_h,
                        int64_t F2, int64_t p, int64_t v_row_stride, int64_t v_head_stride,
                        float eps, int64_t chunk, void *ws, size_t ws_size);
    size_t (*ssm_backward_ws_size)(void *ctx, int64_t T, int64_t n_h, int64_t F2, int64_t p, int64_t chunk);
    void (*ssm_backward)(void *ctx, float *dC, float *dB, float *dv, float *ddt, float *dA, float *dD,
                         const float *dy, const float *y, const float *den, const float *C,
                         const float *B, const float *v, const float *dt, const float *A,
                         const float *D, int64_t T, int64_t n_h, int64_t F2, int64_t p,
                         int64_t v_row_stride, int64_t v_head_stride, int64_t chunk, void *ws,
                         size_t ws_size);
    void (*ssm_chunk_carry)(void *ctx, float *y, float *den, const float *C, const float *B,
                            const float *v, const float *dt, const float *A, const float *D,
                            float *S, int64_t T, int64_t n_h, int64_t F2, int64_t p,
                            int64_t v_row_stride, int64_t v_head_stride);
    void (*ssm_step)(void *ctx, float *y_t, float *S, const float *C_t, const float *B_t, const float *v_t,
                     const float *dt_t, const float *A, const float *D, int64_t n_h, int64_t F2,
                     int64_t p, float eps);

    /* llama family and decoding (wrappers at the end of this file) */
    void (*rmsnorm_forward)(void *ctx, float *y, float *rstd, const float *x, const float *w, int64_t T,
                            int64_t d, float eps);
    void (*rmsnorm_backward)(void *ctx, float *dx, float *dw, const float *dy, const float *x,
                             const float *rstd, const float *w, int64_t T, int64_t d);
    void (*qkv_expand_forward)(void *ctx, float *y, const float *x, int64_t T, int64_t n_h, int64_t n_kv,
                               int64_t p);
    void (*qkv_expand_backward)(void *ctx, float *dx, const float *dy, int64_t T, int64_t n_h,
                                int64_t n_kv, int64_t p);
    void (*attention_cached)(void *ctx, float *out, const float *q, int64_t q_row_stride,
                             int64_t q_head_stride, const float *kc, const float *vc, int64_t P0,
                             int64_t T, int64_t n_h, int64_t n_kv, int64_t p, float *scratch);

    /* training and utility ops (wrappers at the end of this file) */
    void (*adamw_step)(void *ctx, float *w, const float *g, float *m, float *v, int64_t n,
                       const struct hm_adamw_args *a);
    void (*sgd_step)(void *ctx, float *w, const float *g, int64_t n, float lr);
    double (*sqnorm)(void *ctx, const float *x, int64_t n);
    int64_t (*first_nonfinite)(void *ctx, const float *x, int64_t n);
    double (*kl_backward)(void *ctx, float *dlogits, const float *logits, const float *tlogits,
                          int64_t T, int64_t V, double w, double scale);
    void (*fill)(void *ctx, float *x, int64_t n, float value);
    void (*copy2d)(void *ctx, float *dst, int64_t dst_stride, const float *src,
                   int64_t src_stride, int64_t rows, int64_t cols);
    void (*clamp)(void *ctx, float *x, int64_t n, float lo, float hi);

    /* memory (optional; NULL: host memory) */
    void *(*mem_alloc)(void *ctx, size_t bytes);
    void (*mem_free)(void *ctx, void *p);
    void (*mem_upload)(void *ctx, void *dst, const void *src, size_t bytes);
    void (*mem_download)(void *ctx, void *dst, const void *src, size_t bytes);
};

struct hm_backend {
    const char *name;            /* "ref", "fast", later "cuda" */
    struct hm_backend_ops ops;
    void *ctx;                   /* the backend's context (device, streams, handles),
                                  * passed first to every op; NULL for the CPU */
};

/* First parameter of every CPU op implementation: the context it ignores. */
#define HM_CPU_CTX __attribute__((unused)) void *ctx

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

/* ---- Hedgehog linear attention (SPEC §2) -----------------------------------
 * Per layer and head h: two feature maps (queries, keys), then causal
 * normalized linear attention; stage 1 trains the maps against the teacher
 * with a cosine loss. Same conventions as above (parameter gradients +=,
 * activation gradients =, NULL skips). For the fused qkv of SPEC §1
 * ([T, 3d], d = n_h p): q at qkv + 0, k at qkv + p, v at qkv + 2p, each with
 * row_stride 3d and head_stride 3p. */

/* Default chunk of the chunked linear attention (chunk argument 0); chosen
 * by bench/bench_linattn.c (32 and 64 tie within noise at Pythia shapes,
 * 16 and 128 are 5-35 % slower). */
#define HM_LINATTN_CHUNK_DEFAULT 64

/* φ(x) = [softmax(u), softmax(−u)], u = x W_h + b_h, softmaxes over F.
 *   phi: [T, n_h, 2F] (written)
 *   x: element (t, h, i), i < p, at x[t * row_stride + h * head_stride + i]
 *   W: [n_h, p, F]  b: [n_h, F] */
void hm_backend_featuremap_forward(const struct hm_backend *be, float *phi, const float *x,
                                   const float *W, const float *b, int64_t T, int64_t n_h,
                                   int64_t p, int64_t F, int64_t row_stride,
                                   int64_t head_stride);

/* Feature map backward, using the saved φ for the softmax backward.
 *   dx: same strided layout as x, or NULL; written on the p columns of each
 *       head only (other columns untouched)
 *   dW: [n_h, p, F] or NULL (+=)  db: [n_h, F] or NULL (+=)
 *   dphi, phi: [T, n_h, 2F]  x: as in the forward  W: [n_h, p, F] */
void hm_backend_featuremap_backward(const struct hm_backend *be, float *dx, float *dW,
                                    float *db, const float *dphi, const float *x,
                                    const float *phi, const float *W, int64_t T, int64_t n_h,
                                    int64_t p, int64_t F, int64_t row_stride,
                                    int64_t head_stride);

/* Bytes of workspace linattn_forward / linattn_backward need for these
 * sizes (fast: with the current thread count; a smaller workspace that
 * still holds the chunk states only lowers the parallelism).
 * chunk: 0 = HM_LINATTN_CHUNK_DEFAULT. */
size_t hm_backend_linattn_ws_size(const struct hm_backend *be, int64_t T, int64_t n_h,
                                  int64_t F2, int64_t p, int64_t chunk);
size_t hm_backend_linattn_backward_ws_size(const struct hm_backend *be, int64_t T, int64_t n_h,
                                           int64_t F2, int64_t p, int64_t chunk);

/* The chunk states a linear-attention forward can leave for its backward
 * (the `saved` argument below; the same for every backend): per head h and
 * chunk c of C rows (C = chunk, or HM_LINATTN_CHUNK_DEFAULT for 0), the
 * state carried into the chunk, Ŝ_c^T = Σ_{s < cC} v̂_s φk_s^T with v̂_s =
 * [v_s; 1]: a block [p + 1, F2] (row k < p: Σ v_s[k] φk_s; row p: Σ φk_s)
 * at saved + (h · nc + c) · SB, nc = ceil(T / C), SB = round16(F2 (p + 1))
 * floats. The backward that is handed them skips recomputing them. */
static inline int64_t hm_linattn_chunk(int64_t chunk) /* the chunk argument's C */
{
    return chunk > 0 ? chunk : HM_LINATTN_CHUNK_DEFAULT;
}

static inline int64_t hm_linattn_saved_block(int64_t F2, int64_t p) /* SB */
{
    return (F2 * (p + 1) + 15) / 16 * 16;
}

static inline int64_t hm_linattn_saved_floats(int64_t T, int64_t n_h, int64_t F2, int64_t p,
                                              int64_t chunk)
{
    const int64_t C = hm_linattn_chunk(chunk);
    return n_h * ((T + C - 1) / C) * hm_linattn_saved_block(F2, p);
}

/* Causal normalized linear attention per head (no 1/sqrt(p) scale):
 *   y_t = Σ_{s≤t} (φq_t·φk_s) v_s / (Σ_{s≤t} φq_t·φk_s + eps)
 *   y: [T, n_h * p] heads merged head-major (column h*p + i)
 *   den: [n_h, T] or NULL — the saved denominators Σ_s φq_t·φk_s + eps
 *   phiq, phik: [T, n_h, F2] (F2 = 2F, nonnegative feature maps)
 *   v: element (t, h, i) at v[t * v_row_stride + h * v_head_stride + i]
 *   chunk: block size of the chunked form (fast; the result does not depend
 *          on it beyond rounding), 0 = default; ref ignores it
 *   saved: [hm_linattn_saved_floats(...)] written (the chunk states above),
 *          or NULL
 *   ws: [ws_size] bytes, ≥ hm_backend_linattn_ws_size(...) */
void hm_backend_linattn_forward(const struct hm_backend *be, float *y, float *den,
                                const float *phiq, const float *phik, const float *v,
                                int64_t T, int64_t n_h, int64_t F2, int64_t p,
                                int64_t v_row_stride, int64_t v_head_stride, float eps,
                                int64_t chunk, float *saved, void *ws, size_t ws_size);

/* Linear attention backward (all written).
 *   dphiq, dphik: [T, n_h, F2] or NULL
 *   dv: same strided layout as v, or NULL; only the v columns are touched
 *   dy, y: [T, n_h * p] (y: the forward output)  den: [n_h, T] saved by the
 *   forward (required)  phiq, phik, v, sizes, chunk: as in the forward
 *   saved: the forward's chunk states of the same inputs and chunk, or NULL
 *          (recomputed); a backend may ignore it (ref does)
 *   ws: [ws_size] bytes, ≥ hm_backend_linattn_backward_ws_size(...) */
void hm_backend_linattn_backward(const struct hm_backend *be, float *dphiq, float *dphik,
                                 float *dv, const float *dy, const float *y, const float *den,
                                 const float *phiq, const float *phik, const float *v,
                                 int64_t T, int64_t n_h, int64_t F2, int64_t p,
                                 int64_t v_row_stride, int64_t v_head_stride, int64_t chunk,
                                 const float *saved, void *ws, size_t ws_size);

/* Stage-1 cosine loss of one layer: returns Σ_t (1 − cos(a_t, b_t)) (double)
 * and writes da = scale · ∂/∂a of that sum (no eps inside the cosine). A row
 * with |a_t| = 0 or |b_t| = 0 has no cosine: it counts as loss 1 with zero
 * gradient. For the SPEC mean over tokens pass scale = 1/N (and divide the
 * returned sum by N).
 *   da: [N, d] or NULL  a: [N, d] student  b: [N, d] teacher */
double hm_backend_cosine_loss(const struct hm_backend *be, float *da, const float *a,
                              const float *b, int64_t N, int64_t d, float scale);

/* ---- HedgeMamba mixer (SPEC §3) ---------------------------------------------
 * Per layer: causal depthwise conv over the fused qkv channels, softplus
 * step sizes, the selective scan with the ones channel, the SiLU gate. Same
 * conventions as above (parameter gradients +=, activation gradients =,
 * NULL skips). With Δ ≡ 1, A = 0, D = 0 the scan is exactly the Hedgehog
 * linear attention (hm_backend_linattn_forward) on the same φ's and v. */

/* Default chunk of the chunked scan (chunk argument 0); chosen by
 * bench/bench_ssm.c's sweep (with the packed-tile kernels of round 2:
 * f+b at C = 16 took 1.38–1.48× the time of C = 64, C = 32 1.02–1.09×,
 * C = 128 1.23–1.43×; Pythia-70m/160m heads, T = 512 and 2048). */
#define HM_SSM_CHUNK_DEFAULT 64

/* Causal depthwise conv, no activation:
 *   c[t, ch] = bias[ch] + Σ_{k<K} w[ch, k] x[t − (K−1) + k, ch] (x = 0 before t = 0)
 *   c, x: [T, C] contiguous rows (C = 3d for the fused qkv)
 *   w: [C, K]  bias: [C] or NULL (no bias). c must not alias x. */
void hm_backend_conv1d_forward(const struct hm_backend *be, float *c, const float *x,
                               const float *w, const float *bias, int64_t T, int64_t C,
                               int64_t K);

/* Conv backward: dx written; dw, dbias accumulate (+=); each may be NULL.
 *   dx: [T, C] or NULL  dw: [C, K] or NULL  dbias: [C] or NULL
 *   dc, x: [T, C] (x: the forward input)  w: [C, K] */
void hm_backend_conv1d_backward(const struct hm_backend *be, float *dx, float *dw,
                                float *dbias, const float *dc, const float *x, const float *w,
                                int64_t T, int64_t C, int64_t K);

/* One token of the conv for generation: c_t = the conv output at the token
 * whose input is x_t, given the K−1 previous inputs in window (oldest
 * first; zero-initialized by the caller before the first token); then the
 * window is shifted in place (x_t enters last).
 *   c_t, x_t: [C]  window: [K − 1, C] (K = 1: unused)  w: [C, K]
 *   bias: [C] or NULL */
void hm_backend_conv1d_step(const struct hm_backend *be, float *c_t, const float *x_t,
                            float *window, const float *w, const float *bias, int64_t C,
                            int64_t K);

/* Δ = softplus(z) = log(1 + exp(z)), safe for large |z|.
 *   y, z: [n]; y may alias z */
void hm_backend_softplus_forward(const struct hm_backend *be, float *y, const float *z,
                                 int64_t n);

/* dz = dy · sigmoid(z) (written).   dz, dy, z: [n]; dz may alias dy */
void hm_backend_softplus_backward(const struct hm_backend *be, float *dz, const float *dy,
                                  const float *z, int64_t n);

/* Gate: out = y ⊙ silu(z), silu(z) = z · sigmoid(z).   out, y, z: [n];
 * out may alias y or z */
void hm_backend_silu_gate_forward(const struct hm_backend *be, float *out, const float *y,
                                  const float *z, int64_t n);

/* dy = dout ⊙ silu(z), dz = dout ⊙ y ⊙ silu'(z) (written; each may be NULL,
 * and either one, not both, may alias dout).   dy, dz, dout, y, z: [n] */
void hm_backend_silu_gate_backward(const struct hm_backend *be, float *dy, float *dz,
                                   const float *dout, const float *y, const float *z, int64_t n);

/* Bytes of workspace ssm_forward / ssm_backward need for these sizes (fast:
 * with the current thread count; a smaller workspace that still holds the
 * chunk states and one thread's scratch only lowers the parallelism).
 * chunk: 0 = HM_SSM_CHUNK_DEFAULT. */
size_t hm_backend_ssm_ws_size(const struct hm_backend *be, int64_t T, int64_t n_h, int64_t F2,
                              int64_t p, int64_t chunk);
size_t hm_backend_ssm_backward_ws_size(const struct hm_backend *be, int64_t T, int64_t n_h,
                                       int64_t F2, int64_t p, int64_t chunk);

/* Selective scan with the ones channel, per head h (state S [F2, p + 1],
 * S_{−1} = 0):
 *   α_t = exp(Δ_t A_h),  S_t = α_t S_{t−1} + Δ_t B_t [v_t; 1]^T,  n_t = C_t^T S_t,
 *   y_t = n_t[0:p] / (n_t[p] + eps) + D_h v_t
 *   y: [T, n_h * p] heads merged head-major (column h*p + i)
 *   den: [n_h, T] or NULL — the saved n_t[p] + eps
 *   C, B: [T, n_h, F2] (C = φq, B = φk: nonnegative feature maps)
 *   v: element (t, h, i) at v[t * v_row_stride + h * v_head_stride + i]
 *   dt: [T, n_h] (Δ ≥ 0, e.g. softplus)  A: [n_h] (≤ 0)  D: [n_h]
 *   chunk: block size of the chunked form (fast; the result does not depend
 *          on it beyond rounding), 0 = default; ref ignores it
 *   ws: [ws_size] bytes, ≥ hm_backend_ssm_ws_size(...)
 * Decays are only ever formed over segments inside a chunk (or summed per
 * segment), so any T and any Δ·|A| are safe (no overflow). */
void hm_backend_ssm_forward(const struct hm_backend *be, float *y, float *den, const float *C,
                            const float *B, const float *v, const float *dt, const float *A,
                            const float *D, int64_t T, int64_t n_h, int64_t F2, int64_t p,
                            int64_t v_row_stride, int64_t v_head_stride, float eps,
                            int64_t chunk, void *ws, size_t ws_size);

/* Scan backward.
 *   dC, dB: [T, n_h, F2] or NULL (written)
 *   dv: same strided layout as v, or NULL (written; only the v columns)
 *   ddt: [T, n_h] or NULL (written)  dA, dD: [n_h] or NULL (+=)
 *   dy, y: [T, n_h * p] (y: the forward output)  den: [n_h, T] saved by the
 *   forward (required)  C, B, v, dt, A, D, sizes: as in the forward
 *   ws: [ws_size] bytes, ≥ hm_backend_ssm_backward_ws_size(...) */
void hm_backend_ssm_backward(const struct hm_backend *be, float *dC, float *dB, float *dv,
                             float *ddt, float *dA, float *dD, const float *dy, const float *y,
                             const float *den, const float *C, const float *B, const float *v,
                             const float *dt, const float *A, const float *D, int64_t T,
                             int64_t n_h, int64_t F2, int64_t p, int64_t v_row_stride,
                             int64_t v_head_stride, int64_t chunk, void *ws, size_t ws_size);

/* Chunked prefill with a carried state: y [T, n_h p] and den [n_h, T] are a
 * chunk's ssm_forward (or linattn_forward) outputs computed from a zero
 * state; this adds the share of the state S [n_h, F2, p + 1] carried in
 * from before the chunk (decayed by Π α within the chunk), in place, and
 * advances S to the state after the chunk — what ssm_step would leave.
 * C, B: [T, n_h, F2]  v: rows as ssm_forward  dt: [T, n_h]  A, D: [n_h];
 * dt and A NULL: Δ = 1, A = 0 (Hedgehog's linear attention); D NULL: 0. */
void hm_backend_ssm_chunk_carry(const struct hm_backend *be, float *y, float *den,
                                const float *C, const float *B, const float *v, const float *dt,
                                const float *A, const float *D, float *S, int64_t T,
                                int64_t n_h, int64_t F2, int64_t p, int64_t v_row_stride,
                                int64_t v_head_stride);

/* One token of the scan (recurrent form, generation), constant memory:
 * updates S in place and writes y_t as the forward would at that token.
 *   y_t: [n_h * p]  S: [n_h, F2, p + 1] (caller-owned, zeroed before the
 *   first token)  C_t, B_t: [n_h, F2]  v_t: [n_h * p]  dt_t: [n_h]
 *   A, D: [n_h] */
void hm_backend_ssm_step(const struct hm_backend *be, float *y_t, float *S, const float *C_t,
                         const float *B_t, const float *v_t, const float *dt_t, const float *A,
                         const float *D, int64_t n_h, int64_t F2, int64_t p, float eps);

/* ---- llama family and decoding (SPEC §1b, §8) ---------------------------- */

/* RMSNorm over the last dim: y = x / sqrt(mean(x²) + eps) * w (no bias, no
 * mean subtraction; the sum of squares in double).
 * y: [T, d] (may alias x)  rstd: [T] saved for backward (or NULL)  w: [d] */
void hm_backend_rmsnorm_forward(const struct hm_backend *be, float *y, float *rstd,
                                const float *x, const float *w, int64_t T, int64_t d, float eps);

/* RMSNorm backward: dx written (may be NULL), dw += Σ dy ⊙ x·rstd (may be
 * NULL). dx: [T, d]  dy, x: [T, d]  rstd: [T]  w: [d] */
void hm_backend_rmsnorm_backward(const struct hm_backend *be, float *dx, float *dw,
                                 const float *dy, const float *x, const float *rstd,
                                 const float *w, int64_t T, int64_t d);

/* Grouped-query attention layout: from the projection output x [T, (n_h +
 * 2 n_kv)·p] = [q | k | v] to per-query-head triples y [T, n_h, 3, p]
 * (q_h, k_g(h), v_g(h), g(h) = h / (n_h / n_kv)) — the fused interleaved
 * layout every mixer op reads (row stride 3 n_h p, head stride 3p).
 * n_h must be a multiple of n_kv. */
void hm_backend_qkv_expand_forward(const struct hm_backend *be, float *y, const float *x,
                                   int64_t T, int64_t n_h, int64_t n_kv, int64_t p);

/* Its transpose: dx [T, (n_h + 2 n_kv)·p] written; each key/value head gets
 * the sum over its query-head group.  dy: [T, n_h, 3, p] */
void hm_backend_qkv_expand_backward(const struct hm_backend *be, float *dx, const float *dy,
                                    int64_t T, int64_t n_h, int64_t n_kv, int64_t p);

/* Floats of scratch attention_cached needs: n · max(T, n_h) with n = P0 + T
 * the cached positions (T ≥ 1). The same for every backend, a pure function
 * of the shapes. */
int64_t hm_backend_attention_cached_scratch_floats(int64_t T, int64_t n, int64_t n_h);

/* Causal softmax attention of T new query rows against a KV cache (a
 * decoding step, T = 1, or a prefill chunk): row t sits at position P0 + t
 * and attends the cached positions s = 0 .. P0 + t (its own k, v are already
 * in the cache at P0 + t). With g(h) = h / (n_h / n_kv) (GQA),
 *   out_{t,h} = Σ_{s ≤ P0+t} softmax_s(q_{t,h}·k_{s,g(h)} / sqrt(p)) v_{s,g(h)}
 * (the max subtracted before exp).
 *   out: [T, n_h, p] contiguous (row t head h at out + (t n_h + h) p)
 *   q: row t head h at q + t q_row_stride + h q_head_stride (p contiguous
 *      floats); the per-head fused layout [T, n_h, 3p] of
 *      hm_backend_qkv_expand_forward passes directly (row stride 3 n_h p,
 *      head stride 3p)
 *   kc, vc: [P0 + T, n_kv, p] (positions past P0 + T − 1 are not read)
 *   scratch: [hm_backend_attention_cached_scratch_floats(T, P0 + T, n_h)]
 * n_h must be a multiple of n_kv; out must not alias q, kc, vc or scratch. */
void hm_backend_attention_cached(const struct hm_backend *be, float *out, const float *q,
                                 int64_t q_row_stride, int64_t q_head_stride, const float *kc,
                                 const float *vc, int64_t P0, int64_t T, int64_t n_h,
                                 int64_t n_kv, int64_t p, float *scratch);

/* ---- training and utility ops -------------------------------------------- */

/* AdamW on one tensor (SPEC §4): ĝ = g·scale; w ← w·decay; m ← β1 m + (1−β1) ĝ;
 * v ← β2 v + (1−β2) ĝ²; w ← w − step_size · m / (sqrt(v)/bc2_sqrt + ε).
 * w, m, v: [n] updated; g: [n] read only (not scaled in place: one memory
 * stream less for a memory-bound op). */
void hm_backend_adamw_step(const struct hm_backend *be, float *w, const float *g, float *m,
                           float *v, int64_t n, const struct hm_adamw_args *a);

/* w ← w − lr·g.   w, g: [n] */
void hm_backend_sgd_step(const struct hm_backend *be, float *w, const float *g, int64_t n,
                         float lr);

/* Σ x² in double.   x: [n] */
double hm_backend_sqnorm(const struct hm_backend *be, const float *x, int64_t n);

/* Index of the first NaN/Inf of x [n], or −1. */
int64_t hm_backend_first_nonfinite(const struct hm_backend *be, const float *x, int64_t n);

/* The distillation term of T rows: returns Σ_t KL(p_t ‖ p_s) (p = softmax of
 * tlogits, resp. logits, in double) and adds w·scale·(p_s − p_t) to dlogits.
 * dlogits, logits, tlogits: [T, V] */
double hm_backend_kl_backward(const struct hm_backend *be, float *dlogits, const float *logits,
                              const float *tlogits, int64_t T, int64_t V, double w,
                              double scale);

/* x[i] = value.   x: [n] */
void hm_backend_fill(const struct hm_backend *be, float *x, int64_t n, float value);

/* rows × cols floats from src (row stride src_stride) to dst (dst_stride). */
void hm_backend_copy2d(const struct hm_backend *be, float *dst, int64_t dst_stride,
                       const float *src, int64_t src_stride, int64_t rows, int64_t cols);

/* x[i] = min(max(x[i], lo), hi).   x: [n] */
void hm_backend_clamp(const struct hm_backend *be, float *x, int64_t n, float lo, float hi);

/* ---- memory ------------------------------------------------------------------
 * Buffers the ops read and write. The CPU's are host memory (malloc); a
 * device backend returns device memory and moves bytes with upload (host →
 * buffer) and download (buffer → host). */

/* bytes of backend memory, or NULL when out of memory. owned: free with
 * hm_backend_free(). */
void *hm_backend_alloc(const struct hm_backend *be, size_t bytes);
/* Frees *p (NULL ok) and sets *p = NULL. */
void hm_backend_free(const struct hm_backend *be, void **p);
void hm_backend_upload(const struct hm_backend *be, void *dst, const void *src, size_t bytes);
void hm_backend_download(const struct hm_backend *be, void *dst, const void *src, size_t bytes);

#endif
