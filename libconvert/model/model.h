/* model.h — one model for every family × mixer (contract §1, §1b, §2, §3), fp32.
 *
 * The family (cfg.family: neox, llama) fixes the skeleton around the mixer:
 * its norm (LayerNorm / RMSNorm), MLP (GELU / SwiGLU), residual (parallel /
 * sequential) and the layout of its q/k/v projection (NeoX: one fused
 * interleaved [3d, d]; llama: q_proj, k_proj, v_proj stored back to back
 * and run as one matmul giving [q | k | v], expanded per query head for
 * grouped-query attention). The mixer (cfg.mixer: softmax, hedgehog,
 * hedgemamba) is chosen independently; every mixer op reads the per-head
 * interleaved layout [T, n_h, 3, p], so each exists for both families.
 *
 * Every tensor comes from the one table in params.c: the storage is carved
 * in table order, the struct pointers below and the views are set from it,
 * and loading/saving walk it.
 *
 * Weights are loaded from a struct hm_ckpt (F32, F16, BF16), converted to
 * fp32 and owned by the model. Legacy buffers (attention.bias, masked_bias,
 * rotary_emb.inv_freq) are ignored; inv_freq is recomputed in fp32 exactly
 * as HF does (hm_model_inv_freq: the default plus llama3 scaling).
 *
 * Forward (forward/model_forward.h over the skeleton of forward/forward.h)
 * runs B sequences of T tokens at once as N = B·T rows (each
 * sequence at positions 0..T-1, independent of the others; B = 1 is the
 * single-sequence form) on any backend (kernels/backend.h): the row-wise
 * products see all N rows, the mixer runs per sequence. All activations
 * live in a caller-owned struct hm_model_ws that grows to the largest B·T
 * seen and is reused, so steady-state calls do not allocate.
 *
 * Per layer l (d = hidden, p = head dim, r = rotary dims):
 *   a = norm1(h); proj = a Wqkv^T + b; (hedgemamba: causal conv over proj);
 *   heads = proj (neox) or expand(proj) (llama); rotary on q, k of heads;
 *   att = mixer(heads); o = att Wdense^T + b;
 *   parallel:   h = (mlp(norm2(h)) + o) + h
 *   sequential: t = o + h; h = mlp(norm2(t)) + t
 *   mlp(x) = gelu(x W1^T + b1) W2^T + b2 (neox) or
 *            (silu(x Wg^T) ⊙ x W1^T) W2^T (llama SwiGLU).
 * logits = normF(h) embed_out^T (llama tied: embed_out is embed_in).
 */
#ifndef HM_MODEL_H
#define HM_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "checkpoint.h"
#include "config.h"
#include "hm_error.h"
#include "params.h"

/* One layer's weights; borrowed views into the model's storage (NULL when
 * the family or mixer has no such tensor). Names per family in params.c. */
struct hm_layer {
    float *ln1_w, *ln1_b;     /* norm before the mixer      [d], [d] (llama: no bias) */
    float *ln2_w, *ln2_b;     /* norm before the MLP        [d], [d] */
    float *qkv_w, *qkv_b;     /* q/k/v projection           [qkv_dim, d], [qkv_dim] */
    float *dense_w, *dense_b; /* attention.dense / o_proj   [d, n_h p], [d] */
    /* Hedgehog feature maps (hedgehog and hedgemamba), contract §2:
     * feature_map_{q,k}.weight [n_h, p, F], .bias [n_h, F] */
    float *fq_w, *fq_b, *fk_w, *fk_b;
    /* HedgeMamba mixer (hedgemamba), contract §3 */
    float *conv_w, *conv_b;   /* conv1d       [qkv_dim, K], [qkv_dim] */
    float *dt_w, *dt_b;       /* dt_proj      [n_h, d], [n_h] */
    float *A, *D;             /* A, D         [n_h], [n_h] */
    float *gate_w, *gate_b;   /* gate_proj    [n_h p, d], [n_h p] */
    float *fcg_w, *fcg_b;     /* llama mlp.gate_proj [I, d], [I] */
    float *fc1_w, *fc1_b;     /* dense_h_to_4h / up_proj   [I, d], [I] */
    float *fc2_w, *fc2_b;     /* dense_4h_to_h / down_proj [d, I], [d] */
};

