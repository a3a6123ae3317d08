/* trainer.h — forward + backward of every family × mixer for training.
 *
 * The engine every training tool runs on. A micro-batch is B sequences of
 * T inputs with their T next-token targets; all B·T rows go through the
 * matrix products together (one GEMM per weight), attention and rotary per
 * sequence. Saved activations per layer: the residual input h, LN1/LN2
 * outputs and statistics, qkv after rotary, merged attention output and its
 * log-sum-exp, the MLP pre-activation (GELU is recomputed in backward), and
 * for sequential residual the mid-stream t. The output layer and the loss
 * run in row chunks of at least HM_TRAIN_CE_ROWS and at most 2^25 / V rows
 * (N split evenly), so logits are never [B·T, V] at once.
 *
 * The mixer follows cfg.mixer (softmax attention, Hedgehog linear attention,
 * HedgeMamba SSM; each unit's backward is in mixers/mixer_*.c); for
 * HedgeMamba, components not listed in cfg.components are frozen at their
 * stored values.
 * Gradients live in a second struct hm_model with the same layout (grads.*
 * mirrors model.*). Frozen groups get no gradient work: with
 * `freeze_embeddings`, embed_in and embed_out are frozen (embed_out still
 * passes the input gradient). The loss is the mean over B·T·accum targets:
 * each micro-batch adds (1/(B·T·accum))-scaled gradients, so `accum`
 * micro-batches then one optimizer step equal one big batch.
 *
 * The objective (contract §3, §10): loss = c·CE + w·τ²·KL(p_t‖p_s), per token
 * averaged over B·T, with p = softmax(logits/τ) of the teacher, resp. the
 * student: gradient c·(softmax − onehot) + w·τ·(p_s − p_t) on the logits.
 * c = ce_weight, w = kd_weight, τ = kd_temperature; without a teacher (or
 * with w = 0) it is c·CE. CE is measured whatever c is. */
#ifndef HM_MODEL_TRAIN_H
#define HM_MODEL_TRAIN_H

#include <stdint.h>

#include "backend.h"
#include "model.h"
#include "model_views.h"
#include "optim.h"

#define HM_TRAIN_CE_ROWS 256

struct hm_train_opts {
    int64_t B, T;              /* sequences per micro-batch, inputs per sequence */
    int64_t accum;             /* micro-batches per optimizer step (≥ 1) */
    int freeze_embeddings;     /* embed_in and embed_out frozen */
    const struct hm_model *kd_teacher; /* borrowed; NULL for none */
    double kd_weight;          /* w of the KL term */
    double kd_temperature;     /* τ > 0 (with a teacher): 1 is the plain KL of §3 */
    double ce_weight;          /* c ≥ 0 of the cross-entropy: 1 for plain training;
                                  no default (0 is a valid c: pure distillation) */
    /* stage 1b (hm_trainer_align): the softmax teacher each mixer is fit to,
     * borrowed, or NULL; with it only the mixer tensors train */
    const struct hm_model *align_teacher;
    int align_mse;             /* stage 1b's per-token loss: 0 = 1 − cos, 1 = (1/d)|o_s − o_t|² */
    /* stage 1b on whole blocks (MOHAWK's hidden-state alignment): each
     * student layer gets the teacher's residual stream h_l and its block
     * output (mixer, MLP, residuals) is fit to the teacher's h_{l+1} with
     * (1/d)|h_s − h_t|² per token; still only the mixer tensors train */
    int align_block;
    int64_t ce_rows;           /* most output-layer rows per pass; 0 = automatic */
    /* 1: keep only each layer's input h; the backward reruns each layer's
     * forward (hm_model_layer_forward) into one set of activations that
     * every layer shares (activation checkpointing): the activations of one
     * layer instead of L, for about one more forward pass of the layers a
     * step. The same bits as 0. Not with align_teacher. */
    int recompute;
};

struct hm_trainer;

/* model: borrowed, trained in place, placed on be (hm_model_place); be:
 * borrowed. out: owned, free with
 * hm_trainer_free(). Allocates grads and activations for B·T rows. */
enum hm_status hm_trainer_new(struct hm_model *model, const struct hm_backend *be,
                              const struct hm_train_opts *opts, struct hm_trainer **out,
                              struct hm_error *err);
void hm_trainer_free(struct hm_trainer *tr);

/* Bytes of activations hm_trainer_new allocates for cfg and o (the
 * --dry-run memory estimate; attention workspaces excluded). */
size_t hm_trainer_activation_bytes(const struct hm_config *cfg, const struct hm_train_opts *o);

