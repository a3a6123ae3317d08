/* hm-inspect — tell what a checkpoint is.
 *
 * Reads a safetensors file, a HuggingFace folder, a sharded index, a bundle
 * (folder or archive, contract §5) or stdin through the shared checkpoint loader and reports the architecture, config,
 * parameter counts per component, dtypes, sizes, a memory estimate, the
 * provenance chain and warnings. --json emits one versioned object (see
 * docs/inspect-json.md). */
#include <cjson/cJSON.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bundle.h"
#include "checkpoint.h"
#include "cli.h"
#include "fileio.h"
#include "hash.h"
#include "params.h"
#include "plan.h"
#include "plan_report.h"
#include "tokenizer.h"

#define INSPECT_JSON_VERSION 1

static const char usage[] =
    "usage: hm-inspect [OPTIONS] PATH\n"
    "\n"
    "Describe a checkpoint: PATH is a safetensors file, a HuggingFace model folder\n"
    "(config.json + model.safetensors or a sharded index), a\n"
    "model.safetensors.index.json, a bundle from hm-pack (a folder or an archive:\n"
    "the model plus the bundle's files), or - for a safetensors file or a bundle\n"
    "archive on stdin.\n"
    "\n"
    "Options:\n"
    "      --tensors          list every tensor (name, dtype, shape, bytes, group)\n"
    "      --hash             add xxh3 of every tensor's bytes and of every file\n"
    "      --tokenizer FILE   check the vocabulary rows against this tokenizer.json\n"
    "                         (default: a bundle's tokenizer, else tokenizer.json\n"
    "                         beside the model, if present)\n"
    "      --json             one JSON object on stdout (version 1, docs/inspect-json.md)\n"
    "  -q, --quiet            no warnings on stderr\n"
    "  -v, --verbose          more detail\n"
    "  -h, --help             this help\n"
    "      --version          print the version\n"
    "\n"
    "Exit status: 0 success, 1 the checkpoint cannot be read, 2 bad usage.\n";

enum { OPT_TENSORS = HM_OPT_FIRST_TOOL, OPT_HASH, OPT_TOKENIZER };

struct report {
    int64_t n_params, n_buffers, n_tensors;
    int64_t by_group[HM_PG_COUNT];
    int64_t dt_tensors[HM_DTYPE_COUNT], dt_elems[HM_DTYPE_COUNT];
    size_t dt_bytes[HM_DTYPE_COUNT];
    size_t disk_bytes;
    cJSON *warnings; /* array of strings */
};

