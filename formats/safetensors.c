/* safetensors.c — validated reader and streaming writer (see safetensors.h). */
#include "safetensors.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "atomic_file.h"
#include "fileio.h"
#include "tokfile.h"
#include "utf8_check.h"

/* ---- dtypes ---------------------------------------------------------------- */

static const struct {
    const char *name;
    size_t size;
} dtype_info[HM_DTYPE_COUNT] = {
    [HM_DTYPE_F32] = {"F32", 4},  [HM_DTYPE_F16] = {"F16", 2},
    [HM_DTYPE_BF16] = {"BF16", 2}, [HM_DTYPE_F64] = {"F64", 8},
    [HM_DTYPE_BOOL] = {"BOOL", 1}, [HM_DTYPE_U8] = {"U8", 1},
    [HM_DTYPE_I8] = {"I8", 1},    [HM_DTYPE_I16] = {"I16", 2},
    [HM_DTYPE_U16] = {"U16", 2},  [HM_DTYPE_I32] = {"I32", 4},
    [HM_DTYPE_U32] = {"U32", 4},  [HM_DTYPE_I64] = {"I64", 8},
    [HM_DTYPE_U64] = {"U64", 8},
};

const char *hm_dtype_name(enum hm_dtype dt)
{
    return (unsigned)dt < HM_DTYPE_COUNT ? dtype_info[dt].name : NULL;
}

int hm_dtype_parse(const char *s)
{
    for (int i = 0; i < HM_DTYPE_COUNT; i++)
        if (strcmp(s, dtype_info[i].name) == 0)
            return i;
    return -1;
}

size_t hm_dtype_size(enum hm_dtype dt)
{
    return (unsigned)dt < HM_DTYPE_COUNT ? dtype_info[dt].size : 0;
}

int hm_dtype_is_float(enum hm_dtype dt)
{
    return dt == HM_DTYPE_F32 || dt == HM_DTYPE_F16 || dt == HM_DTYPE_BF16 ||
           dt == HM_DTYPE_F64;
}

/* ---- reader ----------------------------------------------------------------- */

struct st_entry {
    struct hm_st_tensor t; /* t.name and t.shape point into names/shapes below */
    char *name;
    int64_t *shape;
};

struct hm_st_file {
    const unsigned char *base; /* whole file */
    size_t size;
    int mapped;   /* munmap on close */
    int owned;    /* free on close */
    int header_only; /* hm_st_open_header: base holds 8 + N bytes, no data */
    size_t header_len;
    const unsigned char *data; /* base + 8 + header_len */
    size_t data_len;
    int64_t n;
    struct st_entry *entries; /* [n], sorted by begin */
    int64_t *by_name;         /* [n], entry indices sorted by name */
    int64_t n_meta;
    char **meta_keys, **meta_vals; /* [n_meta] borrowed from meta_blob */
    char *meta_blob;                /* every key and value, NUL-terminated (owned) */
};

void hm_st_close(struct hm_st_file *f)
{
    if (!f)
        return;
    for (int64_t i = 0; i < f->n; i++) {
        free(f->entries[i].name);
        free(f->entries[i].shape);
    }
    free(f->entries);
    free(f->by_name);
    free(f->meta_blob);
    free(f->meta_keys);
    free(f->meta_vals);
    if (f->mapped)
        munmap((void *)f->base, f->size);
    else if (f->owned)
        free((void *)f->base);
    free(f);
}

/* A JSON number that must be a non-negative integer below 2^53. */
static int json_uint(const cJSON *j, int64_t *out)
{
    if (!cJSON_IsNumber(j))
        return -1;
    double d = j->valuedouble;
    if (!(d >= 0) || d != floor(d) || d > 9007199254740992.0)
        return -1;
    *out = (int64_t)d;
    return 0;
}

static int cmp_begin(const void *a, const void *b)
{
    const struct st_entry *x = a, *y = b;
    if (x->t.begin != y->t.begin)
        return x->t.begin < y->t.begin ? -1 : 1;
    /* zero-size tensors share offsets: order them by name, deterministically */
    if (x->t.nbytes != y->t.nbytes)
        return x->t.nbytes < y->t.nbytes ? -1 : 1;
    return strcmp(x->name, y->name);
}

