/* hm-pack — pack a checkpoint into a bundle for downstream runtimes (contract §5
 * "Bundles", docs/bundle.md): a folder or an archive holding
 * model.safetensors (or, past --shard-size, HF shards and their index),
 * config.json, the tokenizer, README.md (the model card), optionally
 * onnx/model.onnx (and past 2 GiB its external data onnx/model.onnx.data),
 * and MANIFEST.json with every checksum. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "archive_write.h"
#include "atomic_file.h"
#include "bundle.h"
#include "checkpoint.h"
#include "cli.h"
#include "json_out.h"
#include "fileio.h"
#include "hash.h"
#include "model.h"
#include "onnx_export.h"
#include "provenance.h"
#include "tokenizer.h"

static const char usage[] =
    "usage: hm-pack [OPTIONS] CKPT -o BUNDLE\n"
    "\n"
    "Pack CKPT (any checkpoint hm reads: a safetensors file, a HuggingFace folder,\n"
    "a sharded index, a bundle, - for stdin) into BUNDLE: a folder, or an archive\n"
    "chosen by the suffix of BUNDLE (.tar .tar.gz .tgz .tar.xz .txz .tar.zst .tzst\n"
    ".zip) unless --format says. It holds model.safetensors (the model's own tensors\n"
    "with HF names; legacy buffers are not packed) or, when the tensors hold more\n"
    "than --shard-size bytes, HF shards model-00001-of-0000N.safetensors ... with\n"
    "model.safetensors.index.json, config.json (HF field names),\n"
    "the tokenizer (tokenizer.json or tokenizer.bin), README.md (the model card:\n"
    "what it is, how it was made, its recorded evaluations), onnx/model.onnx with\n"
    "--onnx (and onnx/model.onnx.data, its weights, for students over 2 GiB), and\n"
    "MANIFEST.json (bytes and XXH3-64 of every file and tensor, the provenance). The same input and flags give the same bytes: entries sorted,\n"
    "times from SOURCE_DATE_EPOCH (or 0), owner 0, no wall-clock time anywhere.\n"
    "\n"
    "Options:\n"
    "  -o, --output PATH        the bundle (- = stdout, an archive format)\n"
    "      --format F           dir, tar, tar.gz, tar.xz, tar.zst or zip\n"
    "      --dtype D            f32, f16 or bf16 (default: as the checkpoint stores\n"
    "                           each tensor); f16/bf16 refuse a value that overflows\n"
    "      --tokenizer FILE     the tokenizer (HF tokenizer.json or llama2.c\n"
    "                           tokenizer.bin); default: the bundle's own (a bundle\n"
    "                           input), a --tokenizer recorded in the provenance, or\n"
    "                           tokenizer.json in a HuggingFace folder input\n"
    "      --bytes              the byte-level vocabulary, written as tokenizer.json\n"
    "      --onnx               add onnx/model.onnx (students; SPEC 9); past 2 GiB\n"
    "                           of fp32 weights they go to onnx/model.onnx.data\n"
    "                           beside it (ONNX external data; docs/onnx.md)\n"
    "      --shard-size SIZE    shard the weights past SIZE bytes of tensors, as HF\n"
    "                           save_pretrained (default 5GB; B, KB, MB, GB, TB are\n"
    "                           powers of 10, KiB, MiB, GiB, TiB powers of 2)\n"
    "  -f, --force              replace an existing output (a file, or a bundle folder)\n"
    "  -n, --dry-run            check and hash everything, write nothing\n"
    "      --json               one JSON object on stdout: version, output, format,\n"
    "                           files, tensors, shards, bytes, weights_bytes, dry_run\n"
    "  -q, --quiet  -v, --verbose  -h, --help  --version\n"
    "\n"
    "Exit status: 0 success, 1 failure, 2 bad usage.\n";

enum { OPT_FORMAT = HM_OPT_FIRST_TOOL, OPT_DTYPE, OPT_TOKENIZER, OPT_BYTES, OPT_ONNX,
       OPT_ONNX_EXTERNAL, OPT_SHARD_SIZE };

struct opts {
    struct hm_cli_common common;
    const char *in, *out, *tokenizer, *dtype_name, *shard_size_arg;
    int kind, dtype, bytes, onnx, force, dry_run;
    /* --onnx-external-threshold, a hidden test hook (docs/onnx.md): the ONNX
     * weights go to external data above this many bytes */
    int onnx_external_set;
    uint64_t onnx_external_above;
    uint64_t shard_size;
};

