/* hm-import — convert a checkpoint written by another program into an hm
 * teacher checkpoint. One subcommand per source format (git-style dispatch
 * table below); each converts exactly, with hm.config and hm.provenance. */
#include <cjson/cJSON.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "atomic_file.h"
#include "cli.h"
#include "json_out.h"
#include "fileio.h"
#include "hash.h"
#include "import_llama2c.h"
#include "provenance.h"

static const char usage[] =
    "usage: hm-import FORMAT MODEL -o OUT [OPTIONS]\n"
    "       hm-import llama2c MODEL.bin -o OUT.safetensors [-f]\n"
    "\n"
    "Convert MODEL, a checkpoint in a foreign FORMAT, into an hm teacher checkpoint\n"
    "(F32 safetensors, HF tensor names, hm.config and hm.provenance metadata).\n"
    "The conversion is exact: every output value is one of the input's floats.\n"
    "\n"
    "Formats:\n"
    "  llama2c   a karpathy/llama2.c checkpoint (legacy version 0 export: 7 int32\n"
    "            header, fp32 weights in run.c order; a negative vocab_size means an\n"
    "            untied classifier follows) -> a llama teacher (LlamaForCausalLM\n"
    "            names). wq and wk rows are permuted within each head from llama2.c's\n"
    "            adjacent-pair RoPE to HF rotate_half order; w1/w3/w2 become\n"
    "            gate/up/down; rms_norm_eps 1e-5, rope_theta 10000, max positions =\n"
    "            seq_len; freq_cis is ignored. NaN/Inf weights are refused.\n"
    "\n"
    "Options:\n"
    "  -o, --output FILE      output safetensors file (- for stdout)\n"
    "  -f, --force            replace an existing output\n"
    "  -n, --dry-run          check MODEL and print what would be written\n"
    "      --json             a JSON summary on stdout (version 1)\n"
    "  -q, --quiet  -v, --verbose  -h, --help  --version\n"
    "\n"
    "Exit status: 0 success, 1 failure, 2 bad usage.\n";

struct import_opts {
    int argc;
    char **argv;
    const char *format, *in, *out;
    int force, dry;
    const struct hm_cli_common *common;
};

/* --json summary: {"version": 1, "format", "input", "output", "arch",
 * "tensors", "parameters", "dry_run", "config": {hm.config}}. */
static void print_json(const struct import_opts *o, const struct hm_config *cfg,
                       int64_t n_tensors, int64_t n_params)
{
    cJSON *r = cJSON_CreateObject();
    char *cj = hm_config_to_json(cfg);
    cJSON *c = cj ? cJSON_Parse(cj) : NULL;
    free(cj);
    if (!r || !c)
        hm_die("out of memory");
    cJSON_AddNumberToObject(r, "version", 1);
    cJSON_AddStringToObject(r, "format", o->format);
    cJSON_AddStringToObject(r, "input", o->in);
    if (o->out)
        cJSON_AddStringToObject(r, "output", o->out);
    else
        cJSON_AddNullToObject(r, "output");
    cJSON_AddStringToObject(r, "arch", hm_arch_name(cfg));
    cJSON_AddNumberToObject(r, "tensors", (double)n_tensors);
    cJSON_AddNumberToObject(r, "parameters", (double)n_params);
    cJSON_AddBoolToObject(r, "dry_run", o->dry);
    cJSON_AddItemToObject(r, "config", c);
    hm_json_put(r);
}