static int cmp_name_idx(const void *a, const void *b, void *ctx)
{
    const struct st_entry *e = ctx;
    return strcmp(e[*(const int64_t *)a].name, e[*(const int64_t *)b].name);
}

static enum hm_status parse_tensor(struct st_entry *e, const cJSON *item,
                                   struct hm_error *err)
{
    const char *name = item->string;
    if (!cJSON_IsObject(item))
        return hm_error_set(err, HM_ERR_FORMAT, "tensor '%s' is not a JSON object", name);
    const cJSON *jd = NULL, *js = NULL, *jo = NULL, *c;
    cJSON_ArrayForEach(c, item) {
        if (strcmp(c->string, "dtype") == 0 && !jd)
            jd = c;
        else if (strcmp(c->string, "shape") == 0 && !js)
            js = c;
        else if (strcmp(c->string, "data_offsets") == 0 && !jo)
            jo = c;
        else
            return hm_error_set(err, HM_ERR_FORMAT,
                                "tensor '%s' has an unexpected or repeated field '%s'",
                                name, c->string);
    }
    if (!jd || !js || !jo)
        return hm_error_set(err, HM_ERR_FORMAT, "tensor '%s' lacks '%s'", name,
                            !jd ? "dtype" : !js ? "shape" : "data_offsets");
    if (!cJSON_IsString(jd))
        return hm_error_set(err, HM_ERR_FORMAT, "tensor '%s' dtype is not a string", name);
    int dt = hm_dtype_parse(jd->valuestring);
    if (dt < 0)
        return hm_error_set(err, HM_ERR_FORMAT, "tensor '%s' has unknown dtype '%.32s'",
                            name, jd->valuestring);
    e->t.dtype = (enum hm_dtype)dt;
    if (!cJSON_IsArray(js))
        return hm_error_set(err, HM_ERR_FORMAT, "tensor '%s' shape is not an array", name);
    int ndim = cJSON_GetArraySize(js);
    e->shape = calloc((size_t)(ndim ? ndim : 1), sizeof(int64_t));
    if (!e->shape)
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    int64_t numel = 1;
    int k = 0;
    cJSON_ArrayForEach(c, js) {
        int64_t dim;
        if (json_uint(c, &dim) != 0)
            return hm_error_set(err, HM_ERR_FORMAT,
                                "tensor '%s' shape[%d] is not a non-negative integer", name, k);
        if (hm_mul_i64(numel, dim, &numel) != 0)
            return hm_error_set(err, HM_ERR_FORMAT,
                                "tensor '%s' shape overflows the element count", name);
        e->shape[k++] = dim;
    }
    e->t.ndim = ndim;
    e->t.shape = e->shape;
    e->t.numel = numel;
    int64_t nbytes;
    if (hm_mul_i64(numel, (int64_t)hm_dtype_size(e->t.dtype), &nbytes) != 0)
        return hm_error_set(err, HM_ERR_FORMAT, "tensor '%s' byte size overflows", name);
    if (!cJSON_IsArray(jo) || cJSON_GetArraySize(jo) != 2)
        return hm_error_set(err, HM_ERR_FORMAT,
                            "tensor '%s' data_offsets is not an array of two integers", name);
    int64_t b, en;
    if (json_uint(cJSON_GetArrayItem(jo, 0), &b) != 0 ||
        json_uint(cJSON_GetArrayItem(jo, 1), &en) != 0)
        return hm_error_set(err, HM_ERR_FORMAT,
                            "tensor '%s' data_offsets are not non-negative integers", name);
    if (en < b)
        return hm_error_set(err, HM_ERR_FORMAT,
                            "tensor '%s' data_offsets [%lld, %lld] are reversed", name,
                            (long long)b, (long long)en);
    if (en - b != nbytes)
        return hm_error_set(err, HM_ERR_FORMAT,
                            "tensor '%s' holds %lld bytes but dtype %s and its shape need %lld",
                            name, (long long)(en - b), hm_dtype_name(e->t.dtype),
                            (long long)nbytes);
    e->t.begin = (size_t)b;
    e->t.nbytes = (size_t)nbytes;
    return HM_OK;
}

