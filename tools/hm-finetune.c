/* hm-finetune — next-token cross-entropy training (contract §3 stage 2, §4),
 * optionally with a distillation term τ²·KL(teacher ‖ student) on the logits
 * at a temperature τ (§10): loss = c·CE + w·τ²·KL.
 * The run machinery (schedule, optimizer, log, resume, NaN guard) is
 * libconvert/train/run.c; this file wires flags and models to it. */
#include <cjson/cJSON.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "atomic_file.h"
#include "checkpoint.h"
#include "cli.h"
#include "fileio.h"
#include "hash.h"
#include "params.h"
#include "provenance.h"
#include "model_run.h"
#include "train_cli.h"
#include "plan_report.h"
#include "json_out.h"
#include "dist.h"

static const char usage[] =
    "usage: hm-finetune [OPTIONS] CKPT -o OUT --data TOKENS (--steps N | --tokens N)\n"
    "\n"
    "Train CKPT with next-token cross-entropy on a token file and write OUT.\n"
    "Architectures: gpt_neox (the teacher), hedgehog (stage 1's output: the paper's\n"
    "Hedgehog baseline is stage 1 followed by this fine-tuning) and hedgemamba\n"
    "(stage 2, SPEC 3: embeddings and inactive components stay frozen, A is clamped\n"
    "to <= 0 after every update).\n"
    "\n"
    "Model:\n"
    "      --freeze embeddings  keep embed_in and embed_out fixed\n"
    "      --recompute          keep only each layer's input; the backward reruns the\n"
    "                           layer (activation checkpointing): one layer's\n"
    "                           activations instead of all, ~1/3 more compute, the\n"
    "                           same result bit for bit (not with --align)\n"
    "      --kd-teacher CKPT    add w·τ²·KL(teacher ‖ student) on the logits, both\n"
    "                           softmaxes at temperature τ\n"
    "      --kd-weight W        the weight w > 0 (required with --kd-teacher)\n"
    "      --align TEACHER      stage 1b instead of cross-entropy: fit each mixer\n"
    "                           layer by layer to TEACHER's attention outputs,\n"
    "                           teacher-forced (each layer gets the teacher's own\n"
    "                           norm1 output), loss mean(1 - cos) as stage 1; every\n"
    "                           mixer tensor trains (q/k/v, dense, feature maps, dt,\n"
    "                           A, D, conv, gate), norms/MLP/embeddings do not\n"
    "      --align-loss L       stage 1b's per-token loss: cos (1 - cos, default)\n"
    "                           or mse ((1/d)|o_s - o_t|^2: fits the output scale\n"
    "                           too, which cos leaves free); block: whole blocks\n"
    "                           (MOHAWK's hidden-state alignment): each layer gets\n"
    "                           the teacher's residual stream h_l and its output\n"
    "                           (mixer, MLP, residuals) is fit to the teacher's\n"
    "                           h_l+1 by (1/d)|h_s - h_t|^2; still only the mixers\n"
    "                           train\n"
    "      --kd-temperature T   the temperature τ > 0 (default 1; needs --kd-teacher)\n"
    "      --ce-weight C        the weight c >= 0 of the cross-entropy (default 1):\n"
    "                           loss = c·CE + w·τ²·KL; --ce-weight 0 is pure\n"
    "                           distillation (needs --kd-teacher)\n"
    HM_TRAIN_USAGE
    "Common:\n"
    "  -q, --quiet  -v, --verbose  --progress  --no-progress  --json\n"
    "  -h, --help   --version\n"
    "\n"
    "Weight decay defaults to 0.1 on matrices only (never norms, biases).\n"
    "Exit status: 0 success, 1 failure, 2 bad usage.\n";

enum { OPT_FREEZE = HM_OPT_FIRST_TOOL, OPT_KD_TEACHER, OPT_KD_WEIGHT, OPT_KD_TEMP, OPT_CE_WEIGHT,
       OPT_ALIGN, OPT_ALIGN_LOSS, OPT_RECOMPUTE };

/* The model at path. The trainee (freeze not NULL): fp32, its embeddings
 * kept narrow on be when they do not train (*freeze, which a hedgemamba
 * student sets: contract §3), else in host memory, placed by the caller.
 * A frozen teacher (freeze NULL): straight into be, bf16/f16 layer
 * matrices kept narrow; a KD teacher (trainee not NULL) borrows the
 * trainee's narrow embeddings when they are its own bytes
 * (hm_model_load_teacher). *prov (if prov): its provenance, owned by the
 * caller. */
