/* train_cli.h — the flags every training tool shares (contract §6):
 * --data --val-data --steps|--tokens --batch --seq-len --grad-accum --lr
 * --warmup --optimizer --weight-decay --clip --data-order --seed --threads
 * --log --save-every --val-every --val-tokens --resume -n/--dry-run
 * --device --backend --dtype -o -f.
 *
 * Usage in a tool:
 *     struct hm_train_cli t;
 *     hm_train_cli_defaults(&t, "hm-finetune", 0.1);
 *     ... getopt_long with HM_TRAIN_LONGOPTS and HM_TRAIN_SHORTOPTS ...
 *         default: if (!hm_train_cli_opt(c, optarg, &t)) hm_cli_common_opt(c, &common);
 *     hm_train_cli_finish(&t, argc, argv);
 */
#ifndef HM_TRAIN_CLI_H
#define HM_TRAIN_CLI_H

#include <getopt.h>
#include "backend.h"
#include "run.h"
#include "safetensors.h"

enum {
    HM_TOPT_DATA = 1200, HM_TOPT_VAL_DATA, HM_TOPT_STEPS, HM_TOPT_TOKENS, HM_TOPT_BATCH,
    HM_TOPT_SEQ_LEN, HM_TOPT_ACCUM, HM_TOPT_LR, HM_TOPT_WARMUP, HM_TOPT_OPTIMIZER,
    HM_TOPT_WD, HM_TOPT_CLIP, HM_TOPT_ORDER, HM_TOPT_SEED, HM_TOPT_THREADS, HM_TOPT_LOG,
    HM_TOPT_SAVE_EVERY, HM_TOPT_VAL_EVERY, HM_TOPT_VAL_TOKENS, HM_TOPT_RESUME, HM_TOPT_DEVICE,
    HM_TOPT_BACKEND, HM_TOPT_DTYPE, HM_TOPT_STOP_AFTER, HM_TOPT_ZERO1, HM_TOPT_MEMORY,
    HM_TOPT_GPU_MEMORY,
};

#define HM_TRAIN_LONGOPTS                                                  \
    {"output", required_argument, NULL, 'o'},                              \
    {"force", no_argument, NULL, 'f'},                                     \
    {"dry-run", no_argument, NULL, 'n'},                                   \
    {"data", required_argument, NULL, HM_TOPT_DATA},                       \
    {"val-data", required_argument, NULL, HM_TOPT_VAL_DATA},               \
    {"steps", required_argument, NULL, HM_TOPT_STEPS},                     \
    {"tokens", required_argument, NULL, HM_TOPT_TOKENS},                   \
    {"batch", required_argument, NULL, HM_TOPT_BATCH},                     \
    {"seq-len", required_argument, NULL, HM_TOPT_SEQ_LEN},                 \
    {"grad-accum", required_argument, NULL, HM_TOPT_ACCUM},                \
    {"lr", required_argument, NULL, HM_TOPT_LR},                           \
    {"warmup", required_argument, NULL, HM_TOPT_WARMUP},                   \
    {"optimizer", required_argument, NULL, HM_TOPT_OPTIMIZER},             \
    {"weight-decay", required_argument, NULL, HM_TOPT_WD},                 \
    {"clip", required_argument, NULL, HM_TOPT_CLIP},                       \
    {"data-order", required_argument, NULL, HM_TOPT_ORDER},                \
    {"seed", required_argument, NULL, HM_TOPT_SEED},                       \
    {"threads", required_argument, NULL, HM_TOPT_THREADS},                 \
    {"log", required_argument, NULL, HM_TOPT_LOG},                         \
    {"save-every", required_argument, NULL, HM_TOPT_SAVE_EVERY},           \
    {"val-every", required_argument, NULL, HM_TOPT_VAL_EVERY},             \
    {"val-tokens", required_argument, NULL, HM_TOPT_VAL_TOKENS},           \
    {"resume", no_argument, NULL, HM_TOPT_RESUME},                         \
    {"device", required_argument, NULL, HM_TOPT_DEVICE},                   \
    {"backend", required_argument, NULL, HM_TOPT_BACKEND},                 \
    {"dtype", required_argument, NULL, HM_TOPT_DTYPE},                     \
    {"stop-after", required_argument, NULL, HM_TOPT_STOP_AFTER},           \
    {"zero1", no_argument, NULL, HM_TOPT_ZERO1},                           \
    {"memory", required_argument, NULL, HM_TOPT_MEMORY},                   \
    {"gpu-memory", required_argument, NULL, HM_TOPT_GPU_MEMORY}

#define HM_TRAIN_SHORTOPTS "o:fn"

