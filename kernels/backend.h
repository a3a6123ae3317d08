/* backend.h — the op interface every model in hm runs on (conventions 12, 13).
 *
 * A backend is an opened handle (hm_backend_open) over a vtable of ops
 * (kernels/backend_impl.h), a context and its own memory. The op list is
 * kernels/ops.def, the one source of the enum, the vtable, the wrappers
 * and the CPU prototypes. Three CPU backends are always built:
 *   "ref"     plain single-threaded loops, written for clarity; the oracle
 *             every other backend is tested against (tests/test_kernels_*.c);
 *   "fast"    OpenBLAS sgemm (when built with HM_HAVE_BLAS) + OpenMP loops;
 *             "cpu" is an alias of "fast";
 *   "checked" ref's ops, bit for bit, on memory host code cannot touch
 *             outside the backend's own ops (kernels/checked/): it proves
 *             that every tensor is placed through the backend.
 * A device backend (CUDA) is a separate library implementing the same
 * vtable; callers never #ifdef.
 *
 * Calling convention:
 *   - Callers use the hm_backend_<op>() wrappers. A wrapper runs the
 *     backend's member; there is no fallback to another backend's code: a
 *     missing member is an error naming the op (hm_backend_sync).
 *   - Every tensor an op reads or writes lives in the backend's memory
 *     (hm_backend_alloc); host code reaches it only through
 *     hm_backend_upload / hm_backend_download. Scalar results (losses,
 *     norms, the first non-finite index) are written into backend buffers
 *     too, so a step reads them with one download.
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

struct hm_backend; /* opaque; a backend's vtable is kernels/backend_impl.h */

/* Every op of the table, one per vtable member (kernels/ops.def): what
 * `supports` answers for. */
enum hm_op {
#define HM_OP(name, fast, flops, params, args) HM_OP_##name,
#define HM_OP_SIZE(name, fast, params, args) HM_OP_##name,
#include "ops.def"
#undef HM_OP
#undef HM_OP_SIZE
    HM_OP_COUNT
};

/* "(a, b)" → "a, b": an ops.def parameter list spliced into a prototype. */
#define HM_UNPAREN(...) __VA_ARGS__

/* One AdamW update's constants (contract §4; hm_optim_step computes them). */
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

/* The narrow dtypes a frozen weight may keep in backend memory (widen_rows). */
enum hm_narrow {
    HM_NARROW_BF16 = 0,
    HM_NARROW_F16,
};

/* ---- lifecycle ---------------------------------------------------------------
 * Backends by name: "ref", "fast" (alias "cpu"), "checked" (ref's ops on
 * guarded memory: any host access to it, and any op handed memory that is
 * not its own, stops the program naming the access; kernels/checked/).
 * A backend is opened with a context of its own (a device backend keeps its
 * streams and library handles there) and closed when done. */

/* out: owned, close with hm_backend_close(). An unknown name is
 * HM_ERR_INVALID naming it and the known names. */
enum hm_status hm_backend_open(const char *name, struct hm_backend **out, struct hm_error *err);
/* Frees every resource of be (its memory must have been freed). NULL ok. */
void hm_backend_close(struct hm_backend *be);

/* Borrowed: the program's shared instance of the backend `name`, opened on
 * first use and closed at exit; NULL for an unknown name or one that
 * cannot open. */
const struct hm_backend *hm_backend_get(const char *name);
/* The same with the reason it cannot: HM_ERR_INVALID for an unknown name;
 * HM_ERR_UNSUPPORTED for a backend this build or machine lacks ("cuda"
 * without a CUDA build, a device or a driver), saying which. */
enum hm_status hm_backend_acquire(const char *name, const struct hm_backend **out,
                                  struct hm_error *err);

/* "ref|fast|cpu|checked|cuda" for usage texts. */
const char *hm_backend_names(void);
/* The name of the i-th registered backend: 0 "ref", 1 "fast", 2 "checked",
 * then those hm_backend_register added, in order (aliases such as "cpu"
 * are not listed); NULL when i is out of range. Borrowed. Tests iterate
 * it to run every op test on every backend. */
const char *hm_backend_name_at(int i);
/* The name be was opened with (borrowed). */
const char *hm_backend_name(const struct hm_backend *be);
/* "matmul_forward" ... for an op; NULL when out of range. */
const char *hm_op_name(enum hm_op op);

