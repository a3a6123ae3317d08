/* st_index.c — model.safetensors.index.json read, cross-checked and written
 * (st_index.h). */
#include "st_index.h"

#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ix_entry {
    const char *tensor; /* borrowed from root */
    int shard;
};

struct hm_st_index {
    char *name;
    cJSON *root;
    struct ix_entry *e; /* [n] in the index's order */
    int64_t n;
    const char **shards; /* [n_shards] borrowed from root */
    int n_shards;
    int64_t *by_name;    /* [n] indices of e sorted by tensor name */
};

void hm_st_index_free(struct hm_st_index *ix)
{
    if (!ix)
        return;
    cJSON_Delete(ix->root);
    free(ix->e);
    free(ix->shards);
    free(ix->by_name);
    free(ix->name);
    free(ix);
}

static int cmp_by_tensor(const void *a, const void *b, void *ctx)
{
    const struct ix_entry *e = ctx;
    return strcmp(e[*(const int64_t *)a].tensor, e[*(const int64_t *)b].tensor);
}

static enum hm_status parse(struct hm_st_index *ix, const char *text, size_t len,
                            struct hm_error *err)
{
    const char *name = ix->name;
    ix->root = cJSON_ParseWithLength(text, len);
    if (!cJSON_IsObject(ix->root))
        return hm_error_set(err, HM_ERR_FORMAT, "%s is not a JSON object", name);
    const cJSON *wm = cJSON_GetObjectItemCaseSensitive(ix->root, "weight_map");
    if (!cJSON_IsObject(wm))
        return hm_error_set(err, HM_ERR_FORMAT, "%s has no 'weight_map' object", name);
    int n = cJSON_GetArraySize(wm);
    ix->e = calloc((size_t)n + 1, sizeof *ix->e);
    ix->shards = calloc((size_t)n + 1, sizeof *ix->shards);
    ix->by_name = calloc((size_t)n + 1, sizeof *ix->by_name);
    if (!ix->e || !ix->shards || !ix->by_name)
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    const cJSON *v;
    cJSON_ArrayForEach(v, wm) {
        if (!cJSON_IsString(v))
            return hm_error_set(err, HM_ERR_FORMAT, "%s: weight_map['%s'] is not a string", name,
                                v->string);
        const char *s = v->valuestring;
        if (!s[0] || strchr(s, '/') || strcmp(s, "..") == 0 || strcmp(s, ".") == 0)
            return hm_error_set(err, HM_ERR_FORMAT, "%s: shard name '%s' is not a file in the "
                                "folder", name, s);
        int k = 0;
        while (k < ix->n_shards && strcmp(ix->shards[k], s) != 0)
            k++;
        if (k == ix->n_shards)
            ix->shards[ix->n_shards++] = s;
        ix->by_name[ix->n] = ix->n;
        ix->e[ix->n++] = (struct ix_entry){v->string, k};
    }
    if (ix->n == 0)
        return hm_error_set(err, HM_ERR_FORMAT, "%s names no tensors", name);
    qsort_r(ix->by_name, (size_t)ix->n, sizeof *ix->by_name, cmp_by_tensor, ix->e);
    for (int64_t i = 1; i < ix->n; i++)
        if (strcmp(ix->e[ix->by_name[i]].tensor, ix->e[ix->by_name[i - 1]].tensor) == 0)
            return hm_error_set(err, HM_ERR_FORMAT, "%s: weight_map lists tensor '%s' twice",
                                name, ix->e[ix->by_name[i]].tensor);
    return HM_OK;
}

enum hm_status hm_st_index_parse(const char *text, size_t len, const char *name,
                                 struct hm_st_index **out, struct hm_error *err)
{
    *out = NULL;
    struct hm_st_index *ix = calloc(1, sizeof *ix);
    if (!ix || !(ix->name = strdup(name))) {
        free(ix);
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    }
    enum hm_status st = parse(ix, text, len, err);
    if (st != HM_OK) {
        hm_st_index_free(ix);
        return st;
    }
    *out = ix;
    return HM_OK;
}

