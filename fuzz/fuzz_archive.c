/* fuzz_archive.c — libFuzzer target for hm_archive_read_memory()
 * (formats/archive_read.c): the input is an archive held in memory, read
 * with a 64 MiB cap, once plainly and once with a member vet that skips
 * some names and bounds the others (the path hm_bundle_open takes).
 * Oracle beyond the sanitizers: an accepted archive's members are sorted,
 * unique, safe names (no absolute path, no '.' or '..' component, no
 * backslash, no empty component), each found by hm_archive_find, within the
 * caps, and reading the same bytes again gives the same members. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "archive_read.h"

#define CHECK(c)                                                                    \
    do {                                                                            \
        if (!(c)) {                                                                 \
            fprintf(stderr, "fuzz_archive: check failed: %s (line %d)\n", #c, __LINE__); \
            abort();                                                                \
        }                                                                           \
    } while (0)

#define CAP (4u << 20)
#define MEMBER_CAP (1u << 20)

static int safe_name(const char *s)
{
    if (!s[0] || s[0] == '/' || strchr(s, '\\'))
        return 0;
    for (const char *p = s;;) {
        size_t k = strcspn(p, "/");
        if (k == 0 || (k == 1 && p[0] == '.') || (k == 2 && p[0] == '.' && p[1] == '.'))
            return 0;
        if (!p[k])
            return 1;
        p += k + 1;
    }
}

static enum hm_status vet(void *ctx, const char *name, int64_t declared,
                          struct hm_archive_vet *v, struct hm_error *err)
{
    (void)ctx, (void)declared, (void)err;
    v->skip = name[0] == 's';
    v->max_size = MEMBER_CAP;
    return name[0] == 'x' ? hm_error_set(err, HM_ERR_INVALID, "refused '%s'", name) : HM_OK;
}

static enum hm_status kept(void *ctx, const char *name, const void *data, size_t size,
                           struct hm_error *err)
{
    (void)name, (void)err;
    CHECK(size <= MEMBER_CAP && (data || size == 0));
    ++*(int *)ctx;
    return HM_OK;
}

static void check_archive(const struct hm_archive *a, int vetted)
{
    uint64_t total = 0;
    int64_t n = hm_archive_n_members(a);
    CHECK(n >= 0 && n <= HM_ARCHIVE_MAX_ENTRIES);
    for (int64_t i = 0; i < n; i++) {
        const struct hm_archive_member *m = hm_archive_member_at(a, i);
        CHECK(m && m->name && safe_name(m->name));
        CHECK(i == 0 || strcmp(hm_archive_member_at(a, i - 1)->name, m->name) < 0);
        CHECK(hm_archive_find(a, m->name) == i);
        CHECK(m->size == 0 || m->data);
        CHECK(!vetted || (m->size <= MEMBER_CAP && m->name[0] != 's' && m->name[0] != 'x'));
        total += m->size;
    }
    CHECK(total <= CAP);
    CHECK(hm_archive_member_at(a, n) == NULL && hm_archive_member_at(a, -1) == NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct hm_archive *a = NULL, *b = NULL;
    struct hm_error err;
    struct hm_archive_limits lim = {.max_total = CAP};
    if (hm_archive_read_memory(data, size, &lim, &a, &err) == HM_OK) {
        check_archive(a, 0);
        CHECK(hm_archive_read_memory(data, size, &lim, &b, &err) == HM_OK);
        CHECK(hm_archive_n_members(a) == hm_archive_n_members(b));
        for (int64_t i = 0; i < hm_archive_n_members(a); i++) {
            const struct hm_archive_member *x = hm_archive_member_at(a, i),
                                           *y = hm_archive_member_at(b, i);
            CHECK(strcmp(x->name, y->name) == 0 && x->size == y->size);
            CHECK(x->size == 0 || memcmp(x->data, y->data, x->size) == 0);
        }
        hm_archive_free(b);
    } else {
        CHECK(a == NULL && err.msg[0]);
    }
    hm_archive_free(a);
    int n_kept = 0;
    struct hm_archive_limits vl = {.max_total = CAP, .member = vet, .kept = kept, .ctx = &n_kept};
    a = NULL;
    if (hm_archive_read_memory(data, size, &vl, &a, &err) == HM_OK) {
        check_archive(a, 1);
        CHECK(n_kept >= hm_archive_n_members(a));
    } else {
        CHECK(a == NULL && err.msg[0]);
    }
    hm_archive_free(a);
    return 0;
}