/* 1 if be runs op (numel: element count hint, 0 = unknown). A backend whose
 * memory is not host memory answers 0 for what it lacks; calling a missing
 * op records HM_ERR_BACKEND naming it (reported by hm_backend_sync) and
 * computes nothing. What each backend lacks: ref, fast, checked: nothing. */
int hm_backend_supports(const struct hm_backend *be, enum hm_op op, int64_t numel);

/* HM_OK, or the first failure since the last call (a missing op, a device
 * error), filling err; clears it. */
enum hm_status hm_backend_sync(const struct hm_backend *be, struct hm_error *err);

/* Downloads (device → host copies) be has done so far: how often host code
 * read backend memory (tests count a training step's reads with it). */
int64_t hm_backend_downloads(const struct hm_backend *be);

/* ---- the op wrappers ---------------------------------------------------------
 * hm_backend_<op>(be, params of kernels/ops.def): runs be's op, timed while
 * op profiling is on (op_profile.h). Their contracts follow, op by op. */
#define HM_OP(name, fast, flops, params, args) \
    void hm_backend_##name(const struct hm_backend *be, HM_UNPAREN params);
#define HM_OP_SIZE(name, fast, params, args) \
    size_t hm_backend_##name(const struct hm_backend *be, HM_UNPAREN params);
#include "ops.def"
#undef HM_OP
#undef HM_OP_SIZE

/* ---- forward ops ----------------------------------------------------------
 * Each has a future hm_backend_<op>_backward() beside it. */

/* [matmul_forward] nn.Linear: y = x W^T + b.
 *   y: [T, out]  x: [T, in]  w: [out, in]  b: [out] or NULL (no bias) */

/* [layernorm_forward] LayerNorm over the last dim: y = (x - mean) / sqrt(var_biased + eps) * w + b.
 *   y: [T, d] (may alias x)  x: [T, d]  w, b: [d]
 *   mean, rstd: [T] or NULL — saved statistics for the backward pass */

/* [gelu_forward] y: [n] (may alias x)  x: [n] */

/* [rotary_forward] NeoX rotary ("rotate_half"), in place, on the first r dims of every head:
 *   element (t, h, i) is x[t * row_stride + h * head_stride + i], i < r;
 *   for i < r/2, θ = (float)(pos0 + t) * inv_freq[i] (fp32 product),
 *   y[i] = x[i] cos θ − x[i + r/2] sin θ, y[i + r/2] = x[i + r/2] cos θ + x[i] sin θ
 *   with cos/sin of the fp32 θ rounded to fp32. Dims r.. are untouched.
 *   x: [T, row_stride] (heads n_h)  inv_freq: [r/2] from hm_rotary_inv_freq.
 * For the fused interleaved qkv of contract §1 ([T, 3d], head h at column h*3p):
 *   q: x = qkv,     row_stride = 3d, head_stride = 3p
 *   k: x = qkv + p, row_stride = 3d, head_stride = 3p                  */

/* inv_freq[j] = 1 / base^(2j/r) for j < r/2, exactly as HF computes it in
 * fp32: e = (float)(2j) / (float)r, pw = base^e rounded to fp32,
 * inv_freq[j] = 1.0f / pw (fp32 division).   inv_freq: [r/2] */
void hm_rotary_inv_freq(float *inv_freq, int64_t r, double base);

/* [attention_ws_size] Bytes of workspace attention_forward needs for these sizes (with the
 * current thread count; a smaller workspace only lowers the parallelism). */

/* [attention_forward] Causal softmax attention per head, softmax(q k^T / sqrt(p) + mask) v.
 *   out: [T, n_h * p] heads merged head-major (column h*p + i)
 *   lse: [n_h, T] or NULL — log-sum-exp of each scaled score row (backward)
 *   qkv: [T, 3 * n_h * p] fused interleaved: column h*3p + s*p + i
 *        (s = 0 q, 1 k, 2 v), rotary already applied
 *   ws: [ws_size] bytes, at least hm_backend_attention_ws_size(...) */

/* [add_forward] y = a + b.   y, a, b: [n]; y may alias a or b. */

/* [embedding_forward] y[t] = table[ids[t]].   y: [T, d]  ids: [T], each 0 <= id < rows of table
 *   (the caller checks)  table: [V, d] */