/* Zero every gradient. */
void hm_trainer_zero_grad(struct hm_trainer *tr);

/* After every optimizer update: projections the model needs (HedgeMamba:
 * clamp A ≤ 0). */
void hm_trainer_post_update(struct hm_trainer *tr);

struct hm_train_loss {
    double ce;    /* mean cross-entropy over the micro-batch's B·T targets */
    double kl;    /* mean τ²·KL(teacher‖student) at τ, 0 without a teacher */
    double total; /* the objective: ce_weight·ce + kd_weight·kl */
};

/* Forward + backward of one micro-batch; accumulates gradients.
 * tokens: [B, T + 1] host memory (inputs tokens[b, 0:T], targets
 * tokens[b, 1:T+1]), every id < vocab (checked: an out-of-range id is
 * HM_ERR_INVALID); uploaded here.
 * sums: [2] backend memory the micro-batch's cross-entropy and KL sums are
 * added to (the training loop's scalar block: it reads them once a step),
 * or NULL (the trainer's own, zeroed first).
 * loss: when not NULL, the micro-batch's mean losses, downloaded now (one
 * read of backend memory; tests and benchmarks). */
enum hm_status hm_trainer_accumulate(struct hm_trainer *tr, const int32_t *tokens,
                                     double *sums, struct hm_train_loss *loss,
                                     struct hm_error *err);
/* The mean losses of a micro-batch from its sums (downloaded). */
void hm_trainer_loss(const struct hm_trainer *tr, const double sums[2],
                     struct hm_train_loss *loss);
/* (With opts.align_block the comparison is of whole blocks instead, see
 * struct hm_train_opts; the loss of each layer is (1/d)|h_s − h_t|².)
 * Stage 1b, a layer-wise alignment of the student's mixers (any mixer)
 * against the teacher's attention, teacher-forced like stage 1 (contract §2)
 * but with every mixer tensor trainable (q/k/v, dense and the mixer's own:
 * feature maps, Δ, A, D, conv, gate; inactive components stay frozen):
 * the teacher (opts.align_teacher) runs once per sequence; each student
 * layer l receives the teacher's own norm1 output and its mixer (through
 * dense) is compared with the teacher's attention output o_l:
 *   L = mean over layers of mean over B·T tokens of (1 − cos(o_s, o_t)),
 * or with opts.align_mse the squared error (1/d)·|o_s − o_t|² per token
 * (hm-linearize's mse: the output scale is fit too, which 1 − cos leaves
 * free once dense and the gate train).
 * Norms, MLP and embeddings do not train. tokens: [B, T + 1] host memory
 * (the inputs are tokens[b, 0:T], as in hm_trainer_accumulate); sums: [L]
 * backend memory each layer's sum of the per-token loss is added to. Accumulates the
 * gradients (scaled 1/(L·B·T·accum)). */
enum hm_status hm_trainer_align(struct hm_trainer *tr, const int32_t *tokens, double *sums,
                                struct hm_error *err);
/* The per-layer means aux [L] (sums / B·T) and their mean *loss. sums: [L] host. */
void hm_trainer_align_loss(const struct hm_trainer *tr, const double *sums, double *loss,
                           double *aux);

/* 1 when the tensor of spec (of a model of config c) does not train under
 * opts (frozen embeddings, inactive components `active`, everything but the
 * student mixers when aligning: a hybrid's kept layers are the teacher's). */
int hm_train_frozen(const struct hm_train_opts *opts, const struct hm_config *c,
                    unsigned active, const struct hm_param_spec *spec);

/* Trainable tensors for the optimizer (weights paired with gradients), in
 * hm_param_specs order. Borrowed: valid until hm_trainer_free(). */
const struct hm_opt_param *hm_trainer_params(const struct hm_trainer *tr, int64_t *np);

/* Borrowed: the gradient model (same layout as the trained model). */
const struct hm_model *hm_trainer_grads(const struct hm_trainer *tr);

/* Matrix FLOPs per token of one training step (BENCH.md): 6N per trainable
 * weight-matrix entry, 4·V·d for a frozen embed_out, 2N per frozen matrix
 * whose input gradient is still needed (+ 2N forward), and the mixer's own
 * FLOPs (hm_mixer_unit()->flops_per_token) ×3 with backward, per layer:
 * the count of shared/BENCH.md and ../shared/peers/perf_torch.py. */
double hm_train_flops_per_token(const struct hm_config *cfg, int64_t T, int freeze_embeddings);

#endif
