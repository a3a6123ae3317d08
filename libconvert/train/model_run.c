#include "model_run.h"

#include <stdlib.h>

#include "model_forward.h"

static void zero_grad(void *ctx)
{
    hm_trainer_zero_grad(((struct hm_model_run *)ctx)->trainer);
}

static enum hm_status accumulate(void *ctx, const int32_t *tokens, double *sums,
                                 struct hm_error *err)
{
    struct hm_model_run *nr = ctx;
    if (nr->align)
        return hm_trainer_align(nr->trainer, tokens, sums, err);
    return hm_trainer_accumulate(nr->trainer, tokens, sums, NULL, err);
}

static void loss_of(void *ctx, const double *sums, double *loss, double *aux)
{
    struct hm_model_run *nr = ctx;
    struct hm_train_loss l;
    if (nr->align) {
        hm_trainer_align_loss(nr->trainer, sums, loss, aux);
        return;
    }
    hm_trainer_loss(nr->trainer, sums, &l);
    *loss = l.total;
    if (nr->log_terms) {
        aux[0] = l.ce;
        aux[1] = l.kl;
    }
}

static const struct hm_opt_param *params(void *ctx, int64_t *np)
{
    return hm_trainer_params(((struct hm_model_run *)ctx)->trainer, np);
}

static enum hm_status val_sum(void *ctx, const int32_t *tokens, int64_t B, int64_t T,
                              double *sum, struct hm_error *err)
{
    struct hm_model_run *nr = ctx;
    return hm_model_nll_sum(nr->model, nr->be, tokens, B, T, &nr->ws, sum, err);
}

static void post_update(void *ctx)
{
    hm_trainer_post_update(((struct hm_model_run *)ctx)->trainer);
}

static enum hm_status save(void *ctx, const char *path, int flags, const char *prov,
                           struct hm_error *err)
{
    struct hm_model_run *nr = ctx;
    return hm_model_save(nr->model, path, flags, prov, nr->out_dtype, NULL, err);
}

void hm_model_run_init(struct hm_model_run *nr, struct hm_run_model *rm)
{
    hm_model_ws_init(&nr->ws);
    *rm = (struct hm_run_model){.ctx = nr, .cfg = &nr->model->cfg, .be = nr->be, .zero_grad = zero_grad,
                                .accumulate = accumulate, .n_sums = 2, .loss_of = loss_of, .params = params, .val_sum = val_sum,
                                .post_update = post_update, .save = save,
                                .n_aux = nr->log_terms ? 2 : 0, .aux_name = "ce_kl"};
    if (nr->align) { /* one loss sum per layer, logged as layer_loss */
        rm->n_sums = (int)nr->model->cfg.num_hidden_layers;
        rm->n_aux = rm->n_sums;
        rm->aux_name = "layer_loss";
    }
}

void hm_model_run_release(struct hm_model_run *nr)
{
    hm_model_ws_release(&nr->ws);
}
