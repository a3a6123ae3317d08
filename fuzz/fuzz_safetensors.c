/* fuzz_safetensors.c — libFuzzer target for the safetensors reader.
 *
 * Every input goes through hm_st_open_memory() on an exact-size heap copy
 * (so ASan sees any read past the end). Accepted inputs must then satisfy
 * the reader's promises, checked here as oracles:
 *   - every tensor's bytes lie inside the buffer and are contiguous;
 *   - hm_st_find(name) finds each tensor; metadata keys are unique;
 *   - writing the file back with the hm writer gives a file the reader
 *     accepts, with the same names, dtypes, shapes, bytes and metadata,
 *     and a header padded to a multiple of 8.
 * A broken promise calls abort(), which libFuzzer reports as a crash. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "safetensors.h"

#define CHECK(c)                                                               \
    do {                                                                       \
        if (!(c)) {                                                            \
            fprintf(stderr, "fuzz_safetensors: check failed: %s (line %d)\n",  \
                    #c, __LINE__);                                             \
            abort();                                                           \
        }                                                                      \
    } while (0)

static volatile unsigned char sink;

static void check_same(const struct hm_st_file *a, const struct hm_st_file *b)
{
    CHECK(hm_st_n_tensors(a) == hm_st_n_tensors(b));
    CHECK(hm_st_n_metadata(a) == hm_st_n_metadata(b));
    for (int64_t i = 0; i < hm_st_n_tensors(a); i++) {
        const struct hm_st_tensor *ta = hm_st_tensor_at(a, i);
        int64_t j = hm_st_find(b, ta->name);
        CHECK(j >= 0);
        const struct hm_st_tensor *tb = hm_st_tensor_at(b, j);
        CHECK(ta->dtype == tb->dtype && ta->ndim == tb->ndim && ta->nbytes == tb->nbytes);
        CHECK(ta->numel == tb->numel);
        for (int d = 0; d < ta->ndim; d++)
            CHECK(ta->shape[d] == tb->shape[d]);
        CHECK(ta->nbytes == 0 ||
              memcmp(hm_st_data_view(a, i), hm_st_data_view(b, j), ta->nbytes) == 0);
    }
    for (int64_t i = 0; i < hm_st_n_metadata(a); i++) {
        const char *v = hm_st_metadata_get(b, hm_st_metadata_key(a, i));
        CHECK(v && strcmp(v, hm_st_metadata_value(a, i)) == 0);
    }
}

static void roundtrip(const struct hm_st_file *f)
{
    struct hm_error err;
    struct hm_st_writer *w = hm_st_writer_new();
    CHECK(w);
    for (int64_t i = 0; i < hm_st_n_tensors(f); i++) {
        const struct hm_st_tensor *t = hm_st_tensor_at(f, i);
        CHECK(hm_st_writer_add(w, t->name, t->dtype, t->ndim, t->shape,
                               hm_st_data_view(f, i), &err) == HM_OK);
    }
    for (int64_t i = 0; i < hm_st_n_metadata(f); i++)
        CHECK(hm_st_writer_set_metadata(w, hm_st_metadata_key(f, i),
                                        hm_st_metadata_value(f, i), &err) == HM_OK);
    char *mem = NULL;
    size_t memlen = 0;
    FILE *fp = open_memstream(&mem, &memlen);
    CHECK(fp);
    size_t hsize, fsize;
    CHECK(hm_st_writer_sizes(w, &hsize, &fsize, &err) == HM_OK);
    CHECK(hm_st_writer_write_stream(w, fp, &err) == HM_OK);
    CHECK(fclose(fp) == 0);
    CHECK(memlen == fsize && hsize % 8 == 0);
    hm_st_writer_free(w);

    struct hm_st_file *g = NULL;
    enum hm_status st = hm_st_open_memory(mem, memlen, 1, &g, &err);
    if (st != HM_OK)
        fprintf(stderr, "fuzz_safetensors: re-read failed: %s\n", err.msg);
    CHECK(st == HM_OK);
    CHECK(hm_st_header_size(g) == hsize);
    check_same(f, g);
    check_same(g, f);
    hm_st_close(g);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    unsigned char *buf = malloc(size ? size : 1);
    if (!buf)
        return 0;
    if (size)
        memcpy(buf, data, size);
    struct hm_st_file *f = NULL;
    struct hm_error err;
    hm_error_clear(&err);
    enum hm_status st = hm_st_open_memory(buf, size, 1, &f, &err);
    if (st != HM_OK) {
        CHECK(f == NULL);
        CHECK(err.msg[0] != '\0');
        CHECK(st == HM_ERR_FORMAT || st == HM_ERR_NOMEM);
        return 0;
    }
    CHECK(hm_st_file_size(f) == size);
    size_t hlen = hm_st_header_size(f);
    CHECK(hlen >= 2 && 8 + hlen <= size);
    size_t expect = 0;
    const unsigned char *data0 = buf + 8 + hlen;
    for (int64_t i = 0; i < hm_st_n_tensors(f); i++) {
        const struct hm_st_tensor *t = hm_st_tensor_at(f, i);
        CHECK(t && t->name && t->name[0]);
        CHECK(t->begin == expect);
        const unsigned char *p = hm_st_data_view(f, i);
        CHECK(p == data0 + t->begin);
        CHECK(t->begin + t->nbytes <= size - 8 - hlen);
        if (t->nbytes) {
            sink = p[0];
            sink = p[t->nbytes - 1];
        }
        int64_t numel = 1;
        for (int d = 0; d < t->ndim; d++) {
            CHECK(t->shape[d] >= 0);
            numel *= t->shape[d];
        }
        CHECK(numel == t->numel);
        CHECK((size_t)numel * hm_dtype_size(t->dtype) == t->nbytes);
        CHECK(hm_st_find(f, t->name) == i);
        expect += t->nbytes;
    }
    CHECK(expect == size - 8 - hlen);
    CHECK(hm_st_tensor_at(f, hm_st_n_tensors(f)) == NULL);
    for (int64_t i = 0; i < hm_st_n_metadata(f); i++) {
        const char *k = hm_st_metadata_key(f, i);
        CHECK(k && hm_st_metadata_value(f, i));
        CHECK(hm_st_metadata_get(f, k) == hm_st_metadata_value(f, i));
    }
    roundtrip(f);
    hm_st_close(f);
    return 0;
}
