/* test_checkpoint.c — HF folders, sharded indexes and single files as one
 * checkpoint (libconvert/checkpoint/checkpoint.c), over tu_make_pythia
 * fixtures and the checkpoint-level cases of samples/bad (expected.tsv, level
 * "ckpt"). */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "atomic_file.h"
#include "checkpoint.h"
#include "config.h"
#include "fixture.h"
#include "model.h"
#include "model_views.h"
#include "presets.h"
#include "safetensors.h"
#include "testutil.h"

#define BAD_DIR HM_SOURCE_DIR "/samples/bad"

/* vocab 64, d 16, 2 layers, 2 heads, I 32: head_dim 8, rotary dims 2 */
static struct hm_config small_config(void)
{
    struct hm_config c;
    hm_config_defaults(&c);
    c.vocab_size = 64;
    c.hidden_size = 16;
    c.num_hidden_layers = 2;
    c.num_attention_heads = 2;
    c.intermediate_size = 32;
    c.max_position_embeddings = 64;
    struct hm_error err;
    cr_assert_eq(hm_config_finish(&c, &err), HM_OK, "%s", err.msg);
    return c;
}

static char *make_fixture(const char *tag, enum hm_dtype dt, int nshards, int buffers)
{
    char *dir = tu_mkdtemp(tag);
    struct hm_config c = small_config();
    struct tu_pythia_opts o = {.dtype = dt, .nshards = nshards, .legacy_buffers = buffers,
                               .buffer_positions = 8, .seed = 42};
    tu_make_pythia(dir, &c, &o);
    return dir;
}

static void rm_rf(const char *dir)
{
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
}

static struct hm_ckpt *open_ok(const char *path)
{
    struct hm_ckpt *ck = NULL;
    struct hm_error err;
    cr_assert_eq(hm_ckpt_open(path, &ck, &err), HM_OK, "%s: %s", path, err.msg);
    cr_assert_not_null(ck);
    return ck;
}

static void expect_fail(const char *path, enum hm_status want, const char *frag)
{
    struct hm_ckpt *ck = (struct hm_ckpt *)1;
    struct hm_error err;
    hm_error_clear(&err);
    enum hm_status st = hm_ckpt_open(path, &ck, &err);
    cr_expect_eq(st, want, "%s: status %s (%s), expected %s", path, hm_status_str(st), err.msg,
                 hm_status_str(want));
    cr_expect_null(ck, "%s: handle set on failure", path);
    cr_expect(strstr(err.msg, frag) != NULL, "%s: message '%s' lacks '%s'", path, err.msg, frag);
    if (st == HM_OK && ck != (struct hm_ckpt *)1)
        hm_ckpt_close(ck);
}

/* Same names, dtypes, shapes and bytes. */
static void assert_same_tensors(const struct hm_ckpt *a, const struct hm_ckpt *b)
{
    cr_assert_eq(hm_ckpt_n_tensors(a), hm_ckpt_n_tensors(b));
    for (int64_t i = 0; i < hm_ckpt_n_tensors(a); i++) {
        const struct hm_ckpt_tensor *x = hm_ckpt_tensor_at(a, i), *y = hm_ckpt_tensor_at(b, i);
        cr_assert_str_eq(x->name, y->name);
        cr_assert_eq(x->dtype, y->dtype, "%s", x->name);
        cr_assert_eq(x->ndim, y->ndim, "%s", x->name);
        for (int d = 0; d < x->ndim; d++)
            cr_assert_eq(x->shape[d], y->shape[d]);
        cr_assert_eq(x->nbytes, y->nbytes);
        cr_assert(memcmp(hm_ckpt_data_view(a, i), hm_ckpt_data_view(b, i), x->nbytes) == 0,
                  "tensor '%s' differs", x->name);
    }
}

/* ---- fixtures ------------------------------------------------------------------ */