/* [widen_rows] Rows of a narrow table widened to fp32 (exactly: kernels/narrow.h):
 * y[i] = widen(x[ids ? ids[i] : i]) — a lookup of a narrow embedding, or with
 * ids NULL the contiguous widening of N·d values (a frozen weight before the
 * op that reads it).
 *   y: [N, d]  ids: [N] or NULL, each 0 <= id < rows of x (the caller checks)
 *   x: [rows, d] bf16 or f16 bits (kind) */

/* [nll_forward] Per-position cross-entropy: nll[t] = logsumexp(logits[t]) − logits[t, targets[t]]
 * (the negative log-softmax at the target), sums kept in double.
 *   nll: [T]  lse: [T] or NULL (log-sum-exp of each row, for backward)
 *   logits: [T, V]  targets: [T], 0 <= target < V (the caller checks) */

/* ---- backward ops ----------------------------------------------------------
 * Conventions: gradients of PARAMETERS accumulate (+=), so the caller zeroes
 * them once per optimizer step and can sum micro-batches; gradients of
 * ACTIVATIONS are written (=). A NULL gradient pointer skips that output
 * (frozen weights cost no gradient work). Saved forward values are inputs. */

/* [matmul_backward] y = x W^T + b:  dx = dy W (written), dw += dy^T x, db += Σ_t dy.
 *   dx: [T, in] or NULL  dw: [out, in] or NULL  db: [out] or NULL
 *   dy: [T, out]  x: [T, in]  w: [out, in] */

/* [layernorm_backward] LayerNorm: dx (written), dw += Σ dy·xhat, db += Σ dy.
 *   dx: [T, d] or NULL  dw, db: [d] or NULL  dy, x: [T, d]
 *   mean, rstd: [T] saved by the forward  w: [d] */

/* [gelu_backward] dx = dy · gelu'(x).   dx: [n] (may alias dy)  dy, x: [n] (x: the input) */

/* [attention_backward_ws_size] [rotary_backward] In place on the gradient of the rotated dims: the transpose rotation
 * R(θ)^T, same angles and rounding as rotary_forward; same layout args. */


/* [attention_backward] Causal softmax attention backward (written, all of q, k, v columns).
 *   dqkv: [T, 3 n_h p] fused interleaved like qkv (gradient w.r.t. the
 *         rotated q, k and v)  dout: [T, n_h p]  qkv: [T, 3 n_h p] as the
 *   forward saw it  out: [T, n_h p] the forward output  lse: [n_h, T]
 *   ws: [ws_size] bytes, ≥ hm_backend_attention_backward_ws_size(...) */

/* [embedding_backward] dtable[ids[t]] += dy[t].   dtable: [V, d]  dy: [T, d]  ids: [T] */

/* [cross_entropy_backward] Cross-entropy on logits: adds Σ_t nll_t (double) to *loss and writes
 * dlogits[t] = scale · (softmax(logits[t]) − onehot(targets[t])); rows
 * with targets[t] < 0 are ignored (no loss, zero gradient).
 *   loss: [1] backend memory  dlogits, logits: [T, V]  targets: [T] */

/* ---- Hedgehog linear attention (contract §2) -----------------------------------
 * Per layer and head h: two feature maps (queries, keys), then causal
 * normalized linear attention; stage 1 trains the maps against the teacher
 * with a cosine loss. Same conventions as above (parameter gradients +=,
 * activation gradients =, NULL skips). For the fused qkv of contract §1
 * ([T, 3d], d = n_h p): q at qkv + 0, k at qkv + p, v at qkv + 2p, each with
 * row_stride 3d and head_stride 3p. */

/* Default chunk of the chunked linear attention (chunk argument 0); chosen
 * by bench/bench_linattn.c (32 and 64 tie within noise at Pythia shapes,
 * 16 and 128 are 5-35 % slower). */
#define HM_LINATTN_CHUNK_DEFAULT 64

/* [featuremap_forward] φ(x) = [softmax(u), softmax(−u)], u = x W_h + b_h, softmaxes over F.
 *   phi: [T, n_h, 2F] (written)
 *   x: element (t, h, i), i < p, at x[t * row_stride + h * head_stride + i]
 *   W: [n_h, p, F]  b: [n_h, F] */

