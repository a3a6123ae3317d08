/* hm-map-ssm — map a Hedgehog (stage 1) checkpoint exactly into a HedgeMamba
 * SSM mixer (contract §3), or produce the paper's baselines: straight from a
 * GPT-NeoX teacher ("skip stage 1") or with random mixer weights ("naive").
 * --decay-from starts each head's decay A where the teacher's attention is
 * (libconvert/convert/map_decay.h has the formula). Prove the mapping with
 * `hm-verify mapping IN OUT`. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "atomic_file.h"
#include "checkpoint.h"
#include "cli.h"
#include "fileio.h"
#include "hash.h"
#include "json_out.h"
#include "map_decay.h"
#include "map_ssm.h"
#include "provenance.h"
#include "threads.h"
#include "tokfile.h"

static const char usage[] =
    "usage: hm-map-ssm [OPTIONS] IN -o OUT\n"
    "\n"
    "Map IN (a hedgehog checkpoint from hm-linearize, or a gpt_neox teacher) into a\n"
    "hedgemamba checkpoint. Every input tensor is copied byte for byte; the new\n"
    "tensors start where the mixer computes exactly the stage-1 linear attention:\n"
    "conv1d last tap 1, dt_proj bias ln(e-1) (delta = 1), A = 0 (no decay), D = 0,\n"
    "gate_proj bias 1.2784645427610738 (silu = 1), the normalizer in the state's\n"
    "ones channel. From a gpt_neox teacher the feature maps start at their identity\n"
    "init (the 'skip stage 1' baseline).\n"
    "\n"
    "Options:\n"
    "  -o, --output FILE        the hedgemamba checkpoint (- for stdout)\n"
    "  -f, --force              replace an existing output\n"
    "      --components LIST    active (trainable) components, a subset of\n"
    "                           ssm,conv,gate, or none (default ssm,conv,gate);\n"
    "                           inactive ones keep their identity values\n"
    "      --conv-width K       causal conv width (default 4)\n"
    "      --feature-dim F      feature dim for a gpt_neox input (default head dim)\n"
    "      --init identity|random  random: the naive baseline (every mixer weight\n"
    "                           drawn as SPEC 3 lists, from --seed)\n"
    "      --seed S             seed of --init random (default 0)\n"
    "      --keep-attention L   comma-separated layers (0-based) that keep the\n"
    "                           teacher's softmax attention, tensors byte for byte:\n"
    "                           a hybrid (hm.config layer_mixers). From a teacher\n"
    "                           any layers; a hedgehog input carries its own kept\n"
    "                           layers (hm-linearize --keep-attention) and adds none\n"
    "      --decay-from TOKENS  start each head's decay A from its teacher's\n"
    "                           attention instead of A = 0 (see below)\n"
    "      --decay-windows N    windows of TOKENS measured (default 16)\n"
    "      --seq-len T          tokens per window (default 256)\n"
    "      --threads N          CPU threads of the measurement\n"
    "  -q, --quiet  -v, --verbose (-v: the md and A of every head on stderr)\n"
    "  --json  -h, --help  --version\n"
    "\n"
    "Decay from teacher statistics (--decay-from): IN's teacher (IN itself, or the\n"
    "teacher skeleton inside a hedgehog: stage 1 trains only the feature maps) runs\n"
    "over the first N windows w of T tokens of TOKENS, [wT, wT + T). Per layer l\n"
    "and head h, with q, k its rotated vectors and p the head dim:\n"
    "  P[t,s] = softmax_{s<=t}(q_t . k_s / sqrt(p)),\n"
    "  md[l,h] = mean over windows and t < T of sum_{s<=t} P[t,s] (t - s).\n"
    "With delta = 1 the student weighs key s at query t by a^(t-s), a = exp(A).\n"
    "a solves G(a) = md, G(a) = (1/T) sum_{t<T} g_t(a),\n"
    "  g_t(a) = sum_{k<=t} k a^k / sum_{k<=t} a^k\n"
    "(increasing in a; bisection in double): a = 1 (A = 0) when md >= G(1) =\n"
    "(T-1)/4, a >= 1e-12; A = ln a <= 0. Everything else is the exact mapping;\n"
    "the config records \"decay_init\": \"teacher\" and hm-verify mapping checks\n"
    "the rest with A = 0. Needs the identity init and the ssm component.\n"
    "\n"
    "Exit status: 0 success, 1 failure, 2 bad usage.\n";

enum { OPT_COMPONENTS = HM_OPT_FIRST_TOOL, OPT_CONV_WIDTH, OPT_FEATURE_DIM, OPT_INIT, OPT_SEED,
       OPT_DECAY_FROM, OPT_DECAY_WINDOWS, OPT_SEQ_LEN, OPT_THREADS, OPT_KEEP };

/* What --decay-from measured: W windows of T tokens. */
struct decay {
    const char *path;
    int64_t W, T;
    double *md;  /* [L, n_h] */
    float *A;    /* [L, n_h] */
};