Test(checkpoint, single_and_sharded_fixtures_are_the_same_checkpoint)
{
    char *d1 = make_fixture("ck1", HM_DTYPE_F16, 1, 1);
    char *d2 = make_fixture("ck2", HM_DTYPE_F16, 2, 1);
    char *d3 = make_fixture("ck3", HM_DTYPE_F16, 3, 1);
    struct hm_ckpt *c1 = open_ok(d1), *c2 = open_ok(d2), *c3 = open_ok(d3);
    cr_assert_eq(hm_ckpt_n_files(c1), 1);
    cr_assert_eq(hm_ckpt_n_files(c2), 2);
    cr_assert_eq(hm_ckpt_n_files(c3), 3);
    assert_same_tensors(c1, c2);
    assert_same_tensors(c1, c3);
    /* 2 layers × 16 per layer (12 parameters + 3 buffers... ) + 5 */
    int64_t n = hm_ckpt_n_tensors(c1), params = 0, buffers = 0;
    for (int64_t i = 0; i < n; i++) {
        const struct hm_ckpt_tensor *t = hm_ckpt_tensor_at(c1, i);
        if (hm_is_ignored_buffer(t->name))
            buffers++;
        else
            params++;
        if (i > 0)
            cr_assert_lt(strcmp(hm_ckpt_tensor_at(c1, i - 1)->name, t->name), 0, "sorted");
        cr_assert_eq(hm_ckpt_find(c1, t->name), i);
    }
    cr_assert_eq(buffers, 2 * 3);
    cr_assert_eq(params, 2 * 12 + 4);
    cr_assert_eq(hm_ckpt_find(c1, "nope"), -1);
    /* config from config.json in every case */
    struct hm_config want = small_config();
    for (int k = 0; k < 3; k++) {
        struct hm_ckpt *c = k == 0 ? c1 : k == 1 ? c2 : c3;
        const struct hm_config *cfg = hm_ckpt_config(c);
        cr_assert_eq(cfg->hidden_size, want.hidden_size);
        cr_assert_eq(cfg->num_hidden_layers, want.num_hidden_layers);
        cr_assert_eq(cfg->head_dim, 8);
        cr_assert(strstr(hm_ckpt_config_source(c), "config.json"), "%s",
                  hm_ckpt_config_source(c));
    }
    /* the index path itself opens the same checkpoint */
    char *ip = tu_path(d3, "model.safetensors.index.json");
    struct hm_ckpt *c3i = open_ok(ip);
    assert_same_tensors(c3, c3i);
    hm_ckpt_close(c3i);
    free(ip);
    /* a shard given alone is a file with config.json beside it */
    char *s1 = tu_path(d2, "model-00001-of-00002.safetensors");
    struct hm_ckpt *cs = open_ok(s1);
    cr_assert_lt(hm_ckpt_n_tensors(cs), n);
    hm_ckpt_close(cs);
    free(s1);
    hm_ckpt_close(c1);
    hm_ckpt_close(c2);
    hm_ckpt_close(c3);
    rm_rf(d1);
    rm_rf(d2);
    rm_rf(d3);
    free(d1);
    free(d2);
    free(d3);
}

Test(checkpoint, load_f32_checks_shapes_and_dtypes)
{
    char *d = make_fixture("ckload", HM_DTYPE_BF16, 2, 1);
    struct hm_ckpt *ck = open_ok(d);
    struct hm_error err;
    int64_t shape[2] = {64, 16}, wrong[2] = {16, 64};
    float *buf = malloc(sizeof(float) * 64 * 16);
    cr_assert_eq(hm_ckpt_load_f32(ck, "embed_out.weight", 2, shape, buf, &err), HM_OK, "%s",
                 err.msg);
    const struct hm_ckpt_tensor *t = hm_ckpt_tensor_at(ck, hm_ckpt_find(ck, "embed_out.weight"));
    cr_assert_eq(t->dtype, HM_DTYPE_BF16);
    double ss = 0;
    for (int i = 0; i < 64 * 16; i++)
        ss += (double)buf[i] * buf[i];
    cr_assert(ss > 0.1 * 1024 * 0.0004 && ss < 10 * 1024 * 0.0004, "std 0.02 weights: ss %g", ss);
    cr_assert_eq(hm_ckpt_load_f32(ck, "embed_out.weight", 2, wrong, buf, &err), HM_ERR_INVALID);
    cr_assert(strstr(err.msg, "has shape [64, 16], expected [16, 64]"), "%s", err.msg);
    cr_assert_eq(hm_ckpt_load_f32(ck, "embed_out.weight", 1, shape, buf, &err), HM_ERR_INVALID);
    cr_assert_eq(hm_ckpt_load_f32(ck, "missing.weight", 1, shape, buf, &err), HM_ERR_INVALID);
    cr_assert(strstr(err.msg, "'missing.weight' is missing"), "%s", err.msg);
    int64_t bshape[4] = {1, 1, 8, 8};
    cr_assert_eq(hm_ckpt_load_f32(ck, "gpt_neox.layers.0.attention.bias", 4, bshape, buf, &err),
                 HM_ERR_UNSUPPORTED);
    cr_assert(strstr(err.msg, "gpt_neox.layers.0.attention.bias"), "%s", err.msg);
    /* masked_bias: a -inf scalar kept as stored */
    cr_assert_eq(hm_ckpt_load_f32(ck, "gpt_neox.layers.1.attention.masked_bias", 0, NULL, buf,
                                  &err), HM_OK, "%s", err.msg);
    cr_assert(buf[0] < 0 && isinf(buf[0]));
    free(buf);
    hm_ckpt_close(ck);
    hm_ckpt_close(NULL);
    rm_rf(d);
    free(d);
}

