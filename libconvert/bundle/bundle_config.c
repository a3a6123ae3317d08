/* bundle_config.c — the HuggingFace-facing JSON files of a bundle:
 * config.json and the byte-level vocabulary as a tokenizer.json (bundle.h). */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bundle.h"

char *hm_bundle_config_json(const struct hm_config *cfg, const char *torch_dtype,
                            int64_t bos_id, int64_t eos_id)
{
    char *base = hm_config_to_json(cfg);
    cJSON *r = base ? cJSON_Parse(base) : NULL;
    free(base);
    if (!r)
        return NULL;
    /* HF reads model_type first: the arch, so a student is never taken for
     * its teacher (arch and family stay for hm). */
    cJSON_ReplaceItemInObjectCaseSensitive(r, "model_type", cJSON_CreateString(hm_arch_name(cfg)));
    if (cfg->mixer == HM_MIXER_SOFTMAX) {
        cJSON *a = cJSON_CreateArray();
        cJSON_AddItemToArray(a, cJSON_CreateString(cfg->family == HM_FAMILY_LLAMA
                                                       ? "LlamaForCausalLM"
                                                       : "GPTNeoXForCausalLM"));
        cJSON_AddItemToObject(r, "architectures", a);
    }
    const cJSON *lm = cJSON_GetObjectItemCaseSensitive(r, "layer_mixers");
    if (lm) /* a hybrid's layer pattern, as HF hybrids name it (contract §11) */
        cJSON_AddItemToObject(r, "layer_types", cJSON_Duplicate(lm, 1));
    if (torch_dtype)
        cJSON_AddStringToObject(r, "torch_dtype", torch_dtype);
    if (bos_id >= 0)
        cJSON_AddNumberToObject(r, "bos_token_id", (double)bos_id);
    if (eos_id >= 0)
        cJSON_AddNumberToObject(r, "eos_token_id", (double)eos_id);
    char *s = cJSON_Print(r);
    cJSON_Delete(r);
    return s;
}

/* GPT-2's bytes_to_unicode: the printable code point byte b stands for. */
static unsigned byte_char(unsigned b)
{
    if ((b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF))
        return b;
    unsigned n = 0;
    for (unsigned x = 0; x < b; x++)
        if (!((x >= '!' && x <= '~') || (x >= 0xA1 && x <= 0xAC) || (x >= 0xAE && x <= 0xFF)))
            n++;
    return 256 + n;
}

static cJSON *byte_level(void)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "type", "ByteLevel");
    cJSON_AddFalseToObject(o, "add_prefix_space");
    cJSON_AddTrueToObject(o, "trim_offsets");
    cJSON_AddTrueToObject(o, "use_regex");
    return o;
}

char *hm_bundle_bytes_tokenizer_json(size_t *len)
{
    cJSON *r = cJSON_CreateObject();
    if (!r)
        return NULL;
    cJSON_AddStringToObject(r, "version", "1.0");
    cJSON_AddNullToObject(r, "truncation");
    cJSON_AddNullToObject(r, "padding");
    cJSON *added = cJSON_AddArrayToObject(r, "added_tokens");
    cJSON *eot = cJSON_CreateObject();
    cJSON_AddNumberToObject(eot, "id", 256);
    cJSON_AddStringToObject(eot, "content", "<|endoftext|>");
    cJSON_AddFalseToObject(eot, "single_word");
    cJSON_AddFalseToObject(eot, "lstrip");
    cJSON_AddFalseToObject(eot, "rstrip");
    cJSON_AddFalseToObject(eot, "normalized");
    cJSON_AddTrueToObject(eot, "special");
    cJSON_AddItemToArray(added, eot);
    cJSON_AddNullToObject(r, "normalizer");
    cJSON_AddItemToObject(r, "pre_tokenizer", byte_level());
    cJSON_AddNullToObject(r, "post_processor");
    cJSON_AddItemToObject(r, "decoder", byte_level());
    cJSON *model = cJSON_AddObjectToObject(r, "model");
    cJSON_AddStringToObject(model, "type", "BPE");
    cJSON_AddNullToObject(model, "dropout");
    cJSON_AddNullToObject(model, "unk_token");
    cJSON_AddNullToObject(model, "continuing_subword_prefix");
    cJSON_AddNullToObject(model, "end_of_word_suffix");
    cJSON_AddFalseToObject(model, "fuse_unk");
    cJSON_AddFalseToObject(model, "byte_fallback");
    cJSON *vocab = cJSON_AddObjectToObject(model, "vocab");
    for (unsigned b = 0; b < 256; b++) {
        unsigned c = byte_char(b);
        char u[4] = {0};
        if (c < 0x80) {
            u[0] = (char)c;
        } else {
            u[0] = (char)(0xC0 | (c >> 6));
            u[1] = (char)(0x80 | (c & 0x3F));
        }
        cJSON_AddNumberToObject(vocab, u, b);
    }
    cJSON_AddArrayToObject(model, "merges");
    char *s = cJSON_Print(r);
    cJSON_Delete(r);
    if (s && len)
        *len = strlen(s);
    return s;
}
