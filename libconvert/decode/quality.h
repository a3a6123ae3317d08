/* quality.h — how close a student's outputs are to its teacher's (SPEC §11
 * "Generation quality"), beside perplexity:
 *
 *   teacher-forced, over the windows W (window w: inputs tokens [wL, wL+L),
 *   as hm-eval's):
 *     kl         mean over W·L positions of KL(softmax z_T ‖ softmax z_S),
 *                τ = 1, in double from the float logits
 *     agreement  the fraction of positions where argmax z_S = argmax z_T
 *                (hm_sample_argmax: the lowest id on ties)
 *   from P prompts (prompt i: the first p tokens of window i), n new tokens
 *   each (an end-of-text id is a token like any other: every continuation
 *   is n long):
 *     student_nll / teacher_nll  the teacher's mean NLL of the continuation
 *                tokens the student / the teacher itself samples at
 *                temperature 1 (contract §8's sampler; prompt i seeded s + i
 *                for both models: the same random numbers), each token
 *                conditioned on the prompt and the continuation before it
 *     common_prefix  the mean over prompts of the leading tokens the two
 *                greedy continuations share (0..n)
 *
 * Both models decode token by token (recurrent.h: the teacher's KV cache,
 * the student's constant state) and are scored by the chunked forward
 * (model_forward.h). Cost: 2·W window forwards, 4·P decodes of p + n tokens
 * (each model sampling and greedy) and 2·P teacher forwards of p + n − 1
 * positions; memory: two windows' logits [L, V] and each model's state. */
#ifndef HM_QUALITY_H
#define HM_QUALITY_H

#include <stdint.h>

#include "model.h"

struct hm_quality_opts {
    int64_t seq_len;    /* L ≥ 1 */
    int64_t windows;    /* W ≥ 1: windows 0..W−1 */
    int64_t prompts;    /* P ≥ 0 (0: the teacher-forced figures only) */
    int64_t prompt_len; /* p, 1 ≤ p ≤ L */
    int64_t new_tokens; /* n ≥ 1 */
    uint64_t seed;      /* s */
};

struct hm_quality {
    double kl, agreement;          /* over W·L positions */
    double student_nll, teacher_nll; /* over P·n sampled tokens (NaN when P = 0) */
    double common_prefix;          /* over P prompts (NaN when P = 0) */
};

/* The figures above for student s and teacher t (placed on be, the same
 * vocabulary) on tokens: [n_tokens] host memory, which must hold
 * max(W, P)·L + 1 of them (each < V). HM_ERR_INVALID names what does not
 * fit (tokens, vocabularies, the teacher's position limit p + n). */
enum hm_status hm_quality_measure(const struct hm_model *s, const struct hm_model *t,
                                  const struct hm_backend *be, const int32_t *tokens,
                                  int64_t n_tokens, const struct hm_quality_opts *o,
                                  struct hm_quality *out, struct hm_error *err);

#endif
