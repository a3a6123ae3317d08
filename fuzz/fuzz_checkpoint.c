/* fuzz_checkpoint.c — libFuzzer target for what hm_ckpt_open() reads beside
 * the tensors: the hm.provenance chain (kept verbatim when foreign) and the
 * choice between a file's hm.config and a config.json beside it (the
 * disagreement note).
 *
 * The first byte selects:
 *   even: the rest is a whole model.safetensors, alone in its folder, opened
 *         as a file (its metadata — hm.config, hm.provenance — is the input);
 *   odd:  the rest is a config.json beside a fixed valid model.safetensors
 *         (hm.config of a tiny gpt_neox, a valid one-entry hm.provenance),
 *         opened as the file (hm.config wins) and as the folder
 *         (config.json wins).
 * Oracles beyond "no crash, no sanitizer report": a refusal carries a
 * message; an hm.provenance is either hm's chain or foreign, never both,
 * and never decides whether a file opens (its twin with hm.provenance "[]"
 * opens exactly when it does); a writer can always start from what the reader gives
 * (hm_provenance_append on hm_ckpt_provenance); the file's own hm.config is
 * the one in effect for a file, and a folder opened without a note has the
 * same config as the weights' own. */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "atomic_file.h"
#include "checkpoint.h"
#include "config.h"
#include "provenance.h"
#include "safetensors.h"

#define CHECK(c)                                                               \
    do {                                                                       \
        if (!(c)) {                                                            \
            fprintf(stderr, "fuzz_checkpoint: check failed: %s (line %d)\n",   \
                    #c, __LINE__);                                             \
            abort();                                                           \
        }                                                                      \
    } while (0)

static char dir[256];       /* private: one/ (a file alone), two/ (file + config.json) */
static char one_file[320], one_twin[320], two_dir[320], two_file[320], two_json[320];
static char *fixed_config;  /* the hm.config of two/model.safetensors (owned) */

static const char fixed_provenance[] =
    "[{\"tool\": \"hm-init\", \"version\": \"0.1.0\", \"args\": [\"hm-init\"],"
    " \"inputs\": [], \"start\": \"2026-12-07T00:00:00Z\", \"end\": \"2026-12-07T00:00:01Z\"}]";

static void cleanup(void)
{
    const char *files[] = {one_file, one_twin, two_file, two_json};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++)
        unlink(files[i]);
    char p[320];
    snprintf(p, sizeof p, "%s/one", dir);
    rmdir(p);
    rmdir(two_dir);
    rmdir(dir);
    free(fixed_config);
}

static void write_bytes(const char *path, const uint8_t *data, size_t size)
{
    FILE *fp = fopen(path, "wb");
    CHECK(fp);
    CHECK(size == 0 || fwrite(data, 1, size, fp) == size);
    CHECK(fclose(fp) == 0);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    const char *base = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/hm-fuzz-ckpt-XXXXXX", base && *base ? base : "/tmp");
    CHECK(mkdtemp(dir));
    atexit(cleanup);
    char p[320];
    snprintf(p, sizeof p, "%s/one", dir);
    CHECK(mkdir(p, 0700) == 0);
    snprintf(one_file, sizeof one_file, "%s/one/model.safetensors", dir);
    snprintf(one_twin, sizeof one_twin, "%s/one/twin.safetensors", dir);
    snprintf(two_dir, sizeof two_dir, "%s/two", dir);
    CHECK(mkdir(two_dir, 0700) == 0);
    snprintf(two_file, sizeof two_file, "%s/model.safetensors", two_dir);
    snprintf(two_json, sizeof two_json, "%s/config.json", two_dir);

    static const char cfg_json[] = /* make_bad_samples.py's CONFIG, hidden 8 */
        "{\"architectures\": [\"GPTNeoXForCausalLM\"], \"model_type\": \"gpt_neox\","
        " \"vocab_size\": 8, \"hidden_size\": 8, \"num_hidden_layers\": 1,"
        " \"num_attention_heads\": 2, \"intermediate_size\": 16,"
        " \"max_position_embeddings\": 32, \"rotary_pct\": 0.5, \"rotary_emb_base\": 10000,"
        " \"layer_norm_eps\": 1e-5, \"use_parallel_residual\": true, \"hidden_act\": \"gelu\","
        " \"tie_word_embeddings\": false}";
    struct hm_config cfg;
    struct hm_error err;
    CHECK(hm_config_parse(cfg_json, strlen(cfg_json), &cfg, &err) == HM_OK);
    CHECK((fixed_config = hm_config_to_json(&cfg)) != NULL);
    static const float vals[4] = {1, 2, 3, 4};
    int64_t shape[1] = {4};
    struct hm_st_writer *w = hm_st_writer_new();
    CHECK(w);
    CHECK(hm_st_writer_add(w, "a", HM_DTYPE_F32, 1, shape, vals, &err) == HM_OK);
    CHECK(hm_st_writer_set_metadata(w, "hm.config", fixed_config, &err) == HM_OK);
    CHECK(hm_st_writer_set_metadata(w, "hm.provenance", fixed_provenance, &err) == HM_OK);
    CHECK(hm_st_writer_write_path(w, two_file, 1, &err) == HM_OK);
    hm_st_writer_free(w);
    return 0;
}

