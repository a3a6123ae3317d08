/* optim.h — optimizers and schedules of contract §4.
 *
 * AdamW exactly as PyTorch's torch.optim.AdamW (β1 0.9, β2 0.95, ε 1e-8,
 * bias-corrected, decoupled weight decay applied only to tensors marked
 * `decay`): w ← w·(1 − lr·wd); m ← β1 m + (1−β1) g; v ← β2 v + (1−β2) g²;
 * w ← w − (lr / (1−β1^t)) · m / (sqrt(v) / sqrt(1−β2^t) + ε).
 * Global-norm clipping as torch.nn.utils.clip_grad_norm_: when clip > 0,
 * every gradient is scaled by min(1, clip / (norm + 1e-6)).
 * SGD: w ← w − lr·g, no momentum, no decay; clipped only when clip > 0 (the
 * tools' default for SGD is 0, so one step exposes the gradient exactly),
 * by the same global-norm scale as AdamW: w ← w − lr·scale·g.
 * Master weights, gradients and state are fp32. */
#ifndef HM_OPTIM_H
#define HM_OPTIM_H

#include <stdint.h>
#include "backend.h"
#include "hm_error.h"

enum hm_optim_kind { HM_OPTIM_ADAMW = 0, HM_OPTIM_SGD };

struct hm_optim_cfg {
    enum hm_optim_kind kind;
    double beta1, beta2, eps;
    double weight_decay;  /* applied to params with decay = 1 */
    double clip;          /* global-norm clip; 0 = off (both optimizers) */
};

/* β1 0.9, β2 0.95, ε 1e-8, the given decay; clip 1.0 for AdamW, 0 for SGD. */
void hm_optim_cfg_defaults(struct hm_optim_cfg *c, enum hm_optim_kind kind, double wd);

/* One trainable tensor. The engine owns w and g; the optimizer owns m, v. */
struct hm_opt_param {
    const char *name;  /* borrowed */
    float *w;          /* [n] master weights */
    float *g;          /* [n] gradient of this step */
    int64_t n;
    int decay;         /* 1: matrix, weight decay applies */
};

struct hm_optim {
    struct hm_optim_cfg cfg;
    int64_t t;              /* updates done so far */
    int64_t np;
    const struct hm_backend *be; /* borrowed: where m and v live */
    float *m, *v;           /* [Σ n] AdamW moments, one flat allocation each in the
                             * backend's memory (owned), param i at off[i] */
    int64_t *off;           /* [np + 1] host: param i's slice [off[i], off[i + 1]) */
};

/* m, v zeroed; t = 0. */
enum hm_status hm_optim_init(struct hm_optim *o, const struct hm_optim_cfg *cfg,
                             const struct hm_backend *be, const struct hm_opt_param *p,
                             int64_t np, struct hm_error *err);
void hm_optim_release(struct hm_optim *o);

/* *acc += Σ g² over all params (each tensor's sum in double, added in
 * order). acc: [1] backend memory; the global norm is the sqrt of it. */
void hm_grad_sqnorm(const struct hm_backend *be, const struct hm_opt_param *p, int64_t np,
                    double *acc);

/* Name of the first param whose gradient (grads = 1) or weight (0) holds
 * NaN/Inf, or NULL. One download per tensor: for the NaN guard's rare
 * failure path, not for every step. */
const char *hm_params_first_nonfinite(const struct hm_backend *be, const struct hm_opt_param *p,
                                      int64_t np, int grads);

/* One update with learning rate lr. grad_norm is the pre-clip global norm
 * (sqrt of hm_grad_sqnorm). Gradients are read, not changed (clipping
 * scales them as they are read). */
void hm_optim_step(struct hm_optim *o, const struct hm_backend *be, struct hm_opt_param *p,
                   int64_t np, double lr, double grad_norm);

/* Learning rate of step s (0-based) of S steps, W warm-up steps (contract §4):
 * s < W: peak·(s+1)/W; else u = (s−W)/max(1, S−W),
 * floor + (peak − floor)(1 + cos πu)/2 with floor = 0.1·peak. */
double hm_lr_at(double peak, int64_t s, int64_t S, int64_t W);

#endif
