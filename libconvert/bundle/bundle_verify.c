/* bundle_verify.c — every checksum of a bundle, and a manifest that covers
 * exactly what the bundle holds (hm-verify bundle; bundle.h). */
#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bundle.h"
#include "bundle_internal.h"
#include "config.h"
#include "fileio.h"
#include "hash.h"
#include "provenance.h"

struct vctx {
    hm_bundle_finding_fn fn;
    void *ctx;
    struct hm_bundle_verify_stats *stats;
};

static void finding(struct vctx *v, const char *member, const char *tensor, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void finding(struct vctx *v, const char *member, const char *tensor, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    v->stats->findings++;
    if (v->fn)
        v->fn(v->ctx, member, tensor, msg);
}

static int is_hex16(const cJSON *s)
{
    if (!cJSON_IsString(s) || strlen(s->valuestring) != 16)
        return 0;
    for (const char *p = s->valuestring; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
            return 0;
    return 1;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Reports keys of obj that appear twice; what names the object. */
static void check_duplicates(struct vctx *v, const cJSON *obj, const char *what)
{
    int n = cJSON_GetArraySize(obj), k = 0;
    const char **keys = calloc((size_t)n + 1, sizeof *keys);
    const cJSON *e;
    if (!keys)
        return;
    cJSON_ArrayForEach(e, obj) keys[k++] = e->string;
    qsort(keys, (size_t)k, sizeof *keys, cmp_str);
    for (int i = 1; i < k; i++)
        if (strcmp(keys[i], keys[i - 1]) == 0)
            finding(v, HM_BUNDLE_MANIFEST, NULL, "%s lists '%s' twice", what, keys[i]);
    free(keys);
}

/* Reports members of entry other than the allowed keys. */
static void check_keys(struct vctx *v, const cJSON *entry, const char *const *allowed, int n,
                       const char *member, const char *tensor, const char *what)
{
    const cJSON *e;
    cJSON_ArrayForEach(e, entry) {
        int ok = 0;
        for (int i = 0; i < n && !ok; i++)
            ok = strcmp(e->string, allowed[i]) == 0;
        if (!ok)
            finding(v, member, tensor, "%s has an unknown field '%s'", what, e->string);
    }
}

static void check_files(struct vctx *v, struct hm_bundle *b, const cJSON *files)
{
    static const char *const allowed[] = {"bytes", "xxh3"};
    check_duplicates(v, files, "'files'");
    const cJSON *e;
    cJSON_ArrayForEach(e, files) {
        const char *name = e->string;
        int64_t i = hm_bundle_find(b, name);
        if (strcmp(name, HM_BUNDLE_MANIFEST) == 0) {
            finding(v, name, NULL, "the manifest lists itself");
            continue;
        }
        if (i < 0) {
            finding(v, HM_BUNDLE_MANIFEST, NULL, "lists '%s', which the bundle lacks", name);
            continue;
        }
        v->stats->files++;
        const cJSON *bytes = cJSON_GetObjectItemCaseSensitive(e, "bytes");
        const cJSON *xx = cJSON_GetObjectItemCaseSensitive(e, "xxh3");
        uint64_t want, h;
        char hex[17];
        char what[300];
        snprintf(what, sizeof what, "the entry of '%.200s'", name);
        check_keys(v, e, allowed, 2, HM_BUNDLE_MANIFEST, NULL, what);
        if (!cJSON_IsObject(e) || hm_bundle_json_u64(bytes, &want) != 0)
            finding(v, HM_BUNDLE_MANIFEST, NULL, "%s has no valid 'bytes'", what);
        else if (want != hm_bundle_file_size(b, i))
            finding(v, name, NULL, "holds %llu bytes, MANIFEST.json says %llu",
                    (unsigned long long)hm_bundle_file_size(b, i), (unsigned long long)want);
        struct hm_error err;
        if (!is_hex16(xx)) {
            finding(v, HM_BUNDLE_MANIFEST, NULL, "%s has no valid 'xxh3' (16 lowercase hex digits)",
                    what);
        } else if (hm_bundle_file_xxh3(b, i, &h, &err) != HM_OK) {
            finding(v, name, NULL, "cannot be read: %s", err.msg);
        } else {
            hm_xxh3_hex(h, hex);
            if (strcmp(hex, xx->valuestring) != 0)
                finding(v, name, NULL, "xxh3 %s, MANIFEST.json says %s", hex, xx->valuestring);
        }
    }
    for (int64_t i = 0; i < hm_bundle_n_files(b); i++) {
        const char *name = hm_bundle_file_name(b, i);
        if (strcmp(name, HM_BUNDLE_MANIFEST) != 0 && !cJSON_GetObjectItemCaseSensitive(files, name))
            finding(v, name, NULL, "not covered by MANIFEST.json");
    }
}

static int same_shape(const cJSON *shape, const struct hm_st_tensor *t)
{
    if (!cJSON_IsArray(shape) || cJSON_GetArraySize(shape) != t->ndim)
        return 0;
    int d = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, shape) {
        uint64_t x;
        if (hm_bundle_json_u64(e, &x) != 0 || (int64_t)x != t->shape[d++])
            return 0;
    }
    return 1;
}

static void check_tensors(struct vctx *v, const struct hm_st_file *st, const cJSON *tensors)
{
    static const char *const allowed[] = {"dtype", "shape", "xxh3"};
    const char *W = HM_BUNDLE_WEIGHTS;
    check_duplicates(v, tensors, "'tensors'");
    const cJSON *e;
    cJSON_ArrayForEach(e, tensors) {
        int64_t i = hm_st_find(st, e->string);
        if (i < 0) {
            finding(v, HM_BUNDLE_MANIFEST, e->string, "lists a tensor that %s lacks", W);
            continue;
        }
        v->stats->tensors++;
        const struct hm_st_tensor *t = hm_st_tensor_at(st, i);
        const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
        const cJSON *xx = cJSON_GetObjectItemCaseSensitive(e, "xxh3");
        check_keys(v, e, allowed, 3, HM_BUNDLE_MANIFEST, t->name, "its entry");
        if (!cJSON_IsString(dt) || strcmp(dt->valuestring, hm_dtype_name(t->dtype)) != 0)
            finding(v, W, t->name, "is %s, MANIFEST.json says %s", hm_dtype_name(t->dtype),
                    cJSON_IsString(dt) ? dt->valuestring : "no valid dtype");
        if (!same_shape(cJSON_GetObjectItemCaseSensitive(e, "shape"), t))
            finding(v, W, t->name, "its shape differs from MANIFEST.json's");
        char hex[17];
        hm_xxh3_hex(hm_xxh3(hm_st_data_view(st, i), t->nbytes), hex);
        if (!is_hex16(xx))
            finding(v, HM_BUNDLE_MANIFEST, t->name, "its entry has no valid 'xxh3'");
        else if (strcmp(hex, xx->valuestring) != 0)
            finding(v, W, t->name, "xxh3 %s, MANIFEST.json says %s", hex, xx->valuestring);
    }
    for (int64_t i = 0; i < hm_st_n_tensors(st); i++) {
        const char *name = hm_st_tensor_at(st, i)->name;
        if (!cJSON_GetObjectItemCaseSensitive(tensors, name))
            finding(v, W, name, "not covered by MANIFEST.json");
    }
}

/* hm.config parses; hm.provenance equals the manifest's provenance. */
static void check_metadata(struct vctx *v, const struct hm_st_file *st, const cJSON *prov)
{
    const char *W = HM_BUNDLE_WEIGHTS;
    const char *cfg_text = hm_st_metadata_get(st, "hm.config");
    struct hm_config cfg;
    struct hm_error err;
    if (!cfg_text)
        finding(v, W, NULL, "has no hm.config metadata");
    else if (hm_config_parse(cfg_text, strlen(cfg_text), &cfg, &err) != HM_OK)
        finding(v, W, NULL, "hm.config metadata: %s", err.msg);
    const char *ptext = hm_st_metadata_get(st, "hm.provenance");
    cJSON *p = NULL;
    if (!ptext)
        finding(v, W, NULL, "has no hm.provenance array in its metadata");
    else if (hm_provenance_parse(ptext, &p, &err) != HM_OK)
        finding(v, W, NULL, "%s", err.msg);
    else if (!cJSON_IsArray(prov))
        finding(v, HM_BUNDLE_MANIFEST, NULL, "'provenance' is not an array");
    else if (!cJSON_Compare(p, prov, 1))
        finding(v, HM_BUNDLE_MANIFEST, NULL, "'provenance' differs from the hm.provenance of %s", W);
    cJSON_Delete(p);
}

static void check_manifest(struct vctx *v, struct hm_bundle *b, const cJSON *m)
{
    static const char *const top[] = {"format", "version", "files", "tensors", "provenance"};
    const char *M = HM_BUNDLE_MANIFEST;
    check_keys(v, m, top, 5, M, NULL, "the manifest");
    check_duplicates(v, m, "the manifest");
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(m, "format");
    const cJSON *ver = cJSON_GetObjectItemCaseSensitive(m, "version");
    const cJSON *files = cJSON_GetObjectItemCaseSensitive(m, "files");
    const cJSON *tensors = cJSON_GetObjectItemCaseSensitive(m, "tensors");
    if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, HM_BUNDLE_FORMAT_NAME) != 0)
        finding(v, M, NULL, "'format' is not \"%s\"", HM_BUNDLE_FORMAT_NAME);
    if (!cJSON_IsNumber(ver) || ver->valuedouble != HM_BUNDLE_VERSION)
        finding(v, M, NULL, "'version' is not %d", HM_BUNDLE_VERSION);
    if (!cJSON_IsObject(files))
        finding(v, M, NULL, "has no 'files' object");
    else
        check_files(v, b, files);
    static const char *const required[] = {"config.json", "README.md", HM_BUNDLE_WEIGHTS};
    for (int i = 0; i < 3; i++)
        if (hm_bundle_find(b, required[i]) < 0)
            finding(v, required[i], NULL, "the bundle has no %s", required[i]);
    if (hm_bundle_tokenizer_index(b) < 0)
        finding(v, "tokenizer.json", NULL, "the bundle has no tokenizer (tokenizer.json or tokenizer.bin)");
    if (hm_bundle_find(b, HM_BUNDLE_WEIGHTS) < 0)
        return;
    struct hm_st_file *st;
    struct hm_error err;
    if (hm_bundle_open_weights(b, &st, &err) != HM_OK) {
        finding(v, HM_BUNDLE_WEIGHTS, NULL, "is not valid safetensors: %s", err.msg);
        return;
    }
    if (!cJSON_IsObject(tensors))
        finding(v, M, NULL, "has no 'tensors' object");
    else
        check_tensors(v, st, tensors);
    check_metadata(v, st, cJSON_GetObjectItemCaseSensitive(m, "provenance"));
    hm_st_close(st);
}

