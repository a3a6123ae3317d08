#include "presets.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "batches.h"
#include "model_views.h"

/* Shapes of real models (their HF config.json values); llama rows also fix
 * GQA, RMSNorm eps, rope_theta, tying and rope_scaling. */
static const struct {
    const char *name;
    enum hm_family family;
    int64_t V, d, L, nh, I, pos;
    int64_t nkv;        /* llama */
    double theta, eps;  /* llama: rope_theta, rms_norm_eps */
    int tied, llama3;   /* llama3: rope_scaling {factor 32, low 1, high 4, original 8192} */
} presets[] = {
    {"tiny", HM_FAMILY_NEOX, 257, 128, 4, 4, 512, 256, 0, 0, 0, 0, 0},
    {"pythia-14m", HM_FAMILY_NEOX, 50304, 128, 6, 4, 512, 2048, 0, 0, 0, 0, 0},
    {"pythia-31m", HM_FAMILY_NEOX, 50304, 256, 6, 8, 1024, 2048, 0, 0, 0, 0, 0},
    {"pythia-70m", HM_FAMILY_NEOX, 50304, 512, 6, 8, 2048, 2048, 0, 0, 0, 0, 0},
    {"pythia-160m", HM_FAMILY_NEOX, 50304, 768, 12, 12, 3072, 2048, 0, 0, 0, 0, 0},
    {"pythia-410m", HM_FAMILY_NEOX, 50304, 1024, 24, 16, 4096, 2048, 0, 0, 0, 0, 0},
    {"pythia-1b", HM_FAMILY_NEOX, 50304, 2048, 16, 8, 8192, 2048, 0, 0, 0, 0, 0},
    /* llama2.c stories260K / stories15M */
    {"llama-tiny", HM_FAMILY_LLAMA, 512, 64, 5, 8, 172, 512, 4, 10000, 1e-5, 1, 0},
    {"stories15m", HM_FAMILY_LLAMA, 32000, 288, 6, 6, 768, 256, 6, 10000, 1e-5, 1, 0},
    {"smollm-135m", HM_FAMILY_LLAMA, 49152, 576, 30, 9, 1536, 2048, 3, 10000, 1e-5, 1, 0},
    {"tinyllama-1.1b", HM_FAMILY_LLAMA, 32000, 2048, 22, 32, 5632, 2048, 4, 10000, 1e-5, 0, 0},
    {"llama-3.2-1b", HM_FAMILY_LLAMA, 128256, 2048, 16, 32, 8192, 131072, 8, 500000, 1e-5, 1, 1},
};

int hm_config_preset(const char *name, struct hm_config *cfg)
{
    for (size_t i = 0; i < sizeof presets / sizeof *presets; i++) {
        const char *n = presets[i].name;
        if (strcmp(name, n) != 0 && !(strncmp(n, "pythia-", 7) == 0 && strcmp(name, n + 7) == 0))
            continue;
        hm_config_defaults(cfg);
        cfg->family = presets[i].family;
        cfg->vocab_size = presets[i].V;
        cfg->hidden_size = presets[i].d;
        cfg->num_hidden_layers = presets[i].L;
        cfg->num_attention_heads = presets[i].nh;
        cfg->intermediate_size = presets[i].I;
        cfg->max_position_embeddings = presets[i].pos;
        if (presets[i].family == HM_FAMILY_LLAMA) {
            cfg->num_key_value_heads = presets[i].nkv;
            cfg->rotary_emb_base = presets[i].theta;
            cfg->layer_norm_eps = presets[i].eps;
            cfg->tie_word_embeddings = presets[i].tied;
            if (presets[i].llama3) {
                cfg->rope_scaling.type = HM_ROPE_LLAMA3;
                cfg->rope_scaling.factor = 32;
                cfg->rope_scaling.low_freq_factor = 1;
                cfg->rope_scaling.high_freq_factor = 4;
                cfg->rope_scaling.original_max_position_embeddings = 8192;
            }
        }
        return hm_config_finish(cfg, NULL) == HM_OK ? 0 : -1;
    }
    return -1;
}

const char *hm_preset_names(void)
{
    return "tiny, pythia-14m, pythia-31m, pythia-70m, pythia-160m, pythia-410m, pythia-1b, "
           "llama-tiny, stories15m, smollm-135m, tinyllama-1.1b, llama-3.2-1b";
}

void hm_model_init_random(struct hm_model *m, uint64_t seed, double std)
{
    struct hm_tensor_view *v = NULL;
    int64_t n = hm_model_views(m, &v);
    uint64_t s = seed;
    for (int64_t i = 0; i < n; i++) {
        const struct hm_param_spec *sp = &v[i].spec;
        if (sp->group == HM_PG_FEATURE_MAP || sp->group == HM_PG_SSM ||
            sp->group == HM_PG_CONV || sp->group == HM_PG_GATE)
            continue; /* student extras keep their identity values */
        int is_weight = sp->ndim >= 2;
        int is_ln_w = sp->group == HM_PG_NORM && strstr(sp->name, ".weight") != NULL;
        for (int64_t j = 0; j < v[i].numel; j++)
            v[i].data[j] = is_weight ? (float)(std * hm_rand_normal(&s))
                                     : (is_ln_w ? 1.0f : 0.0f);
    }
    free(v);
}
