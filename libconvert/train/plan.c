/* plan.c — the memory of a training run from headers (plan.h). */
#include "plan.h"

#include <stdlib.h>
#include <string.h>

#include "linearize.h"
#include "mixer.h"
#include "model.h"
#include "params.h"
#include "run.h"

const char *hm_plan_part_name(enum hm_plan_part p)
{
    static const char *const names[HM_PLAN_N_PARTS] = {
        "weights", "gradients", "moments", "activations", "workspaces",
        "teacher_fp32", "teacher_narrow", "buffers"};
    return p < HM_PLAN_N_PARTS ? names[p] : "?";
}

/* Stands for "a teacher is present" in the train options the trainer's
 * sizing functions read (they test the pointer, never the model). */
static const struct hm_model teacher_present;

/* This process's share of n trainable tensors (sizes in off) under ZeRO-1
 * with P processes: the largest share, as hm_run_partition makes them. */
static int64_t zero1_share(const int64_t *off, int64_t n, int P)
{
    int64_t *first = calloc((size_t)P + 1, sizeof *first), most = 0;
    if (!first)
        return off[n];
    hm_run_partition(off, n, P, first);
    for (int q = 0; q < P; q++) {
        const int64_t s = off[first[q + 1]] - off[first[q]];
        most = s > most ? s : most;
    }
    free(first);
    return most;
}

/* The teacher's parts (teacher_f32, teacher_narrow) of a plan, and its
 * forward workspace at one sequence of T (added to part's workspaces). */
static int teacher_parts(const struct hm_ckpt *ck, const struct hm_backend *be, int64_t T,
                         int head, double *part, enum hm_dtype *kind)
{
    const struct hm_config *tc = hm_ckpt_config(ck);
    double f32, narrow, wide;
    if (hm_model_narrow_plan(ck, tc, 0, head, &f32, &narrow, &wide, kind))
        return -1;
    part[HM_PLAN_TEACHER_F32] = f32 + wide;
    part[HM_PLAN_TEACHER_NARROW] = narrow;
    part[HM_PLAN_WORKSPACES] += (double)hm_model_ws_bytes(tc, be, 1, T);
    return 0;
}

/* Stage 1: the trainable tensors (4 per layer) in off[0..4L], the parts
 * but moments and buffers. */
static enum hm_status stage1_parts(const struct hm_plan_in *in, struct hm_mem_plan *out,
                                   double *part, int64_t **off, int64_t *nt, int64_t *largest,
                                   struct hm_error *err)
{
    const struct hm_config *tc = hm_ckpt_config(in->ck);
    struct hm_lin_sizes z;
    if (hm_linearizer_sizes(tc, in->feature_dim, in->be, in->T, &z) ||
        teacher_parts(in->ck, in->be, in->T, 0, part, &out->teacher_dtype))
        return hm_error_set(err, HM_ERR_INVALID, "cannot make the stage-1 student of %s",
                            hm_arch_name(tc));
    *nt = 4 * z.layers;
    if (!(*off = calloc((size_t)*nt + 2, sizeof **off)))
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    /* fq_w, fq_b, fk_w, fk_b: two matrices and two biases of equal sizes */
    const int64_t F = in->feature_dim ? in->feature_dim : tc->head_dim;
    const int64_t bias = tc->num_attention_heads * F, mat = z.fm_floats / 2 - bias;
    for (int64_t k = 0; k < *nt; k++)
        (*off)[k + 1] = (*off)[k] + (k % 2 ? bias : mat);
    out->trainable = (*off)[*nt];
    out->params = hm_param_count(tc) + out->trainable;
    *largest = mat;
    part[HM_PLAN_WEIGHTS] = 4.0 * (double)out->trainable;
    part[HM_PLAN_GRADS] = 4.0 * (double)out->trainable;
    part[HM_PLAN_ACTIVATIONS] = (double)z.scratch_bytes;
    part[HM_PLAN_WORKSPACES] += (double)z.ws_bytes;
    return HM_OK;
}

/* The trainee's tensors (hm-finetune): the trainable ones' sizes in
 * off[0..nt], the parts but moments and buffers. */
