/* forward.h — the one forward skeleton of every family × mixer (contract §1,
 * §1b): embeddings, then per layer norm1 → q/k/v projection (the mixer's
 * own when it has one: the HedgeMamba conv) → GQA expansion (llama) →
 * rotary → the mixer unit (mixer.h) → dense → residual → norm2 → MLP →
 * residual. Inference, training, stage 1 (through hooks) and decoding
 * (T = 1 rows of B sequences, each with its per-layer states; prefill
 * chunks of one sequence) all run it; the backward mirror is in
 * trainer.c. The final norm and the output layer belong to the callers.
 *
 * Residual order (HF, to the last ulp): parallel h' = (mlp + o) + h;
 * sequential t = o + h, h' = mlp + t. */
#ifndef HM_FORWARD_H
#define HM_FORWARD_H

#include "mixer.h"
#include "model.h"

/* Called after each layer's attention (stage 1 reads the teacher here):
 *   a_in: [T, d] the layer's norm1 output; qkv: [T, n_h, 3, p] its per-head
 *   q, k, v after rotary (row stride 3 n_h p, head stride 3p); attn_out:
 *   [T, d] attention output after dense, before the residual add. All
 *   borrowed for the call only.
 * A non-HM_OK return stops the forward pass with that status (the hook fills
 * err). */
typedef enum hm_status (*hm_model_layer_fn)(void *ctx, int64_t layer, const float *a_in,
                                           const float *qkv, const float *attn_out, int64_t T,
                                           int64_t d, struct hm_error *err);

/* Called with the residual stream h [T, d] entering layer l, and with
 * l = L after the last layer (stage 1b on whole blocks reads the teacher
 * here). Borrowed for the call only. */
typedef enum hm_status (*hm_model_stream_fn)(void *ctx, int64_t layer, const float *h,
                                            int64_t T, int64_t d, struct hm_error *err);

struct hm_model_hooks {
    hm_model_layer_fn on_layer; /* may be NULL */
    hm_model_stream_fn on_stream; /* may be NULL; not with stop_after_last_hook */
    void *ctx;
    /* 1: stop right after the last layer's hook (its MLP and the final
     * LayerNorm are skipped; ws->hf is not computed) — stage 1 needs only
     * the attention blocks. */
    int stop_after_last_hook;
};

/* Family pieces of the skeleton, shared by inference, training and decoding
 * (forward.c). y: [T, d] = norm(x) with the family's norm kind; mean, rstd:
 * [T] saved statistics (mean unused by RMSNorm; both may be NULL). */
void hm_model_norm_forward(const struct hm_model *m, const struct hm_backend *be, float *y,
                           float *mean, float *rstd, const float *x, const float *w,
                           const float *b, int64_t T);
/* out: [T, d] = mlp(x: [T, d]); hid: [T, I] the up projection (GELU input /
 * SwiGLU up, kept for backward); gate: [T, I] the SwiGLU gate
 * pre-activation (llama; unused by neox); act: [T, I] the activated hidden. */
void hm_model_mlp_forward(const struct hm_model *m, const struct hm_backend *be,
                          const struct hm_layer *ly, float *out, float *hid, float *gate,
                          float *act, const float *x, int64_t T);

/* The mixer half of layer x->l: x->a->a (norm1's output, [N, d]) → the q/k/v
 * projection (the unit's own when it has one) → GQA expansion → rotary (per
 * sequence, from hm_mix_pos) → the unit → dense into o [N, d]. The unit's
 * status is returned (decoding states can fail). */
enum hm_status hm_model_mixer_forward(const struct hm_mix *x, float *o, struct hm_error *err);

struct hm_fwd {
    int64_t B, T;                /* sequences and rows per sequence (N = B·T) */
    int64_t pos0;                /* position of row 0 (decoding: the token's) */
    struct hm_layer_acts *la;    /* [L] per-layer activations, or [1] with shared */
    int shared;                  /* 1: every layer uses la[0] (inference) */
    float *h_out;                /* [N, d] the residual after the last layer */
    float *o, *m, *act;          /* [N, d], [N, d], [N, I] scratch (act may be mh: inference) */
    void *ws;                    /* mixer forward workspace */
    size_t ws_size;
    struct hm_mixer_state *const *st; /* decoding: [B] each sequence's [L] states, or NULL */
    const int64_t *pos;          /* decoding (T = 1): [B] each row's position, or NULL: pos0 */
    const struct hm_model_hooks *hooks; /* may be NULL */
};

/* Runs layer l alone: f->la[l].h (la[0] when shared) → the next layer's h
 * (f->h_out after the last); its activations in f->la[l]. The same
 * operations as within hm_model_layers_forward, so a rerun on the same
 * input gives the same bits (training's recompute, trainer.h). */
enum hm_status hm_model_layer_forward(const struct hm_model *m, const struct hm_backend *be,
                                      int64_t l, const struct hm_fwd *f, struct hm_error *err);
/* Runs the layers on tokens [N] (each checked < V by the caller). A hook's
 * non-HM_OK status stops the pass. */
enum hm_status hm_model_layers_forward(const struct hm_model *m, const struct hm_backend *be,
                                       const int32_t *tokens, const struct hm_fwd *f,
                                       struct hm_error *err);

#endif
