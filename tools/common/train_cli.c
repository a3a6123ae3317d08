#include "train_cli.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "atomic_file.h"
#include "config.h"
#include "cli.h"
#include "fileio.h"
#include "threads.h"

/* An output path must be a regular file (or absent) in an existing
 * directory: -f never replaces a device, FIFO, socket or directory, and a
 * missing directory is found before any work starts. */
static void check_output_path(const char *path)
{
    struct stat sb;
    struct hm_error err;
    if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode))
        hm_die("output '%s' is not a regular file (a device, FIFO, socket or directory): "
               "refusing to replace it", path);
    if (hm_output_dir_check(path, &err) != HM_OK)
        hm_die_err("cannot write", path, &err);
}
void hm_train_cli_defaults(struct hm_train_cli *t, const char *tool, double default_wd)
{
    memset(t, 0, sizeof *t);
    t->run.tool = tool;
    t->run.batch = 8;
    t->run.seq_len = 256;
    t->run.accum = 1;
    t->run.lr = 6e-4;
    t->run.order = HM_ORDER_SHUFFLE;
    hm_optim_cfg_defaults(&t->run.optim, HM_OPTIM_ADAMW, default_wd);
    t->device = NULL;
    t->backend = NULL; /* hm_train_cli_finish: hm_cli_backend(--device, --backend) */
    t->out_dtype = HM_DTYPE_F32;
    t->threads = 0;
}

int hm_train_cli_opt(int c, const char *arg, struct hm_train_cli *t)
{
    struct hm_run_opts *r = &t->run;
    switch (c) {
    case 'o': r->out_path = arg; return 1;
    case 'f': r->force = 1; return 1;
    case 'n': t->dry_run = 1; return 1;
    case HM_TOPT_DATA: r->data_path = arg; return 1;
    case HM_TOPT_VAL_DATA: r->val_path = arg; return 1;
    case HM_TOPT_STEPS: r->steps = hm_parse_i64(arg, "--steps", 0, INT64_MAX / 2); t->have_steps = 1; return 1;
    case HM_TOPT_TOKENS: t->tokens = hm_parse_i64(arg, "--tokens", 1, INT64_MAX / 2); return 1;
    case HM_TOPT_BATCH: r->batch = hm_parse_i64(arg, "--batch", 1, 1 << 20); return 1;
    case HM_TOPT_SEQ_LEN: r->seq_len = hm_parse_i64(arg, "--seq-len", 1, 1 << 20); return 1;
    case HM_TOPT_ACCUM: r->accum = hm_parse_i64(arg, "--grad-accum", 1, 1 << 20); return 1;
    case HM_TOPT_LR: r->lr = hm_parse_f64(arg, "--lr", 0, 1e3); return 1;
    case HM_TOPT_WARMUP: r->warmup = hm_parse_i64(arg, "--warmup", 0, INT64_MAX / 2); t->warmup_set = 1; return 1;
    case HM_TOPT_OPTIMIZER:
        if (strcmp(arg, "adamw") == 0)
            r->optim.kind = HM_OPTIM_ADAMW;
        else if (strcmp(arg, "sgd") == 0)
            r->optim.kind = HM_OPTIM_SGD;
        else
            hm_usage_error("--optimizer must be adamw or sgd, got '%s'", arg);
        return 1;
    case HM_TOPT_WD: r->optim.weight_decay = hm_parse_f64(arg, "--weight-decay", 0, 1e3); t->wd_set = 1; return 1;
    case HM_TOPT_CLIP: r->optim.clip = hm_parse_f64(arg, "--clip", 0, 1e9); t->clip_set = 1; return 1;
    case HM_TOPT_ORDER:
        if (strcmp(arg, "shuffle") == 0)
            r->order = HM_ORDER_SHUFFLE;
        else if (strcmp(arg, "sequential") == 0)
            r->order = HM_ORDER_SEQUENTIAL;
        else
            hm_usage_error("--data-order must be shuffle or sequential, got '%s'", arg);
        return 1;
    case HM_TOPT_SEED: r->seed = (uint64_t)hm_parse_i64(arg, "--seed", 0, INT64_MAX); return 1;
    case HM_TOPT_THREADS: t->threads = (int)hm_parse_i64(arg, "--threads", 1, 4096); return 1;
    case HM_TOPT_LOG: r->log_path = arg; return 1;
    case HM_TOPT_SAVE_EVERY: r->save_every = hm_parse_i64(arg, "--save-every", 1, INT64_MAX / 2); return 1;
    case HM_TOPT_VAL_EVERY: r->val_every = hm_parse_i64(arg, "--val-every", 1, INT64_MAX / 2); return 1;
    case HM_TOPT_VAL_TOKENS: r->val_tokens = hm_parse_i64(arg, "--val-tokens", 1, INT64_MAX / 2); return 1;
    case HM_TOPT_RESUME: r->resume = 1; return 1;
    case HM_TOPT_STOP_AFTER: r->stop_after = hm_parse_i64(arg, "--stop-after", 1, INT64_MAX / 2); return 1;
    case HM_TOPT_DEVICE: t->device = arg; return 1;
    case HM_TOPT_BACKEND: t->backend_name = arg; return 1;
    case HM_TOPT_ZERO1: t->run.zero1 = 1; return 1;
    case HM_TOPT_MEMORY: t->memory = (double)hm_parse_bytes(arg, "--memory"); return 1;
    case HM_TOPT_GPU_MEMORY: t->gpu_memory = (double)hm_parse_bytes(arg, "--gpu-memory"); return 1;
    case HM_TOPT_DTYPE:
        if (strcmp(arg, "f32") == 0 || strcmp(arg, "F32") == 0)
            t->out_dtype = HM_DTYPE_F32;
        else if (strcmp(arg, "f16") == 0 || strcmp(arg, "F16") == 0)
            t->out_dtype = HM_DTYPE_F16;
        else if (strcmp(arg, "bf16") == 0 || strcmp(arg, "BF16") == 0)
            t->out_dtype = HM_DTYPE_BF16;
        else
            hm_usage_error("--dtype must be f32, f16 or bf16, got '%s'", arg);
        return 1;
    }
    return 0;
}

