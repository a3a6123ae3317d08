/* fuzz_config.c — libFuzzer target for hm_config_parse (config.json and
 * the hm.config metadata string).
 *
 * The input is parsed from an exact-size heap copy (not NUL-terminated, as
 * metadata views are not). An accepted config must pass hm_config_finish()
 * again, and hm_config_to_json() → hm_config_parse() must give back the same
 * fields (the hm.config round trip every hm-written file relies on). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

#define CHECK(c)                                                               \
    do {                                                                       \
        if (!(c)) {                                                            \
            fprintf(stderr, "fuzz_config: check failed: %s (line %d)\n", #c,   \
                    __LINE__);                                                 \
            abort();                                                           \
        }                                                                      \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = malloc(size ? size : 1);
    if (!buf)
        return 0;
    if (size)
        memcpy(buf, data, size);
    struct hm_config cfg;
    struct hm_error err;
    hm_error_clear(&err);
    enum hm_status st = hm_config_parse(buf, size, &cfg, &err);
    free(buf);
    if (st != HM_OK) {
        CHECK(err.msg[0] != '\0');
        return 0;
    }
    struct hm_config again = cfg;
    CHECK(hm_config_finish(&again, &err) == HM_OK);
    CHECK(cfg.head_dim * cfg.num_attention_heads == cfg.attn_dim);
    if (cfg.family == HM_FAMILY_NEOX)
        CHECK(cfg.attn_dim == cfg.hidden_size);
    CHECK(cfg.num_attention_heads % cfg.num_key_value_heads == 0);
    CHECK(cfg.qkv_dim == cfg.attn_dim + 2 * cfg.num_key_value_heads * cfg.head_dim);
    CHECK(cfg.rotary_dims >= 0 && cfg.rotary_dims <= cfg.head_dim);

    char *json = hm_config_to_json(&cfg);
    CHECK(json);
    struct hm_config back;
    st = hm_config_parse(json, strlen(json), &back, &err);
    if (st != HM_OK)
        fprintf(stderr, "fuzz_config: re-parse of '%s' failed: %s\n", json, err.msg);
    CHECK(st == HM_OK);
    free(json);
    CHECK(back.mixer == cfg.mixer && back.family == cfg.family);
    CHECK(back.num_key_value_heads == cfg.num_key_value_heads);
    CHECK(back.attention_bias == cfg.attention_bias && back.mlp_bias == cfg.mlp_bias);
    CHECK(back.tie_word_embeddings == cfg.tie_word_embeddings);
    CHECK(back.rope_scaling.type == cfg.rope_scaling.type);
    if (cfg.rope_scaling.type == HM_ROPE_LLAMA3) {
        CHECK(back.rope_scaling.factor == cfg.rope_scaling.factor);
        CHECK(back.rope_scaling.low_freq_factor == cfg.rope_scaling.low_freq_factor);
        CHECK(back.rope_scaling.high_freq_factor == cfg.rope_scaling.high_freq_factor);
        CHECK(back.rope_scaling.original_max_position_embeddings ==
              cfg.rope_scaling.original_max_position_embeddings);
    }
    CHECK(back.vocab_size == cfg.vocab_size && back.hidden_size == cfg.hidden_size);
    CHECK(back.num_hidden_layers == cfg.num_hidden_layers);
    CHECK(back.num_attention_heads == cfg.num_attention_heads);
    CHECK(back.intermediate_size == cfg.intermediate_size);
    CHECK(back.max_position_embeddings == cfg.max_position_embeddings);
    CHECK(back.rotary_pct == cfg.rotary_pct && back.rotary_emb_base == cfg.rotary_emb_base);
    CHECK(back.layer_norm_eps == cfg.layer_norm_eps);
    CHECK(back.use_parallel_residual == cfg.use_parallel_residual);
    CHECK(back.hidden_act == cfg.hidden_act);
    CHECK(back.head_dim == cfg.head_dim && back.rotary_dims == cfg.rotary_dims);
    if (cfg.mixer != HM_MIXER_SOFTMAX)
        CHECK(back.feature_dim == cfg.feature_dim);
    if (cfg.mixer == HM_MIXER_HEDGEMAMBA) {
        CHECK(back.conv_width == cfg.conv_width);
        CHECK(back.components == cfg.components);
    }
    /* a hybrid's kept layers (layer_mixers) survive the round trip */
    CHECK(memcmp(back.kept, cfg.kept, sizeof cfg.kept) == 0);
    CHECK(hm_config_kept_count(&cfg) <= cfg.num_hidden_layers);
    return 0;
}
