/* model_run.h — a model of any family × mixer and its trainer as the model
 * side of a run (struct hm_run_model): cross-entropy (+KD) training or
 * stage 1b's layer-wise alignment (align), validation NLL with the
 * inference path, checkpoints in the chosen dtype. The logged loss is the
 * trainer's objective (struct hm_train_loss total, or the alignment's). */
#ifndef HM_MODEL_RUN_H
#define HM_MODEL_RUN_H

#include "trainer.h"
#include "run.h"

struct hm_model_run {
    struct hm_model *model;        /* borrowed */
    struct hm_trainer *trainer;   /* borrowed */
    const struct hm_backend *be;  /* borrowed */
    enum hm_dtype out_dtype;
    int log_terms;                 /* log "ce_kl": [mean CE, mean τ²·KL] per step
                                      (a run with a teacher) */
    int align;                     /* 1: stage 1b (hm_trainer_align), per-layer losses */
    struct hm_model_ws ws;         /* validation workspace (owned) */
};

/* Fills rm to drive nr. Release nr with hm_model_run_release. */
void hm_model_run_init(struct hm_model_run *nr, struct hm_run_model *rm);
void hm_model_run_release(struct hm_model_run *nr);

#endif
