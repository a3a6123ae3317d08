/* model_forward.c — hidden states, logits and NLLs of the whole model
 * (model_forward.h): the skeleton of forward.c, the final norm, the output
 * layer.
 *
 * Gotcha that has caused bugs: positions restart at 0 for every sequence
 * (rotary pos0 = 0). */
#include "model_forward.h"

#include <stdlib.h>

/* ids: [B, T], each in [0, V). */
static enum hm_status check_ids(const int32_t *ids, int64_t B, int64_t T, int64_t V,
                                const char *what, struct hm_error *err)
{
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++) {
            const int32_t id = ids[b * T + t];
            if (id >= 0 && id < V)
                continue;
            if (B == 1)
                return hm_error_set(err, HM_ERR_INVALID,
                                    "%s id %lld at position %lld is outside the model "
                                    "vocabulary (%lld)",
                                    what, (long long)id, (long long)t, (long long)V);
            return hm_error_set(err, HM_ERR_INVALID,
                                "%s id %lld at position %lld of sequence %lld is outside the "
                                "model vocabulary (%lld)",
                                what, (long long)id, (long long)t, (long long)b, (long long)V);
        }
    return HM_OK;
}

/* The layers and the final norm on B sequences (hm_model_hidden for B = 1;
 * hooks only there: they see one sequence's T rows). ws->hf: [B·T, d]. */
static enum hm_status hidden_batch(const struct hm_model *m, const struct hm_backend *be,
                                   const int32_t *tokens, int64_t B, int64_t T,
                                   struct hm_model_ws *ws, const struct hm_model_hooks *hooks,
                                   struct hm_error *err)
{
    const struct hm_config *c = &m->cfg;
    enum hm_status st = hm_model_check_placed(m, be, err);
    if (st == HM_OK)
        st = check_ids(tokens, B, T, c->vocab_size, "token", err);
    if (st == HM_OK)
        st = hm_model_ws_reserve_batch(ws, m, be, B, T, err);
    if (st != HM_OK)
        return st;
    hm_backend_upload(be, ws->ids, tokens, sizeof(int32_t) * (size_t)(B * T));
    const struct hm_fwd f = {.B = B, .T = T, .la = &ws->acts, .shared = 1, .h_out = ws->h,
                             .o = ws->o, .m = ws->m, .act = ws->mh, .ws = ws->att_ws,
                             .ws_size = ws->att_ws_size, .hooks = hooks};
    if ((st = hm_model_layers_forward(m, be, ws->ids, &f, err)) != HM_OK)
        return st;
    if (hooks && hooks->stop_after_last_hook)
        return HM_OK; /* stage 1 needs only the attention blocks */
    hm_model_norm_forward(m, be, ws->hf, NULL, NULL, ws->h, m->lnf_w, m->lnf_b, B * T);
    return hm_backend_sync(be, err);
}

enum hm_status hm_model_hidden(const struct hm_model *m, const struct hm_backend *be,
                               const int32_t *tokens, int64_t T, struct hm_model_ws *ws,
                               const struct hm_model_hooks *hooks, struct hm_error *err)
{
    return hidden_batch(m, be, tokens, 1, T, ws, hooks, err);
}

enum hm_status hm_model_forward_batch(const struct hm_model *m, const struct hm_backend *be,
                                      const int32_t *tokens, const int32_t *targets, int64_t B,
                                      int64_t T, float *logits, float *nll,
                                      struct hm_model_ws *ws, struct hm_error *err)
{
    enum hm_status st = targets ? check_ids(targets, B, T, m->cfg.vocab_size, "target", err)
                                : HM_OK;
    if (st == HM_OK)
        st = hidden_batch(m, be, tokens, B, T, ws, NULL, err);
    if (st != HM_OK)
        return st;
    const int64_t N = B * T, n = N * m->cfg.vocab_size;
    if (n > ws->out_cap) {
        hm_backend_free(be, (void **)&ws->out);
        ws->out_cap = 0;
        if (!(ws->out = hm_backend_alloc(be, sizeof(float) * (size_t)n)))
            return hm_error_set(err, HM_ERR_NOMEM, "out of memory for %lld logits", (long long)n);
        ws->out_cap = n;
    }
    hm_model_head(m, ws->out, ws->hf, N);
    hm_backend_download(be, logits, ws->out, sizeof(float) * (size_t)n);
    if (targets) { /* the NLLs of these logits, on the backend (ws->tg, ws->nll: [B·T]) */
        hm_backend_upload(be, ws->tg, targets, sizeof(int32_t) * (size_t)N);
        hm_backend_nll_forward(be, ws->nll, NULL, ws->out, ws->tg, N, m->cfg.vocab_size);
        hm_backend_download(be, nll, ws->nll, sizeof(float) * (size_t)N);
    }
    return hm_backend_sync(be, err);
}

enum hm_status hm_model_forward(const struct hm_model *m, const struct hm_backend *be,
                               const int32_t *tokens, int64_t T, float *logits,
                               struct hm_model_ws *ws, struct hm_error *err)
{
    return hm_model_forward_batch(m, be, tokens, NULL, 1, T, logits, NULL, ws, err);
}

enum hm_status hm_model_nll_batch(const struct hm_model *m, const struct hm_backend *be,
                                  const int32_t *tokens, const int32_t *targets, int64_t B,
                                  int64_t T, float *nll, struct hm_model_ws *ws,
                                  struct hm_error *err)
{
    const int64_t d = m->cfg.hidden_size, V = m->cfg.vocab_size;
    enum hm_status st = check_ids(targets, B, T, V, "target", err);
    if (st == HM_OK)
        st = hidden_batch(m, be, tokens, B, T, ws, NULL, err);
    if (st != HM_OK)
        return st;
    /* rows are independent here: chunks of B·HM_MODEL_NLL_ROWS may span sequences */
    const int64_t N = B * T, R = B * HM_MODEL_NLL_ROWS;
    hm_backend_upload(be, ws->tg, targets, sizeof(int32_t) * (size_t)N);
    for (int64_t r0 = 0; r0 < N; r0 += R) {
        const int64_t n = N - r0 < R ? N - r0 : R;
        hm_model_head(m, ws->logits, ws->hf + r0 * d, n);
        hm_backend_nll_forward(be, ws->nll + r0, NULL, ws->logits, ws->tg + r0, n, V);
    }
    hm_backend_download(be, nll, ws->nll, sizeof(float) * (size_t)N);
    return hm_backend_sync(be, err);
}

enum hm_status hm_model_nll(const struct hm_model *m, const struct hm_backend *be,
                           const int32_t *tokens, const int32_t *targets, int64_t T,
                           float *nll, struct hm_model_ws *ws, struct hm_error *err)
{
    return hm_model_nll_batch(m, be, tokens, targets, 1, T, nll, ws, err);
}

enum hm_status hm_model_nll_sum(const struct hm_model *m, const struct hm_backend *be,
                                const int32_t *tokens, int64_t B, int64_t T,
                                struct hm_model_ws *ws, double *sum, struct hm_error *err)
{
    float *nll = malloc(sizeof(float) * (size_t)(B * T)); /* owned: [B, T] */
    if (!nll)
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    enum hm_status st = hm_model_nll_batch(m, be, tokens, tokens + 1, B, T, nll, ws, err);
    double s = 0;
    for (int64_t i = 0; st == HM_OK && i < B * T; i++)
        s += nll[i];
    free(nll);
    *sum = s;
    return st;
}