static void warn(struct report *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void warn(struct report *r, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    cJSON_AddItemToArray(r->warnings, cJSON_CreateString(buf));
}

static void shape_text(int ndim, const int64_t *shape, char *buf, size_t size)
{
    size_t k = (size_t)snprintf(buf, size, "[");
    for (int d = 0; d < ndim && k < size; d++)
        k += (size_t)snprintf(buf + k, size - k, "%s%lld", d ? ", " : "", (long long)shape[d]);
    if (k < size)
        snprintf(buf + k, size - k, "]");
}

/* Compare the file against the architecture's tensor table. */
static void check_against_specs(const struct hm_ckpt *ck, struct report *r)
{
    const struct hm_config *cfg = hm_ckpt_config(ck);
    struct hm_param_spec *specs = NULL;
    int64_t ns = hm_param_specs(cfg, &specs);
    if (ns < 0)
        return;
    int64_t missing = 0;
    for (int64_t i = 0; i < ns; i++) {
        int64_t j = hm_ckpt_find(ck, specs[i].name);
        if (j < 0) {
            if (missing++ < 5)
                warn(r, "tensor '%s' is missing", specs[i].name);
            continue;
        }
        const struct hm_ckpt_tensor *t = hm_ckpt_tensor_at(ck, j);
        int same = t->ndim == specs[i].ndim;
        for (int d = 0; same && d < t->ndim; d++)
            same = t->shape[d] == specs[i].shape[d];
        if (!same) {
            char got[96], want[96];
            shape_text(t->ndim, t->shape, got, sizeof got);
            shape_text(specs[i].ndim, specs[i].shape, want, sizeof want);
            warn(r, "tensor '%s' has shape %s, the config implies %s", t->name, got, want);
        }
        if (!hm_dtype_is_float(t->dtype))
            warn(r, "tensor '%s' has non-float dtype %s", t->name, hm_dtype_name(t->dtype));
    }
    if (missing > 5)
        warn(r, "%lld more tensors are missing", (long long)(missing - 5));
    /* tensors the architecture does not have */
    int64_t other = 0;
    for (int64_t j = 0; j < hm_ckpt_n_tensors(ck); j++) {
        const struct hm_ckpt_tensor *t = hm_ckpt_tensor_at(ck, j);
        if (hm_param_group_of(t->name) == HM_PG_BUFFER)
            continue;
        int known = 0;
        for (int64_t i = 0; i < ns && !known; i++)
            known = strcmp(specs[i].name, t->name) == 0;
        if (!known && other++ < 5)
            warn(r, "tensor '%s' is not part of a %s model", t->name, hm_arch_name(cfg));
    }
    if (other > 5)
        warn(r, "%lld more tensors are not part of the model", (long long)(other - 5));
    free(specs);
}

static void check_tokenizer(const struct hm_ckpt *ck, const char *tok_path, int explicit_path,
                            struct report *r)
{
    size_t blen;
    const void *bytes = explicit_path ? NULL : hm_ckpt_bundle_tokenizer(ck, &blen);
    if (!tok_path && !bytes)
        return;
    struct hm_error err;
    hm_error_clear(&err);
    int kind = bytes || explicit_path ? 1 : hm_folder_file(tok_path, &err);
    if (kind < 0)
        warn(r, "cannot read tokenizer: %s", err.msg);
    if (kind <= 0)
        return;
    struct hm_tokenizer *tok = NULL;
    if (bytes)
        tok_path = "the bundle's tokenizer";
    if (bytes ? hm_tokenizer_load_memory(bytes, blen, &tok, &err) != HM_OK
              : hm_tokenizer_load(tok_path, &tok, &err) != HM_OK) {
        if (explicit_path)
            hm_die_err("cannot read", tok_path, &err);
        warn(r, "cannot read tokenizer '%s': %s", tok_path, err.msg);
        return;
    }
    int64_t tv = hm_tokenizer_vocab_size(tok), rows = hm_ckpt_config(ck)->vocab_size;
    if (tv > rows)
        warn(r, "tokenizer '%s' has %lld tokens but the model has only %lld vocabulary rows",
             tok_path, (long long)tv, (long long)rows);
    else if (tv < rows)
        warn(r, "vocabulary has %lld rows for %lld tokenizer tokens (%lld padding rows)",
             (long long)rows, (long long)tv, (long long)(rows - tv));
    hm_tokenizer_free(tok);
}

static void tally(const struct hm_ckpt *ck, struct report *r)
{
    r->n_tensors = hm_ckpt_n_tensors(ck);
    for (int64_t j = 0; j < r->n_tensors; j++) {
        const struct hm_ckpt_tensor *t = hm_ckpt_tensor_at(ck, j);
        enum hm_param_group g = hm_param_group_of(t->name);
        r->dt_tensors[t->dtype]++;
        r->dt_elems[t->dtype] += t->numel;
        r->dt_bytes[t->dtype] += t->nbytes;
        if (g == HM_PG_BUFFER) {
            r->n_buffers++;
            continue;
        }
        r->by_group[g] += t->numel;
        r->n_params += t->numel;
    }
    for (int i = 0; i < hm_ckpt_n_files(ck); i++)
        r->disk_bytes += hm_ckpt_file_size(ck, i);
    if (r->n_buffers)
        warn(r, "ignored %lld legacy buffers (attention.bias, attention.masked_bias, "
                "rotary_emb.inv_freq): not parameters", (long long)r->n_buffers);
}

static void human_size(double b, char *buf, size_t size)
{
    const char *u[] = {"B", "KB", "MB", "GB", "TB"};
    int k = 0;
    while (b >= 1000 && k < 4) {
        b /= 1000;
        k++;
    }
    snprintf(buf, size, k ? "%.1f %s" : "%.0f %s", b, u[k]);
}

static void group_commas(int64_t v, char *buf, size_t size)
{
    char raw[32];
    snprintf(raw, sizeof raw, "%lld", (long long)v);
    size_t n = strlen(raw), k = 0;
    for (size_t i = 0; i < n && k + 1 < size; i++) {
        if (i && (n - i) % 3 == 0 && raw[0] != '-')
            buf[k++] = ',';
        buf[k++] = raw[i];
    }
    buf[k] = '\0';
}

static cJSON *config_json(const struct hm_config *cfg)
{
    char *txt = hm_config_to_json(cfg);
    cJSON *c = txt ? cJSON_Parse(txt) : NULL;
    free(txt);
    if (!c)
        c = cJSON_CreateObject();
    cJSON_AddNumberToObject(c, "head_dim", (double)cfg->head_dim);
    cJSON_AddNumberToObject(c, "rotary_dims", (double)cfg->rotary_dims);
    return c;
}

static char *tensor_hash(const struct hm_ckpt *ck, int64_t j)
{
    static char hex[17];
    const struct hm_ckpt_tensor *t = hm_ckpt_tensor_at(ck, j);
    hm_xxh3_hex(hm_xxh3(hm_ckpt_data_view(ck, j), t->nbytes), hex);
    return hex;
}

static int file_hash(const struct hm_ckpt *ck, int i, char hex[17])
{
    const char *p = hm_ckpt_file_path(ck, i);
    uint64_t h;
    struct hm_error err;
    if (strcmp(p, "-") == 0 || !hm_is_file(p))
        return -1; /* stdin, an archive's member */
    if (hm_xxh3_file(p, &h, &err) != HM_OK)
        hm_die_err("cannot read", p, &err);
    hm_xxh3_hex(h, hex);
    return 0;
}

/* The bundle's files, or JSON null when ck is not a bundle. */
static cJSON *bundle_json(const struct hm_ckpt *ck, int hash)
{
    struct hm_bundle *b = hm_ckpt_bundle(ck);
    if (!b)
        return cJSON_CreateNull();
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "format", hm_bundle_kind_name(b));
    cJSON *files = cJSON_AddArrayToObject(o, "files");
    for (int64_t i = 0; i < hm_bundle_n_files(b); i++) {
        cJSON *f = cJSON_CreateObject();
        cJSON_AddStringToObject(f, "path", hm_bundle_file_name(b, i));
        cJSON_AddNumberToObject(f, "bytes", (double)hm_bundle_file_size(b, i));
        uint64_t h;
        char hex[17];
        struct hm_error err;
        if (hash && hm_bundle_file_xxh3(b, i, &h, &err) != HM_OK)
            hm_die_err("cannot read", hm_ckpt_path(ck), &err);
        hm_xxh3_hex(h, hex);
        if (hash)
            cJSON_AddStringToObject(f, "xxh3", hex);
        cJSON_AddItemToArray(files, f);
    }
    return o;
}