/* [featuremap_backward] Feature map backward, using the saved φ for the softmax backward.
 *   dx: same strided layout as x, or NULL; written on the p columns of each
 *       head only (other columns untouched)
 *   dW: [n_h, p, F] or NULL (+=)  db: [n_h, F] or NULL (+=)
 *   dphi, phi: [T, n_h, 2F]  x: as in the forward  W: [n_h, p, F] */

/* [linattn_backward_ws_size] [linattn_ws_size] Bytes of workspace linattn_forward / linattn_backward need for these
 * sizes (fast: with the current thread count; a smaller workspace that
 * still holds the chunk states only lowers the parallelism).
 * chunk: 0 = HM_LINATTN_CHUNK_DEFAULT. */

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

/* [linattn_forward] Causal normalized linear attention per head (no 1/sqrt(p) scale):
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

/* [linattn_backward] Linear attention backward (all written).
 *   dphiq, dphik: [T, n_h, F2] or NULL
 *   dv: same strided layout as v, or NULL; only the v columns are touched
 *   dy, y: [T, n_h * p] (y: the forward output)  den: [n_h, T] saved by the
 *   forward (required)  phiq, phik, v, sizes, chunk: as in the forward
 *   saved: the forward's chunk states of the same inputs and chunk, or NULL
 *          (recomputed); a backend may ignore it (ref does)
 *   ws: [ws_size] bytes, ≥ hm_backend_linattn_backward_ws_size(...) */

/* [cosine_loss] Stage-1 cosine loss of one layer: adds Σ_t (1 − cos(a_t, b_t)) (double) to *loss
 * and writes da = scale · ∂/∂a of that sum (no eps inside the cosine). A row
 * with |a_t| = 0 or |b_t| = 0 has no cosine: it counts as loss 1 with zero
 * gradient. For the contract's mean over tokens pass scale = 1/N (and divide
 * the sum by N).
 *   loss: [1] backend memory  da: [N, d] or NULL  a: [N, d] student  b: [N, d] teacher */

/* [mse_loss] Stage-1 attention-output MSE of one layer (hm-linearize --objective mse, the
 * LoLCATs attention transfer): adds Σ_t (1/d) Σ_j (a_tj − b_tj)² (double) to *loss and
 * writes da = scale · (2/d)(a − b) (the scale · ∂/∂a of that sum). For the mean over
 * tokens pass scale = 1/N (and divide the sum by N). d ≥ 1.
 *   loss: [1] backend memory  da: [N, d] or NULL  a: [N, d] student  b: [N, d] teacher */

/* [attn_ce_loss] Stage-1 attention-weight cross-entropy of one layer (hm-linearize
 * --objective attn-ce, the Hedgehog objective). Per head h and query t, the teacher's
 * causal softmax weights and the student's linear-attention weights over s ≤ t:
 *   P_ts = softmax_{s≤t}(q_t · k_s / sqrt(p))          (q, k rotated, as the teacher uses them)
 *   A_ts = e_ts / D_t,  e_ts = φq_t · φk_s,  D_t = Σ_{s≤t} e_ts + eps
 *   CE_th = −Σ_{s≤t} P_ts · log(A_ts + HM_ATTN_CE_DELTA)
 * (A is the normalized weight linattn_forward applies, eps included, no decay.) Adds
 * Σ_t (1/n_h) Σ_h CE_th (double; computed as (Σ_h Σ_t CE_th) / n_h) to *loss and writes
 * dphiq, dphik = scale · ∂/∂φ of that sum (=, not +=): with w_ts = P_ts / (A_ts + δ) and
 * C_t = Σ_s w_ts A_ts, ∂CE/∂e_ts = (C_t − w_ts) / D_t, then
 * dφq_t = Σ_{s≤t} (·) φk_s and dφk_s = Σ_{t≥s} (·) φq_t. O(T²) per head (the weights are never stored).
 *   loss: [1]  dphiq, dphik: [T, n_h, F2] or NULL (both NULL: the loss only)
 *   phiq, phik: [T, n_h, F2] (positive: Hedgehog maps are softmaxes)
 *   q, k: element (t, h, i) at q[t * qk_row_stride + h * qk_head_stride + i] (the fused qkv
 *         [T, n_h, 3, p] gives q = qkv, k = qkv + p, strides 3 n_h p and 3p)
 *   ws: [ws_size] bytes, ≥ hm_backend_attn_ce_loss_ws_size(...) */