Test(checkpoint, pythia_70m_parameter_count, .timeout = 600)
{
    char *dir = tu_mkdtemp("ck70m");
    struct hm_config c;
    hm_config_defaults(&c);
    c.vocab_size = 50304;
    c.hidden_size = 512;
    c.num_hidden_layers = 6;
    c.num_attention_heads = 8;
    c.intermediate_size = 2048;
    c.max_position_embeddings = 2048;
    struct hm_error err;
    cr_assert_eq(hm_config_finish(&c, &err), HM_OK);
    struct tu_pythia_opts o = {.dtype = HM_DTYPE_F16, .nshards = 2, .legacy_buffers = 1,
                               .buffer_positions = 16, .seed = 7};
    tu_make_pythia(dir, &c, &o);
    struct hm_ckpt *ck = open_ok(dir);
    int64_t params = 0, buffers = 0;
    size_t bytes = 0;
    for (int64_t i = 0; i < hm_ckpt_n_tensors(ck); i++) {
        const struct hm_ckpt_tensor *t = hm_ckpt_tensor_at(ck, i);
        if (hm_is_ignored_buffer(t->name)) {
            buffers++;
            continue;
        }
        params += t->numel;
        bytes += t->nbytes;
        cr_assert_eq(t->dtype, HM_DTYPE_F16, "%s", t->name);
    }
    cr_assert_eq(params, 70426624);
    cr_assert_eq(params, tu_neox_param_count(&c));
    cr_assert_eq(bytes, 2 * (size_t)70426624);
    cr_assert_eq(buffers, 6 * 3);
    cr_assert_eq(hm_ckpt_n_files(ck), 2);
    const struct hm_config *cfg = hm_ckpt_config(ck);
    cr_assert(cfg->vocab_size == 50304 && cfg->hidden_size == 512 && cfg->head_dim == 64 &&
              cfg->rotary_dims == 16);
    hm_ckpt_close(ck);
    rm_rf(dir);
    free(dir);
}

/* ---- malformed checkpoints ---------------------------------------------------------- */

