/* ref_family.c — plain-loop oracles for the llama-family ops (cpu_family.h). */
#include <math.h>
#include <string.h>

#include "cpu_family.h"

void hm_ref_rmsnorm_forward(HM_CPU_CTX, float *y, float *rstd, const float *x, const float *w, int64_t T,
                            int64_t d, float eps)
{
    for (int64_t t = 0; t < T; t++) {
        const float *xt = x + t * d;
        double ss = 0;
        for (int64_t i = 0; i < d; i++)
            ss += (double)xt[i] * (double)xt[i];
        float r = (float)(1.0 / sqrt(ss / (double)d + (double)eps));
        if (rstd)
            rstd[t] = r;
        for (int64_t i = 0; i < d; i++)
            y[t * d + i] = xt[i] * r * w[i];
    }
}

/* y_i = x_i r w_i with r = (mean(x²) + eps)^(-1/2):
 * dx_i = r (w_i dy_i) − x_i r³ / d · Σ_j w_j dy_j x_j,  dw_i += dy_i x_i r. */
void hm_ref_rmsnorm_backward(HM_CPU_CTX, float *dx, float *dw, const float *dy, const float *x,
                             const float *rstd, const float *w, int64_t T, int64_t d)
{
    for (int64_t t = 0; t < T; t++) {
        const float *xt = x + t * d, *gt = dy + t * d;
        const double r = rstd[t];
        double dot = 0;
        for (int64_t i = 0; i < d; i++)
            dot += (double)gt[i] * (double)w[i] * (double)xt[i];
        const double c = dot * r * r * r / (double)d;
        for (int64_t i = 0; i < d; i++) {
            if (dw)
                dw[i] += (float)((double)gt[i] * (double)xt[i] * r);
            if (dx)
                dx[t * d + i] = (float)(r * (double)gt[i] * (double)w[i] - (double)xt[i] * c);
        }
    }
}

/* x: [T, (n_h + 2 n_kv) p] as [q | k | v]; y: [T, n_h, 3, p]. */
void hm_ref_qkv_expand_forward(HM_CPU_CTX, float *y, const float *x, int64_t T, int64_t n_h, int64_t n_kv,
                               int64_t p)
{
    const int64_t in = (n_h + 2 * n_kv) * p;
    for (int64_t t = 0; t < T; t++)
        hm_qkv_expand_row(y + t * 3 * n_h * p, x + t * in, n_h, n_kv, p);
}

/* The transpose: dx written; a key/value head sums the grads of its group. */
void hm_ref_qkv_expand_backward(HM_CPU_CTX, float *dx, const float *dy, int64_t T, int64_t n_h,
                                int64_t n_kv, int64_t p)
{
    const int64_t in = (n_h + 2 * n_kv) * p, grp = n_h / n_kv;
    memset(dx, 0, sizeof(float) * (size_t)(T * in));
    for (int64_t t = 0; t < T; t++)
        for (int64_t h = 0; h < n_h; h++) {
            const int64_t g = h / grp;
            const float *go = dy + t * 3 * n_h * p + h * 3 * p;
            float *xr = dx + t * in;
            for (int64_t i = 0; i < p; i++) {
                xr[h * p + i] += go[i];
                xr[n_h * p + g * p + i] += go[p + i];
                xr[(n_h + n_kv) * p + g * p + i] += go[2 * p + i];
            }
        }
}

/* Row t (position P0 + t) of head h against cached positions s ≤ P0 + t:
 * out_{t,h} = Σ_s softmax_s(q_{t,h} · k_{s,g(h)} / sqrt(p)) v_{s,g(h)}.
 * q: row t head h at q + t q_row_stride + h q_head_stride; kc, vc: [P0 + T,
 * n_kv, p]; out: [T, n_h, p]; scratch: the n = P0 + t + 1 scores of one row. */
void hm_ref_attention_cached(HM_CPU_CTX, float *out, const float *q, int64_t q_row_stride,
                             int64_t q_head_stride, const float *kc, const float *vc, int64_t P0,
                             int64_t T, int64_t n_h, int64_t n_kv, int64_t p, float *scratch)
{
    const int64_t grp = n_h / n_kv;
    const float scale = 1.0f / sqrtf((float)p);
    for (int64_t t = 0; t < T; t++) {
        const int64_t n = P0 + t + 1;
        for (int64_t h = 0; h < n_h; h++) {
            const int64_t g = h / grp;
            const float *qh = q + t * q_row_stride + h * q_head_stride;
            float mx = -INFINITY;
            for (int64_t s = 0; s < n; s++) {
                float a = 0;
                for (int64_t i = 0; i < p; i++)
                    a += qh[i] * kc[(s * n_kv + g) * p + i];
                scratch[s] = a * scale;
                mx = scratch[s] > mx ? scratch[s] : mx;
            }
            double sum = 0;
            for (int64_t s = 0; s < n; s++) {
                scratch[s] = expf(scratch[s] - mx);
                sum += scratch[s];
            }
            float *o = out + (t * n_h + h) * p;
            memset(o, 0, sizeof(float) * (size_t)p);
            for (int64_t s = 0; s < n; s++) {
                const float a = (float)(scratch[s] / sum);
                for (int64_t i = 0; i < p; i++)
                    o[i] += a * vc[(s * n_kv + g) * p + i];
            }
        }
    }
}