static struct hm_model *load_model(const char *path, const struct hm_backend *be, int *freeze,
                                   const struct hm_model *trainee, char **prov)
{
    struct hm_ckpt *ck;
    struct hm_model *m;
    struct hm_error err;
    hm_error_clear(&err);
    if (hm_ckpt_open(path, &ck, &err) != HM_OK)
        hm_die_err("cannot read", path, &err);
    hm_cli_ckpt_notes(ck, path);
    if (freeze && hm_ckpt_config(ck)->mixer == HM_MIXER_HEDGEMAMBA)
        *freeze = 1;
    enum hm_status st = trainee  ? hm_model_load_teacher(ck, trainee, be, &m, &err)
                        : !freeze ? hm_model_load_narrow(ck, hm_ckpt_config(ck), be, &m, &err)
                        : *freeze ? hm_model_load_trainee(ck, be, &m, &err)
                                  : hm_model_load(ck, &m, &err);
    if (st != HM_OK)
        hm_die_err("cannot load", path, &err);
    hm_warn_nonfinite(path, m);
    if (prov) {
        const char *p = hm_cli_prev_provenance(ck, path);
        *prov = p ? strdup(p) : NULL;
    }
    hm_ckpt_close(ck);
    return m;
}

/* Stage 1b fits the student's mixers to its own teacher: the student must
 * have a student mixer, must not be the teacher itself, and its frozen
 * tensors (embeddings, norms, MLP) must be the teacher's, byte for byte
 * (another seed or MLP width is another teacher). Exits naming the first
 * difference. A plan (bytes 0) compares names, dtypes and shapes only: it
 * reads headers. */
static void check_align_teacher(const char *student, const char *teacher, int bytes)
{
    struct hm_ckpt *s = NULL, *t = NULL;
    struct hm_error err;
    hm_error_clear(&err);
    if (hm_ckpt_open(student, &s, &err) != HM_OK)
        hm_die_err("cannot read", student, &err);
    if (hm_ckpt_open(teacher, &t, &err) != HM_OK)
        hm_die_err("cannot read", teacher, &err);
    if (hm_ckpt_config(s)->mixer == HM_MIXER_SOFTMAX)
        hm_die("cannot align '%s': it is a %s model with softmax attention, stage 1b needs a "
               "student (hedgehog or hedgemamba) made from --align's teacher", student,
               hm_arch_name(hm_ckpt_config(s)));
    if (hm_same_file(student, teacher) || hm_run_checkpoint_hash(student) ==
                                              hm_run_checkpoint_hash(teacher))
        hm_die("--align '%s' is the student itself: the teacher is the softmax model the "
               "student was made from", teacher);
    for (int64_t i = 0; i < hm_ckpt_n_tensors(t); i++) {
        const struct hm_ckpt_tensor *a = hm_ckpt_tensor_at(t, i);
        enum hm_param_group g = hm_param_group_of(a->name);
        if (g != HM_PG_EMBED && g != HM_PG_NORM && g != HM_PG_MLP)
            continue;
        int64_t j = hm_ckpt_find(s, a->name);
        const struct hm_ckpt_tensor *b = j >= 0 ? hm_ckpt_tensor_at(s, j) : NULL;
        int same = b && a->dtype == b->dtype && a->nbytes == b->nbytes && a->ndim == b->ndim;
        for (int d = 0; same && d < a->ndim; d++)
            same = a->shape[d] == b->shape[d];
        if (same && bytes) {
            same = memcmp(hm_ckpt_data_view(t, i), hm_ckpt_data_view(s, j), a->nbytes) == 0;
            hm_ckpt_data_release(t, i);
            hm_ckpt_data_release(s, j);
        }
        if (!same)
            hm_die("--align '%s' is not the teacher of '%s': tensor '%s' %s (stage 1b needs the "
                   "teacher the student was made from)", teacher, student, a->name,
                   b ? "differs" : "is missing from the student");
    }
    hm_ckpt_close(s);
    hm_ckpt_close(t);
}

