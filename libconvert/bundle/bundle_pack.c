/* bundle_pack.c — hm_bundle_pack (bundle.h): a checkpoint into a bundle.
 *
 * The weights are model.safetensors or, when the tensors' bytes exceed
 * the shard size, shards model-00001-of-0000N.safetensors ... with
 * model.safetensors.index.json (st_index.h: HF's split and index). Each
 * weights file is produced twice, streaming, one tensor at a time: a first
 * pass only hashes it (the file's and every tensor's XXH3, and the F16/BF16
 * overflow checks), because MANIFEST.json sorts first and must hold those
 * hashes; the second pass writes it into the output and must hash the same
 * (an input that changes meanwhile is refused). Memory stays at one tensor,
 * whatever the model's size. onnx/model.onnx.data (ONNX external data) is
 * streamed the same way, twice, by its caller's writer. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "bundle.h"
#include "bundle_internal.h"
#include "checkpoint.h"
#include "dtype.h"
#include "hash.h"
#include "model.h"
#include "params.h"
#include "provenance.h"
#include "st_index.h"

struct ptensor {
    const char *name;      /* borrowed from the checkpoint */
    int ndim;
    const int64_t *shape;  /* [ndim] */
    int64_t numel;
    enum hm_dtype src, dst;
    const void *data;      /* stored bytes in src */
    uint64_t xxh3;         /* of the dst bytes (pass 1) */
};

struct pack;

/* One weights file: tensors [first, first + n) of the pack (sorted by name,
 * so the writer keeps their order). */
struct pshard {
    struct pack *p;
    int64_t first, n;
    struct hm_st_writer *w; /* owned */
    char name[HM_ST_SHARD_NAME_MAX];
};

/* Writes a streamed file's bytes to fp (the same bytes at every call). */
typedef enum hm_status (*pfile_write_fn)(void *ctx, FILE *fp, struct hm_error *err);

/* One output file: data [len] in memory, or data NULL and streamed by
 * write(ctx) (a weights file, onnx/model.onnx.data). */
struct pfile {
    const char *name;
    const void *data;
    size_t len;
    uint64_t xxh3;
    pfile_write_fn write;
    void *ctx;
};

/* A FILE that hashes what passes through it and forwards it to a sink. */
struct tee {
    XXH3_state_t *h;
    uint64_t n;
    struct hm_bundle_sink *s; /* NULL: hash only */
    struct hm_error *err;
    int failed;
};

struct pack {
    struct ptensor *t;
    int64_t n;
    int pass;
};

static int cmp_ptensor(const void *a, const void *b)
{
    return strcmp(((const struct ptensor *)a)->name, ((const struct ptensor *)b)->name);
}

static int cmp_pfile(const void *a, const void *b)
{
    return strcmp(((const struct pfile *)a)->name, ((const struct pfile *)b)->name);
}

static int cmp_pfile_card(const void *a, const void *b)
{
    return strcmp(((const struct hm_bundle_card_file *)a)->name,
                  ((const struct hm_bundle_card_file *)b)->name);
}

/* ---- tensors -------------------------------------------------------------------- */