#define HM_ATTN_CE_DELTA 1e-12

/* ---- HedgeMamba mixer (contract §3) ---------------------------------------------
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

/* [conv1d_forward] Causal depthwise conv, no activation:
 *   c[t, ch] = bias[ch] + Σ_{k<K} w[ch, k] x[t − (K−1) + k, ch] (x = 0 before t = 0)
 *   c, x: [T, C] contiguous rows (C = 3d for the fused qkv)
 *   w: [C, K]  bias: [C] or NULL (no bias). c must not alias x. */

/* [conv1d_backward] Conv backward: dx written; dw, dbias accumulate (+=); each may be NULL.
 *   dx: [T, C] or NULL  dw: [C, K] or NULL  dbias: [C] or NULL
 *   dc, x: [T, C] (x: the forward input)  w: [C, K] */

/* [conv1d_step] One token of the conv for generation: c_t = the conv output at the token
 * whose input is x_t, given the K−1 previous inputs in window (oldest
 * first; zero-initialized by the caller before the first token); then the
 * window is shifted in place (x_t enters last).
 *   c_t, x_t: [C]  window: [K − 1, C] (K = 1: unused)  w: [C, K]
 *   bias: [C] or NULL */

/* [softplus_forward] Δ = softplus(z) = log(1 + exp(z)), safe for large |z|.
 *   y, z: [n]; y may alias z */

/* [softplus_backward] dz = dy · sigmoid(z) (written).   dz, dy, z: [n]; dz may alias dy */

/* [silu_gate_forward] Gate: out = y ⊙ silu(z), silu(z) = z · sigmoid(z).   out, y, z: [n];
 * out may alias y or z */

/* [silu_gate_backward] dy = dout ⊙ silu(z), dz = dout ⊙ y ⊙ silu'(z) (written; each may be NULL,
 * and either one, not both, may alias dout).   dy, dz, dout, y, z: [n] */

/* [ssm_backward_ws_size] [ssm_ws_size] Bytes of workspace ssm_forward / ssm_backward need for these sizes (fast:
 * with the current thread count; a smaller workspace that still holds the
 * chunk states and one thread's scratch only lowers the parallelism).
 * chunk: 0 = HM_SSM_CHUNK_DEFAULT. */

/* [ssm_forward] Selective scan with the ones channel, per head h (state S [F2, p + 1],
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

/* [ssm_backward] Scan backward.
 *   dC, dB: [T, n_h, F2] or NULL (written)
 *   dv: same strided layout as v, or NULL (written; only the v columns)
 *   ddt: [T, n_h] or NULL (written)  dA, dD: [n_h] or NULL (+=)
 *   dy, y: [T, n_h * p] (y: the forward output)  den: [n_h, T] saved by the
 *   forward (required)  C, B, v, dt, A, D, sizes: as in the forward
 *   ws: [ws_size] bytes, ≥ hm_backend_ssm_backward_ws_size(...) */

/* [ssm_chunk_carry] Chunked prefill with a carried state: y [T, n_h p] and den [n_h, T] are a
 * chunk's ssm_forward (or linattn_forward) outputs computed from a zero
 * state; this adds the share of the state S [n_h, F2, p + 1] carried in
 * from before the chunk (decayed by Π α within the chunk), in place, and
 * advances S to the state after the chunk — what ssm_step would leave.
 * C, B: [T, n_h, F2]  v: rows as ssm_forward  dt: [T, n_h]  A, D: [n_h];
 * dt and A NULL: Δ = 1, A = 0 (Hedgehog's linear attention); D NULL: 0. */

/* [ssm_step] One token of the scan (recurrent form, generation), constant memory:
 * updates S in place and writes y_t as the forward would at that token.
 *   y_t: [n_h * p]  S: [n_h, F2, p + 1] (caller-owned, zeroed before the
 *   first token)  C_t, B_t: [n_h, F2]  v_t: [n_h * p]  dt_t: [n_h]
 *   A, D: [n_h] */

/* ---- llama family and decoding (contract §1b, §8) ---------------------------- */

