/* config.h — the model configuration every tool agrees on (SPEC §1–§3, §5).
 *
 * Read from a HuggingFace GPT-NeoX config.json or from the `hm.config`
 * metadata of files hm writes (same field names for the shared fields, plus
 * `arch`, `feature_dim`, `conv_width`, `components`). Written back as
 * hm.config by hm_config_to_json().
 */
#ifndef HM_CONFIG_H
#define HM_CONFIG_H

#include <stdint.h>
#include "hm_error.h"

enum hm_arch {
    HM_ARCH_GPT_NEOX = 0, /* teacher: softmax attention */
    HM_ARCH_HEDGEHOG,     /* stage 1: Hedgehog linear attention */
    HM_ARCH_HEDGEMAMBA,   /* stage 2: HedgeMamba SSM mixer */
};

enum hm_act {
    HM_ACT_GELU = 0,  /* exact erf GELU (HF "gelu") */
    HM_ACT_GELU_TANH, /* tanh approximation (HF "gelu_new", "gelu_fast") */
};

/* HedgeMamba components (SPEC §3); an inactive one keeps its identity value. */
enum hm_component {
    HM_COMP_SSM = 1u << 0,  /* dt_proj, A, D */
    HM_COMP_CONV = 1u << 1, /* conv1d */
    HM_COMP_GATE = 1u << 2, /* gate_proj */
    HM_COMP_ALL = 7u,
};

struct hm_config {
    enum hm_arch arch;
    int64_t vocab_size;              /* V: rows of embed_in / embed_out */
    int64_t hidden_size;             /* d */
    int64_t num_hidden_layers;
    int64_t num_attention_heads;     /* n_h */
    int64_t intermediate_size;       /* I */
    int64_t max_position_embeddings;
    double rotary_pct;
    double rotary_emb_base;
    double layer_norm_eps;
    int use_parallel_residual;
    enum hm_act hidden_act;
    int64_t feature_dim;   /* F (hedgehog, hedgemamba); 0 = head_dim */
    int64_t conv_width;    /* K (hedgemamba) */
    unsigned components;   /* HM_COMP_* mask (hedgemamba) */
    /* derived by hm_config_finish() */
    int64_t head_dim;      /* p = d / n_h */
    int64_t rotary_dims;   /* r = int(p * rotary_pct) */
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

const char *hm_arch_name(enum hm_arch arch);
/* -1 if unknown. */
int hm_arch_parse(const char *s);

/* "ssm,conv,gate" order; buf of at least 16 bytes. */
void hm_components_str(unsigned components, char *buf, size_t size);
/* Parse a comma-separated subset of ssm,conv,gate (or "none"/""); -1 on error. */
int hm_components_parse(const char *s, unsigned *out);

#endif
