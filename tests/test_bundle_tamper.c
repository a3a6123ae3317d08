/* test_bundle_tamper.c — what hm-verify bundle and the bundle reader refuse:
 * single-bit flips inside every member's data (a folder bundle and a plain
 * tar in place; compressed archives repacked from tampered content, plus
 * raw flips of compressed bytes, which may leave the archive unreadable);
 * unsafe archive entries ('..', absolute paths, symlinks, hard links,
 * devices, FIFOs, duplicates, a file holding another entry, a manifest
 * listing an absent file) refused with nothing written anywhere; the
 * memory caps; HF-cache-style symlinked folders (followed); inputs that are
 * not bundles (exit 2); members vetted before they are inflated (unlisted,
 * longer than listed), bytes after a tar's end, housekeeping entries. */
#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "archive_read.h"
#include "bundle.h"
#include "bundle_fixture.h"
#include "checkpoint.h"
#include "fileio.h"
#include "testutil.h"

static char *g_dir;         /* the test's folder */
static char g_bundle[4200]; /* a folder bundle of a llama hedgemamba */
static char g_ck[4200];

static int run(char **out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int run(char **out, const char *fmt, ...)
{
    char cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    char *o = NULL, *e = NULL;
    int rc = tu_run(cmd, &o, &e);
    cr_assert_lt(rc, 128, "crashed (rc %d): %s", rc, cmd);
    if (out) {
        size_t n = strlen(o) + strlen(e) + 1;
        *out = malloc(n);
        snprintf(*out, n, "%s%s", o, e);
    }
    free(o);
    free(e);
    return rc;
}

static void setup(void)
{
    g_dir = tu_mkdtemp("bundle-tamper");
    snprintf(g_ck, sizeof g_ck, "%s/m.st", g_dir);
    snprintf(g_bundle, sizeof g_bundle, "%s/b", g_dir);
    tu_bundle_model(g_ck, HM_FAMILY_LLAMA, HM_MIXER_HEDGEMAMBA, HM_DTYPE_F16, NULL, 17);
    cr_assert_eq(run(NULL, "%s/hm-pack %s -o %s --bytes", HM_BIN_DIR, g_ck, g_bundle), 0);
}

static void teardown(void)
{
    char cmd[4300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    cr_assert_eq(system(cmd), 0);
    free(g_dir);
}

static void flip(char *path_or_null, char *buf, size_t pos, int bit)
{
    if (buf) {
        buf[pos] ^= (char)(1 << bit);
        return;
    }
    FILE *f = fopen(path_or_null, "r+b");
    cr_assert_not_null(f);
    fseek(f, (long)pos, SEEK_SET);
    int c = fgetc(f);
    fseek(f, (long)pos, SEEK_SET);
    fputc(c ^ (1 << bit), f);
    fclose(f);
}

/* Start of the data section of a safetensors file held in buf. */
static size_t st_data_start(const char *buf)
{
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--)
        n = n << 8 | (unsigned char)buf[i];
    return 8 + (size_t)n;
}

/* pos[k] for k < n: spread evenly over [lo, hi), plus a seeded jitter. */
static size_t spread(size_t lo, size_t hi, int k, int n, uint64_t *s)
{
    size_t span = hi - lo, step = span / (size_t)n;
    size_t p = lo + (size_t)k * step + (step ? tu_rand_u64(s) % step : 0);
    return p < hi ? p : hi - 1;
}

Test(tamper, flips_in_a_folder_bundle, .init = setup, .fini = teardown)
{
    int n;
    struct tu_entry *e = tu_read_dir_entries(g_bundle, &n);
    cr_assert_eq(n, 5);
    uint64_t s = 1;
    int total = 0, tensor_named = 0;
    for (int i = 0; i < n; i++) {
        char path[4400];
        snprintf(path, sizeof path, "%s/%s", g_bundle, e[i].name);
        int weights = strcmp(e[i].name, HM_BUNDLE_WEIGHTS) == 0;
        size_t data0 = weights ? st_data_start(e[i].data) : 0;
        int flips = weights ? 200 : 100;
        for (int k = 0; k < flips; k++) {
            /* weights: half in the header, half among the tensor bytes */
            size_t pos = weights ? (k < 100 ? spread(0, data0, k, 100, &s)
                                            : spread(data0, e[i].len, k - 100, 100, &s))
                                 : spread(0, e[i].len, k, flips, &s);
            int bit = (int)(tu_rand_u64(&s) % 8);
            flip(path, NULL, pos, bit);
            char *out;
            int rc = run(&out, "%s/hm-verify bundle %s", HM_BIN_DIR, g_bundle);
            cr_assert_eq(rc, 1, "flip of bit %d at byte %zu of '%s' gave exit %d:\n%s", bit, pos,
                         e[i].name, rc, out);
            char want[300]; /* a flipped hash digit may be the manifest's or the file's */
            snprintf(want, sizeof want, strcmp(e[i].name, HM_BUNDLE_MANIFEST) ? "'%s'" : "%s",
                     e[i].name);
            cr_assert(strstr(out, want), "the report does not name '%s':\n%s", e[i].name, out);
            if (weights && pos >= data0) {
                cr_assert(strstr(out, "tensor '"), "a flip in tensor bytes names no tensor:\n%s",
                          out);
                tensor_named++;
            }
            free(out);
            flip(path, NULL, pos, bit);
            total++;
        }
    }
    cr_assert_eq(run(NULL, "%s/hm-verify bundle %s", HM_BIN_DIR, g_bundle), 0);
    cr_log_info("folder bundle: %d single-bit flips over %d members, all exit 1 (%d inside "
                "tensor data, each naming the tensor)", total, n, tensor_named);
    tu_free_entries(e, n);
}

/* Data ranges of a plain (ustar) tar's members. */
static int tar_members(const char *buf, size_t len, size_t *off, size_t *size, char names[][64])
{
    int n = 0;
    for (size_t p = 0; p + 512 <= len && buf[p];) {
        size_t sz = (size_t)strtoull(buf + p + 124, NULL, 8);
        snprintf(names[n], 64, "%.63s", buf + p);
        off[n] = p + 512;
        size[n++] = sz;
        p += 512 + (sz + 511) / 512 * 512;
    }
    return n;
}

Test(tamper, flips_in_a_plain_tar, .init = setup, .fini = teardown)
{
    char tar[4300];
    snprintf(tar, sizeof tar, "%s/b.tar", g_dir);
    cr_assert_eq(run(NULL, "%s/hm-pack %s -o %s --bytes", HM_BIN_DIR, g_ck, tar), 0);
    size_t len;
    char *buf = tu_read_file(tar, &len);
    size_t off[8], size[8];
    char names[8][64];
    int n = tar_members(buf, len, off, size, names);
    cr_assert_eq(n, 5);
    free(buf);
    uint64_t s = 2;
    int total = 0;
    for (int i = 0; i < n; i++)
        for (int k = 0; k < 30; k++, total++) {
            size_t pos = spread(off[i], off[i] + size[i], k, 30, &s);
            int bit = (int)(tu_rand_u64(&s) % 8);
            flip(tar, NULL, pos, bit);
            char *out;
            int rc = run(&out, "%s/hm-verify bundle %s", HM_BIN_DIR, tar);
            cr_assert_eq(rc, 1, "tar: flip at %zu in '%s' gave %d:\n%s", pos, names[i], rc, out);
            cr_assert(strstr(out, names[i]), "%s", out);
            free(out);
            flip(tar, NULL, pos, bit);
        }
    cr_assert_eq(run(NULL, "%s/hm-verify bundle %s", HM_BIN_DIR, tar), 0);
    cr_log_info("plain tar: %d flips inside member data, all exit 1", total);
}

Test(tamper, flips_in_compressed_archives, .init = setup, .fini = teardown)
{
    static const int formats[] = {HM_ARCHIVE_TAR_GZ, HM_ARCHIVE_TAR_XZ, HM_ARCHIVE_TAR_ZST,
                                  HM_ARCHIVE_ZIP};
    int n;
    struct tu_entry *e = tu_read_dir_entries(g_bundle, &n);
    uint64_t s = 3;
    int repacked = 0, raw = 0, raw1 = 0, raw2 = 0;
    for (size_t f = 0; f < sizeof formats / sizeof *formats; f++) {
        char path[4300];
        snprintf(path, sizeof path, "%s/t.%s", g_dir,
                 hm_archive_format_name((enum hm_archive_format)formats[f]));
        /* the uncompressed content tampered, then compressed: exit 1 */
        for (int k = 0; k < 25; k++, repacked++) {
            int i = k % n;
            size_t pos = spread(0, e[i].len, k / n, 25 / n + 1, &s);
            int bit = (int)(tu_rand_u64(&s) % 8);
            flip(NULL, (char *)e[i].data, pos, bit);
            tu_write_archive(path, formats[f], e, n);
            flip(NULL, (char *)e[i].data, pos, bit);
            char *out;
            int rc = run(&out, "%s/hm-verify bundle %s", HM_BIN_DIR, path);
            cr_assert_eq(rc, 1, "%s: flip in '%s' at %zu gave %d:\n%s", path, e[i].name, pos, rc,
                         out);
            cr_assert(strstr(out, e[i].name), "%s", out);
            free(out);
        }
        tu_write_archive(path, formats[f], e, n);
        cr_assert_eq(run(NULL, "%s/hm-verify bundle %s", HM_BIN_DIR, path), 0);
        /* raw flips of compressed bytes (middle 80%): never 0; 1 or 2 (unreadable) */
        size_t len;
        char *buf = tu_read_file(path, &len);
        free(buf);
        for (int k = 0; k < 20; k++, raw++) {
            size_t pos = spread(len / 10, len - len / 10, k, 20, &s);
            int bit = (int)(tu_rand_u64(&s) % 8);
            flip(path, NULL, pos, bit);
            char *out;
            int rc = run(&out, "%s/hm-verify bundle %s", HM_BIN_DIR, path);
            cr_assert(rc == 1 || rc == 2, "%s: raw flip at %zu gave %d:\n%s", path, pos, rc, out);
            raw1 += rc == 1;
            raw2 += rc == 2;
            free(out);
            flip(path, NULL, pos, bit);
        }
    }
    cr_log_info("compressed: %d repacked flips all exit 1; %d raw flips of compressed bytes: "
                "%d exit 1, %d exit 2 (unreadable)", repacked, raw, raw1, raw2);
    tu_free_entries(e, n);
}

/* ---- unsafe archives ---------------------------------------------------------------- */

struct unsafe_case {
    const char *what;
    int format;
    struct tu_entry extra;  /* added to the bundle's entries */
    const char *replace;    /* an entry of the bundle left out (the extra stands in) */
    const char *named;      /* what the refusal must name */
};

static void expect_refused(const char *archive, const char *named, const char *what)
{
    char work[4300];
    snprintf(work, sizeof work, "%s/work", g_dir);
    char *out;
    int rc = run(&out, "cd %s && %s/hm-verify bundle %s", work, HM_BIN_DIR, archive);
    cr_assert_eq(rc, 1, "%s: hm-verify exit %d:\n%s", what, rc, out);
    cr_assert(strstr(out, named), "%s: the report does not name '%s':\n%s", what, named, out);
    free(out);
    rc = run(&out, "cd %s && %s/hm-inspect %s", work, HM_BIN_DIR, archive);
    cr_assert_eq(rc, 1, "%s: hm-inspect exit %d:\n%s", what, rc, out);
    cr_assert(strstr(out, named), "%s: hm-inspect does not name '%s':\n%s", what, named, out);
    free(out);
    struct hm_ckpt *ck = NULL;
    struct hm_error err;
    cr_assert_neq(hm_ckpt_open(archive, &ck, &err), HM_OK, "%s: opened", what);
}

Test(tamper, unsafe_entries, .init = setup, .fini = teardown)
{
    struct unsafe_case cases[] = {
        {"dot-dot", HM_ARCHIVE_TAR, {"../evil", "x", 1, 0, NULL}, NULL, "'../evil'"},
        {"dot-dot inside", HM_ARCHIVE_TAR_GZ, {"onnx/../../evil", "x", 1, 0, NULL}, NULL, "'..'"},
        {"dot-dot folder", HM_ARCHIVE_TAR, {"../evil/", NULL, 0, 'd', NULL}, NULL, "'..'"},
        {"absolute", HM_ARCHIVE_TAR, {"/tmp/hm-bundle-abs-evil", "x", 1, 0, NULL}, NULL,
         "absolute"},
        {"symlink", HM_ARCHIVE_TAR, {"tokenizer.json", NULL, 0, 'l', "/etc/passwd"},
         "tokenizer.json", "symlink"},
        {"symlink out", HM_ARCHIVE_TAR_XZ, {"up", NULL, 0, 'l', "../.."}, NULL, "symlink"},
        {"hard link", HM_ARCHIVE_TAR, {"config2.json", NULL, 0, 'h', "config.json"}, NULL,
         "hard link"},
        {"char device", HM_ARCHIVE_TAR, {"tty", NULL, 0, 'c', NULL}, NULL, "character device"},
        {"block device", HM_ARCHIVE_TAR, {"disk", NULL, 0, 'b', NULL}, NULL, "block device"},
        {"fifo", HM_ARCHIVE_TAR_ZST, {"pipe", NULL, 0, 'p', NULL}, NULL, "FIFO"},
        {"duplicate", HM_ARCHIVE_TAR, {"config.json", "{}", 2, 0, NULL}, NULL, "twice"},
        /* a second MANIFEST.json (fuzz_bundle found the first one's parse leaked;
         * fuzz/corpus/fuzz_bundle/regress_manifest_twice replays it) */
        {"manifest twice", HM_ARCHIVE_TAR_GZ, {"MANIFEST.json", "{}", 2, 0, NULL}, NULL, "twice"},
        /* (refused as unlisted before the reader's own "inside the file";
         * that check: archive_vet_trailing_housekeeping) */
        {"inside a file", HM_ARCHIVE_TAR, {"README.md/x", "x", 1, 0, NULL}, NULL,
         "'README.md/x'"},
        {"backslash", HM_ARCHIVE_TAR, {"..\\evil", "x", 1, 0, NULL}, NULL, "backslash"},
        {"zip dot-dot", HM_ARCHIVE_ZIP, {"../evil", "x", 1, 0, NULL}, NULL, "'../evil'"},
        {"zip absolute", HM_ARCHIVE_ZIP, {"/tmp/hm-bundle-abs-evil", "x", 1, 0, NULL}, NULL,
         "absolute"},
        {"zip symlink", HM_ARCHIVE_ZIP, {"tokenizer.json", NULL, 0, 'l', "/etc/passwd"},
         "tokenizer.json", "symlink"},
        {"zip duplicate", HM_ARCHIVE_ZIP, {"README.md", "hi", 2, 0, NULL}, NULL, "twice"},
    };
    int n;
    struct tu_entry *e = tu_read_dir_entries(g_bundle, &n);
    char work[4300];
    snprintf(work, sizeof work, "%s/work", g_dir);
    cr_assert_eq(mkdir(work, 0755), 0);
    int ncases = (int)(sizeof cases / sizeof *cases);
    for (int c = 0; c < ncases; c++) {
        struct tu_entry all[16];
        int k = 0;
        for (int i = 0; i < n; i++)
            if (!cases[c].replace || strcmp(cases[c].replace, e[i].name) != 0)
                all[k++] = e[i];
        all[k++] = cases[c].extra;
        char path[4400];
        snprintf(path, sizeof path, "%s/case%d.%s", g_dir, c,
                 hm_archive_format_name((enum hm_archive_format)cases[c].format));
        tu_write_archive(path, cases[c].format, all, k);
        expect_refused(path, cases[c].named, cases[c].what);
    }
    /* a manifest listing a file the archive lacks */
    struct tu_entry all[16];
    int k = 0;
    for (int i = 0; i < n; i++)
        if (strcmp(e[i].name, "README.md") != 0)
            all[k++] = e[i];
    char path[4400];
    snprintf(path, sizeof path, "%s/absent.tar", g_dir);
    tu_write_archive(path, HM_ARCHIVE_TAR, all, k);
    expect_refused(path, "README.md", "absent file");
    ncases++;
    /* nothing was written anywhere: the work folder stays empty, no 'evil' appeared */
    char *ls;
    run(&ls, "ls -A %s; find %s -name '*evil*'; ls /tmp/hm-bundle-abs-evil 2>/dev/null", work,
        g_dir);
    cr_assert_str_eq(ls, "", "files appeared: %s", ls);
    free(ls);
    cr_log_info("%d unsafe archives refused (hm-verify exit 1, hm-inspect exit 1, hm_ckpt_open)",
                ncases);
    /* the accepted spellings: a "./" prefix with the "./" root entry, folder entries */
    struct tu_entry dot[16];
    char names[16][128];
    k = 0;
    dot[k++] = (struct tu_entry){"./", NULL, 0, 'd', NULL};
    dot[k++] = (struct tu_entry){"onnx/", NULL, 0, 'd', NULL};
    for (int i = 0; i < n; i++) {
        snprintf(names[i], sizeof names[i], "./%s", e[i].name);
        dot[k] = e[i];
        dot[k++].name = names[i];
    }
    snprintf(path, sizeof path, "%s/dot.tar", g_dir);
    tu_write_archive(path, HM_ARCHIVE_TAR, dot, k);
    char *out;
    cr_assert_eq(run(&out, "%s/hm-verify bundle %s", HM_BIN_DIR, path), 0, "%s", out);
    free(out);
    tu_free_entries(e, n);
}

Test(tamper, memory_caps, .init = setup, .fini = teardown)
{
    char tar[4300];
    snprintf(tar, sizeof tar, "%s/c.tar.gz", g_dir);
    cr_assert_eq(run(NULL, "%s/hm-pack %s -o %s --bytes", HM_BIN_DIR, g_ck, tar), 0);
    size_t len;
    char *buf = tu_read_file(tar, &len);
    struct hm_archive *a;
    struct hm_error err;
    struct hm_archive_limits lim = {.max_total = 1000};
    cr_assert_eq(hm_archive_read_memory(buf, len, &lim, &a, &err), HM_ERR_UNSUPPORTED);
    cr_assert(strstr(err.msg, "1000 bytes"), "%s", err.msg);
    lim = (struct hm_archive_limits){.max_entries = 3};
    cr_assert_eq(hm_archive_read_memory(buf, len, &lim, &a, &err), HM_ERR_UNSUPPORTED);
    cr_assert(strstr(err.msg, "more than 3 entries"), "%s", err.msg);
    cr_assert_eq(hm_archive_read_memory(buf, len, NULL, &a, &err), HM_OK, "%s", err.msg);
    cr_assert_eq(hm_archive_n_members(a), 5);
    cr_assert_eq(hm_archive_format_of(a), HM_ARCHIVE_TAR_GZ);
    hm_archive_free(a);
    /* truncated: unreadable, exit 2 */
    char cut[4300];
    snprintf(cut, sizeof cut, "%s/cut.tar.gz", g_dir);
    tu_write_file(cut, buf, len / 2);
    char *out;
    cr_assert_eq(run(&out, "%s/hm-verify bundle %s", HM_BIN_DIR, cut), 2, "%s", out);
    free(out);
    free(buf);
}

Test(tamper, hf_snapshot_symlinks_and_fifos, .init = setup, .fini = teardown)
{
    /* blobs/<hash> and snapshot/<name> -> ../blobs/<hash>, as the HF cache has it */
    char *out;
    cr_assert_eq(run(&out, "cd %s && mkdir -p blobs snap && for f in b/*; do "
                           "h=$(sha1sum \"$f\" | cut -c1-40); cp \"$f\" blobs/$h; "
                           "ln -s ../blobs/$h snap/$(basename \"$f\"); done", g_dir), 0, "%s", out);
    free(out);
    char snap[4300];
    snprintf(snap, sizeof snap, "%s/snap", g_dir);
    cr_assert_eq(run(&out, "%s/hm-verify bundle %s", HM_BIN_DIR, snap), 0, "%s", out);
    free(out);
    int32_t tok[8] = {1, 2, 3, 250, 7, 9, 11, 0};
    int64_t v1, v2;
    float *a = tu_bundle_logits(g_ck, tok, 8, &v1), *b = tu_bundle_logits(snap, tok, 8, &v2);
    cr_assert(memcmp(a, b, sizeof(float) * (size_t)(8 * v1)) == 0);
    free(a);
    free(b);
    /* a FIFO in a folder bundle: refused, never opened (no hang) */
    cr_assert_eq(run(&out, "mkfifo %s/fifo && %s/hm-verify bundle %s", snap, HM_BIN_DIR, snap), 1,
                 "%s", out);
    cr_assert(strstr(out, "'fifo' is not a regular file"), "%s", out);
    free(out);
    /* not bundles: exit 2 */
    const char *not[] = {g_ck, "/nonexistent/hm-bundle", g_dir};
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(run(&out, "%s/hm-verify bundle %s", HM_BIN_DIR, not[i]), 2, "%s", out);
        free(out);
    }
    char junk[4300];
    snprintf(junk, sizeof junk, "%s/junk.bin", g_dir);
    tu_write_file(junk, "\x1f\x8b garbage that is not gzip", 27);
    cr_assert_eq(run(&out, "%s/hm-verify bundle %s", HM_BIN_DIR, junk), 2, "%s", out);
    free(out);
    unsigned char head[16] = {0x10, 0, 0, 0, 0, 0, 0, 0, '{'};
    cr_assert_eq(hm_bundle_sniff(head, sizeof head), 0, "a safetensors head is not an archive");
}