/* Fills dc from IN's teacher over dc->path's first windows (dc->W asks for
 * at most that many). Exits 1 naming the file on any failure. */
static void decay_from(const char *in, const struct hm_ckpt *ck, struct decay *dc)
{
    struct hm_error err;
    hm_error_clear(&err);
    struct hm_tok_file *tf;
    if (hm_tok_open(dc->path, &tf, &err) != HM_OK)
        hm_die_err("cannot read", dc->path, &err);
    const int64_t T = dc->T, V = hm_ckpt_config(ck)->vocab_size;
    if (hm_tok_count(tf) / T < dc->W)
        dc->W = hm_tok_count(tf) / T;
    if (dc->W < 1)
        hm_die("cannot read '%s': %lld tokens, fewer than one window of %lld (--seq-len)",
               dc->path, (long long)hm_tok_count(tf), (long long)T);
    const int64_t maxp = hm_ckpt_config(ck)->max_position_embeddings;
    if (maxp > 0 && T > maxp) /* the teacher's rotary positions past it are untrained */
        hm_warning("'%s': --seq-len %lld exceeds the teacher's position limit, "
                   "max_position_embeddings %lld: the decays are measured on untrained "
                   "positions", in, (long long)T, (long long)maxp);
    int32_t *tok = malloc(sizeof(int32_t) * (size_t)(dc->W * T));
    if (!tok)
        hm_die("cannot read '%s': out of memory for %lld tokens", dc->path,
               (long long)(dc->W * T));
    if (hm_tok_read(tf, 0, dc->W * T, tok, &err) != HM_OK)
        hm_die_err("cannot read", dc->path, &err);
    hm_tok_close(tf);
    for (int64_t i = 0; i < dc->W * T; i++)
        if (tok[i] < 0 || tok[i] >= V)
            hm_die("cannot use '%s': token id %d (position %lld) is outside the vocabulary "
                   "of '%s' (%lld)", dc->path, tok[i], (long long)i, in, (long long)V);
    struct hm_model *m;
    const struct hm_backend *be = hm_cli_backend(NULL, NULL);
    if (hm_decay_teacher_load(ck, be, &m, &err) != HM_OK)
        hm_die_err("cannot read the teacher of", in, &err);
    const int64_t n = m->cfg.num_hidden_layers * m->cfg.num_attention_heads;
    dc->md = malloc(sizeof(double) * (size_t)n);
    dc->A = malloc(sizeof(float) * (size_t)n);
    if (!dc->md || !dc->A)
        hm_die("cannot measure '%s': out of memory", in);
    if (hm_decay_attn_distance(m, be, tok, dc->W, T, dc->md, &err) != HM_OK)
        hm_die("cannot measure the attention of '%s' on '%s': %s", in, dc->path, err.msg);
    for (int64_t i = 0; i < n; i++)
        dc->A[i] = (float)log(hm_decay_alpha(dc->md[i], T));
    hm_model_free(m);
    free(tok);
}

/* --json's "decay" member: {"from", "windows", "seq_len", "md": [[..] per
 * layer], "A": [[..] per layer]}. */
