/* fixture_llama.h — HuggingFace Llama folders with random weights, for tests.
 *
 * Writes DIR/config.json (real HF LlamaConfig field names: model_type "llama",
 * hidden_act "silu", rms_norm_eps, rope_theta, num_key_value_heads, head_dim,
 * attention_bias, mlp_bias, tie_word_embeddings, rope_scaling object or null)
 * and either DIR/model.safetensors or DIR/model-0000i-of-0000n.safetensors +
 * DIR/model.safetensors.index.json ("weight_map"), in F32, F16 or BF16 (or F64), with
 * optional legacy self_attn.rotary_emb.inv_freq buffers (F32 [p/2]).
 *
 * Weights are seeded: matrices and embeddings N(0, std²) (std 0.2 by default,
 * so logits are O(1) at small d and rotary/attention matter), RMSNorm weights
 * 1 + N(0, 0.1²), biases N(0, 0.1²). The weights also come back as a
 * tu_ref_table (ref_llama.h) whose values are already rounded to the stored
 * dtype, i.e. exactly what the files hold. Everything aborts on failure. */
#ifndef HM_FIXTURE_LLAMA_H
#define HM_FIXTURE_LLAMA_H

#include <stdint.h>
#include "config.h"
#include "ref_llama.h"
#include "safetensors.h"

struct tu_llama_opts {
    enum hm_dtype dtype;   /* F32, F16 or BF16 (F64: exact doubles, for in-memory tables) */
    int nshards;           /* 0 or 1: single model.safetensors */
    int legacy_inv_freq;   /* add model.layers.{l}.self_attn.rotary_emb.inv_freq */
    int minimal_config;    /* omit config.json fields that equal HF LlamaConfig defaults */
    uint64_t seed;         /* 0 = 1 */
    double std;            /* matrix/embedding std (0.2 when 0) */
};

/* The teacher weights of cfg (a llama family config; num_key_value_heads, head_dim
 * 0 = defaults), HF names, values rounded to o->dtype; lm_head.weight only when
 * untied; biases only with attention_bias / mlp_bias; the inv_freq buffers with
 * o->legacy_inv_freq. owned: tu_ref_table_free. */
struct tu_ref_table *tu_llama_weights(const struct hm_config *cfg, const struct tu_llama_opts *o);

/* Write cfg and every tensor of t into dir as an HF folder (dtype: each entry's own;
 * sharding by layer as o->nshards says). dir must exist. */
void tu_write_llama_folder(const char *dir, const struct hm_config *cfg,
                           const struct tu_ref_table *t, const struct tu_llama_opts *o);

/* tu_llama_weights + tu_write_llama_folder. Returns the weights (owned:
 * tu_ref_table_free), as the folder holds them. */
struct tu_ref_table *tu_make_llama(const char *dir, const struct hm_config *cfg,
                                   const struct tu_llama_opts *o);

/* Student tensors for a llama teacher table (contract §1b "Students of a llama teacher"). */
struct tu_llama_student_opts {
    enum hm_dtype dtype;   /* values are rounded to it (F32 when 0; F64 keeps the contract §3
                            * identity constants exact, as ≤ 1e-10 comparisons need) */
    uint64_t seed;         /* 0 = 1 */
    double fmap_std;       /* feature maps: W = eye(p, F) + N(0, fmap_std²), b = N(0, fmap_std²);
                            * 0 = the identity init (b = 0) */
    int ssm_random;        /* hedgemamba: 0 = the contract §3 identity values; 1 = random
                            * (conv taps, dt_proj, A < 0, D, gate_proj all non-trivial) */
};

/* Add the tensors cfg->mixer needs beyond the teacher's to t: feature maps for hedgehog
 * and hedgemamba, conv1d/dt_proj/A/D/gate_proj for hedgemamba. */
void tu_llama_add_student(struct tu_ref_table *t, const struct hm_config *cfg,
                          const struct tu_llama_student_opts *o);

/* Parameter count of a llama teacher config (buffers excluded), from the shapes. */
int64_t tu_llama_param_count(const struct hm_config *cfg);

#endif
