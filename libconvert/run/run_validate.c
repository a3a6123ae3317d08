/* run_validate.c — the validation loss of a run (contract §7, run.h). */
#include "run.h"

#include <stdlib.h>

#include "model.h"

enum hm_status hm_run_validate(const struct hm_run_model *model,
                               const struct hm_tok_file *val, int64_t T, int64_t max_targets,
                               double *mean, struct hm_error *err)
{
    int64_t windows = (hm_tok_count(val) - 1) / T;
    if (max_targets > 0 && windows > max_targets / T)
        windows = max_targets / T > 0 ? max_targets / T : 1;
    if (windows < 1)
        return hm_error_set(err, HM_ERR_INVALID,
                            "validation data holds fewer than %lld tokens", (long long)(T + 1));
    /* several windows per forward pass, as hm-eval batches them */
    const int64_t B = hm_model_eval_batch(model->cfg, model->be, T, windows);
    int32_t *tok = malloc(sizeof(int32_t) * (size_t)(B * T + 1)); /* owned */
    if (!tok)
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    double total = 0;
    enum hm_status st = HM_OK;
    for (int64_t w = 0; w < windows && st == HM_OK; w += B) {
        const int64_t nb = windows - w < B ? windows - w : B;
        double s = 0;
        st = hm_tok_read(val, w * T, nb * T + 1, tok, err);
        if (st == HM_OK)
            st = model->val_sum(model->ctx, tok, nb, T, &s, err);
        total += s;
    }
    free(tok);
    *mean = total / (double)(windows * T);
    return st;
}
