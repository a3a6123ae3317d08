/* model_internal.h — what model.c shares with model_narrow.c. */
#ifndef HM_MODEL_INTERNAL_H
#define HM_MODEL_INTERNAL_H

#include "hm_error.h"

/* declared in model.h and config.h; not included here, so that model.c
 * including this header makes no include ring */
struct hm_config;
struct hm_model;
struct hm_param_spec;

/* Where tensor s lives in struct hm_model / struct hm_layer. */
float **hm_model_slot(struct hm_model *m, const struct hm_param_spec *s);

/* The model of cfg (host memory) with every tensor fp32 in storage, except
 * those of narrow [n_views] (NULL: none), which get no storage and no
 * pointers (hm_model_load_narrow places them); with a mask no tensor gets
 * its identity values (every one is loaded). out: owned. */
enum hm_status hm_model_build(const struct hm_config *cfg, const unsigned char *narrow,
                              struct hm_model **out, struct hm_error *err);

#endif
