/* ref_neox.h — an independent double-precision GPT-NeoX, written for tests
 * as naive loops (per head, per position), straight from SPEC §1. Weights
 * are one flat double vector in hm_param_specs() order. */
#ifndef HM_REF_NEOX_H
#define HM_REF_NEOX_H

#include <stdint.h>
#include "config.h"

struct hm_neox;

/* Flat double copy of a model's weights, in hm_param_specs order.
 * *n: length. owned: free(). */
double *tu_ref_params_from_model(const struct hm_neox *m, int64_t *n);

/* Mean next-token cross-entropy over B sequences of tokens [B, T+1]
 * (inputs [b, 0:T], targets [b, 1:T+1]). logits (optional): [B, T, V]. */
double tu_ref_neox_loss(const struct hm_config *cfg, const double *w, const int32_t *tokens,
                        int64_t B, int64_t T, double *logits);

#endif
