/* run.h — the training run every training tool shares (contract §4).
 *
 * A run owns the schedule, the optimizer, the batches, validation, the
 * JSON-lines log, checkpoints and resume; the model side is a small vtable
 * (struct hm_run_model) so that hm-finetune (cross-entropy, any arch) and
 * hm-linearize (layer-wise cosine) share one loop.
 *
 * Resume. Every --save-every steps and at the end the run writes, each
 * atomically, first the state file `<out>.state` (safetensors: F32 master
 * weights "w.<name>", AdamW moments "m.<name>"/"v.<name>", and `hm.run`
 * metadata: step, optimizer t, tokens, seed, batch, seq_len, data xxh3,
 * schedule), then the output checkpoint. `--resume` reads only the state
 * file; batches are a pure function of the step (batches.h), so a resumed
 * run continues bit-for-bit as an uninterrupted one with the same flags.
 *
 * NaN guard. A non-finite loss or gradient stops the run before the update,
 * names the step and the first tensor whose gradient is non-finite, writes
 * the last good state (the weights before this step) and fails.
 *
 * Processes (struct hm_run_comm, the seam MPI fills). Every process
 * computes every step; only the primary (rank 0) does the I/O one process
 * should do: the JSON-lines log, the state file, the checkpoints and the
 * progress reports. What decides the path of the run is computed from
 * values every process has, so every process takes the same path: a step's
 * non-finite flag (from its downloaded loss sums and Σ g²) goes through
 * comm->reduce_max before anyone acts on it; validation, --save-every and
 * --stop-after depend only on the step number.
 *
 * Files. libconvert/run/: run_loop.c (hm_run_train, the step), run_state.c
 * (state save/load/resume checks, the payload hash, the host mirror,
 * checkpoint saves), run_log.c (the JSON-lines log, trim on resume),
 * run_validate.c (hm_run_validate), run_comm.c (the process seam);
 * run_internal.h holds what they share. */
#ifndef HM_RUN_H
#define HM_RUN_H

#include <stdint.h>
#include <stdio.h>

#include "batches.h"
#include "config.h"
#include "hm_error.h"
#include "backend.h"
#include "optim.h"
#include "tokfile.h"

/* The model side of a run. Every member gets ctx. */
struct hm_run_model {
    void *ctx;
    const struct hm_config *cfg;
    const struct hm_backend *be; /* the backend the model's tensors live on (optimizer ops) */
    /* Zero gradients (once per optimizer step). */
    void (*zero_grad)(void *ctx);
    /* Forward + backward of one micro-batch tokens [B, T+1] (host memory);
     * gradients accumulate, scaled for `accum` micro-batches. The
     * micro-batch's raw loss sums are added to sums[n_sums] (backend memory,
     * zeroed by the loop), which the loop downloads once a step. */
    enum hm_status (*accumulate)(void *ctx, const int32_t *tokens, double *sums,
                                 struct hm_error *err);
    int n_sums;              /* doubles of sums per micro-batch (≥ 1) */
    /* Host: a micro-batch's loss and aux[n_aux] (extra per-step numbers,
     * e.g. the per-layer loss; may be NULL when n_aux = 0) from its
     * downloaded sums. */
    void (*loss_of)(void *ctx, const double *sums, double *loss, double *aux);
    int n_aux;               /* length of aux */
    const char *aux_name;    /* JSON key for aux in the log, e.g. "layer_loss" */
    /* Trainable tensors (borrowed): weights, grads, decay flags. */
    const struct hm_opt_param *(*params)(void *ctx, int64_t *np);
    /* After every optimizer update (e.g. clamp A ≤ 0); may be NULL. */
    void (*post_update)(void *ctx);
    /* Validation loss on B consecutive windows, tokens [B T + 1] (window b
     * = tokens[b T .. b T + T]): *sum = Σ over the B T targets. May be
     * NULL (no validation). */
    enum hm_status (*val_sum)(void *ctx, const int32_t *tokens, int64_t B, int64_t T,
                              double *sum, struct hm_error *err);
    /* Write the model checkpoint (provenance: the full chain). */
    enum hm_status (*save)(void *ctx, const char *path, int flags, const char *provenance,
                           struct hm_error *err);
};

/* The processes of one run: the seam a data-parallel transport (MPI;
 * libconvert/dist/) fills. NULL (hm_run_opts.comm) is a single process.
 * Every process runs hm_run_train with the same options; each computes, only
 * hm_run_is_primary() writes.
 *
 * The global batch (contract §10). With N processes and o->accum = A, an
 * optimizer step takes G = A·N micro-batches of o->batch windows: micro-batch
 * m = a·N + r (a = 0 .. A−1, r = rank) is the one process r computes as its
 * a-th. Its gradients are summed in the order of m, each micro-batch's into
 * the step's sum: acc ← ((0 + g_0) + g_1) + … + g_{G−1}, elementwise in fp32,
 * which is what one process does with --grad-accum G. So N processes with A
 * equal one process with A·N, bit for bit. (G = 1 skips the sum: the
 * gradients of the one micro-batch are used as they are.) A step is
 *   for a < A: zero grads → accumulate → fold_grads(a)
 *   gather_grads → Σ g² → one download of the step's scalars → allgather of
 *   the loss sums → the non-finite flags → reduce_max → update or stop.
 * A failure only one process sees (its own compute, the primary's I/O) ends
 * that process with the error, and the launcher ends the others. */
