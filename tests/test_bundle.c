/* test_bundle.c — hm-pack bundles (contract §5 "Bundles", docs/bundle.md):
 * pack → hm-verify bundle → hm-inspect → hm-eval round trips for both
 * families × all three mixers × every format, with logits equal to the
 * checkpoint's (model API and hm-verify logits --tolerance 0); HF teacher
 * folders (F16/BF16, legacy buffers dropped); dtypes and the F16 overflow
 * refusal; determinism (bytes, entry metadata, time zones); tokenizers (the
 * byte vocabulary, the provenance, a bundle input, HF folders, the shared
 * GPT-NeoX and llama2.c ones); the CLI's refusals; --onnx. Tampering and
 * unsafe archives: test_bundle_tamper.c. */
#include <archive.h>
#include <archive_entry.h>
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bundle.h"
#include "bundle_fixture.h"
#include "checkpoint.h"
#include "fileio.h"
#include "fixture.h"
#include "fixture_llama.h"
#include "hash.h"
#include "model.h"
#include "model_views.h"
#include "params.h"
#include "provenance.h"
#include "testutil.h"
#include "tokenizer.h"
#include "tokfile.h"

static const char *const kinds[] = {"dir", "tar", "tar.gz", "tar.xz", "tar.zst", "zip"};
static const char *const suffixes[] = {".d", ".tar", ".tar.gz", ".tar.xz", ".tar.zst", ".zip"};
#define NKINDS 6