static void bundle_human(const struct hm_ckpt *ck, int hash)
{
    struct hm_bundle *b = hm_ckpt_bundle(ck);
    if (!b)
        return;
    printf("bundle:      %s, %lld files (hm-verify bundle checks their hashes)\n",
           hm_bundle_kind_name(b), (long long)hm_bundle_n_files(b));
    for (int64_t i = 0; i < hm_bundle_n_files(b); i++) {
        char n[32], hex[17] = "";
        uint64_t h;
        struct hm_error err;
        if (hash && hm_bundle_file_xxh3(b, i, &h, &err) != HM_OK)
            hm_die_err("cannot read", hm_ckpt_path(ck), &err);
        if (hash)
            hm_xxh3_hex(h, hex);
        group_commas((int64_t)hm_bundle_file_size(b, i), n, sizeof n);
        printf("  %-32s %15s bytes%s%s\n", hm_bundle_file_name(b, i), n, hash ? "  xxh3 " : "",
               hex);
    }
}

/* The run a user would start on this checkpoint, hm-finetune at its
 * defaults (batch 8 x seq 256 or the position limit, AdamW, one process, the
 * default backend; a HedgeMamba student with its embeddings frozen, as stage
 * 2 does), planned from the header as hm-finetune --dry-run plans it: into
 * json's "training" member, or as text. 0 when the checkpoint has no plan. */