/* One tensor of a model: its table entry and its storage. */
struct hm_tensor_view {
    struct hm_param_spec spec; /* name, ndim, shape, group, layer, is_matrix, slot */
    float *data;               /* borrowed from the model's storage; a narrow tensor's
                                * points into the widened-layer buffer (valid only while
                                * hm_model_widen_layer has its layer there) */
    int64_t numel;
    const uint16_t *narrow;    /* [numel] bf16/f16 bits in the backend's memory when the
                                * tensor is kept narrow (hm_model_load_narrow), else NULL */
};

/* The narrow part of a model (hm_model_load_narrow): its frozen layer
 * matrices in the checkpoint's dtype and the one buffer a layer is widened
 * into before the ops read it. Owned by the model, in m->be's memory. */
struct hm_model_narrow {
    enum hm_narrow kind;
    uint16_t *bits;      /* [n_bits] every narrow tensor, table order */
    int64_t n_bits;
    float *wide;         /* [n_wide] one layer's narrow tensors widened, table order */
    int64_t n_wide;
    int64_t layer;       /* the layer now in wide, −1 none (the forward's state: a
                          * narrow model runs one forward at a time) */
    const uint16_t *embed; /* [V, d] in bits when the embeddings are narrow, else NULL
                            * (m->embed_in is then NULL: hm_model_embed reads them) */
    const uint16_t *head;  /* [V, d] the same for the output head (= embed when tied) */
    float *tmp;          /* [n_tmp] one tile of the head's logits (hm_model_head) */
    int64_t n_tmp;
    int32_t *col_ids;    /* [V] v·(d/col_w): a column block of the head as rows of the
                          * bits viewed [V·d/col_w, col_w] (hm_model_head_backward);
                          * NULL when the model is only run */
    int64_t col_w;
};

/* The narrow head is widened HM_HEAD_MIN_ROWS rows or more at a time (as
 * many as wide holds), its logits made HM_HEAD_TMP_FLOATS at a time. */
#define HM_HEAD_MIN_ROWS 1024
#define HM_HEAD_TMP_FLOATS (4 << 20)
/* A trainee's narrow head is widened for its backward HM_HEAD_BW_COLS
 * columns at a time (the largest divisor of d up to it): [V, col_w]. */
#define HM_HEAD_BW_COLS 128

/* One layer's activations for N = B·T rows. Training keeps one per layer
 * (what backward reads); inference points every layer at the same one and
 * leaves the statistics NULL. Shapes: d hidden, Da = n_h p, Q = qkv_dim. */
struct hm_layer_acts {
    float *h;             /* [N, d] residual stream entering the layer */
    float *mean1, *rstd1; /* [N] norm1 statistics (or NULL) */
    float *a;             /* [N, d] norm1 output: the mixer input */
    float *xraw;          /* [N, Q] projection before the conv (hedgemamba) */
    float *proj;          /* [N, Q] projection (after the conv); neox: == qkv */
    float *qkv;           /* [N, 3 Da] per-head q, k, v, rotated */
    float *att;           /* [N, Da] merged heads: the dense input */
    float *lse;           /* [B, n_h, T] softmax log-sum-exp / linear denominators (or NULL) */
    float *phiq, *phik;   /* [N, n_h, 2F] feature maps (hedgehog, hedgemamba) */
    float *lsave;         /* [B, hm_linattn_saved_floats(T, ...)] chunk states the linear
                           * attention forward leaves for its backward (hedgehog when
                           * training; NULL: the backward recomputes them) */
    float *dtz, *dt;      /* [N, n_h] Δ before / after softplus (hedgemamba; may alias) */
    float *z, *y;         /* [N, Da] gate pre-activation, scan output (hedgemamba) */
    float *t;             /* [N, d] sequential residual h + o (inference: == h) */
    float *mean2, *rstd2; /* [N] norm2 statistics (or NULL) */
    float *a2;            /* [N, d] norm2 output */
    float *mh, *mg;       /* [N, I] MLP up / SwiGLU gate pre-activations */
};

