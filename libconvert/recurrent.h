/* recurrent.h — token-by-token (recurrent) form of the student models, for
 * generation and for checking the chunked form against it (hm-verify
 * recurrent). Constant memory per token: per layer a conv window
 * [K−1, 3d] (hedgemamba) and a state [n_h, 2F, p + 1].
 *
 * Hedgehog's causal linear attention is the HedgeMamba recurrence with
 * Δ = 1, A = 0, D = 0 (Λ = I): S_t = S_{t−1} + φk_t [v_t; 1]^T,
 * y_t = (φq_t^T S_t)[0:p] / ((φq_t^T S_t)[p] + ε) — so both archs run on
 * hm_backend_ssm_step. */
#ifndef HM_RECURRENT_H
#define HM_RECURRENT_H

#include "neox.h"

struct hm_neox_state;

/* For arch hedgehog or hedgemamba. out: owned, free with
 * hm_neox_state_free(). The state starts empty (position 0). */
enum hm_status hm_neox_state_new(const struct hm_neox *m, struct hm_neox_state **out,
                                 struct hm_error *err);
void hm_neox_state_free(struct hm_neox_state *s);
/* Back to position 0 with empty states. */
void hm_neox_state_reset(struct hm_neox_state *s);

/* Feed one token; logits: [V] (or NULL to skip the output layer). */
enum hm_status hm_neox_step(const struct hm_neox *m, const struct hm_backend *be,
                            struct hm_neox_state *s, int32_t token, float *logits,
                            struct hm_error *err);

#endif