/* Bytes of the KD teacher tk's embeddings that the run may borrow from the
 * student ck (hm_model_load_teacher): the bf16/f16 embedding tensors both
 * store under one name, dtype and size. Only their bytes decide, which a
 * plan does not read: it counts them in the teacher and says so. */
static double shareable_embeddings(const struct hm_ckpt *ck, const struct hm_ckpt *tk)
{
    struct hm_param_spec *specs = NULL;
    const int64_t n = hm_param_specs(hm_ckpt_config(ck), &specs);
    double bytes = 0;
    for (int64_t i = 0; i < n; i++) {
        const int64_t a = hm_ckpt_find(ck, specs[i].name), b = hm_ckpt_find(tk, specs[i].name);
        if (specs[i].group != HM_PG_EMBED || a < 0 || b < 0)
            continue;
        const struct hm_ckpt_tensor *x = hm_ckpt_tensor_at(ck, a), *y = hm_ckpt_tensor_at(tk, b);
        if ((x->dtype == HM_DTYPE_BF16 || x->dtype == HM_DTYPE_F16) && x->dtype == y->dtype &&
            x->numel == y->numel)
            bytes += (double)x->nbytes;
    }
    free(specs);
    return bytes;
}

/* --dry-run: the plan from the headers alone (no weight is read). */
static int dry_run(const struct hm_train_cli *t, const char *in, const char *kd_path,
                   const char *align_path, int align_block, int freeze, int recompute, int json)
{
    const struct hm_run_opts *r = &t->run;
    struct hm_error err;
    hm_error_clear(&err);
    struct hm_ckpt *ck, *tk = NULL;
    const char *t_path = kd_path ? kd_path : align_path;
    if (hm_ckpt_open(in, &ck, &err) != HM_OK)
        hm_die_err("cannot read", in, &err);
    hm_cli_ckpt_notes(ck, in);
    if (t_path && hm_ckpt_open(t_path, &tk, &err) != HM_OK)
        hm_die_err("cannot read", t_path, &err);
    const struct hm_config *c = hm_ckpt_config(ck);
    if (kd_path && hm_ckpt_config(tk)->vocab_size != c->vocab_size)
        hm_die("teacher '%s' has vocabulary %lld, the student %lld", kd_path,
               (long long)hm_ckpt_config(tk)->vocab_size, (long long)c->vocab_size);
    if (align_path && hm_ckpt_config(tk)->mixer != HM_MIXER_SOFTMAX)
        hm_die("--align '%s' is a %s model; the teacher must have softmax attention",
               align_path, hm_arch_name(hm_ckpt_config(tk)));
    hm_train_cli_check_positions(t, c, in, "the model");
    if (tk)
        hm_train_cli_check_positions(t, hm_ckpt_config(tk), t_path,
                                     kd_path ? "--kd-teacher" : "the --align teacher");
    struct hm_tok_file *tf;
    if (hm_tok_open(r->data_path, &tf, &err) != HM_OK)
        hm_die_err("cannot read", r->data_path, &err);
    if (hm_tok_vocab(tf) > (uint64_t)c->vocab_size)
        hm_die("token file '%s' has vocabulary %llu, larger than the model's %lld",
               r->data_path, (unsigned long long)hm_tok_vocab(tf), (long long)c->vocab_size);
    hm_tok_close(tf);
    const struct hm_plan_in pin = {
        .ck = ck, .teacher = tk, .align = align_path != NULL, .align_block = align_block,
        .B = r->batch, .T = r->seq_len,
        .accum = r->accum, .freeze_embeddings = freeze || c->mixer == HM_MIXER_HEDGEMAMBA,
        .recompute = recompute, .adamw = r->optim.kind == HM_OPTIM_ADAMW, .procs = hm_run_size(&t->comm),
        .zero1 = r->zero1, .be = t->backend, .device = t->plan_device};
    char note[sizeof t->plan_note + 200];
    const double share = kd_path && pin.freeze_embeddings ? shareable_embeddings(ck, tk) : 0;
    snprintf(note, sizeof note, "%s", t->plan_note);
    if (share > 0)
        snprintf(note + strlen(note), sizeof note - strlen(note),
                 "%sthe teacher's embeddings (%.0f MB) are counted; where they are the "
                 "student's own bytes the run shares them and needs that much less",
                 *note ? "; " : "", share / 1e6);
    const struct hm_plan_env env = {.memory = t->memory, .gpu_memory = t->gpu_memory,
                                    .local_procs = hm_dist_local_size(), .note = note};
    struct hm_mem_plan p;
    if (hm_plan_train(&pin, &p, &err) != HM_OK)
        hm_die_err("cannot plan", in, &err);
    const int64_t per = r->batch * r->seq_len * hm_train_cli_micro_batches(t);
    /* one report per run: the other processes checked the same */
    if (t->comm.rank != 0) {
        hm_ckpt_close(ck);
        hm_ckpt_close(tk);
        return hm_cli_finish(HM_EXIT_OK);
    }
    if (json) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "version", 1);
        cJSON_AddNumberToObject(o, "steps", (double)r->steps);
        cJSON_AddNumberToObject(o, "tokens_per_step", (double)per);
        cJSON_AddNumberToObject(o, "tokens", (double)(per * r->steps));
        cJSON_AddNumberToObject(o, "params", (double)p.params);
        cJSON_AddNumberToObject(o, "trainable", (double)p.trainable);
        cJSON_AddNumberToObject(o, "warmup", (double)r->warmup);
        cJSON_AddNumberToObject(o, "lr", r->lr);
        cJSON_AddNumberToObject(o, "processes", hm_run_size(&t->comm));
        hm_plan_report(&pin, &env, o);
        hm_json_put(o);
    } else {
        printf("plan:       %lld steps x %lld tokens (batch %lld x seq %lld x accum %lld) = "
               "%lld tokens\n", (long long)r->steps, (long long)per, (long long)r->batch,
               (long long)r->seq_len, (long long)hm_train_cli_micro_batches(t),
               (long long)(per * r->steps));
        printf("model:      %s, %lld parameters, %lld trainable\n", hm_arch_name(c),
               (long long)p.params, (long long)p.trainable);
        printf("optimizer:  %s, peak lr %g, warm-up %lld, cosine to %g, clip %g, decay %g\n",
               r->optim.kind == HM_OPTIM_ADAMW ? "adamw" : "sgd", r->lr, (long long)r->warmup,
               0.1 * r->lr, r->optim.clip, r->optim.weight_decay);
        if (hm_run_size(&t->comm) > 1)
            printf("processes:  %d%s\n", hm_run_size(&t->comm),
                   r->zero1 ? ", ZeRO-1 (each holds its share of the moments)" : "");
        hm_plan_report(&pin, &env, NULL);
    }
    hm_ckpt_close(ck);
    hm_ckpt_close(tk);
    return hm_cli_finish(HM_EXIT_OK);
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        HM_CLI_COMMON_LONGOPTS,
        HM_TRAIN_LONGOPTS,
        {"freeze", required_argument, NULL, OPT_FREEZE},
        {"kd-teacher", required_argument, NULL, OPT_KD_TEACHER},
        {"kd-weight", required_argument, NULL, OPT_KD_WEIGHT},
        {"align", required_argument, NULL, OPT_ALIGN},
        {"align-loss", required_argument, NULL, OPT_ALIGN_LOSS},
        {"kd-temperature", required_argument, NULL, OPT_KD_TEMP},
        {"ce-weight", required_argument, NULL, OPT_CE_WEIGHT},
        {"recompute", no_argument, NULL, OPT_RECOMPUTE},
        {NULL, 0, NULL, 0},
    };
    struct hm_cli_common common = {.progress = -1};
    struct hm_train_cli t;
    int freeze = 0, recompute = 0, c;
    const char *kd_path = NULL;
    const char *align_path = NULL, *align_loss = NULL;
    double kd_weight = 0, kd_temp = 1, ce_weight = 1;
    int kd_temp_set = 0, ce_set = 0;
    hm_cli_init("hm-finetune", usage, argv);
    hm_train_cli_defaults(&t, "hm-finetune", 0.1);
    while ((c = getopt_long(argc, argv, HM_CLI_COMMON_SHORTOPTS HM_TRAIN_SHORTOPTS, longopts,
                            NULL)) != -1) {
        if (hm_train_cli_opt(c, optarg, &t))
            continue;
        switch (c) {
        HM_CLI_COMMON_CASES(&common);
        case OPT_FREEZE:
            if (strcmp(optarg, "embeddings") != 0)
                hm_usage_error("--freeze takes 'embeddings', got '%s'", optarg);
            freeze = 1;
            break;
        case OPT_RECOMPUTE: recompute = 1; break;
        case OPT_KD_TEACHER: kd_path = optarg; break;
        case OPT_KD_WEIGHT: kd_weight = hm_parse_f64(optarg, "--kd-weight", 0, 1e6); break;
        case OPT_ALIGN: align_path = optarg; break;
        case OPT_ALIGN_LOSS:
            if (strcmp(optarg, "cos") != 0 && strcmp(optarg, "mse") != 0 &&
                strcmp(optarg, "block") != 0)
                hm_usage_error("--align-loss must be cos, mse or block, got '%s'", optarg);
            align_loss = optarg;
            break;
        case OPT_KD_TEMP:
            kd_temp = hm_parse_f64(optarg, "--kd-temperature", 0, 1e6);
            if (!(kd_temp > 0))
                hm_usage_error("option '--kd-temperature' must be > 0, got '%s'", optarg);
            kd_temp_set = 1;
            break;
        case OPT_CE_WEIGHT:
            ce_weight = hm_parse_f64(optarg, "--ce-weight", 0, 1e6);
            ce_set = 1;
            break;
        }
    }
    if (argc - optind != 1)
        hm_usage_error(argc == optind ? "missing CKPT" : "expected one CKPT");
    if (kd_weight > 0 && !kd_path)
        hm_usage_error("--kd-weight needs --kd-teacher");
    /* contract §3: the KL weight is set by a flag, default 0; a teacher with
     * weight 0 would load it and distill nothing, silently */
    if (kd_path && !(kd_weight > 0))
        hm_usage_error("--kd-teacher needs --kd-weight W > 0 (the weight of the KL term)");
    if (align_loss && !align_path)
        hm_usage_error("--align-loss needs --align TEACHER");
    if (align_path && kd_path)
        hm_usage_error("--align (stage 1b) and --kd-teacher are separate runs");
    if (align_path && (kd_temp_set || ce_set))
        hm_usage_error("--align (stage 1b) fits the mixers with its own loss: %s do%s not "
                       "apply", kd_temp_set && ce_set ? "--kd-temperature and --ce-weight"
                       : kd_temp_set ? "--kd-temperature" : "--ce-weight",
                       kd_temp_set && ce_set ? "" : "es");
    if (align_path && recompute)
        hm_usage_error("--align (stage 1b) runs each mixer alone: --recompute does not apply");
    if (kd_temp_set && !kd_path)
        hm_usage_error("--kd-temperature needs --kd-teacher");
    if (ce_weight == 0 && !kd_path)
        hm_usage_error("--ce-weight 0 without --kd-teacher leaves no objective to train");
    const char *in = argv[optind];
    hm_train_cli_finish(&t, argc, argv, in, common.json);
    if (align_path && t.run.out_path && hm_output_clobbers(t.run.out_path, align_path))
        hm_die("output '%s' is the --align teacher: refusing to overwrite it", t.run.out_path);
    if (align_path && t.run.log_path && hm_output_clobbers(t.run.log_path, align_path))
        hm_die("--log '%s' is the --align teacher: refusing to overwrite it", t.run.log_path);
    if (kd_path && t.run.out_path && hm_output_clobbers(t.run.out_path, kd_path))
        hm_die("output '%s' is the --kd-teacher: refusing to overwrite it", t.run.out_path);
    if (kd_path && t.run.log_path && hm_output_clobbers(t.run.log_path, kd_path))
        hm_die("--log '%s' is the --kd-teacher: refusing to overwrite it", t.run.log_path);

    if (align_path)
        check_align_teacher(in, align_path, !t.dry_run);
    if (t.dry_run)
        return dry_run(&t, in, kd_path, align_path, align_loss && !strcmp(align_loss, "block"),
                       freeze, recompute, common.json);
    char *prov = NULL;
    struct hm_model *m = load_model(in, t.backend, &freeze, NULL, &prov), *teacher = NULL;
    /* a teacher is only run: straight onto the backend, bf16 layers kept narrow */
    if (kd_path) {
        teacher = load_model(kd_path, t.backend, NULL, m, NULL); /* borrows from m */
        if (teacher->cfg.vocab_size != m->cfg.vocab_size)
            hm_die("teacher '%s' has vocabulary %lld, the student %lld", kd_path,
                   (long long)teacher->cfg.vocab_size, (long long)m->cfg.vocab_size);
    }
    if (align_path) {
        teacher = load_model(align_path, t.backend, NULL, NULL, NULL);
        if (teacher->cfg.mixer != HM_MIXER_SOFTMAX)
            hm_die("--align '%s' is a %s model; the teacher must have softmax attention",
                   align_path, hm_arch_name(&teacher->cfg));
    }
    t.run.prev_provenance = prov;
    hm_train_cli_check_positions(&t, &m->cfg, in, "the model");
    if (teacher)
        hm_train_cli_check_positions(&t, &teacher->cfg, kd_path ? kd_path : align_path,
                                     kd_path ? "--kd-teacher" : "the --align teacher");
    struct hm_train_opts to = {.B = t.run.batch, .T = t.run.seq_len,
                               .accum = hm_train_cli_micro_batches(&t),
                               .freeze_embeddings = freeze,
                               .kd_teacher = kd_path ? teacher : NULL, .kd_weight = kd_weight,
                               .kd_temperature = kd_temp, .ce_weight = ce_weight,
                               .align_teacher = align_path ? teacher : NULL,
                               .align_mse = align_loss && strcmp(align_loss, "mse") == 0,
                               .align_block = align_loss && strcmp(align_loss, "block") == 0,
                               .recompute = recompute};
    struct hm_error err;
    hm_error_clear(&err);
    struct hm_trainer *tr;
    /* the weights upload once (a trainee with frozen embeddings is there already) */
    if (hm_model_place(m, t.backend, &err) != HM_OK ||
        (teacher && hm_model_place(teacher, t.backend, &err) != HM_OK))
        hm_die_err("cannot place the model on the backend", in, &err);
    if (hm_trainer_new(m, t.backend, &to, &tr, &err) != HM_OK)
        hm_die_err("cannot train", in, &err);
    /* what the model side trains with: a resume must not change it */
    char kd_hash[17] = "none", al_hash[17] = "none", kd_w[32], kd_t[32], ce_w[32], fz[4];
    const char *t_path = kd_path ? kd_path : align_path;
    struct hm_prov_input kd_in = {t_path, t_path ? hm_run_checkpoint_hash(t_path) : 0};
    if (t_path)
        hm_xxh3_hex(kd_in.xxh3, kd_path ? kd_hash : al_hash);
    snprintf(kd_w, sizeof kd_w, "%.17g", kd_weight);
    snprintf(kd_t, sizeof kd_t, "%.17g", kd_temp);
    snprintf(ce_w, sizeof ce_w, "%.17g", ce_weight);
    snprintf(fz, sizeof fz, "%s", freeze ? "yes" : "no");
    /* kd_temperature and ce_weight came later: a state without them was
     * made with their defaults, 1 */
    const struct hm_run_field fields[] = {
        {"kd_teacher_xxh3", kd_hash, NULL}, {"kd_weight", kd_w, NULL},
        {"kd_temperature", kd_t, "1"},      {"ce_weight", ce_w, "1"},
        {"freeze_embeddings", fz, NULL},    {"align_teacher_xxh3", al_hash, "none"},
        {"align_loss", to.align_block ? "block" : to.align_mse ? "mse" : "cos", "cos"}};
    t.run.fields = fields;
    t.run.n_fields = (int)(sizeof fields / sizeof *fields);
    t.run.more_inputs = t_path ? &kd_in : NULL;
    t.run.n_more_inputs = t_path ? 1 : 0;
    struct hm_model_run nr = {.model = m, .trainer = tr, .be = t.backend,
                             .out_dtype = t.out_dtype, .log_terms = kd_path != NULL,
                             .align = align_path != NULL};
    struct hm_run_model rm;
    hm_model_run_init(&nr, &rm);
    hm_train_cli_run(&t, &rm, &common, in, align_path ? "aligning" : "training", "loss");
    hm_model_run_release(&nr);
    hm_trainer_free(tr);
    hm_model_free(teacher); /* before m: it may borrow m's embeddings */
    hm_model_free(m);
    free(prov);
    return hm_cli_finish(HM_EXIT_OK);
}