void hm_train_cli_finish(struct hm_train_cli *t, int argc, char **argv, const char *in,
                         int json)
{
    struct hm_run_opts *r = &t->run;
    r->argc = argc;
    r->argv = argv;
    r->in_path = in;
    if (!r->out_path && !t->dry_run)
        hm_usage_error("missing -o/--output");
    if (!r->data_path)
        hm_usage_error("missing --data");
    if (t->have_steps && t->tokens)
        hm_usage_error("give --steps or --tokens, not both");
    if (!t->have_steps && !t->tokens)
        hm_usage_error("missing --steps or --tokens");
    if (r->val_every && !r->val_path)
        hm_usage_error("--val-every needs --val-data (there is nothing to validate on)");
    /* several processes under a launcher: MPI starts here (exit 2 without) */
    hm_cli_dist_open(&t->comm);
    if (t->comm.size > 1)
        r->comm = &t->comm;
    /* '-' once at most, and never under a launcher (stdin reaches process 0) */
    const char *ins[] = {in, r->data_path, r->val_path};
    const char *ins_what[] = {"the input checkpoint", "--data", "--val-data"};
    hm_cli_check_stdin(ins, ins_what, 3, &t->comm);
    /* process 0 alone writes: it alone checks the output, state and log
     * paths (the others need no such folder: no shared file system) */
    const int primary = hm_run_is_primary(&t->comm);
    if (t->tokens) {
        int64_t per = r->batch * r->seq_len * hm_train_cli_micro_batches(t);
        r->steps = t->tokens / per;
        if (r->steps < 1)
            hm_usage_error("--tokens %lld is less than one step of %lld tokens",
                           (long long)t->tokens, (long long)per);
    }
    if (!t->warmup_set)
        r->warmup = r->steps / 10 < 1000 ? r->steps / 10 : 1000;
    if (r->out_path && strcmp(r->out_path, "-") == 0 &&
        (r->save_every || r->resume || r->stop_after))
        hm_usage_error("-o - cannot be combined with --save-every, --stop-after or --resume");
    if (r->optim.kind == HM_OPTIM_SGD && !t->clip_set)
        r->optim.clip = 0; /* contract §4: plain SGD, no clipping unless --clip asks */
    if (t->gpu_memory > 0 && strcmp(hm_cli_backend_name(t->device, t->backend_name), "cuda"))
        hm_usage_error("--gpu-memory plans a --device cuda run");
    if ((t->gpu_memory > 0 || t->memory > 0) && !t->dry_run)
        hm_usage_error("--memory and --gpu-memory are for plans (-n/--dry-run)");
    t->plan_device = strcmp(hm_cli_backend_name(t->device, t->backend_name), "cuda") == 0;
    if (t->dry_run && t->plan_device) {
        /* a plan for a GPU needs none: without one, the CPU backend's
         * workspace sizes stand in for the device's */
        struct hm_error err;
        hm_error_clear(&err);
        t->backend = hm_cli_backend_try(t->device, t->backend_name, &err);
        if (!t->backend) {
            snprintf(t->plan_note, sizeof t->plan_note, "no GPU here (%s): workspaces as on "
                     "the CPU", err.msg);
            t->backend = hm_cli_backend(NULL, NULL);
        }
    } else {
        t->backend = hm_cli_backend(t->device, t->backend_name);
    }
    if (json && r->out_path && strcmp(r->out_path, "-") == 0)
        hm_usage_error("--json and -o - both want stdout");
    if (primary && r->out_path && strcmp(r->out_path, "-") != 0) {
        if (hm_output_clobbers(r->out_path, in))
            hm_die("output '%s' is the input or a file of the input folder: refusing to overwrite it",
                   r->out_path);
        check_output_path(r->out_path);
        const char *base = strrchr(r->out_path, '/') ? strrchr(r->out_path, '/') + 1 : r->out_path;
        if (strlen(base) + strlen(".state") > NAME_MAX)
            hm_die("cannot write '%s': its state file '%s.state' would be a name longer than "
                   "%d bytes", r->out_path, base, NAME_MAX);
        if (!t->dry_run && !r->resume && !r->force && hm_is_file(r->out_path))
            hm_die("output '%s' exists (use -f/--force to replace it, or --resume)",
                   r->out_path);
    }
    /* no file the run reads may be one it writes, with or without -f */
    const char *reads[] = {in, r->data_path, r->val_path};
    const char *reads_what[] = {"the input checkpoint", "--data", "--val-data"};
    for (int i = 0; i < 3 && primary; i++) {
        if (!reads[i] || strcmp(reads[i], "-") == 0)
            continue;
        if (r->log_path && hm_output_clobbers(r->log_path, reads[i]))
            hm_die("--log '%s' is %s: refusing to overwrite it", r->log_path, reads_what[i]);
        if (i > 0 && r->out_path && strcmp(r->out_path, "-") != 0 &&
            hm_same_file(reads[i], r->out_path))
            hm_die("output '%s' is %s: refusing to overwrite it", r->out_path, reads_what[i]);
    }
    if (primary && r->log_path) {
        check_output_path(r->log_path);
        if (r->out_path && hm_same_file(r->log_path, r->out_path))
            hm_die("--log '%s' is the output", r->log_path);
    }
    /* the run owns its output (and state) and log until it ends: process 0,
     * which alone writes them */
    if (!t->dry_run && primary) {
        hm_cli_hold_output(r->out_path);
        hm_cli_hold_output(r->log_path);
        /* OUT.state is the run's too: no other tool may take it as its -o
         * while the run lives (the run's next save would replace it) */
        if (r->out_path && strcmp(r->out_path, "-") != 0) {
            size_t n = strlen(r->out_path) + sizeof ".state";
            char *sp = malloc(n);
            if (!sp)
                hm_die("out of memory");
            snprintf(sp, n, "%s.state", r->out_path);
            hm_cli_hold_output(sp); /* the lock keeps its own copy of the name */
            free(sp);
        }
    }
    int n = t->threads > 0 ? t->threads : hm_cli_default_threads();
    hm_threads_set(n > 0 ? n : 1);
}

