/* test_text_source.c — documents out of archives built here with libarchive's
 * writer: tar, tar.gz, tar.xz, zip, a tar of xz-compressed tars (OpenWebText's
 * layout), a bare .xz, jsonl; corrupt inputs give errors. */
#include <archive.h>
#include <archive_entry.h>
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "archive_filters.h"
#include "text_source.h"

struct member {
    const char *name;
    const char *data;
};

static const struct member docs[] = {
    {"a.txt", "first document\n"},
    {"dir/b.txt", "second \xc3\xa9 document"},
    {"c.txt", ""},
    {"d.txt", "fourth"},
};
#define NDOCS 4

/* Writes members into an archive in memory. owned: free(). */
static char *make_archive(int format, int filter, const struct member *m, int n, size_t *len)
{
    size_t cap = 1 << 20;
    char *buf = malloc(cap);
    struct archive *a = archive_write_new();
    archive_write_set_format(a, format);
    if (filter)
        archive_write_add_filter(a, filter);
    archive_write_set_bytes_in_last_block(a, 1);
    cr_assert_eq(archive_write_open_memory(a, buf, cap, len), ARCHIVE_OK, "%s",
                 archive_error_string(a));
    for (int i = 0; i < n; i++) {
        struct archive_entry *e = archive_entry_new();
        archive_entry_set_pathname(e, m[i].name);
        archive_entry_set_filetype(e, AE_IFREG);
        archive_entry_set_perm(e, 0644);
        archive_entry_set_size(e, (la_int64_t)strlen(m[i].data));
        cr_assert_eq(archive_write_header(a, e), ARCHIVE_OK, "%s", archive_error_string(a));
        archive_write_data(a, m[i].data, strlen(m[i].data));
        archive_entry_free(e);
    }
    cr_assert_eq(archive_write_close(a), ARCHIVE_OK, "%s", archive_error_string(a));
    archive_write_free(a);
    return buf;
}

/* Reads every document; compares with want: [n]. */
static void expect_docs(struct hm_text_source *src, const struct member *want, int n,
                        const char *prefix)
{
    const char *doc, *name;
    size_t len;
    struct hm_error err;
    for (int i = 0; i < n; i++) {
        int r = hm_text_source_next(src, &doc, &len, &name, &err);
        cr_assert_eq(r, 1, "document %d: r=%d %s", i, r, err.msg);
        cr_expect_eq(len, strlen(want[i].data), "document %d", i);
        cr_expect(memcmp(doc, want[i].data, len) == 0, "document %d content", i);
        char full[512];
        snprintf(full, sizeof full, "%s%s", prefix, want[i].name);
        cr_expect_str_eq(name, full);
    }
    cr_expect_eq(hm_text_source_next(src, &doc, &len, &name, &err), 0, "%s", err.msg);
    cr_expect_eq(hm_text_source_docs(src), n);
}

static void check_format(int format, int filter, const char *file)
{
    size_t len;
    char *buf = make_archive(format, filter, docs, NDOCS, &len);
    char *dir = tu_mkdtemp("textsrc");
    char *path = tu_path(dir, file);
    tu_write_file(path, buf, len);
    struct hm_text_source *src;
    struct hm_error err;
    cr_assert_eq(hm_text_source_open(path, &src, &err), HM_OK, "%s", err.msg);
    expect_docs(src, docs, NDOCS, "");
    cr_expect_gt(hm_text_source_bytes_read(src), 0);
    hm_text_source_close(src);
    /* and from memory */
    cr_assert_eq(hm_text_source_open_memory(buf, len, file, &src, &err), HM_OK, "%s", err.msg);
    expect_docs(src, docs, NDOCS, "");
    hm_text_source_close(src);
    free(buf);
    free(path);
    free(dir);
}

