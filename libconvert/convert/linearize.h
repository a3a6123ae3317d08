/* linearize.h — stage 1 (contract §2): train Hedgehog feature maps so that each
 * layer's linear attention imitates the teacher's softmax attention.
 *
 * Teacher-forced and layer-wise: per sequence the teacher runs once; a
 * per-layer hook hands over the teacher's LN1 input, its rotated q/k/v and
 * its attention output after dense; the student layer (the same q, k, v and
 * dense, with the layer's feature maps and causal linear attention) runs
 * forward and backward right there, and only the feature-map gradients
 * accumulate. Peak memory: one layer of one sequence's student activations,
 * independent of depth.
 *
 *   L = mean over layers of mean over B·T tokens of ℓ_l(t)
 *
 * with the per-token loss ℓ of the objective (hm-linearize --objective):
 *   cos      1 − cos(o_s[t], o_t[t])                  (contract §2, the default)
 *   mse      (1/d) Σ_j (o_s[t,j] − o_t[t,j])²         (LoLCATs' attention transfer)
 *   attn-ce  (1/n_h) Σ_h −Σ_{s≤t} P_ts log(A_ts + δ)  (Hedgehog's: the attention
 *            weights themselves; P the teacher's softmax weights of the rotated
 *            q, k, A the student's normalized linear-attention weights, δ = 1e-12;
 *            kernels/backend.h [attn_ce_loss]). Dense is not involved: only the
 *            feature maps and the teacher's q, k enter. O(T²) per head with an
 *            exp and a log per (t, s) pair: on stories260K (T = 256, one
 *            thread) a step takes ~7.6× a cos step.
 * o_s, o_t: the student's and teacher's attention outputs after dense.
 *
 * Everything but the feature maps is the teacher's, frozen; the output
 * checkpoint copies the teacher's tensors byte for byte in their stored
 * dtype and adds the feature maps (F32). */
#ifndef HM_LINEARIZE_H
#define HM_LINEARIZE_H

#include "checkpoint.h"
#include "model.h"
#include "run.h"

struct hm_linearizer;

/* The stage-1 objective (see above). */
enum hm_lin_objective {
    HM_LIN_OBJECTIVE_COS,
    HM_LIN_OBJECTIVE_MSE,
    HM_LIN_OBJECTIVE_ATTN_CE,
};

/* "cos", "mse", "attn-ce" (static strings). */
const char *hm_lin_objective_name(enum hm_lin_objective o);
/* The objective named s (hm_lin_objective_name's spelling): 0, or -1 if none. */
int hm_lin_objective_parse(const char *s, enum hm_lin_objective *out);

/* What hm_linearizer_new allocates for a teacher of config tc (besides the
 * teacher itself, hm_model_narrow_plan, and its forward workspace,
 * hm_model_ws_bytes at B = 1): the feature maps' values per layer (weights,
 * gradients and moments are that many floats each), the per-sequence
 * scratch and the linear-attention workspace (the cos and mse objectives'),
 * in bytes. -1 when the student config cannot be made. */
struct hm_lin_sizes {
    int64_t layers, fm_floats;   /* fm_floats per layer: fq_w, fq_b, fk_w, fk_b */
    size_t scratch_bytes, ws_bytes;
};
int hm_linearizer_sizes(const struct hm_config *tc, int64_t feature_dim,
                        const struct hm_backend *be, int64_t T, struct hm_lin_sizes *out);

/* teacher_ck: the teacher checkpoint (borrowed, must stay open: its bytes
 * are copied into the output). feature_dim: F (0 = head dim). keep: the
 * layers that stay softmax ([HM_KEPT_WORDS] bits, config.h; NULL: none):
 * they get no feature maps, no loss (their layer_loss is 0) and the output
 * is a hybrid (contract §11); the loss is the mean over the other layers.
 * B, T: micro-batch. out: owned, free with hm_linearizer_free(). */
enum hm_status hm_linearizer_new(const struct hm_ckpt *teacher_ck, int64_t feature_dim,
                                 const uint64_t *keep,
                                 const struct hm_backend *be, int64_t B, int64_t T,
                                 int64_t accum, struct hm_linearizer **out,
                                 struct hm_error *err);
void hm_linearizer_free(struct hm_linearizer *lz);

/* The objective that training, the logged loss and layer_loss and
 * hm_linearizer_eval use (a new linearizer has HM_LIN_OBJECTIVE_COS).
 * attn-ce needs a larger workspace: allocated here. */
enum hm_status hm_linearizer_set_objective(struct hm_linearizer *lz, enum hm_lin_objective o,
                                           struct hm_error *err);

/* The model side of the shared run loop (aux: per-layer loss). */
void hm_linearizer_run_model(struct hm_linearizer *lz, struct hm_run_model *rm);

/* Borrowed: the student (arch hedgehog; skeleton = teacher's weights). */
struct hm_model *hm_linearizer_student(struct hm_linearizer *lz);

/* Write the hedgehog checkpoint: teacher tensors byte for byte, feature
 * maps F32, hm.config (arch hedgehog) and provenance. */
enum hm_status hm_linearizer_save(const struct hm_linearizer *lz, const char *path, int flags,
                                  const char *provenance, struct hm_error *err);

/* Stage-1 loss on one sequence tokens [T] without gradients: per-layer
 * mean over tokens of the current objective's loss (cos: 1 − cos) into
 * layer_loss [L] (for tests and reports). */
enum hm_status hm_linearizer_eval(struct hm_linearizer *lz, const int32_t *tokens, int64_t T,
                                  double *layer_loss, struct hm_error *err);

#endif
