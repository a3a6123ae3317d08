#include "optim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void hm_optim_cfg_defaults(struct hm_optim_cfg *c, enum hm_optim_kind kind, double wd)
{
    c->kind = kind;
    c->beta1 = 0.9;
    c->beta2 = 0.95;
    c->eps = 1e-8;
    c->weight_decay = wd;
    c->clip = kind == HM_OPTIM_SGD ? 0.0 : 1.0; /* contract §4: plain SGD does not clip */
}

void hm_optim_release(struct hm_optim *o)
{
    if (!o)
        return;
    if (o->be) {
        hm_backend_free(o->be, (void **)&o->m);
        hm_backend_free(o->be, (void **)&o->v);
    }
    free(o->off);
    memset(o, 0, sizeof *o);
}

enum hm_status hm_optim_init(struct hm_optim *o, const struct hm_optim_cfg *cfg,
                             const struct hm_backend *be, const struct hm_opt_param *p,
                             int64_t np, struct hm_error *err)
{
    memset(o, 0, sizeof *o);
    o->cfg = *cfg;
    o->np = np;
    o->be = be;
    o->off = calloc((size_t)np + 1, sizeof *o->off);
    if (!o->off)
        goto nomem;
    for (int64_t i = 0; i < np; i++)
        o->off[i + 1] = o->off[i] + p[i].n;
    if (cfg->kind != HM_OPTIM_ADAMW)
        return HM_OK;
    /* one flat m and one flat v over every trainable tensor, in p's order,
     * so one call can reduce or shard them */
    const int64_t n = o->off[np];
    o->m = hm_backend_alloc(be, sizeof(float) * (size_t)(n + 1));
    o->v = hm_backend_alloc(be, sizeof(float) * (size_t)(n + 1));
    if (!o->m || !o->v)
        goto nomem;
    hm_backend_fill(be, o->m, n + 1, 0.0f);
    hm_backend_fill(be, o->v, n + 1, 0.0f);
    return HM_OK;
nomem:
    hm_optim_release(o);
    return hm_error_set(err, HM_ERR_NOMEM, "out of memory for optimizer state");
}

void hm_grad_sqnorm(const struct hm_backend *be, const struct hm_opt_param *p, int64_t np,
                    double *acc)
{
    for (int64_t i = 0; i < np; i++)
        hm_backend_sqnorm(be, acc, p[i].g, p[i].n);
}

const char *hm_params_first_nonfinite(const struct hm_backend *be, const struct hm_opt_param *p,
                                      int64_t np, int grads)
{
    int64_t *idx = hm_backend_alloc(be, sizeof *idx);
    const char *bad = NULL;
    for (int64_t i = 0; idx && i < np && !bad; i++) {
        int64_t at = -1;
        hm_backend_first_nonfinite(be, idx, grads ? p[i].g : p[i].w, p[i].n);
        hm_backend_download(be, &at, idx, sizeof at);
        if (at >= 0)
            bad = p[i].name;
    }
    hm_backend_free(be, (void **)&idx);
    return bad;
}

void hm_optim_step(struct hm_optim *o, const struct hm_backend *be, struct hm_opt_param *p,
                   int64_t np, double lr, double grad_norm)
{
    o->t++;
    /* global-norm clipping, the same for both optimizers */
    float scale = 1.0f;
    if (o->cfg.clip > 0) {
        double c = o->cfg.clip / (grad_norm + 1e-6);
        if (c < 1.0)
            scale = (float)c;
    }
    if (o->cfg.kind == HM_OPTIM_SGD) {
        /* w ← w − lr·scale·g: scale 1 (no clip) is exactly w − lr·g */
        for (int64_t i = 0; i < np; i++)
            hm_backend_sgd_step(be, p[i].w, p[i].g, p[i].n, (float)(lr * (double)scale));
        return;
    }
    const double b1 = o->cfg.beta1, b2 = o->cfg.beta2;
    const double bc1 = 1.0 - pow(b1, (double)o->t), bc2 = 1.0 - pow(b2, (double)o->t);
    struct hm_adamw_args a = {.scale = scale, .beta1 = (float)b1, .beta2 = (float)b2,
                              .eps = (float)o->cfg.eps, .step_size = (float)(lr / bc1),
                              .bc2_sqrt = (float)sqrt(bc2)};
    for (int64_t i = 0; i < np; i++) {
        a.decay = p[i].decay ? (float)(1.0 - lr * o->cfg.weight_decay) : 1.0f;
        hm_backend_adamw_step(be, p[i].w, p[i].g, o->m + o->off[i], o->v + o->off[i], p[i].n, &a);
    }
}

double hm_lr_at(double peak, int64_t s, int64_t S, int64_t W)
{
    if (s < W)
        return peak * (double)(s + 1) / (double)W;
    double floor_lr = 0.1 * peak;
    int64_t span = S - W > 1 ? S - W : 1;
    double u = (double)(s - W) / (double)span;
    return floor_lr + (peak - floor_lr) * (1.0 + cos(M_PI * u)) / 2.0;
}