struct hm_run_comm {
    int rank;   /* this process, 0 .. size − 1 */
    int size;   /* processes in the run (≥ 1) */
    void *ctx;  /* the transport's own; passed to the hooks */
    /* After micro-step a of a step: add every process's gradients p[i].g
     * (backend memory) of this micro-step to the step's sum, in rank order.
     * a = 0 starts the sum from zeros. The sum is the transport's (it may
     * keep only the share it owns). */
    enum hm_status (*fold_grads)(void *ctx, const struct hm_backend *be,
                                 const struct hm_opt_param *p, int64_t np, int64_t a,
                                 struct hm_error *err);
    /* After the step's last fold: every process's p[i].g ← the whole sum. */
    enum hm_status (*gather_grads)(void *ctx, const struct hm_backend *be,
                                   const struct hm_opt_param *p, int64_t np,
                                   struct hm_error *err);
    /* ZeRO-1 (hm_run_opts.zero1), instead of gather_grads: p[i].g ← the
     * sum, for the tensors this process owns (hm_run_partition) only. */
    enum hm_status (*own_grads)(void *ctx, const struct hm_backend *be,
                                const struct hm_opt_param *p, int64_t np,
                                struct hm_error *err);
    /* Host: x[0 .. n) ← process root's x (every process passes its own
     * buffer of n floats). ZeRO-1's weights after the update and moments
     * for the state go through it, a tensor at a time. */
    enum hm_status (*bcast_floats)(void *ctx, float *x, int64_t n, int root,
                                   struct hm_error *err);
    /* Host: out[r·n .. r·n + n) ← process r's x[0 .. n). */
    enum hm_status (*allgather)(void *ctx, const double *x, int64_t n, double *out,
                                struct hm_error *err);
    /* Host, in place: x[0 .. n) ← the maximum over the processes. The
     * step's decision flags go through it before any process acts on them. */
    void (*reduce_max)(void *ctx, int *x, int n);
    /* Host bytes (optional: a transport without them skips the start's
     * agreement, hm_run_agree, and every process reads the state itself):
     * out[r·n .. r·n + n) ← process r's x[0 .. n). */
    enum hm_status (*allgather_bytes)(void *ctx, const void *x, size_t n, void *out,
                                      struct hm_error *err);
    /* Host bytes (optional, as above): x[0 .. n) ← process root's. */
    enum hm_status (*bcast_bytes)(void *ctx, void *x, size_t n, int root,
                                  struct hm_error *err);
};

/* Processes in the run: comm->size, or 1 without comm. */
int hm_run_size(const struct hm_run_comm *comm);

/* Work split by chunks (validation and evaluation windows): process q
 * computes the chunks c with c mod size = q (hm_run_owns_chunk). Then
 * hm_run_share_chunks makes v[0 .. n·per) (host; chunk c's values at
 * v[c·per ..]) everyone's: each chunk's values are taken from the process
 * that owns it, so a total added in order is the one process's, bit for
 * bit. comm NULL or one process: nothing. */
int hm_run_owns_chunk(const struct hm_run_comm *comm, int64_t c);
enum hm_status hm_run_share_chunks(const struct hm_run_comm *comm, double *v, int64_t n,
                                   int64_t per, struct hm_error *err);

/* Contiguous shares of np tensors of sizes off[i + 1] − off[i] among size
 * processes, balanced by elements: process r owns tensors
 * [first[r], first[r + 1]). first: [size + 1]. */
void hm_run_partition(const int64_t *off, int64_t np, int size, int64_t *first);

/* 1 if this process does the run's one-process I/O (log, state, checkpoints,
 * progress): rank 0, or any process when comm is NULL. */
int hm_run_is_primary(const struct hm_run_comm *comm);

struct hm_prov_input;

/* ---- the agreement at the start of a run of several processes ----
 * Before any work, every process of a run (hm_run_train, hm-eval) states
 * what it computes with: the xxh3 of each input, every flag that changes
 * the trajectory or the collectives, and the resume state it sees. The
 * statements are gathered (comm->allgather_bytes) and any difference from
 * process 0 is refused, on every process with the same message, naming the
 * process and the file or flag ("process 1 of 2 reads another --data
 * 'train.tok' (xxh3 …) than process 0 (xxh3 …)"), instead of a silently
 * wrong result or a hang in a collective. What a process needs: the inputs
 * at the same paths (a shared file system or copies, the same bytes); the
 * output folder and the state are process 0's alone (it checks the folder,
 * reads the state and sends the others what they need). */
