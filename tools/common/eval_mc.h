/* eval_mc.h — hm-eval --mc: zero-shot multiple choice (contract §7). Each
 * jsonl line {"context": str, "choices": [str, ...], "label": int}; a choice
 * scores the summed log-likelihood of its tokens after the context's; acc:
 * the best score is the label; acc_norm: the best score divided by the
 * choice's length in UTF-8 bytes. */
#ifndef HM_EVAL_MC_H
#define HM_EVAL_MC_H

#include <stdint.h>

#include "model.h"
#include "model_forward.h"
#include "tokenizer.h"

struct hm_eval_mc {
    int64_t questions, correct, correct_norm;
};

/* Scores the questions of path with m on be (ws: the caller's forward
 * workspace); tok: owned, freed here. Exits naming path on bad input. */
void hm_eval_mc_run(const struct hm_model *m, const struct hm_backend *be,
                    struct hm_model_ws *ws, struct hm_tokenizer *tok, const char *path,
                    struct hm_eval_mc *res);

#endif
