/* fuzz_bundle.c — libFuzzer target for the bundle reader and verifier
 * (libconvert/bundle/bundle_read.c, bundle_verify.c) over both kinds of
 * bundle. First input byte even: the rest is an archive bundle, opened
 * from memory (hm_bundle_open_memory + hm_bundle_check + every file's data
 * and hash) and verified from a file (hm_bundle_verify). Odd: the rest is
 * a file set, unpacked as a small archive (hm_archive_read_memory) into a
 * fresh folder, which is then opened and verified the same way as a folder
 * bundle. Oracle beyond the sanitizers: refusals carry a message; an
 * opened bundle has MANIFEST.json, sorted unique names, no housekeeping
 * entry, and the file sizes its data has; verify either runs or says why. */
#define _XOPEN_SOURCE 700
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "archive_read.h"
#include "bundle.h"

#define CHECK(c)                                                                   \
    do {                                                                           \
        if (!(c)) {                                                                \
            fprintf(stderr, "fuzz_bundle: check failed: %s (line %d)\n", #c, __LINE__); \
            abort();                                                               \
        }                                                                          \
    } while (0)

static char root[256];

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

static void rm_tree(const char *dir)
{
    CHECK(nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS) == 0);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    const char *t = getenv("TMPDIR");
    snprintf(root, sizeof root, "%s/fuzz_bundle.%d", t && *t ? t : "/tmp", (int)getpid());
    CHECK(mkdir(root, 0700) == 0);
    return 0;
}

static void check_open(struct hm_bundle *b)
{
    int64_t n = hm_bundle_n_files(b);
    CHECK(hm_bundle_find(b, HM_BUNDLE_MANIFEST) >= 0);
    for (int64_t i = 0; i < n; i++) {
        const char *name = hm_bundle_file_name(b, i);
        CHECK(name && !hm_bundle_is_housekeeping(name));
        CHECK(i == 0 || strcmp(hm_bundle_file_name(b, i - 1), name) < 0);
        CHECK(hm_bundle_find(b, name) == i);
        const void *d;
        size_t len;
        uint64_t h;
        struct hm_error err;
        if (hm_bundle_file_data(b, i, &d, &len, &err) == HM_OK)
            CHECK(len == hm_bundle_file_size(b, i) && d);
        else
            CHECK(err.msg[0]);
        if (hm_bundle_file_xxh3(b, i, &h, &err) != HM_OK)
            CHECK(err.msg[0]);
    }
    struct hm_error err;
    if (hm_bundle_check(b, &err) != HM_OK)
        CHECK(err.msg[0]);
    struct hm_st_file *st = NULL;
    if (hm_bundle_open_member(b, HM_BUNDLE_WEIGHTS, &st, &err) == HM_OK)
        hm_st_close(st);
    else
        CHECK(err.msg[0] && !st);
}

static void verify(const char *path)
{
    struct hm_bundle_verify_stats s;
    struct hm_error err;
    if (hm_bundle_verify(path, NULL, NULL, &s, &err) != HM_OK)
        CHECK(err.msg[0]);
    else
        CHECK(s.findings >= 0 && s.files >= 0 && s.tensors >= 0);
}

/* The file set in data: [size] unpacked into dir; 0 when it is not one. */
static int unpack(const uint8_t *data, size_t size, const char *dir)
{
    struct hm_archive *a;
    struct hm_error err;
    struct hm_archive_limits lim = {.max_total = 16u << 20, .max_entries = 64};
    if (hm_archive_read_memory(data, size, &lim, &a, &err) != HM_OK)
        return 0;
    for (int64_t i = 0; i < hm_archive_n_members(a); i++) {
        const struct hm_archive_member *m = hm_archive_member_at(a, i);
        char p[4400];
        snprintf(p, sizeof p, "%s/%s", dir, m->name);
        for (char *q = p + strlen(dir) + 1; (q = strchr(q, '/')); q++) {
            *q = '\0';
            mkdir(p, 0700);
            *q = '/';
        }
        FILE *f = fopen(p, "wb");
        if (f) {
            if (m->size)
                fwrite(m->data, 1, m->size, f);
            fclose(f);
        }
    }
    hm_archive_free(a);
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    struct hm_bundle *b = NULL;
    struct hm_error err;
    char path[300];
    if (data[0] % 2 == 0) {
        if (hm_bundle_open_memory(data + 1, size - 1, "fuzz", &b, &err) == HM_OK) {
            check_open(b);
            hm_bundle_close(b);
        } else {
            CHECK(!b && err.msg[0]);
        }
        snprintf(path, sizeof path, "%s/in.bin", root);
        FILE *f = fopen(path, "wb");
        CHECK(f);
        if (size > 1)
            CHECK(fwrite(data + 1, 1, size - 1, f) == size - 1);
        CHECK(fclose(f) == 0);
        verify(path);
        unlink(path);
        return 0;
    }
    snprintf(path, sizeof path, "%s/d", root);
    CHECK(mkdir(path, 0700) == 0);
    if (unpack(data + 1, size - 1, path)) {
        if (hm_bundle_open(path, &b, &err) == HM_OK) {
            check_open(b);
            hm_bundle_close(b);
        } else {
            CHECK(!b && err.msg[0]);
        }
        verify(path);
    }
    rm_tree(path);
    return 0;
}