static enum hm_status collect(const struct hm_ckpt *ck, int dtype, struct pack *p,
                              struct hm_bundle_pack_result *res, struct hm_error *err)
{
    const struct hm_config *cfg = hm_ckpt_config(ck);
    struct hm_param_spec *specs = NULL;
    int64_t ns = hm_param_specs(cfg, &specs);
    if (ns < 0)
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    enum hm_status st = HM_OK;
    p->t = calloc((size_t)ns + 1, sizeof *p->t);
    if (!p->t) {
        st = hm_error_set(err, HM_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (int64_t i = 0; i < ns; i++) {
        int64_t j = hm_ckpt_find(ck, specs[i].name);
        if (j < 0) {
            st = hm_error_set(err, HM_ERR_INVALID, "tensor '%s' of the %s model is missing",
                              specs[i].name, hm_arch_name(cfg));
            goto out;
        }
        const struct hm_ckpt_tensor *t = hm_ckpt_tensor_at(ck, j);
        int same = t->ndim == specs[i].ndim;
        for (int d = 0; same && d < t->ndim; d++)
            same = t->shape[d] == specs[i].shape[d];
        if (!same) {
            st = hm_error_set(err, HM_ERR_INVALID, "tensor '%s' does not have the shape its "
                              "config implies", t->name);
            goto out;
        }
        if (!hm_dtype_is_float(t->dtype)) {
            st = hm_error_set(err, HM_ERR_UNSUPPORTED, "tensor '%s' is %s, not a float",
                              t->name, hm_dtype_name(t->dtype));
            goto out;
        }
        enum hm_dtype dst = dtype >= 0 ? (enum hm_dtype)dtype
                            : t->dtype == HM_DTYPE_F64 ? HM_DTYPE_F32 : t->dtype;
        p->t[p->n++] = (struct ptensor){t->name, t->ndim, t->shape, t->numel, t->dtype, dst,
                                        hm_ckpt_data_view(ck, j), 0};
    }
    for (int64_t j = 0; j < hm_ckpt_n_tensors(ck); j++) {
        const char *name = hm_ckpt_tensor_at(ck, j)->name;
        int known = 0;
        for (int64_t i = 0; i < ns && !known; i++)
            known = strcmp(specs[i].name, name) == 0;
        if (known)
            continue;
        if (hm_is_ignored_buffer(name))
            res->dropped_buffers++;
        else if (res->dropped_other++ == 0)
            snprintf(res->first_other, sizeof res->first_other, "%s", name);
    }
    if (p->n > 1)
        qsort(p->t, (size_t)p->n, sizeof *p->t, cmp_ptensor);
out:
    free(specs);
    return st;
}

/* Refuses a finite value that became ±Inf in dst (F16/BF16). */
static enum hm_status check_overflow(const float *f, const uint16_t *h, int64_t n,
                                     enum hm_dtype dst, struct hm_error *err)
{
    const uint16_t inf = dst == HM_DTYPE_F16 ? 0x7c00 : 0x7f80;
    for (int64_t i = 0; i < n; i++)
        if ((h[i] & 0x7fff) == inf && isfinite(f[i]))
            return hm_error_set(err, HM_ERR_NUMERIC,
                                "value %g at index %lld overflows %s (largest finite %s)",
                                (double)f[i], (long long)i, hm_dtype_name(dst),
                                dst == HM_DTYPE_F16 ? "65504" : "3.39e38");
    return HM_OK;
}

static enum hm_status fill(void *ctx, int64_t index, size_t off, void *dst, size_t nbytes,
                           struct hm_error *err)
{
    (void)off; /* added whole (hm_st_writer_add_fill): off is 0 */
    const struct pshard *sh = ctx;
    struct pack *p = sh->p;
    struct ptensor *t = &p->t[sh->first + index];
    enum hm_status st = HM_OK;
    if (t->src == t->dst) {
        memcpy(dst, t->data, nbytes);
    } else if (t->dst == HM_DTYPE_F32) {
        st = hm_to_f32(t->data, t->src, t->numel, dst, err);
    } else {
        float *f = malloc(sizeof(float) * (size_t)(t->numel ? t->numel : 1));
        if (!f)
            return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
        st = hm_to_f32(t->data, t->src, t->numel, f, err);
        if (st == HM_OK)
            st = hm_from_f32(f, t->numel, t->dst, dst, err);
        if (st == HM_OK)
            st = check_overflow(f, dst, t->numel, t->dst, err);
        free(f);
    }
    if (st != HM_OK)
        return st;
    uint64_t h = hm_xxh3(dst, nbytes);
    if (p->pass == 1)
        t->xxh3 = h;
    else if (h != t->xxh3)
        return hm_error_set(err, HM_ERR_IO, "changed while it was being packed");
    return HM_OK;
}

/* ---- the hashing/forwarding stream ---------------------------------------------- */

/* fopencookie(3): a write function returns the bytes taken, 0 on error,
 * never a negative value (glibc takes -1 for a huge count and overruns). */
static ssize_t tee_write(void *cookie, const char *buf, size_t n)
{
    struct tee *t = cookie;
    if (t->failed)
        return 0;
    if (t->s && hm_bundle_sink_write(t->s, buf, n, t->err) != 0) {
        t->failed = 1;
        return 0;
    }
    XXH3_64bits_update(t->h, buf, n);
    t->n += n;
    return (ssize_t)n;
}

/* pfile_write_fn of a weights file: its shard's safetensors writer. */
static enum hm_status write_shard(void *ctx, FILE *fp, struct hm_error *err)
{
    const struct pshard *sh = ctx;
    return hm_st_writer_write_stream(sh->w, fp, err);
}

/* Streams file f's writer through a tee into s (NULL: hash only): *h its
 * XXH3, *n its bytes. */
static enum hm_status stream_file(const struct pfile *f, struct hm_bundle_sink *s, uint64_t *h,
                                  uint64_t *n, struct hm_error *err)
{
    struct hm_error sink_err;
    hm_error_clear(&sink_err);
    struct tee t = {XXH3_createState(), 0, s, &sink_err, 0};
    if (!t.h)
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    XXH3_64bits_reset(t.h);
    FILE *fp = fopencookie(&t, "w", (cookie_io_functions_t){.write = tee_write});
    enum hm_status st = HM_OK;
    if (!fp) {
        st = hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    } else {
        setvbuf(fp, NULL, _IOFBF, 1 << 20);
        st = f->write(f->ctx, fp, err);
        if (fclose(fp) != 0 && st == HM_OK)
            st = hm_error_set(err, HM_ERR_IO, "write failed");
    }
    if (t.failed) { /* the sink's own reason (e.g. "No space left on device") */
        *err = sink_err;
        st = err->status;
    }
    if (st != HM_OK)
        hm_error_prefix(err, "%s: ", f->name);
    *h = XXH3_64bits_digest(t.h);
    *n = t.n;
    XXH3_freeState(t.h);
    return st;
}

/* ---- documents ------------------------------------------------------------------ */

static const char *torch_name(enum hm_dtype d)
{
    return d == HM_DTYPE_F16 ? "float16" : d == HM_DTYPE_BF16 ? "bfloat16" : "float32";
}

/* "F16 (50 tensors), F32 (2 tensors)" into buf; *major: the dtype of most elements. */
static void dtype_summary(const struct pack *p, char *buf, size_t size, enum hm_dtype *major)
{
    int64_t cnt[HM_DTYPE_COUNT] = {0}, el[HM_DTYPE_COUNT] = {0};
    for (int64_t i = 0; i < p->n; i++) {
        cnt[p->t[i].dst]++;
        el[p->t[i].dst] += p->t[i].numel;
    }
    size_t k = 0;
    buf[0] = '\0';
    *major = HM_DTYPE_F32;
    for (int d = 0; d < HM_DTYPE_COUNT; d++) {
        if (!cnt[d])
            continue;
        if (el[d] > el[*major] || !cnt[*major])
            *major = (enum hm_dtype)d;
        k += (size_t)snprintf(buf + k, k < size ? size - k : 0, "%s%s (%lld tensors)",
                              k ? ", " : "", hm_dtype_name((enum hm_dtype)d), (long long)cnt[d]);
    }
}

static cJSON *raw_u64(uint64_t v)
{
    char b[32];
    snprintf(b, sizeof b, "%llu", (unsigned long long)v);
    return cJSON_CreateRaw(b);
}

static char *manifest_json(const struct pack *p, const struct pfile *f, int nf,
                           const char *provenance)
{
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "format", HM_BUNDLE_FORMAT_NAME);
    cJSON_AddNumberToObject(m, "version", HM_BUNDLE_VERSION);
    cJSON *files = cJSON_AddObjectToObject(m, "files");
    char hex[17];
    for (int i = 0; i < nf; i++) {
        if (strcmp(f[i].name, HM_BUNDLE_MANIFEST) == 0)
            continue;
        cJSON *e = cJSON_CreateObject();
        cJSON_AddItemToObject(e, "bytes", raw_u64(f[i].len));
        hm_xxh3_hex(f[i].xxh3, hex);
        cJSON_AddStringToObject(e, "xxh3", hex);
        cJSON_AddItemToObject(files, f[i].name, e);
    }
    cJSON *ts = cJSON_AddObjectToObject(m, "tensors");
    for (int64_t i = 0; i < p->n; i++) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "dtype", hm_dtype_name(p->t[i].dst));
        cJSON *sh = cJSON_AddArrayToObject(e, "shape");
        for (int d = 0; d < p->t[i].ndim; d++)
            cJSON_AddItemToArray(sh, raw_u64((uint64_t)p->t[i].shape[d]));
        hm_xxh3_hex(p->t[i].xxh3, hex);
        cJSON_AddStringToObject(e, "xxh3", hex);
        cJSON_AddItemToObject(ts, p->t[i].name, e);
    }
    cJSON *prov;
    struct hm_error err;
    if (hm_provenance_parse(provenance, &prov, &err) != HM_OK)
        prov = cJSON_CreateArray(); /* hm_bundle_pack refused it before */
    cJSON_AddItemToObject(m, "provenance", prov);
    char *s = cJSON_Print(m);
    cJSON_Delete(m);
    return s;
}