Test(checkpoint_bad, every_sample_is_refused_with_its_message)
{
    FILE *fp = fopen(BAD_DIR "/expected.tsv", "r");
    cr_assert(fp, "cannot open expected.tsv: %s", strerror(errno));
    char line[2048];
    int n_ckpt = 0, n_st = 0;
    while (fgets(line, sizeof line, fp)) {
        if (line[0] == '#' || line[0] == '\n')
            continue;
        line[strcspn(line, "\n")] = '\0';
        char *save = NULL;
        char *rel = strtok_r(line, "\t", &save), *level = strtok_r(NULL, "\t", &save);
        char *status = strtok_r(NULL, "\t", &save), *frag = strtok_r(NULL, "\t", &save);
        cr_assert(rel && level && status && frag, "expected.tsv: short line");
        enum hm_status want = strcmp(status, "FORMAT") == 0      ? HM_ERR_FORMAT
                              : strcmp(status, "IO") == 0        ? HM_ERR_IO
                              : strcmp(status, "INVALID") == 0   ? HM_ERR_INVALID
                              : strcmp(status, "UNSUPPORTED") == 0 ? HM_ERR_UNSUPPORTED
                                                                 : HM_OK;
        cr_assert_neq(want, HM_OK, "bad status '%s'", status);
        char path[1200];
        snprintf(path, sizeof path, "%s/%s", BAD_DIR, rel);
        /* file-level samples fail here too, on the same message */
        expect_fail(path, want, frag);
        if (strcmp(level, "ckpt") == 0)
            n_ckpt++;
        else
            n_st++;
    }
    fclose(fp);
    cr_assert_geq(n_ckpt, 20, "only %d checkpoint-level samples", n_ckpt);
    cr_assert_geq(n_st, 30);
}

/* Index cross-checks on a real fixture, edited at test time. */
static void write_text(const char *dir, const char *name, const char *text)
{
    char *p = tu_path(dir, name);
    tu_write_file(p, text, strlen(text));
    free(p);
}

static void copy_file(const char *dir, const char *from, const char *to)
{
    char *a = tu_path(dir, from), *b = tu_path(dir, to);
    size_t n;
    char *bytes = tu_read_file(a, &n);
    tu_write_file(b, bytes, n);
    free(bytes);
    free(a);
    free(b);
}

Test(checkpoint_bad, index_edits_on_a_fixture)
{
    char *d = make_fixture("ckidx", HM_DTYPE_F32, 2, 0);
    char *ip = tu_path(d, "model.safetensors.index.json");
    size_t n;
    char *orig = tu_read_file(ip, &n);
    struct hm_ckpt *ck = open_ok(d);
    hm_ckpt_close(ck);

    /* an extra shard of the same set, not named by the index */
    copy_file(d, "model-00001-of-00002.safetensors", "model-00003-of-00002.safetensors");
    expect_fail(d, HM_ERR_FORMAT, "is not named by index");
    char *extra = tu_path(d, "model-00003-of-00002.safetensors");
    unlink(extra);
    free(extra);
    ck = open_ok(d);
    hm_ckpt_close(ck);

    /* a missing shard */
    char *s2 = tu_path(d, "model-00002-of-00002.safetensors");
    char *saved = tu_path(d, "saved.bin");
    cr_assert_eq(rename(s2, saved), 0);
    expect_fail(d, HM_ERR_IO, "model-00002-of-00002.safetensors");
    expect_fail(ip, HM_ERR_IO, "named by index");
    cr_assert_eq(rename(saved, s2), 0);

    /* embed_out.weight moved to the wrong shard in the index */
    char *txt = strdup(orig);
    char *p = strstr(txt, "\"embed_out.weight\": \"model-00002");
    cr_assert(p, "fixture index layout changed");
    p[strlen("\"embed_out.weight\": \"model-0000")] = '1';
    write_text(d, "model.safetensors.index.json", txt);
    expect_fail(d, HM_ERR_FORMAT, "maps tensor 'embed_out.weight' to shard");
    free(txt);

    /* a tensor dropped from the index */
    txt = strdup(orig);
    p = strstr(txt, ",\n    \"embed_out.weight\"");
    cr_assert(p, "fixture index layout changed");
    char *eol = strchr(p + 2, '\n');
    memmove(p, eol, strlen(eol) + 1);
    write_text(d, "model.safetensors.index.json", txt);
    expect_fail(d, HM_ERR_FORMAT, "tensor 'embed_out.weight' in shard");
    free(txt);

    /* path traversal */
    write_text(d, "model.safetensors.index.json",
               "{\"weight_map\": {\"embed_out.weight\": \"../model-00002-of-00002.safetensors\"}}");
    expect_fail(d, HM_ERR_FORMAT, "is not a file in the folder");
    write_text(d, "model.safetensors.index.json", "{\"weight_map\": 3}");
    expect_fail(d, HM_ERR_FORMAT, "has no 'weight_map' object");
    write_text(d, "model.safetensors.index.json", "");
    expect_fail(d, HM_ERR_FORMAT, "is not a JSON object");

    /* restored: fine again; config.json removed: no config */
    write_text(d, "model.safetensors.index.json", orig);
    ck = open_ok(d);
    hm_ckpt_close(ck);
    char *cj = tu_path(d, "config.json");
    unlink(cj);
    expect_fail(d, HM_ERR_INVALID, "no model config");
    free(cj);
    free(s2);
    free(saved);
    free(orig);
    free(ip);
    rm_rf(d);
    free(d);
}

