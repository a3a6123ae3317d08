/* map_ssm.h — stage 2's starting point (contract §3, "The exact mapping").
 *
 * From a hedgehog checkpoint: every tensor is copied byte for byte in its
 * stored dtype (q → C path, k → B path, v → x path), and the new HedgeMamba
 * tensors start at the values that make the mixer compute exactly the
 * stage-1 linear attention: conv last tap 1 (others 0, bias 0), dt_proj
 * weight 0 and bias ln(e − 1) (Δ = 1), A = 0 (no decay), D = 0, gate_proj
 * weight 0 and bias 1.2784645427610738 (silu = 1); the normalizer is the
 * state's ones channel. From a gpt_neox teacher ("skip stage 1") the feature
 * maps also start at their identity init (W = eye(p, F), b = 0).
 *
 * The naive baseline (init random): embeddings, norms and MLP are copied;
 * every mixer weight is random as contract §3 lists (qkv, dense, gate_proj
 * weights and feature-map W N(0, 0.02²), zero biases except gate_proj bias
 * 1.2784645427610738; conv taps N(0, 1/K), zero bias; dt_proj weight
 * N(0, 0.02²), bias ln(e − 1); A = −1; D = 0), drawn by hm_rand_normal from
 * the seed in the tensor order of hm_param_specs. New tensors are F32.
 *
 * With decay_A (hm-map-ssm --decay-from, map_decay.h) every A starts at the
 * given values instead of 0 and the config records "decay_init": "teacher";
 * everything else is the exact mapping above. */
#ifndef HM_MAP_SSM_H
#define HM_MAP_SSM_H

#include "checkpoint.h"

enum hm_map_init { HM_MAP_IDENTITY = 0, HM_MAP_RANDOM };

struct hm_map_opts {
    unsigned components;   /* HM_COMP_* recorded as active */
    int64_t conv_width;    /* K */
    int64_t feature_dim;   /* F for a gpt_neox input (0 = head dim) */
    enum hm_map_init init;
    uint64_t seed;
    /* [L, n_h] A of every layer and head (each finite and ≤ 0), borrowed;
     * NULL: the mapping's A (0, or −1 for init random). Identity init only. */
    const float *decay_A;
    /* layers that keep the teacher's softmax attention (bits, config.h;
     * added to a hybrid hedgehog input's own) */
    uint64_t keep[HM_KEPT_WORDS];
};

/* Config of the mapped model for input config in (hedgehog or gpt_neox). */
enum hm_status hm_map_ssm_config(const struct hm_config *in, const struct hm_map_opts *o,
                                 struct hm_config *out, struct hm_error *err);

/* Write the hedgemamba checkpoint of ck to path (flags: HM_AFILE_FORCE).
 * provenance: the full chain (JSON array) or NULL. */
enum hm_status hm_map_ssm_write(const struct hm_ckpt *ck, const struct hm_map_opts *o,
                                const char *path, int flags, const char *provenance,
                                struct hm_error *err);

#endif