/* Identity values of the mapping (contract §3): Δ = softplus(ln(e − 1)) = 1 and
 * silu(1.2784645427610738) = 1. */
#define HM_DT_BIAS_IDENTITY 0.5413248546129181
#define HM_GATE_BIAS_IDENTITY 1.2784645427610738

struct hm_model {
    struct hm_config cfg;         /* finished */
    float *embed_in;              /* [V, d] */
    struct hm_layer *layers;      /* [num_hidden_layers] */
    float *lnf_w, *lnf_b;         /* final norm [d], [d] (llama: no bias) */
    float *embed_out;             /* [V, d]; tied llama: == embed_in */
    float *inv_freq;              /* [r/2] rotary inverse frequencies (fp32, HF) */
    float *storage;               /* the one allocation behind every tensor: host memory,
                                   * or be's once placed (hm_model_place) */
    const struct hm_backend *be;  /* borrowed: where storage and inv_freq live; NULL = host */
    int64_t n_params;             /* floats in storage, inv_freq excluded */
    struct hm_tensor_view *views; /* [n_views] every tensor, hm_param_specs order */
    int64_t n_views;
    struct hm_model_narrow *narrow; /* owned; NULL: every weight is fp32 in storage */
    int scanned;                  /* hm_model_load_narrow found bad_view while loading */
    int64_t bad_view, bad_at;     /* the first view holding a NaN or Inf and its element
                                   * (−1: none), when scanned */
    const struct hm_model *base;  /* borrowed (hm_model_extend): the model whose tensors
                                   * and narrow part this one shares; NULL: owns all */
};

/* A model with every weight zero (callers fill them: tests, benchmarks),
 * except the mixer extras, which start at their identity values: feature
 * maps W = eye(p, F), b = 0 (contract §2); conv last tap 1, dt_proj bias
 * ln(e − 1), A = D = 0, gate_proj bias 1.2784645427610738 (contract §3).
 * cfg must be finished. out: owned, free with hm_model_free(). */
enum hm_status hm_model_new(const struct hm_config *cfg, struct hm_model **out,
                           struct hm_error *err);
/* As hm_model_new, but every tensor marked in skip[i] (hm_param_specs order)
 * gets no storage: its view's data and its slot are NULL (a trainer's
 * gradients leave out the frozen embeddings: no op writes them). */
enum hm_status hm_model_new_without(const struct hm_config *cfg, const unsigned char *skip,
                                    struct hm_model **out, struct hm_error *err);

/* HM_OK when every tensor of ck belongs to the model its config describes
 * (legacy buffers aside); else an error counting the others and naming the
 * first — e.g. a hedgemamba file whose hm.config says gpt_neox, which would
 * otherwise load as a teacher and drop the mixer's tensors. Every loader
 * (hm_model_load, hm_map_ssm_write, hm_bundle_pack) checks it. */
enum hm_status hm_model_check_tensors(const struct hm_ckpt *ck, struct hm_error *err);

/* Loads every tensor of cfg's family × mixer from ck (hm_model_check_tensors
 * first: no tensor may be left over). A missing or misshaped tensor fails
 * with a message naming it. out: owned, free with hm_model_free(). */
enum hm_status hm_model_load(const struct hm_ckpt *ck, struct hm_model **out,
                            struct hm_error *err);
/* The same with another config cfg (finished) whose tensors ck holds: e.g.
 * the softmax teacher inside a hedgehog checkpoint (its skeleton). */
enum hm_status hm_model_load_as(const struct hm_ckpt *ck, const struct hm_config *cfg,
                                struct hm_model **out, struct hm_error *err);

