/* config.h — the model configuration every tool agrees on (contract §1–§3, §5).
 *
 * Read from a HuggingFace GPT-NeoX or llama config.json or from the
 * `hm.config` metadata of files hm writes (same field names for the shared
 * fields, plus `arch`, `feature_dim`, `conv_width`, `components`,
 * `decay_init`). Written
 * back as hm.config by hm_config_to_json().
 */
#ifndef HM_CONFIG_H
#define HM_CONFIG_H

#include <stdint.h>
#include "hm_error.h"

/* The token mixer of every layer, chosen independently of the family. */
enum hm_mixer {
    HM_MIXER_SOFTMAX = 0, /* teacher: softmax attention */
    HM_MIXER_HEDGEHOG,    /* stage 1: Hedgehog linear attention */
    HM_MIXER_HEDGEMAMBA,  /* stage 2: HedgeMamba SSM mixer */
    HM_MIXER_COUNT
};

/* The block skeleton around the mixer (contract §1, §1b). */
enum hm_family {
    HM_FAMILY_NEOX = 0, /* GPT-NeoX / Pythia: LayerNorm, GELU MLP, fused interleaved qkv */
    HM_FAMILY_LLAMA,    /* Llama: RMSNorm, SwiGLU, separate q/k/v with GQA */
    HM_FAMILY_COUNT
};

/* The skeleton's kinds, fixed by the family (config.c's family table); the
 * skeleton switches only on these. */
enum hm_norm_kind { HM_NORM_LAYER = 0, HM_NORM_RMS };
enum hm_mlp_kind { HM_MLP_GELU = 0, HM_MLP_SWIGLU };
enum hm_qkv_layout {
    HM_QKV_FUSED = 0, /* one [3d, d] projection, interleaved per head: already per-head */
    HM_QKV_GQA,       /* q, k, v projections back to back → [q | k | v], expanded per query head */
};

enum hm_rope_scaling {
    HM_ROPE_NONE = 0,
    HM_ROPE_LLAMA3, /* HF _compute_llama3_parameters */
};

enum hm_act {
    HM_ACT_GELU = 0,  /* exact erf GELU (HF "gelu") */
    HM_ACT_GELU_TANH, /* tanh approximation (HF "gelu_new", "gelu_fast") */
    HM_ACT_SILU,      /* SwiGLU's silu (HF "silu"; llama family only) */
};

/* HedgeMamba components (contract §3); an inactive one keeps its identity value. */
enum hm_component {
    HM_COMP_SSM = 1u << 0,  /* dt_proj, A, D */
    HM_COMP_CONV = 1u << 1, /* conv1d */
    HM_COMP_GATE = 1u << 2, /* gate_proj */
    HM_COMP_ALL = 7u,
};

/* Where a HedgeMamba's A started (hm-map-ssm): the exact mapping's A = 0, or
 * each head's decay fitted to its teacher's attention (--decay-from,
 * convert/map_decay.h). Recorded as hm.config "decay_init": "teacher" (absent
 * = identity) so that hm-verify mapping knows to check with A = 0. */
enum hm_decay_init {
    HM_DECAY_IDENTITY = 0, /* A = 0: the exact mapping */
    HM_DECAY_TEACHER,      /* A = ln α from the teacher's mean attention distance */
};

/* Layers a hybrid can describe (layer_mixers): bits of hm_config.kept. */
#define HM_KEPT_WORDS 16
#define HM_KEPT_MAX (64 * HM_KEPT_WORDS)