Test(text_source, tar) { check_format(ARCHIVE_FORMAT_TAR_PAX_RESTRICTED, 0, "x.tar"); }
Test(text_source, tar_gz) { check_format(ARCHIVE_FORMAT_TAR_USTAR, ARCHIVE_FILTER_GZIP, "x.tar.gz"); }
Test(text_source, tar_xz) { check_format(ARCHIVE_FORMAT_TAR_PAX_RESTRICTED, ARCHIVE_FILTER_XZ, "x.tar.xz"); }
Test(text_source, zip) { check_format(ARCHIVE_FORMAT_ZIP, 0, "x.zip"); }

Test(text_source, nested_tar_of_xz)
{
    /* OpenWebText: urlsf_subsetNN.tar holding NN-xxx.xz, each an xz'd tar of .txt */
    size_t l1, l2, lo;
    char *in1 = make_archive(ARCHIVE_FORMAT_TAR_USTAR, ARCHIVE_FILTER_XZ, docs, 2, &l1);
    char *in2 = make_archive(ARCHIVE_FORMAT_TAR_USTAR, ARCHIVE_FILTER_XZ, docs + 2, 2, &l2);
    char *b1 = malloc(l1 + 1), *b2 = malloc(l2 + 1);
    memcpy(b1, in1, l1);
    b1[l1] = 0;
    memcpy(b2, in2, l2);
    b2[l2] = 0;
    /* binary members: write them with explicit sizes */
    struct archive *a = archive_write_new();
    archive_write_set_format_ustar(a);
    size_t cap = 1 << 20;
    char *outer = malloc(cap);
    archive_write_open_memory(a, outer, cap, &lo);
    const char *names[2] = {"sub/0001.xz", "sub/0002.xz"};
    const char *datas[2] = {b1, b2};
    size_t lens[2] = {l1, l2};
    for (int i = 0; i < 2; i++) {
        struct archive_entry *e = archive_entry_new();
        archive_entry_set_pathname(e, names[i]);
        archive_entry_set_filetype(e, AE_IFREG);
        archive_entry_set_perm(e, 0644);
        archive_entry_set_size(e, (la_int64_t)lens[i]);
        archive_write_header(a, e);
        archive_write_data(a, datas[i], lens[i]);
        archive_entry_free(e);
    }
    archive_write_close(a);
    archive_write_free(a);
    struct hm_text_source *src;
    struct hm_error err;
    cr_assert_eq(hm_text_source_open_memory(outer, lo, "owt.tar", &src, &err), HM_OK);
    const char *doc, *name;
    size_t len;
    const char *want_names[4] = {"sub/0001.xz/a.txt", "sub/0001.xz/dir/b.txt",
                                 "sub/0002.xz/c.txt", "sub/0002.xz/d.txt"};
    for (int i = 0; i < 4; i++) {
        cr_assert_eq(hm_text_source_next(src, &doc, &len, &name, &err), 1, "%d: %s", i, err.msg);
        cr_expect_str_eq(name, want_names[i]);
        cr_expect_eq(len, strlen(docs[i].data));
        cr_expect(memcmp(doc, docs[i].data, len) == 0);
    }
    cr_expect_eq(hm_text_source_next(src, &doc, &len, &name, &err), 0);
    hm_text_source_close(src);
    free(outer), free(in1), free(in2), free(b1), free(b2);
}