/* A frozen model loaded straight into be's memory at the width it needs:
 * when every 2-D layer tensor of ck is bf16 (or every one f16), they stay
 * in that dtype (m->narrow) and a layer is widened into one fp32 buffer
 * when the forward reaches it (hm_model_widen_layer); everything else is
 * fp32. Widening is exact, so every result equals hm_model_load's + place
 * bit for bit. Peak memory: the narrow weights, the fp32 rest, one layer
 * widened; a host-memory backend adopts the fp32 part without a copy and
 * the checkpoint's pages are released tensor by tensor. For models that
 * are only run (hm-eval, hm-generate, teachers): a narrow tensor has no
 * host-writable fp32 copy. Another checkpoint (fp32, mixed) loads as
 * hm_model_load_as + hm_model_place. out: owned, free with hm_model_free(). */
enum hm_status hm_model_load_narrow(const struct hm_ckpt *ck, const struct hm_config *cfg,
                                    const struct hm_backend *be, struct hm_model **out,
                                    struct hm_error *err);

/* A trainee whose embeddings are frozen, loaded into be: every tensor is
 * fp32 and host-writable as hm_model_load's (it trains), but bf16/f16
 * embeddings (and an untied head) stay narrow: hm_model_embed widens their
 * rows, hm_model_head and hm_model_head_backward tiles of them, every
 * result the fp32 copy's (bit for bit on ref). hm_model_save writes them
 * from their bits. fp32 embeddings load as hm_model_load + place.
 * out: owned, free with hm_model_free(). */
enum hm_status hm_model_load_trainee(const struct hm_ckpt *ck, const struct hm_backend *be,
                                     struct hm_model **out, struct hm_error *err);

/* A KD teacher: hm_model_load_narrow(ck, its own config, be), except that
 * narrow embeddings (and head) stored in trainee's narrow kind with the
 * very bytes trainee keeps narrow under the same name are borrowed from
 * trainee, not loaded (a student distilled with frozen embeddings holds the
 * teacher's own: one copy). trainee must outlive it. */
enum hm_status hm_model_load_teacher(const struct hm_ckpt *ck, const struct hm_model *trainee,
                                     const struct hm_backend *be, struct hm_model **out,
                                     struct hm_error *err);

/* A model of cfg that shares every tensor base has (same name and size:
 * base's storage or narrow bits, borrowed) and owns only the rest, fp32 at
 * its identity values on base->be: stage 1's student is the teacher plus
 * its feature maps. base must outlive it and must not be run by another
 * forward at the same time (they share the widened layer). out: owned,
 * free with hm_model_free() (which frees only what it owns). */
enum hm_status hm_model_extend(const struct hm_model *base, const struct hm_config *cfg,
                               struct hm_model **out, struct hm_error *err);

/* Makes layer l's weights readable as fp32 through m->layers[l] on m->be:
 * widens its narrow tensors into m->narrow->wide unless l is there already.
 * No-op for a model without narrow tensors. The skeleton calls it before
 * each layer (forward/forward.c); so must any code that reads a layer's
 * weights outside the skeleton. */
void hm_model_widen_layer(const struct hm_model *m, int64_t l);

/* y[N, d] = the embedding rows of tokens[N] (backend memory, each < V),
 * widened exactly when m keeps its embeddings narrow. The skeleton's one
 * embedding lookup (forward/forward.c). */
void hm_model_embed(const struct hm_model *m, float *y, const int32_t *tokens, int64_t N);

/* y[N, V] = h[N, d] · W_outᵀ, the output head (no bias), every caller's
 * logits. A narrow head is widened a tile of rows at a time into
 * m->narrow->wide (so the layer there is gone: the next forward widens its
 * layer again) and multiplied tile by tile; each logit is the same dot
 * product over d as the fp32 head's. */
void hm_model_head(const struct hm_model *m, float *y, const float *h, int64_t N);