static int cmp_str_ptr(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static enum hm_status parse_metadata(struct hm_st_file *f, const cJSON *m,
                                     struct hm_error *err)
{
    if (!cJSON_IsObject(m))
        return hm_error_set(err, HM_ERR_FORMAT, "__metadata__ is not a JSON object");
    int n = cJSON_GetArraySize(m);
    f->meta_keys = calloc((size_t)n + 1, sizeof(char *));
    f->meta_vals = calloc((size_t)n + 1, sizeof(char *));
    if (!f->meta_keys || !f->meta_vals)
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    /* the strings in one block: two allocations, not two per key */
    const cJSON *c;
    size_t total = 1;
    cJSON_ArrayForEach(c, m) {
        if (!cJSON_IsString(c))
            return hm_error_set(err, HM_ERR_FORMAT,
                                "__metadata__ value of '%s' is not a string", c->string);
        total += strlen(c->string) + strlen(c->valuestring) + 2;
    }
    char *at = f->meta_blob = malloc(total);
    if (!at)
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    cJSON_ArrayForEach(c, m) {
        size_t nk = strlen(c->string) + 1, nv = strlen(c->valuestring) + 1;
        f->meta_keys[f->n_meta] = memcpy(at, c->string, nk);
        f->meta_vals[f->n_meta] = memcpy(at + nk, c->valuestring, nv);
        at += nk + nv;
        f->n_meta++;
    }
    /* duplicates: the keys sorted (a copy of the pointers; the file's order
     * stays), then neighbours compared: n log n, not n² (a header of 10^6
     * keys near the 100 MB limit must not take days) */
    char **sorted = malloc(sizeof(char *) * ((size_t)f->n_meta + 1));
    if (!sorted)
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    memcpy(sorted, f->meta_keys, sizeof(char *) * (size_t)f->n_meta);
    qsort(sorted, (size_t)f->n_meta, sizeof(char *), cmp_str_ptr);
    enum hm_status st = HM_OK;
    for (int64_t i = 1; i < f->n_meta && st == HM_OK; i++)
        if (strcmp(sorted[i], sorted[i - 1]) == 0)
            st = hm_error_set(err, HM_ERR_FORMAT, "__metadata__ key '%s' appears twice",
                              sorted[i]);
    free(sorted);
    return st;
}

static int is_digit(char ch) { return ch >= '0' && ch <= '9'; }

/* Offset of the first number token outside strings that breaks the JSON
 * grammar -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?, or (size_t)-1. */
static size_t json_bad_number_at(const char *s, size_t n)
{
    int in_str = 0;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if (in_str) {
            if (ch == '\\')
                i++;
            else if (ch == '"')
                in_str = 0;
            continue;
        }
        if (ch == '"') {
            in_str = 1;
            continue;
        }
        if (ch == '+' || ch == '.')
            return i; /* a number never starts with '+' or '.' */
        if (ch != '-' && !is_digit(ch))
            continue;
        size_t start = i;
        if (ch == '-' && ++i >= n)
            return start;
        if (!is_digit(s[i]))
            return start;
        if (s[i] == '0' && i + 1 < n && is_digit(s[i + 1]))
            return start; /* leading zero */
        while (i < n && is_digit(s[i]))
            i++;
        if (i < n && s[i] == '.') {
            if (++i >= n || !is_digit(s[i]))
                return start;
            while (i < n && is_digit(s[i]))
                i++;
        }
        if (i < n && (s[i] == 'e' || s[i] == 'E')) {
            if (++i < n && (s[i] == '+' || s[i] == '-'))
                i++;
            if (i >= n || !is_digit(s[i]))
                return start;
            while (i < n && is_digit(s[i]))
                i++;
        }
        i--; /* the loop's i++ moves past the number */
    }
    return (size_t)-1;
}

