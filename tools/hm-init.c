/* hm-init — a randomly initialized teacher (GPT-NeoX or Llama) from a preset or a
 * config (HF config.json or hm.config JSON), seeded and reproducible. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "atomic_file.h"
#include "cli.h"
#include "fileio.h"
#include "model_views.h"
#include "presets.h"
#include "provenance.h"

static const char usage[] =
    "usage: hm-init (--preset NAME | --config FILE) -o OUT [OPTIONS]\n"
    "\n"
    "Write a teacher checkpoint (gpt_neox or llama) with random weights (HF init:\n"
    "linear weights and embeddings N(0, 0.02^2), biases 0, norm weights 1).\n"
    "\n"
    "Options:\n"
    "      --preset NAME      tiny (byte-level demo teacher), pythia-14m, pythia-31m,\n"
    "                         pythia-70m, pythia-160m, pythia-410m, pythia-1b;\n"
    "                         llama shapes: llama-tiny (stories260K), stories15m,\n"
    "                         smollm-135m, tinyllama-1.1b, llama-3.2-1b\n"
    "      --config FILE      a config.json (model_type gpt_neox or llama) or hm.config\n"
    "      --vocab-size N     override the vocabulary rows (e.g. 257 for bytes)\n"
    "      --seed S           random seed (default 0)\n"
    "      --init-std X       standard deviation of the normal init (default 0.02)\n"
    "      --dtype f32|f16|bf16  stored dtype (default f32)\n"
    "  -o, --output FILE      output safetensors file (- for stdout)\n"
    "  -f, --force            replace an existing output\n"
    "  -n, --dry-run          print the config and size, write nothing\n"
    "      --json             with -n: the config as JSON\n"
    "  -q, --quiet  -v, --verbose  -h, --help  --version\n"
    "\n"
    "Exit status: 0 success, 1 failure, 2 bad usage.\n";

enum { OPT_PRESET = HM_OPT_FIRST_TOOL, OPT_CONFIG, OPT_VOCAB, OPT_SEED, OPT_STD, OPT_DTYPE };

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        HM_CLI_COMMON_LONGOPTS,
        {"preset", required_argument, NULL, OPT_PRESET},
        {"config", required_argument, NULL, OPT_CONFIG},
        {"vocab-size", required_argument, NULL, OPT_VOCAB},
        {"seed", required_argument, NULL, OPT_SEED},
        {"init-std", required_argument, NULL, OPT_STD},
        {"dtype", required_argument, NULL, OPT_DTYPE},
        {"output", required_argument, NULL, 'o'},
        {"force", no_argument, NULL, 'f'},
        {"dry-run", no_argument, NULL, 'n'},
        {NULL, 0, NULL, 0},
    };
    struct hm_cli_common common = {.progress = -1};
    const char *preset = NULL, *config = NULL, *out = NULL;
    int64_t vocab = 0;
    uint64_t seed = 0;
    double std = 0.02;
    int force = 0, dry = 0, c;
    enum hm_dtype dtype = HM_DTYPE_F32;
    hm_cli_init("hm-init", usage, argv);
    while ((c = getopt_long(argc, argv, HM_CLI_COMMON_SHORTOPTS "o:fn", longopts, NULL)) != -1) {
        switch (c) {
        HM_CLI_COMMON_CASES(&common);
        case OPT_PRESET: preset = optarg; break;
        case OPT_CONFIG: config = optarg; break;
        case OPT_VOCAB: vocab = hm_parse_i64(optarg, "--vocab-size", 1, (int64_t)1 << 31); break;
        case OPT_SEED: seed = (uint64_t)hm_parse_i64(optarg, "--seed", 0, INT64_MAX); break;
        case OPT_STD: std = hm_parse_f64(optarg, "--init-std", 0, 10); break;
        case OPT_DTYPE:
            if (strcmp(optarg, "f32") == 0)
                dtype = HM_DTYPE_F32;
            else if (strcmp(optarg, "f16") == 0)
                dtype = HM_DTYPE_F16;
            else if (strcmp(optarg, "bf16") == 0)
                dtype = HM_DTYPE_BF16;
            else
                hm_usage_error("--dtype must be f32, f16 or bf16, got '%s'", optarg);
            break;
        case 'o': out = optarg; break;
        case 'f': force = 1; break;
        case 'n': dry = 1; break;
        }
    }
    if (optind < argc)
        hm_usage_error("unexpected argument '%s'", argv[optind]);
    if (!!preset == !!config)
        hm_usage_error("give exactly one of --preset or --config");
    if (!out && !dry)
        hm_usage_error("missing -o/--output");
    if (out && config && hm_output_clobbers(out, config))
        hm_die("output '%s' is the --config: refusing to overwrite it", out);
    hm_cli_check_json_stdout(out, common.json, dry);
    if (!dry)
        hm_cli_hold_output(out); /* before reading --config (it may be a slow stream) */

    struct hm_config cfg;
    struct hm_error err;
    hm_error_clear(&err);
    if (preset && hm_config_preset(preset, &cfg) != 0)
        hm_usage_error("unknown preset '%s' (known: %s)", preset, hm_preset_names());
    if (config) {
        char *text;
        size_t len;
        if (hm_read_file(config, 16u << 20, &text, &len, &err) != HM_OK ||
            hm_config_parse(text, len, &cfg, &err) != HM_OK)
            hm_die_err("cannot read", config, &err);
        free(text);
        if (cfg.mixer != HM_MIXER_SOFTMAX)
            hm_die("config '%s' is for arch '%s'; hm-init makes teachers (gpt_neox, llama)", config,
                   hm_arch_name(&cfg));
    }
    if (vocab) {
        cfg.vocab_size = vocab;
        if (hm_config_finish(&cfg, &err) != HM_OK)
            hm_die("bad config: %s", err.msg);
    }
    if (dry) {
        char *j = hm_config_to_json(&cfg);
        if (common.json)
            printf("%s\n", j);
        else
            printf("config: %s\n", j);
        free(j);
        return hm_cli_finish(HM_EXIT_OK);
    }
    if (strcmp(out, "-") != 0 && !force && hm_is_file(out))
        hm_die("output '%s' exists (use -f/--force to replace it)", out);
    time_t t0 = time(NULL);
    struct hm_prov_entry e = {"hm-init", argc, argv, NULL, 0, t0, time(NULL), -1, NAN};
    char *prov = NULL;
    /* tensor by tensor, in the stored dtype: no model in memory */
    if (hm_provenance_append(NULL, &e, &prov, &err) != HM_OK ||
        hm_init_write(&cfg, seed, std, dtype, prov, out, force ? HM_AFILE_FORCE : 0, &err) !=
            HM_OK)
        hm_die_err("cannot write", out, &err);
    if (strcmp(out, "-") != 0)
        hm_info(&common, "wrote '%s': %lld parameters (seed %llu)", out,
                (long long)hm_param_count(&cfg), (unsigned long long)seed);
    free(prov);
    return hm_cli_finish(HM_EXIT_OK);
}