static void print_decay_json(const struct decay *dc, int64_t L, int64_t nh)
{
    printf(", \"decay\": {\"from\": ");
    hm_json_write_string(stdout, dc->path, strlen(dc->path));
    printf(", \"windows\": %lld, \"seq_len\": %lld, \"md\": [", (long long)dc->W,
           (long long)dc->T);
    for (int k = 0; k < 2; k++) {
        for (int64_t l = 0; l < L; l++) {
            printf("%s[", l ? ", " : "");
            for (int64_t h = 0; h < nh; h++)
                printf(k ? "%s%.9g" : "%s%.12g", h ? ", " : "",
                       k ? (double)dc->A[l * nh + h] : dc->md[l * nh + h]);
            printf("]");
        }
        printf(k ? "]}" : "], \"A\": [");
    }
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        HM_CLI_COMMON_LONGOPTS,
        {"output", required_argument, NULL, 'o'},
        {"force", no_argument, NULL, 'f'},
        {"components", required_argument, NULL, OPT_COMPONENTS},
        {"conv-width", required_argument, NULL, OPT_CONV_WIDTH},
        {"feature-dim", required_argument, NULL, OPT_FEATURE_DIM},
        {"init", required_argument, NULL, OPT_INIT},
        {"seed", required_argument, NULL, OPT_SEED},
        {"decay-from", required_argument, NULL, OPT_DECAY_FROM},
        {"decay-windows", required_argument, NULL, OPT_DECAY_WINDOWS},
        {"seq-len", required_argument, NULL, OPT_SEQ_LEN},
        {"threads", required_argument, NULL, OPT_THREADS},
        {"keep-attention", required_argument, NULL, OPT_KEEP},
        {NULL, 0, NULL, 0},
    };
    struct hm_cli_common common = {.progress = -1};
    struct hm_map_opts mo = {.components = HM_COMP_ALL, .conv_width = 4};
    struct decay dc = {NULL, 16, 256, NULL, NULL};
    const char *out = NULL;
    int force = 0, c, seen_init = 0, seen_comp = 0, seen_w = 0, seen_t = 0;
    int64_t threads = 0;
    const char *keep_arg = NULL;
    hm_cli_init("hm-map-ssm", usage, argv);
    while ((c = getopt_long(argc, argv, HM_CLI_COMMON_SHORTOPTS "o:f", longopts, NULL)) != -1) {
        switch (c) {
        HM_CLI_COMMON_CASES(&common);
        case 'o': out = optarg; break;
        case 'f': force = 1; break;
        case OPT_COMPONENTS:
            seen_comp = 1;
            if (hm_components_parse(optarg, &mo.components) != 0)
                hm_usage_error("--components takes a subset of ssm,conv,gate or none, got '%s'",
                               optarg);
            break;
        case OPT_CONV_WIDTH: mo.conv_width = hm_parse_i64(optarg, "--conv-width", 1, 64); break;
        case OPT_FEATURE_DIM:
            mo.feature_dim = hm_parse_i64(optarg, "--feature-dim", 1, 65536);
            break;
        case OPT_INIT:
            seen_init = 1;
            if (strcmp(optarg, "identity") == 0)
                mo.init = HM_MAP_IDENTITY;
            else if (strcmp(optarg, "random") == 0)
                mo.init = HM_MAP_RANDOM;
            else
                hm_usage_error("--init must be identity or random, got '%s'", optarg);
            break;
        case OPT_SEED: mo.seed = (uint64_t)hm_parse_i64(optarg, "--seed", 0, INT64_MAX); break;
        case OPT_DECAY_FROM: dc.path = optarg; break;
        case OPT_DECAY_WINDOWS:
            dc.W = hm_parse_i64(optarg, "--decay-windows", 1, 1 << 20);
            seen_w = 1;
            break;
        case OPT_SEQ_LEN:
            dc.T = hm_parse_i64(optarg, "--seq-len", 1, 1 << 16);
            seen_t = 1;
            break;
        case OPT_THREADS: threads = hm_parse_i64(optarg, "--threads", 1, 4096); break;
        case OPT_KEEP: keep_arg = optarg; break;
        }
    }
    if (!dc.path && (seen_w || seen_t || threads))
        hm_usage_error("--decay-windows, --seq-len and --threads need --decay-from");
    if (dc.path && seen_init && mo.init == HM_MAP_RANDOM)
        hm_usage_error("--decay-from needs --init identity (the naive baseline draws A = -1)");
    if (dc.path && seen_comp && !(mo.components & HM_COMP_SSM))
        hm_usage_error("--decay-from needs the ssm component (an inactive one keeps A = 0)");
    if (threads)
        hm_threads_set((int)threads);
    if (argc - optind != 1)
        hm_usage_error(argc == optind ? "missing IN" : "expected one IN");
    if (!out)
        hm_usage_error("missing -o/--output");
    const char *in = argv[optind];
    hm_cli_check_json_stdout(out, common.json, 0);
    if (dc.path && strcmp(dc.path, "-") == 0 && strcmp(in, "-") == 0)
        hm_usage_error("IN and --decay-from cannot both be stdin");
    if (strcmp(out, "-") != 0) {
        if (hm_output_clobbers(out, in))
            hm_die("output '%s' is the input or a file of the input folder: refusing to "
                   "overwrite it", out);
        if (dc.path && hm_output_clobbers(out, dc.path))
            hm_die("output '%s' is --decay-from: refusing to overwrite it", out);
        hm_cli_hold_output(out);
        if (!force && hm_is_file(out))
            hm_die("output '%s' exists (use -f/--force to replace it)", out);
    }
    time_t t0 = time(NULL);
    struct hm_error err;
    hm_error_clear(&err);
    struct hm_ckpt *ck;
    if (hm_ckpt_open(in, &ck, &err) != HM_OK)
        hm_die_err("cannot read", in, &err);
    hm_cli_ckpt_notes(ck, in);
    const struct hm_config *ic = hm_ckpt_config(ck);
    if (ic->mixer == HM_MIXER_HEDGEMAMBA)
        hm_die("cannot map '%s': it is already a hedgemamba model", in);
    if (ic->mixer == HM_MIXER_HEDGEHOG && mo.feature_dim && mo.feature_dim != ic->feature_dim)
        hm_usage_error("--feature-dim %lld differs from the hedgehog input's %lld",
                       (long long)mo.feature_dim, (long long)ic->feature_dim);
    if (keep_arg) {
        struct hm_config kc = *ic;
        kc.mixer = HM_MIXER_HEDGEMAMBA;
        memset(kc.kept, 0, sizeof kc.kept);
        if (hm_config_kept_parse(&kc, keep_arg, ic->num_hidden_layers) != 0)
            hm_usage_error("--keep-attention must list layers 0..%lld, comma-separated, got "
                           "'%s'", (long long)ic->num_hidden_layers - 1, keep_arg);
        memcpy(mo.keep, kc.kept, sizeof mo.keep);
    }
    if (dc.path) {
        decay_from(in, ck, &dc);
        mo.decay_A = dc.A;
    }
    struct hm_prov_input pin[2] = {{in, 0}, {dc.path, 0}};
    if (hm_is_file(in))
        hm_xxh3_file(in, &pin[0].xxh3, &err);
    if (dc.path && hm_is_file(dc.path))
        hm_xxh3_file(dc.path, &pin[1].xxh3, &err);
    struct hm_prov_entry e = {"hm-map-ssm", argc, argv, pin, dc.path ? 2 : 1, t0, time(NULL),
                              dc.path ? dc.W * dc.T : -1, NAN};
    char *prov = NULL;
    if (hm_provenance_append(hm_cli_prev_provenance(ck, in), &e, &prov, &err) != HM_OK)
        hm_die_err("cannot read", in, &err);
    if (hm_map_ssm_write(ck, &mo, out, force ? HM_AFILE_FORCE : 0, prov, &err) != HM_OK)
        hm_die("cannot map '%s' to '%s': %s", in, out, err.msg);
    char comps[32];
    hm_components_str(mo.components, comps, sizeof comps);
    const int64_t L = ic->num_hidden_layers, nh = ic->num_attention_heads;
    char kept[1024];
    struct hm_config oc;
    hm_map_ssm_config(ic, &mo, &oc, &err);
    hm_config_kept_str(&oc, kept, sizeof kept);
    if (common.json && strcmp(out, "-") != 0) {
        printf("{\"version\": 1, \"input_arch\": \"%s\", \"output\": \"%s\", \"init\": \"%s\", "
               "\"components\": \"%s\", \"conv_width\": %lld", hm_arch_name(ic), out,
               mo.init == HM_MAP_RANDOM ? "random" : "identity", comps,
               (long long)mo.conv_width);
        if (dc.path)
            print_decay_json(&dc, L, nh);
        printf(", \"kept_layers\": [%s]}\n", kept);
    } else if (strcmp(out, "-") != 0) {
        hm_info(&common, "wrote '%s': hedgemamba from %s (%s init, components %s, conv %lld%s%s)",
                out, hm_arch_name(ic), mo.init == HM_MAP_RANDOM ? "random" : "identity",
                comps[0] ? comps : "none", (long long)mo.conv_width,
                kept[0] ? ", softmax kept in layers " : "", kept);
    }
    if (dc.path && !common.json)
        hm_info(&common, "A from teacher statistics: %lld window%s of %lld tokens of '%s'",
                (long long)dc.W, dc.W > 1 ? "s" : "", (long long)dc.T, dc.path);
    if (dc.path) {
        for (int64_t i = 0; i < L * nh && common.verbose && !common.quiet; i++)
            fprintf(stderr, "  layer %lld head %lld: md %.4f  alpha %.6f  A %.6f\n",
                    (long long)(i / nh), (long long)(i % nh), dc.md[i], exp((double)dc.A[i]),
                    (double)dc.A[i]);
    }
    free(dc.md);
    free(dc.A);
    free(prov);
    hm_ckpt_close(ck);
    return hm_cli_finish(HM_EXIT_OK);
}