/* Runs a shell command built from fmt; out/err captured (owned) when not NULL. */
static int run(char **out, char **err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int run(char **out, char **err, const char *fmt, ...)
{
    char cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    int rc = tu_run(cmd, out, err);
    cr_assert_lt(rc, 128, "crashed (rc %d): %s", rc, cmd);
    return rc;
}

static void rm_rf(const char *dir)
{
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
}

static void write_tokens(const char *path, int64_t n)
{
    struct hm_tok_writer *w;
    struct hm_error err;
    cr_assert_eq(hm_tok_writer_open(path, 257, 256, HM_TOK_FORCE, &w, &err), HM_OK, "%s", err.msg);
    uint64_t s = 3;
    for (int64_t i = 0; i < n; i++) {
        int32_t t = (int32_t)(tu_rand_u64(&s) % 257);
        cr_assert_eq(hm_tok_writer_append(w, &t, 1, &err), HM_OK);
    }
    cr_assert_eq(hm_tok_writer_commit(w, &err), HM_OK, "%s", err.msg);
}

static char *bundle_file(const char *bundle, const char *name, size_t *len)
{
    struct hm_bundle *b;
    struct hm_error err;
    cr_assert_eq(hm_bundle_open(bundle, &b, &err), HM_OK, "%s: %s", bundle, err.msg);
    const void *d;
    size_t n;
    int64_t i = hm_bundle_find(b, name);
    cr_assert_geq(i, 0, "%s has no %s", bundle, name);
    cr_assert_eq(hm_bundle_file_data(b, i, &d, &n, &err), HM_OK, "%s", err.msg);
    char *copy = malloc(n + 1);
    memcpy(copy, d, n);
    copy[n] = 0;
    if (len)
        *len = n;
    hm_bundle_close(b);
    return copy;
}

static void expect_same_logits(const char *a, const char *b)
{
    int32_t tok[12];
    for (int i = 0; i < 12; i++)
        tok[i] = (i * 37 + 5) % 257;
    int64_t va, vb;
    float *la = tu_bundle_logits(a, tok, 12, &va), *lb = tu_bundle_logits(b, tok, 12, &vb);
    cr_assert_eq(va, vb);
    cr_assert(memcmp(la, lb, sizeof(float) * (size_t)(12 * va)) == 0,
              "logits of '%s' differ from '%s'", b, a);
    free(la);
    free(lb);
}

/* The bundle's tokenizer is the byte vocabulary as tokenizer.json. */
static void expect_bytes_tokenizer(const char *bundle)
{
    struct hm_ckpt *ck;
    struct hm_error err;
    cr_assert_eq(hm_ckpt_open(bundle, &ck, &err), HM_OK, "%s: %s", bundle, err.msg);
    size_t n;
    const void *tb = hm_ckpt_bundle_tokenizer(ck, &n);
    cr_assert_not_null(tb, "%s: no tokenizer", bundle);
    struct hm_tokenizer *t, *ref;
    cr_assert_eq(hm_tokenizer_load_memory(tb, n, &t, &err), HM_OK, "%s", err.msg);
    cr_assert_eq(hm_tokenizer_bytes(&ref, &err), HM_OK);
    const char *text = "Grüße, bundles!\n  tabs\tand ünïcödé 123";
    struct hm_ids a = {0}, b = {0};
    cr_assert_eq(hm_tokenizer_encode(t, text, strlen(text), &a, &err), HM_OK, "%s", err.msg);
    cr_assert_eq(hm_tokenizer_encode(ref, text, strlen(text), &b, &err), HM_OK);
    cr_assert_eq(a.n, b.n);
    cr_assert(memcmp(a.v, b.v, sizeof(int32_t) * (size_t)a.n) == 0);
    cr_assert_eq(hm_tokenizer_vocab_size(t), 257);
    hm_ids_release(&a);
    hm_ids_release(&b);
    hm_tokenizer_free(t);
    hm_tokenizer_free(ref);
    hm_ckpt_close(ck);
}

static void roundtrip(enum hm_family fam, enum hm_mixer mix)
{
    char *dir = tu_mkdtemp("bundle-rt");
    char ck[4200], tok[4200], ref[4200], out[4200];
    snprintf(ck, sizeof ck, "%s/model.st", dir);
    snprintf(tok, sizeof tok, "%s/val.tok", dir);
    snprintf(ref, sizeof ref, "%s/ref.st", dir);
    tu_bundle_model(ck, fam, mix, HM_DTYPE_F32, NULL, 11 + fam * 3 + mix);
    write_tokens(tok, 100);
    const struct hm_config c = tu_bundle_config(fam, mix);
    const char *arch = hm_arch_name(&c);
    char *o = NULL, *e = NULL;
    cr_assert_eq(run(NULL, &e, "%s/hm-eval %s --data %s --seq-len 16 --dump-logits %s", HM_BIN_DIR,
                     ck, tok, ref), 0, "%s", e);
    free(e);
    for (int k = 0; k < NKINDS; k++) {
        snprintf(out, sizeof out, "%s/b%s", dir, suffixes[k]);
        cr_assert_eq(run(NULL, &e, "%s/hm-pack %s -o %s --bytes --format %s", HM_BIN_DIR, ck, out,
                         kinds[k]), 0, "pack %s: %s", kinds[k], e);
        free(e);
        cr_assert_eq(run(&o, &e, "%s/hm-verify bundle %s", HM_BIN_DIR, out), 0, "%s%s", o, e);
        cr_assert(strstr(o, "valid: 4 files"), "%s", o);
        free(o), free(e);
        cr_assert_eq(run(&o, &e, "%s/hm-inspect %s", HM_BIN_DIR, out), 0, "%s", e);
        char want[128];
        snprintf(want, sizeof want, "bundle:      %s, 5 files", kinds[k]);
        cr_assert(strstr(o, want), "inspect %s lacks '%s':\n%s", out, want, o);
        snprintf(want, sizeof want, "arch:        %s", arch);
        cr_assert(strstr(o, want), "inspect %s lacks '%s'", out, want);
        cr_assert(!strstr(o, "warnings:"), "inspect %s warns:\n%s", out, o);
        free(o), free(e);
        cr_assert_eq(run(&o, &e, "%s/hm-eval %s --data %s --seq-len 16 --json", HM_BIN_DIR, out,
                         tok), 0, "%s", e);
        cr_assert(strstr(o, "\"ppl\""), "%s", o);
        free(o), free(e);
        cr_assert_eq(run(&o, &e, "%s/hm-verify logits %s --reference %s --data %s --tolerance 0",
                         HM_BIN_DIR, out, ref, tok), 0, "%s%s", o, e);
        free(o), free(e);
        expect_same_logits(ck, out);
        expect_bytes_tokenizer(out);
        char *cfg = bundle_file(out, "config.json", NULL);
        cJSON *j = cJSON_Parse(cfg);
        cr_assert_str_eq(cJSON_GetObjectItem(j, "model_type")->valuestring, arch);
        cr_assert_str_eq(cJSON_GetObjectItem(j, "family")->valuestring, hm_family_name(fam));
        cr_assert_str_eq(cJSON_GetObjectItem(j, "torch_dtype")->valuestring, "float32");
        cr_assert_eq(cJSON_GetObjectItem(j, "feature_dim") != NULL, mix != HM_MIXER_SOFTMAX);
        cr_assert_eq(cJSON_GetObjectItem(j, "conv_width") != NULL, mix == HM_MIXER_HEDGEMAMBA);
        cJSON_Delete(j);
        free(cfg);
        char *card = bundle_file(out, "README.md", NULL);
        cr_assert(strstr(card, "hm-fixture"), "the card lacks the provenance:\n%s", card);
        cr_assert(strstr(card, "hm-pack"), "the card lacks hm-pack's step");
        cr_assert(strstr(card, "| 1 | hm-fixture | 1,234 | 2.5"), "the card lacks the losses:\n%s",
                  card);
        free(card);
    }
    rm_rf(dir);
    free(dir);
}

Test(bundle, roundtrip_neox_softmax) { roundtrip(HM_FAMILY_NEOX, HM_MIXER_SOFTMAX); }
Test(bundle, roundtrip_neox_hedgehog) { roundtrip(HM_FAMILY_NEOX, HM_MIXER_HEDGEHOG); }
Test(bundle, roundtrip_neox_hedgemamba) { roundtrip(HM_FAMILY_NEOX, HM_MIXER_HEDGEMAMBA); }
Test(bundle, roundtrip_llama_softmax) { roundtrip(HM_FAMILY_LLAMA, HM_MIXER_SOFTMAX); }
Test(bundle, roundtrip_llama_hedgehog) { roundtrip(HM_FAMILY_LLAMA, HM_MIXER_HEDGEHOG); }
Test(bundle, roundtrip_llama_hedgemamba) { roundtrip(HM_FAMILY_LLAMA, HM_MIXER_HEDGEMAMBA); }

/* ---- HF teacher folders ------------------------------------------------------- */

static int n_specs(const struct hm_config *c)
{
    struct hm_param_spec *sp;
    int64_t n = hm_param_specs(c, &sp);
    free(sp);
    return (int)n;
}

static void expect_manifest_dtype(const char *bundle, const char *dtype, int n_tensors)
{
    char *m = bundle_file(bundle, HM_BUNDLE_MANIFEST, NULL);
    cJSON *j = cJSON_Parse(m);
    cJSON *ts = cJSON_GetObjectItem(j, "tensors"), *t;
    cr_assert_eq(cJSON_GetArraySize(ts), n_tensors, "%s: %d tensors", bundle, cJSON_GetArraySize(ts));
    cJSON_ArrayForEach(t, ts) {
        cr_assert(!hm_is_ignored_buffer(t->string), "legacy buffer '%s' was packed", t->string);
        cr_assert_str_eq(cJSON_GetObjectItem(t, "dtype")->valuestring, dtype, "%s", t->string);
    }
    cJSON_Delete(j);
    free(m);
}

Test(bundle, hf_teacher_folders)
{
    char *dir = tu_mkdtemp("bundle-hf");
    char neox[4200], llama[4200], out[4200], tokjson[4200];
    snprintf(neox, sizeof neox, "%s/pythia", dir);
    snprintf(llama, sizeof llama, "%s/llama", dir);
    cr_assert_eq(mkdir(neox, 0755), 0);
    cr_assert_eq(mkdir(llama, 0755), 0);
    struct hm_config cn = tu_bundle_config(HM_FAMILY_NEOX, HM_MIXER_SOFTMAX);
    struct tu_pythia_opts po = {.dtype = HM_DTYPE_F16, .legacy_buffers = 1, .buffer_positions = 8,
                                .seed = 5};
    tu_make_pythia(neox, &cn, &po);
    struct hm_config cl = tu_bundle_config(HM_FAMILY_LLAMA, HM_MIXER_SOFTMAX);
    struct tu_llama_opts lo = {.dtype = HM_DTYPE_BF16, .legacy_inv_freq = 1, .seed = 6};
    tu_ref_table_free(tu_make_llama(llama, &cl, &lo));
    char *e = NULL, *o = NULL;
    /* an HF folder has no provenance: without a tokenizer the pack says what to pass */
    snprintf(out, sizeof out, "%s/n.tar", dir);
    cr_assert_eq(run(NULL, &e, "%s/hm-pack %s -o %s", HM_BIN_DIR, neox, out), 1);
    cr_assert(strstr(e, "--tokenizer"), "%s", e);
    cr_assert(!hm_is_file(out));
    free(e);
    /* its own tokenizer.json is picked up */
    size_t tl;
    char *tj = hm_bundle_bytes_tokenizer_json(&tl);
    snprintf(tokjson, sizeof tokjson, "%s/tokenizer.json", neox);
    tu_write_file(tokjson, tj, tl);
    cr_assert_eq(run(NULL, &e, "%s/hm-pack %s -o %s", HM_BIN_DIR, neox, out), 0, "%s", e);
    free(e);
    cr_assert_eq(run(&o, NULL, "%s/hm-verify bundle %s", HM_BIN_DIR, out), 0, "%s", o);
    free(o);
    expect_manifest_dtype(out, "F16", n_specs(&cn));
    expect_same_logits(neox, out);
    size_t n;
    char *got = bundle_file(out, "tokenizer.json", &n);
    cr_assert(n == tl && memcmp(got, tj, n) == 0);
    free(got);
    char *cfg = bundle_file(out, "config.json", NULL);
    cr_assert(strstr(cfg, "\"GPTNeoXForCausalLM\"") && strstr(cfg, "\"float16\""), "%s", cfg);
    free(cfg);
    /* llama BF16, --bytes, into a zip */
    snprintf(out, sizeof out, "%s/l.zip", dir);
    cr_assert_eq(run(NULL, &e, "%s/hm-pack %s -o %s --bytes", HM_BIN_DIR, llama, out), 0, "%s", e);
    free(e);
    cr_assert_eq(run(&o, NULL, "%s/hm-verify bundle %s", HM_BIN_DIR, out), 0, "%s", o);
    free(o);
    expect_manifest_dtype(out, "BF16", n_specs(&cl));
    expect_same_logits(llama, out);
    cfg = bundle_file(out, "config.json", NULL);
    cr_assert(strstr(cfg, "\"LlamaForCausalLM\"") && strstr(cfg, "\"bfloat16\""), "%s", cfg);
    free(cfg);
    free(tj);
    rm_rf(dir);
    free(dir);
}

/* ---- dtypes ------------------------------------------------------------------- */

Test(bundle, dtypes_and_f16_overflow)
{
    char *dir = tu_mkdtemp("bundle-dt");
    char ck[4200], ck16[4200], out[4200], big[4200];
    snprintf(ck, sizeof ck, "%s/m.st", dir);
    snprintf(ck16, sizeof ck16, "%s/m16.st", dir);
    tu_bundle_model(ck, HM_FAMILY_LLAMA, HM_MIXER_HEDGEMAMBA, HM_DTYPE_F32, NULL, 3);
    tu_bundle_model(ck16, HM_FAMILY_LLAMA, HM_MIXER_HEDGEMAMBA, HM_DTYPE_F16, NULL, 3);
    char *e = NULL;
    struct hm_config cfg = tu_bundle_config(HM_FAMILY_LLAMA, HM_MIXER_HEDGEMAMBA);
    int64_t nt = n_specs(&cfg);
    /* default: as stored (F16 stays F16, byte for byte); f32 widens exactly */
    snprintf(out, sizeof out, "%s/a.d", dir);
    cr_assert_eq(run(NULL, &e, "%s/hm-pack %s -o %s --bytes", HM_BIN_DIR, ck16, out), 0, "%s", e);
    free(e);
    expect_manifest_dtype(out, "F16", (int)nt);
    expect_same_logits(ck16, out);
    snprintf(out, sizeof out, "%s/b.tar", dir);
    cr_assert_eq(run(NULL, &e, "%s/hm-pack %s -o %s --bytes --dtype f32", HM_BIN_DIR, ck16, out), 0);
    free(e);
    expect_manifest_dtype(out, "F32", (int)nt);
    expect_same_logits(ck16, out);
    /* narrowing: F16 and BF16 of the F32 model */
    for (int k = 0; k < 2; k++) {
        snprintf(out, sizeof out, "%s/n%d.tar.zst", dir, k);
        cr_assert_eq(run(NULL, &e, "%s/hm-pack %s -o %s --bytes --dtype %s", HM_BIN_DIR, ck, out,
                         k ? "bf16" : "f16"), 0, "%s", e);
        free(e);
        expect_manifest_dtype(out, k ? "BF16" : "F16", (int)nt);
        char *o = NULL;
        cr_assert_eq(run(&o, NULL, "%s/hm-verify bundle %s", HM_BIN_DIR, out), 0, "%s", o);
        free(o);
    }
    /* a value F16 cannot hold: refused naming the tensor, nothing written */
    struct hm_ckpt *c;
    struct hm_model *m;
    struct hm_error err;
    cr_assert_eq(hm_ckpt_open(ck, &c, &err), HM_OK);
    cr_assert_eq(hm_model_load(c, &m, &err), HM_OK);
    hm_ckpt_close(c);
    m->layers[1].gate_w[3] = 70000.0f;
    snprintf(big, sizeof big, "%s/big.st", dir);
    cr_assert_eq(hm_model_save(m, big, 0, NULL, HM_DTYPE_F32, NULL, &err), HM_OK, "%s", err.msg);
    hm_model_free(m);
    snprintf(out, sizeof out, "%s/big.tar.gz", dir);
    cr_assert_eq(run(NULL, &e, "%s/hm-pack %s -o %s --bytes --dtype f16", HM_BIN_DIR, big, out), 1);
    cr_assert(strstr(e, "tensor 'model.layers.1.self_attn.gate_proj.weight'") &&
                  strstr(e, "overflows F16"), "%s", e);
    free(e);
    cr_assert(!hm_is_file(out));
    char *ls = NULL;
    run(&ls, NULL, "ls -A %s", dir);
    cr_assert(!strstr(ls, "tmp"), "temporary files left: %s", ls);
    free(ls);
    snprintf(out, sizeof out, "%s/big.d", dir);
    cr_assert_eq(run(NULL, &e, "%s/hm-pack %s -o %s --bytes --dtype f16", HM_BIN_DIR, big, out), 1);
    free(e);
    cr_assert(!hm_is_dir(out));
    cr_assert_eq(run(NULL, &e, "%s/hm-pack %s -o %s --bytes --dtype bf16", HM_BIN_DIR, big, out), 0,
                 "%s", e);
    free(e);
    rm_rf(dir);
    free(dir);
}

/* ---- determinism ---------------------------------------------------------------- */

static void expect_same_file(const char *a, const char *b)
{
    size_t na, nb;
    char *x = tu_read_file(a, &na), *y = tu_read_file(b, &nb);
    cr_assert(na == nb && memcmp(x, y, na) == 0, "'%s' and '%s' differ", a, b);
    free(x);
    free(y);
}

/* Entries sorted at the root, regular 0644 files owned by 0 with mtime t. */
static void expect_entries(const char *path, int64_t t)
{
    struct archive *a = archive_read_new();
    archive_read_support_format_all(a);
    archive_read_support_filter_all(a);
    cr_assert_eq(archive_read_open_filename(a, path, 65536), ARCHIVE_OK);
    struct archive_entry *e;
    char prev[512] = "";
    int n = 0;
    while (archive_read_next_header(a, &e) == ARCHIVE_OK) {
        const char *name = archive_entry_pathname(e);
        cr_assert_gt(strcmp(name, prev), 0, "%s: '%s' after '%s'", path, name, prev);
        cr_assert(!strchr(name, '/'), "%s: entry '%s' is not at the root", path, name);
        snprintf(prev, sizeof prev, "%s", name);
        cr_assert_eq(archive_entry_filetype(e), AE_IFREG);
        cr_assert_eq(archive_entry_uid(e), 0);
        cr_assert_eq(archive_entry_gid(e), 0);
        cr_assert_eq(archive_entry_mtime(e), t, "%s: '%s' mtime %lld", path, name,
                     (long long)archive_entry_mtime(e));
        cr_assert_eq(archive_entry_xattr_count(e), 0);
        cr_assert_eq(archive_entry_perm(e), 0644);
        n++;
    }
    cr_assert_eq(n, 5, "%s: %d entries", path, n);
    archive_read_free(a);
}

Test(bundle, deterministic)
{
    char *dir = tu_mkdtemp("bundle-det");
    char ck[4200], a[4200], b[4200];
    snprintf(ck, sizeof ck, "%s/m.st", dir);
    tu_bundle_model(ck, HM_FAMILY_NEOX, HM_MIXER_HEDGEHOG, HM_DTYPE_F32, NULL, 8);
    char *e = NULL;
    for (int k = 0; k < NKINDS; k++) {
        for (int epoch = 0; epoch < 2; epoch++) {
            const char *env = epoch ? "SOURCE_DATE_EPOCH=1700000000 TZ=America/New_York"
                                    : "TZ=Asia/Tokyo";
            const char *env2 = epoch ? "SOURCE_DATE_EPOCH=1700000000 TZ=Asia/Kolkata" : "TZ=UTC";
            snprintf(a, sizeof a, "%s/one%d%s", dir, epoch, suffixes[k]);
            snprintf(b, sizeof b, "%s/two%d%s", dir, epoch, suffixes[k]);
            cr_assert_eq(run(NULL, &e, "%s %s/hm-pack %s -o %s --bytes", env, HM_BIN_DIR, ck, a), 0,
                         "%s", e);
            free(e);
            sleep(epoch == 0 && k == 0); /* a second apart: no clock may leak in */
            cr_assert_eq(run(NULL, &e, "%s %s/hm-pack %s -o %s --bytes", env2, HM_BIN_DIR, ck, b), 0);
            free(e);
            if (k == 0) {
                static const char *files[] = {"MANIFEST.json", "README.md", "config.json",
                                              "model.safetensors", "tokenizer.json"};
                for (int f = 0; f < 5; f++) {
                    char fa[4300], fb[4300];
                    snprintf(fa, sizeof fa, "%s/%s", a, files[f]);
                    snprintf(fb, sizeof fb, "%s/%s", b, files[f]);
                    expect_same_file(fa, fb);
                }
            } else {
                expect_same_file(a, b);
                expect_entries(a, epoch ? 1700000000 : 0);
            }
        }
    }
    rm_rf(dir);
    free(dir);
}

/* ---- tokenizers ----------------------------------------------------------------- */

Test(bundle, tokenizer_sources)
{
    char *dir = tu_mkdtemp("bundle-tok");
    char ck[4200], tokp[4200], out[4200], out2[4200];
    snprintf(ck, sizeof ck, "%s/m.st", dir);
    snprintf(tokp, sizeof tokp, "%s/bytes-tokenizer.json", dir);
    size_t tl;
    char *tj = hm_bundle_bytes_tokenizer_json(&tl);
    tu_write_file(tokp, tj, tl);
    /* the provenance names the tokenizer a tool read */
    tu_bundle_model(ck, HM_FAMILY_NEOX, HM_MIXER_HEDGEMAMBA, HM_DTYPE_F32, tokp, 4);
    snprintf(out, sizeof out, "%s/a.tar.xz", dir);
    char *e = NULL, *o = NULL;
    cr_assert_eq(run(NULL, &e, "%s/hm-pack %s -o %s", HM_BIN_DIR, ck, out), 0, "%s", e);
    free(e);
    size_t n;
    char *got = bundle_file(out, "tokenizer.json", &n);
    cr_assert(n == tl && memcmp(got, tj, n) == 0);
    free(got);
    /* a bundle input brings its own; the chain grows by one hm-pack entry */
    snprintf(out2, sizeof out2, "%s/again.d", dir);
    cr_assert_eq(run(NULL, &e, "%s/hm-pack %s -o %s --format dir", HM_BIN_DIR, out, out2), 0,
                 "%s", e);
    free(e);
    cr_assert_eq(run(&o, NULL, "%s/hm-verify bundle %s", HM_BIN_DIR, out2), 0, "%s", o);
    free(o);
    got = bundle_file(out2, "tokenizer.json", &n);
    cr_assert(n == tl && memcmp(got, tj, n) == 0);
    free(got);
    struct hm_ckpt *c;
    struct hm_error err;
    cr_assert_eq(hm_ckpt_open(out2, &c, &err), HM_OK, "%s", err.msg);
    cr_assert_eq(hm_provenance_count(hm_ckpt_metadata_get(c, "hm.provenance")), 3);
    hm_ckpt_close(c);
    expect_same_logits(ck, out2);
    /* the named file is gone: the message says to pass --tokenizer */
    unlink(tokp);
    snprintf(out, sizeof out, "%s/b.zip", dir);
    cr_assert_eq(run(NULL, &e, "%s/hm-pack %s -o %s", HM_BIN_DIR, ck, out), 1);
    cr_assert(strstr(e, "give --tokenizer FILE") && strstr(e, ck), "%s", e);
    free(e);
    cr_assert(!hm_is_file(out));
    /* a tokenizer larger than the model's vocabulary is refused */
    free(tj);
    rm_rf(dir);
    free(dir);
}

Test(bundle, shared_tokenizers)
{
    char neox_tok[] = HM_SHARED_DATA "/gpt-neox-20b_tokenizer.json";
    char l2c_tok[] = HM_SHARED_DATA "/llama2c_tok512.bin";
    if (!hm_is_file(neox_tok) || !hm_is_file(l2c_tok))
        cr_skip_test("no shared data at %s (GPT-NeoX tokenizer.json, llama2c_tok512.bin)",
                     HM_SHARED_DATA);
    char *dir = tu_mkdtemp("bundle-stok");
    char ck[4200], ck2[4200], out[4200];
    snprintf(ck, sizeof ck, "%s/neox.st", dir);
    snprintf(ck2, sizeof ck2, "%s/llama.st", dir);
    tu_bundle_vocab(50304);
    tu_bundle_model(ck, HM_FAMILY_NEOX, HM_MIXER_HEDGEHOG, HM_DTYPE_F16, NULL, 9);
    tu_bundle_vocab(512);
    tu_bundle_model(ck2, HM_FAMILY_LLAMA, HM_MIXER_HEDGEMAMBA, HM_DTYPE_F32, NULL, 9);
    tu_bundle_vocab(0);
    char *e = NULL, *o = NULL;
    const char *ins[2] = {ck, ck2}, *toks[2] = {neox_tok, l2c_tok};
    const char *names[2] = {"tokenizer.json", "tokenizer.bin"};
    for (int i = 0; i < 2; i++) {
        snprintf(out, sizeof out, "%s/b%d.tar.zst", dir, i);
        cr_assert_eq(run(NULL, &e, "%s/hm-pack %s -o %s --tokenizer %s", HM_BIN_DIR, ins[i], out,
                         toks[i]), 0, "%s", e);
        free(e);
        cr_assert_eq(run(&o, NULL, "%s/hm-verify bundle %s", HM_BIN_DIR, out), 0, "%s", o);
        free(o);
        size_t n, fn;
        char *got = bundle_file(out, names[i], &n), *want = tu_read_file(toks[i], &fn);
        cr_assert(n == fn && memcmp(got, want, n) == 0, "%s differs from %s", names[i], toks[i]);
        struct hm_ckpt *c;
        struct hm_error err;
        cr_assert_eq(hm_ckpt_open(out, &c, &err), HM_OK, "%s", err.msg);
        size_t bl;
        const void *bt = hm_ckpt_bundle_tokenizer(c, &bl);
        cr_assert(bt && bl == fn && memcmp(bt, want, fn) == 0);
        hm_ckpt_close(c);
        free(got);
        free(want);
        cr_assert_eq(run(&o, &e, "%s/hm-inspect %s", HM_BIN_DIR, out), 0, "%s", e);
        cr_assert(!strstr(o, "cannot read tokenizer"), "%s", o);
        free(o), free(e);
        char *cfg = bundle_file(out, "config.json", NULL);
        cr_assert(strstr(cfg, i ? "\"bos_token_id\":\t1" : "\"bos_token_id\":\t0"), "%s", cfg);
        free(cfg);
    }
    /* the llama2.c tokenizer does not fit a 257-row model */
    tu_bundle_model(ck2, HM_FAMILY_LLAMA, HM_MIXER_SOFTMAX, HM_DTYPE_F32, NULL, 9);
    snprintf(out, sizeof out, "%s/small.tar", dir);
    cr_assert_eq(run(NULL, &e, "%s/hm-pack %s -o %s --tokenizer %s", HM_BIN_DIR, ck2, out, l2c_tok),
                 1);
    cr_assert(strstr(e, "512 tokens") && strstr(e, "257"), "%s", e);
    free(e);
    rm_rf(dir);
    free(dir);
}

/* ---- the command line --------------------------------------------------------------- */

Test(bundle, cli_refusals_and_streams)
{
    char *dir = tu_mkdtemp("bundle-cli");
    char ck[4200], out[4200], p[4200];
    snprintf(ck, sizeof ck, "%s/m.st", dir);
    tu_bundle_model(ck, HM_FAMILY_LLAMA, HM_MIXER_HEDGEHOG, HM_DTYPE_F32, NULL, 2);
    char *e = NULL, *o = NULL;
    const char *B = HM_BIN_DIR;
    snprintf(out, sizeof out, "%s/x.tar", dir);
    cr_assert_eq(run(NULL, &e, "%s/hm-pack %s -o %s --bytes", B, ck, out), 0, "%s", e);
    free(e);
    /* an existing output needs -f */
    cr_assert_eq(run(NULL, &e, "%s/hm-pack %s -o %s --bytes", B, ck, out), 1);
    cr_assert(strstr(e, "exists") && strstr(e, out), "%s", e);
    free(e);
    cr_assert_eq(run(NULL, &e, "%s/hm-pack %s -o %s --bytes -f", B, ck, out), 0, "%s", e);
    free(e);
    /* never the input, nor a folder holding it */
    cr_assert_eq(run(NULL, &e, "%s/hm-pack %s -o %s --bytes -f", B, out, out), 1);
    cr_assert(strstr(e, "would overwrite the input"), "%s", e);
    free(e);
    snprintf(p, sizeof p, "%s/d", dir);
    cr_assert_eq(run(NULL, &e, "%s/hm-pack %s -o %s --bytes", B, ck, p), 0, "%s", e);
    free(e);
    cr_assert_eq(run(NULL, &e, "%s/hm-pack %s/model.safetensors -o %s -f --bytes", B, p, p), 1);
    cr_assert(strstr(e, "would overwrite the input"), "%s", e);
    free(e);
    /* -f replaces a bundle folder, but not a folder of something else */
    cr_assert_eq(run(NULL, &e, "%s/hm-pack %s -o %s/ -f --bytes --dtype bf16", B, ck, p), 0, "%s", e);
    free(e);
    struct hm_config cfg = tu_bundle_config(HM_FAMILY_LLAMA, HM_MIXER_HEDGEHOG);
    expect_manifest_dtype(p, "BF16", n_specs(&cfg));
    snprintf(p, sizeof p, "%s/other", dir);
    cr_assert_eq(mkdir(p, 0755), 0);
    char keep[4300];
    snprintf(keep, sizeof keep, "%s/keep.txt", p);
    tu_write_file(keep, "x", 1);
    cr_assert_eq(run(NULL, &e, "%s/hm-pack %s -o %s -f --bytes", B, ck, p), 1);
    cr_assert(strstr(e, "not a bundle"), "%s", e);
    free(e);
    cr_assert(hm_is_file(keep));
    /* never a FIFO; a dead run's temporary folder is cleared by the next run */
    snprintf(p, sizeof p, "%s/fifo", dir);
    cr_assert_eq(run(NULL, &e, "mkfifo %s && %s/hm-pack %s -o %s -f --bytes --format dir", p, B,
                     ck, p), 1);
    cr_assert(strstr(e, "not a regular file or folder"), "%s", e);
    free(e);
    cr_assert_eq(run(NULL, &e, "mkdir -p %s/.d.tmp.2147480000.abcdef/x && "
                     "%s/hm-pack %s -o %s/d -f --bytes && ls -A %s", dir, B, ck, dir, dir), 0);
    free(e);
    cr_assert(!hm_is_dir(strcat(strcpy(keep, dir), "/.d.tmp.2147480000.abcdef")),
              "a dead run's leftover stayed");
    /* usage errors */
    static const char *bad[] = {"--format zip -o %s/y.tar", "-o -", "-o %s/y.bz2",
                                "--dtype f8 -o %s/y.tar", "--tokenizer t.json -o %s/y.tar",
                                "--format 7z -o %s/y"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char args[4400];
        snprintf(args, sizeof args, bad[i], dir);
        cr_assert_eq(run(NULL, &e, "%s/hm-pack %s --bytes %s", B, ck, args), 2, "%s: %s", args, e);
        free(e);
    }
    /* stdout and stdin: the archive on stdout equals the file; tools read it from stdin */
    snprintf(p, sizeof p, "%s/s.tar", dir);
    cr_assert_eq(run(NULL, &e, "%s/hm-pack %s --bytes --format tar -o - > %s", B, ck, p), 0, "%s", e);
    free(e);
    expect_same_file(out, p);
    cr_assert_eq(run(&o, &e, "%s/hm-inspect - < %s", B, p), 0, "%s", e);
    cr_assert(strstr(o, "bundle:      tar, 5 files"), "%s", o);
    free(o), free(e);
    cr_assert_eq(run(&o, &e, "%s/hm-verify bundle - < %s", B, p), 0, "%s%s", o, e);
    free(o), free(e);
    /* --dry-run writes nothing */
    snprintf(p, sizeof p, "%s/dry.zip", dir);
    cr_assert_eq(run(&o, &e, "%s/hm-pack %s --bytes -n --json -o %s", B, ck, p), 0, "%s", e);
    cr_assert(strstr(o, "\"dry_run\":true") && strstr(o, "\"files\":5"), "%s", o);
    free(o), free(e);
    cr_assert(!hm_is_file(p));
    /* --onnx: the exporter's answer is passed on (a placeholder refuses) */
    snprintf(p, sizeof p, "%s/onnx.tar", dir);
    int rc = run(&o, &e, "%s/hm-pack %s --bytes --onnx -o %s", B, ck, p);
    if (rc == 0) {
        free(o), free(e);
        cr_assert_eq(run(&o, &e, "%s/hm-verify bundle %s", B, p), 0, "%s", o);
        cr_assert(strstr(o, "valid: 5 files"), "%s", o);
        size_t n1, n2;
        char *g = bundle_file(p, HM_BUNDLE_ONNX, &n1);
        free(o), free(e);
        /* deterministic with the graph too, and a folder holds it as onnx/model.onnx */
        char p2[4300];
        snprintf(p2, sizeof p2, "%s/onnx.d", dir);
        cr_assert_eq(run(&o, &e, "%s/hm-pack %s --bytes --onnx -o %s", B, ck, p2), 0, "%s", e);
        free(o), free(e);
        char *g2 = bundle_file(p2, HM_BUNDLE_ONNX, &n2);
        cr_assert(n1 == n2 && memcmp(g, g2, n1) == 0, "the ONNX graph differs between packs");
        free(g);
        free(g2);
        cr_assert_eq(run(&o, &e, "%s/hm-verify bundle %s", B, p2), 0, "%s", o);
        free(o), free(e);
        /* a softmax teacher has no graph: the exporter's refusal is passed on */
        char t[4300], tb[4300];
        snprintf(t, sizeof t, "%s/teacher.st", dir);
        snprintf(tb, sizeof tb, "%s/teacher.tar", dir);
        tu_bundle_model(t, HM_FAMILY_NEOX, HM_MIXER_SOFTMAX, HM_DTYPE_F32, NULL, 1);
        cr_assert_eq(run(&o, &e, "%s/hm-pack %s --bytes --onnx -o %s", B, t, tb), 1);
        cr_assert(strstr(e, "cannot export") && strstr(e, "ONNX"), "%s", e);
        cr_assert(!hm_is_file(tb));
    } else {
        cr_assert_eq(rc, 1);
        cr_assert(strstr(e, "cannot export") && strstr(e, "ONNX"), "%s", e);
        cr_assert(!hm_is_file(p));
    }
    free(o), free(e);
    rm_rf(dir);
    free(dir);
}
