/* test_tokfile.c — token file round trips and every kind of corruption. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <xxhash.h>

#include "testutil.h"
#include "tokfile.h"

static char *write_tokens(const char *dir, const char *name, uint64_t vocab, uint32_t eot,
                          const int32_t *ids, int64_t n)
{
    char *path = tu_path(dir, name);
    struct hm_tok_writer *w;
    struct hm_error err;
    cr_assert_eq(hm_tok_writer_open(path, vocab, eot, 0, &w, &err), HM_OK, "%s", err.msg);
    /* two appends to exercise streaming */
    cr_assert_eq(hm_tok_writer_append(w, ids, n / 2, &err), HM_OK, "%s", err.msg);
    cr_assert_eq(hm_tok_writer_append(w, ids + n / 2, n - n / 2, &err), HM_OK, "%s", err.msg);
    cr_assert_eq(hm_tok_writer_count(w), n);
    cr_assert_eq(hm_tok_writer_commit(w, &err), HM_OK, "%s", err.msg);
    return path;
}

static void round_trip(uint64_t vocab, int want_width)
{
    char *dir = tu_mkdtemp("tokfile");
    int64_t n = 100003; /* more than one 64 KiB encode buffer */
    int32_t *ids = malloc((size_t)n * sizeof *ids);
    uint64_t rng = 42;
    for (int64_t i = 0; i < n; i++)
        ids[i] = (int32_t)(tu_rand_u64(&rng) % vocab);
    ids[0] = (int32_t)(vocab - 1);
    char *path = write_tokens(dir, "a.tok", vocab, 0, ids, n);
    struct hm_tok_file *f;
    struct hm_error err;
    cr_assert_eq(hm_tok_open(path, &f, &err), HM_OK, "%s", err.msg);
    cr_expect_eq(hm_tok_count(f), n);
    cr_expect_eq(hm_tok_vocab(f), vocab);
    cr_expect_eq(hm_tok_width(f), want_width);
    cr_expect_eq(hm_tok_eot(f), 0);
    size_t len;
    char *bytes = tu_read_file(path, &len);
    cr_expect_eq(len, 48 + (size_t)n * (size_t)want_width);
    cr_expect_eq(hm_tok_checksum(f), XXH3_64bits(bytes + 48, len - 48));
    free(bytes);
    for (int64_t i = 0; i < n; i += 997)
        cr_assert_eq(hm_tok_get(f, i), (uint32_t)ids[i]);
    int32_t *back = malloc((size_t)n * sizeof *back);
    cr_assert_eq(hm_tok_read(f, 0, n, back, &err), HM_OK);
    cr_assert(memcmp(back, ids, (size_t)n * sizeof *ids) == 0);
    cr_expect_eq(hm_tok_read(f, n - 1, 2, back, &err), HM_ERR_INVALID);
    cr_expect_eq(hm_tok_read(f, -1, 1, back, &err), HM_ERR_INVALID);
    hm_tok_close(f);
    hm_tok_close(NULL);
    free(back);
    free(ids);
    free(path);
    free(dir);
}

Test(tokfile, round_trip_width2) { round_trip(50304, 2); }
Test(tokfile, round_trip_width2_edge) { round_trip(65536, 2); }
Test(tokfile, round_trip_width4) { round_trip(65537, 4); }

