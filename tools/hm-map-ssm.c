/* hm-map-ssm — map a Hedgehog (stage 1) checkpoint exactly into a HedgeMamba
 * SSM mixer (contract §3), or produce the paper's baselines: straight from a
 * GPT-NeoX teacher ("skip stage 1") or with random mixer weights ("naive").
 * Prove the mapping with `hm-verify mapping IN OUT`. */
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
#include "map_ssm.h"
#include "provenance.h"

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
    "  -q, --quiet  -v, --verbose  --json  -h, --help  --version\n"
    "\n"
    "Exit status: 0 success, 1 failure, 2 bad usage.\n";

enum { OPT_COMPONENTS = HM_OPT_FIRST_TOOL, OPT_CONV_WIDTH, OPT_FEATURE_DIM, OPT_INIT, OPT_SEED };

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
        {NULL, 0, NULL, 0},
    };
    struct hm_cli_common common = {.progress = -1};
    struct hm_map_opts mo = {.components = HM_COMP_ALL, .conv_width = 4};
    const char *out = NULL;
    int force = 0, c;
    hm_cli_init("hm-map-ssm", usage, argv);
    while ((c = getopt_long(argc, argv, HM_CLI_COMMON_SHORTOPTS "o:f", longopts, NULL)) != -1) {
        switch (c) {
        HM_CLI_COMMON_CASES(&common);
        case 'o': out = optarg; break;
        case 'f': force = 1; break;
        case OPT_COMPONENTS:
            if (hm_components_parse(optarg, &mo.components) != 0)
                hm_usage_error("--components takes a subset of ssm,conv,gate or none, got '%s'",
                               optarg);
            break;
        case OPT_CONV_WIDTH: mo.conv_width = hm_parse_i64(optarg, "--conv-width", 1, 64); break;
        case OPT_FEATURE_DIM:
            mo.feature_dim = hm_parse_i64(optarg, "--feature-dim", 1, 65536);
            break;
        case OPT_INIT:
            if (strcmp(optarg, "identity") == 0)
                mo.init = HM_MAP_IDENTITY;
            else if (strcmp(optarg, "random") == 0)
                mo.init = HM_MAP_RANDOM;
            else
                hm_usage_error("--init must be identity or random, got '%s'", optarg);
            break;
        case OPT_SEED: mo.seed = (uint64_t)hm_parse_i64(optarg, "--seed", 0, INT64_MAX); break;
        }
    }
    if (argc - optind != 1)
        hm_usage_error(argc == optind ? "missing IN" : "expected one IN");
    if (!out)
        hm_usage_error("missing -o/--output");
    const char *in = argv[optind];
    if (strcmp(out, "-") != 0) {
        if (hm_output_clobbers(out, in))
            hm_die("output '%s' is the input or a file of the input folder: refusing to "
                   "overwrite it", out);
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
    const struct hm_config *ic = hm_ckpt_config(ck);
    if (ic->mixer == HM_MIXER_HEDGEMAMBA)
        hm_die("cannot map '%s': it is already a hedgemamba model", in);
    if (ic->mixer == HM_MIXER_HEDGEHOG && mo.feature_dim && mo.feature_dim != ic->feature_dim)
        hm_usage_error("--feature-dim %lld differs from the hedgehog input's %lld",
                       (long long)mo.feature_dim, (long long)ic->feature_dim);
    struct hm_prov_input pin = {in, 0};
    if (hm_is_file(in))
        hm_xxh3_file(in, &pin.xxh3, &err);
    struct hm_prov_entry e = {"hm-map-ssm", argc, argv, &pin, 1, t0, time(NULL), -1, NAN};
    char *prov = NULL;
    if (hm_provenance_append(hm_ckpt_metadata_get(ck, "hm.provenance"), &e, &prov, &err) != HM_OK)
        hm_die_err("cannot read", in, &err);
    if (hm_map_ssm_write(ck, &mo, out, force ? HM_AFILE_FORCE : 0, prov, &err) != HM_OK)
        hm_die("cannot map '%s' to '%s': %s", in, out, err.msg);
    char comps[32];
    hm_components_str(mo.components, comps, sizeof comps);
    if (common.json && strcmp(out, "-") != 0)
        printf("{\"version\": 1, \"input_arch\": \"%s\", \"output\": \"%s\", \"init\": \"%s\", "
               "\"components\": \"%s\", \"conv_width\": %lld}\n", hm_arch_name(ic), out,
               mo.init == HM_MAP_RANDOM ? "random" : "identity", comps,
               (long long)mo.conv_width);
    else if (strcmp(out, "-") != 0)
        hm_info(&common, "wrote '%s': hedgemamba from %s (%s init, components %s, conv %lld)",
                out, hm_arch_name(ic), mo.init == HM_MAP_RANDOM ? "random" : "identity",
                comps[0] ? comps : "none", (long long)mo.conv_width);
    free(prov);
    hm_ckpt_close(ck);
    return hm_cli_finish(HM_EXIT_OK);
}