static int import_llama2c(const struct import_opts *o)
{
    time_t t0 = time(NULL);
    struct hm_error err;
    hm_error_clear(&err);
    struct hm_llama2c *m;
    if (hm_llama2c_open(o->in, &m, &err) != HM_OK)
        hm_die_err("cannot read", o->in, &err);
    const struct hm_config *cfg = hm_llama2c_get_config(m);
    const struct hm_llama2c_header *h = hm_llama2c_get_header(m);
    if (o->dry) {
        if (hm_llama2c_check_finite(m, &err) != HM_OK)
            hm_die_err("cannot read", o->in, &err);
        if (o->common->json) {
            print_json(o, cfg, hm_llama2c_n_tensors(m), hm_llama2c_n_params(m));
        } else {
            char *j = hm_config_to_json(cfg);
            printf("would write %lld tensors, %lld parameters\nconfig: %s\n",
                   (long long)hm_llama2c_n_tensors(m), (long long)hm_llama2c_n_params(m),
                   j ? j : "?");
            free(j);
        }
        hm_llama2c_close(m);
        return HM_EXIT_OK;
    }
    struct hm_prov_input pin = {o->in, 0};
    if (hm_xxh3_file(o->in, &pin.xxh3, &err) != HM_OK)
        hm_die_err("cannot read", o->in, &err);
    struct hm_prov_entry e = {"hm-import", o->argc, o->argv, &pin, 1, t0, time(NULL), -1, NAN};
    char *prov = NULL;
    if (hm_provenance_append(NULL, &e, &prov, &err) != HM_OK)
        hm_die("cannot record provenance: %s", err.msg);
    if (hm_llama2c_write(m, o->out, o->force ? HM_AFILE_FORCE : 0, prov, &err) != HM_OK)
        hm_die("cannot import '%s' into '%s': %s", o->in, o->out, err.msg);
    if (strcmp(o->out, "-") != 0) {
        if (o->common->json)
            print_json(o, cfg, hm_llama2c_n_tensors(m), hm_llama2c_n_params(m));
        else
            hm_info(o->common,
                    "wrote '%s': llama, %lld layers, dim %lld, %lld/%lld heads, vocab %lld "
                    "(%s), %lld parameters",
                    o->out, (long long)h->n_layers, (long long)h->dim, (long long)h->n_heads,
                    (long long)h->n_kv_heads, (long long)h->vocab_size,
                    h->shared_classifier ? "tied" : "untied",
                    (long long)hm_llama2c_n_params(m));
    }
    free(prov);
    hm_llama2c_close(m);
    return HM_EXIT_OK;
}

/* Later formats add a row here and a function above. */
static const struct {
    const char *name;
    int (*run)(const struct import_opts *o);
} formats[] = {
    {"llama2c", import_llama2c},
};

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        HM_CLI_COMMON_LONGOPTS,
        {"output", required_argument, NULL, 'o'},
        {"force", no_argument, NULL, 'f'},
        {"dry-run", no_argument, NULL, 'n'},
        {NULL, 0, NULL, 0},
    };
    struct hm_cli_common common = {.progress = -1};
    struct import_opts o = {.argc = argc, .argv = argv, .common = &common};
    int c;
    hm_cli_init("hm-import", usage, argv);
    while ((c = getopt_long(argc, argv, HM_CLI_COMMON_SHORTOPTS "o:fn", longopts, NULL)) != -1) {
        switch (c) {
        HM_CLI_COMMON_CASES(&common);
        case 'o': o.out = optarg; break;
        case 'f': o.force = 1; break;
        case 'n': o.dry = 1; break;
        }
    }
    if (optind >= argc)
        hm_usage_error("missing FORMAT (known: llama2c)");
    o.format = argv[optind];
    size_t k = 0, nf = sizeof formats / sizeof formats[0];
    while (k < nf && strcmp(formats[k].name, o.format) != 0)
        k++;
    if (k == nf)
        hm_usage_error("unknown format '%s' (known: llama2c)", o.format);
    if (argc - optind < 2)
        hm_usage_error("missing MODEL");
    if (argc - optind > 2)
        hm_usage_error("unexpected argument '%s'", argv[optind + 2]);
    o.in = argv[optind + 1];
    if (strcmp(o.in, "-") == 0)
        hm_usage_error("MODEL cannot be '-': a %s checkpoint is read by offset from a file",
                       o.format);
    if (!o.out && !o.dry)
        hm_usage_error("missing -o/--output");
    hm_cli_check_json_stdout(o.out, common.json, o.dry);
    if (o.out && strcmp(o.out, "-") != 0) {
        if (hm_same_file(o.in, o.out))
            hm_die("output '%s' is the input: refusing to overwrite it", o.out);
        if (hm_is_dir(o.out))
            hm_die("output '%s' is a directory", o.out);
        if (!o.dry)
            hm_cli_hold_output(o.out);
        if (!o.force && hm_is_file(o.out))
            hm_die("output '%s' exists (use -f/--force to replace it)", o.out);
    }
    if (o.out && strcmp(o.out, "-") == 0 && common.json)
        hm_usage_error("--json needs a file output: stdout carries the checkpoint");
    return hm_cli_finish(formats[k].run(&o));
}
