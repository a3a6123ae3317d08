/* ref_ops.c — the reference CPU ops: plain single-threaded loops, sums in
 * double. They are the oracle for every other backend (conventions 12), so they
 * favour clarity over speed. Semantics: kernels/backend.h. */
#include <math.h>
#include <string.h>

#include "cpu_ops.h"
#include "narrow.h"

void hm_ref_matmul_forward(HM_CPU_CTX, float *y, const float *x, const float *w, const float *b,
                           int64_t T, int64_t in, int64_t out)
{
    for (int64_t t = 0; t < T; t++)
        for (int64_t o = 0; o < out; o++) {
            double acc = b ? (double)b[o] : 0.0;
            const float *xr = x + t * in, *wr = w + o * in;
            for (int64_t i = 0; i < in; i++)
                acc += (double)xr[i] * (double)wr[i];
            y[t * out + o] = (float)acc;
        }
}

void hm_ref_layernorm_forward(HM_CPU_CTX, float *y, float *mean, float *rstd, const float *x,
                              const float *w, const float *b, int64_t T, int64_t d, float eps)
{
    for (int64_t t = 0; t < T; t++) {
        const float *xr = x + t * d;
        double m = 0, v = 0;
        for (int64_t i = 0; i < d; i++)
            m += xr[i];
        m /= (double)d;
        for (int64_t i = 0; i < d; i++)
            v += ((double)xr[i] - m) * ((double)xr[i] - m);
        v /= (double)d;
        double rs = 1.0 / sqrt(v + (double)eps);
        if (mean)
            mean[t] = (float)m;
        if (rstd)
            rstd[t] = (float)rs;
        for (int64_t i = 0; i < d; i++)
            y[t * d + i] = (float)(((double)xr[i] - m) * rs * (double)w[i] + (double)b[i]);
    }
}

void hm_ref_gelu_forward(HM_CPU_CTX, float *y, const float *x, int64_t n, enum hm_gelu_kind kind)
{
    for (int64_t i = 0; i < n; i++) {
        double v = x[i];
        if (kind == HM_GELU_TANH)
            y[i] = (float)(0.5 * v *
                           (1.0 + tanh(sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v))));
        else
            y[i] = (float)(0.5 * v * (1.0 + erf(v / sqrt(2.0))));
    }
}

void hm_ref_add_forward(HM_CPU_CTX, float *y, const float *a, const float *b, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = a[i] + b[i];
}

void hm_ref_embedding_forward(HM_CPU_CTX, float *y, const int32_t *ids, const float *table, int64_t T,
                              int64_t d)
{
    for (int64_t t = 0; t < T; t++)
        memcpy(y + t * d, table + (int64_t)ids[t] * d, sizeof(float) * (size_t)d);
}

void hm_ref_widen_rows(HM_CPU_CTX, float *y, const int32_t *ids, const uint16_t *x, int64_t N,
                       int64_t d, enum hm_narrow kind)
{
    for (int64_t i = 0; i < N; i++) {
        const uint16_t *row = x + (ids ? (int64_t)ids[i] : i) * d;
        float *out = y + i * d;
        for (int64_t j = 0; j < d; j++)
            out[j] = kind == HM_NARROW_F16 ? hm_f16_f32(row[j]) : hm_bf16_f32(row[j]);
    }
}

void hm_ref_nll_forward(HM_CPU_CTX, float *nll, float *lse, const float *logits, const int32_t *targets,
                        int64_t T, int64_t V)
{
    for (int64_t t = 0; t < T; t++) {
        const float *row = logits + t * V;
        double mx = -INFINITY, s = 0;
        for (int64_t v = 0; v < V; v++)
            if (row[v] > mx)
                mx = row[v];
        for (int64_t v = 0; v < V; v++)
            s += exp((double)row[v] - mx);
        double l = mx + log(s);
        if (lse)
            lse[t] = (float)l;
        nll[t] = (float)(l - (double)row[targets[t]]);
    }
}