int hm_st_index_n_shards(const struct hm_st_index *ix) { return ix->n_shards; }
int64_t hm_st_index_n_tensors(const struct hm_st_index *ix) { return ix->n; }

const char *hm_st_index_shard(const struct hm_st_index *ix, int i)
{
    return i >= 0 && i < ix->n_shards ? ix->shards[i] : NULL;
}

const char *hm_st_index_tensor(const struct hm_st_index *ix, int64_t i, int *shard)
{
    if (i < 0 || i >= ix->n)
        return NULL;
    *shard = ix->e[i].shard;
    return ix->e[i].tensor;
}

int hm_st_index_total_size(const struct hm_st_index *ix, uint64_t *out)
{
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(ix->root, "metadata");
    const cJSON *t = cJSON_IsObject(m) ? cJSON_GetObjectItemCaseSensitive(m, "total_size") : NULL;
    if (!t)
        return 0;
    if (!cJSON_IsNumber(t) || !(t->valuedouble >= 0) || t->valuedouble > 9007199254740992.0 ||
        t->valuedouble != (double)(uint64_t)t->valuedouble)
        return -1;
    *out = (uint64_t)t->valuedouble;
    return 1;
}

/* The entry of tensor, or NULL. */
static const struct ix_entry *find(const struct hm_st_index *ix, const char *tensor)
{
    int64_t lo = 0, hi = ix->n - 1;
    while (lo <= hi) {
        int64_t mid = lo + (hi - lo) / 2;
        int c = strcmp(ix->e[ix->by_name[mid]].tensor, tensor);
        if (c == 0)
            return &ix->e[ix->by_name[mid]];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return NULL;
}

static void problem(hm_st_index_problem_fn fn, void *ctx, int shard, const char *tensor,
                    const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static void problem(hm_st_index_problem_fn fn, void *ctx, int shard, const char *tensor,
                    const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (fn)
        fn(ctx, shard, tensor, msg);
}

int64_t hm_st_index_check(const struct hm_st_index *ix, struct hm_st_file *const *files,
                          const char *const *shown, hm_st_index_problem_fn fn, void *ctx)
{
    int64_t count = 0;
    for (int64_t i = 0; i < ix->n; i++) {
        const struct ix_entry *e = &ix->e[i];
        if (hm_st_find(files[e->shard], e->tensor) < 0) {
            problem(fn, ctx, e->shard, e->tensor,
                    "%s maps tensor '%s' to shard '%s', which lacks it", ix->name, e->tensor,
                    shown[e->shard]);
            count++;
        }
    }
    for (int k = 0; k < ix->n_shards; k++) {
        for (int64_t j = 0; j < hm_st_n_tensors(files[k]); j++) {
            const char *t = hm_st_tensor_at(files[k], j)->name;
            const struct ix_entry *e = find(ix, t);
            if (!e)
                problem(fn, ctx, k, t, "tensor '%s' in shard '%s' is not in %s", t, shown[k],
                        ix->name);
            else if (e->shard != k)
                problem(fn, ctx, k, t, "tensor '%s' is in shard '%s' but %s maps it to '%s'", t,
                        shown[k], ix->name, ix->shards[e->shard]);
            count += !e || e->shard != k;
        }
    }
    return count;
}

/* "model-00001-of-00003.safetensors": the "-of-00003.safetensors" tail, or NULL. */
static const char *shard_tail(const char *name)
{
    const char *of = strstr(name, "-of-");
    size_t n = strlen(name);
    return of && n >= 12 && strcmp(name + n - 12, ".safetensors") == 0 ? of : NULL;
}

const char *hm_st_index_stray(const struct hm_st_index *ix, const char *const *names, int64_t n)
{
    const char *tail = shard_tail(ix->shards[0]);
    for (int64_t i = 0; tail && i < n; i++) {
        const char *t = shard_tail(names[i]);
        if (!t || strcmp(t, tail) != 0)
            continue;
        int named = 0;
        for (int k = 0; k < ix->n_shards && !named; k++)
            named = strcmp(ix->shards[k], names[i]) == 0;
        if (!named)
            return names[i];
    }
    return NULL;
}

/* ---- writing ---------------------------------------------------------------- */

void hm_st_shard_name(int i, int n, char buf[HM_ST_SHARD_NAME_MAX])
{
    snprintf(buf, HM_ST_SHARD_NAME_MAX, "model-%05d-of-%05d.safetensors", i, n);
}

int hm_st_shard_plan(const uint64_t *nbytes, int64_t n, uint64_t max_bytes, int *shard_of)
{
    int k = 0;
    uint64_t size = 0;
    int64_t in_shard = 0;
    for (int64_t i = 0; i < n; i++) {
        /* sizes are below 2^53 (safetensors offsets): no overflow */
        if (in_shard > 0 && size + nbytes[i] > max_bytes) {
            k++;
            size = 0;
            in_shard = 0;
        }
        shard_of[i] = k;
        size += nbytes[i];
        in_shard++;
    }
    return n ? k + 1 : 0;
}

/* s as a JSON string the way Python's json.dumps writes it (ensure_ascii). */
static void put_string(FILE *f, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        uint32_t c = *p++;
        if (c >= 0x80) { /* UTF-8 (names are validated by the safetensors reader) */
            int more = c >= 0xf0 ? 3 : c >= 0xe0 ? 2 : 1;
            c &= more == 3 ? 0x07 : more == 2 ? 0x0f : 0x1f;
            for (; more > 0 && (*p & 0xc0) == 0x80; more--)
                c = c << 6 | (*p++ & 0x3f);
        }
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", (int)c);
        else if (c == '\n')
            fputs("\\n", f);
        else if (c == '\r')
            fputs("\\r", f);
        else if (c == '\t')
            fputs("\\t", f);
        else if (c == '\b')
            fputs("\\b", f);
        else if (c == '\f')
            fputs("\\f", f);
        else if (c >= 0x20 && c < 0x80)
            fputc((int)c, f);
        else if (c < 0x10000)
            fprintf(f, "\\u%c%c%c%c", hex[c >> 12 & 15], hex[c >> 8 & 15], hex[c >> 4 & 15],
                    hex[c & 15]);
        else { /* a surrogate pair */
            uint32_t v = c - 0x10000, hi = 0xd800 | v >> 10, lo = 0xdc00 | (v & 0x3ff);
            fprintf(f, "\\u%04x\\u%04x", hi, lo);
        }
    }
    fputc('"', f);
}

struct sort_ctx {
    const char *const *names;
};

static int cmp_name(const void *a, const void *b, void *ctx)
{
    const char *const *names = ((struct sort_ctx *)ctx)->names;
    return strcmp(names[*(const int64_t *)a], names[*(const int64_t *)b]);
}

char *hm_st_index_json(const char *const *tensors, const int *shard_of, int64_t n, int n_shards,
                       uint64_t total_size)
{
    int64_t *order = malloc(sizeof *order * (size_t)(n ? n : 1));
    char *text = NULL;
    size_t len = 0;
    FILE *f = order ? open_memstream(&text, &len) : NULL;
    if (!f) {
        free(order);
        return NULL;
    }
    for (int64_t i = 0; i < n; i++)
        order[i] = i;
    struct sort_ctx sc = {tensors};
    qsort_r(order, (size_t)n, sizeof *order, cmp_name, &sc);
    fprintf(f, "{\n  \"metadata\": {\n    \"total_size\": %llu\n  },\n  \"weight_map\": {",
            (unsigned long long)total_size);
    for (int64_t i = 0; i < n; i++) {
        char shard[HM_ST_SHARD_NAME_MAX];
        hm_st_shard_name(shard_of[order[i]] + 1, n_shards, shard);
        fputs(i ? ",\n    " : "\n    ", f);
        put_string(f, tensors[order[i]]);
        fputs(": ", f);
        put_string(f, shard);
    }
    fputs(n ? "\n  }\n}\n" : "}\n}\n", f);
    int bad = ferror(f);
    free(order);
    if (fclose(f) != 0 || bad) {
        free(text);
        return NULL;
    }
    return text;
}