struct tok {
    char *data;            /* owned bytes of the tokenizer file */
    size_t len;
    const char *name;      /* "tokenizer.json" or "tokenizer.bin" */
    const char *source;    /* what the provenance records as its path */
    char *source_owned;
    int64_t bos, eos;
    char desc[128];        /* for the model card */
};

static int parse_kind(const char *s)
{
    return strcmp(s, "dir") == 0 ? HM_BUNDLE_DIR : hm_archive_format_parse(s) >= 0
                                                      ? hm_archive_format_parse(s)
                                                      : -2;
}

static const char *kind_name(int kind)
{
    return kind == HM_BUNDLE_DIR ? "dir" : hm_archive_format_name((enum hm_archive_format)kind);
}

static int64_t source_date_epoch(void)
{
    const char *s = getenv("SOURCE_DATE_EPOCH");
    if (!s || !*s)
        return 0;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (*end || errno || v < 0)
        hm_die("SOURCE_DATE_EPOCH '%s' is not a number of seconds >= 0", s);
    return v;
}

/* Where the tokenizer comes from, in the order the usage text gives. */
static void find_tokenizer(const struct opts *o, const struct hm_ckpt *ck, struct tok *t)
{
    struct hm_error err;
    hm_error_clear(&err);
    if (o->bytes) {
        t->data = hm_bundle_bytes_tokenizer_json(&t->len);
        t->source = "bytes";
        if (!t->data)
            hm_die("out of memory");
        return;
    }
    const char *path = o->tokenizer;
    size_t blen;
    const void *b = hm_ckpt_bundle_tokenizer(ck, &blen);
    if (!path && b) {
        if (!(t->data = malloc(blen + 1)))
            hm_die("out of memory");
        memcpy(t->data, b, blen);
        t->len = blen;
        t->source = o->in;
        return;
    }
    if (!path) {
        if (hm_bundle_tokenizer_from_provenance(hm_ckpt_provenance(ck),
                                                &t->source_owned, &err) != HM_OK)
            hm_die_err("cannot read the provenance of", o->in, &err);
        path = t->source_owned;
    }
    if (!path && hm_is_dir(o->in)) {
        size_t n = strlen(o->in) + 20;
        t->source_owned = malloc(n);
        snprintf(t->source_owned, n, "%s/tokenizer.json", o->in);
        int kind = hm_folder_file(t->source_owned, &err);
        if (kind < 0)
            hm_die("cannot pack '%s': %s", o->in, err.msg);
        path = kind ? t->source_owned : NULL;
    }
    if (!path)
        hm_die("cannot pack '%s': no tokenizer: the checkpoint's provenance names no tokenizer "
               "file that exists; give --tokenizer FILE (or --bytes for the byte-level "
               "vocabulary)", o->in);
    if (hm_read_file(path, HM_BUNDLE_MAX_SMALL_FILE, &t->data, &t->len, &err) != HM_OK)
        hm_die_err("cannot read tokenizer", path, &err);
    t->source = path;
}

/* Checks the tokenizer loads and fits the model; sets its name and ids. */
static void check_tokenizer(const struct opts *o, const struct hm_ckpt *ck, struct tok *t)
{
    struct hm_tokenizer *tk;
    struct hm_error err;
    hm_error_clear(&err);
    if (hm_tokenizer_load_memory(t->data, t->len, &tk, &err) != HM_OK)
        hm_die_err("cannot read tokenizer", t->source, &err);
    int64_t tv = hm_tokenizer_vocab_size(tk), mv = hm_ckpt_config(ck)->vocab_size;
    if (tv > mv)
        hm_die("cannot pack '%s': tokenizer '%s' has %lld tokens, the model only %lld rows",
               o->in, t->source, (long long)tv, (long long)mv);
    int llama2c = hm_tokenizer_kind(tk) == HM_TOKENIZER_KIND_LLAMA2C;
    t->name = llama2c ? "tokenizer.bin" : "tokenizer.json";
    int32_t eot = hm_tokenizer_eot_id(tk);
    t->bos = hm_tokenizer_bos_id(tk) >= 0 ? hm_tokenizer_bos_id(tk) : eot;
    t->eos = hm_tokenizer_eos_id(tk) >= 0 ? hm_tokenizer_eos_id(tk) : eot;
    snprintf(t->desc, sizeof t->desc, "(%s, %lld tokens)",
             o->bytes ? "the byte-level vocabulary as HuggingFace BPE"
             : llama2c ? "llama2.c tokenizer" : "HuggingFace tokenizer",
             (long long)tv);
    hm_tokenizer_free(tk);
}

