/* map_decay.h — hm-map-ssm --decay-from: each head's decay A starts where
 * its teacher's attention is, instead of the exact mapping's A = 0 (an hm
 * extension of contract §3; docs/contract.md, "Decay from teacher
 * statistics"). Everything else keeps the exact mapping.
 *
 * Statistic. For layer l and (query) head h of the softmax teacher, with q_t,
 * k_s the rotated per-head vectors the layer computes (forward.h's hook;
 * llama GQA already expanded per query head) and p the head dim:
 *
 *   P[t, s] = softmax_{s ≤ t}( q_t · k_s / sqrt(p) )          (causal)
 *   md[l, h] = mean over windows w and query positions t < T of
 *              Σ_{s ≤ t} P[t, s] · (t − s)
 *
 * computed in double from the fp32 q and k.
 *
 * Decay. With Δ = softplus(dt bias) = 1 the student weighs key s at query t
 * by α^(t − s), α = exp(A). Its mean distance over the same positions is
 *
 *   G_T(α) = (1/T) Σ_{t=0}^{T−1} g_t(α),
 *   g_t(α) = Σ_{k=0}^{t} k α^k / Σ_{k=0}^{t} α^k,
 *
 * increasing in α from G_T(0) = 0 to G_T(1) = (T − 1)/4 (the mean of t/2).
 * α_h solves G_T(α) = md[l, h] by bisection in double, to the last bit of
 * α (far below 1e-12); α = 1 (A = 0, no decay) when md ≥ G_T(1);
 * α = HM_DECAY_ALPHA_MIN when md ≤ G_T(HM_DECAY_ALPHA_MIN) (a head that
 * attends only to its own token: A stays finite). A = ln α ≤ 0, stored as
 * F32 (so it satisfies the A ≤ 0 clamp). */
#ifndef HM_MAP_DECAY_H
#define HM_MAP_DECAY_H

#include <stdint.h>

#include "backend.h"
#include "checkpoint.h"
#include "hm_error.h"
#include "model.h"

/* The smallest α the fit gives (A = ln 1e-12 ≈ −27.63). */
#define HM_DECAY_ALPHA_MIN 1e-12

/* The softmax teacher inside ck: a teacher (gpt_neox, llama) as it is, or a
 * hedgehog checkpoint read with its mixer set back to softmax (stage 1
 * trains only the feature maps; every other tensor is the teacher's). A
 * hedgemamba input is refused. out: owned, free with hm_model_free(); loaded
 * straight into be's memory, bf16/f16 layer weights kept narrow
 * (hm_model_load_narrow: one copy at the checkpoint's width). */
enum hm_status hm_decay_teacher_load(const struct hm_ckpt *ck, const struct hm_backend *be,
                                     struct hm_model **out, struct hm_error *err);

/* md: [L, n_h] (caller-owned) the mean attention distance above of the
 * softmax model m (placed on be) over W windows tokens: [W, T] (each < V;
 * every window at positions 0..T−1). */
enum hm_status hm_decay_attn_distance(const struct hm_model *m, const struct hm_backend *be,
                                      const int32_t *tokens, int64_t W, int64_t T, double *md,
                                      struct hm_error *err);

/* G_T(alpha) above (alpha in [0, 1], T ≥ 1). */
double hm_decay_mean_distance(double alpha, int64_t T);

/* The α of md at T: in [HM_DECAY_ALPHA_MIN, 1], G_T(α) = md when md lies
 * between G_T(HM_DECAY_ALPHA_MIN) and G_T(1). */
double hm_decay_alpha(double md, int64_t T);

/* hm-verify mapping of a hedgemamba m (host memory) whose A came from
 * teacher statistics: every A must be finite and ≤ 0, else HM_ERR_INVALID
 * naming the tensor and head (*layer, *head set to the first bad one; −1
 * when all are good). Then every A is set to 0, the exact mapping's value,
 * so that the rest of the mapping can be proven. */
enum hm_status hm_decay_reset(struct hm_model *m, int64_t *layer, int64_t *head,
                              struct hm_error *err);

#endif