Test(checkpoint_bad, folder_and_path_errors)
{
    char *d = tu_mkdtemp("ckempty");
    expect_fail(d, HM_ERR_INVALID, "folder has neither");
    char *missing = tu_path(d, "absent.safetensors");
    expect_fail(missing, HM_ERR_IO, "cannot open");
    free(missing);
    char *sub = tu_path(d, "model.safetensors");
    cr_assert_eq(mkdir(sub, 0755), 0);
    /* a folder where the weights should be is named, not taken for absent */
    expect_fail(d, HM_ERR_INVALID, "model.safetensors' is not a regular file");
    rmdir(sub);
    free(sub);
    rmdir(d);
    free(d);
}

/* ---- config precedence --------------------------------------------------------- */

/* A one-tensor file with hm.config (layers = layers) at dir/name. */
static void write_hm_file(const char *dir, const char *name, int layers)
{
    struct hm_config c = small_config();
    c.num_hidden_layers = layers;
    char *js = hm_config_to_json(&c);
    struct hm_st_writer *w = hm_st_writer_new();
    struct hm_error err;
    int64_t s[1] = {2};
    float v[2] = {1, 2};
    cr_assert_eq(hm_st_writer_add(w, "x", HM_DTYPE_F32, 1, s, v, &err), HM_OK);
    cr_assert_eq(hm_st_writer_set_metadata(w, "hm.config", js, &err), HM_OK);
    char *p = tu_path(dir, name);
    cr_assert_eq(hm_st_writer_write_path(w, p, 1, &err), HM_OK, "%s", err.msg);
    free(p);
    free(js);
    hm_st_writer_free(w);
}

