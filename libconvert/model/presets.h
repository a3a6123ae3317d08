/* presets.h — named model configurations for hm-init. */
#ifndef HM_PRESETS_H
#define HM_PRESETS_H

#include <stdint.h>

#include "config.h"
#include "hm_error.h"
#include "safetensors.h" /* enum hm_dtype */

/* Fill cfg (finished) from a preset name: "tiny" (the byte-level demo
 * teacher: vocab 257, d 128, 4 layers, 4 heads, I 512, 256 positions) or a
 * real Pythia shape: "pythia-14m", "pythia-31m", "pythia-70m",
 * "pythia-160m", "pythia-410m", "pythia-1b" (the "pythia-" prefix is
 * optional). Returns 0, or -1 for an unknown name. */
int hm_config_preset(const char *name, struct hm_config *cfg);

/* "tiny, pythia-14m, ..." for usage texts. */
const char *hm_preset_names(void);

/* Random initialization of GPT-NeoX weights as HF GPTNeoXPreTrainedModel
 * does: every Linear weight and embedding N(0, std²) (std = initializer
 * range, 0.02), Linear biases 0, LayerNorm weight 1 and bias 0. Normal
 * draws come from hm_rand_normal(seed) in a fixed order, so the result is
 * the same on every machine and thread count. Mixer extras of student
 * archs get their identity values. */
struct hm_model;
void hm_model_init_random(struct hm_model *m, uint64_t seed, double std);

/* The same teacher (cfg's mixer must be softmax) written straight to path
 * in dtype, byte for byte what hm_model_init_random + hm_model_save write,
 * without the model: each tensor is made when the writer reaches it, in
 * pieces, so memory stays at one tensor in dtype whatever the model's size
 * (an 8B model in bf16: its largest tensor, 1 GB). provenance, flags: as
 * hm_ckpt_write. */
enum hm_status hm_init_write(const struct hm_config *cfg, uint64_t seed, double std,
                             enum hm_dtype dtype, const char *provenance, const char *path,
                             int flags, struct hm_error *err);

#endif