/* vet_ctx: what the member callback saw */
struct seen {
    int asked, kept;
    int64_t declared_extra;
};

static enum hm_status refuse_extra(void *ctx, const char *name, int64_t declared,
                                   struct hm_archive_vet *vet, struct hm_error *err)
{
    struct seen *s = ctx;
    s->asked++;
    (void)vet;
    if (strcmp(name, "extra.bin") != 0)
        return HM_OK;
    s->declared_extra = declared;
    return hm_error_set(err, HM_ERR_INVALID, "no '%s'", name);
}

static enum hm_status count_kept(void *ctx, const char *name, const void *data, size_t size,
                                 struct hm_error *err)
{
    (void)data, (void)size, (void)err;
    cr_assert_str_neq(name, "extra.bin", "extra.bin was read");
    ((struct seen *)ctx)->kept++;
    return HM_OK;
}

/* path: the bundle's entries (less drop) plus extra [n_extra], as format. */
static void write_variant(const char *path, int format, const char *drop,
                          const struct tu_entry *extra, int n_extra)
{
    int n;
    struct tu_entry *e = tu_read_dir_entries(g_bundle, &n), all[24];
    int k = 0;
    for (int i = 0; i < n; i++)
        if (!drop || strcmp(drop, e[i].name) != 0)
            all[k++] = e[i];
    for (int i = 0; i < n_extra; i++)
        all[k++] = extra[i];
    tu_write_archive(path, format, all, k);
    tu_free_entries(e, n);
}

