/* bundle_scan.c — a bundle's files hashed as their bytes go by
 * (bundle_internal.h): the XXH3 of each file and, for a safetensors file,
 * its header validated by the safetensors reader itself (hm_st_open_header)
 * and the XXH3 of each tensor. Memory: one header and two hash states per
 * file being read, whatever the file's size. */
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "bundle_internal.h"
#include "hash.h"

void hm_bundle_scan_release(struct hm_bundle_scan *s)
{
    for (int64_t i = 0; i < s->n; i++) {
        struct hm_bundle_scan_file *f = &s->f[i];
        free(f->name);
        hm_st_close(f->st);
        free(f->tensor_xxh3);
        free(f->error);
        free(f->read_error);
        free(f->head);
        XXH3_freeState(f->h);
        XXH3_freeState(f->th);
    }
    free(s->f);
    memset(s, 0, sizeof *s);
}

const struct hm_bundle_scan_file *hm_bundle_scan_find(const struct hm_bundle_scan *s,
                                                      const char *name)
{
    for (int64_t i = s->n; i-- > 0;) /* newest first: a name read twice is the archive's fault */
        if (strcmp(s->f[i].name, name) == 0)
            return &s->f[i];
    return NULL;
}

static int is_safetensors(const char *name)
{
    size_t n = strlen(name);
    return n >= 12 && strcmp(name + n - 12, ".safetensors") == 0;
}

/* The record of name being read, a new one when there is none (or the last
 * one is finished). */
static struct hm_bundle_scan_file *record(struct hm_bundle_scan *s, const char *name,
                                          struct hm_error *err)
{
    if (s->n && strcmp(s->f[s->n - 1].name, name) == 0 && !s->f[s->n - 1].done)
        return &s->f[s->n - 1];
    if (s->n == s->cap) {
        int64_t nc = s->cap ? s->cap * 2 : 16;
        struct hm_bundle_scan_file *nf = realloc(s->f, sizeof *nf * (size_t)nc);
        if (!nf) {
            hm_error_set(err, HM_ERR_NOMEM, "out of memory");
            return NULL;
        }
        s->f = nf;
        s->cap = nc;
    }
    struct hm_bundle_scan_file *f = &s->f[s->n];
    memset(f, 0, sizeof *f);
    f->name = strdup(name);
    f->h = XXH3_createState();
    f->th = XXH3_createState();
    f->parse = is_safetensors(name);
    if (!f->name || !f->h || !f->th) {
        free(f->name);
        XXH3_freeState(f->h);
        XXH3_freeState(f->th);
        hm_error_set(err, HM_ERR_NOMEM, "out of memory");
        return NULL;
    }
    XXH3_64bits_reset(f->h);
    s->n++;
    return f;
}

/* f's safetensors reading failed: why (the reader's own message). */
static void st_failed(struct hm_bundle_scan_file *f, const char *msg)
{
    f->parse = 0;
    free(f->error);
    f->error = strdup(msg);
    hm_st_close(f->st);
    f->st = NULL;
    free(f->head);
    f->head = NULL;
}

/* The header is complete: validate it and start on the first tensor. */
static enum hm_status header_done(struct hm_bundle_scan_file *f, struct hm_error *err)
{
    struct hm_error e;
    enum hm_status st = hm_st_open_header(f->head, f->head_len, &f->st, &e);
    free(f->head);
    f->head = NULL;
    if (st == HM_ERR_NOMEM)
        return hm_error_set(err, st, "out of memory");
    if (st != HM_OK) {
        st_failed(f, e.msg);
        return HM_OK;
    }
    int64_t n = hm_st_n_tensors(f->st);
    f->tensor_xxh3 = calloc((size_t)n + 1, sizeof *f->tensor_xxh3);
    if (!f->tensor_xxh3)
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    f->cur = -1;
    return HM_OK;
}

/* Tensor bytes data: [n] at offset f->size - 8 - N of the data section. */
static void tensor_bytes(struct hm_bundle_scan_file *f, const unsigned char *data, size_t n)
{
    int64_t nt = hm_st_n_tensors(f->st);
    while (f->cur < nt) {
        if (f->cur < 0 || f->left == 0) { /* finish the tensor, start the next */
            if (f->cur >= 0)
                f->tensor_xxh3[f->cur] = XXH3_64bits_digest(f->th);
            if (++f->cur == nt)
                return; /* past the last tensor: finish() reports any bytes after it */
            f->left = hm_st_tensor_at(f->st, f->cur)->nbytes;
            XXH3_64bits_reset(f->th);
            continue;
        }
        if (n == 0)
            return;
        size_t k = n < f->left ? n : (size_t)f->left;
        XXH3_64bits_update(f->th, data, k);
        f->left -= k;
        data += k;
        n -= k;
    }
}

