/* fast_train.c — OpenMP versions of the training and utility ops (the
 * AdamW element and the KD row are shared with ref_train.c). */
#include <math.h>
#include <string.h>

#include "cpu_train.h"

void hm_fast_sgd_step(HM_CPU_CTX, float *w, const float *g, int64_t n, float lr)
{
#pragma omp parallel for schedule(static) if (n >= 32768)
    for (int64_t j = 0; j < n; j++)
        w[j] -= lr * g[j];
}

double hm_fast_sqnorm(HM_CPU_CTX, const float *x, int64_t n)
{
    double s = 0;
#pragma omp parallel for reduction(+ : s) schedule(static)
    for (int64_t j = 0; j < n; j++)
        s += (double)x[j] * (double)x[j];
    return s;
}

void hm_fast_fill(HM_CPU_CTX, float *x, int64_t n, float value)
{
    if (value == 0.0f && !signbit(value)) {
        memset(x, 0, sizeof(float) * (size_t)n);
        return;
    }
#pragma omp parallel for schedule(static) if (n >= 32768)
    for (int64_t j = 0; j < n; j++)
        x[j] = value;
}

void hm_fast_adamw_step(HM_CPU_CTX, float *w, float *g, float *m, float *v, int64_t n,
                        const struct hm_adamw_args *a)
{
#pragma omp parallel for schedule(static) if (n >= 32768)
    for (int64_t j = 0; j < n; j++)
        adamw_one(w + j, g + j, m + j, v + j, a);
}

double hm_fast_kl_backward(HM_CPU_CTX, float *dlogits, const float *logits,
                           const float *tlogits, int64_t T, int64_t V, double w, double scale)
{
    double kl = 0;
#pragma omp parallel for schedule(static) reduction(+ : kl) if (T * V >= 32768)
    for (int64_t t = 0; t < T; t++)
        kl += kl_row(dlogits + t * V, logits + t * V, tlogits + t * V, V, w, scale);
    return kl;
}

