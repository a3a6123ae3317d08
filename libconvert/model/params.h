/* params.h — the tensors each model has, by name, shape and group: the one
 * tensor table (params.c) of every family × mixer.
 *
 * Everything that lists tensors derives from it: the model's storage and
 * views (model.c), loading and saving, parameter counts, the trainer's
 * parameter groups and frozen masks, hm-map-ssm, hm-inspect's components.
 * Names are the HF state-dict names of the family (contract §1, §1b) plus the
 * contract §2/§3 student additions under the family's attention prefix. */
#ifndef HM_PARAMS_H
#define HM_PARAMS_H

#include <stddef.h>
#include <stdint.h>
#include "config.h"

enum hm_param_group {
    HM_PG_EMBED = 0,   /* embed_in, embed_out (llama: embed_tokens, lm_head) */
    HM_PG_MIXER,       /* query_key_value, dense (llama: q/k/v/o_proj) */
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
/* Group of a tensor name of any family (the table's names; legacy buffers
 * are HM_PG_BUFFER, unknown names HM_PG_OTHER). */
enum hm_param_group hm_param_group_of(const char *name);



#define HM_PARAM_NAME_MAX 128

/* Where a tensor lives in struct hm_model / struct hm_layer (model.h).
 * Consecutive tensors of one layer with the same slot are stored back to
 * back behind that one pointer (llama's q_proj, k_proj, v_proj form the
 * [qkv_dim, d] projection the skeleton runs as one matmul). */
enum hm_slot {
    HM_SLOT_EMBED = 0, HM_SLOT_NORMF_W, HM_SLOT_NORMF_B, HM_SLOT_HEAD,
    HM_SLOT_LN1_W, HM_SLOT_LN1_B, HM_SLOT_LN2_W, HM_SLOT_LN2_B,
    HM_SLOT_QKV_W, HM_SLOT_QKV_B, HM_SLOT_DENSE_W, HM_SLOT_DENSE_B,
    HM_SLOT_FQ_W, HM_SLOT_FQ_B, HM_SLOT_FK_W, HM_SLOT_FK_B,
    HM_SLOT_CONV_W, HM_SLOT_CONV_B, HM_SLOT_DT_W, HM_SLOT_DT_B, HM_SLOT_A, HM_SLOT_D,
    HM_SLOT_GATE_W, HM_SLOT_GATE_B,
    HM_SLOT_FCG_W, HM_SLOT_FCG_B, HM_SLOT_FC1_W, HM_SLOT_FC1_B, HM_SLOT_FC2_W, HM_SLOT_FC2_B,
    HM_SLOT_COUNT
};

struct hm_param_spec {
    char name[HM_PARAM_NAME_MAX];
    int ndim;
    int64_t shape[3];
    enum hm_param_group group;
    int64_t layer;       /* -1 for non-layer tensors */
    int is_matrix;       /* weight decay applies (contract §4) */
    enum hm_slot slot;
};

/* The name of the slot's tensor in layer l (l ignored for model-level
 * slots) for cfg's family, into buf; for slots that hold several tensors
 * (llama q/k/v) the first. 0, or -1 when the family has no such tensor. */
int hm_param_name(const struct hm_config *cfg, enum hm_slot slot, int64_t l, char *buf,
                  size_t size);

/* Every parameter of cfg's family × mixer, in a fixed order (embeddings,
 * layers in order, final norm, output head) that is also the storage order.
 * *out: owned, free with free(). Returns the count, or -1 on allocation
 * failure or a size that overflows. */
int64_t hm_param_specs(const struct hm_config *cfg, struct hm_param_spec **out);

/* Total parameters of cfg's architecture (sum over hm_param_specs), or -1. */
int64_t hm_param_count(const struct hm_config *cfg);

#endif
