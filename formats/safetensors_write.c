/* safetensors_write.c — the streaming safetensors writer (see safetensors.h).
 * Memory: the descriptors plus one tensor's bytes at a time for fill-backed
 * tensors; borrowed buffers are written directly. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "atomic_file.h"
#include "safetensors.h"

#include <errno.h>
#include "utf8_check.h"

struct w_entry {
    char *name;
    enum hm_dtype dtype;
    int ndim;
    int64_t *shape;
    size_t nbytes;
    const void *data;     /* borrowed, or NULL when fill is set */
    hm_st_fill_fn fill;
    int pieces;           /* fill is called a piece at a time */
    void *ctx;
    int64_t index;
    hm_st_done_fn done;   /* after data is written, or NULL */
    const void *done_ctx;
    int64_t tag;
};

struct hm_st_writer {
    struct w_entry *e;
    int64_t n, cap;
    char **mkeys, **mvals;
    int64_t nm, mcap;
    char *header;   /* built by writer_sizes: padded JSON, not NUL-terminated in file */
    size_t header_len;
};

struct hm_st_writer *hm_st_writer_new(void)
{
    return calloc(1, sizeof(struct hm_st_writer));
}

void hm_st_writer_free(struct hm_st_writer *w)
{
    if (!w)
        return;
    for (int64_t i = 0; i < w->n; i++) {
        free(w->e[i].name);
        free(w->e[i].shape);
    }
    free(w->e);
    for (int64_t i = 0; i < w->nm; i++) {
        free(w->mkeys[i]);
        free(w->mvals[i]);
    }
    free(w->mkeys);
    free(w->mvals);
    free(w->header);
    free(w);
}

static enum hm_status add_entry(struct hm_st_writer *w, const char *name,
                                enum hm_dtype dtype, int ndim, const int64_t *shape,
                                const void *data, hm_st_fill_fn fill, void *ctx,
                                struct hm_error *err)
{
    if ((unsigned)dtype >= HM_DTYPE_COUNT)
        return hm_error_set(err, HM_ERR_INVALID, "tensor '%s': bad dtype", name);
    if (ndim < 0 || !name[0] || strcmp(name, "__metadata__") == 0 ||
        hm_utf8_invalid_at(name, strlen(name)) != (size_t)-1)
        return hm_error_set(err, HM_ERR_INVALID, "tensor '%s': bad name or rank", name);
    for (int64_t i = 0; i < w->n; i++)
        if (strcmp(w->e[i].name, name) == 0)
            return hm_error_set(err, HM_ERR_INVALID, "tensor '%s' added twice", name);
    int64_t numel = 1, nbytes;
    /* dims above 2^53 are not exact as JSON numbers and the reader refuses
     * them (a zero-size tensor could otherwise carry one) */
    for (int d = 0; d < ndim; d++)
        if (shape[d] < 0 || shape[d] > ((int64_t)1 << 53) ||
            hm_mul_i64(numel, shape[d], &numel) != 0)
            return hm_error_set(err, HM_ERR_INVALID, "tensor '%s': bad shape", name);
    if (hm_mul_i64(numel, (int64_t)hm_dtype_size(dtype), &nbytes) != 0)
        return hm_error_set(err, HM_ERR_INVALID, "tensor '%s': size overflows", name);
    if (w->n == w->cap) {
        int64_t nc = w->cap ? w->cap * 2 : 64;
        struct w_entry *ne = realloc(w->e, (size_t)nc * sizeof *ne);
        if (!ne)
            return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
        w->e = ne;
        w->cap = nc;
    }
    struct w_entry *e = &w->e[w->n];
    memset(e, 0, sizeof *e);
    e->name = strdup(name);
    e->shape = malloc(sizeof(int64_t) * (size_t)(ndim ? ndim : 1));
    if (!e->name || !e->shape) {
        free(e->name);
        free(e->shape);
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    }
    if (ndim)
        memcpy(e->shape, shape, sizeof(int64_t) * (size_t)ndim);
    e->dtype = dtype;
    e->ndim = ndim;
    e->nbytes = (size_t)nbytes;
    e->data = data;
    e->fill = fill;
    e->ctx = ctx;
    e->index = w->n;
    w->n++;
    free(w->header);
    w->header = NULL;
    return HM_OK;
}

enum hm_status hm_st_writer_add(struct hm_st_writer *w, const char *name,
                                enum hm_dtype dtype, int ndim, const int64_t *shape,
                                const void *data, struct hm_error *err)
{
    return add_entry(w, name, dtype, ndim, shape, data, NULL, NULL, err);
}

