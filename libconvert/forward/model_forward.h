/* model_forward.h — the whole model run forward (contract §1, §1b): hidden
 * states, logits and next-token NLLs of B sequences in a struct hm_model_ws
 * (model.h). Each runs the one skeleton (forward.h), then the final norm and
 * the output layer. Decoding one token at a time is recurrent.h; training
 * (forward + backward) is trainer.h. */
#ifndef HM_MODEL_FORWARD_H
#define HM_MODEL_FORWARD_H

#include <stdint.h>

#include "forward.h"
#include "hm_error.h"
#include "model.h"

/* Runs the layers and the final norm on tokens: [T] (each < V).
 * The result is ws->hf: [T, d] (borrowed until the next call on ws).
 * hooks may be NULL. */
enum hm_status hm_model_hidden(const struct hm_model *m, const struct hm_backend *be,
                              const int32_t *tokens, int64_t T, struct hm_model_ws *ws,
                              const struct hm_model_hooks *hooks, struct hm_error *err);

/* logits: [B, T, V] (caller-owned host memory, downloaded) for tokens: [B, T], B independent
 * sequences each at positions 0..T-1. With targets: [B, T] (each < V; else NULL), also
 * nll: [B, T] (caller-owned host memory) = −log softmax(logits)[targets], computed on the
 * backend from the same logits. hm_model_forward is B = 1 without targets. */
enum hm_status hm_model_forward_batch(const struct hm_model *m, const struct hm_backend *be,
                                      const int32_t *tokens, const int32_t *targets, int64_t B,
                                      int64_t T, float *logits, float *nll,
                                      struct hm_model_ws *ws, struct hm_error *err);
enum hm_status hm_model_forward(const struct hm_model *m, const struct hm_backend *be,
                               const int32_t *tokens, int64_t T, float *logits,
                               struct hm_model_ws *ws, struct hm_error *err);

/* nll: [B, T] (caller-owned host memory, downloaded), nll[b, t] = −log softmax(logits[b, t])[targets[b, t]]
 * for tokens: [B, T] and targets: [B, T] (each < V), B independent sequences
 * each at positions 0..T-1. Logits are made B·HM_MODEL_NLL_ROWS rows at a
 * time. A sequence's NLLs equal its B = 1 ones up to the rounding of the
 * products over more rows (a BLAS may block N rows differently: last bits).
 * hm_model_nll is B = 1. */
enum hm_status hm_model_nll_batch(const struct hm_model *m, const struct hm_backend *be,
                                  const int32_t *tokens, const int32_t *targets, int64_t B,
                                  int64_t T, float *nll, struct hm_model_ws *ws,
                                  struct hm_error *err);
enum hm_status hm_model_nll(const struct hm_model *m, const struct hm_backend *be,
                           const int32_t *tokens, const int32_t *targets, int64_t T,
                           float *nll, struct hm_model_ws *ws, struct hm_error *err);

/* *sum = Σ of the next-token NLLs of B consecutive windows of T targets:
 * window b reads tokens[b T .. b T + T] (tokens: [B T + 1], windows
 * overlapping by one token, as validation reads them). */
enum hm_status hm_model_nll_sum(const struct hm_model *m, const struct hm_backend *be,
                                const int32_t *tokens, int64_t B, int64_t T,
                                struct hm_model_ws *ws, double *sum, struct hm_error *err);

#endif
