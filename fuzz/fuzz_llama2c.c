/* fuzz_llama2c.c — libFuzzer target for the llama2.c readers: the model
 * file (hm_llama2c_open_memory + every tensor read) and the tokenizer.bin
 * loader (hm_tokenizer_load_llama2c, then encode and decode a fixed text).
 * An accepted model must have a finished llama config and tensors that
 * read back (or are refused for NaN/Inf with a message); an accepted
 * tokenizer must encode and decode a fixed text. Refusals carry a message. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "import_llama2c.h"
#include "tokenizer.h"

#define CHECK(c)                                                               \
    do {                                                                       \
        if (!(c)) {                                                            \
            fprintf(stderr, "fuzz_llama2c: check failed: %s (line %d)\n", #c,  \
                    __LINE__);                                                 \
            abort();                                                           \
        }                                                                      \
    } while (0)

static void model(const uint8_t *data, size_t size)
{
    struct hm_llama2c *m = NULL;
    struct hm_error err;
    hm_error_clear(&err);
    if (hm_llama2c_open_memory(data, size, &m, &err) != HM_OK) {
        CHECK(err.msg[0] != '\0');
        return;
    }
    const struct hm_config *c = hm_llama2c_get_config(m);
    CHECK(c->family == HM_FAMILY_LLAMA && c->num_attention_heads % c->num_key_value_heads == 0);
    for (int64_t i = 0; i < hm_llama2c_n_tensors(m); i++) {
        const struct hm_llama2c_tensor *t = hm_llama2c_tensor_at(m, i);
        const int64_t n = t->numel;
        float *buf = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
        CHECK(buf);
        /* a read refuses NaN/Inf weights, naming them */
        if (hm_llama2c_read_tensor(m, i, buf, &err) != HM_OK)
            CHECK(err.msg[0] != '\0');
        free(buf);
    }
    hm_llama2c_close(m);
}

static void tokenizer(const uint8_t *data, size_t size)
{
    struct hm_tokenizer *tok = NULL;
    struct hm_error err;
    hm_error_clear(&err);
    if (hm_tokenizer_load_llama2c(data, size, &tok, &err) != HM_OK) {
        CHECK(err.msg[0] != '\0');
        return;
    }
    static const char text[] = "Once upon a time, \xc3\xa9 \xf0\x9f\x98\x80 lll\n";
    struct hm_ids ids = {0};
    CHECK(hm_tokenizer_encode_ex(tok, text, sizeof text - 1, HM_TOKENIZER_BOS, &ids, &err) ==
          HM_OK);
    char *out = NULL;
    size_t len = 0;
    CHECK(hm_tokenizer_decode(tok, ids.v, ids.n, &out, &len, &err) == HM_OK);
    free(out);
    hm_ids_release(&ids);
    hm_tokenizer_free(tok);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* the first byte picks the reader; the rest is the file */
    if (size < 1)
        return 0;
    if (data[0] & 1)
        tokenizer(data + 1, size - 1);
    else
        model(data + 1, size - 1);
    return 0;
}