static uint64_t input_hash(const char *in, const struct hm_ckpt *ck)
{
    uint64_t h = 0;
    struct hm_error err;
    struct hm_bundle *b = hm_ckpt_bundle(ck);
    if (hm_is_file(in))
        hm_xxh3_file(in, &h, &err);
    else if (b)
        hm_bundle_file_xxh3(b, hm_bundle_find(b, HM_BUNDLE_MANIFEST), &h, &err);
    else if (hm_ckpt_n_files(ck) == 1 && hm_is_file(hm_ckpt_file_path(ck, 0)))
        hm_xxh3_file(hm_ckpt_file_path(ck, 0), &h, &err);
    return h;
}

/* The ONNX export of the checkpoint: *m (owned, hm_model_free) holds the
 * weights its external data are streamed from, so it lives until packed.
 * owned: free with hm_onnx_free(). */
static struct hm_onnx *export_onnx(const struct opts *o, const struct hm_ckpt *ck,
                                   struct hm_model **m)
{
    struct hm_onnx *x = NULL;
    const struct hm_onnx_opts xo = {o->onnx_external_above, HM_ONNX_DATA_LOCATION};
    struct hm_error err;
    hm_error_clear(&err);
    if (hm_model_load(ck, m, &err) != HM_OK)
        hm_die_err("cannot read", o->in, &err);
    if (hm_onnx_build(*m, &xo, &x, &err) != HM_OK)
        hm_die("cannot export '%s' to ONNX: %s", o->in, err.msg);
    return x;
}

static enum hm_status write_onnx_data(void *ctx, FILE *fp, struct hm_error *err)
{
    return hm_onnx_write_data(ctx, fp, err);
}