static int training_plan(const struct hm_ckpt *ck, cJSON *json)
{
    const struct hm_config *c = hm_ckpt_config(ck);
    const int64_t T = c->max_position_embeddings > 0 && c->max_position_embeddings < 256
                          ? c->max_position_embeddings : 256;
    const struct hm_plan_in in = {.ck = ck, .B = 8, .T = T, .accum = 1,
                                  .freeze_embeddings = c->mixer == HM_MIXER_HEDGEMAMBA,
                                  .adamw = 1, .procs = 1, .be = hm_cli_backend(NULL, NULL)};
    struct hm_mem_plan p;
    struct hm_error err;
    hm_error_clear(&err);
    if (hm_plan_train(&in, &p, &err) != HM_OK)
        return 0;
    const struct hm_plan_env env = {.local_procs = 1, .indent = "  "};
    if (json) {
        cJSON *t = cJSON_AddObjectToObject(json, "training");
        cJSON_AddNumberToObject(t, "batch", 8);
        cJSON_AddNumberToObject(t, "seq_len", (double)T);
        cJSON_AddNumberToObject(t, "trainable", (double)p.trainable);
        hm_plan_report(&in, &env, t);
    } else {
        char n[32];
        group_commas(p.trainable, n, sizeof n);
        printf("training:    hm-finetune at its defaults (batch 8 x seq %lld, AdamW, one process"
               "%s), %s trainable:\n", (long long)T,
               in.freeze_embeddings ? ", embeddings frozen" : "", n);
        hm_plan_report(&in, &env, NULL);
    }
    return 1;
}

