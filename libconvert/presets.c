#include "presets.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "batches.h"
#include "model_views.h"

static const struct {
    const char *name;
    int64_t V, d, L, nh, I, pos;
} presets[] = {
    {"tiny", 257, 128, 4, 4, 512, 256},
    {"pythia-14m", 50304, 128, 6, 4, 512, 2048},
    {"pythia-31m", 50304, 256, 6, 8, 1024, 2048},
    {"pythia-70m", 50304, 512, 6, 8, 2048, 2048},
    {"pythia-160m", 50304, 768, 12, 12, 3072, 2048},
    {"pythia-410m", 50304, 1024, 24, 16, 4096, 2048},
    {"pythia-1b", 50304, 2048, 16, 8, 8192, 2048},
};

int hm_config_preset(const char *name, struct hm_config *cfg)
{
    for (size_t i = 0; i < sizeof presets / sizeof *presets; i++) {
        const char *n = presets[i].name;
        if (strcmp(name, n) != 0 && !(strncmp(n, "pythia-", 7) == 0 && strcmp(name, n + 7) == 0))
            continue;
        hm_config_defaults(cfg);
        cfg->vocab_size = presets[i].V;
        cfg->hidden_size = presets[i].d;
        cfg->num_hidden_layers = presets[i].L;
        cfg->num_attention_heads = presets[i].nh;
        cfg->intermediate_size = presets[i].I;
        cfg->max_position_embeddings = presets[i].pos;
        return hm_config_finish(cfg, NULL) == HM_OK ? 0 : -1;
    }
    return -1;
}

const char *hm_preset_names(void)
{
    return "tiny, pythia-14m, pythia-31m, pythia-70m, pythia-160m, pythia-410m, pythia-1b";
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