/* [rmsnorm_forward] RMSNorm over the last dim: y = x / sqrt(mean(x²) + eps) * w (no bias, no
 * mean subtraction; the sum of squares in double).
 * y: [T, d] (may alias x)  rstd: [T] saved for backward (or NULL)  w: [d] */

/* [rmsnorm_backward] RMSNorm backward: dx written (may be NULL), dw += Σ dy ⊙ x·rstd (may be
 * NULL). dx: [T, d]  dy, x: [T, d]  rstd: [T]  w: [d] */

/* [qkv_expand_forward] Grouped-query attention layout: from the projection output x [T, (n_h +
 * 2 n_kv)·p] = [q | k | v] to per-query-head triples y [T, n_h, 3, p]
 * (q_h, k_g(h), v_g(h), g(h) = h / (n_h / n_kv)) — the fused interleaved
 * layout every mixer op reads (row stride 3 n_h p, head stride 3p).
 * n_h must be a multiple of n_kv. */

/* [qkv_expand_backward] Its transpose: dx [T, (n_h + 2 n_kv)·p] written; each key/value head gets
 * the sum over its query-head group.  dy: [T, n_h, 3, p] */

/* Floats of scratch attention_cached needs: n · max(T, n_h) with n = P0 + T
 * the cached positions (T ≥ 1). The same for every backend, a pure function
 * of the shapes. */
int64_t hm_backend_attention_cached_scratch_floats(int64_t T, int64_t n, int64_t n_h);

/* [attention_cached] Causal softmax attention of T new query rows against a KV cache (a
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

/* ---- training and utility ops -------------------------------------------- */

/* [adamw_step] AdamW on one tensor (contract §4): ĝ = g·scale; w ← w·decay; m ← β1 m + (1−β1) ĝ;
 * v ← β2 v + (1−β2) ĝ²; w ← w − step_size · m / (sqrt(v)/bc2_sqrt + ε).
 * w, m, v: [n] updated; g: [n] read only (not scaled in place: one memory
 * stream less for a memory-bound op). */

/* [sgd_step] w ← w − lr·g.   w, g: [n] */

/* [sqnorm] *acc += Σ x² (summed in double).   acc: [1] backend memory  x: [n] */

/* [first_nonfinite] *index = the index of the first NaN/Inf of x [n], or −1.
 * index: [1] backend memory */

/* [kl_backward] The distillation term of T rows at temperature tau > 0 (contract §10): adds
 * Σ_t τ²·KL(p_t ‖ p_s) to *loss (p = softmax of tlogits/τ, resp. logits/τ, in double) and adds
 * w·scale·τ·(p_s − p_t) to dlogits: the gradient of w·scale·τ²·KL. The logits are divided by τ
 * (a division: exact at τ = 1, where the op is the plain KL of §3 bit for bit).
 * loss: [1] backend memory  dlogits, logits, tlogits: [T, V] */

/* [fill] x[i] = value.   x: [n] */

/* [copy2d] rows × cols floats from src (row stride src_stride) to dst (dst_stride). */

/* [clamp] x[i] = min(max(x[i], lo), hi).   x: [n] */

/* ---- memory ------------------------------------------------------------------
 * Buffers the ops read and write. ref's and fast's are host memory
 * (malloc); checked's are guarded pages; a device backend's are device
 * memory. Host code moves bytes only with upload (host → buffer) and
 * download (buffer → host), whatever the backend, so one code path serves
 * them all. */

/* bytes of backend memory, or NULL when out of memory. owned: free with
 * hm_backend_free(). */
void *hm_backend_alloc(const struct hm_backend *be, size_t bytes);
/* Frees *p (NULL ok) and sets *p = NULL. */
void hm_backend_free(const struct hm_backend *be, void **p);
void hm_backend_upload(const struct hm_backend *be, void *dst, const void *src, size_t bytes);
void hm_backend_download(const struct hm_backend *be, void *dst, const void *src, size_t bytes);
/* alloc + upload of bytes from src: owned, free with hm_backend_free();
 * NULL when out of memory. */
void *hm_backend_alloc_copy(const struct hm_backend *be, const void *src, size_t bytes);
/* 1 when be's memory is plain host memory (malloc/free/memcpy: ref, fast),
 * so a host buffer may be adopted as be's without a copy (hm_model_place);
 * 0 for guarded (checked) or device memory. */
int hm_backend_host_memory(const struct hm_backend *be);

#endif