#define HM_AGREE_MAX 64
enum hm_agree_kind {
    HM_AGREE_FLAG,   /* a flag's value: must be equal */
    HM_AGREE_FILE,   /* an input every process reads: the same bytes */
    HM_AGREE_COPY,   /* a file only process 0 reads (the state): another
                        process may lack it, but a copy it has must be equal */
    HM_AGREE_ABSENT, /* such a file, absent on this process */
};
struct hm_agree_item {
    char key[40];    /* "--batch", "--data", "the input checkpoint" */
    char val[152];   /* the value, or the file's path (cut to fit) */
    char what[64];   /* a file's description ("xxh3 0123…", "step 4, …") */
    uint64_t h;      /* xxh3 of the value, or of the file */
    int32_t kind;    /* enum hm_agree_kind */
    int32_t pad;
};
struct hm_agreement {
    int32_t n, pad;
    struct hm_agree_item item[HM_AGREE_MAX];
};
/* Adds a flag (value printf-style), a file every process reads (path and
 * its xxh3), or a copy only process 0 reads (present: this process has it;
 * what: its description; h: its identity). Items past HM_AGREE_MAX are a
 * bug (HM_BUG-style abort): the lists are fixed by the code. */
void hm_agree_flag(struct hm_agreement *a, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void hm_agree_file(struct hm_agreement *a, const char *key, const char *path, uint64_t xxh3);
void hm_agree_copy(struct hm_agreement *a, const char *key, const char *path, int present,
                   const char *what, uint64_t h);
/* Every process's statements against process 0's: HM_OK when they agree
 * (or comm is NULL, one process, or a transport without allgather_bytes);
 * else HM_ERR_INVALID naming the first difference, the same on every
 * process. A collective: every process calls it once, at the same point. */
enum hm_status hm_run_agree(const struct hm_run_comm *comm, const struct hm_agreement *a,
                            struct hm_error *err);

/* xxh3 of a checkpoint input as a resume records it: the file, or a
 * folder's *.safetensors and *.json files in name order; 0 for '-'. */
uint64_t hm_run_checkpoint_hash(const char *path);

/* A model-side setting that changes the trajectory (hm-finetune's
 * distillation teacher, weight and temperature, its frozen set): key and
 * value, both borrowed. absent (borrowed, may be NULL): for a field added
 * after states were first written, the value a state without the key was
 * made with (it resumes when that equals value); NULL: the key must be
 * there. */
struct hm_run_field {
    const char *key;
    const char *value;
    const char *absent;
};

struct hm_run_opts {
    const char *tool;          /* "hm-finetune" ... */
    int argc;
    char *const *argv;
    const char *in_path;       /* the input checkpoint (provenance) */
    const char *out_path;      /* -o */
    int force;                 /* -f */
    const char *data_path, *val_path;
    int64_t steps;             /* total optimizer steps (from --steps or --tokens) */
    int64_t batch, seq_len;
    int64_t accum;             /* micro-batches per step of THIS process (A); a
                                  step takes A · hm_run_size(comm) of them */
    double lr;
    int64_t warmup;
    struct hm_optim_cfg optim;
    enum hm_data_order order;
    uint64_t seed;
    const char *log_path;      /* NULL: no log */
    int64_t save_every, val_every;
    int64_t val_tokens;        /* max validation targets (0 = all) */
    int resume;
    int64_t stop_after;        /* > 0: stop after this many steps of this invocation,
                                  saving state and output (continue with resume) */
    const char *prev_provenance; /* the input's chain, or NULL */
    const struct hm_run_comm *comm; /* the run's processes; NULL: a single process */
    int zero1;                 /* ZeRO-1: with several processes, each keeps the AdamW
                                  moments of its share of the tensors only, updates
                                  them, and the weights are shared after the update;
                                  the same bits as without */
    /* The model side's settings (may be NULL): recorded in the state file,
     * and a resume with any of them changed is refused naming it. */
    const struct hm_run_field *fields;
    int n_fields;
    /* Inputs besides the checkpoint and --data (e.g. --kd-teacher) for the
     * provenance entry (may be NULL). */
    const struct hm_prov_input *more_inputs;
    int n_more_inputs;
};

/* Progress and messages go through this callback (tools print them). */
struct hm_run_report {
    int64_t step, steps, tokens;
    double loss, lr, grad_norm, tokens_per_s, val_loss; /* val_loss NaN if not measured */
};
typedef void (*hm_run_progress_fn)(void *ctx, const struct hm_run_report *r);

/* Runs the whole training. The data files are opened and checked here.
 * progress is called on the primary only. final (optional): the last
 * report (on every process). */
enum hm_status hm_run_train(const struct hm_run_model *model, const struct hm_run_opts *o,
                            hm_run_progress_fn progress, void *pctx,
                            struct hm_run_report *final, struct hm_error *err);

/* Mean validation loss over non-overlapping windows (contract §7) of val,
 * at most max_targets targets (0 = all), the windows shared among comm's
 * processes (NULL: one), the same bits for any number of them. */
enum hm_status hm_run_validate(const struct hm_run_model *model,
                               const struct hm_tok_file *val, int64_t T, int64_t max_targets,
                               const struct hm_run_comm *comm, double *mean,
                               struct hm_error *err);

#endif
