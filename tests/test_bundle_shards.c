/* test_bundle_shards.c — sharded bundles (hm-pack --shard-size, contract
 * §11): HF's names, split and index; the same logits as the checkpoint
 * from the folder and an archive; and what hm-verify bundle and the reader
 * refuse: a missing shard, a tensor in two shards, a wrong total_size, an
 * index naming a missing tensor, a shard the index leaves out. */
#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "archive_write.h"
#include "atomic_file.h"
#include "bundle.h"
#include "bundle_fixture.h"
#include "checkpoint.h"
#include "st_index.h"
#include "testutil.h"

static char *g_dir;
static char g_ck[4200], g_bundle[4200];
static int g_shards;

static int run(char **out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int run(char **out, const char *fmt, ...)
{
    char cmd[9000];
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
    g_dir = tu_mkdtemp("bundle-shards");
    snprintf(g_ck, sizeof g_ck, "%s/m.st", g_dir);
    snprintf(g_bundle, sizeof g_bundle, "%s/b", g_dir);
    tu_bundle_model(g_ck, HM_FAMILY_LLAMA, HM_MIXER_HEDGEMAMBA, HM_DTYPE_F16, NULL, 23);
    char *out;
    cr_assert_eq(run(&out, "%s/hm-pack %s -o %s --bytes --shard-size 4KiB --json", HM_BIN_DIR,
                     g_ck, g_bundle), 0, "%s", out);
    char *p = strstr(out, "\"shards\":");
    cr_assert(p, "%s", out);
    g_shards = atoi(p + 9);
    cr_assert_gt(g_shards, 3, "%s", out);
    free(out);
}

static void teardown(void)
{
    char cmd[4300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    cr_assert_eq(system(cmd), 0);
    free(g_dir);
}

/* A copy of the bundle folder at g_dir/name; owned path. */
static char *copy_bundle(const char *name)
{
    char *dst = tu_path(g_dir, name);
    cr_assert_eq(run(NULL, "cp -r '%s' '%s'", g_bundle, dst), 0);
    return dst;
}

static char *shard_path(const char *bundle, int i)
{
    char name[HM_ST_SHARD_NAME_MAX];
    hm_st_shard_name(i, g_shards, name);
    return tu_path(bundle, name);
}

/* hm-verify bundle exits 1 naming frag; hm_ckpt_open succeeds iff opens. */
static void expect_finding(const char *bundle, const char *frag, int opens)
{
    char *out;
    int rc = run(&out, "%s/hm-verify bundle '%s'", HM_BIN_DIR, bundle);
    cr_assert_eq(rc, 1, "%s: exit %d:\n%s", bundle, rc, out);
    cr_assert(strstr(out, frag), "%s: no '%s' in:\n%s", bundle, frag, out);
    free(out);
    struct hm_ckpt *ck = NULL;
    struct hm_error err;
    enum hm_status st = hm_ckpt_open(bundle, &ck, &err);
    cr_assert_eq(st == HM_OK, opens, "%s: hm_ckpt_open gave %d (%s)", bundle, st,
                 st ? err.msg : "");
    hm_ckpt_close(ck);
}

Test(shards, layout_and_logits, .init = setup, .fini = teardown)
{
    char *out;
    cr_assert_eq(run(&out, "%s/hm-verify bundle %s", HM_BIN_DIR, g_bundle), 0, "%s", out);
    free(out);
    /* the names HF gives, each shard valid with the metadata, nothing else */
    char *ix_path = tu_path(g_bundle, HM_BUNDLE_INDEX);
    size_t len;
    char *text = tu_read_file(ix_path, &len);
    struct hm_st_index *ix;
    struct hm_error err;
    cr_assert_eq(hm_st_index_parse(text, len, "index", &ix, &err), HM_OK, "%s", err.msg);
    cr_assert_eq(hm_st_index_n_shards(ix), g_shards);
    uint64_t total = 0, sum = 0;
    cr_assert_eq(hm_st_index_total_size(ix, &total), 1);
    char *single = tu_path(g_bundle, HM_BUNDLE_WEIGHTS);
    cr_assert_eq(access(single, F_OK), -1, "a sharded bundle holds model.safetensors too");
    for (int i = 1; i <= g_shards; i++) {
        char *p = shard_path(g_bundle, i);
        struct hm_st_file *f;
        cr_assert_eq(hm_st_open(p, &f, &err), HM_OK, "%s: %s", p, err.msg);
        cr_assert_not_null(hm_st_metadata_get(f, "hm.config"));
        cr_assert_not_null(hm_st_metadata_get(f, "hm.provenance"));
        cr_assert_str_eq(hm_st_metadata_get(f, "format"), "pt");
        for (int64_t j = 0; j < hm_st_n_tensors(f); j++)
            sum += hm_st_tensor_at(f, j)->nbytes;
        hm_st_close(f);
        free(p);
    }
    cr_assert_eq(total, sum);
    hm_st_index_free(ix);
    /* the same logits as the checkpoint, from the folder and a tar.gz of it */
    int32_t tok[8] = {1, 5, 200, 3, 256, 17, 9, 0};
    int64_t v0, v1, v2;
    char tgz[4300];
    snprintf(tgz, sizeof tgz, "%s/b.tar.gz", g_dir);
    cr_assert_eq(run(&out, "%s/hm-pack %s -o %s --bytes --shard-size 4KiB", HM_BIN_DIR, g_ck,
                     tgz), 0, "%s", out);
    free(out);
    cr_assert_eq(run(&out, "%s/hm-verify bundle %s", HM_BIN_DIR, tgz), 0, "%s", out);
    free(out);
    float *a = tu_bundle_logits(g_ck, tok, 8, &v0), *b = tu_bundle_logits(g_bundle, tok, 8, &v1),
          *c = tu_bundle_logits(tgz, tok, 8, &v2);
    cr_assert(v0 == v1 && v1 == v2);
    cr_assert(memcmp(a, b, sizeof(float) * (size_t)(8 * v0)) == 0, "folder logits differ");
    cr_assert(memcmp(a, c, sizeof(float) * (size_t)(8 * v0)) == 0, "archive logits differ");
    free(a);
    free(b);
    free(c);
    free(single);
    free(text);
    free(ix_path);
}

Test(shards, missing_shard, .init = setup, .fini = teardown)
{
    char *d = copy_bundle("missing");
    char *p = shard_path(d, 2);
    cr_assert_eq(unlink(p), 0);
    char name[HM_ST_SHARD_NAME_MAX], want[200];
    hm_st_shard_name(2, g_shards, name);
    snprintf(want, sizeof want, "names shard '%s', which the bundle lacks", name);
    expect_finding(d, want, 0);
    /* the same as an archive: streamed through the same checks */
    int n;
    struct tu_entry *e = tu_read_dir_entries(d, &n);
    char tar[4300];
    snprintf(tar, sizeof tar, "%s/missing.tar.zst", g_dir);
    tu_write_archive(tar, HM_ARCHIVE_TAR_ZST, e, n);
    tu_free_entries(e, n);
    expect_finding(tar, want, 0);
    free(p);
    free(d);
}

Test(shards, tensor_in_two_shards, .init = setup, .fini = teardown)
{
    /* shard 1 rewritten with a tensor of shard 2 added (metadata kept) */
    char *d = copy_bundle("twice");
    char *p1 = shard_path(d, 1), *p2 = shard_path(d, 2);
    struct hm_st_file *f1, *f2;
    struct hm_error err;
    cr_assert_eq(hm_st_open(p1, &f1, &err), HM_OK, "%s", err.msg);
    cr_assert_eq(hm_st_open(p2, &f2, &err), HM_OK, "%s", err.msg);
    struct hm_st_writer *w = hm_st_writer_new();
    for (int64_t i = 0; i < hm_st_n_tensors(f1); i++) {
        const struct hm_st_tensor *t = hm_st_tensor_at(f1, i);
        cr_assert_eq(hm_st_writer_add(w, t->name, t->dtype, t->ndim, t->shape,
                                      hm_st_data_view(f1, i), &err), HM_OK);
    }
    const struct hm_st_tensor *t = hm_st_tensor_at(f2, 0);
    char moved[256];
    snprintf(moved, sizeof moved, "%s", t->name);
    cr_assert_eq(hm_st_writer_add(w, t->name, t->dtype, t->ndim, t->shape, hm_st_data_view(f2, 0),
                                  &err), HM_OK);
    for (int64_t i = 0; i < hm_st_n_metadata(f1); i++)
        hm_st_writer_set_metadata(w, hm_st_metadata_key(f1, i), hm_st_metadata_value(f1, i), &err);
    /* (the writer borrows the tensors' bytes: close after writing) */
    cr_assert_eq(hm_st_writer_write_path(w, p1, HM_AFILE_FORCE, &err), HM_OK, "%s", err.msg);
    hm_st_writer_free(w);
    hm_st_close(f1);
    hm_st_close(f2);
    char want[400];
    snprintf(want, sizeof want, "tensor '%s': is in two shards", moved);
    expect_finding(d, want, 0);
    expect_finding(d, "but the index maps it to", 0);
    free(p1);
    free(p2);
    free(d);
}

/* The index of bundle d with from replaced by to (once). */
static void edit_index(const char *d, const char *from, const char *to)
{
    char *p = tu_path(d, HM_BUNDLE_INDEX);
    size_t len;
    char *text = tu_read_file(p, &len);
    char *at = strstr(text, from);
    cr_assert(at, "no '%s' in the index", from);
    size_t n = len - strlen(from) + strlen(to) + 1;
    char *out = malloc(n);
    snprintf(out, n, "%.*s%s%s", (int)(at - text), text, to, at + strlen(from));
    tu_write_file(p, out, strlen(out));
    free(out);
    free(text);
    free(p);
}

Test(shards, wrong_total_size, .init = setup, .fini = teardown)
{
    char *d = copy_bundle("total");
    /* one digit changed: the index keeps the size MANIFEST.json lists */
    char *p = tu_path(d, HM_BUNDLE_INDEX);
    size_t len;
    char *text = tu_read_file(p, &len);
    char *digit = strstr(text, "\"total_size\": ") + strlen("\"total_size\": ");
    *digit = *digit == '1' ? '2' : '1';
    tu_write_file(p, text, len);
    free(text);
    free(p);
    /* readers follow weight_map, as HF's do; the check is hm-verify's */
    expect_finding(d, "the shards' tensors hold", 1);
    expect_finding(d, "'model.safetensors.index.json': xxh3", 1);
    free(d);
}

Test(shards, index_names_a_missing_tensor, .init = setup, .fini = teardown)
{
    char *d = copy_bundle("ghost");
    char name[HM_ST_SHARD_NAME_MAX], entry[200];
    hm_st_shard_name(1, g_shards, name);
    snprintf(entry, sizeof entry, "\"weight_map\": {\n    \"ghost.weight\": \"%s\",", name);
    edit_index(d, "\"weight_map\": {", entry);
    expect_finding(d, "maps tensor 'ghost.weight' to shard", 0);
    free(d);
}

Test(shards, stray_shard, .init = setup, .fini = teardown)
{
    char *d = copy_bundle("stray");
    char name[HM_ST_SHARD_NAME_MAX];
    hm_st_shard_name(g_shards + 1, g_shards, name);
    char *p1 = shard_path(d, 1), *extra = tu_path(d, name);
    size_t len;
    char *bytes = tu_read_file(p1, &len);
    tu_write_file(extra, bytes, len);
    expect_finding(d, "is a shard that model.safetensors.index.json does not name", 0);
    free(bytes);
    free(extra);
    free(p1);
    free(d);
}