static void print_json(const struct hm_ckpt *ck, const struct report *r, int list, int hash)
{
    const struct hm_config *cfg = hm_ckpt_config(ck);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "version", INSPECT_JSON_VERSION);
    cJSON_AddStringToObject(o, "path", hm_ckpt_path(ck));
    cJSON_AddStringToObject(o, "arch", hm_arch_name(cfg));
    cJSON_AddItemToObject(o, "config", config_json(cfg));
    cJSON_AddStringToObject(o, "config_source", hm_ckpt_config_source(ck));
    cJSON_AddNumberToObject(o, "n_params", (double)r->n_params);
    cJSON_AddNumberToObject(o, "n_tensors", (double)r->n_tensors);
    cJSON_AddNumberToObject(o, "n_buffers", (double)r->n_buffers);
    cJSON *pg = cJSON_AddObjectToObject(o, "params_by_component");
    for (int g = 0; g < HM_PG_COUNT; g++)
        if (g != HM_PG_BUFFER && (r->by_group[g] || g <= HM_PG_NORM))
            cJSON_AddNumberToObject(pg, hm_param_group_name((enum hm_param_group)g),
                                    (double)r->by_group[g]);
    cJSON *dts = cJSON_AddObjectToObject(o, "dtypes");
    for (int d = 0; d < HM_DTYPE_COUNT; d++) {
        if (!r->dt_tensors[d])
            continue;
        cJSON *x = cJSON_AddObjectToObject(dts, hm_dtype_name((enum hm_dtype)d));
        cJSON_AddNumberToObject(x, "tensors", (double)r->dt_tensors[d]);
        cJSON_AddNumberToObject(x, "elements", (double)r->dt_elems[d]);
        cJSON_AddNumberToObject(x, "bytes", (double)r->dt_bytes[d]);
    }
    cJSON *files = cJSON_AddArrayToObject(o, "files");
    for (int i = 0; i < hm_ckpt_n_files(ck); i++) {
        cJSON *f = cJSON_CreateObject();
        char hex[17];
        cJSON_AddStringToObject(f, "path", hm_ckpt_file_path(ck, i));
        cJSON_AddNumberToObject(f, "bytes", (double)hm_ckpt_file_size(ck, i));
        if (hash && file_hash(ck, i, hex) == 0)
            cJSON_AddStringToObject(f, "xxh3", hex);
        cJSON_AddItemToArray(files, f);
    }
    cJSON_AddNumberToObject(o, "bytes_on_disk", (double)r->disk_bytes);
    cJSON_AddItemToObject(o, "bundle", bundle_json(ck, hash));
    cJSON *mem = cJSON_AddObjectToObject(o, "memory");
    cJSON_AddNumberToObject(mem, "fp32_weights_bytes", (double)r->n_params * 4);
    cJSON_AddNumberToObject(mem, "fp32_train_bytes", (double)r->n_params * 16);
    training_plan(ck, o);
    const char *prov = hm_ckpt_provenance(ck);
    cJSON *pj = prov ? cJSON_Parse(prov) : NULL;
    cJSON_AddItemToObject(o, "provenance", pj ? pj : cJSON_CreateArray());
    if (hm_ckpt_provenance_foreign(ck)) /* another tool's text, verbatim */
        cJSON_AddStringToObject(o, "provenance_foreign",
                                hm_ckpt_metadata_get(ck, "hm.provenance"));
    cJSON_AddItemToObject(o, "warnings", cJSON_Duplicate(r->warnings, 1));
    if (list) {
        cJSON *ts = cJSON_AddArrayToObject(o, "tensors");
        for (int64_t j = 0; j < r->n_tensors; j++) {
            const struct hm_ckpt_tensor *t = hm_ckpt_tensor_at(ck, j);
            cJSON *x = cJSON_CreateObject();
            cJSON_AddStringToObject(x, "name", t->name);
            cJSON_AddStringToObject(x, "dtype", hm_dtype_name(t->dtype));
            cJSON *sh = cJSON_AddArrayToObject(x, "shape");
            for (int d = 0; d < t->ndim; d++)
                cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)t->shape[d]));
            cJSON_AddNumberToObject(x, "bytes", (double)t->nbytes);
            cJSON_AddStringToObject(x, "group", hm_param_group_name(hm_param_group_of(t->name)));
            if (hash)
                cJSON_AddStringToObject(x, "xxh3", tensor_hash(ck, j));
            cJSON_AddItemToArray(ts, x);
        }
    }
    char *s = cJSON_Print(o);
    if (s)
        puts(s);
    free(s);
    cJSON_Delete(o);
}

static void print_provenance_human(const struct hm_ckpt *ck)
{
    const char *prov = hm_ckpt_provenance(ck);
    if (hm_ckpt_provenance_foreign(ck)) {
        printf("provenance:  foreign (not written by hm: %s), kept verbatim:\n  %s\n",
               hm_ckpt_provenance_foreign(ck), hm_ckpt_metadata_get(ck, "hm.provenance"));
        return;
    }
    cJSON *a = prov ? cJSON_Parse(prov) : NULL;
    if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) == 0) {
        printf("provenance:  none (not written by hm)\n");
        cJSON_Delete(a);
        return;
    }
    printf("provenance:\n");
    int i = 1;
    const cJSON *e;
    cJSON_ArrayForEach(e, a) {
        const cJSON *tool = cJSON_GetObjectItem(e, "tool"), *end = cJSON_GetObjectItem(e, "end");
        const cJSON *tok = cJSON_GetObjectItem(e, "tokens"), *loss = cJSON_GetObjectItem(e, "final_loss");
        printf("  %d. %s", i++, cJSON_IsString(tool) ? tool->valuestring : "?");
        if (cJSON_IsString(end))
            printf("  %s", end->valuestring);
        if (cJSON_IsNumber(tok))
            printf("  tokens %.0f", tok->valuedouble);
        if (cJSON_IsNumber(loss))
            printf("  final loss %.4f", loss->valuedouble);
        printf("\n");
    }
    cJSON_Delete(a);
}