Test(checkpoint_config, hm_config_precedence)
{
    char *d = tu_mkdtemp("ckcfg");
    write_hm_file(d, "model.safetensors", 5);
    char *file = tu_path(d, "model.safetensors");

    /* only hm.config: used for the file and the folder */
    struct hm_ckpt *ck = open_ok(file);
    cr_assert_str_eq(hm_ckpt_config_source(ck), "hm.config");
    cr_assert_eq(hm_ckpt_config(ck)->num_hidden_layers, 5);
    hm_ckpt_close(ck);
    ck = open_ok(d);
    cr_assert_str_eq(hm_ckpt_config_source(ck), "hm.config");
    hm_ckpt_close(ck);

    /* config.json beside it (3 layers): the hm-written file keeps its own
     * hm.config; the HF folder view prefers config.json */
    write_text(d, "config.json",
               "{\"model_type\": \"gpt_neox\", \"vocab_size\": 64, \"hidden_size\": 16,"
               " \"num_hidden_layers\": 3, \"num_attention_heads\": 2,"
               " \"intermediate_size\": 32}");
    ck = open_ok(file);
    cr_assert_str_eq(hm_ckpt_config_source(ck), "hm.config");
    cr_assert_eq(hm_ckpt_config(ck)->num_hidden_layers, 5);
    /* not silently (issue 32): the fields and the winner are named */
    cr_assert(hm_ckpt_config_note(ck) && strstr(hm_ckpt_config_note(ck), "num_hidden_layers") &&
              strstr(hm_ckpt_config_note(ck), "hm.config (a file"), "%s",
              hm_ckpt_config_note(ck) ? hm_ckpt_config_note(ck) : "no note");
    hm_ckpt_close(ck);
    ck = open_ok(d);
    cr_assert(strstr(hm_ckpt_config_source(ck), "config.json"), "%s", hm_ckpt_config_source(ck));
    cr_assert_eq(hm_ckpt_config(ck)->num_hidden_layers, 3);
    cr_assert(hm_ckpt_config_note(ck) && strstr(hm_ckpt_config_note(ck), "config.json (a folder"),
              "%s", hm_ckpt_config_note(ck) ? hm_ckpt_config_note(ck) : "no note");
    hm_ckpt_close(ck);

    /* a broken config.json is reported for the folder, not for the hm file */
    write_text(d, "config.json", "{\"model_type\": \"gpt_neox\", \"hidden_size\": }");
    expect_fail(d, HM_ERR_FORMAT, "config is not valid JSON");
    ck = open_ok(file);
    hm_ckpt_close(ck);

    /* a plain file (no hm.config) takes config.json */
    char *cj = tu_path(d, "config.json");
    unlink(cj);
    write_text(d, "config.json",
               "{\"model_type\": \"gpt_neox\", \"vocab_size\": 64, \"hidden_size\": 16,"
               " \"num_hidden_layers\": 4, \"num_attention_heads\": 2,"
               " \"intermediate_size\": 32}");
    struct hm_st_writer *w = hm_st_writer_new();
    struct hm_error err;
    int64_t s[1] = {1};
    float v = 1;
    cr_assert_eq(hm_st_writer_add(w, "y", HM_DTYPE_F32, 1, s, &v, &err), HM_OK);
    char *plain = tu_path(d, "plain.safetensors");
    cr_assert_eq(hm_st_writer_write_path(w, plain, 0, &err), HM_OK);
    hm_st_writer_free(w);
    ck = open_ok(plain);
    cr_assert_eq(hm_ckpt_config(ck)->num_hidden_layers, 4);
    cr_assert_null(hm_ckpt_metadata_get(ck, "hm.config"));
    hm_ckpt_close(ck);

    /* hm.config round trip: the JSON we write parses back to the same config */
    struct hm_config c = small_config(), back;
    c.mixer = HM_MIXER_HEDGEMAMBA;
    c.feature_dim = 8;
    c.conv_width = 3;
    c.components = HM_COMP_SSM | HM_COMP_GATE;
    c.layer_norm_eps = 0.1 + 0.2; /* 0.30000000000000004: needs 17 digits */
    c.rotary_emb_base = 12345.678901234567;
    char *js = hm_config_to_json(&c);
    cr_assert_eq(hm_config_parse(js, strlen(js), &back, &err), HM_OK, "%s", err.msg);
    cr_assert_eq(back.mixer, HM_MIXER_HEDGEMAMBA);
    cr_assert_eq(back.components, HM_COMP_SSM | HM_COMP_GATE);
    cr_assert_eq(back.conv_width, 3);
    cr_assert_eq(back.feature_dim, 8);
    cr_assert_eq(back.layer_norm_eps, c.layer_norm_eps, "%s", js);
    cr_assert_eq(back.rotary_emb_base, c.rotary_emb_base, "%s", js);
    free(js);

    unlink(plain);
    unlink(file);
    unlink(cj);
    free(plain);
    free(file);
    free(cj);
    rmdir(d);
    free(d);
}

Test(checkpoint_config, stdin_needs_hm_config)
{
    char *d = tu_mkdtemp("ckstdin");
    write_hm_file(d, "m.safetensors", 2);
    char *p = tu_path(d, "m.safetensors");
    FILE *in = freopen(p, "rb", stdin);
    cr_assert(in);
    struct hm_ckpt *ck = open_ok("-");
    cr_assert_eq(hm_ckpt_n_tensors(ck), 1);
    cr_assert_str_eq(hm_ckpt_config_source(ck), "hm.config");
    hm_ckpt_close(ck);
    /* without hm.config there is nothing to read the config from */
    struct hm_st_writer *w = hm_st_writer_new();
    struct hm_error err;
    int64_t s[1] = {1};
    float v = 1;
    cr_assert_eq(hm_st_writer_add(w, "y", HM_DTYPE_F32, 1, s, &v, &err), HM_OK);
    cr_assert_eq(hm_st_writer_write_path(w, p, HM_AFILE_FORCE, &err), HM_OK);
    hm_st_writer_free(w);
    cr_assert(freopen(p, "rb", stdin));
    expect_fail("-", HM_ERR_INVALID, "no model config");
    unlink(p);
    free(p);
    rmdir(d);
    free(d);
}

