/* hm-inspect end to end: HF-style Pythia folders (F16, legacy buffers,
 * sharded or not) → arch, exact parameter count, components, warnings. */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "fixture.h"
#include "testutil.h"

static cJSON *inspect_json(const char *path, const char *extra)
{
    char cmd[4096], *out = NULL, *err = NULL;
    snprintf(cmd, sizeof cmd, "%s/hm-inspect --json %s '%s'", HM_BIN_DIR, extra ? extra : "", path);
    int rc = tu_run(cmd, &out, &err);
    cr_assert_eq(rc, 0, "hm-inspect exit %d, stderr: %s", rc, err);
    cJSON *j = cJSON_Parse(out);
    cr_assert_not_null(j, "stdout is not JSON: %.200s", out);
    free(out);
    free(err);
    return j;
}

static double num(const cJSON *o, const char *k)
{
    const cJSON *x = cJSON_GetObjectItem(o, k);
    cr_assert(cJSON_IsNumber(x), "field '%s' is not a number", k);
    return x->valuedouble;
}

static struct hm_config pythia_cfg(int64_t V, int64_t d, int64_t L, int64_t nh, int64_t I)
{
    struct hm_config c;
    hm_config_defaults(&c);
    c.vocab_size = V;
    c.hidden_size = d;
    c.num_hidden_layers = L;
    c.num_attention_heads = nh;
    c.intermediate_size = I;
    cr_assert_eq(hm_config_finish(&c, NULL), HM_OK);
    return c;
}

Test(inspect, pythia70m_shapes_sharded_f16, .timeout = 300)
{
    char *dir = tu_mkdtemp("inspect70m");
    struct hm_config c = pythia_cfg(50304, 512, 6, 8, 2048);
    struct tu_pythia_opts o = {.dtype = HM_DTYPE_F16, .nshards = 2, .legacy_buffers = 1,
                               .buffer_positions = 64, .seed = 7};
    tu_make_pythia(dir, &c, &o);
    cJSON *j = inspect_json(dir, NULL);
    cr_assert_str_eq(cJSON_GetObjectItem(j, "arch")->valuestring, "gpt_neox");
    cr_assert_eq((int64_t)num(j, "n_params"), 70426624);
    cr_assert_eq((int64_t)num(j, "n_params"), tu_neox_param_count(&c));
    cr_assert_eq((int64_t)num(j, "n_buffers"), 18);
    const cJSON *pg = cJSON_GetObjectItem(j, "params_by_component");
    cr_assert_eq((int64_t)num(pg, "embeddings"), 2 * 50304 * 512);
    int64_t sum = 0;
    const cJSON *x;
    cJSON_ArrayForEach(x, pg) sum += (int64_t)x->valuedouble;
    cr_assert_eq(sum, 70426624, "components sum to %lld", (long long)sum);
    const cJSON *cfg = cJSON_GetObjectItem(j, "config");
    cr_assert_eq((int64_t)num(cfg, "num_hidden_layers"), 6);
    cr_assert_eq((int64_t)num(cfg, "head_dim"), 64);
    cr_assert_eq((int64_t)num(cfg, "rotary_dims"), 16);
    cr_assert_eq(cJSON_GetArraySize(cJSON_GetObjectItem(j, "files")), 2);
    cr_assert(cJSON_IsObject(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "dtypes"), "F16")));
    cr_assert(cJSON_IsArray(cJSON_GetObjectItem(j, "provenance")));
    cJSON_Delete(j);
    free(dir);
}

Test(inspect, single_file_and_index_path_agree)
{
    char *dir = tu_mkdtemp("inspect-small");
    struct hm_config c = pythia_cfg(97, 48, 2, 3, 96);
    struct tu_pythia_opts o = {.dtype = HM_DTYPE_BF16, .nshards = 3, .legacy_buffers = 1,
                               .seed = 3};
    tu_make_pythia(dir, &c, &o);
    char *idx = tu_path(dir, "model.safetensors.index.json");
    cJSON *a = inspect_json(dir, "--tensors --hash"), *b = inspect_json(idx, "--tensors --hash");
    cr_assert_eq(num(a, "n_params"), (double)tu_neox_param_count(&c));
    cr_assert_eq(num(a, "n_params"), num(b, "n_params"));
    cJSON *ta = cJSON_GetObjectItem(a, "tensors"), *tb = cJSON_GetObjectItem(b, "tensors");
    cr_assert_eq(cJSON_GetArraySize(ta), cJSON_GetArraySize(tb));
    cr_assert_eq(cJSON_GetArraySize(ta), (int)num(a, "n_tensors"));
    for (int i = 0; i < cJSON_GetArraySize(ta); i++) {
        const cJSON *x = cJSON_GetArrayItem(ta, i), *y = cJSON_GetArrayItem(tb, i);
        cr_assert_str_eq(cJSON_GetObjectItem(x, "xxh3")->valuestring,
                         cJSON_GetObjectItem(y, "xxh3")->valuestring);
    }
    cJSON_Delete(a);
    cJSON_Delete(b);
    free(idx);
    free(dir);
}

Test(inspect, warns_on_shape_mismatch_and_tokenizer_rows)
{
    char *dir = tu_mkdtemp("inspect-warn");
    struct hm_config c = pythia_cfg(300, 32, 1, 2, 64);
    struct tu_pythia_opts o = {.dtype = HM_DTYPE_F32, .seed = 5};
    tu_make_pythia(dir, &c, &o);
    /* config claims a bigger MLP than the weights hold */
    char *cfgp = tu_path(dir, "config.json");
    size_t n;
    char *txt = tu_read_file(cfgp, &n);
    char *p = strstr(txt, "\"intermediate_size\": 64");
    cr_assert_not_null(p);
    memcpy(p, "\"intermediate_size\": 65", 23);
    tu_write_file(cfgp, txt, n);
    char tokpath[4096];
    snprintf(tokpath, sizeof tokpath, "--tokenizer %s/gpt-neox-20b_tokenizer.json", HM_SHARED_DATA);
    cJSON *j = inspect_json(dir, tokpath);
    char *w = cJSON_PrintUnformatted(cJSON_GetObjectItem(j, "warnings"));
    cr_assert(strstr(w, "dense_h_to_4h.weight' has shape [64, 32], the config implies [65, 32]"), "%s", w);
    cr_assert(strstr(w, "has 50277 tokens but the model has only 300 vocabulary rows"), "%s", w);
    free(w);
    cJSON_Delete(j);
    free(txt);
    free(cfgp);
    free(dir);
}

Test(inspect, usage_and_errors)
{
    char cmd[4096], *out, *err;
    snprintf(cmd, sizeof cmd, "%s/hm-inspect --help", HM_BIN_DIR);
    cr_assert_eq(tu_run(cmd, &out, &err), 0);
    cr_assert(strstr(out, "usage: hm-inspect"));
    cr_assert_str_eq(err, "");
    free(out);
    free(err);
    snprintf(cmd, sizeof cmd, "%s/hm-inspect --bogus x", HM_BIN_DIR);
    cr_assert_eq(tu_run(cmd, &out, &err), 2);
    cr_assert(strstr(err, "hm-inspect: error: unknown option '--bogus'"), "%s", err);
    cr_assert_str_eq(out, "");
    free(out);
    free(err);
    snprintf(cmd, sizeof cmd, "%s/hm-inspect /nonexistent/model.safetensors", HM_BIN_DIR);
    cr_assert_eq(tu_run(cmd, &out, &err), 1);
    cr_assert(strstr(err, "'/nonexistent/model.safetensors'"), "%s", err);
    free(out);
    free(err);
}
