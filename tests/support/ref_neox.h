/* ref_neox.h — an independent double-precision GPT-NeoX, written for tests
 * as naive loops (per head, per position), straight from contract §1. Weights
 * are one flat double vector in hm_param_specs() order. */
#ifndef HM_REF_NEOX_H
#define HM_REF_NEOX_H

#include <stdint.h>
#include "config.h"

struct hm_model;

/* Flat double copy of a model's weights, in hm_param_specs order.
 * *n: length. owned: free(). */
double *tu_ref_params_from_model(const struct hm_model *m, int64_t *n);

/* Mean next-token cross-entropy over B sequences of tokens [B, T+1]
 * (inputs [b, 0:T], targets [b, 1:T+1]). logits (optional): [B, T, V]. */
double tu_ref_neox_loss(const struct hm_config *cfg, const double *w, const int32_t *tokens,
                        int64_t B, int64_t T, double *logits);

/* One sequence tokens [T] through the teacher (arch gpt_neox weights in w):
 * per layer l, qkv_out[l] = the rotated fused q, k, v [T, 3d] and o_out[l] =
 * the attention output after dense [T, d] (each [L, T, ...], owned by the
 * caller). */
void tu_ref_neox_layers(const struct hm_config *cfg, const double *w, const int32_t *tokens,
                        int64_t T, double *qkv_out, double *o_out);

/* Stage-1 objective (contract §2) from the teacher's per-layer qkv and o (as
 * tu_ref_neox_layers gives) and feature maps fm (per layer: Wq [n_h,p,F],
 * bq [n_h,F], Wk, bk, concatenated; F = cfg->feature_dim): mean over layers
 * of mean over tokens of 1 − cos(o_student, o_teacher). dense: per layer the
 * teacher's dense weight [d, d] and bias [d] (from w). */
double tu_ref_stage1_loss(const struct hm_config *cfg, const double *w, const double *fm,
                          const double *qkv, const double *o, int64_t T);

/* The same under another objective (hm-linearize --objective): 0 cos (as
 * above), 1 mse (mean over tokens of (1/d)|o_s − o_t|²), 2 attn-ce (mean
 * over tokens of (1/n_h) Σ_h −Σ_{s≤t} P_ts log(A_ts + 1e-12), P the
 * softmax of q·k/sqrt(p) of the rotated q, k, A the normalized linear
 * attention weights with ε = 1e-6; dense not involved). */
double tu_ref_stage1_loss_obj(const struct hm_config *cfg, const double *w, const double *fm,
                              const double *qkv, const double *o, int64_t T, int objective);

#endif
