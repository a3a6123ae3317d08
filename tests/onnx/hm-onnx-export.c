/* hm-onnx-export — test helper: a checkpoint (or bundle, HF folder) → the
 * ONNX graph of contract §9 (libconvert/export/onnx_export.h). Used by
 * tests/cli/onnx.sh; users get the same graph from `hm-pack --onnx`
 * (onnx/model.onnx of a bundle). Built into build/tests/, not installed. */
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
    "  -f, --force          replace an existing output\n"
    "  -q, --quiet  -v, --verbose  --json  -h, --help  --version\n"
    "\n"
    "Exit status: 0 success, 1 failure, 2 bad usage.\n";

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        HM_CLI_COMMON_LONGOPTS,
        {"output", required_argument, NULL, 'o'},
        {"force", no_argument, NULL, 'f'},
        {NULL, 0, NULL, 0},
    };
    struct hm_cli_common common = {.progress = -1};
    const char *out = NULL;
    int force = 0, c;
    hm_cli_init("hm-onnx-export", usage, argv);
    while ((c = getopt_long(argc, argv, HM_CLI_COMMON_SHORTOPTS "o:f", longopts, NULL)) != -1) {
        switch (c) {
        HM_CLI_COMMON_CASES(&common);
        case 'o': out = optarg; break;
        case 'f': force = 1; break;
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
    void *bytes = NULL;
    size_t len = 0;
    if (hm_onnx_export(m, &bytes, &len, &err) != HM_OK)
        hm_die("cannot export '%s' to ONNX: %s", in, err.msg);
    struct hm_afile *af = NULL;
    if (hm_afile_open(out, force ? HM_AFILE_FORCE : 0, &af, &err) != HM_OK)
        hm_die_err("cannot write", out, &err);
    if (fwrite(bytes, 1, len, hm_afile_stream(af)) != len) {
        hm_afile_abort(af);
        hm_die("cannot write '%s': short write", out);
    }
    if (hm_afile_commit(af, &err) != HM_OK)
        hm_die_err("cannot write", out, &err);
    if (common.json && strcmp(out, "-") != 0)
        printf("{\"version\": 1, \"output\": \"%s\", \"bytes\": %zu, \"arch\": \"%s\", "
               "\"family\": \"%s\"}\n",
               out, len, hm_arch_name(&m->cfg), hm_family_name(m->cfg.family));
    else if (strcmp(out, "-") != 0)
        hm_info(&common, "wrote '%s': %s (%s) as ONNX, %zu bytes", out, hm_arch_name(&m->cfg),
                hm_family_name(m->cfg.family), len);
    free(bytes);
    hm_model_free(m);
    hm_ckpt_close(ck);
    return hm_cli_finish(HM_EXIT_OK);
}