static void expect_open_refused(const char *path, const char *frag)
{
    struct hm_bundle *b = NULL;
    struct hm_error err;
    cr_assert_eq(hm_bundle_open(path, &b, &err), HM_ERR_INVALID, "%s opened", path);
    cr_assert(strstr(err.msg, frag), "%s: '%s' lacks '%s'", path, err.msg, frag);
    char *out;
    cr_assert_eq(run(&out, "%s/hm-verify bundle %s", HM_BIN_DIR, path), 1, "%s", out);
    cr_assert(strstr(out, frag), "hm-verify: %s", out);
    free(out);
}

Test(tamper, archive_vet_trailing_housekeeping, .init = setup, .fini = teardown)
{
    char path[4400];
    size_t len;
    struct hm_error err;
    struct hm_archive *a = NULL;
    /* the member callback sees every file before its data, with its size */
    static char big[100000];
    struct tu_entry extra = {"extra.bin", big, sizeof big, 0, NULL};
    snprintf(path, sizeof path, "%s/extra.zip", g_dir);
    write_variant(path, HM_ARCHIVE_ZIP, NULL, &extra, 1);
    char *buf = tu_read_file(path, &len);
    struct seen s = {0, 0, -2};
    struct hm_archive_limits lim = {.member = refuse_extra, .kept = count_kept, .ctx = &s};
    cr_assert_eq(hm_archive_read_memory(buf, len, &lim, &a, &err), HM_ERR_INVALID);
    cr_assert_str_eq(err.msg, "no 'extra.bin'");
    cr_assert_eq(s.asked, 6);
    cr_assert_eq(s.kept, 5);
    cr_assert_eq(s.declared_extra, (int64_t)sizeof big);
    free(buf);
    /* a bundle member MANIFEST.json does not list: refused, also when it
     * comes before the manifest ('A' sorts before 'M') */
    expect_open_refused(path, "entry 'extra.bin' is not listed in MANIFEST.json");
    extra.name = "AAA.bin";
    snprintf(path, sizeof path, "%s/early.tar", g_dir);
    write_variant(path, HM_ARCHIVE_TAR, NULL, &extra, 1);
    expect_open_refused(path, "entry 'AAA.bin' is not listed in MANIFEST.json");
    /* a listed member longer than listed: refused by its declared size */
    struct tu_entry readme = {"README.md", big, sizeof big, 0, NULL};
    snprintf(path, sizeof path, "%s/long.tar.gz", g_dir);
    write_variant(path, HM_ARCHIVE_TAR_GZ, "README.md", &readme, 1);
    expect_open_refused(path, "entry 'README.md' declares 100000 bytes, more than MANIFEST.json lists");
    /* the generic reader still refuses a file holding another entry */
    struct tu_entry inside = {"README.md/x", "x", 1, 0, NULL};
    snprintf(path, sizeof path, "%s/inside.tar", g_dir);
    write_variant(path, HM_ARCHIVE_TAR, NULL, &inside, 1);
    cr_assert_eq(hm_archive_read_path(path, NULL, &a, &err), HM_ERR_INVALID);
    cr_assert(strstr(err.msg, "inside the file"), "%s", err.msg);
    /* bytes after a tar's end: refused; zero padding is fine */
    snprintf(path, sizeof path, "%s/plain.tar", g_dir);
    write_variant(path, HM_ARCHIVE_TAR, NULL, NULL, 0);
    buf = tu_read_file(path, &len);
    char *more = calloc(1, len + 20480);
    memcpy(more, buf, len);
    cr_assert_eq(hm_archive_read_memory(more, len + 20480, NULL, &a, &err), HM_OK, "%s", err.msg);
    hm_archive_free(a);
    memcpy(more + len + 20000, "appended", 8);
    cr_assert_eq(hm_archive_read_memory(more, len + 20480, NULL, &a, &err), HM_ERR_INVALID);
    cr_assert(strstr(err.msg, "other data follows the end of the tar archive"), "%s", err.msg);
    snprintf(path, sizeof path, "%s/trail.tar", g_dir);
    tu_write_file(path, more, len + 20480);
    expect_open_refused(path, "other data follows the end of the tar archive");
    free(more);
    free(buf);
    /* housekeeping entries: skipped unread by the archive reader and the
     * folder walk alike; hm-verify bundle passes */
    struct tu_entry hk[] = {{".gitattributes", "*.safetensors filter=lfs\n", 25, 0, NULL},
                            {".git/config", "[core]\n", 7, 0, NULL},
                            {".cache/huggingface/download/x.metadata", "x", 1, 0, NULL}};
    snprintf(path, sizeof path, "%s/hk.tar.zst", g_dir);
    write_variant(path, HM_ARCHIVE_TAR_ZST, NULL, hk, 3);
    char *out;
    cr_assert_eq(run(&out, "%s/hm-verify bundle %s && cp -r %s %s/hkdir && cd %s/hkdir && "
                           "mkdir -p .git .cache/huggingface && echo x > .gitattributes && "
                           "echo y > .git/HEAD && echo z > .cache/huggingface/lock && "
                           "%s/hm-verify bundle .",
                     HM_BIN_DIR, path, g_bundle, g_dir, g_dir, HM_BIN_DIR), 0, "%s", out);
    free(out);
    struct hm_bundle *b;
    cr_assert_eq(hm_bundle_open(path, &b, &err), HM_OK, "%s", err.msg);
    cr_assert_eq(hm_bundle_n_files(b), 5);
    hm_bundle_close(b);
    cr_assert(hm_bundle_is_housekeeping(".git/objects/ab"));
    cr_assert(!hm_bundle_is_housekeeping(".gitx") && !hm_bundle_is_housekeeping("a/.git"));
}
