/* ref_llama.h — an independent double-precision llama-family model for tests,
 * written straight from contract §1b (teacher), §2 (Hedgehog) and §3 (HedgeMamba),
 * "Students of a llama teacher", as naive loops per position and per head.
 * It shares no code with libconvert's model: weights are looked up by their
 * HuggingFace tensor names through a getter, never by the model's ordering.
 *
 * Rotary tables follow contract §1 exactly as HF computes them: inv_freq and the
 * angle pos·inv_freq rounded to fp32, cos/sin rounded to fp32; the llama3
 * rope_scaling adjustment (HF _compute_llama3_parameters) is computed in
 * double on the fp32 base frequencies and rounded back to fp32. Everything
 * else is double.
 *
 * Failures (a required tensor missing) print to stderr and abort(): this is
 * test support, and Criterion reports an abort as a failed test. */
#ifndef HM_REF_LLAMA_H
#define HM_REF_LLAMA_H

#include <stdint.h>
#include "config.h"
#include "safetensors.h"

/* Weights by HF tensor name (contract §1b names, plus the student names under
 * model.layers.{l}.self_attn.: feature_map_q.weight [n_h,p,F], feature_map_q.bias [n_h,F],
 * feature_map_k.*, conv1d.weight [(n_h+2n_kv)p, K], conv1d.bias, dt_proj.weight [n_h,d],
 * dt_proj.bias [n_h], A [n_h], D [n_h], gate_proj.weight [n_h*p, d], gate_proj.bias [n_h*p]);
 * returns NULL when absent (e.g. biases, lm_head when tied). Borrowed. */
typedef const double *(*tu_ref_get_fn)(void *ctx, const char *name);

/* logits: [T, V] for one sequence tokens [T], positions 0..T-1; cfg->mixer picks softmax
 * attention, hedgehog linear attention or the hedgemamba mixer. cfg need not be
 * finished: head_dim 0 = d / n_h, num_key_value_heads 0 = n_h, feature_dim 0 = p. */
void tu_ref_llama_logits(const struct hm_config *cfg, tu_ref_get_fn get, void *ctx,
                         const int32_t *tokens, int64_t T, double *logits);

/* Mean next-token CE over B sequences tokens [B, T+1] (inputs [b,0:T], targets [b,1:T+1]). */
double tu_ref_llama_loss(const struct hm_config *cfg, tu_ref_get_fn get, void *ctx,
                         const int32_t *tokens, int64_t B, int64_t T);

/* Stage 1 (contract §2 objective) for a llama teacher: per layer the teacher's own attention
 * input RMSNorm1(h_l) fed to the student hedgehog attention (teacher q,k,v,o weights +
 * feature maps of the student, looked up by name via get_student; F from student_cfg),
 * compared to the teacher attention output o_l (after o_proj, before the residual add) by
 * mean over tokens of 1 - cos (no ε), then mean over layers. One sequence of T tokens. */
double tu_ref_llama_stage1_loss(const struct hm_config *teacher_cfg, tu_ref_get_fn get_teacher,
                                void *tctx, const struct hm_config *student_cfg,
                                tu_ref_get_fn get_student, void *sctx,
                                const int32_t *tokens, int64_t T);

/* Stage 1b (hm_trainer_align): as the stage-1 loss, but the student layer l is the
 * student's whole mixer (every mixer tensor from get_student: q/k/v/o, feature maps and,
 * for hedgemamba, conv, Δ, A, D, gate), fed the teacher's RMSNorm1(h_l). B sequences of
 * T inputs at tokens + b (T + 1); the mean over all B·T tokens, then over layers. The
 * per-token loss: 1 − cos, or with mse 1 (1/d)·|o_s − o_t|²; mse 2: whole blocks
 * (hm_train_opts.align_block), the student's layer l (its own norms and MLP) on the
 * teacher's h_l against the teacher's h_{l+1}, (1/d)·|h_s − h_t|². */
double tu_ref_llama_align_loss(const struct hm_config *teacher_cfg, tu_ref_get_fn get_teacher,
                               void *tctx, const struct hm_config *student_cfg,
                               tu_ref_get_fn get_student, void *sctx, const int32_t *tokens,
                               int64_t B, int64_t T, int mse);

/* The rotary inverse frequencies inv_freq [p/2] of cfg (rope_theta, head_dim and
 * rope_scaling llama3), fp32 values as HF's rotary embedding holds them. */
void tu_ref_llama_inv_freq(const struct hm_config *cfg, double *inv_freq);

/* ---- name → double tensor tables --------------------------------------- */

/* A name → double-tensor table; use it as ctx with tu_ref_table_get. */
struct tu_ref_table;

/* An empty table. owned: tu_ref_table_free. */
struct tu_ref_table *tu_ref_table_new(void);
/* Loaded from a checkpoint file (any safetensors file or HF folder hm can read:
 * config.json + model.safetensors or a sharded index set), every numeric tensor
 * converted to double (legacy buffers included). NULL on failure, with a message on
 * stderr. owned: tu_ref_table_free. */
struct tu_ref_table *tu_ref_table_from_file(const char *path);
/* Add or replace tensor name with a copy of data [numel(shape)]; dtype records the
 * dtype it is (to be) stored as (a writer converts to it; values are not rounded here). */
void tu_ref_table_put(struct tu_ref_table *t, const char *name, enum hm_dtype dtype, int ndim,
                      const int64_t *shape, const double *data);
/* Borrowed data of tensor name, or NULL when absent; valid until the table is freed or
 * name is replaced. Matches tu_ref_get_fn (table is a struct tu_ref_table *). */
const double *tu_ref_table_get(void *table, const char *name);
/* Tensors in insertion (or file) order: count, then the i-th entry's fields
 * (borrowed). numel is returned. */
int64_t tu_ref_table_count(const struct tu_ref_table *t);
int64_t tu_ref_table_at(const struct tu_ref_table *t, int64_t i, const char **name,
                        enum hm_dtype *dtype, int *ndim, const int64_t **shape,
                        const double **data);
/* Index of name, or -1. */
int64_t tu_ref_table_find(const struct tu_ref_table *t, const char *name);
void tu_ref_table_free(struct tu_ref_table *t);

struct hm_model;
/* A table of double copies of every tensor of hm's model m, by name (to
 * run the reference on exactly hm's weights). owned: tu_ref_table_free. */
struct tu_ref_table *tu_ref_table_from_model(const struct hm_model *m);

#endif