static void print_human(const struct hm_ckpt *ck, const struct report *r, int list, int hash)
{
    const struct hm_config *c = hm_ckpt_config(ck);
    char a[64], cbuf[32];
    printf("path:        %s\n", hm_ckpt_path(ck));
    printf("arch:        %s (config from %s)\n", hm_arch_name(c), hm_ckpt_config_source(ck));
    human_size((double)r->disk_bytes, a, sizeof a);
    printf("files:       %d, %s on disk\n", hm_ckpt_n_files(ck), a);
    for (int i = 0; hash && i < hm_ckpt_n_files(ck); i++) {
        char hex[17];
        if (file_hash(ck, i, hex) == 0)
            printf("  %s  xxh3 %s\n", hm_ckpt_file_path(ck, i), hex);
    }
    bundle_human(ck, hash);
    printf("config:      layers %lld, hidden %lld, heads %lld, head dim %lld, mlp %lld, "
           "vocab %lld\n", (long long)c->num_hidden_layers, (long long)c->hidden_size,
           (long long)c->num_attention_heads, (long long)c->head_dim,
           (long long)c->intermediate_size, (long long)c->vocab_size);
    if (c->family == HM_FAMILY_LLAMA) {
        printf("             family llama: kv heads %lld (GQA %lld:1), rope theta %g%s, "
               "rmsnorm eps %g, swiglu, %s, %s%smax positions %lld\n",
               (long long)c->num_key_value_heads,
               (long long)(c->num_attention_heads / c->num_key_value_heads), c->rotary_emb_base,
               c->rope_scaling.type == HM_ROPE_LLAMA3 ? " (llama3 scaling)" : "",
               c->layer_norm_eps, c->tie_word_embeddings ? "tied embeddings" : "untied",
               c->attention_bias ? "attention bias, " : "", c->mlp_bias ? "mlp bias, " : "",
               (long long)c->max_position_embeddings);
    } else {
        printf("             family neox: rotary dims %lld (pct %g, base %g), %s residual, %s, "
               "ln eps %g, max positions %lld\n", (long long)c->rotary_dims, c->rotary_pct,
               c->rotary_emb_base, c->use_parallel_residual ? "parallel" : "sequential",
               c->hidden_act == HM_ACT_GELU ? "gelu (erf)" : "gelu (tanh)", c->layer_norm_eps,
               (long long)c->max_position_embeddings);
    }
    if (c->mixer != HM_MIXER_SOFTMAX)
        printf("             feature dim %lld\n", (long long)c->feature_dim);
    if (c->mixer == HM_MIXER_HEDGEMAMBA) {
        hm_components_str(c->components, cbuf, sizeof cbuf);
        printf("             conv width %lld, components %s%s\n", (long long)c->conv_width,
               cbuf[0] ? cbuf : "none",
               c->decay_init == HM_DECAY_TEACHER ? ", A from teacher statistics" : "");
    }
    if (hm_config_kept_count(c) > 0) {
        char kept[1024];
        hm_config_kept_str(c, kept, sizeof kept);
        printf("             hybrid: softmax attention kept in layer%s %s (%lld of %lld)\n",
               hm_config_kept_count(c) > 1 ? "s" : "", kept, (long long)hm_config_kept_count(c),
               (long long)c->num_hidden_layers);
    }
    group_commas(r->n_params, a, sizeof a);
    printf("parameters:  %s (%lld tensors, %lld buffers ignored)\n", a,
           (long long)(r->n_tensors - r->n_buffers), (long long)r->n_buffers);
    for (int g = 0; g < HM_PG_COUNT; g++) {
        if (g == HM_PG_BUFFER || !r->by_group[g])
            continue;
        group_commas(r->by_group[g], a, sizeof a);
        printf("  %-13s %15s  %5.1f%%\n", hm_param_group_name((enum hm_param_group)g), a,
               r->n_params ? 100.0 * (double)r->by_group[g] / (double)r->n_params : 0.0);
    }
    printf("dtypes:     ");
    for (int d = 0; d < HM_DTYPE_COUNT; d++) {
        if (!r->dt_tensors[d])
            continue;
        human_size((double)r->dt_bytes[d], a, sizeof a);
        printf(" %s %lld tensors (%s)", hm_dtype_name((enum hm_dtype)d),
               (long long)r->dt_tensors[d], a);
    }
    printf("\n");
    human_size((double)r->n_params * 4, a, sizeof a);
    printf("memory:      fp32 weights %s\n", a);
    training_plan(ck, NULL);
    print_provenance_human(ck);
    int nw = cJSON_GetArraySize(r->warnings);
    if (nw) {
        printf("warnings:\n");
        const cJSON *w;
        cJSON_ArrayForEach(w, r->warnings) printf("  %s\n", w->valuestring);
    }
    if (list) {
        printf("tensors:\n");
        for (int64_t j = 0; j < r->n_tensors; j++) {
            const struct hm_ckpt_tensor *t = hm_ckpt_tensor_at(ck, j);
            char sh[96];
            shape_text(t->ndim, t->shape, sh, sizeof sh);
            printf("  %-56s %-5s %-20s %12zu  %s%s%s\n", t->name, hm_dtype_name(t->dtype), sh,
                   t->nbytes, hm_param_group_name(hm_param_group_of(t->name)),
                   hash ? "  " : "", hash ? tensor_hash(ck, j) : "");
        }
    }
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        HM_CLI_COMMON_LONGOPTS,
        {"tensors", no_argument, NULL, OPT_TENSORS},
        {"hash", no_argument, NULL, OPT_HASH},
        {"tokenizer", required_argument, NULL, OPT_TOKENIZER},
        {NULL, 0, NULL, 0},
    };
    struct hm_cli_common common = {.progress = -1};
    int list = 0, hash = 0, c;
    const char *tok_path = NULL;
    hm_cli_init("hm-inspect", usage, argv);
    while ((c = getopt_long(argc, argv, HM_CLI_COMMON_SHORTOPTS, longopts, NULL)) != -1) {
        switch (c) {
        HM_CLI_COMMON_CASES(&common);
        case OPT_TENSORS: list = 1; break;
        case OPT_HASH: hash = 1; break;
        case OPT_TOKENIZER: tok_path = optarg; break;
        }
    }
    if (argc - optind == 0)
        hm_usage_error("missing PATH");
    if (argc - optind > 1)
        hm_usage_error("expected one PATH, got %d", argc - optind);
    const char *path = argv[optind];
    struct hm_ckpt *ck = NULL;
    struct hm_error err;
    hm_error_clear(&err);
    if (hm_ckpt_open(path, &ck, &err) != HM_OK)
        hm_die_err("cannot read", path, &err);

    struct report r;
    memset(&r, 0, sizeof r);
    r.warnings = cJSON_CreateArray();
    tally(ck, &r);
    if (hm_ckpt_config_note(ck))
        warn(&r, "%s", hm_ckpt_config_note(ck));
    if (hm_ckpt_provenance_foreign(ck))
        warn(&r, "hm.provenance is foreign (%s): shown verbatim, not as a chain",
             hm_ckpt_provenance_foreign(ck));
    check_against_specs(ck, &r);
    char *default_tok = NULL;
    if (!tok_path && strcmp(path, "-") != 0 && !hm_ckpt_bundle(ck)) {
        const char *src = hm_ckpt_file_path(ck, 0);
        const char *slash = strrchr(src, '/');
        size_t n = slash ? (size_t)(slash - src + 1) : 0;
        default_tok = malloc(n + 16);
        if (default_tok)
            snprintf(default_tok, n + 16, "%.*stokenizer.json", (int)n, src);
    }
    check_tokenizer(ck, tok_path ? tok_path : default_tok, tok_path != NULL, &r);
    free(default_tok);

    if (common.json) {
        print_json(ck, &r, list, hash);
    } else {
        print_human(ck, &r, list, hash);
    }
    if (!common.quiet && common.json) {
        const cJSON *w;
        cJSON_ArrayForEach(w, r.warnings) hm_warning("%s", w->valuestring);
    }
    cJSON_Delete(r.warnings);
    hm_ckpt_close(ck);
    return hm_cli_finish(HM_EXIT_OK);
}
