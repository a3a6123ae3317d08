/* run_internal.h — what the files of a training run share (run.h is the
 * public side): the run's state and the functions run_loop.c calls in
 * run_state.c, run_log.c and run_comm.c. */
#ifndef HM_RUN_INTERNAL_H
#define HM_RUN_INTERNAL_H

#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "run.h"

struct run {
    const struct hm_run_model *model;
    const struct hm_run_opts *o;
    const struct hm_opt_param *p;
    int64_t np;
    struct hm_optim opt;
    int64_t step;    /* completed optimizer steps */
    int64_t tokens;  /* training tokens consumed */
    uint64_t data_hash;
    uint64_t base_hash;  /* the input checkpoint's bytes (0: a stream, unknown) */
    char *state_path;
    int primary;     /* hm_run_is_primary(o->comm): this process writes */
    int64_t *off;    /* [np + 1] host: tensor i's values [off[i], off[i + 1]) of Σ n */
    int zero1;       /* ZeRO-1 in effect (o->zero1 with several processes) */
    int64_t own0, own1; /* the tensors whose moments this process keeps and
                           updates: [own0, own1) (all without ZeRO-1) */
    int64_t *first;  /* [size + 1] ZeRO-1: process q owns tensors [first[q], first[q + 1]) */
    int64_t *at;     /* [size + 1] ZeRO-1: process q's values start at at[q] = off[first[q]] */
    float *hw;       /* [largest tensor] host, ZeRO-1: a tensor's weights or
                        moments on their way from its owner */
    float *acc;      /* [Σ n] backend: one process's sum of a step's micro-batch
                        gradients (run_fold_grads), when it takes more than one */
    int saved;       /* this run has written its state and output once (later
                        saves replace its own files) */
};

/* ---- run_state.c: state files, resume checks, checkpoint saves ---- */

/* xxh3 of the input checkpoint: the file, or a folder's *.safetensors and
 * *.json files in name order (each file's hash, hashed again). 0 for '-'. */
uint64_t run_base_checkpoint_hash(const char *path);

/* HM_AFILE_FORCE once this run has saved (or with -f / --resume), else 0. */
int run_save_flags(const struct run *r);

/* Writes r->state_path (atomically) from the backend's weights and moments.
 * Every process calls it (with ZeRO-1 the moments are gathered from their
 * owners first); the primary writes. */
enum hm_status run_save_state(struct run *r, struct hm_error *err);

/* Reads r->state_path: checks that every flag that changes the trajectory
 * matches this run and the payload checksum, uploads the weights and
 * moments, sets r->step, r->opt.t, r->tokens. Every process. */
enum hm_status run_load_state(struct run *r, struct hm_error *err);

/* The state file (unless the output is '-') and then the output checkpoint
 * with the provenance chain extended (t0: the run's start, final_loss: the
 * last step's loss). Every process calls it; the primary writes. */
enum hm_status run_save_all(struct run *r, double final_loss, time_t t0, struct hm_error *err);

/* What identifies the state at path, from its header alone: its step and
 * payload_xxh3. 1 when a readable state is there, else 0 (*step = -1). */
int run_state_identity(const char *path, int64_t *step, uint64_t *payload);

/* ---- run_agree.c: the agreement at the start ---- */

/* With several processes (and a transport with allgather_bytes): every
 * process's inputs (checkpoint, --data, --val-data of xxh3 val_hash, the
 * more_inputs), the flags that change the trajectory or the collectives,
 * the trainable layout and, with --resume, the state each one sees, against
 * process 0's (run.h hm_run_agree). Needs r->base_hash, r->data_hash, r->p,
 * r->np, r->off. Every process, before any other collective. */
enum hm_status run_agree_start(struct run *r, uint64_t val_hash, struct hm_error *err);

/* ---- run_log.c: the JSON-lines log ---- */

/* One JSON line (fp NULL: nothing); a failed write (full disk, /dev/full)
 * is an error that names the log and the cause. aux: m->n_aux numbers or
 * NULL. Primary only. */
enum hm_status run_log_line(FILE *fp, const char *path, const struct hm_run_model *m,
                            const struct hm_run_report *rep, const double *aux,
                            struct hm_error *err);

/* Keep only log lines with step ≤ keep (resume must not duplicate steps).
 * Primary only. */
enum hm_status run_trim_log(const char *path, int64_t keep, struct hm_error *err);

/* ---- run_comm.c: the processes' shares, sums and decisions ---- */

/* The step's decision flags (host ints, 0 or 1) made everyone's: their
 * maximum over the processes (comm->reduce_max), in place; nothing for a
 * single process. */
void run_agree(const struct run *r, int *flags, int n);

/* The tensor offsets r->off and, with ZeRO-1, the shares (r->first, r->at,
 * r->own0/own1, r->hw); then the optimizer for the tensors this process
 * updates. Every process. */
enum hm_status run_shares_init(struct run *r, struct hm_error *err);
void run_shares_release(struct run *r);

/* ZeRO-1, after the owners' update: every process's weights ← the owners'. */
enum hm_status run_share_weights(struct run *r, struct hm_error *err);

/* ZeRO-1: the process that owns tensor i. */
int run_owner(const struct run *r, int64_t i);

/* ZeRO-1, after the last fold: the owned tensors' gradients ← the sum. */
enum hm_status run_own_grads(struct run *r, struct hm_error *err);

/* G = o->accum · processes: the micro-batches of one optimizer step. */
int64_t run_micro_batches(const struct run *r);

/* After this process's micro-step a: the step's gradient sum (run.h) takes
 * every process's micro-batch (comm->fold_grads, or r->acc for one
 * process). Nothing when G = 1. */
enum hm_status run_fold_grads(struct run *r, int64_t a, struct hm_error *err);

/* After the last fold: p[i].g ← the sum, on every process. Nothing when
 * G = 1. */
enum hm_status run_gather_grads(struct run *r, struct hm_error *err);

/* out[q·n .. q·n + n) ← process q's x[0 .. n) (host); a copy for one
 * process. */
enum hm_status run_allgather(const struct run *r, const double *x, int64_t n, double *out,
                             struct hm_error *err);

#endif
