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
    c->clip = 1.0;
}

void hm_optim_release(struct hm_optim *o)
{
    if (!o)
        return;
    for (int64_t i = 0; i < o->np; i++) {
        if (o->m)
            free(o->m[i]);
        if (o->v)
            free(o->v[i]);
    }
    free(o->m);
    free(o->v);
    memset(o, 0, sizeof *o);
}

enum hm_status hm_optim_init(struct hm_optim *o, const struct hm_optim_cfg *cfg,
                             const struct hm_opt_param *p, int64_t np, struct hm_error *err)
{
    memset(o, 0, sizeof *o);
    o->cfg = *cfg;
    o->np = np;
    if (cfg->kind != HM_OPTIM_ADAMW)
        return HM_OK;
    o->m = calloc((size_t)np + 1, sizeof *o->m);
    o->v = calloc((size_t)np + 1, sizeof *o->v);
    if (!o->m || !o->v)
        goto nomem;
    for (int64_t i = 0; i < np; i++) {
        o->m[i] = calloc((size_t)p[i].n + 1, sizeof(float));
        o->v[i] = calloc((size_t)p[i].n + 1, sizeof(float));
        if (!o->m[i] || !o->v[i])
            goto nomem;
    }
    return HM_OK;
nomem:
    hm_optim_release(o);
    return hm_error_set(err, HM_ERR_NOMEM, "out of memory for optimizer state");
}

double hm_grad_global_norm(const struct hm_backend *be, const struct hm_opt_param *p, int64_t np)
{
    double total = 0;
    for (int64_t i = 0; i < np; i++)
        total += hm_backend_sqnorm(be, p[i].g, p[i].n);
    return sqrt(total);
}

const char *hm_grad_first_nonfinite(const struct hm_backend *be, const struct hm_opt_param *p,
                                    int64_t np)
{
    for (int64_t i = 0; i < np; i++)
        if (hm_backend_first_nonfinite(be, p[i].g, p[i].n) >= 0)
            return p[i].name;
    return NULL;
}

void hm_optim_step(struct hm_optim *o, const struct hm_backend *be, struct hm_opt_param *p,
                   int64_t np, double lr, double grad_norm)
{
    o->t++;
    if (o->cfg.kind == HM_OPTIM_SGD) {
        for (int64_t i = 0; i < np; i++)
            hm_backend_sgd_step(be, p[i].w, p[i].g, p[i].n, (float)lr);
        return;
    }
    float scale = 1.0f;
    if (o->cfg.clip > 0) {
        double c = o->cfg.clip / (grad_norm + 1e-6);
        if (c < 1.0)
            scale = (float)c;
    }
    const double b1 = o->cfg.beta1, b2 = o->cfg.beta2;
    const double bc1 = 1.0 - pow(b1, (double)o->t), bc2 = 1.0 - pow(b2, (double)o->t);
    struct hm_adamw_args a = {.scale = scale, .beta1 = (float)b1, .beta2 = (float)b2,
                              .eps = (float)o->cfg.eps, .step_size = (float)(lr / bc1),
                              .bc2_sqrt = (float)sqrt(bc2)};
    for (int64_t i = 0; i < np; i++) {
        a.decay = p[i].decay ? (float)(1.0 - lr * o->cfg.weight_decay) : 1.0f;
        hm_backend_adamw_step(be, p[i].w, p[i].g, o->m[i], o->v[i], p[i].n, &a);
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
