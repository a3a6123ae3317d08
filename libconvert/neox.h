/* neox.h — the GPT-NeoX skeleton in fp32 (SPEC §1), with its mixer chosen
 * by cfg.arch: gpt_neox = causal softmax attention (the teacher); hedgehog =
 * Hedgehog feature maps + causal linear attention (SPEC §2); hedgemamba =
 * conv, feature maps, selective SSM scan with the ones channel and SiLU
 * gate (SPEC §3). Everything else (embeddings, norms, qkv, dense, MLP,
 * residuals) is shared.
 *
 * Weights are loaded from a struct hm_ckpt (any dtype the checkpoint reader
 * converts: F32, F16, BF16), converted to fp32 and owned by the model. The
 * legacy buffers of real Pythia files (attention.bias, masked_bias,
 * rotary_emb.inv_freq) are ignored; inv_freq is recomputed in fp32 exactly
 * as HF does (hm_rotary_inv_freq).
 *
 * Forward runs one sequence at a time (positions 0..T-1) on any backend
 * (kernels/backend.h); a batch is a loop over sequences. All activations
 * live in a caller-owned struct hm_neox_ws that grows to the largest T seen
 * and is reused, so steady-state calls do not allocate.
 *
 * Per layer l (d = hidden, p = head dim, r = rotary dims):
 *   a = LN1(h); qkv = a Wqkv^T + b (fused, interleaved per head);
 *   rotary on q, k; att = causal softmax attention; o = att Wdense^T + b;
 *   parallel:   h = (mlp(LN2(h)) + o) + h
 *   sequential: t = o + h; h = mlp(LN2(t)) + t
 *   mlp(x) = gelu(x W1^T + b1) W2^T + b2 (erf or tanh form per hidden_act).
 * logits = final_LN(h) embed_out^T.
 */
#ifndef HM_NEOX_H
#define HM_NEOX_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "checkpoint.h"
#include "config.h"
#include "hm_error.h"

/* One layer's weights; borrowed views into the model's storage. */
struct hm_neox_layer {
    float *ln1_w, *ln1_b;     /* input_layernorm            [d], [d] */
    float *ln2_w, *ln2_b;     /* post_attention_layernorm   [d], [d] */
    float *qkv_w, *qkv_b;     /* attention.query_key_value  [3d, d], [3d] */
    float *dense_w, *dense_b; /* attention.dense            [d, d], [d] */
    float *fc1_w, *fc1_b;     /* mlp.dense_h_to_4h          [I, d], [I] */
    float *fc2_w, *fc2_b;     /* mlp.dense_4h_to_h          [d, I], [d] */
    /* Hedgehog feature maps (arch hedgehog and hedgemamba; NULL otherwise),
     * SPEC §2: attention.feature_map_{q,k}.weight [n_h, p, F], .bias [n_h, F] */
    float *fq_w, *fq_b, *fk_w, *fk_b;
    /* HedgeMamba mixer (arch hedgemamba; NULL otherwise), SPEC §3 */
    float *conv_w, *conv_b;   /* attention.conv1d       [3d, K], [3d] */
    float *dt_w, *dt_b;       /* attention.dt_proj      [n_h, d], [n_h] */
    float *A, *D;             /* attention.A, .D        [n_h], [n_h] */
    float *gate_w, *gate_b;   /* attention.gate_proj    [d, d], [d] */
};

/* Identity values of the mapping (SPEC §3): Δ = softplus(ln(e − 1)) = 1 and
 * silu(1.2784645427610738) = 1. */
#define HM_DT_BIAS_IDENTITY 0.5413248546129181
#define HM_GATE_BIAS_IDENTITY 1.2784645427610738

struct hm_neox {
    struct hm_config cfg;         /* arch gpt_neox, finished */
    float *embed_in;              /* [V, d] */
    struct hm_neox_layer *layers; /* [num_hidden_layers] */
    float *lnf_w, *lnf_b;         /* final_layer_norm [d], [d] */
    float *embed_out;             /* [V, d] */
    float *inv_freq;              /* [r/2] rotary inverse frequencies (fp32, HF) */
    float *storage;               /* the one allocation behind every tensor */
    int64_t n_params;             /* floats in storage, inv_freq excluded */
};

/* A model with every weight zero (callers fill them: tests, benchmarks),
 * except the mixer extras, which start at their identity values: feature
 * maps W = eye(p, F), b = 0 (SPEC §2); conv last tap 1, dt_proj bias
 * ln(e − 1), A = D = 0, gate_proj bias 1.2784645427610738 (SPEC §3).
 * cfg must be finished. out: owned, free with hm_neox_free(). */
enum hm_status hm_neox_new(const struct hm_config *cfg, struct hm_neox **out,
                           struct hm_error *err);

/* Loads every tensor of SPEC §1 from ck (arch must be gpt_neox). A missing
 * or misshaped tensor fails with a message naming it. out: owned, free with
 * hm_neox_free(). */
enum hm_status hm_neox_load(const struct hm_ckpt *ck, struct hm_neox **out,
                            struct hm_error *err);

void hm_neox_free(struct hm_neox *m); /* accepts NULL */

/* Activation buffers of one sequence. Zero-initialize ({0}) or call
 * hm_neox_ws_init; buffers are allocated on first use and grow to the
 * largest T; free with hm_neox_ws_release(). One ws per thread of callers. */
