/* bufs.c — backend buffers for the kernel tests (bufs.h). */
#include "bufs.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct tb_buf {
    const struct hm_backend *be;
    void *p;
    size_t bytes; /* asked for; the guard follows */
};

static struct tb_buf *g_bufs;
static size_t g_n, g_cap;

struct tb_kept {
    char *key;
    void *data;
    size_t bytes;
};

static struct tb_kept *g_kept;
static size_t g_n_kept;

/* ---- the backends under test ---------------------------------------------- */

/* 1 if name is in the HM_TEST_BACKENDS list (or there is no list). */
static int selected(const char *name)
{
    const char *list = getenv("HM_TEST_BACKENDS");
    if (!list || !*list)
        return 1;
    size_t n = strlen(name);
    for (const char *s = list; *s;) {
        const char *e = strchr(s, ',');
        size_t len = e ? (size_t)(e - s) : strlen(s);
        if (len == n && strncmp(s, name, n) == 0)
            return 1;
        s += len + (e != NULL);
    }
    return 0;
}

/* 1 if a device backend that does not open here may be left out: not
 * named in HM_TEST_BACKENDS, and not cuda under HM_REQUIRE_CUDA=1. */
static int may_skip(const char *name)
{
    const char *list = getenv("HM_TEST_BACKENDS");
    if (list && *list)
        return 0; /* named: it is under test */
    const char *req = getenv("HM_REQUIRE_CUDA");
    return !(req && *req && strcmp(req, "0") != 0 && strcmp(name, "cuda") == 0);
}

/* Every name of HM_TEST_BACKENDS opens, and so does cuda under
 * HM_REQUIRE_CUDA=1 (named or not: a build without the CUDA backend does
 * not list it); otherwise the test fails naming it, so that a filtered
 * run cannot pass by testing nothing. */
static void check_required(void)
{
    char names[512] = "";
    const char *list = getenv("HM_TEST_BACKENDS");
    if (list && *list)
        snprintf(names, sizeof names, "%s", list);
    const char *req = getenv("HM_REQUIRE_CUDA");
    if (req && *req && strcmp(req, "0") != 0 && !(list && *list))
        snprintf(names, sizeof names, "cuda");
    char *save = NULL;
    for (char *n = strtok_r(names, ",", &save); n; n = strtok_r(NULL, ",", &save)) {
        const struct hm_backend *be = NULL;
        struct hm_error err;
        enum hm_status st = hm_backend_acquire(n, &be, &err);
        cr_assert_eq(st, HM_OK, "backend '%s' is required (%s) but does not open: %s", n,
                     list && *list ? "HM_TEST_BACKENDS" : "HM_REQUIRE_CUDA=1", err.msg);
    }
}

const struct hm_backend *tb_backend(int i)
{
    const char *name;
    if (i == 0)
        check_required();
    for (int k = 0; (name = hm_backend_name_at(k)) != NULL; k++) {
        const struct hm_backend *be = NULL;
        struct hm_error err;
        if (!selected(name))
            continue;
        enum hm_status st = hm_backend_acquire(name, &be, &err);
        if (st == HM_ERR_UNSUPPORTED && may_skip(name)) {
            /* a device backend on a machine without the device: said once */
            static int said;
            if (!said++)
                fprintf(stderr, "SKIP backend '%s': %s (HM_REQUIRE_CUDA=1 makes this a "
                        "failure)\n", name, err.msg);
            continue;
        }
        cr_assert_eq(st, HM_OK, "backend '%s' is registered but does not open: %s", name,
                     err.msg);
        if (i-- > 0)
            continue;
        return be;
    }
    return NULL;
}

int tb_count(void)
{
    int n = 0;
    while (tb_backend(n))
        n++;
    return n;
}

/* ---- buffers ----------------------------------------------------------------- */

static void sentinel(unsigned char *dst, size_t off, size_t n)
{
    const uint32_t bits = TB_SENT_BITS;
    unsigned char pat[4];
    memcpy(pat, &bits, 4);
    for (size_t i = 0; i < n; i++)
        dst[i] = pat[(off + i) % 4];
}

/* alloc bytes + the guard, the guard written; recorded. */
static void *alloc_guarded(const struct hm_backend *be, size_t bytes)
{
    unsigned char *p = hm_backend_alloc(be, bytes + TB_GUARD);
    cr_assert(p, "%s: out of memory allocating %zu bytes", hm_backend_name(be), bytes);
    unsigned char g[TB_GUARD];
    sentinel(g, bytes, TB_GUARD);
    hm_backend_upload(be, p + bytes, g, TB_GUARD);
    if (g_n == g_cap) {
        g_cap = g_cap ? 2 * g_cap : 64;
        g_bufs = realloc(g_bufs, g_cap * sizeof *g_bufs);
        cr_assert(g_bufs);
    }
    g_bufs[g_n++] = (struct tb_buf){be, p, bytes};
    return p;
}