Test(text_source, plain_bare_xz_and_jsonl)
{
    char *dir = tu_mkdtemp("textsrc");
    char *txt = tu_path(dir, "doc.txt");
    tu_write_file(txt, "just text\n\nwith lines", 21);
    struct hm_text_source *src;
    struct hm_error err;
    const char *doc, *name;
    size_t len;
    cr_assert_eq(hm_text_source_open(txt, &src, &err), HM_OK, "%s", err.msg);
    cr_assert_eq(hm_text_source_next(src, &doc, &len, &name, &err), 1, "%s", err.msg);
    cr_expect_eq(len, 21);
    cr_expect(memcmp(doc, "just text\n\nwith lines", 21) == 0);
    cr_expect_eq(hm_text_source_next(src, &doc, &len, &name, &err), 0);
    hm_text_source_close(src);
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "xz -k '%s' && printf '{\"text\":\"one\"}\\n\\n{\"text\":\"two\\\\n\"}\\n' > '%s/d.jsonl' && xz -k '%s/d.jsonl'", txt, dir, dir);
    cr_assert_eq(tu_run(cmd, NULL, NULL), 0);
    char *xzp = tu_path(dir, "doc.txt.xz");
    cr_assert_eq(hm_text_source_open(xzp, &src, &err), HM_OK, "%s", err.msg);
    cr_assert_eq(hm_text_source_next(src, &doc, &len, &name, &err), 1, "%s", err.msg);
    cr_expect_eq(len, 21);
    cr_expect(strstr(name, "doc.txt") != NULL);
    cr_expect_eq(hm_text_source_next(src, &doc, &len, &name, &err), 0);
    hm_text_source_close(src);
    const char *jsonls[2] = {"d.jsonl", "d.jsonl.xz"};
    for (int k = 0; k < 2; k++) {
        char *jp = tu_path(dir, jsonls[k]);
        cr_assert_eq(hm_text_source_open(jp, &src, &err), HM_OK, "%s", err.msg);
        cr_assert_eq(hm_text_source_next(src, &doc, &len, &name, &err), 1, "%s", err.msg);
        cr_expect(len == 3 && memcmp(doc, "one", 3) == 0);
        cr_expect(strstr(name, ":1") != NULL, "%s", name);
        cr_assert_eq(hm_text_source_next(src, &doc, &len, &name, &err), 1, "%s", err.msg);
        cr_expect(len == 4 && memcmp(doc, "two\n", 4) == 0);
        cr_expect(strstr(name, ":3") != NULL, "%s", name);
        cr_expect_eq(hm_text_source_next(src, &doc, &len, &name, &err), 0);
        hm_text_source_close(src);
        free(jp);
    }
    free(xzp), free(txt), free(dir);
}

Test(text_source, errors)
{
    struct hm_text_source *src;
    struct hm_error err;
    const char *doc, *name;
    size_t len;
    cr_expect_eq(hm_text_source_open("/nonexistent/file.txt", &src, &err), HM_ERR_IO);
    cr_expect(strstr(err.msg, "No such file") != NULL, "%s", err.msg);
    /* jsonl with a bad line 2 */
    const char *bad = "{\"text\":\"ok\"}\n{\"txt\":1}\n";
    cr_assert_eq(hm_text_source_open_memory(bad, strlen(bad), "x.jsonl", &src, &err), HM_OK);
    cr_expect_eq(hm_text_source_next(src, &doc, &len, &name, &err), 1);
    cr_expect_eq(hm_text_source_next(src, &doc, &len, &name, &err), -1);
    cr_expect(strstr(err.msg, "line 2") != NULL, "%s", err.msg);
    hm_text_source_close(src);
    /* corrupt tar.xz: truncated in the middle, and a flipped byte */
    size_t n;
    char *buf = make_archive(ARCHIVE_FORMAT_TAR_USTAR, ARCHIVE_FILTER_XZ, docs, NDOCS, &n);
    for (int k = 0; k < 2; k++) {
        if (k == 1)
            buf[n / 2] ^= 0x55;
        size_t m = k == 0 ? n / 2 : n;
        int r = 0;
        hm_error_clear(&err);
        if (hm_text_source_open_memory(buf, m, "bad.tar.xz", &src, &err) == HM_OK) {
            while ((r = hm_text_source_next(src, &doc, &len, &name, &err)) == 1)
                ;
            hm_text_source_close(src);
            /* failures while reading name the archive or the member */
            cr_expect(strstr(err.msg, "bad.tar.xz") != NULL || strstr(err.msg, ".txt") != NULL,
                      "message names no archive or member: %s", err.msg);
        } else {
            r = -1; /* failed while detecting the format; the tool names the path */
        }
        cr_expect_eq(r, -1, "case %d: corrupt archive not reported", k);
        cr_expect(err.msg[0] != 0);
        cr_expect(err.msg[0] != 0);
    }
    free(buf);
}

