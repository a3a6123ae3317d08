/* run_validate.c — the validation loss of a run (contract §7, run.h). */
#include "run.h"

#include <stdlib.h>

#include "model.h"

enum hm_status hm_run_validate(const struct hm_run_model *model,
                               const struct hm_tok_file *val, int64_t T, int64_t max_targets,
                               const struct hm_run_comm *comm, double *mean,
                               struct hm_error *err)
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
    /* chunks of B windows, shared among the processes (hm_run_owns_chunk),
     * the total added in chunk order whatever their number */
    const int64_t nc = (windows + B - 1) / B;
    double *cs = calloc((size_t)nc, sizeof(double)); /* owned: [nc] chunk sums */
    enum hm_status st = cs ? HM_OK : hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    for (int64_t c = 0; c < nc && st == HM_OK; c++) {
        if (!hm_run_owns_chunk(comm, c))
            continue;
        const int64_t w = c * B, nb = windows - w < B ? windows - w : B;
        st = hm_tok_read(val, w * T, nb * T + 1, tok, err);
        if (st == HM_OK)
            st = model->val_sum(model->ctx, tok, nb, T, &cs[c], err);
    }
    /* every process reaches the exchange: a failure is one process's, and
     * the launcher ends the others */
    if (st == HM_OK)
        st = hm_run_share_chunks(comm, cs, nc, 1, err);
    double total = 0;
    for (int64_t c = 0; c < nc && st == HM_OK; c++)
        total += cs[c];
    free(cs);
    free(tok);
    *mean = total / (double)(windows * T);
    return st;
}
