/* fixture.h — HuggingFace-style Pythia folders with random weights, for tests.
 *
 * Writes DIR/config.json (real HF field names) and either
 * DIR/model.safetensors or DIR/model-0000i-of-0000n.safetensors +
 * DIR/model.safetensors.index.json, in the given dtype, with the legacy
 * per-layer buffers real Pythia files carry (attention.bias U8 [1,1,P,P],
 * attention.masked_bias F16 -inf scalar-ish, attention.rotary_emb.inv_freq).
 * Weights: N(0, std²) with std 0.02 for matrices, LayerNorm weights around 1,
 * biases small; seeded. */
#ifndef HM_FIXTURE_H
#define HM_FIXTURE_H

#include <stdint.h>
#include "config.h"
#include "safetensors.h"

struct tu_pythia_opts {
    enum hm_dtype dtype;   /* F32, F16 or BF16 */
    int nshards;           /* 0 or 1: single model.safetensors */
    int legacy_buffers;    /* add attention.bias / masked_bias / inv_freq */
    int64_t buffer_positions; /* P for attention.bias [1,1,P,P] (small in tests) */
    uint64_t seed;
    double std;            /* matrix std (default 0.02 when 0) */
};

/* cfg must be finished (hm_config_finish). Aborts on failure. */
void tu_make_pythia(const char *dir, const struct hm_config *cfg,
                    const struct tu_pythia_opts *opts);

/* Parameter count of a GPT-NeoX config (buffers excluded), computed from the
 * shapes independently of the inspect code. */
int64_t tu_neox_param_count(const struct hm_config *cfg);

#endif
