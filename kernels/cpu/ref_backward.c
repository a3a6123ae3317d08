/* ref_backward.c — plain-loop backward ops, the oracle for the fast path.
 * Written for clarity; checked against central finite differences in
 * double precision by tests/test_backward.c. */
#include <math.h>
#include <string.h>

#include "cpu_backward.h"

/* y = x W^T + b: dx = dy W, dW += dy^T x, db += Σ_t dy. */
void hm_ref_matmul_backward(HM_CPU_CTX, float *dx, float *dw, float *db, const float *dy, const float *x,
                            const float *w, int64_t T, int64_t in, int64_t out)
{
    if (dx) {
        for (int64_t t = 0; t < T; t++)
            for (int64_t i = 0; i < in; i++) {
                double s = 0;
                for (int64_t o = 0; o < out; o++)
                    s += (double)dy[t * out + o] * w[o * in + i];
                dx[t * in + i] = (float)s;
            }
    }
    if (dw) {
        for (int64_t o = 0; o < out; o++)
            for (int64_t i = 0; i < in; i++) {
                double s = 0;
                for (int64_t t = 0; t < T; t++)
                    s += (double)dy[t * out + o] * x[t * in + i];
                dw[o * in + i] += (float)s;
            }
    }
    if (db) {
        for (int64_t o = 0; o < out; o++) {
            double s = 0;
            for (int64_t t = 0; t < T; t++)
                s += dy[t * out + o];
            db[o] += (float)s;
        }
    }
}

/* y = xhat·w + b, xhat = (x − mean)·rstd.
 * dx = rstd · (g − mean(g) − xhat · mean(g · xhat)), g = dy · w. */
void hm_ref_layernorm_backward(HM_CPU_CTX, float *dx, float *dw, float *db, const float *dy,
                               const float *x, const float *mean, const float *rstd,
                               const float *w, int64_t T, int64_t d)
{
    for (int64_t t = 0; t < T; t++) {
        const float *xr = x + t * d, *dyr = dy + t * d;
        double mg = 0, mgx = 0;
        for (int64_t i = 0; i < d; i++) {
            double xhat = ((double)xr[i] - mean[t]) * rstd[t];
            double g = (double)dyr[i] * w[i];
            mg += g;
            mgx += g * xhat;
            if (dw)
                dw[i] += (float)(dyr[i] * xhat);
            if (db)
                db[i] += dyr[i];
        }
        mg /= (double)d;
        mgx /= (double)d;
        if (dx)
            for (int64_t i = 0; i < d; i++) {
                double xhat = ((double)xr[i] - mean[t]) * rstd[t];
                double g = (double)dyr[i] * w[i];
                dx[t * d + i] = (float)(rstd[t] * (g - mg - xhat * mgx));
            }
    }
}

static double gelu_grad(double x, enum hm_gelu_kind kind)
{
    if (kind == HM_GELU_ERF) {
        double cdf = 0.5 * (1.0 + erf(x / sqrt(2.0)));
        double pdf = exp(-0.5 * x * x) / sqrt(2.0 * M_PI);
        return cdf + x * pdf;
    }
    const double c = sqrt(2.0 / M_PI);
    double u = c * (x + 0.044715 * x * x * x);
    double th = tanh(u);
    double du = c * (1.0 + 3.0 * 0.044715 * x * x);
    return 0.5 * (1.0 + th) + 0.5 * x * (1.0 - th * th) * du;
}

void hm_ref_gelu_backward(HM_CPU_CTX, float *dx, const float *dy, const float *x, int64_t n,
                          enum hm_gelu_kind kind)
{
    for (int64_t i = 0; i < n; i++)
        dx[i] = (float)(dy[i] * gelu_grad(x[i], kind));
}

/* The forward rotation R(θ) is orthogonal, so the gradient goes back
 * through R(θ)^T = R(−θ): same angles, same fp32 rounding. In place. */
void hm_ref_rotary_backward(HM_CPU_CTX, float *dx, int64_t T, int64_t n_h, int64_t r, int64_t row_stride,
                            int64_t head_stride, int64_t pos0, const float *inv_freq)
{
    int64_t half = r / 2;
    for (int64_t t = 0; t < T; t++)
        for (int64_t h = 0; h < n_h; h++) {
            float *v = dx + t * row_stride + h * head_stride;
            for (int64_t i = 0; i < half; i++) {
                float theta = (float)(pos0 + t) * inv_freq[i];
                float c = (float)cos((double)theta), s = (float)sin((double)theta);
                float a = v[i], b = v[i + half];
                v[i] = a * c + b * s;
                v[i + half] = b * c - a * s;
            }
        }
}