/* Usage text for the shared flags (tools paste it into their help). */
#define HM_TRAIN_USAGE                                                                     \
    "Data and length:\n"                                                                   \
    "      --data FILE          training token file (hm-tokenize)\n"                       \
    "      --val-data FILE      held-out token file: validation loss in the log\n"         \
    "      --steps N | --tokens N  optimizer steps, or tokens (steps = N / (B·L·accum));\n" \
    "                           --steps 0 writes the initial model untrained\n"            \
    "      --batch B            sequences per micro-batch (default 8)\n"                   \
    "      --seq-len L          inputs per sequence (default 256)\n"                       \
    "      --grad-accum N       micro-batches per optimizer step (default 1)\n"            \
    "      --data-order shuffle|sequential  window order (default shuffle, --seed)\n"      \
    "Optimizer (contract §4):\n"                                                               \
    "      --optimizer adamw|sgd   (default adamw: β 0.9/0.95, ε 1e-8)\n"                  \
    "      --lr X               peak learning rate (default 6e-4)\n"                       \
    "      --warmup N           linear warm-up steps, then cosine to 0.1·peak\n"           \
    "                           (default: min(1000, steps/10))\n"                          \
    "      --clip X             global gradient-norm clip, 0 = off (default 1.0;\n"        \
    "                           with sgd 0, contract §4)\n"        \
    "Run:\n"                                                                               \
    "  -o, --output FILE        the trained checkpoint (state in FILE.state)\n"            \
    "  -f, --force              replace an existing output and log\n"                      \
    "      --dtype f32|f16|bf16 dtype of the output weights (default f32)\n"               \
    "      --seed S             shuffle seed (default 0)\n"                                \
    "      --log FILE           JSON lines, one per step\n"                                \
    "      --val-every N        validate every N steps (and at the end)\n"                 \
    "      --val-tokens N       at most N validation targets (default all)\n"              \
    "      --save-every N       write FILE and FILE.state every N steps\n"                 \
    "      --resume             continue from FILE.state exactly\n"                        \
    "      --stop-after N       stop after N steps of this invocation, saving FILE and\n"  \
    "                           FILE.state (train in chunks; continue with --resume)\n"   \
    "  -n, --dry-run            check inputs and print the plan, train nothing: the\n"   \
    "                           peak memory per process, read from headers alone, and\n" \
    "                           whether it fits (exit 0 either way)\n"                   \
    "      --memory SIZE        plan for SIZE of host memory (e.g. 64G) instead of\n"    \
    "                           this machine's available memory\n"                     \
    "      --gpu-memory SIZE    with --device cuda: the GPU's memory to plan for\n"      \
    "                           (e.g. 80G)\n"                                           \
    "      --threads N          CPU threads (default: all cores)\n"                        \
    "      --device cpu|cuda    (default cpu; cuda = --backend cuda)\n"                   \
    "      --backend NAME       ref|fast|checked on the CPU (default fast), or cuda\n"                          \
    "Several processes (mpirun -np N; README \"Training on several machines\"):\n"   \
    "                           each takes --batch x --grad-accum windows a step; the\n" \
    "                           result equals one process with --grad-accum x N\n"   \
    "      --zero1              shard the AdamW moments over the processes (ZeRO-1):\n" \
    "                           less memory per process, the same result\n"

struct hm_train_cli {
    struct hm_run_opts run;
    int64_t tokens;            /* --tokens, or 0 */
    int have_steps;
    int warmup_set;
    int wd_set;
    int clip_set;              /* --clip given (SGD clips only then) */
    int threads;
    const char *device;        /* --device, or NULL */
    const char *backend_name;  /* --backend, or NULL */
    const struct hm_backend *backend; /* from both, set by hm_train_cli_finish */
    struct hm_run_comm comm;   /* the run's processes (hm_cli_dist_open); size 1 alone */
    int dry_run;
    double memory;             /* --memory bytes, or 0: this machine's available */
    double gpu_memory;         /* --gpu-memory bytes, or 0 */
    int plan_device;           /* the run is for a device (CUDA): plans give its memory */
    char plan_note[256];       /* what a plan could not know here, or "" */
    enum hm_dtype out_dtype;
};

void hm_train_cli_defaults(struct hm_train_cli *t, const char *tool, double default_wd);
/* Handles one option; returns 1 if it was a training option. */
int hm_train_cli_opt(int c, const char *arg, struct hm_train_cli *t);
/* Checks required flags and conflicts (usage errors exit 2), derives steps
 * from tokens and the default warm-up, sets threads, records the input `in`
 * and refuses an output that is the input, or exists without -f/--resume
 * (exit 1). json: --json was given (it cannot share stdout with -o -). */
void hm_train_cli_finish(struct hm_train_cli *t, int argc, char **argv, const char *in,
                         int json);

/* One position-limit rule for every run of a teacher (contract §1): a
 * softmax model (the trainee itself, a stage-1 teacher, a --kd-teacher or
 * --align teacher) at path has positions for max_position_embeddings
 * tokens; --seq-len beyond it exits 1 naming the model (role: "the
 * teacher", "--kd-teacher" ...). Students (no position embeddings): nothing. */
struct hm_config;
void hm_train_cli_check_positions(const struct hm_train_cli *t, const struct hm_config *c,
                                  const char *path, const char *role);

/* Micro-batches of one optimizer step over all processes: --grad-accum ×
 * processes (the accum the model's loss scale divides by). */
int64_t hm_train_cli_micro_batches(const struct hm_train_cli *t);

/* Runs the training loop with progress on stderr (label: "training",
 * "stage 1"; what: how the loss is named in messages), then reports the
 * result: --json one object on stdout, else one line on stderr. Exits 1
 * naming `in` when the run fails. */
struct hm_cli_common;
void hm_train_cli_run(const struct hm_train_cli *t, const struct hm_run_model *rm,
                      const struct hm_cli_common *common, const char *in, const char *label,
                      const char *what);

#endif