enum hm_status hm_st_writer_add_done(struct hm_st_writer *w, const char *name,
                                     enum hm_dtype dtype, int ndim, const int64_t *shape,
                                     const void *data, hm_st_done_fn done, const void *ctx,
                                     int64_t tag, struct hm_error *err)
{
    enum hm_status st = add_entry(w, name, dtype, ndim, shape, data, NULL, NULL, err);
    if (st == HM_OK) {
        w->e[w->n - 1].done = done;
        w->e[w->n - 1].done_ctx = ctx;
        w->e[w->n - 1].tag = tag;
    }
    return st;
}

enum hm_status hm_st_writer_add_fill(struct hm_st_writer *w, const char *name,
                                     enum hm_dtype dtype, int ndim,
                                     const int64_t *shape, hm_st_fill_fn fill,
                                     void *ctx, struct hm_error *err)
{
    return add_entry(w, name, dtype, ndim, shape, NULL, fill, ctx, err);
}

enum hm_status hm_st_writer_add_pieces(struct hm_st_writer *w, const char *name,
                                       enum hm_dtype dtype, int ndim,
                                       const int64_t *shape, hm_st_fill_fn fill,
                                       void *ctx, struct hm_error *err)
{
    enum hm_status st = add_entry(w, name, dtype, ndim, shape, NULL, fill, ctx, err);
    if (st == HM_OK)
        w->e[w->n - 1].pieces = 1;
    return st;
}

enum hm_status hm_st_writer_set_metadata(struct hm_st_writer *w, const char *key,
                                         const char *value, struct hm_error *err)
{
    /* the reader refuses headers that are not UTF-8 */
    if (hm_utf8_invalid_at(key, strlen(key)) != (size_t)-1 ||
        hm_utf8_invalid_at(value, strlen(value)) != (size_t)-1)
        return hm_error_set(err, HM_ERR_INVALID, "metadata '%s' is not valid UTF-8", key);
    char *v = strdup(value);
    if (!v)
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < w->nm; i++) {
        if (strcmp(w->mkeys[i], key) == 0) {
            free(w->mvals[i]);
            w->mvals[i] = v;
            free(w->header);
            w->header = NULL;
            return HM_OK;
        }
    }
    if (w->nm == w->mcap) {
        int64_t nc = w->mcap ? w->mcap * 2 : 8;
        char **nk = realloc(w->mkeys, (size_t)nc * sizeof *nk);
        if (nk)
            w->mkeys = nk;
        char **nv = nk ? realloc(w->mvals, (size_t)nc * sizeof *nv) : NULL;
        if (!nk || !nv) {
            free(v);
            return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
        }
        w->mvals = nv;
        w->mcap = nc;
    }
    w->mkeys[w->nm] = strdup(key);
    if (!w->mkeys[w->nm]) {
        free(v);
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    }
    w->mvals[w->nm++] = v;
    free(w->header);
    w->header = NULL;
    return HM_OK;
}

/* An exact integer JSON value: cJSON prints numbers with %.15g when that
 * reads back within a relative epsilon, which rounds integers above 10^15
 * (2^53 became 9.00719925474099e+15). NULL on allocation failure. */
static cJSON *json_int(int64_t v)
{
    char buf[24];
    snprintf(buf, sizeof buf, "%lld", (long long)v);
    return cJSON_CreateRaw(buf);
}

static int cmp_entry_name(const void *a, const void *b)
{
    return strcmp(((const struct w_entry *)a)->name, ((const struct w_entry *)b)->name);
}

/* Builds w->header: JSON with tensors sorted by name, padded to a multiple of 8. */
static enum hm_status build_header(struct hm_st_writer *w, struct hm_error *err)
{
    if (w->header)
        return HM_OK;
    if (w->n > 1) /* w->e is NULL for an empty writer: qsort(NULL, 0) is UB */
        qsort(w->e, (size_t)w->n, sizeof *w->e, cmp_entry_name);
    enum hm_status st = HM_OK;
    char *txt = NULL;
    cJSON *root = cJSON_CreateObject();
    if (!root)
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    if (w->nm) {
        cJSON *m = cJSON_AddObjectToObject(root, "__metadata__");
        for (int64_t i = 0; m && i < w->nm; i++)
            if (!cJSON_AddStringToObject(m, w->mkeys[i], w->mvals[i]))
                m = NULL;
        if (!m) {
            st = hm_error_set(err, HM_ERR_NOMEM, "out of memory");
            goto out;
        }
    }
    size_t off = 0;
    for (int64_t i = 0; i < w->n; i++) {
        struct w_entry *e = &w->e[i];
        cJSON *t = cJSON_AddObjectToObject(root, e->name);
        cJSON *shape = t ? cJSON_AddArrayToObject(t, "shape") : NULL;
        cJSON *offs = shape ? cJSON_AddArrayToObject(t, "data_offsets") : NULL;
        if (!offs || !cJSON_AddStringToObject(t, "dtype", hm_dtype_name(e->dtype))) {
            st = hm_error_set(err, HM_ERR_NOMEM, "out of memory");
            goto out;
        }
        int ok = 1;
        for (int d = 0; d < e->ndim; d++)
            ok &= cJSON_AddItemToArray(shape, json_int(e->shape[d]));
        ok &= cJSON_AddItemToArray(offs, json_int((int64_t)off));
        ok &= cJSON_AddItemToArray(offs, json_int((int64_t)(off + e->nbytes)));
        if (!ok) {
            st = hm_error_set(err, HM_ERR_NOMEM, "out of memory");
            goto out;
        }
        off += e->nbytes;
    }
    txt = cJSON_PrintUnformatted(root);
    if (!txt) {
        st = hm_error_set(err, HM_ERR_NOMEM, "out of memory");
        goto out;
    }
    size_t len = strlen(txt);
    size_t padded = (len + 7) / 8 * 8;
    if (padded > HM_ST_MAX_HEADER) {
        st = hm_error_set(err, HM_ERR_INVALID, "header would exceed the 100 MB limit");
        goto out;
    }
    w->header = malloc(padded + 1);
    if (!w->header) {
        st = hm_error_set(err, HM_ERR_NOMEM, "out of memory");
        goto out;
    }
    memcpy(w->header, txt, len);
    memset(w->header + len, ' ', padded - len);
    w->header[padded] = '\0';
    w->header_len = padded;
out:
    free(txt);
    cJSON_Delete(root);
    return st;
}

