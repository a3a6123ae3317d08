/* ref_train.c — plain-loop oracles of the training and utility ops. */
#include <math.h>
#include <string.h>

#include "cpu_train.h"

void hm_ref_adamw_step(HM_CPU_CTX, float *w, const float *g, float *m, float *v, int64_t n,
                       const struct hm_adamw_args *a)
{
    for (int64_t j = 0; j < n; j++)
        adamw_one(w + j, g + j, m + j, v + j, a);
}

void hm_ref_sgd_step(HM_CPU_CTX, float *w, const float *g, int64_t n, float lr)
{
    for (int64_t j = 0; j < n; j++)
        w[j] -= lr * g[j];
}

void hm_ref_sqnorm(HM_CPU_CTX, double *acc, const float *x, int64_t n)
{
    double s = 0;
    for (int64_t j = 0; j < n; j++)
        s += (double)x[j] * (double)x[j];
    *acc += s;
}

void hm_ref_first_nonfinite(HM_CPU_CTX, int64_t *index, const float *x, int64_t n)
{
    *index = -1;
    for (int64_t j = 0; j < n; j++)
        if (!isfinite(x[j])) {
            *index = j;
            return;
        }
}

void hm_ref_kl_backward(HM_CPU_CTX, double *loss, float *dlogits, const float *logits,
                        const float *tlogits, int64_t T, int64_t V, double w, double scale,
                        double tau)
{
    double kl = 0;
    for (int64_t t = 0; t < T; t++)
        kl += kl_row(dlogits + t * V, logits + t * V, tlogits + t * V, V, w, scale, tau);
    *loss += tau * tau * kl;
}

void hm_ref_fill(HM_CPU_CTX, float *x, int64_t n, float value)
{
    for (int64_t j = 0; j < n; j++)
        x[j] = value;
}

void hm_ref_copy2d(HM_CPU_CTX, float *dst, int64_t dst_stride, const float *src,
                   int64_t src_stride, int64_t rows, int64_t cols)
{
    for (int64_t r = 0; r < rows; r++)
        memcpy(dst + r * dst_stride, src + r * src_stride, sizeof(float) * (size_t)cols);
}

void hm_ref_clamp(HM_CPU_CTX, float *x, int64_t n, float lo, float hi)
{
    for (int64_t j = 0; j < n; j++)
        x[j] = x[j] < lo ? lo : x[j] > hi ? hi : x[j];
}