void hm_train_cli_check_positions(const struct hm_train_cli *t, const struct hm_config *c,
                                  const char *path, const char *role)
{
    if (c->mixer == HM_MIXER_SOFTMAX && c->max_position_embeddings > 0 &&
        t->run.seq_len > c->max_position_embeddings)
        hm_die("--seq-len %lld exceeds the position limit of %s '%s', max_position_embeddings "
               "%lld: its positions past the limit are untrained (give --seq-len <= %lld)",
               (long long)t->run.seq_len, role, path, (long long)c->max_position_embeddings,
               (long long)c->max_position_embeddings);
}

int64_t hm_train_cli_micro_batches(const struct hm_train_cli *t)
{
    return t->run.accum * (int64_t)hm_run_size(&t->comm);
}

struct progress_ctx {
    struct hm_progress pg;
    const struct hm_cli_common *common;
    const char *what;
};

static void on_progress(void *ctx, const struct hm_run_report *r)
{
    struct progress_ctx *p = ctx;
    if (!isnan(r->val_loss) && !p->pg.enabled)
        hm_info(p->common, "step %lld/%lld: %s %.5f, val loss %.4f", (long long)r->step,
                (long long)r->steps, p->what, r->loss, r->val_loss);
    hm_progress_update(&p->pg, "step %lld/%lld, %s %.5f, lr %.3g, %.0f tok/s",
                       (long long)r->step, (long long)r->steps, p->what, r->loss, r->lr,
                       r->tokens_per_s);
}

void hm_train_cli_run(const struct hm_train_cli *t, const struct hm_run_model *rm,
                      const struct hm_cli_common *common, const char *in, const char *label,
                      const char *what)
{
    struct progress_ctx pc = {.common = common, .what = what};
    struct hm_run_report fin;
    struct hm_error err;
    hm_error_clear(&err);
    hm_progress_start(&pc.pg, common, label);
    double t0 = hm_now();
    if (hm_run_train(rm, &t->run, on_progress, &pc, &fin, &err) != HM_OK) {
        if (pc.pg.enabled)
            fputc('\n', stderr);
        hm_die("%s of '%s' failed: %s", label, in, err.msg);
    }
    hm_progress_done(&pc.pg, "%lld steps, %s %.5f", (long long)fin.step, what, fin.loss);
    double secs = hm_now() - t0;
    char val[64] = "null";
    if (!isnan(fin.val_loss))
        snprintf(val, sizeof val, "%.9g", fin.val_loss);
    if (common->json && hm_run_is_primary(&t->comm))
        printf("{\"version\": 1, \"steps\": %lld, \"tokens\": %lld, \"loss\": %.9g, "
               "\"val_loss\": %s, \"seconds\": %.3f}\n",
               (long long)fin.step, (long long)fin.tokens, fin.loss, val, secs);
    else
        hm_info(common, "wrote '%s': %lld steps, %lld tokens, %s %.5f, val loss %s, %.1f s",
                t->run.out_path, (long long)fin.step, (long long)fin.tokens, what, fin.loss, val,
                secs);
}