/* What every opened checkpoint promises about its provenance. */
static void check_provenance(const struct hm_ckpt *ck)
{
    const char *text = hm_ckpt_metadata_get(ck, "hm.provenance");
    const char *chain = hm_ckpt_provenance(ck), *foreign = hm_ckpt_provenance_foreign(ck);
    struct hm_error err;
    if (!text) {
        CHECK(!chain && !foreign);
    } else if (foreign) {
        CHECK(!chain && foreign[0] != '\0');
        CHECK(hm_provenance_check(text, &err) != HM_OK);
    } else {
        CHECK(chain == text && hm_provenance_count(chain) >= 0);
    }
    /* a writer starts from hm's chain, or a fresh one when foreign */
    char *argv0 = "hm-fuzz";
    const struct hm_prov_entry e = {.tool = "hm-fuzz", .argc = 1, .argv = &argv0,
                                    .tokens = -1, .final_loss = 0.0 / 0.0};
    char *out = NULL;
    CHECK(hm_provenance_append(chain, &e, &out, &err) == HM_OK);
    CHECK(hm_provenance_count(out) == (chain ? hm_provenance_count(chain) : 0) + 1);
    free(out);
}

/* hm_config_to_json of ck's config equals json (as JSON values). */
static int config_is(const struct hm_ckpt *ck, const char *json)
{
    char *mine = hm_config_to_json(hm_ckpt_config(ck));
    CHECK(mine);
    cJSON *a = cJSON_Parse(mine), *b = cJSON_Parse(json);
    CHECK(a && b);
    const int same = cJSON_Compare(a, b, 1);
    cJSON_Delete(a);
    cJSON_Delete(b);
    free(mine);
    return same;
}

static struct hm_ckpt *open_checked(const char *path)
{
    struct hm_ckpt *ck = NULL;
    struct hm_error err;
    hm_error_clear(&err);
    if (hm_ckpt_open(path, &ck, &err) != HM_OK) {
        CHECK(ck == NULL && err.msg[0] != '\0');
        return NULL;
    }
    CHECK(ck && hm_ckpt_config_source(ck));
    check_provenance(ck);
    return ck;
}

/* The differential oracle of the readers needing no provenance: when the
 * file (data) is valid safetensors with an hm.provenance, its twin with
 * hm.provenance "[]" (everything else the same) opens exactly when it does.
 * Returns −1 when there is no twin to compare with. */
static int twin_opens(const uint8_t *data, size_t size)
{
    unsigned char *buf = malloc(size ? size : 1);
    CHECK(buf);
    if (size)
        memcpy(buf, data, size);
    struct hm_st_file *f = NULL;
    struct hm_error err;
    if (hm_st_open_memory(buf, size, 1, &f, &err) != HM_OK)
        return -1;
    if (!hm_st_metadata_get(f, "hm.provenance")) {
        hm_st_close(f);
        return -1;
    }
    struct hm_st_writer *w = hm_st_writer_new();
    CHECK(w);
    for (int64_t i = 0; i < hm_st_n_tensors(f); i++) {
        const struct hm_st_tensor *t = hm_st_tensor_at(f, i);
        CHECK(hm_st_writer_add(w, t->name, t->dtype, t->ndim, t->shape, hm_st_data_view(f, i),
                               &err) == HM_OK);
    }
    for (int64_t i = 0; i < hm_st_n_metadata(f); i++)
        CHECK(hm_st_writer_set_metadata(w, hm_st_metadata_key(f, i), hm_st_metadata_value(f, i),
                                        &err) == HM_OK);
    CHECK(hm_st_writer_set_metadata(w, "hm.provenance", "[]", &err) == HM_OK);
    CHECK(hm_st_writer_write_path(w, one_twin, HM_AFILE_FORCE, &err) == HM_OK);
    hm_st_writer_free(w);
    hm_st_close(f);
    struct hm_ckpt *ck = NULL;
    const int ok = hm_ckpt_open(one_twin, &ck, &err) == HM_OK;
    hm_ckpt_close(ck);
    return ok;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    if ((data[0] & 1) == 0) {
        write_bytes(one_file, data + 1, size - 1);
        struct hm_ckpt *ck = open_checked(one_file);
        const int twin = twin_opens(data + 1, size - 1);
        CHECK(twin < 0 || twin == (ck != NULL)); /* the provenance never decides */
        if (ck) {
            CHECK(strcmp(hm_ckpt_config_source(ck), "hm.config") == 0);
            CHECK(hm_ckpt_config_note(ck) == NULL); /* no config.json beside it */
            hm_ckpt_close(ck);
        }
        return 0;
    }
    write_bytes(two_json, data + 1, size - 1);
    struct hm_ckpt *ck = open_checked(two_file);
    CHECK(ck); /* a file with a good hm.config opens whatever config.json holds */
    CHECK(strcmp(hm_ckpt_config_source(ck), "hm.config") == 0 && config_is(ck, fixed_config));
    CHECK(hm_ckpt_provenance(ck) && !hm_ckpt_provenance_foreign(ck));
    const char *note = hm_ckpt_config_note(ck);
    CHECK(!note || strstr(note, ": hm.config (a file"));
    hm_ckpt_close(ck);
    ck = open_checked(two_dir);
    if (ck) {
        CHECK(strcmp(hm_ckpt_config_source(ck), "hm.config") != 0);
        if (!hm_ckpt_config_note(ck))
            CHECK(config_is(ck, fixed_config));
        hm_ckpt_close(ck);
    }
    return 0;
}