/* Reads src to its end; returns the last next() result (0 end, -1 error). */
static int drain(struct hm_text_source *src, struct hm_error *err)
{
    const char *doc, *name;
    size_t len;
    int r;
    while ((r = hm_text_source_next(src, &doc, &len, &name, err)) == 1)
        ;
    return r;
}

/* Round 3: data after a tar's end-of-archive marker is refused at every
 * level (zero padding is fine); an external-only compression is refused by
 * name; a jsonl "text" holding \u0000 comes back whole. */
Test(text_source, round3_tails_compressions_nul)
{
    struct hm_text_source *src;
    struct hm_error err;
    for (int filter = 0; filter < 2; filter++) {
        size_t n;
        char *one = make_archive(ARCHIVE_FORMAT_TAR_USTAR, filter ? ARCHIVE_FILTER_GZIP : 0,
                                 docs, NDOCS, &n);
        char *two = malloc(2 * n + 4096);
        memcpy(two, one, n);
        memcpy(two + n, one, n); /* cat x.tar x.tar (or two gzip members) */
        cr_assert_eq(hm_text_source_open_memory(two, 2 * n, "two.tar", &src, &err), HM_OK,
                     "%s", err.msg);
        cr_expect_eq(drain(src, &err), -1, "filter %d: concatenated tars accepted", filter);
        cr_expect(strstr(err.msg, "end-of-archive") != NULL, "%s", err.msg);
        hm_text_source_close(src);
        if (!filter) {
            memset(two + n, 0, 4096); /* zero padding after the marker */
            cr_assert_eq(hm_text_source_open_memory(two, n + 4096, "pad.tar", &src, &err), HM_OK);
            expect_docs(src, docs, NDOCS, "");
            hm_text_source_close(src);
        }
        free(one);
        free(two);
    }
    static const char lrz[] = "LRZI\0\6xxxxxxxxxxxxxxxxxx";
    cr_assert_eq(hm_text_source_open_memory(lrz, sizeof lrz, "x.txt", &src, &err), HM_OK);
    cr_expect_eq(drain(src, &err), -1);
    cr_expect(strstr(err.msg, "lrzip") && strstr(err.msg, "external program"), "%s", err.msg);
    hm_text_source_close(src);
    const char *j = "{\"text\": \"a\\u0000b\\u00e9\", \"x\": \"\\u0000\"}\n";
    cr_assert_eq(hm_text_source_open_memory(j, strlen(j), "n.jsonl", &src, &err), HM_OK);
    const char *doc, *name;
    size_t len;
    cr_assert_eq(hm_text_source_next(src, &doc, &len, &name, &err), 1, "%s", err.msg);
    cr_expect_eq(len, 5);
    cr_expect(memcmp(doc, "a\0b\xc3\xa9", 5) == 0);
    hm_text_source_close(src);
}

/* Which decompressions hm registers: lrzip and grzip are external programs
 * in every libarchive (never registered); gzip is zlib, in-process. */
Test(text_source, only_in_process_filters_are_registered)
{
    cr_expect_not(hm_archive_filter_in_process(archive_read_support_filter_lrzip));
    cr_expect_not(hm_archive_filter_in_process(archive_read_support_filter_grzip));
    cr_expect(hm_archive_filter_in_process(archive_read_support_filter_gzip));
    struct archive *a = archive_read_new();
    cr_assert_not_null(a);
    cr_expect_eq(hm_archive_support_in_process(a, archive_read_support_filter_lrzip), 0);
    cr_expect_eq(hm_archive_support_in_process(a, archive_read_support_filter_gzip), 1);
    archive_read_free(a);
}