/* dx[N, d] = dy[N, V] · W_out (written), the head's input gradient when the
 * head does not train. A narrow head (hm_model_load_trainee) is widened
 * col_w columns at a time, [V, col_w], so each dx value is the same one sum
 * over V as the fp32 head's (ref: bit for bit). */
void hm_model_head_backward(const struct hm_model *m, float *dx, const float *dy, int64_t N);

/* Bytes of m's weights in memory: fp32 storage plus narrow bits plus the
 * widened-layer buffer (what a plan counts). */
double hm_model_weight_bytes(const struct hm_model *m);

/* What hm_model_load_narrow(ck, cfg) (trainee 0) or hm_model_load_trainee
 * (trainee 1) will hold, from ck's header alone (no
 * weight is read): *f32 bytes of fp32 tensors, *narrow bytes of bf16/f16
 * layer matrices and embeddings kept narrow (0 for an fp32 checkpoint),
 * *wide bytes of the one widened layer and, when head (the run computes
 * logits: hm_model_head), the head's tile and scratch (memory never touched
 * otherwise); *kind the narrow dtype (HM_DTYPE_F32 when none).
 * -1 when cfg's tensor table cannot be made. */
int hm_model_narrow_plan(const struct hm_ckpt *ck, const struct hm_config *cfg, int trainee,
                         int head, double *f32, double *narrow, double *wide,
                         enum hm_dtype *kind);

void hm_model_free(struct hm_model *m); /* accepts NULL */

/* Moves m's weights (storage, inv_freq) into be's memory, or back to host
 * memory with be = NULL; every view and slot follows. A model is built and
 * loaded in host memory (conversions edit it there) and placed on a
 * backend before its ops run; ops reject it otherwise (the checked backend
 * proves it). No-op when already there; between host memories (host, ref,
 * fast: hm_backend_host_memory) the buffers are adopted without a copy. */
enum hm_status hm_model_place(struct hm_model *m, const struct hm_backend *be,
                              struct hm_error *err);
/* HM_OK when m is placed on be, else HM_ERR_INVALID saying where it is. */
enum hm_status hm_model_check_placed(const struct hm_model *m, const struct hm_backend *be,
                                     struct hm_error *err);

/* The first tensor of m holding a NaN or Inf (borrowed name), *index its
 * first such element; NULL when every weight is finite. Tools warn on it
 * at load. */
const char *hm_model_first_nonfinite(const struct hm_model *m, int64_t *index);

/* Activation buffers of B sequences of T tokens (N = B·T rows; owned by
 * the ws). Zero-initialize ({0}) or call hm_model_ws_init; buffers are
 * allocated on first use and grow to the largest N and B; free with
 * hm_model_ws_release(). One ws per thread of callers. */
struct hm_model_ws {
    int64_t T_cap;      /* rows N the buffers hold */
    int64_t B_cap;      /* sequences the logits chunk is made for */
    int64_t d, I, V;    /* sizes they were made for */
    float *h;           /* [N, d] residual stream */
    float *a;           /* [N, d] LN1 output (attention input) */
    float *proj;        /* [N, qkv_dim] projection output (after the conv) */
    float *qkv;         /* [N, 3 n_h p] per-head q, k, v (neox: == proj) */
    float *att;         /* [N, n_h p] merged heads */
    float *o;           /* [N, d] attention output after dense */
    float *a2;          /* [N, d] LN2 output */
    float *mh;          /* [N, I] MLP hidden */
    float *mg;          /* [N, I] SwiGLU gate pre-activation (llama) */
    float *m;           /* [N, d] MLP output */
    float *hf;          /* [N, d] final LayerNorm output */
    float *logits;      /* [B HM_MODEL_NLL_ROWS, V] chunk used by hm_model_nll_batch */
    float *phiq, *phik; /* [N, n_h, 2F] feature maps (hedgehog, hedgemamba) */
    float *xraw;        /* [N, qkv_dim] projection before the conv (hedgemamba) */
    float *dt;          /* [N, n_h] Δ (hedgemamba) */
    float *z;           /* [N, n_h p] gate pre-activation (hedgemamba) */
    float *y;           /* [N, n_h p] scan output before the gate (hedgemamba) */
    int32_t *ids, *tg;  /* [N] token ids and targets, uploaded from the caller's */
    float *nll;         /* [N] per-token NLLs before their download */
    float *out;         /* [out_cap] full logits before their download (forward_batch) */
    int64_t out_cap;
    const struct hm_backend *be; /* borrowed: the backend every buffer here lives on */
    void *att_ws;       /* attention / linear-attention workspace (one sequence of T) */
    size_t att_ws_size;
    struct hm_layer_acts acts; /* the buffers above as the skeleton's (shared) layer */
};

