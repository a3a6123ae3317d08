/* params.h — the tensors each architecture has, by name, shape and group.
 *
 * One table for every tool: hm-inspect checks files against it, loaders and
 * the training engine (parameter groups, frozen masks) walk it. Names are the
 * HF GPT-NeoX state-dict names plus the SPEC §2/§3 additions. */
#ifndef HM_PARAMS_H
#define HM_PARAMS_H

#include <stdint.h>
#include "config.h"

enum hm_param_group {
    HM_PG_EMBED = 0,   /* embed_in, embed_out */
    HM_PG_MIXER,       /* attention.query_key_value, attention.dense */
    HM_PG_MLP,         /* mlp.* */
    HM_PG_NORM,        /* LayerNorms */
    HM_PG_FEATURE_MAP, /* attention.feature_map_{q,k} */
    HM_PG_SSM,         /* dt_proj, A, D (component ssm) */
    HM_PG_CONV,        /* conv1d (component conv) */
    HM_PG_GATE,        /* gate_proj (component gate) */
    HM_PG_BUFFER,      /* legacy buffers: not parameters, ignored */
    HM_PG_OTHER,       /* not part of any known architecture */
    HM_PG_COUNT
};

/* "embeddings", "attention", ... (stable: used as --json keys). */
const char *hm_param_group_name(enum hm_param_group g);
/* Group of a tensor name (by suffix), independent of the architecture. */
enum hm_param_group hm_param_group_of(const char *name);

#define HM_PARAM_NAME_MAX 128

struct hm_param_spec {
    char name[HM_PARAM_NAME_MAX];
    int ndim;
    int64_t shape[3];
    enum hm_param_group group;
    int64_t layer;       /* -1 for non-layer tensors */
    int is_matrix;       /* weight decay applies (SPEC §4) */
};

/* Every parameter of cfg's architecture, in a fixed order (embed_in, layers
 * in order, final norm, embed_out). *out: owned, free with free().
 * Returns the count, or -1 on allocation failure. */
int64_t hm_param_specs(const struct hm_config *cfg, struct hm_param_spec **out);

/* Total parameters of cfg's architecture (sum over hm_param_specs), or -1. */
int64_t hm_param_count(const struct hm_config *cfg);

#endif
