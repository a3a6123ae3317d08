/* neox_run.h — a GPT-NeoX model and its trainer as the model side of a run
 * (struct hm_run_model): cross-entropy (+KD) training, validation NLL with
 * the inference path, checkpoints in the chosen dtype. */
#ifndef HM_NEOX_RUN_H
#define HM_NEOX_RUN_H

#include "neox_train.h"
#include "run.h"

struct hm_neox_run {
    struct hm_neox *model;        /* borrowed */
    struct hm_trainer *trainer;   /* borrowed */
    const struct hm_backend *be;  /* borrowed */
    enum hm_dtype out_dtype;
    double kd_weight;
    struct hm_neox_ws ws;         /* validation workspace (owned) */
    float *nll;                   /* [T] (owned) */
    int64_t nll_cap;
};

/* Fills rm to drive nr. Release nr with hm_neox_run_release. */
void hm_neox_run_init(struct hm_neox_run *nr, struct hm_run_model *rm);
void hm_neox_run_release(struct hm_neox_run *nr);

#endif