/* The safetensors view of piece data: [n]. */
static enum hm_status parse_piece(struct hm_bundle_scan_file *f, const unsigned char *data,
                                  size_t n, struct hm_error *err)
{
    while (n > 0 && f->parse && !f->st) {
        if (f->have < 8) { /* the length */
            size_t k = 8 - f->have < n ? 8 - f->have : n;
            memcpy(f->len8 + f->have, data, k);
            f->have += k;
            data += k;
            n -= k;
            if (f->have < 8)
                return HM_OK;
            uint64_t hl = 0;
            for (int i = 7; i >= 0; i--)
                hl = hl << 8 | f->len8[i];
            if (hl > HM_ST_MAX_HEADER) { /* the reader's message */
                struct hm_error e;
                hm_st_open_header(f->len8, 8, &f->st, &e);
                st_failed(f, e.msg);
                return HM_OK;
            }
            f->head_len = 8 + (size_t)hl;
            if (!(f->head = malloc(f->head_len)))
                return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
            memcpy(f->head, f->len8, 8);
        }
        size_t k = f->head_len - f->have < n ? f->head_len - f->have : n;
        memcpy(f->head + f->have, data, k);
        f->have += k;
        data += k;
        n -= k;
        if (f->have == f->head_len) {
            enum hm_status st = header_done(f, err);
            if (st != HM_OK)
                return st;
        }
    }
    if (n > 0 && f->st)
        tensor_bytes(f, data, n);
    return HM_OK;
}

/* The end of f: the size its header describes, else why it is no safetensors. */
static enum hm_status finish(struct hm_bundle_scan_file *f, struct hm_error *err)
{
    struct hm_error e;
    char msg[512];
    f->xxh3 = XXH3_64bits_digest(f->h);
    f->done = 1;
    if (!f->parse)
        return HM_OK;
    if (!f->st) { /* the header never completed: the reader's message for that length */
        unsigned char *h = f->head ? f->head : f->len8;
        enum hm_status st = hm_st_open_header(h, f->have, &f->st, &e);
        if (st == HM_ERR_NOMEM)
            return hm_error_set(err, st, "out of memory");
        st_failed(f, st == HM_OK ? "the header is incomplete" : e.msg);
        return HM_OK;
    }
    tensor_bytes(f, NULL, 0); /* closes a last tensor (and empty ones) */
    uint64_t want = hm_st_file_size(f->st);
    if (f->size > want) {
        snprintf(msg, sizeof msg, "data section has %llu bytes not covered by any tensor",
                 (unsigned long long)(f->size - want));
        st_failed(f, msg);
    } else if (f->size < want) {
        const struct hm_st_tensor *t = hm_st_tensor_at(f->st, f->cur);
        snprintf(msg, sizeof msg, "tensor '%s' runs past the end of the file (%llu bytes, the "
                 "header describes %llu)", t ? t->name : "?", (unsigned long long)f->size,
                 (unsigned long long)want);
        st_failed(f, msg);
    }
    return HM_OK;
}

enum hm_status hm_bundle_scan_data(void *ctx, const char *name, const void *data, size_t n,
                                   struct hm_error *err)
{
    struct hm_bundle_scan *s = ctx;
    struct hm_bundle_scan_file *f = record(s, name, err);
    if (!f)
        return HM_ERR_NOMEM;
    if (!data)
        return finish(f, err);
    XXH3_64bits_update(f->h, data, n);
    f->size += n;
    return parse_piece(f, data, n, err);
}

enum hm_status hm_bundle_scan_failed(struct hm_bundle_scan *s, const char *name, const char *why,
                                     struct hm_error *err)
{
    struct hm_bundle_scan_file *f = record(s, name, err);
    if (!f)
        return HM_ERR_NOMEM;
    f->done = 1;
    f->parse = 0;
    free(f->read_error);
    return (f->read_error = strdup(why)) ? HM_OK : hm_error_set(err, HM_ERR_NOMEM, "out of memory");
}