static void parse(int argc, char **argv, struct opts *o)
{
    static const struct option longopts[] = {
        HM_CLI_COMMON_LONGOPTS,
        {"output", required_argument, NULL, 'o'},
        {"force", no_argument, NULL, 'f'},
        {"dry-run", no_argument, NULL, 'n'},
        {"format", required_argument, NULL, OPT_FORMAT},
        {"dtype", required_argument, NULL, OPT_DTYPE},
        {"tokenizer", required_argument, NULL, OPT_TOKENIZER},
        {"bytes", no_argument, NULL, OPT_BYTES},
        {"onnx", no_argument, NULL, OPT_ONNX},
        {"onnx-external-threshold", required_argument, NULL, OPT_ONNX_EXTERNAL},
        {"shard-size", required_argument, NULL, OPT_SHARD_SIZE},
        {NULL, 0, NULL, 0},
    };
    int c, format = -3;
    while ((c = getopt_long(argc, argv, HM_CLI_COMMON_SHORTOPTS "o:fn", longopts, NULL)) != -1) {
        switch (c) {
        HM_CLI_COMMON_CASES(&o->common);
        case 'o': o->out = optarg; break;
        case 'f': o->force = 1; break;
        case 'n': o->dry_run = 1; break;
        case OPT_FORMAT:
            if ((format = parse_kind(optarg)) == -2)
                hm_usage_error("--format must be dir, tar, tar.gz, tar.xz, tar.zst or zip, got "
                               "'%s'", optarg);
            break;
        case OPT_DTYPE:
            o->dtype_name = optarg;
            o->dtype = strcmp(optarg, "f32") == 0    ? HM_DTYPE_F32
                       : strcmp(optarg, "f16") == 0  ? HM_DTYPE_F16
                       : strcmp(optarg, "bf16") == 0 ? HM_DTYPE_BF16
                                                     : -2;
            if (o->dtype == -2)
                hm_usage_error("--dtype must be f32, f16 or bf16, got '%s'", optarg);
            break;
        case OPT_TOKENIZER: o->tokenizer = optarg; break;
        case OPT_BYTES: o->bytes = 1; break;
        case OPT_ONNX: o->onnx = 1; break;
        case OPT_ONNX_EXTERNAL:
            o->onnx_external_above = (uint64_t)hm_parse_i64(optarg, "--onnx-external-threshold",
                                                            0, INT64_MAX);
            o->onnx_external_set = 1;
            break;
        case OPT_SHARD_SIZE:
            o->shard_size_arg = optarg;
            o->shard_size = hm_parse_bytes(optarg, "--shard-size");
            break;
        }
    }
    if (argc - optind != 1)
        hm_usage_error(argc == optind ? "missing CKPT" : "expected one CKPT");
    o->in = argv[optind];
    if (!o->out)
        hm_usage_error("missing -o/--output");
    hm_cli_check_json_stdout(o->out, o->common.json, o->dry_run);
    if (o->tokenizer && o->bytes)
        hm_usage_error("--tokenizer and --bytes cannot be combined");
    if (o->onnx_external_set && !o->onnx)
        hm_usage_error("--onnx-external-threshold needs --onnx");
    int by_suffix = hm_archive_format_from_path(o->out);
    static const char *const odd[] = {".gz", ".xz", ".zst", ".bz2", ".lz4", ".7z", ".rar"};
    for (size_t i = 0; by_suffix < 0 && format == -3 && i < sizeof odd / sizeof *odd; i++) {
        size_t n = strlen(o->out), k = strlen(odd[i]);
        if (n > k && strcmp(o->out + n - k, odd[i]) == 0)
            hm_usage_error("'%s' has no bundle suffix hm-pack knows (.tar .tar.gz .tgz .tar.xz "
                           ".txz .tar.zst .tzst .zip); give --format", o->out);
    }
    if (format != -3 && by_suffix >= 0 && format != by_suffix)
        hm_usage_error("--format %s contradicts the suffix of '%s'", kind_name(format), o->out);
    o->kind = format != -3 ? format : by_suffix >= 0 ? by_suffix : HM_BUNDLE_DIR;
    if (strcmp(o->out, "-") == 0 && o->kind == HM_BUNDLE_DIR)
        hm_usage_error("-o - needs --format with an archive format");
}

