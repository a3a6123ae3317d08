/* ref_attention.c — reference rotary embedding and causal softmax attention
 * (contract §1), plain loops with double sums. Semantics: kernels/backend.h.
 *
 * Gotchas that have caused bugs elsewhere:
 *  - the fused qkv layout is interleaved per head (h*3p + s*p + i), not
 *    [q | k | v] blocks;
 *  - the rotary angle is the fp32 product (float)pos * inv_freq, and cos/sin
 *    are taken of that fp32 value (HF computes in fp32); at pos ~ 1000 the
 *    difference from a double angle is visible at 1e-4;
 *  - positions restart at pos0 (0) for every sequence. */
#include <math.h>

#include "cpu_ops.h"

void hm_ref_rotary_forward(HM_CPU_CTX, float *x, int64_t T, int64_t n_h, int64_t r, int64_t row_stride,
                           int64_t head_stride, int64_t pos0, const float *inv_freq)
{
    int64_t half = r / 2;
    for (int64_t t = 0; t < T; t++)
        for (int64_t j = 0; j < half; j++) {
            float theta = (float)(pos0 + t) * inv_freq[j];
            float c = (float)cos((double)theta), s = (float)sin((double)theta);
            for (int64_t h = 0; h < n_h; h++) {
                float *v = x + t * row_stride + h * head_stride;
                float a = v[j], b = v[j + half];
                v[j] = a * c - b * s;
                v[j + half] = b * c + a * s;
            }
        }
}

size_t hm_ref_attention_ws_size(HM_CPU_CTX, int64_t T, int64_t n_h, int64_t p)
{
    (void)n_h;
    (void)p;
    return sizeof(double) * (size_t)(T > 0 ? T : 1);
}

void hm_ref_attention_forward(HM_CPU_CTX, float *out, float *lse, const float *qkv, int64_t T, int64_t n_h,
                              int64_t p, void *ws, size_t ws_size)
{
    (void)ws_size;
    double *sc = ws; /* [T] scores of one query row */
    int64_t d = n_h * p, ld = 3 * d;
    double scale = 1.0 / sqrt((double)p);
    for (int64_t h = 0; h < n_h; h++) {
        const float *q = qkv + h * 3 * p, *k = q + p, *v = q + 2 * p;
        for (int64_t t = 0; t < T; t++) {
            double mx = -INFINITY;
            for (int64_t s = 0; s <= t; s++) {
                double acc = 0;
                for (int64_t i = 0; i < p; i++)
                    acc += (double)q[t * ld + i] * (double)k[s * ld + i];
                sc[s] = acc * scale;
                if (sc[s] > mx)
                    mx = sc[s];
            }
            double sum = 0;
            for (int64_t s = 0; s <= t; s++) {
                sc[s] = exp(sc[s] - mx);
                sum += sc[s];
            }
            if (lse)
                lse[h * T + t] = (float)(mx + log(sum));
            for (int64_t i = 0; i < p; i++) {
                double acc = 0;
                for (int64_t s = 0; s <= t; s++)
                    acc += sc[s] * (double)v[s * ld + i];
                out[t * d + h * p + i] = (float)(acc / sum);
            }
        }
    }
}
