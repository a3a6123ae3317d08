/* cpu_train.h — private: the CPU ops of the training loop and the small
 * tensor loops the model code used to run itself (kernels/backend.h,
 * "training and utility ops"): AdamW and SGD updates, squared norms, the
 * KD term, fill, strided copies, clamps. ref: plain loops; fast: OpenMP,
 * elementwise identical to ref (reductions aside). */
#ifndef HM_CPU_TRAIN_H
#define HM_CPU_TRAIN_H

#include <math.h>

#include "cpu_ops_list.h"

/* One AdamW element, shared by ref and fast so both round identically:
 * ĝ = g·scale (clipping; g is only read), w ← w·decay, m, v moments,
 * w −= step·m/(√v/√bc2 + ε). */
static inline void adamw_one(float *w, const float *g, float *m, float *v,
                             const struct hm_adamw_args *a)
{
    float gj = *g * a->scale;
    *w *= a->decay;
    *m = a->beta1 * *m + (1.0f - a->beta1) * gj;
    *v = a->beta2 * *v + (1.0f - a->beta2) * gj * gj;
    float denom = sqrtf(*v) / a->bc2_sqrt + a->eps;
    *w -= a->step_size * (*m / denom);
}

/* One row at temperature tau: KL(p_t ‖ p_s) of p = softmax(l/τ), without the
 * τ² the caller applies to the sum, and its gradient w·scale·τ·(p_s − p_t)
 * added to g. l/τ is a division (exact at τ = 1, never fused into an FMA);
 * max(l)/τ = max(l/τ) for τ > 0, division rounding being monotone. */
static inline double kl_row(float *g, const float *ls, const float *lt, int64_t V, double w,
                            double scale, double tau)
{
    double ms = ls[0], mt = lt[0];
    for (int64_t v = 1; v < V; v++) {
        ms = ls[v] > ms ? ls[v] : ms;
        mt = lt[v] > mt ? lt[v] : mt;
    }
    ms /= tau;
    mt /= tau;
    double ss = 0, st = 0;
    for (int64_t v = 0; v < V; v++) {
        ss += exp((double)ls[v] / tau - ms);
        st += exp((double)lt[v] / tau - mt);
    }
    double lss = ms + log(ss), lst = mt + log(st), kl = 0;
    const double ws = w * scale * tau;
    for (int64_t v = 0; v < V; v++) {
        double lps = (double)ls[v] / tau - lss, lpt = (double)lt[v] / tau - lst, pt = exp(lpt);
        kl += pt * (lpt - lps);
        g[v] += (float)(ws * (exp(lps) - pt));
    }
    return kl;
}

#endif
