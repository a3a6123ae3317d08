/* model_views.h — every tensor of a struct hm_model (the params.c table's
 * names), in the order of hm_param_specs(), with its shape, group and storage. Used
 * to save checkpoints, to initialize weights, and to pair weights with
 * gradients and optimizer state in training. */
#ifndef HM_MODEL_VIEWS_H
#define HM_MODEL_VIEWS_H

#include <stdint.h>
#include "model.h"
#include "params.h"

/* A copy of m->views. *out: owned, free with free(). Returns the count or -1 (no memory). */
int64_t hm_model_views(const struct hm_model *m, struct hm_tensor_view **out);

/* Save m to path: hm_ckpt_write with its config (any arch); a placed
 * model is downloaded first. */
struct hm_error;
enum hm_status hm_model_save(const struct hm_model *m, const char *path, int flags,
                            const char *provenance, enum hm_dtype dtype,
                            const char *const *extra_meta, struct hm_error *err);

#endif