struct hm_config {
    enum hm_family family;
    enum hm_mixer mixer;
    int64_t vocab_size;              /* V: rows of embed_in / embed_out */
    int64_t hidden_size;             /* d */
    int64_t num_hidden_layers;
    int64_t num_attention_heads;     /* n_h */
    int64_t num_key_value_heads;     /* n_kv (llama GQA); 0 = n_h; always n_h for neox */
    int64_t intermediate_size;       /* I */
    int64_t max_position_embeddings;
    double rotary_pct;               /* neox; 1 for llama */
    double rotary_emb_base;          /* neox rotary_emb_base, llama rope_theta */
    double layer_norm_eps;           /* neox layer_norm_eps, llama rms_norm_eps */
    int use_parallel_residual;       /* neox; 0 for llama */
    enum hm_act hidden_act;
    int attention_bias;              /* llama: q/k/v/o biases (neox: always) */
    int mlp_bias;                    /* llama: gate/up/down biases (neox: always) */
    int tie_word_embeddings;         /* llama: lm_head is embed_tokens */
    struct {                         /* llama rope_scaling (HF field names) */
        enum hm_rope_scaling type;
        double factor, low_freq_factor, high_freq_factor;
        int64_t original_max_position_embeddings;
    } rope_scaling;
    int64_t feature_dim;   /* F (hedgehog, hedgemamba); 0 = head_dim */
    int64_t conv_width;    /* K (hedgemamba) */
    unsigned components;   /* HM_COMP_* mask (hedgemamba) */
    enum hm_decay_init decay_init; /* hedgemamba; identity for every other mixer */
    /* Hybrids (contract §11 `layer_mixers`): bit l set = layer l keeps the
     * teacher's softmax attention; every other layer has `mixer`. All clear
     * for pure models (and always for a softmax teacher). */
    uint64_t kept[HM_KEPT_WORDS];
    int64_t head_dim;      /* p: d / n_h, or llama's explicit head_dim (0 = derive) */
    /* derived by hm_config_finish() */
    int64_t rotary_dims;   /* r = int(p * rotary_pct) (= p for llama) */
    int64_t attn_dim;      /* n_h·p: merged heads, input of dense / o_proj */
    enum hm_norm_kind norm_kind;   /* from the family table */
    enum hm_mlp_kind mlp_kind;
    enum hm_qkv_layout qkv_layout;
    int64_t qkv_dim;       /* (n_h + 2 n_kv)·p: the q/k/v projection outputs */
};

/* Pythia-70m-like defaults (vocab 50304, rotary 0.25, base 10000, eps 1e-5,
 * parallel residual, gelu); the caller sets sizes. */
void hm_config_defaults(struct hm_config *cfg);

/* Parse JSON text (config.json or hm.config). Unknown fields are ignored;
 * missing required fields and inconsistent values are errors. */
enum hm_status hm_config_parse(const char *json, size_t len, struct hm_config *cfg,
                               struct hm_error *err);

/* Validate ranges and fill the derived fields. */
enum hm_status hm_config_finish(struct hm_config *cfg, struct hm_error *err);

/* hm.config JSON text. owned: free with free(); NULL on allocation failure. */
char *hm_config_to_json(const struct hm_config *cfg);

/* The model's name (contract §5 `arch`): a softmax teacher is named for its
 * family (gpt_neox, llama), a student for its mixer (hedgehog, hedgemamba). */
const char *hm_arch_name(const struct hm_config *cfg);
const char *hm_family_name(enum hm_family f);
const char *hm_mixer_name(enum hm_mixer m);
/* The family's HF model_type ("gpt_neox", "llama"). */
const char *hm_family_model_type(enum hm_family f);
/* Fills *family (when the name fixes it) and *mixer from an `arch` name;
 * -1 if unknown. */
int hm_arch_parse(const char *s, int *family, enum hm_mixer *mixer);

/* Layer l's mixer: softmax when kept, else cfg->mixer. */
static inline enum hm_mixer hm_layer_mixer(const struct hm_config *cfg, int64_t l)
{
    return l >= 0 && l < HM_KEPT_MAX && (cfg->kept[l >> 6] >> (l & 63) & 1) ? HM_MIXER_SOFTMAX
                                                                             : cfg->mixer;
}
/* Marks layer l kept (softmax) or not; -1 when l is beyond HM_KEPT_MAX. */
int hm_config_set_kept(struct hm_config *cfg, int64_t l, int kept);
/* Number of kept softmax layers of a student (0: a pure student or a teacher). */
int64_t hm_config_kept_count(const struct hm_config *cfg);
/* "0,3" (the kept layers, ascending) into buf; "" when none. */
void hm_config_kept_str(const struct hm_config *cfg, char *buf, size_t size);
/* Parses a comma-separated list of layer indices below L into cfg's kept
 * set (added to it); -1 on a bad or out-of-range index. */
int hm_config_kept_parse(struct hm_config *cfg, const char *s, int64_t L);

/* "ssm,conv,gate" order; buf of at least 16 bytes. */
void hm_components_str(unsigned components, char *buf, size_t size);
/* Parse a comma-separated subset of ssm,conv,gate (or "none"/""); -1 on error. */
int hm_components_parse(const char *s, unsigned *out);

#endif
