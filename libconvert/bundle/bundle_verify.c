/* bundle_verify.c — every checksum of a bundle, and a manifest that covers
 * exactly what the bundle holds (hm-verify bundle; bundle.h).
 *
 * Nothing is held whole but MANIFEST.json and the shard index: every other
 * file goes once through a scan (bundle_scan.c) that hashes it and, for
 * weights, each tensor behind a header the safetensors reader validated;
 * an archive's members are hashed as they are inflated. Memory stays at a
 * piece and a header whatever the bundle's size. The weights are
 * model.safetensors or the shards of model.safetensors.index.json
 * (bundle_verify_shards.c). */
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

void hm_bundle_finding(struct hm_bundle_vctx *v, const char *member, const char *tensor,
                       const char *fmt, ...)
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
static void check_duplicates(struct hm_bundle_vctx *v, const cJSON *obj, const char *what)
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
            hm_bundle_finding(v, HM_BUNDLE_MANIFEST, NULL, "%s lists '%s' twice", what, keys[i]);
    free(keys);
}

/* Reports members of entry other than the allowed keys. */
static void check_keys(struct hm_bundle_vctx *v, const cJSON *entry, const char *const *allowed,
                       int n,
                       const char *member, const char *tensor, const char *what)
{
    const cJSON *e;
    cJSON_ArrayForEach(e, entry) {
        int ok = 0;
        for (int i = 0; i < n && !ok; i++)
            ok = strcmp(e->string, allowed[i]) == 0;
        if (!ok)
            hm_bundle_finding(v, member, tensor, "%s has an unknown field '%s'", what, e->string);
    }
}