/* Chunk length of the chunked linear attention (0 = the backend's default,
 * HM_LINATTN_CHUNK_DEFAULT). */
#define HM_LINATTN_CHUNK 0
/* ε of the linear-attention normalizer (contract §2). */
#define HM_LINATTN_EPS 1e-6f

/* Rows of logits hm_model_nll_batch materializes at a time, per sequence
 * of the batch (B·HM_MODEL_NLL_ROWS rows). */
#define HM_MODEL_NLL_ROWS 64

void hm_model_ws_init(struct hm_model_ws *ws);
/* Makes ws ready for B sequences of up to T tokens each on backend be
 * (optional: forward calls it). hm_model_ws_reserve is B = 1. */
enum hm_status hm_model_ws_reserve_batch(struct hm_model_ws *ws, const struct hm_model *m,
                                         const struct hm_backend *be, int64_t B, int64_t T,
                                         struct hm_error *err);
enum hm_status hm_model_ws_reserve(struct hm_model_ws *ws, const struct hm_model *m,
                                  const struct hm_backend *be, int64_t T,
                                  struct hm_error *err);
/* Bytes hm_model_ws_reserve_batch allocates for B sequences of T tokens of
 * cfg (activations, the logits chunk and the mixer workspace); SIZE_MAX when
 * that overflows. Tools size their batches with it. */
size_t hm_model_ws_bytes(const struct hm_config *cfg, const struct hm_backend *be, int64_t B,
                         int64_t T);
void hm_model_ws_release(struct hm_model_ws *ws); /* frees the buffers; NULL ok */

/* Windows per forward pass when a tool evaluates `windows` windows of T
 * tokens and the user did not say: as many as fit HM_EVAL_BATCH_BYTES of
 * workspace (hm_model_ws_bytes), at least 1, at most HM_EVAL_BATCH_MAX and
 * windows. hm-eval and hm-verify logits both use it, so a logits dump and
 * its check batch the same windows together (batches change the last bits
 * of the fast products). */
#define HM_EVAL_BATCH_BYTES ((size_t)256 << 20)
#define HM_EVAL_BATCH_MAX 8
int64_t hm_model_eval_batch(const struct hm_config *cfg, const struct hm_backend *be, int64_t T,
                            int64_t windows);

/* Bytes of workspace the forward of cfg's mixer needs for T tokens. */
size_t hm_model_mixer_ws_size(const struct hm_config *cfg, const struct hm_backend *be,
                              int64_t T);

/* Rotary inverse frequencies of cfg [r/2]: HF's fp32 default, with the llama3
 * rope_scaling applied when configured (HF _compute_llama3_parameters). */
void hm_model_inv_freq(const struct hm_config *cfg, float *inv_freq);

/* Forward FLOPs per token at sequence length T, counted as BENCH.md: 2N per
 * weight-matrix entry (qkv, dense, fc1, fc2 of every layer, embed_out;
 * embed_in is a lookup and costs nothing) plus the mixer's own per layer
 * (hm_mixer_unit()->flops_per_token: causal softmax attention 4·T·d, the
 * full T×T square; the students' chunked form as perf_torch.py counts it).
 * Norms, activations, softmax, rotary and biases are not counted. */
double hm_model_flops_per_token(const struct hm_config *cfg, int64_t T);

#endif