static enum hm_status trainee_parts(const struct hm_plan_in *in, struct hm_mem_plan *out,
                                    double *part, int64_t **off, int64_t *nt, int64_t *largest,
                                    struct hm_error *err)
{
    const struct hm_config *c = hm_ckpt_config(in->ck);
    struct hm_train_opts to = {.B = in->B, .T = in->T, .accum = in->accum,
                               .freeze_embeddings = in->freeze_embeddings, .ce_weight = 1,
                               .kd_temperature = 1, .recompute = in->recompute,
                               .align_block = in->align && in->align_block};
    if (in->teacher && in->align)
        to.align_teacher = &teacher_present;
    else if (in->teacher)
        to.kd_teacher = &teacher_present;
    struct hm_param_spec *specs = NULL;
    const int64_t n = hm_param_specs(c, &specs);
    *off = n >= 0 ? calloc((size_t)n + 2, sizeof **off) : NULL;
    if (!*off) {
        free(specs);
        return hm_error_set(err, HM_ERR_INVALID, "cannot make the tensor table of %s",
                            hm_arch_name(c));
    }
    int64_t frozen_embed = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t e = 1;
        for (int d = 0; d < specs[i].ndim; d++)
            e *= specs[i].shape[d];
        out->params += e;
        if (in->freeze_embeddings && specs[i].group == HM_PG_EMBED)
            frozen_embed += e; /* no gradient slot (hm_trainer_new) */
        *largest = e > *largest ? e : *largest;
        if (hm_train_frozen(&to, c, c->components, &specs[i]))
            continue;
        (*off)[*nt + 1] = (*off)[*nt] + e;
        (*nt)++;
    }
    free(specs);
    out->trainable = (*off)[*nt];
    part[HM_PLAN_WEIGHTS] = 4.0 * (double)out->params;
    part[HM_PLAN_GRADS] = 4.0 * (double)(out->params - frozen_embed);
    double f32, narrow, wide;
    enum hm_dtype kind;
    if (in->freeze_embeddings && !hm_model_narrow_plan(in->ck, c, 1, 1, &f32, &narrow, &wide,
                                                       &kind))
        part[HM_PLAN_WEIGHTS] = f32 + narrow + wide; /* hm_model_load_trainee */
    part[HM_PLAN_ACTIVATIONS] = (double)hm_trainer_activation_bytes(c, &to);
    part[HM_PLAN_WORKSPACES] = (double)hm_mixers_ws_size(c, in->be, in->T, 1);
    if (in->teacher && teacher_parts(in->teacher, in->be, in->T, !in->align, part,
                                      &out->teacher_dtype))
        return hm_error_set(err, HM_ERR_INVALID, "cannot make the tensor table of %s",
                            hm_arch_name(hm_ckpt_config(in->teacher)));
    return HM_OK;
}

enum hm_status hm_plan_train(const struct hm_plan_in *in, struct hm_mem_plan *out,
                             struct hm_error *err)
{
    memset(out, 0, sizeof *out);
    out->teacher_dtype = HM_DTYPE_F32;
    double part[HM_PLAN_N_PARTS] = {0};
    int64_t *off = NULL, nt = 0, largest = 0;
    enum hm_status st = in->stage1 ? stage1_parts(in, out, part, &off, &nt, &largest, err)
                                   : trainee_parts(in, out, part, &off, &nt, &largest, err);
    if (st != HM_OK) {
        free(off);
        return st;
    }
    const int P = in->procs > 1 ? in->procs : 1, z1 = in->zero1 && P > 1 && in->adamw;
    const int64_t owned = z1 ? zero1_share(off, nt, P) : out->trainable;
    free(off);
    part[HM_PLAN_MOMENTS] = in->adamw ? 8.0 * (double)owned : 0;
    /* buffers: one process summing micro-batches keeps the sum; MPI packs
     * the trainable gradients, receives the pieces of its share and sums
     * them; ZeRO-1 (and a device) stage one tensor of the state; stage 1
     * saves the feature maps through one host copy */
    double buf = HM_PLAN_PROCESS_BYTES + 4.0 * (double)(in->B * (in->T + 1));
    double dev_buf = 0;
    if (P == 1 && in->accum > 1 && !in->stage1)
        dev_buf += 4.0 * (double)out->trainable;
    if (P > 1) {
        const double share = (double)(out->trainable + P - 1) / P;
        buf += 4.0 * (double)out->trainable + 4.0 * share * (P + 1);
    }
    if (z1 || in->device)
        buf += 4.0 * (double)largest;
    if (in->stage1)
        buf += 4.0 * (double)out->trainable;
    if (in->device) {
        /* host: the trainee's fp32 copy until it is placed, and the buffers */
        out->host[HM_PLAN_WEIGHTS] = in->stage1 ? 0 : part[HM_PLAN_WEIGHTS];
        out->host[HM_PLAN_BUFFERS] = buf;
        memcpy(out->dev, part, sizeof part);
        out->dev[HM_PLAN_BUFFERS] = dev_buf;
    } else {
        memcpy(out->host, part, sizeof part);
        out->host[HM_PLAN_BUFFERS] = buf + dev_buf;
    }
    for (int p = 0; p < HM_PLAN_N_PARTS; p++) {
        out->host_total += out->host[p];
        out->dev_total += out->dev[p];
    }
    return HM_OK;
}