static void check_files(struct hm_bundle_vctx *v, struct hm_bundle *b, const cJSON *files)
{
    static const char *const allowed[] = {"bytes", "xxh3"};
    check_duplicates(v, files, "'files'");
    const cJSON *e;
    cJSON_ArrayForEach(e, files) {
        const char *name = e->string;
        int64_t i = hm_bundle_find(b, name);
        if (strcmp(name, HM_BUNDLE_MANIFEST) == 0) {
            hm_bundle_finding(v, name, NULL, "the manifest lists itself");
            continue;
        }
        if (i < 0) {
            hm_bundle_finding(v, HM_BUNDLE_MANIFEST, NULL, "lists '%s', which the bundle lacks",
                              name);
            continue;
        }
        v->stats->files++;
        const cJSON *bytes = cJSON_GetObjectItemCaseSensitive(e, "bytes");
        const cJSON *xx = cJSON_GetObjectItemCaseSensitive(e, "xxh3");
        uint64_t want;
        char hex[17];
        char what[300];
        snprintf(what, sizeof what, "the entry of '%.200s'", name);
        check_keys(v, e, allowed, 2, HM_BUNDLE_MANIFEST, NULL, what);
        if (!cJSON_IsObject(e) || hm_bundle_json_u64(bytes, &want) != 0)
            hm_bundle_finding(v, HM_BUNDLE_MANIFEST, NULL, "%s has no valid 'bytes'", what);
        else if (want != hm_bundle_file_size(b, i))
            hm_bundle_finding(v, name, NULL, "holds %llu bytes, MANIFEST.json says %llu",
                    (unsigned long long)hm_bundle_file_size(b, i), (unsigned long long)want);
        const struct hm_bundle_scan_file *r = hm_bundle_scan_find(&v->scan, name);
        if (!is_hex16(xx)) {
            hm_bundle_finding(v, HM_BUNDLE_MANIFEST, NULL,
                              "%s has no valid 'xxh3' (16 lowercase hex digits)", what);
        } else if (!r || r->read_error) {
            hm_bundle_finding(v, name, NULL, "cannot be read: %s", r ? r->read_error : "not read");
        } else {
            hm_xxh3_hex(r->xxh3, hex);
            if (strcmp(hex, xx->valuestring) != 0)
                hm_bundle_finding(v, name, NULL, "xxh3 %s, MANIFEST.json says %s", hex,
                                  xx->valuestring);
        }
    }
    for (int64_t i = 0; i < hm_bundle_n_files(b); i++) {
        const char *name = hm_bundle_file_name(b, i);
        if (strcmp(name, HM_BUNDLE_MANIFEST) != 0 && !cJSON_GetObjectItemCaseSensitive(files, name))
            hm_bundle_finding(v, name, NULL, "not covered by MANIFEST.json");
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

/* The weights file and index of tensor name among w's files; -1 if none has it. */
static int find_tensor(const struct hm_bundle_weights *w, const char *name, int64_t *index)
{
    for (int k = 0; k < w->n; k++)
        if (w->f[k] && (*index = hm_st_find(w->f[k]->st, name)) >= 0)
            return k;
    return -1;
}

static void check_tensors(struct hm_bundle_vctx *v, const struct hm_bundle_weights *w,
                          const cJSON *tensors)
{
    static const char *const allowed[] = {"dtype", "shape", "xxh3"};
    check_duplicates(v, tensors, "'tensors'");
    const cJSON *e;
    cJSON_ArrayForEach(e, tensors) {
        int64_t i;
        int k = find_tensor(w, e->string, &i);
        if (k < 0) {
            if (w->sharded)
                hm_bundle_finding(v, HM_BUNDLE_MANIFEST, e->string,
                                  "lists a tensor that no shard holds");
            else
                hm_bundle_finding(v, HM_BUNDLE_MANIFEST, e->string,
                                  "lists a tensor that %s lacks", HM_BUNDLE_WEIGHTS);
            continue;
        }
        v->stats->tensors++;
        const char *W = w->names[k];
        const struct hm_st_tensor *t = hm_st_tensor_at(w->f[k]->st, i);
        const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
        const cJSON *xx = cJSON_GetObjectItemCaseSensitive(e, "xxh3");
        check_keys(v, e, allowed, 3, HM_BUNDLE_MANIFEST, t->name, "its entry");
        if (!cJSON_IsString(dt) || strcmp(dt->valuestring, hm_dtype_name(t->dtype)) != 0)
            hm_bundle_finding(v, W, t->name, "is %s, MANIFEST.json says %s",
                              hm_dtype_name(t->dtype),
                              cJSON_IsString(dt) ? dt->valuestring : "no valid dtype");
        if (!same_shape(cJSON_GetObjectItemCaseSensitive(e, "shape"), t))
            hm_bundle_finding(v, W, t->name, "its shape differs from MANIFEST.json's");
        char hex[17];
        hm_xxh3_hex(w->f[k]->tensor_xxh3[i], hex);
        if (!is_hex16(xx))
            hm_bundle_finding(v, HM_BUNDLE_MANIFEST, t->name, "its entry has no valid 'xxh3'");
        else if (strcmp(hex, xx->valuestring) != 0)
            hm_bundle_finding(v, W, t->name, "xxh3 %s, MANIFEST.json says %s", hex,
                              xx->valuestring);
    }
    for (int k = 0; k < w->n; k++)
        for (int64_t i = 0; w->f[k] && i < hm_st_n_tensors(w->f[k]->st); i++) {
            const char *name = hm_st_tensor_at(w->f[k]->st, i)->name;
            if (!cJSON_GetObjectItemCaseSensitive(tensors, name))
                hm_bundle_finding(v, w->names[k], name, "not covered by MANIFEST.json");
        }
}

/* hm.config parses; hm.provenance equals the manifest's provenance. */
static void check_metadata(struct hm_bundle_vctx *v, const char *W, const struct hm_st_file *st,
                           const cJSON *prov)
{
    const char *cfg_text = hm_st_metadata_get(st, "hm.config");
    struct hm_config cfg;
    struct hm_error err;
    if (!cfg_text)
        hm_bundle_finding(v, W, NULL, "has no hm.config metadata");
    else if (hm_config_parse(cfg_text, strlen(cfg_text), &cfg, &err) != HM_OK)
        hm_bundle_finding(v, W, NULL, "hm.config metadata: %s", err.msg);
    const char *ptext = hm_st_metadata_get(st, "hm.provenance");
    cJSON *p = NULL;
    if (!ptext)
        hm_bundle_finding(v, W, NULL, "has no hm.provenance array in its metadata");
    else if (hm_provenance_parse(ptext, &p, &err) != HM_OK)
        hm_bundle_finding(v, W, NULL, "%s", err.msg);
    else if (!cJSON_IsArray(prov))
        hm_bundle_finding(v, HM_BUNDLE_MANIFEST, NULL, "'provenance' is not an array");
    else if (!cJSON_Compare(p, prov, 1))
        hm_bundle_finding(v, HM_BUNDLE_MANIFEST, NULL,
                          "'provenance' differs from the hm.provenance of %s", W);
    cJSON_Delete(p);
}

/* The weights: model.safetensors, or the shards of the index. */
static void find_weights(struct hm_bundle_vctx *v, struct hm_bundle *b,
                         struct hm_bundle_weights *w)
{
    int single = hm_bundle_find(b, HM_BUNDLE_WEIGHTS) >= 0;
    if (hm_bundle_find(b, HM_BUNDLE_INDEX) >= 0) {
        if (single)
            hm_bundle_finding(v, HM_BUNDLE_WEIGHTS, NULL, "the bundle holds both %s and %s "
                              "(hm-pack writes one or the other)", HM_BUNDLE_WEIGHTS,
                              HM_BUNDLE_INDEX);
        hm_bundle_verify_shards(v, b, w);
        return;
    }
    if (!single) {
        hm_bundle_finding(v, HM_BUNDLE_WEIGHTS, NULL, "the bundle has no %s (nor %s)",
                          HM_BUNDLE_WEIGHTS, HM_BUNDLE_INDEX);
        return;
    }
    w->n = 1;
    w->one_name = HM_BUNDLE_WEIGHTS;
    w->one_f = hm_bundle_weights_file(v, HM_BUNDLE_WEIGHTS);
    w->names = &w->one_name;
    w->f = &w->one_f;
}

static void check_manifest(struct hm_bundle_vctx *v, struct hm_bundle *b, const cJSON *m)
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
        hm_bundle_finding(v, M, NULL, "'format' is not \"%s\"", HM_BUNDLE_FORMAT_NAME);
    if (!cJSON_IsNumber(ver) || ver->valuedouble != HM_BUNDLE_VERSION)
        hm_bundle_finding(v, M, NULL, "'version' is not %d", HM_BUNDLE_VERSION);
    if (!cJSON_IsObject(files))
        hm_bundle_finding(v, M, NULL, "has no 'files' object");
    else
        check_files(v, b, files);
    static const char *const required[] = {"config.json", "README.md"};
    for (int i = 0; i < 2; i++)
        if (hm_bundle_find(b, required[i]) < 0)
            hm_bundle_finding(v, required[i], NULL, "the bundle has no %s", required[i]);
    if (hm_bundle_tokenizer_index(b) < 0)
        hm_bundle_finding(v, "tokenizer.json", NULL,
                          "the bundle has no tokenizer (tokenizer.json or tokenizer.bin)");
    struct hm_bundle_weights w = {0};
    find_weights(v, b, &w);
    if (w.n > 0 && !cJSON_IsObject(tensors))
        hm_bundle_finding(v, M, NULL, "has no 'tensors' object");
    else if (w.n > 0)
        check_tensors(v, &w, tensors);
    for (int k = 0; k < w.n; k++)
        if (w.f[k])
            check_metadata(v, w.names[k], w.f[k]->st,
                           cJSON_GetObjectItemCaseSensitive(m, "provenance"));
    if (w.sharded)
        hm_bundle_weights_release(&w);
}

/* The manifest has no checksum of its own: its bytes must be exactly the
 * canonical print of what they parse to (hm-pack writes that form), so no
 * change to it goes unseen, not even in whitespace. */
static void check_canonical(struct hm_bundle_vctx *v, struct hm_bundle *b, const cJSON *m)
{
    const void *data;
    size_t len;
    struct hm_error err;
    char *again = cJSON_Print(m);
    if (hm_bundle_file_data(b, hm_bundle_find(b, HM_BUNDLE_MANIFEST), &data, &len, &err) == HM_OK &&
        again && (strlen(again) != len || memcmp(again, data, len) != 0))
        hm_bundle_finding(v, HM_BUNDLE_MANIFEST, NULL,
                "is not byte for byte the canonical form hm-pack writes (it was edited)");
    free(again);
}

const struct hm_bundle_scan_file *hm_bundle_weights_file(struct hm_bundle_vctx *v,
                                                         const char *name)
{
    const struct hm_bundle_scan_file *r = hm_bundle_scan_find(&v->scan, name);
    if (!r || r->read_error)
        return NULL; /* check_files reported it */
    if (!r->st) {
        hm_bundle_finding(v, name, NULL, "is not valid safetensors: %s",
                          r->error ? r->error : "unreadable");
        return NULL;
    }
    return r;
}

/* Hands every file the open did not stream to the scan; one that cannot be
 * read is recorded so (a finding of check_files). */
static enum hm_status scan_rest(struct hm_bundle_vctx *v, struct hm_bundle *b,
                                struct hm_error *err)
{
    for (int64_t i = 0; i < hm_bundle_n_files(b); i++) {
        if (hm_bundle_file_streamed(b, i))
            continue;
        struct hm_error e;
        enum hm_status st = hm_bundle_file_stream(b, i, hm_bundle_scan_data, &v->scan, &e);
        if (st == HM_ERR_NOMEM)
            return hm_error_set(err, st, "out of memory");
        if (st != HM_OK &&
            (st = hm_bundle_scan_failed(&v->scan, hm_bundle_file_name(b, i), e.msg, err)) != HM_OK)
            return st;
    }
    return HM_OK;
}

enum hm_status hm_bundle_verify(const char *path, hm_bundle_finding_fn fn, void *ctx,
                                struct hm_bundle_verify_stats *stats, struct hm_error *err)
{
    struct hm_bundle_verify_stats dummy;
    if (!stats)
        stats = &dummy;
    memset(stats, 0, sizeof *stats);
    struct hm_bundle_vctx v = {fn, ctx, stats, {0}};
    if (strcmp(path, "-") != 0 && hm_is_file(path) && !hm_bundle_detect(path))
        return hm_error_set(err, HM_ERR_UNSUPPORTED,
                            "not a bundle (neither a folder with %s nor an archive)",
                            HM_BUNDLE_MANIFEST);
    struct hm_bundle *b = NULL;
    enum hm_status st = hm_bundle_open_streamed(path, hm_bundle_scan_data, &v.scan, &b, err);
    if (st == HM_ERR_INVALID) { /* an unsafe archive entry, a FIFO in a folder */
        hm_bundle_finding(&v, "", NULL, "%s", err->msg);
        st = HM_OK;
        goto out;
    }
    if (st != HM_OK || (st = scan_rest(&v, b, err)) != HM_OK)
        goto out;
    cJSON *m = NULL;
    if (hm_bundle_manifest_parse(b, &m, err) != HM_OK) {
        hm_bundle_finding(&v, HM_BUNDLE_MANIFEST, NULL, "%s", err->msg);
    } else {
        check_canonical(&v, b, m);
        check_manifest(&v, b, m);
    }
    cJSON_Delete(m);
out:
    hm_bundle_close(b);
    hm_bundle_scan_release(&v.scan);
    return st;
}