static enum hm_status parse_header(struct hm_st_file *f, struct hm_error *err)
{
    if (f->size == 0)
        return hm_error_set(err, HM_ERR_FORMAT, "file is empty");
    if (f->size < 8)
        return hm_error_set(err, HM_ERR_FORMAT,
                            "file is too short for a safetensors header (%zu bytes)", f->size);
    /* a token file given where a checkpoint belongs: say so rather than
     * read its magic as a header length */
    if (memcmp(f->base, HM_TOK_MAGIC, 8) == 0)
        return hm_error_set(err, HM_ERR_FORMAT,
                            "this is an hm token file (HMTOKENS), not a safetensors checkpoint");
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--)
        n = (n << 8) | f->base[i];
    if (n > HM_ST_MAX_HEADER)
        return hm_error_set_at(err, HM_ERR_FORMAT, 0,
                               "header length %llu exceeds the 100 MB limit",
                               (unsigned long long)n);
    if (n > f->size - 8)
        return hm_error_set_at(err, HM_ERR_FORMAT, 0,
                               "header length %llu runs past the end of the file (%zu bytes)",
                               (unsigned long long)n, f->size);
    /* header only: the data section is what the header describes (the
     * caller holds the real length to it) */
    if (f->header_only)
        f->size = SIZE_MAX;
    if (n < 2)
        return hm_error_set_at(err, HM_ERR_FORMAT, 8, "header is too short to be JSON");
    f->header_len = (size_t)n;
    f->data = f->base + 8 + n;
    f->data_len = f->size - 8 - (size_t)n;
    const char *h = (const char *)f->base + 8;
    if (h[0] != '{')
        return hm_error_set_at(err, HM_ERR_FORMAT, 8, "header does not start with '{'");
    size_t bad = hm_utf8_invalid_at(h, (size_t)n);
    if (bad != (size_t)-1)
        return hm_error_set_at(err, HM_ERR_FORMAT, (int64_t)(8 + bad),
                               "header is not valid UTF-8");
    /* JSON never holds raw control bytes (inside strings they must be
     * escaped); cJSON would skip them as whitespace or keep them in names. */
    for (size_t i = 0; i < (size_t)n; i++) {
        unsigned char c = (unsigned char)h[i];
        if (c < 0x20 && c != '\t' && c != '\n' && c != '\r')
            return hm_error_set_at(err, HM_ERR_FORMAT, (int64_t)(8 + i),
                                   "header contains a raw control byte 0x%02x, not valid JSON",
                                   c);
    }
    /* cJSON is lenient about numbers (007, 1., +1); JSON is not */
    size_t badnum = json_bad_number_at(h, (size_t)n);
    if (badnum != (size_t)-1)
        return hm_error_set_at(err, HM_ERR_FORMAT, (int64_t)(8 + badnum),
                               "header has a malformed JSON number");
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(h, (size_t)n, &end, 0);
    if (!root) {
        const char *ep = cJSON_GetErrorPtr();
        int64_t at = (ep && ep >= h && ep <= h + n) ? 8 + (ep - h) : 8;
        return hm_error_set_at(err, HM_ERR_FORMAT, at, "header is not valid JSON");
    }
    enum hm_status st = HM_OK;
    for (const char *p = end; p < h + n; p++) {
        if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r') {
            st = hm_error_set_at(err, HM_ERR_FORMAT, 8 + (p - h),
                                 "header has trailing bytes after the JSON object");
            goto out;
        }
    }
    if (!cJSON_IsObject(root)) {
        st = hm_error_set(err, HM_ERR_FORMAT, "header is not a JSON object");
        goto out;
    }
    int count = cJSON_GetArraySize(root);
    f->entries = calloc((size_t)count + 1, sizeof *f->entries);
    f->by_name = calloc((size_t)count + 1, sizeof *f->by_name);
    if (!f->entries || !f->by_name) {
        st = hm_error_set(err, HM_ERR_NOMEM, "out of memory");
        goto out;
    }
    int seen_meta = 0;
    const cJSON *item;
    cJSON_ArrayForEach(item, root) {
        if (strcmp(item->string, "__metadata__") == 0) {
            if (seen_meta++) {
                st = hm_error_set(err, HM_ERR_FORMAT, "__metadata__ appears twice");
                goto out;
            }
            if ((st = parse_metadata(f, item, err)) != HM_OK)
                goto out;
            continue;
        }
        struct st_entry *e = &f->entries[f->n];
        e->name = strdup(item->string);
        if (!e->name) {
            st = hm_error_set(err, HM_ERR_NOMEM, "out of memory");
            goto out;
        }
        e->t.name = e->name;
        f->n++;
        if (e->name[0] == '\0') {
            st = hm_error_set(err, HM_ERR_FORMAT, "a tensor has an empty name");
            goto out;
        }
        if ((st = parse_tensor(e, item, err)) != HM_OK)
            goto out;
    }
    /* duplicates: sort indices by name */
    for (int64_t i = 0; i < f->n; i++)
        f->by_name[i] = i;
    qsort_r(f->by_name, (size_t)f->n, sizeof(int64_t), cmp_name_idx, f->entries);
    for (int64_t i = 1; i < f->n; i++) {
        if (strcmp(f->entries[f->by_name[i]].name, f->entries[f->by_name[i - 1]].name) == 0) {
            st = hm_error_set(err, HM_ERR_FORMAT, "tensor '%s' appears twice",
                              f->entries[f->by_name[i]].name);
            goto out;
        }
    }
    /* offsets: sorted, contiguous from 0, covering the data section */
    qsort(f->entries, (size_t)f->n, sizeof *f->entries, cmp_begin);
    size_t expect = 0;
    for (int64_t i = 0; i < f->n; i++) {
        const struct hm_st_tensor *t = &f->entries[i].t;
        size_t tend = t->begin + t->nbytes; /* both < 2^53: no overflow */
        if (tend > f->data_len && !f->header_only) {
            st = hm_error_set_at(err, HM_ERR_FORMAT, (int64_t)(8 + n + t->begin),
                                 "tensor '%s' data_offsets [%zu, %zu] run past the end of "
                                 "the data section (%zu bytes)",
                                 t->name, t->begin, tend, f->data_len);
            goto out;
        }
        if (t->begin < expect) {
            st = hm_error_set(err, HM_ERR_FORMAT,
                              "tensor '%s' data_offsets [%zu, %zu] overlap the previous "
                              "tensor (ending at %zu)", t->name, t->begin, tend, expect);
            goto out;
        }
        if (t->begin > expect) {
            st = hm_error_set(err, HM_ERR_FORMAT,
                              "gap of %zu bytes in the data section before tensor '%s'",
                              t->begin - expect, t->name);
            goto out;
        }
        expect = tend;
    }
    if (f->header_only) {
        f->data_len = expect;
        f->size = 8 + (size_t)n + expect;
    } else if (expect != f->data_len) {
        st = hm_error_set_at(err, HM_ERR_FORMAT, (int64_t)(8 + n + expect),
                             "data section has %zu bytes not covered by any tensor",
                             f->data_len - expect);
        goto out;
    }
    /* by_name must index the begin-sorted entries */
    for (int64_t i = 0; i < f->n; i++)
        f->by_name[i] = i;
    qsort_r(f->by_name, (size_t)f->n, sizeof(int64_t), cmp_name_idx, f->entries);
