/* hm-linearize — stage 1: softmax attention → Hedgehog linear attention.
 * Trains only the per-layer, per-head feature maps against the teacher's
 * own attention (layer-wise; --objective cos, mse or attn-ce); writes a `hedgehog`
 * checkpoint holding the teacher's tensors byte for byte plus the maps.
 * The run machinery is libconvert/train/run.c (shared with hm-finetune). */
#include <cjson/cJSON.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "atomic_file.h"
#include "checkpoint.h"
#include "cli.h"
#include "fileio.h"
#include "linearize.h"
#include "params.h"
#include "plan.h"
#include "plan_report.h"
#include "json_out.h"
#include "dist.h"
#include "train_cli.h"

static const char usage[] =
    "usage: hm-linearize [OPTIONS] TEACHER -o OUT --data TOKENS (--steps N | --tokens N)\n"
    "\n"
    "Stage 1 of the recipe: replace every softmax attention of a TEACHER (GPT-NeoX\n"
    "or llama; file, HF folder or index) with Hedgehog linear attention. Per layer\n"
    "and head,\n"
    "query and key feature maps phi(x) = [softmax(xW+b), softmax(-(xW+b))] start at\n"
    "W = eye(p, F), b = 0 and are trained so that each layer's attention imitates\n"
    "the teacher's: loss = mean over layers and tokens of the objective's loss.\n"
    "Only the feature maps train; the log holds the per-layer loss (layer_loss).\n"
    "\n"
    "Stage 1:\n"
    "      --feature-dim F      feature map width F (default: head dim)\n"
    "      --objective O        what each layer fits (default cos):\n"
    "                           cos      1 - cos(student, teacher attention output\n"
    "                                    after dense), contract section 2\n"
    "                           mse      mean over the d outputs of the squared\n"
    "                                    difference of those outputs (LoLCATs)\n"
    "                           attn-ce  the attention weights themselves: per head\n"
    "                                    and query, -sum_s P log(A + 1e-12), P the\n"
    "                                    teacher's softmax weights, A the linear\n"
    "                                    attention's normalized weights (Hedgehog)\n"
    "                           a resume needs the same objective\n"
    "      --keep-attention L   comma-separated layers (0-based) that keep the\n"
    "                           teacher's softmax attention: no feature maps, no\n"
    "                           loss (layer_loss 0); the output is a hybrid\n"
    "                           (hm.config layer_mixers). A resume needs the same\n"
    HM_TRAIN_USAGE
    "Common:\n"
    "  -q, --quiet  -v, --verbose  --progress  --no-progress  --json\n"
    "  -h, --help   --version\n"
    "\n"
    "Defaults here: --lr 1e-2, --weight-decay 0 (contract §4). Validation (--val-data)\n"
    "reports the Hedgehog model's next-token cross-entropy.\n"
    "Exit status: 0 success, 1 failure, 2 bad usage.\n";

enum { OPT_FEATURE_DIM = HM_OPT_FIRST_TOOL, OPT_OBJECTIVE, OPT_KEEP };

/* --dry-run: the plan from the teacher's header (plan.h, stage 1), once
 * per run. */
