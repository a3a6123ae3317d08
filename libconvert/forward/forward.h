/* forward.h — the one forward skeleton of every family × mixer (SPEC §1,
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

/* Runs the layers on tokens [N] (each checked < V by the caller). A hook's
 * non-HM_OK status stops the pass. */
enum hm_status hm_model_layers_forward(const struct hm_model *m, const struct hm_backend *be,
                                       const int32_t *tokens, const struct hm_fwd *f,
                                       struct hm_error *err);

#endif