out:
    cJSON_Delete(root);
    return st;
}

enum hm_status hm_st_open_memory(void *buf, size_t len, int take_ownership,
                                 struct hm_st_file **out, struct hm_error *err)
{
    *out = NULL;
    struct hm_st_file *f = calloc(1, sizeof *f);
    if (!f) {
        if (take_ownership)
            free(buf);
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    }
    f->base = buf;
    f->size = len;
    f->owned = take_ownership;
    enum hm_status st = parse_header(f, err);
    if (st != HM_OK) {
        hm_st_close(f);
        return st;
    }
    *out = f;
    return HM_OK;
}

enum hm_status hm_st_open_header(const void *head, size_t len, struct hm_st_file **out,
                                 struct hm_error *err)
{
    *out = NULL;
    struct hm_st_file *f = calloc(1, sizeof *f);
    void *copy = malloc(len ? len : 1);
    if (!f || !copy) {
        free(f);
        free(copy);
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    }
    memcpy(copy, head, len);
    f->base = copy;
    f->size = len;
    f->owned = 1;
    f->header_only = 1;
    enum hm_status st = parse_header(f, err);
    if (st == HM_OK && len != 8 + f->header_len)
        st = hm_error_set(err, HM_ERR_FORMAT, "%zu bytes given for a header of %zu", len,
                          8 + f->header_len);
    if (st != HM_OK) {
        hm_st_close(f);
        return st;
    }
    *out = f;
    return HM_OK;
}