static int dry_run(const struct hm_train_cli *t, struct hm_ckpt *ck, int64_t feature_dim,
                   enum hm_lin_objective objective, int json)
{
    const struct hm_config *tc = hm_ckpt_config(ck);
    const struct hm_run_opts *r = &t->run;
    const int64_t F = feature_dim ? feature_dim : tc->head_dim;
    const int64_t per = r->batch * r->seq_len * hm_train_cli_micro_batches(t);
    const struct hm_plan_in pin = {
        .ck = ck, .B = r->batch, .T = r->seq_len, .accum = r->accum,
        .adamw = r->optim.kind == HM_OPTIM_ADAMW, .procs = hm_run_size(&t->comm),
        .zero1 = r->zero1, .be = t->backend, .device = t->plan_device, .stage1 = 1,
        .feature_dim = feature_dim};
    const struct hm_plan_env env = {.memory = t->memory, .gpu_memory = t->gpu_memory,
                                    .local_procs = hm_dist_local_size(), .note = t->plan_note};
    struct hm_mem_plan p;
    struct hm_error err;
    hm_error_clear(&err);
    if (hm_plan_train(&pin, &p, &err) != HM_OK)
        hm_die_err("cannot plan", hm_ckpt_path(ck), &err);
    if (t->comm.rank == 0 && json) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "version", 1);
        cJSON_AddNumberToObject(o, "steps", (double)r->steps);
        cJSON_AddNumberToObject(o, "tokens_per_step", (double)per);
        cJSON_AddNumberToObject(o, "tokens", (double)(per * r->steps));
        cJSON_AddNumberToObject(o, "feature_dim", (double)F);
        cJSON_AddStringToObject(o, "objective", hm_lin_objective_name(objective));
        cJSON_AddNumberToObject(o, "params", (double)p.params);
        cJSON_AddNumberToObject(o, "trainable", (double)p.trainable);
        cJSON_AddNumberToObject(o, "processes", hm_run_size(&t->comm));
        hm_plan_report(&pin, &env, o);
        hm_json_put(o);
    } else if (t->comm.rank == 0) {
        printf("plan:       %lld steps x %lld tokens = %lld tokens, feature dim %lld, "
               "objective %s\n", (long long)r->steps, (long long)per,
               (long long)(per * r->steps), (long long)F, hm_lin_objective_name(objective));
        printf("trainable:  %lld feature-map parameters (everything else frozen)\n",
               (long long)p.trainable);
        printf("optimizer:  %s, peak lr %g, warm-up %lld, cosine to %g, clip %g\n",
               r->optim.kind == HM_OPTIM_ADAMW ? "adamw" : "sgd", r->lr, (long long)r->warmup,
               0.1 * r->lr, r->optim.clip);
        hm_plan_report(&pin, &env, NULL);
    }
    hm_ckpt_close(ck);
    return hm_cli_finish(HM_EXIT_OK);
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        HM_CLI_COMMON_LONGOPTS,
        HM_TRAIN_LONGOPTS,
        {"feature-dim", required_argument, NULL, OPT_FEATURE_DIM},
        {"objective", required_argument, NULL, OPT_OBJECTIVE},
        {"keep-attention", required_argument, NULL, OPT_KEEP},
        {NULL, 0, NULL, 0},
    };
    struct hm_cli_common common = {.progress = -1};
    struct hm_train_cli t;
    int64_t feature_dim = 0;
    enum hm_lin_objective objective = HM_LIN_OBJECTIVE_COS;
    const char *keep_arg = NULL;
    int c, lr_set = 0;
    hm_cli_init("hm-linearize", usage, argv);
    hm_train_cli_defaults(&t, "hm-linearize", 0.0);
    while ((c = getopt_long(argc, argv, HM_CLI_COMMON_SHORTOPTS HM_TRAIN_SHORTOPTS, longopts,
                            NULL)) != -1) {
        if (c == HM_TOPT_LR)
            lr_set = 1;
        if (hm_train_cli_opt(c, optarg, &t))
            continue;
        switch (c) {
        HM_CLI_COMMON_CASES(&common);
        case OPT_FEATURE_DIM:
            feature_dim = hm_parse_i64(optarg, "--feature-dim", 1, 65536);
            break;
        case OPT_OBJECTIVE:
            if (hm_lin_objective_parse(optarg, &objective) != 0)
                hm_usage_error("--objective must be cos, mse or attn-ce, got '%s'", optarg);
            break;
        case OPT_KEEP:
            keep_arg = optarg;
            break;
        }
    }
    if (argc - optind != 1)
        hm_usage_error(argc == optind ? "missing TEACHER" : "expected one TEACHER");
    if (!lr_set)
        t.run.lr = 1e-2;
    const char *in = argv[optind];
    hm_train_cli_finish(&t, argc, argv, in, common.json);
    struct hm_error err;
    hm_error_clear(&err);
    struct hm_ckpt *ck;
    if (hm_ckpt_open(in, &ck, &err) != HM_OK)
        hm_die_err("cannot read", in, &err);
    hm_cli_ckpt_notes(ck, in);
    const struct hm_config *tc = hm_ckpt_config(ck);
    if (tc->mixer != HM_MIXER_SOFTMAX)
        hm_die("cannot linearize '%s': it is a %s model, stage 1 needs a gpt_neox teacher", in,
               hm_arch_name(tc));
    hm_train_cli_check_positions(&t, tc, in, "the teacher");
    struct hm_config kc = *tc; /* the kept layers' bits */
    char kept[1024] = "";
    if (keep_arg) {
        kc.mixer = HM_MIXER_HEDGEHOG;
        if (hm_config_kept_parse(&kc, keep_arg, tc->num_hidden_layers) != 0)
            hm_usage_error("--keep-attention must list layers 0..%lld, comma-separated, got "
                           "'%s'", (long long)tc->num_hidden_layers - 1, keep_arg);
        hm_config_kept_str(&kc, kept, sizeof kept);
    }
    struct hm_tok_file *tf;
    if (hm_tok_open(t.run.data_path, &tf, &err) != HM_OK)
        hm_die_err("cannot read", t.run.data_path, &err);
    if (hm_tok_vocab(tf) > (uint64_t)tc->vocab_size)
        hm_die("token file '%s' has vocabulary %llu, larger than the teacher's %lld",
               t.run.data_path, (unsigned long long)hm_tok_vocab(tf), (long long)tc->vocab_size);
    hm_tok_close(tf);
    const char *prev = hm_cli_prev_provenance(ck, in);
    t.run.prev_provenance = prev;
    if (t.dry_run)
        return dry_run(&t, ck, feature_dim, objective, common.json);
    struct hm_linearizer *lz;
    if (hm_linearizer_new(ck, feature_dim, keep_arg ? kc.kept : NULL, t.backend, t.run.batch, t.run.seq_len,
                          hm_train_cli_micro_batches(&t),
                          &lz, &err) != HM_OK ||
        hm_linearizer_set_objective(lz, objective, &err) != HM_OK)
        hm_die_err("cannot linearize", in, &err);
    /* the objective changes the trajectory: a resume must not change it (a
     * state from before the field was made with cos) */
    const struct hm_run_field fields[] = {
        {"stage1_objective", hm_lin_objective_name(objective), "cos"},
        {"keep_attention", kept, ""}};
    t.run.fields = fields;
    t.run.n_fields = 2;
    struct hm_run_model rm;
    hm_linearizer_run_model(lz, &rm);
    hm_train_cli_run(&t, &rm, &common, in, "stage 1", "stage-1 loss");
    hm_linearizer_free(lz);
    hm_ckpt_close(ck);
    return hm_cli_finish(HM_EXIT_OK);
}