Test(checkpoint_config, config_parse_errors)
{
    static const struct {
        const char *json;
        enum hm_status st;
        const char *frag;
    } cases[] = {
        {"", HM_ERR_FORMAT, "config is not valid JSON"},
        {"{", HM_ERR_FORMAT, "config is not valid JSON"},
        {"[]", HM_ERR_FORMAT, "config is not a JSON object"},
        {"{}", HM_ERR_INVALID, "neither 'arch' nor 'model_type'"},
        {"{\"model_type\": \"gpt_neox\", \"vocab_size\": 64, \"hidden_size\": 16, "
         "\"num_hidden_layers\": 1, \"num_attention_heads\": 2, \"intermediate_size\": 32, "
         "\"max_position_embeddings\": 0}",
         HM_ERR_INVALID, "max_position_embeddings 0 is out of range"},
        {"{\"model_type\": \"mistral\"}", HM_ERR_UNSUPPORTED, "model_type 'mistral'"},
        {"{\"arch\": 3}", HM_ERR_UNSUPPORTED, "config 'arch' is not one of"},
        {"{\"model_type\": \"gpt_neox\"}", HM_ERR_INVALID, "config lacks 'vocab_size'"},
        {"{\"model_type\": \"gpt_neox\", \"vocab_size\": 8, \"hidden_size\": 6,"
         " \"num_hidden_layers\": 1, \"num_attention_heads\": 4, \"intermediate_size\": 8}",
         HM_ERR_INVALID, "hidden_size 6 is not a multiple of num_attention_heads 4"},
        {"{\"model_type\": \"gpt_neox\", \"vocab_size\": 8, \"hidden_size\": 8,"
         " \"num_hidden_layers\": 1, \"num_attention_heads\": 4, \"intermediate_size\": 8,"
         " \"tie_word_embeddings\": true}",
         HM_ERR_UNSUPPORTED, "tie_word_embeddings is true"},
        {"{\"model_type\": \"gpt_neox\", \"vocab_size\": 8.5, \"hidden_size\": 8,"
         " \"num_hidden_layers\": 1, \"num_attention_heads\": 4, \"intermediate_size\": 8}",
         HM_ERR_INVALID, "'vocab_size' is not an integer"},
        {"{\"model_type\": \"gpt_neox\", \"vocab_size\": 8, \"hidden_size\": 0,"
         " \"num_hidden_layers\": 1, \"num_attention_heads\": 4, \"intermediate_size\": 8}",
         HM_ERR_INVALID, "out of range"},
        {"{\"model_type\": \"gpt_neox\", \"vocab_size\": 8, \"hidden_size\": 8,"
         " \"num_hidden_layers\": 1, \"num_attention_heads\": 4, \"intermediate_size\": 8,"
         " \"hidden_act\": \"relu\"}",
         HM_ERR_UNSUPPORTED, "hidden_act 'relu'"},
        {"{\"model_type\": \"gpt_neox\", \"vocab_size\": 8, \"hidden_size\": 8,"
         " \"num_hidden_layers\": 1, \"num_attention_heads\": 4, \"intermediate_size\": 8,"
         " \"rotary_pct\": 1.5}",
         HM_ERR_INVALID, "rotary_pct"},
        {"{\"model_type\": \"gpt_neox\", \"vocab_size\": 8, \"hidden_size\": 8,"
         " \"num_hidden_layers\": 1, \"num_attention_heads\": 4, \"intermediate_size\": 8,"
         " \"use_parallel_residual\": 1}",
         HM_ERR_INVALID, "'use_parallel_residual' is not a boolean"},
        {"{\"arch\": \"hedgemamba\", \"vocab_size\": 8, \"hidden_size\": 8,"
         " \"num_hidden_layers\": 1, \"num_attention_heads\": 4, \"intermediate_size\": 8,"
         " \"components\": [\"ssm\", \"attn\"]}",
         HM_ERR_INVALID, "'components' holds something other than"},
        {"{\"arch\": \"hedgemamba\", \"vocab_size\": 8, \"hidden_size\": 8,"
         " \"num_hidden_layers\": 1, \"num_attention_heads\": 4, \"intermediate_size\": 8,"
         " \"conv_width\": 0}",
         HM_ERR_INVALID, "conv_width 0 is out of range"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        struct hm_config c;
        struct hm_error err;
        hm_error_clear(&err);
        /* exact-size heap copy: the parser must not need a NUL */
        size_t len = strlen(cases[i].json);
        char *copy = malloc(len ? len : 1);
        memcpy(copy, cases[i].json, len);
        enum hm_status st = hm_config_parse(copy, len, &c, &err);
        free(copy);
        cr_expect_eq(st, cases[i].st, "case %zu (%s): %s", i, cases[i].json, err.msg);
        cr_expect(strstr(err.msg, cases[i].frag), "case %zu: '%s' lacks '%s'", i, err.msg,
                  cases[i].frag);
    }
}

/* hm_init_write (hm-init's path: each tensor made when the writer reaches it,
 * from the generator state it has in table order, in pieces of 64Ki values)
 * writes the bytes that a model made by hm_model_init_random and saved with
 * hm_model_save has, for both families, every dtype, and tensors larger than
 * a piece (embeddings of 600 × 128 > 65536 values). */
Test(checkpoint, init_write_equals_the_model_saved)
{
    char *dir = tu_mkdtemp("initw");
    struct hm_config cfgs[2];
    cr_assert_eq(hm_config_preset("tiny", &cfgs[0]), 0);
    cr_assert_eq(hm_config_preset("llama-tiny", &cfgs[1]), 0);
    struct hm_error err;
    for (int f = 0; f < 2; f++) {
        cfgs[f].vocab_size = 600;
        cfgs[f].hidden_size = 128;
        cr_assert_eq(hm_config_finish(&cfgs[f], &err), HM_OK, "%s", err.msg);
    }
    const enum hm_dtype dts[3] = {HM_DTYPE_F32, HM_DTYPE_BF16, HM_DTYPE_F16};
    for (int f = 0; f < 2; f++)
        for (int k = 0; k < 3; k++) {
            char *a = tu_path(dir, "a.st"), *b = tu_path(dir, "b.st");
            struct hm_model *m;
            cr_assert_eq(hm_model_new(&cfgs[f], &m, &err), HM_OK, "%s", err.msg);
            hm_model_init_random(m, 7 + (uint64_t)k, 0.02);
            cr_assert_eq(hm_model_save(m, a, HM_AFILE_FORCE, "[]", dts[k], NULL, &err), HM_OK,
                         "%s", err.msg);
            cr_assert_eq(hm_init_write(&cfgs[f], 7 + (uint64_t)k, 0.02, dts[k], "[]", b,
                                       HM_AFILE_FORCE, &err),
                         HM_OK, "%s", err.msg);
            size_t la, lb;
            char *da = tu_read_file(a, &la), *db = tu_read_file(b, &lb);
            cr_assert(la == lb && memcmp(da, db, la) == 0,
                      "family %d dtype %d: %zu vs %zu bytes, or other bytes", f, k, la, lb);
            /* and the weights are random: a different seed differs */
            cr_assert_eq(hm_init_write(&cfgs[f], 8 + (uint64_t)k, 0.02, dts[k], "[]", b,
                                       HM_AFILE_FORCE, &err),
                         HM_OK, "%s", err.msg);
            free(db);
            db = tu_read_file(b, &lb);
            cr_assert(la == lb && memcmp(da, db, la) != 0);
            free(da);
            free(db);
            hm_model_free(m);
            free(a);
            free(b);
        }
    struct hm_config st;
    cr_assert_eq(hm_config_preset("tiny", &st), 0);
    st.mixer = HM_MIXER_HEDGEHOG;
    char *c = tu_path(dir, "c.st");
    cr_assert_neq(hm_init_write(&st, 1, 0.02, HM_DTYPE_F32, "[]", c, 0, &err), HM_OK);
    cr_assert(access(c, F_OK) != 0, "a refused write leaves no file");
    free(c);
    free(dir);
}
