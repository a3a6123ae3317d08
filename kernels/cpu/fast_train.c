/* fast_train.c — OpenMP versions of the training and utility ops (the
 * AdamW element and the KD row are shared with ref_train.c). */
#include <math.h>
#include <string.h>

#include "cpu_simd.h"
#include "cpu_train.h"
#include "cpu_vexp.h"

void hm_fast_sgd_step(HM_CPU_CTX, float *w, const float *g, int64_t n, float lr)
{
#pragma omp parallel for schedule(static) if (n >= 32768)
    for (int64_t j = 0; j < n; j++)
        w[j] -= lr * g[j];
}

HM_CLONES static double sqnorm_span(const float *x, int64_t n)
{
    double s = 0;
#pragma omp simd reduction(+ : s)
    for (int64_t j = 0; j < n; j++)
        s += (double)x[j] * (double)x[j];
    return s;
}

void hm_fast_sqnorm(HM_CPU_CTX, double *acc, const float *x, int64_t n)
{
    const int64_t blk = 8192;
    int64_t nb = (n + blk - 1) / blk;
    double s = 0;
#pragma omp parallel for reduction(+ : s) schedule(static) if (n >= 32768)
    for (int64_t b = 0; b < nb; b++) {
        int64_t j0 = b * blk, j1 = j0 + blk < n ? j0 + blk : n;
        s += sqnorm_span(x + j0, j1 - j0);
    }
    *acc += s;
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

/* adamw_one over a span, its constants in registers so the loop vectorizes
 * (the same operations in the same order, no FMA contraction: bit-identical
 * to the ref; the vector sqrtf needs the library's -fno-math-errno). */
HM_CLONES __attribute__((optimize("fp-contract=off"))) static void adamw_span(float *w, const float *g, float *m, float *v, int64_t n,
                                 struct hm_adamw_args a)
{
#pragma omp simd
    for (int64_t j = 0; j < n; j++)
        adamw_one(w + j, g + j, m + j, v + j, &a);
}

void hm_fast_adamw_step(HM_CPU_CTX, float *w, const float *g, float *m, float *v, int64_t n,
                        const struct hm_adamw_args *a)
{
    const int64_t blk = 8192;
    int64_t nb = (n + blk - 1) / blk;
#pragma omp parallel for schedule(static) if (n >= 32768)
    for (int64_t b = 0; b < nb; b++) {
        int64_t j0 = b * blk, j1 = j0 + blk < n ? j0 + blk : n;
        adamw_span(w + j0, g + j0, m + j0, v + j0, j1 - j0, *a);
    }
}

/* kl_row (cpu_train.h) with its exps vectorized (hm_vexp_d): the same
 * double arithmetic (l/τ a division, as there), sums in a vector order.
 * Inlined twice by kl_row_fast: with τ a constant 1 the divisions fold away
 * (x/1 = x exactly), which they cost ~10 % of the op at 256 × 50304. */
static inline __attribute__((always_inline)) double
kl_row_at(float *g, const float *ls, const float *lt, int64_t V, double w, double scale, double tau)
{
    float fms = ls[0], fmt = lt[0];
#pragma omp simd reduction(max : fms, fmt)
    for (int64_t v = 1; v < V; v++) {
        fms = ls[v] > fms ? ls[v] : fms;
        fmt = lt[v] > fmt ? lt[v] : fmt;
    }
    const double ms = fms / tau, mt = fmt / tau;
    double ss = 0, st = 0;
#pragma omp simd reduction(+ : ss, st)
    for (int64_t v = 0; v < V; v++) {
        ss += hm_vexp_d((double)ls[v] / tau - ms);
        st += hm_vexp_d((double)lt[v] / tau - mt);
    }
    const double lss = ms + log(ss), lst = mt + log(st), ws = w * scale * tau;
    double kl = 0;
#pragma omp simd reduction(+ : kl)
    for (int64_t v = 0; v < V; v++) {
        double lps = (double)ls[v] / tau - lss, lpt = (double)lt[v] / tau - lst,
               pt = hm_vexp_d(lpt);
        kl += pt * (lpt - lps);
        g[v] += (float)(ws * (hm_vexp_d(lps) - pt));
    }
    return kl;
}

HM_CLONES static double kl_row_fast(float *g, const float *ls, const float *lt, int64_t V,
                                    double w, double scale, double tau)
{
    return tau == 1 ? kl_row_at(g, ls, lt, V, w, scale, 1.0)
                    : kl_row_at(g, ls, lt, V, w, scale, tau);
}

void hm_fast_kl_backward(HM_CPU_CTX, double *loss, float *dlogits, const float *logits,
                         const float *tlogits, int64_t T, int64_t V, double w, double scale,
                         double tau)
{
    double kl = 0;
#pragma omp parallel for schedule(static) reduction(+ : kl) if (T * V >= 32768)
    for (int64_t t = 0; t < T; t++)
        kl += kl_row_fast(dlogits + t * V, logits + t * V, tlogits + t * V, V, w, scale, tau);
    *loss += tau * tau * kl;
}
