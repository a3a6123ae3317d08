/* neox_views.h — name every tensor of a struct hm_neox (SPEC §1 names),
 * in the order of hm_param_specs(), with its shape, group and storage. Used
 * to save checkpoints, to initialize weights, and to pair weights with
 * gradients and optimizer state in training. */
#ifndef HM_NEOX_VIEWS_H
#define HM_NEOX_VIEWS_H

#include <stdint.h>
#include "neox.h"
#include "params.h"

struct hm_tensor_view {
    struct hm_param_spec spec; /* name, ndim, shape, group, layer, is_matrix */
    float *data;               /* borrowed from the model's storage */
    int64_t numel;
};

/* *out: owned, free with free(). Returns the count or -1 (no memory). */
int64_t hm_neox_views(const struct hm_neox *m, struct hm_tensor_view **out);

/* Save m to path: hm_ckpt_write with its config (any arch). */
struct hm_error;
enum hm_status hm_neox_save(const struct hm_neox *m, const char *path, int flags,
                            const char *provenance, enum hm_dtype dtype,
                            const char *const *extra_meta, struct hm_error *err);

#endif
