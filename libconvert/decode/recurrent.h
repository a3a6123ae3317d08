/* recurrent.h — token-by-token form of every model, for generation and for
 * checking the chunked form against it (hm-verify recurrent). A softmax
 * teacher keeps a KV cache (grows with the context); the students keep
 * constant memory per token: per layer a conv window [K−1, qkv_dim]
 * (hedgemamba) and a state [n_h, 2F, p + 1].
 *
 * Hedgehog's causal linear attention is the HedgeMamba recurrence with
 * Δ = 1, A = 0, D = 0 (Λ = I): S_t = S_{t−1} + φk_t [v_t; 1]^T,
 * y_t = (φq_t^T S_t)[0:p] / ((φq_t^T S_t)[p] + ε) — so both archs run on
 * hm_backend_ssm_step.
 *
 * Placement (backend.h): a state lives on the backend of the model it was
 * made for (m->be, set by hm_model_place): its KV caches, windows, S,
 * scratch and the step's activations, token ids and logits are that
 * backend's memory, moved only through the backend (a KV cache grows by a
 * new allocation and an hm_backend_copy2d of its filled rows). The host
 * arrays of the calls below (tokens, logits, last) are host memory: the
 * tokens are uploaded, the logits downloaded (a batch step: one download
 * of all B rows). Steps and prefills must run on that backend. */
#ifndef HM_RECURRENT_H
#define HM_RECURRENT_H

#include "model.h"

struct hm_model_state;

/* For any mixer, on m's backend: m must be placed (hm_model_place), else
 * HM_ERR_INVALID. out: owned, free with hm_model_state_free(). The state
 * starts empty (position 0). */
enum hm_status hm_model_state_new(const struct hm_model *m, struct hm_model_state **out,
                                 struct hm_error *err);
void hm_model_state_free(struct hm_model_state *s);
/* Back to position 0 with empty states (a KV cache keeps its memory). */
void hm_model_state_reset(struct hm_model_state *s);
/* dst ← src (both of the model of config c, on one backend): position,
 * constant-size states, and the KV cache's filled rows (dst's grows as
 * needed), copied by backend ops. */
enum hm_status hm_model_state_copy(struct hm_model_state *dst, const struct hm_model_state *src,
                                   const struct hm_config *c, struct hm_error *err);
/* Tokens fed so far (the position of the next one). */
int64_t hm_model_state_pos(const struct hm_model_state *s);
/* Floats of state s holds now (n_kv, p: the model's; a KV cache counts
 * the positions fed so far). */
int64_t hm_model_state_floats(const struct hm_model_state *s, int64_t n_kv, int64_t p);

/* Feed one token; logits: [V] host memory (or NULL to skip the output
 * layer). be must be the model's and the state's backend. */
enum hm_status hm_model_step(const struct hm_model *m, const struct hm_backend *be,
                            struct hm_model_state *s, int32_t token, float *logits,
                            struct hm_error *err);

/* One step of B independent sequences (B ≥ 1 distinct states, each at its
 * own position): tokens [B], logits [B, V] (or NULL). The B tokens are the
 * rows of one pass through the skeleton (one weight read for all); each
 * mixer row runs against its own sequence's state. Buffers: s[0]'s.
 * logits: host memory, filled by one download of the B rows. */
enum hm_status hm_model_step_batch(const struct hm_model *m, const struct hm_backend *be,
                                   struct hm_model_state *const *s, int64_t B,
                                   const int32_t *tokens, float *logits, struct hm_error *err);

/* Default rows of a prefill chunk. */
#define HM_PREFILL_CHUNK 256

/* Feeds the prompt tokens [n] (positions s->pos..) in chunks of `chunk`
 * rows (0 = HM_PREFILL_CHUNK) through the chunked forms, each chunk starting
 * from the state the previous one left (the KV cache; the conv window and S
 * via hm_backend_ssm_chunk_carry), and hands the state to hm_model_step.
 * Activations are one chunk's, whatever n is. logits [n, V]: every
 * position's (or NULL); last [V]: the last position's (or NULL) — only the
 * rows asked for are computed. */
enum hm_status hm_model_prefill(const struct hm_model *m, const struct hm_backend *be,
                                struct hm_model_state *s, const int32_t *tokens, int64_t n,
                                int64_t chunk, float *logits, float *last, struct hm_error *err);

#endif