enum hm_status hm_st_writer_sizes(struct hm_st_writer *w, size_t *header_size,
                                  size_t *file_size, struct hm_error *err)
{
    enum hm_status st = build_header(w, err);
    if (st != HM_OK)
        return st;
    size_t total = 8 + w->header_len;
    for (int64_t i = 0; i < w->n; i++)
        total += w->e[i].nbytes;
    if (header_size)
        *header_size = w->header_len;
    if (file_size)
        *file_size = total;
    return HM_OK;
}

enum hm_status hm_st_writer_write_stream(struct hm_st_writer *w, FILE *fp,
                                         struct hm_error *err)
{
    enum hm_status st = build_header(w, err);
    if (st != HM_OK)
        return st;
    unsigned char len8[8];
    uint64_t n = w->header_len;
    for (int i = 0; i < 8; i++)
        len8[i] = (unsigned char)(n >> (8 * i));
    if (fwrite(len8, 1, 8, fp) != 8 || fwrite(w->header, 1, w->header_len, fp) != w->header_len)
        return hm_error_set_errno(err, HM_ERR_IO, errno ? errno : EIO,
                                  "cannot write the safetensors header");
    for (int64_t i = 0; i < w->n; i++) {
        struct w_entry *e = &w->e[i];
        if (e->nbytes == 0)
            continue;
        if (e->data) {
            for (size_t off = 0; off < e->nbytes; off += HM_ST_WRITE_PIECE) {
                const size_t piece = e->nbytes - off < HM_ST_WRITE_PIECE ? e->nbytes - off
                                                                          : HM_ST_WRITE_PIECE;
                if (fwrite((const char *)e->data + off, 1, piece, fp) != piece)
                    return hm_error_set_errno(err, HM_ERR_IO, errno ? errno : EIO,
                                              "cannot write tensor '%s'", e->name);
                if (e->done)
                    e->done(e->done_ctx, e->tag, off, piece);
            }
            continue;
        }
        const size_t step = e->pieces && e->nbytes > HM_ST_FILL_PIECE ? HM_ST_FILL_PIECE
                                                                       : e->nbytes;
        void *buf = malloc(step);
        if (!buf)
            return hm_error_set(err, HM_ERR_NOMEM, "out of memory for tensor '%s'", e->name);
        for (size_t off = 0; st == HM_OK && off < e->nbytes; off += step) {
            const size_t piece = e->nbytes - off < step ? e->nbytes - off : step;
            st = e->fill(e->ctx, e->index, off, buf, piece, err);
            if (st == HM_OK && fwrite(buf, 1, piece, fp) != piece)
                st = hm_error_set_errno(err, HM_ERR_IO, errno ? errno : EIO, "cannot write");
        }
        free(buf);
        if (st != HM_OK) {
            hm_error_prefix(err, "tensor '%s': ", e->name);
            return st;
        }
    }
    return HM_OK;
}

enum hm_status hm_st_writer_write_path(struct hm_st_writer *w, const char *path,
                                       int flags, struct hm_error *err)
{
    struct hm_afile *af;
    enum hm_status st = build_header(w, err);
    if (st != HM_OK)
        return st;
    if ((st = hm_afile_open(path, flags, &af, err)) != HM_OK)
        return st;
    st = hm_st_writer_write_stream(w, hm_afile_stream(af), err);
    if (st != HM_OK) {
        hm_afile_abort(af);
        return st;
    }
    return hm_afile_commit(af, err);
}