enum hm_status hm_st_open(const char *path, struct hm_st_file **out, struct hm_error *err)
{
    *out = NULL;
    if (strcmp(path, "-") == 0) {
        char *buf;
        size_t len;
        enum hm_status st = hm_read_fd(STDIN_FILENO, HM_ST_STDIN_MAX, &buf, &len, err);
        if (st != HM_OK)
            return st;
        return hm_st_open_memory(buf, len, 1, out, err);
    }
    struct stat sb;
    int fd = hm_open_input(path, &sb, err); /* never blocks on a FIFO */
    if (fd < 0)
        return err ? err->status : HM_ERR_IO;
    if (S_ISDIR(sb.st_mode)) {
        close(fd);
        return hm_error_set(err, HM_ERR_IO, "is a directory, not a safetensors file");
    }
    enum hm_status rs = hm_input_regular(&sb, "a checkpoint or shard", err);
    if (rs != HM_OK) { /* devices, sockets: never read without bound */
        close(fd);
        return rs;
    }
    if (S_ISFIFO(sb.st_mode)) { /* a pipe: read into memory, capped */
        char *buf;
        size_t len;
        rs = hm_read_fd(fd, HM_ST_STDIN_MAX, &buf, &len, err);
        close(fd);
        if (rs != HM_OK)
            return rs;
        return hm_st_open_memory(buf, len, 1, out, err);
    }
    struct hm_st_file *f = calloc(1, sizeof *f);
    if (!f) {
        close(fd);
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    }
    f->size = (size_t)sb.st_size;
    if (f->size > 0) {
        void *m = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) {
            int e = errno;
            close(fd);
            free(f);
            return hm_error_set_errno(err, HM_ERR_IO, e, "cannot map");
        }
        f->base = m;
        f->mapped = 1;
    }
    close(fd);
    enum hm_status st = parse_header(f, err);
    if (st != HM_OK) {
        hm_st_close(f);
        return st;
    }
    *out = f;
    return HM_OK;
}

int64_t hm_st_n_tensors(const struct hm_st_file *f) { return f->n; }

const struct hm_st_tensor *hm_st_tensor_at(const struct hm_st_file *f, int64_t i)
{
    return (i >= 0 && i < f->n) ? &f->entries[i].t : NULL;
}

int64_t hm_st_find(const struct hm_st_file *f, const char *name)
{
    int64_t lo = 0, hi = f->n - 1;
    while (lo <= hi) {
        int64_t mid = lo + (hi - lo) / 2;
        int c = strcmp(f->entries[f->by_name[mid]].name, name);
        if (c == 0)
            return f->by_name[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

const void *hm_st_data_view(const struct hm_st_file *f, int64_t i)
{
    return i >= 0 && i < f->n && !f->header_only ? f->data + f->entries[i].t.begin : NULL;
}

void hm_st_data_release(const struct hm_st_file *f, int64_t i)
{
    if (i >= 0 && i < f->n)
        hm_st_data_release_range(f, i, 0, f->entries[i].t.nbytes);
}

void hm_st_data_release_range(const struct hm_st_file *f, int64_t i, size_t off, size_t len)
{
    if (!f->mapped || i < 0 || i >= f->n || off >= f->entries[i].t.nbytes)
        return;
    if (len > f->entries[i].t.nbytes - off)
        len = f->entries[i].t.nbytes - off;
    const long pg = sysconf(_SC_PAGESIZE);
    const uintptr_t page = pg > 0 ? (uintptr_t)pg : 4096u;
    const uintptr_t lo = (uintptr_t)(f->data + f->entries[i].t.begin + off);
    const uintptr_t hi = lo + (uintptr_t)len;
    const uintptr_t a = (lo + page - 1) / page * page, b = hi / page * page;
    if (b > a) /* a read-only private file mapping: the pages come back from the file */
        (void)madvise((void *)a, b - a, MADV_DONTNEED);
}

int64_t hm_st_n_metadata(const struct hm_st_file *f) { return f->n_meta; }
const char *hm_st_metadata_key(const struct hm_st_file *f, int64_t i) { return f->meta_keys[i]; }
const char *hm_st_metadata_value(const struct hm_st_file *f, int64_t i) { return f->meta_vals[i]; }

const char *hm_st_metadata_get(const struct hm_st_file *f, const char *key)
{
    for (int64_t i = 0; i < f->n_meta; i++)
        if (strcmp(f->meta_keys[i], key) == 0)
            return f->meta_vals[i];
    return NULL;
}

size_t hm_st_file_size(const struct hm_st_file *f) { return f->size; }
size_t hm_st_header_size(const struct hm_st_file *f) { return f->header_len; }
