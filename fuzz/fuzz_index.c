/* fuzz_index.c — libFuzzer target for the sharded index cross-checks in
 * hm_ckpt_open().
 *
 * LLVMFuzzerInitialize() builds a private folder with config.json and two
 * small valid shards (model-00001-of-00002.safetensors holds "a" and "b",
 * model-00002-of-00002.safetensors holds "c"). Each input is written as
 * model.safetensors.index.json in that folder and the folder is opened. The
 * one correct index is {"weight_map": {"a": "model-00001-of-00002.safetensors",
 * "b": same, "c": "model-00002-of-00002.safetensors"}}; anything the opener
 * accepts must expose exactly the tensors a, b and c. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checkpoint.h"
#include "safetensors.h"

#define CHECK(c)                                                               \
    do {                                                                       \
        if (!(c)) {                                                            \
            fprintf(stderr, "fuzz_index: check failed: %s (line %d)\n", #c,    \
                    __LINE__);                                                 \
            abort();                                                           \
        }                                                                      \
    } while (0)

static char dir[256];
static char index_path[320];

static void write_text(const char *name, const char *text)
{
    char p[320];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *fp = fopen(p, "wb");
    CHECK(fp && fputs(text, fp) >= 0 && fclose(fp) == 0);
}

static void write_shard(const char *name, int first, int count)
{
    static const char *names[] = {"a", "b", "c"};
    static const float vals[4] = {1, 2, 3, 4};
    int64_t shape[1] = {4};
    struct hm_error err;
    char p[320];
    struct hm_st_writer *w = hm_st_writer_new();
    CHECK(w);
    for (int i = first; i < first + count; i++)
        CHECK(hm_st_writer_add(w, names[i], HM_DTYPE_F32, 1, shape, vals, &err) == HM_OK);
    snprintf(p, sizeof p, "%s/%s", dir, name);
    CHECK(hm_st_writer_write_path(w, p, 1, &err) == HM_OK);
    hm_st_writer_free(w);
}

static void cleanup(void)
{
    static const char *names[] = {"config.json", "model-00001-of-00002.safetensors",
                                  "model-00002-of-00002.safetensors",
                                  "model.safetensors.index.json"};
    char p[320];
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        unlink(p);
    }
    rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    const char *base = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/hm-fuzz-index-XXXXXX", base && *base ? base : "/tmp");
    CHECK(mkdtemp(dir));
    atexit(cleanup);
    snprintf(index_path, sizeof index_path, "%s/model.safetensors.index.json", dir);
    write_text("config.json",
               "{\"model_type\": \"gpt_neox\", \"vocab_size\": 8, \"hidden_size\": 4,"
               " \"num_hidden_layers\": 1, \"num_attention_heads\": 1,"
               " \"intermediate_size\": 8}");
    write_shard("model-00001-of-00002.safetensors", 0, 2);
    write_shard("model-00002-of-00002.safetensors", 2, 1);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    FILE *fp = fopen(index_path, "wb");
    CHECK(fp);
    CHECK(size == 0 || fwrite(data, 1, size, fp) == size);
    CHECK(fclose(fp) == 0);
    struct hm_ckpt *ck = NULL;
    struct hm_error err;
    hm_error_clear(&err);
    enum hm_status st = hm_ckpt_open(dir, &ck, &err);
    if (st != HM_OK) {
        CHECK(ck == NULL && err.msg[0] != '\0');
        return 0;
    }
    CHECK(hm_ckpt_n_tensors(ck) == 3);
    CHECK(hm_ckpt_find(ck, "a") == 0 && hm_ckpt_find(ck, "b") == 1 &&
          hm_ckpt_find(ck, "c") == 2);
    CHECK(hm_ckpt_n_files(ck) == 2);
    hm_ckpt_close(ck);
    return 0;
}