/* The manifest has no checksum of its own: its bytes must be exactly the
 * canonical print of what they parse to (hm-pack writes that form), so no
 * change to it goes unseen, not even in whitespace. */
static void check_canonical(struct vctx *v, struct hm_bundle *b, const cJSON *m)
{
    const void *data;
    size_t len;
    struct hm_error err;
    char *again = cJSON_Print(m);
    if (hm_bundle_file_data(b, hm_bundle_find(b, HM_BUNDLE_MANIFEST), &data, &len, &err) == HM_OK &&
        again && (strlen(again) != len || memcmp(again, data, len) != 0))
        finding(v, HM_BUNDLE_MANIFEST, NULL,
                "is not byte for byte the canonical form hm-pack writes (it was edited)");
    free(again);
}

enum hm_status hm_bundle_verify(const char *path, hm_bundle_finding_fn fn, void *ctx,
                                struct hm_bundle_verify_stats *stats, struct hm_error *err)
{
    struct hm_bundle_verify_stats dummy;
    if (!stats)
        stats = &dummy;
    memset(stats, 0, sizeof *stats);
    struct vctx v = {fn, ctx, stats};
    if (strcmp(path, "-") != 0 && hm_is_file(path) && !hm_bundle_detect(path))
        return hm_error_set(err, HM_ERR_UNSUPPORTED,
                            "not a bundle (neither a folder with %s nor an archive)",
                            HM_BUNDLE_MANIFEST);
    struct hm_bundle *b = NULL;
    enum hm_status st = hm_bundle_open(path, &b, err);
    if (st == HM_ERR_INVALID) { /* an unsafe archive entry, a FIFO in a folder */
        finding(&v, "", NULL, "%s", err->msg);
        return HM_OK;
    }
    if (st != HM_OK)
        return st;
    cJSON *m = NULL;
    if (hm_bundle_manifest_parse(b, &m, err) != HM_OK) {
        finding(&v, HM_BUNDLE_MANIFEST, NULL, "%s", err->msg);
    } else {
        check_canonical(&v, b, m);
        check_manifest(&v, b, m);
    }
    cJSON_Delete(m);
    hm_bundle_close(b);
    return HM_OK;
}