Test(tokfile, empty_and_refusals)
{
    char *dir = tu_mkdtemp("tokfile");
    char *path = write_tokens(dir, "e.tok", 257, 256, NULL, 0);
    struct hm_tok_file *f;
    struct hm_error err;
    cr_assert_eq(hm_tok_open(path, &f, &err), HM_OK, "%s", err.msg);
    cr_expect_eq(hm_tok_count(f), 0);
    hm_tok_close(f);
    struct hm_tok_writer *w;
    /* exists without force */
    cr_expect_eq(hm_tok_writer_open(path, 257, 256, 0, &w, &err), HM_ERR_INVALID);
    cr_expect_eq(hm_tok_writer_open(path, 257, 257, HM_TOK_FORCE, &w, &err), HM_ERR_INVALID);
    cr_assert_eq(hm_tok_writer_open(path, 257, 256, HM_TOK_FORCE, &w, &err), HM_OK);
    int32_t bad[2] = {5, 257}, neg = -1;
    cr_expect_eq(hm_tok_writer_append(w, bad, 2, &err), HM_ERR_INVALID);
    cr_expect(strstr(err.msg, "257") != NULL, "%s", err.msg);
    cr_expect_eq(hm_tok_writer_append(w, &neg, 1, &err), HM_ERR_INVALID);
    cr_expect_eq(hm_tok_writer_count(w), 0);
    hm_tok_writer_abort(w);
    hm_tok_writer_abort(NULL);
    /* abort leaves the old file and no temp file */
    cr_assert_eq(hm_tok_open(path, &f, &err), HM_OK);
    hm_tok_close(f);
    char *out = NULL;
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "ls -A '%s'", dir);
    tu_run(cmd, &out, NULL);
    cr_expect_str_eq(out, "e.tok\n");
    free(out);
    cr_expect_eq(hm_tok_open("/nonexistent/x.tok", &f, &err), HM_ERR_IO);
    free(path);
    free(dir);
}

static void put32(char *p, uint32_t v) { memcpy(p, &v, 4); } /* little-endian host */
static void put64(char *p, uint64_t v) { memcpy(p, &v, 8); }

static void expect_corrupt(const char *dir, const char *name, const char *data, size_t len,
                           const char *needle)
{
    char *path = tu_path(dir, name);
    tu_write_file(path, data, len);
    struct hm_tok_file *f = NULL;
    struct hm_error err;
    hm_error_clear(&err);
    enum hm_status st = hm_tok_open(path, &f, &err);
    cr_expect_neq(st, HM_OK, "%s accepted", name);
    cr_expect_null(f);
    cr_expect(strstr(err.msg, needle) != NULL, "%s: message '%s' lacks '%s'", name, err.msg,
              needle);
    hm_tok_close(f);
    /* the same through the in-memory reader */
    st = hm_tok_open_memory(data, len, &f, &err);
    cr_expect_neq(st, HM_OK);
    free(path);
}

Test(tokfile, corruptions)
{
    char *dir = tu_mkdtemp("tokfile");
    int32_t ids[6] = {1, 2, 3, 0, 4, 0};
    char *path = write_tokens(dir, "good.tok", 10, 0, ids, 6);
    size_t len;
    char *good = tu_read_file(path, &len);
    cr_assert_eq(len, 48 + 12);
    char *b = malloc(len + 8);
#define FRESH() memcpy(b, good, len)
    FRESH(); b[0] = 'X';
    expect_corrupt(dir, "magic.tok", b, len, "bad magic");
    FRESH(); put32(b + 8, 2);
    expect_corrupt(dir, "version.tok", b, len, "version 2");
    FRESH(); put32(b + 12, 3);
    expect_corrupt(dir, "width.tok", b, len, "token width 3");
    FRESH(); put64(b + 16, 0);
    expect_corrupt(dir, "vocab0.tok", b, len, "vocabulary size is 0");
    FRESH(); put64(b + 16, 70000);
    expect_corrupt(dir, "vocabwide.tok", b, len, "2-byte");
    FRESH();
    expect_corrupt(dir, "trunc.tok", b, len - 1, "truncated");
    expect_corrupt(dir, "short.tok", b, 20, "truncated");
    expect_corrupt(dir, "zero.tok", b, 0, "truncated");
    FRESH(); b[len] = 0;
    expect_corrupt(dir, "trailing.tok", b, len + 1, "trailing");
    FRESH(); put64(b + 24, UINT64_MAX / 2);
    expect_corrupt(dir, "hugecount.tok", b, len, "token count");
    FRESH(); b[50] ^= 1;
    expect_corrupt(dir, "checksum.tok", b, len, "payload checksum mismatch");
    FRESH(); put32(b + 40, 10);
    expect_corrupt(dir, "eot.tok", b, len, "end-of-text");
    FRESH(); put32(b + 44, 1);
    expect_corrupt(dir, "reserved.tok", b, len, "reserved");
    /* an id >= vocab with a correct checksum */
    FRESH(); b[48 + 4] = 11;
    put64(b + 32, XXH3_64bits(b + 48, len - 48));
    expect_corrupt(dir, "id.tok", b, len, "token 2 has id 11");
    free(b);
    free(good);
    free(path);
    free(dir);
}