/* ---- the whole ------------------------------------------------------------------ */

static enum hm_status write_all(const struct pfile *f, int nf, const char *out,
                                const struct hm_bundle_pack_opts *o, struct hm_error *err)
{
    struct hm_bundle_sink s;
    enum hm_status st = hm_bundle_sink_open(&s, out, o->kind, o->mtime, o->force, err);
    for (int i = 0; st == HM_OK && i < nf; i++) {
        st = hm_bundle_sink_begin(&s, f[i].name, f[i].len, err);
        if (st == HM_OK && f[i].data)
            st = hm_bundle_sink_write(&s, f[i].data, f[i].len, err) == 0 ? HM_OK : err->status;
        uint64_t h, n;
        if (st == HM_OK && !f[i].data && (st = stream_file(&f[i], &s, &h, &n, err)) == HM_OK &&
            (h != f[i].xxh3 || n != f[i].len))
            st = hm_error_set(err, HM_ERR_IO, "%s changed while it was being packed", f[i].name);
        if (st == HM_OK)
            st = hm_bundle_sink_end(&s, err);
    }
    if (st == HM_OK)
        st = hm_bundle_sink_commit(&s, out, err);
    if (st != HM_OK)
        hm_bundle_sink_abort(&s);
    return st;
}

/* The weights files: one model.safetensors, or past the shard size the
 * shards of HF's split (st_index.h) and the index text (*index, owned);
 * each with a writer holding its tensors (fill) and the metadata. */
