/* ref_stage1.c — plain-loop stage-1 objectives besides the cosine loss
 * (ref_linattn.c): the attention-output MSE and the attention-weight
 * cross-entropy (contracts in kernels/backend.h). Double accumulation,
 * written for clarity; the oracle for fast_stage1.c and cuda_stage1.cu,
 * checked against finite differences by tests/test_stage1_loss.c.
 *
 * Gotchas:
 *   - attn_ce: D_t includes eps (as linattn_forward's den), and
 *     Σ_s P_ts = 1, which the gradient (C_t − w_ts) / D_t relies on only
 *     through C_t: it is not assumed anywhere;
 *   - dphiq and dphik are written (=), not accumulated: stage 1 hands
 *     them to the feature-map backward right after. */
#include <math.h>
#include <string.h>

#include "cpu_stage1.h"

/* Σ_t (1/d) Σ_j (a − b)²; da = scale · (2/d)(a − b). */
void hm_ref_mse_loss(HM_CPU_CTX, double *loss, float *da, const float *a, const float *b,
                     int64_t N, int64_t d, float scale)
{
    const double g2 = 2.0 * (double)scale / (double)d;
    double total = 0;
    for (int64_t t = 0; t < N; t++) {
        double s = 0;
        for (int64_t j = 0; j < d; j++) {
            const double e = (double)a[t * d + j] - (double)b[t * d + j];
            s += e * e;
            if (da)
                da[t * d + j] = (float)(g2 * e);
        }
        total += s / (double)d;
    }
    *loss += total;
}

static double dot_d(const float *a, const float *b, int64_t n)
{
    double s = 0;
    for (int64_t i = 0; i < n; i++)
        s += (double)a[i] * b[i];
    return s;
}

/* Per query t: scores z_s and e_s for s ≤ t (P holds z, then P); m, Z of
 * the softmax; D = Σ e + eps; then CE_t and C_t = Σ w_s A_s, w = P/(A+δ);
 * then g_ts = c (C_t − w_ts) / D_t into dφq_t (s ascending) and dφk_s
 * (t ascending). */
double hm_cpu_attn_ce_head(float *dphiq, float *dphik, const float *phiq, const float *phik,
                           const float *q, const float *k, int64_t T, int64_t n_h, int64_t F2,
                           int64_t p, int64_t rs, int64_t hs, double eps, double c, int64_t h,
                           double *ws)
{
    double *P = ws, *e = P + T, *dq = e + T, *dk = dq + F2;
    const double inv = 1.0 / sqrt((double)p), delta = HM_ATTN_CE_DELTA;
    if (dphik)
        memset(dk, 0, sizeof(double) * (size_t)(T * F2));
    double sum = 0;
    for (int64_t t = 0; t < T; t++) {
        const float *qt = q + t * rs + h * hs, *pq = phiq + (t * n_h + h) * F2;
        double m = -INFINITY, D = 0, Z = 0, C = 0, ce = 0;
        for (int64_t s = 0; s <= t; s++) {
            P[s] = dot_d(qt, k + s * rs + h * hs, p) * inv;
            m = P[s] > m ? P[s] : m;
            e[s] = dot_d(pq, phik + (s * n_h + h) * F2, F2);
            D += e[s];
        }
        D += eps;
        for (int64_t s = 0; s <= t; s++) {
            P[s] = exp(P[s] - m);
            Z += P[s];
        }
        for (int64_t s = 0; s <= t; s++) {
            P[s] /= Z;
            const double A = e[s] / D;
            ce -= P[s] * log(A + delta);
            C += P[s] / (A + delta) * A;
        }
        sum += ce;
        if (!dphiq && !dphik)
            continue;
        memset(dq, 0, sizeof(double) * (size_t)F2);
        for (int64_t s = 0; s <= t; s++) {
            const double A = e[s] / D, g = c * ((C - P[s] / (A + delta)) / D);
            const float *pk = phik + (s * n_h + h) * F2;
            for (int64_t f = 0; f < F2; f++) {
                dq[f] += g * pk[f];
                dk[s * F2 + f] += g * pq[f];
            }
        }
        if (dphiq)
            for (int64_t f = 0; f < F2; f++)
                dphiq[(t * n_h + h) * F2 + f] = (float)dq[f];
    }
    if (dphik)
        for (int64_t s = 0; s < T; s++)
            for (int64_t f = 0; f < F2; f++)
                dphik[(s * n_h + h) * F2 + f] = (float)dk[s * F2 + f];
    return sum;
}

size_t hm_ref_attn_ce_loss_ws_size(HM_CPU_CTX, int64_t T, int64_t n_h, int64_t F2, int64_t p)
{
    (void)n_h, (void)p;
    return sizeof(double) * (size_t)hm_cpu_attn_ce_head_doubles(T, F2);
}

void hm_ref_attn_ce_loss(HM_CPU_CTX, double *loss, float *dphiq, float *dphik,
                         const float *phiq, const float *phik, const float *q, const float *k,
                         int64_t T, int64_t n_h, int64_t F2, int64_t p, int64_t qk_row_stride,
                         int64_t qk_head_stride, float eps, float scale, void *ws,
                         size_t ws_size)
{
    (void)ws_size;
    if (T <= 0 || n_h <= 0)
        return;
    double total = 0;
    for (int64_t h = 0; h < n_h; h++)
        total += hm_cpu_attn_ce_head(dphiq, dphik, phiq, phik, q, k, T, n_h, F2, p,
                                     qk_row_stride, qk_head_stride, (double)eps,
                                     (double)scale / (double)n_h, h, ws);
    *loss += total / (double)n_h;
}
