/* plan.h — the memory a training run will need, from checkpoint headers
 * alone (no weight is read): what `--dry-run` and hm-inspect print.
 *
 * The plan counts what the run allocates, by the same functions that size
 * the allocations (hm_param_specs, hm_trainer_activation_bytes, the
 * mixers' workspace sizes, hm_model_narrow_plan), per process:
 *   - the trainee's weights, fp32 (it is loaded fp32: everything may train);
 *   - its gradients (the full tensor table but frozen embeddings, which have
 *     no slot);
 *   - AdamW's m and v over the trainable values (ZeRO-1 with P processes:
 *     this process's share, by the same partition hm_run_partition makes);
 *   - the training activations (one arena) and the mixer workspaces;
 *   - the teacher (KD or stage 1b): its fp32 tensors, its bf16/f16 layer
 *     matrices kept narrow and the one widened layer, and its forward
 *     workspace;
 *   - buffers: the gradient sum of several micro-batches, the MPI reduction
 *     buffers, the state-save staging, token batches and the process itself.
 * Load and save add nothing beyond one tensor at a time: the weights load
 * into their final buffers (host memory adopted) and saves stream.
 *
 * Stage 1 (hm-linearize) holds the teacher once, at its width, as the
 * student's frozen tensors (teacher parts), and trains the feature maps
 * alone (weights, gradients, moments); its scratch is one sequence's.
 *
 * On a device backend (CUDA) the weights, gradients, moments, activations,
 * workspaces and teacher live in device memory; host memory holds the
 * trainee's fp32 load copy until it is placed, and the buffers. */
#ifndef HM_TRAIN_PLAN_H
#define HM_TRAIN_PLAN_H

#include <stdint.h>

#include "backend.h"
#include "checkpoint.h"
#include "config.h"
#include "trainer.h"

enum hm_plan_part {
    HM_PLAN_WEIGHTS,     /* the trainee's fp32 weights */
    HM_PLAN_GRADS,
    HM_PLAN_MOMENTS,
    HM_PLAN_ACTIVATIONS,
    HM_PLAN_WORKSPACES,
    HM_PLAN_TEACHER_F32,    /* the teacher's fp32 tensors and widened layer */
    HM_PLAN_TEACHER_NARROW, /* its bf16/f16 layer matrices */
    HM_PLAN_BUFFERS,
    HM_PLAN_N_PARTS
};

/* The part's name in reports ("weights", "gradients", ...; JSON keys). */
const char *hm_plan_part_name(enum hm_plan_part p);

struct hm_plan_in {
    const struct hm_ckpt *ck;        /* borrowed: the trainee's header */
    const struct hm_ckpt *teacher;   /* borrowed: the KD or stage-1b teacher's, or NULL */
    int align;                       /* the teacher is stage 1b's (else KD's) */
    int align_block;                 /* stage 1b on whole blocks (trainer.h) */
    int64_t B, T;                    /* windows per micro-batch, tokens per window */
    int64_t accum;                   /* micro-batches each process sums (--grad-accum) */
    int freeze_embeddings;
    int recompute;                   /* --recompute (trainer.h) */
    int adamw;                       /* AdamW (m, v); else SGD (no state) */
    int procs;                       /* processes of the run (≥ 1) */
    int zero1;                       /* --zero1 */
    const struct hm_backend *be;     /* borrowed: the workspace sizes are its own */
    int device;                      /* plan for device memory (a CUDA run) */
    int stage1;                      /* hm-linearize: ck is the teacher, the feature maps
                                        train (one sequence at a time: B does not count) */
    int64_t feature_dim;             /* stage 1's F (0: the head dim) */
};

struct hm_mem_plan {
    double host[HM_PLAN_N_PARTS];    /* bytes per process of host memory */
    double dev[HM_PLAN_N_PARTS];     /* bytes per process of device memory (0: host run) */
    double host_total, dev_total;    /* the peaks: sums of the above */
    int64_t params, trainable;       /* the trainee's values, those that train */
    enum hm_dtype teacher_dtype;     /* the narrow width kept (F32: none) */
};

/* Fills *out for in. HM_ERR_INVALID when the trainee's tensor table cannot
 * be made. */
enum hm_status hm_plan_train(const struct hm_plan_in *in, struct hm_mem_plan *out,
                             struct hm_error *err);

/* Host bytes of one hm process before any model (libraries, stacks, token
 * buffers): measured, and part of HM_PLAN_BUFFERS. */
#define HM_PLAN_PROCESS_BYTES (18.0 * 1024 * 1024)

#endif
