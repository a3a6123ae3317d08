/* hm-onnx-export — test helper: a checkpoint (or bundle, HF folder) → the
 * ONNX graph of contract §9 (libconvert/export/onnx_export.h). Used by
 * tests/cli/onnx.sh; users get the same graph from `hm-pack --onnx`
 * (onnx/model.onnx of a bundle). Built into build/tests/, not installed.
 * Past 2 GiB of weights (or --external-threshold) the weights go to
 * OUT.onnx.data beside OUT.onnx (contract §11). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "atomic_file.h"
#include "checkpoint.h"
#include "cli.h"
#include "model.h"
#include "onnx_export.h"

static const char usage[] =
    "usage: hm-onnx-export [OPTIONS] CHECKPOINT -o OUT.onnx\n"
    "\n"
    "Write the ONNX graph (SPEC 9, docs/onnx.md) of a hedgehog or hedgemamba\n"
    "checkpoint: inputs input_ids, position_ids, past_conv.{l}, past_state.{l};\n"
    "outputs logits, present_conv.{l}, present_state.{l}.\n"
    "\n"
    "Options:\n"
    "  -o, --output FILE    the .onnx file (- for stdout)\n"
    "      --external-threshold BYTES\n"
    "                       put the weights in FILE.data beside FILE (external\n"
    "                       data) when they pass BYTES (default 2 GiB less 64 MiB;\n"
    "                       0: always)\n"
    "  -f, --force          replace an existing output(s)\n"
    "  -q, --quiet  -v, --verbose  --json  -h, --help  --version\n"
    "\n"
    "Exit status: 0 success, 1 failure, 2 bad usage.\n";

enum { OPT_EXTERNAL = HM_OPT_FIRST_TOOL };

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        HM_CLI_COMMON_LONGOPTS,
        {"output", required_argument, NULL, 'o'},
        {"force", no_argument, NULL, 'f'},
        {"external-threshold", required_argument, NULL, OPT_EXTERNAL},
        {NULL, 0, NULL, 0},
    };
    struct hm_cli_common common = {.progress = -1};
    struct hm_onnx_opts xo = HM_ONNX_OPTS_INIT;
    const char *out = NULL;
    int force = 0, c;
    hm_cli_init("hm-onnx-export", usage, argv);
    while ((c = getopt_long(argc, argv, HM_CLI_COMMON_SHORTOPTS "o:f", longopts, NULL)) != -1) {
        switch (c) {
        HM_CLI_COMMON_CASES(&common);
        case 'o': out = optarg; break;
        case 'f': force = 1; break;
        case OPT_EXTERNAL:
            xo.external_above = (uint64_t)hm_parse_i64(optarg, "--external-threshold", 0,
                                                       INT64_MAX);
            break;
        }
    }
    if (argc - optind != 1)
        hm_usage_error(argc == optind ? "missing CHECKPOINT" : "expected one CHECKPOINT");
    if (!out)
        hm_usage_error("missing -o/--output");
    const char *in = argv[optind];
    struct hm_error err;
    hm_error_clear(&err);
    struct hm_ckpt *ck = NULL;
    struct hm_model *m = NULL;
    if (hm_ckpt_open(in, &ck, &err) != HM_OK || hm_model_load(ck, &m, &err) != HM_OK)
        hm_die_err("cannot read", in, &err);
    /* the data file is named after the graph's: OUT.onnx → OUT.onnx.data */
    const char *base = strrchr(out, '/') ? strrchr(out, '/') + 1 : out;
    char *location = malloc(strlen(base) + 6);
    if (!location)
        hm_die("out of memory");
    sprintf(location, "%s.data", base);
    xo.location = location;
    struct hm_onnx *x = NULL;
    if (hm_onnx_build(m, &xo, &x, &err) != HM_OK)
        hm_die("cannot export '%s' to ONNX: %s", in, err.msg);
    char *data = hm_onnx_data_path(x, out);
    if (data && hm_output_clobbers(data, in))
        hm_die("output '%s' would overwrite the input '%s': refusing", data, in);
    if (hm_output_clobbers(out, in))
        hm_die("output '%s' would overwrite the input '%s': refusing", out, in);
    if (hm_onnx_write_files(x, out, force, &err) != HM_OK)
        hm_die_err("cannot write", out, &err);
    size_t len;
    hm_onnx_graph(x, &len);
    const unsigned long long data_len = (unsigned long long)hm_onnx_data_size(x);
    if (common.json && strcmp(out, "-") != 0)
        printf("{\"version\": 1, \"output\": \"%s\", \"bytes\": %zu, \"data_bytes\": %llu, "
               "\"arch\": \"%s\", \"family\": \"%s\"}\n",
               out, len, data_len, hm_arch_name(&m->cfg), hm_family_name(m->cfg.family));
    else if (data)
        hm_info(&common, "wrote '%s': %s (%s) as ONNX, %zu bytes, and its external data '%s', "
                "%llu bytes", out, hm_arch_name(&m->cfg), hm_family_name(m->cfg.family), len,
                data, data_len);
    else if (strcmp(out, "-") != 0)
        hm_info(&common, "wrote '%s': %s (%s) as ONNX, %zu bytes", out, hm_arch_name(&m->cfg),
                hm_family_name(m->cfg.family), len);
    free(data);
    hm_onnx_free(x);
    free(location);
    hm_model_free(m);
    hm_ckpt_close(ck);
    return hm_cli_finish(HM_EXIT_OK);
}