int main(int argc, char **argv)
{
    struct opts o = {.common = {.progress = -1}, .dtype = -1,
                     .onnx_external_above = HM_ONNX_EXTERNAL_ABOVE};
    hm_cli_init("hm-pack", usage, argv);
    parse(argc, argv, &o);
    const int to_stdout = strcmp(o.out, "-") == 0;
    if (!to_stdout) {
        if (hm_is_dir(o.in) && !hm_same_file(o.out, o.in) && hm_path_inside(o.out, o.in))
            hm_die("output '%s' is inside the input folder '%s' (a file there that its "
                   "manifest does not list breaks it): refusing", o.out, o.in);
        if (hm_output_clobbers(o.out, o.in) || (hm_is_dir(o.out) && hm_path_inside(o.in, o.out)))
            hm_die("output '%s' would overwrite the input '%s': refusing", o.out, o.in);
        if (o.tokenizer && (hm_output_clobbers(o.out, o.tokenizer) ||
                            (hm_is_dir(o.out) && hm_path_inside(o.tokenizer, o.out))))
            hm_die("output '%s' would overwrite the tokenizer '%s': refusing", o.out,
                   o.tokenizer);
        if (!o.dry_run)
            hm_cli_hold_output(o.out);
        if (!o.force && !o.dry_run && (hm_is_file(o.out) || hm_is_dir(o.out)))
            hm_die("output '%s' exists (use -f/--force to replace it)", o.out);
    }
    /* zip stores local DOS times: the same bytes in every time zone */
    setenv("TZ", "UTC", 1);
    tzset();
    int64_t mtime = source_date_epoch();

    struct hm_error err;
    hm_error_clear(&err);
    struct hm_ckpt *ck;
    if (hm_ckpt_open(o.in, &ck, &err) != HM_OK)
        hm_die_err("cannot read", o.in, &err);
    struct tok t = {0};
    find_tokenizer(&o, ck, &t);
    check_tokenizer(&o, ck, &t);
    struct hm_model *m = NULL;
    struct hm_onnx *onnx = o.onnx ? export_onnx(&o, ck, &m) : NULL;
    size_t onnx_len = 0;
    const void *graph = onnx ? hm_onnx_graph(onnx, &onnx_len) : NULL;
    const int onnx_ext = onnx && hm_onnx_data_location(onnx);

    /* the entry records what shapes the bundle, not where it went */
    const char *args[16];
    int na = 0;
    args[na++] = "hm-pack";
    args[na++] = o.in;
    if (o.dtype_name) {
        args[na++] = "--dtype";
        args[na++] = o.dtype_name;
    }
    if (o.bytes)
        args[na++] = "--bytes";
    if (o.tokenizer) {
        args[na++] = "--tokenizer";
        args[na++] = o.tokenizer;
    }
    if (o.onnx)
        args[na++] = "--onnx";
    char threshold[24];
    if (o.onnx_external_set) {
        snprintf(threshold, sizeof threshold, "%llu", (unsigned long long)o.onnx_external_above);
        args[na++] = "--onnx-external-threshold";
        args[na++] = threshold;
    }
    if (o.shard_size_arg) {
        args[na++] = "--shard-size";
        args[na++] = o.shard_size_arg;
    }
    args[na++] = "--format";
    args[na++] = kind_name(o.kind);
    struct hm_prov_input ins[2] = {{o.in, input_hash(o.in, ck)},
                                   {t.source, hm_xxh3(t.data, t.len)}};
    char *prov = NULL;
    if (hm_bundle_provenance(hm_cli_prev_provenance(ck, o.in), args, na, ins, 2, &prov,
                             &err) != HM_OK)
        hm_die_err("cannot read the provenance of", o.in, &err);

    struct hm_bundle_pack_opts po = {
        .kind = o.kind, .dtype = o.dtype, .tokenizer = t.data, .tokenizer_len = t.len,
        .tokenizer_name = t.name, .tokenizer_desc = t.desc, .bos_id = t.bos, .eos_id = t.eos,
        .onnx = graph, .onnx_len = onnx_len, .onnx_data_write = onnx_ext ? write_onnx_data : NULL,
        .onnx_data_ctx = onnx, .onnx_data_len = onnx_ext ? hm_onnx_data_size(onnx) : 0,
        .provenance = prov, .shard_size = o.shard_size, .mtime = mtime, .force = o.force,
        .dry_run = o.dry_run};
    struct hm_bundle_pack_result res;
    if (hm_bundle_pack(ck, o.out, &po, &res, &err) != HM_OK)
        hm_die("cannot pack '%s' into '%s': %s", o.in, o.out, err.msg);
    if (res.dropped_other)
        hm_warning("'%s': %lld tensors are not part of a %s model and were not packed "
                   "(first '%s')", o.in, (long long)res.dropped_other,
                   hm_arch_name(hm_ckpt_config(ck)), res.first_other);
    if (o.common.json && !to_stdout) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddNumberToObject(j, "version", 1);
        cJSON_AddStringToObject(j, "output", o.out);
        cJSON_AddStringToObject(j, "format", kind_name(o.kind));
        cJSON_AddNumberToObject(j, "files", (double)res.files);
        cJSON_AddNumberToObject(j, "tensors", (double)res.tensors);
        cJSON_AddNumberToObject(j, "shards", (double)res.shards);
        cJSON_AddNumberToObject(j, "bytes", (double)res.total_bytes);
        cJSON_AddNumberToObject(j, "weights_bytes", (double)res.weights_bytes);
        cJSON_AddBoolToObject(j, "dry_run", o.dry_run);
        hm_json_put(j);
    }
    else {
        char shards[48] = "";
        if (res.shards)
            snprintf(shards, sizeof shards, " in %lld shards", (long long)res.shards);
        hm_info(&o.common, "%s '%s': %s bundle, %lld files (%llu bytes), %lld tensors%s; %lld "
                "legacy buffers not packed", o.dry_run ? "would write" : "wrote", o.out,
                kind_name(o.kind), (long long)res.files, (unsigned long long)res.total_bytes,
                (long long)res.tensors, shards, (long long)res.dropped_buffers);
    }
    free(prov);
    hm_onnx_free(onnx);
    hm_model_free(m);
    free(t.data);
    free(t.source_owned);
    hm_ckpt_close(ck);
    return hm_cli_finish(HM_EXIT_OK);
}