struct hm_neox_ws {
    int64_t T_cap;      /* rows the buffers hold */
    int64_t d, I, V;    /* sizes they were made for */
    float *h;           /* [T, d] residual stream */
    float *a;           /* [T, d] LN1 output (attention input) */
    float *qkv;         /* [T, 3d] */
    float *att;         /* [T, d] merged heads */
    float *o;           /* [T, d] attention output after dense */
    float *a2;          /* [T, d] LN2 output */
    float *mh;          /* [T, I] MLP hidden */
    float *m;           /* [T, d] MLP output */
    float *hf;          /* [T, d] final LayerNorm output */
    float *logits;      /* [HM_NEOX_NLL_ROWS, V] chunk used by hm_neox_nll */
    float *phiq, *phik; /* [T, n_h, 2F] feature maps (hedgehog, hedgemamba) */
    float *xraw;        /* [T, 3d] qkv before the conv (hedgemamba) */
    float *dt;          /* [T, n_h] Δ (hedgemamba) */
    float *z;           /* [T, d] gate pre-activation (hedgemamba) */
    float *y;           /* [T, d] scan output before the gate (hedgemamba) */
    void *att_ws;       /* attention / linear-attention workspace */
    size_t att_ws_size;
};

/* Chunk length of the chunked linear attention (0 = the backend's default,
 * HM_LINATTN_CHUNK_DEFAULT). */
#define HM_LINATTN_CHUNK 0
/* ε of the linear-attention normalizer (SPEC §2). */
#define HM_LINATTN_EPS 1e-6f

/* Rows of logits hm_neox_nll materializes at a time. */
#define HM_NEOX_NLL_ROWS 64

void hm_neox_ws_init(struct hm_neox_ws *ws);
/* Makes ws ready for sequences of up to T tokens on backend be
 * (optional: forward calls it). */
enum hm_status hm_neox_ws_reserve(struct hm_neox_ws *ws, const struct hm_neox *m,
                                  const struct hm_backend *be, int64_t T,
                                  struct hm_error *err);
void hm_neox_ws_release(struct hm_neox_ws *ws); /* frees the buffers; NULL ok */

/* Called after each layer's attention (stage 1 reads the teacher here):
 *   a_in: [T, d] the layer's LN1 output; qkv: [T, 3d] its fused q, k, v
 *   after rotary; attn_out: [T, d] attention output after dense, before the
 *   residual add. All borrowed for the call only.
 * A non-HM_OK return stops the forward pass with that status (the hook fills
 * err). */
typedef enum hm_status (*hm_neox_layer_fn)(void *ctx, int64_t layer, const float *a_in,
                                           const float *qkv, const float *attn_out, int64_t T,
                                           int64_t d, struct hm_error *err);

/* The attention/mixer block of one layer for m's arch: ws->a [T, d] (the
 * LN1 output) → ws->qkv (rotated, after the conv for hedgemamba), ws->att
 * (dense input) and ws->o [T, d] (after dense). ws must be reserved for T. */
void hm_neox_mixer_block(const struct hm_neox *m, const struct hm_backend *be, int64_t layer,
                         int64_t T, struct hm_neox_ws *ws);

/* Set a layer's mixer extras to their identity values (see hm_neox_new). */
void hm_neox_mixer_identity(struct hm_neox *m, int64_t layer);

struct hm_neox_hooks {
    hm_neox_layer_fn on_layer; /* may be NULL */
    void *ctx;
    /* 1: stop right after the last layer's hook (its MLP and the final
     * LayerNorm are skipped; ws->hf is not computed) — stage 1 needs only
     * the attention blocks. */
    int stop_after_last_hook;
};

/* Runs the layers and the final LayerNorm on tokens: [T] (each < V).
 * The result is ws->hf: [T, d] (borrowed until the next call on ws).
 * hooks may be NULL. */
enum hm_status hm_neox_hidden(const struct hm_neox *m, const struct hm_backend *be,
                              const int32_t *tokens, int64_t T, struct hm_neox_ws *ws,
                              const struct hm_neox_hooks *hooks, struct hm_error *err);

/* logits: [T, V] for tokens: [T] at positions 0..T-1. */
enum hm_status hm_neox_forward(const struct hm_neox *m, const struct hm_backend *be,
                               const int32_t *tokens, int64_t T, float *logits,
                               struct hm_neox_ws *ws, struct hm_error *err);

/* nll: [T], nll[t] = −log softmax(logits[t])[targets[t]] for tokens: [T] and
 * targets: [T] (each < V). Logits are made HM_NEOX_NLL_ROWS rows at a time. */
enum hm_status hm_neox_nll(const struct hm_neox *m, const struct hm_backend *be,
                           const int32_t *tokens, const int32_t *targets, int64_t T,
                           float *nll, struct hm_neox_ws *ws, struct hm_error *err);

/* Forward FLOPs per token at sequence length T, counted as BENCH.md: 2N per
 * weight-matrix entry (qkv, dense, fc1, fc2 of every layer, embed_out;
 * embed_in is a lookup and costs nothing) plus 4·T·d per layer for causal
 * softmax attention (the full T×T square). Norms, activations, softmax,
 * rotary and biases are not counted. */
double hm_neox_flops_per_token(const struct hm_config *cfg, int64_t T);

#endif