static enum hm_status plan_weights(struct pack *p, uint64_t shard_size, const char *cfg_meta,
                                   const char *provenance, struct pshard **out, int *n_out,
                                   char **index, struct hm_error *err)
{
    uint64_t *bytes = calloc((size_t)p->n + 1, sizeof *bytes), total = 0;
    int *shard_of = calloc((size_t)p->n + 1, sizeof *shard_of);
    const char **names = calloc((size_t)p->n + 1, sizeof *names);
    enum hm_status st = HM_OK;
    int n = 1;
    if (!bytes || !shard_of || !names) {
        st = hm_error_set(err, HM_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (int64_t i = 0; i < p->n; i++) {
        bytes[i] = (uint64_t)p->t[i].numel * hm_dtype_size(p->t[i].dst);
        names[i] = p->t[i].name;
        total += bytes[i];
    }
    if (total > shard_size && (n = hm_st_shard_plan(bytes, p->n, shard_size, shard_of)) > 1 &&
        !(*index = hm_st_index_json(names, shard_of, p->n, n, total))) {
        st = hm_error_set(err, HM_ERR_NOMEM, "out of memory");
        goto out;
    }
    n = n > 1 ? n : 1;
    struct pshard *sh = calloc((size_t)n, sizeof *sh);
    if (!(*out = sh)) {
        st = hm_error_set(err, HM_ERR_NOMEM, "out of memory");
        goto out;
    }
    *n_out = n;
    for (int k = 0; k < n; k++) {
        sh[k].p = p;
        if (n == 1)
            snprintf(sh[k].name, sizeof sh[k].name, "%s", HM_BUNDLE_WEIGHTS);
        else
            hm_st_shard_name(k + 1, n, sh[k].name);
    }
    for (int64_t i = 0; i < p->n; i++) {
        struct pshard *s = &sh[n > 1 ? shard_of[i] : 0];
        if (s->n++ == 0)
            s->first = i;
    }
    for (int k = 0; st == HM_OK && k < n; k++) {
        const struct ptensor *t = p->t + sh[k].first;
        if (!(sh[k].w = hm_st_writer_new()))
            st = hm_error_set(err, HM_ERR_NOMEM, "out of memory");
        for (int64_t i = 0; st == HM_OK && i < sh[k].n; i++)
            st = hm_st_writer_add_fill(sh[k].w, t[i].name, t[i].dst, t[i].ndim, t[i].shape, fill,
                                       &sh[k], err);
        if (st == HM_OK)
            st = hm_st_writer_set_metadata(sh[k].w, "hm.config", cfg_meta, err);
        if (st == HM_OK && provenance)
            st = hm_st_writer_set_metadata(sh[k].w, "hm.provenance", provenance, err);
        if (st == HM_OK)
            st = hm_st_writer_set_metadata(sh[k].w, "format", "pt", err);
    }
out:
    free(bytes);
    free(shard_of);
    free(names);
    return st;
}

static void free_shards(struct pshard *sh, int n)
{
    for (int k = 0; sh && k < n; k++)
        hm_st_writer_free(sh[k].w);
    free(sh);
}

enum hm_status hm_bundle_pack(const struct hm_ckpt *ck, const char *out_path,
                              const struct hm_bundle_pack_opts *o,
                              struct hm_bundle_pack_result *res, struct hm_error *err)
{
    struct hm_bundle_pack_result dummy;
    if (!res)
        res = &dummy;
    memset(res, 0, sizeof *res);
    if (!o->tokenizer || !o->tokenizer_name)
        return hm_error_set(err, HM_ERR_INVALID, "a bundle needs a tokenizer");
    if (strcmp(o->tokenizer_name, "tokenizer.json") != 0 &&
        strcmp(o->tokenizer_name, "tokenizer.bin") != 0)
        return hm_error_set(err, HM_ERR_INVALID, "the tokenizer is stored as tokenizer.json or "
                            "tokenizer.bin, not '%s'", o->tokenizer_name);
    if ((o->provenance && hm_provenance_check(o->provenance, err) != HM_OK) ||
        hm_model_check_tensors(ck, err) != HM_OK)
        return err->status;
    const struct hm_config *cfg = hm_ckpt_config(ck);
    struct pack p = {0};
    struct pshard *sh = NULL;
    struct pfile *f = NULL;
    struct hm_bundle_card_file *cf = NULL;
    int nsh = 0, nf = 0;
    char *cfg_meta = hm_config_to_json(cfg), *config = NULL, *card = NULL, *manifest = NULL;
    char *index = NULL;
    enum hm_status st = cfg_meta ? HM_OK : hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    if (st == HM_OK)
        st = collect(ck, o->dtype, &p, res, err);
    if (st == HM_OK)
        st = plan_weights(&p, o->shard_size ? o->shard_size : HM_BUNDLE_SHARD_SIZE, cfg_meta,
                          o->provenance, &sh, &nsh, &index, err);
    /* config, the weights (and index), tokenizer, onnx (and its data), README, MANIFEST */
    if (st == HM_OK && (!(f = calloc((size_t)nsh + 8, sizeof *f)) ||
                        !(cf = calloc((size_t)nsh + 8, sizeof *cf))))
        st = hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    p.pass = 1; /* hash only: the manifest, written first, holds the hashes */
    for (int k = 0; st == HM_OK && k < nsh; k++) {
        uint64_t h, n;
        f[nf] = (struct pfile){.name = sh[k].name, .write = write_shard, .ctx = &sh[k]};
        if ((st = stream_file(&f[nf], NULL, &h, &n, err)) == HM_OK) {
            f[nf].len = (size_t)n, f[nf++].xxh3 = h;
            res->weights_bytes += n;
        }
    }
    struct pfile onnx_data = {.name = HM_BUNDLE_ONNX_DATA, .write = o->onnx_data_write,
                              .ctx = o->onnx_data_ctx};
    if (st == HM_OK && o->onnx_data_write) {
        uint64_t n = 0;
        if (!o->onnx)
            st = hm_error_set(err, HM_ERR_INVALID, "ONNX external data without its graph");
        else if ((st = stream_file(&onnx_data, NULL, &onnx_data.xxh3, &n, err)) == HM_OK &&
                 n != o->onnx_data_len)
            st = hm_error_set(err, HM_ERR_INVALID, "%s: %llu bytes, not the %llu announced",
                              HM_BUNDLE_ONNX_DATA, (unsigned long long)n,
                              (unsigned long long)o->onnx_data_len);
        onnx_data.len = (size_t)n;
    }
    if (st != HM_OK)
        goto out;
    char dtypes[256];
    enum hm_dtype major;
    dtype_summary(&p, dtypes, sizeof dtypes, &major);
    config = hm_bundle_config_json(cfg, torch_name(major), o->bos_id, o->eos_id);
    f[nf++] = (struct pfile){.name = "config.json", .data = config,
                             .len = config ? strlen(config) : 0};
    if (index)
        f[nf++] = (struct pfile){.name = HM_BUNDLE_INDEX, .data = index, .len = strlen(index)};
    f[nf++] = (struct pfile){.name = o->tokenizer_name, .data = o->tokenizer,
                             .len = o->tokenizer_len};
    if (o->onnx)
        f[nf++] = (struct pfile){.name = HM_BUNDLE_ONNX, .data = o->onnx, .len = o->onnx_len};
    if (o->onnx_data_write)
        f[nf++] = onnx_data;
    for (int i = 0; i < nf; i++)
        cf[i] = (struct hm_bundle_card_file){f[i].name, f[i].len};
    qsort(cf, (size_t)nf, sizeof *cf, cmp_pfile_card);
    char tok_desc[256];
    snprintf(tok_desc, sizeof tok_desc, "`%s`%s%s", o->tokenizer_name,
             o->tokenizer_desc ? " " : "", o->tokenizer_desc ? o->tokenizer_desc : "");
    card = hm_bundle_card(cfg, hm_param_count(cfg), dtypes, tok_desc, o->provenance, cf, nf);
    f[nf++] = (struct pfile){.name = "README.md", .data = card, .len = card ? strlen(card) : 0};
    if (!config || !card) {
        st = hm_error_set(err, HM_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (int i = 0; i < nf; i++)
        if (f[i].data)
            f[i].xxh3 = hm_xxh3(f[i].data, f[i].len);
    qsort(f, (size_t)nf, sizeof *f, cmp_pfile);
    manifest = manifest_json(&p, f, nf, o->provenance);
    if (!manifest) {
        st = hm_error_set(err, HM_ERR_NOMEM, "out of memory");
        goto out;
    }
    f[nf++] = (struct pfile){.name = HM_BUNDLE_MANIFEST, .data = manifest,
                             .len = strlen(manifest)};
    qsort(f, (size_t)nf, sizeof *f, cmp_pfile);
    res->tensors = p.n;
    res->shards = index ? nsh : 0;
    res->files = nf;
    for (int i = 0; i < nf; i++)
        res->total_bytes += f[i].len;
    p.pass = 2;
    if (!o->dry_run) {
        /* "out/" names the folder "out" */
        size_t ol = strlen(out_path);
        while (ol > 1 && out_path[ol - 1] == '/')
            ol--;
        char *out = strndup(out_path, ol);
        st = out ? write_all(f, nf, out, o, err)
                 : hm_error_set(err, HM_ERR_NOMEM, "out of memory");
        free(out);
    }
out:
    free_shards(sh, nsh);
    free(f);
    free(cf);
    free(p.t);
    free(cfg_meta);
    free(config);
    free(card);
    free(manifest);
    free(index);
    return st;
}