void *tb_in(const struct hm_backend *be, const void *host, size_t bytes)
{
    if (!host)
        return NULL;
    void *p = alloc_guarded(be, bytes);
    hm_backend_upload(be, p, host, bytes);
    return p;
}

void *tb_out(const struct hm_backend *be, size_t bytes)
{
    void *p = alloc_guarded(be, bytes);
    if (bytes) {
        unsigned char *s = malloc(bytes);
        cr_assert(s);
        sentinel(s, 0, bytes);
        hm_backend_upload(be, p, s, bytes);
        free(s);
    }
    return p;
}

void tb_get(const struct hm_backend *be, void *host, const void *buf, size_t bytes)
{
    hm_backend_download(be, host, buf, bytes);
}

void tb_free_all(const struct hm_backend *be)
{
    size_t kept = 0;
    int n_mine = 0;
    for (size_t i = 0; i < g_n; i++) {
        struct tb_buf *b = &g_bufs[i];
        if (b->be != be) {
            g_bufs[kept++] = *b;
            continue;
        }
        unsigned char got[TB_GUARD], want[TB_GUARD];
        hm_backend_download(be, got, (unsigned char *)b->p + b->bytes, TB_GUARD);
        sentinel(want, b->bytes, TB_GUARD);
        if (memcmp(got, want, TB_GUARD) != 0) {
            size_t at = 0;
            while (got[at] == want[at])
                at++;
            cr_expect_fail("%s: buffer %d of this case (%zu bytes) written past its end, at "
                           "byte %zu of the guard",
                           hm_backend_name(be), n_mine, b->bytes, at);
        }
        hm_backend_free(be, &b->p);
        n_mine++;
    }
    g_n = kept;
    struct hm_error err;
    enum hm_status s = hm_backend_sync(be, &err);
    cr_expect_eq(s, HM_OK, "%s: %s", hm_backend_name(be), s == HM_OK ? "" : err.msg);
    if (getenv("HM_TB_TRACE"))
        fprintf(stderr, "tb: case on %s\n", hm_backend_name(be));
}

/* ---- ref's bits --------------------------------------------------------------- */

int tb_ref_bits(const struct hm_backend *be)
{
    const char *n = hm_backend_name(be);
    return strcmp(n, "ref") == 0 || strcmp(n, "checked") == 0;
}

void tb_expect_ref_bits(const struct hm_backend *be, const char *what, const void *got,
                        const void *want, size_t bytes)
{
    if (!tb_ref_bits(be))
        return;
    if (getenv("HM_TB_TRACE"))
        fprintf(stderr, "tb: %s = ref bit for bit: %s\n", hm_backend_name(be), what);
    if (memcmp(got, want, bytes) == 0)
        return;
    size_t at = 0;
    while (((const unsigned char *)got)[at] == ((const unsigned char *)want)[at])
        at++;
    cr_expect_fail("%s: %s is not ref's result bit for bit (first difference at byte %zu of "
                   "%zu)",
                   hm_backend_name(be), what, at, bytes);
}

void tb_keep(const struct hm_backend *be, const char *key, const void *host, size_t bytes)
{
    size_t i = 0;
    while (i < g_n_kept && strcmp(g_kept[i].key, key) != 0)
        i++;
    if (strcmp(hm_backend_name(be), "ref") == 0) {
        if (i == g_n_kept) {
            g_kept = realloc(g_kept, (g_n_kept + 1) * sizeof *g_kept);
            cr_assert(g_kept);
            g_kept[g_n_kept++] = (struct tb_kept){strdup(key), NULL, 0};
        }
        free(g_kept[i].data);
        g_kept[i].data = malloc(bytes ? bytes : 1);
        cr_assert(g_kept[i].data);
        memcpy(g_kept[i].data, host, bytes);
        g_kept[i].bytes = bytes;
        return;
    }
    if (!tb_ref_bits(be) || i == g_n_kept || !g_kept[i].data)
        return;
    cr_expect_eq(bytes, g_kept[i].bytes, "%s: %s: %zu bytes, ref kept %zu", hm_backend_name(be),
                 key, bytes, g_kept[i].bytes);
    if (bytes == g_kept[i].bytes)
        tb_expect_ref_bits(be, key, host, g_kept[i].data, bytes);
    free(g_kept[i].data);
    g_kept[i].data = NULL;
}