size_t hm_ref_attention_backward_ws_size(HM_CPU_CTX, int64_t T, int64_t n_h, int64_t p)
{
    (void)n_h;
    (void)p;
    return sizeof(float) * (size_t)T * 2;
}

/* Per head: P = exp(S − lse) with S = q k^T / sqrt(p) (causal);
 * dV = P^T dO; dP = dO V^T; dS = P ⊙ (dP − rowsum(dO ⊙ O));
 * dQ = dS K / sqrt(p); dK = dS^T Q / sqrt(p). dqkv is written. */
void hm_ref_attention_backward(HM_CPU_CTX, float *dqkv, const float *dout, const float *qkv,
                               const float *out, const float *lse, int64_t T, int64_t n_h,
                               int64_t p, void *ws, size_t ws_size)
{
    (void)ws_size;
    const int64_t d = n_h * p, rs = 3 * d;
    const double scale = 1.0 / sqrt((double)p);
    float *prow = ws, *dprow = prow + T;
    memset(dqkv, 0, sizeof(float) * (size_t)(T * rs));
    for (int64_t h = 0; h < n_h; h++) {
        const float *q = qkv + h * 3 * p, *k = q + p, *v = q + 2 * p;
        float *dq = dqkv + h * 3 * p, *dk = dq + p, *dv = dq + 2 * p;
        for (int64_t i = 0; i < T; i++) {
            const float *o = out + i * d + h * p, *doi = dout + i * d + h * p;
            double Di = 0;
            for (int64_t c = 0; c < p; c++)
                Di += (double)doi[c] * o[c];
            for (int64_t j = 0; j <= i; j++) {
                double s = 0, dp = 0;
                for (int64_t c = 0; c < p; c++) {
                    s += (double)q[i * rs + c] * k[j * rs + c];
                    dp += (double)doi[c] * v[j * rs + c];
                }
                prow[j] = (float)exp(s * scale - lse[h * T + i]);
                dprow[j] = (float)dp;
            }
            for (int64_t j = 0; j <= i; j++) {
                double ds = prow[j] * (dprow[j] - Di);
                for (int64_t c = 0; c < p; c++) {
                    dv[j * rs + c] += (float)(prow[j] * doi[c]);
                    dq[i * rs + c] += (float)(ds * scale * k[j * rs + c]);
                    dk[j * rs + c] += (float)(ds * scale * q[i * rs + c]);
                }
            }
        }
    }
}

void hm_ref_embedding_backward(HM_CPU_CTX, float *dtable, const float *dy, const int32_t *ids, int64_t T,
                               int64_t d)
{
    for (int64_t t = 0; t < T; t++)
        for (int64_t i = 0; i < d; i++)
            dtable[(int64_t)ids[t] * d + i] += dy[t * d + i];
}

/* Mean-free form: returns Σ_t nll_t (double); dlogits[t] = scale ·
 * (softmax(logits[t]) − onehot(targets[t])) — written. Targets < 0 are
 * ignored (no loss, zero gradient). */
void hm_ref_cross_entropy_backward(HM_CPU_CTX, double *loss, float *dlogits, const float *logits,
                                     const int32_t *targets, int64_t T, int64_t V, float scale)
{
    double total = 0;
    for (int64_t t = 0; t < T; t++) {
        const float *l = logits + t * V;
        float *g = dlogits + t * V;
        if (targets[t] < 0) {
            memset(g, 0, sizeof(float) * (size_t)V);
            continue;
        }
        double mx = l[0];
        for (int64_t v = 1; v < V; v++)
            if (l[v] > mx)
                mx = l[v];
        double se = 0;
        for (int64_t v = 0; v < V; v++)
            se += exp((double)l[v] - mx);
        double lse = mx + log(se);
        total += lse - l[targets[t]];
        for (int64_t v = 0; v < V; v++)
            g[v] = (float)(scale * exp((double)l[v] - lse));
        g[targets[t]] -= scale;
    }
    *loss += total;
}
