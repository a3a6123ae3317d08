/* ref_linattn.c — plain-loop Hedgehog feature maps, causal normalized linear
 * attention and the stage-1 cosine loss (contract §2): the oracle for
 * fast_linattn.c. Written for clarity (double accumulation, the quadratic
 * masked form of the attention, O(T²) time, O(T) memory); checked against
 * central finite differences by tests/test_linattn.c.
 *
 * Gotchas that have caused bugs:
 *   - x is read strided out of the fused qkv (row_stride, head_stride) and dx
 *     is written into the same layout: only the p columns of each head are
 *     touched, the other columns of the buffer belong to someone else.
 *   - den saved by the forward already includes eps; the backward must not
 *     add it again.
 *   - softmax(−u) contributes −du: the two halves of φ have opposite signs in
 *     the chain rule. */
#include <math.h>
#include <string.h>

#include "cpu_linattn.h"

/* ---- feature map ----------------------------------------------------------
 * u = x W_h + b_h, φ = [softmax(u), softmax(−u)], both softmaxes over F. */

void hm_ref_featuremap_forward(HM_CPU_CTX, float *phi, const float *x, const float *W, const float *b,
                               int64_t T, int64_t n_h, int64_t p, int64_t F,
                               int64_t row_stride, int64_t head_stride)
{
    /* u_j is recomputed in each of the three passes rather than kept in
     * scratch (ops never allocate; this is the clarity-first oracle). */
    for (int64_t t = 0; t < T; t++)
        for (int64_t h = 0; h < n_h; h++) {
            const float *xr = x + t * row_stride + h * head_stride;
            const float *Wh = W + h * p * F, *bh = b + h * F;
            float *ph = phi + (t * n_h + h) * 2 * F;
            /* pass 1: max of u and of −u; pass 2: sums; pass 3: outputs */
            double mx = -INFINITY, mn = INFINITY, sp = 0, sm = 0;
            for (int64_t j = 0; j < F; j++) {
                double u = bh[j];
                for (int64_t i = 0; i < p; i++)
                    u += (double)xr[i] * Wh[i * F + j];
                mx = u > mx ? u : mx;
                mn = u < mn ? u : mn;
            }
            for (int64_t j = 0; j < F; j++) {
                double u = bh[j];
                for (int64_t i = 0; i < p; i++)
                    u += (double)xr[i] * Wh[i * F + j];
                sp += exp(u - mx);
                sm += exp(mn - u);
            }
            for (int64_t j = 0; j < F; j++) {
                double u = bh[j];
                for (int64_t i = 0; i < p; i++)
                    u += (double)xr[i] * Wh[i * F + j];
                ph[j] = (float)(exp(u - mx) / sp);
                ph[F + j] = (float)(exp(mn - u) / sm);
            }
        }
}

/* du_j = s_j (g_j − Σ s·g) − s'_j (g'_j − Σ s'·g')  with s = φ[0:F],
 * s' = φ[F:2F], g = dφ[0:F], g' = dφ[F:2F]; then dx = W du, dW += x du^T,
 * db += du. */
void hm_ref_featuremap_backward(HM_CPU_CTX, float *dx, float *dW, float *db, const float *dphi,
                                const float *x, const float *phi, const float *W, int64_t T,
                                int64_t n_h, int64_t p, int64_t F, int64_t row_stride,
                                int64_t head_stride)
{
    for (int64_t t = 0; t < T; t++)
        for (int64_t h = 0; h < n_h; h++) {
            const float *xr = x + t * row_stride + h * head_stride;
            const float *Wh = W + h * p * F;
            const float *ph = phi + (t * n_h + h) * 2 * F, *g = dphi + (t * n_h + h) * 2 * F;
            double dp = 0, dm = 0;
            for (int64_t j = 0; j < F; j++) {
                dp += (double)ph[j] * g[j];
                dm += (double)ph[F + j] * g[F + j];
            }
            /* du_j recomputed where needed (no scratch: ops never allocate) */
#define HM_REF_DU(j) ((double)ph[j] * (g[j] - dp) - (double)ph[F + (j)] * (g[F + (j)] - dm))
            if (dx) {
                float *dxr = dx + t * row_stride + h * head_stride;
                for (int64_t i = 0; i < p; i++) {
                    double s = 0;
                    for (int64_t j = 0; j < F; j++)
                        s += (double)Wh[i * F + j] * HM_REF_DU(j);
                    dxr[i] = (float)s;
                }
            }
            if (dW)
                for (int64_t i = 0; i < p; i++)
                    for (int64_t j = 0; j < F; j++)
                        dW[h * p * F + i * F + j] += (float)((double)xr[i] * HM_REF_DU(j));
            if (db)
                for (int64_t j = 0; j < F; j++)
                    db[h * F + j] += (float)HM_REF_DU(j);
#undef HM_REF_DU
        }
}

/* ---- causal normalized linear attention ----------------------------------
 * a_ts = φq_t · φk_s (s ≤ t); y_t = Σ a_ts v_s / (Σ a_ts + eps). */

size_t hm_ref_linattn_ws_size(HM_CPU_CTX, int64_t T, int64_t n_h, int64_t F2, int64_t p, int64_t chunk)
{
    (void)T, (void)n_h, (void)F2, (void)chunk;
    return sizeof(double) * (size_t)(p + 1); /* the numerator of one row */
}

static double dot_d(const float *a, const float *b, int64_t n)
{
    double s = 0;
    for (int64_t i = 0; i < n; i++)
        s += (double)a[i] * b[i];
    return s;
}

/* The saved chunk states of backend.h (hm_linattn_saved_floats), each
 * element one double sum over the rows before the chunk. */
static void chunk_states(float *saved, const float *phik, const float *v, int64_t T,
                         int64_t n_h, int64_t F2, int64_t p, int64_t v_row_stride,
                         int64_t v_head_stride, int64_t chunk)
{
    const int64_t C = hm_linattn_chunk(chunk), nc = (T + C - 1) / C;
    const int64_t SB = hm_linattn_saved_block(F2, p);
    for (int64_t h = 0; h < n_h; h++)
        for (int64_t c = 0; c < nc; c++) {
            float *blk = saved + (h * nc + c) * SB;
            for (int64_t k = 0; k <= p; k++)
                for (int64_t f = 0; f < F2; f++) {
                    double acc = 0;
                    for (int64_t s = 0; s < c * C; s++) {
                        const float vk = k < p ? v[s * v_row_stride + h * v_head_stride + k] : 1;
                        acc += (double)vk * phik[(s * n_h + h) * F2 + f];
                    }
                    blk[k * F2 + f] = (float)acc;
                }
        }
}

void hm_ref_linattn_forward(HM_CPU_CTX, float *y, float *den, const float *phiq, const float *phik,
                            const float *v, int64_t T, int64_t n_h, int64_t F2, int64_t p,
                            int64_t v_row_stride, int64_t v_head_stride, float eps,
                            int64_t chunk, float *saved, void *ws, size_t ws_size)
{
    (void)ws_size;
    if (saved)
        chunk_states(saved, phik, v, T, n_h, F2, p, v_row_stride, v_head_stride, chunk);
    double *num = ws; /* [p] */
    for (int64_t h = 0; h < n_h; h++)
        for (int64_t t = 0; t < T; t++) {
            const float *q = phiq + (t * n_h + h) * F2;
            double dn = 0;
            for (int64_t i = 0; i < p; i++)
                num[i] = 0;
            for (int64_t s = 0; s <= t; s++) {
                double a = dot_d(q, phik + (s * n_h + h) * F2, F2);
                const float *vs = v + s * v_row_stride + h * v_head_stride;
                for (int64_t i = 0; i < p; i++)
                    num[i] += a * vs[i];
                dn += a;
            }
            dn += eps;
            for (int64_t i = 0; i < p; i++)
                y[t * n_h * p + h * p + i] = (float)(num[i] / dn);
            if (den)
                den[h * T + t] = (float)dn;
        }
}

/* Per head: gn_t = dy_t / den_t (p), gd_t = −(dy_t · y_t) / den_t; then
 * da_ts = gn_t · v_s + gd_t for s ≤ t, and
 *   dφq_t = Σ_{s≤t} da_ts φk_s,  dφk_s = Σ_{t≥s} da_ts φq_t,
 *   dv_s = Σ_{t≥s} a_ts gn_t.
 * ws (doubles): gn [T, p], gd [T], dφq [F2], dφk [T, F2], dv [T, p]. */
size_t hm_ref_linattn_backward_ws_size(HM_CPU_CTX, int64_t T, int64_t n_h, int64_t F2, int64_t p,
                                       int64_t chunk)
{
    (void)n_h, (void)chunk;
    return sizeof(double) * (size_t)(T * p + T + F2 + T * F2 + T * p);
}

void hm_ref_linattn_backward(HM_CPU_CTX, float *dphiq, float *dphik, float *dv, const float *dy,
                             const float *y, const float *den, const float *phiq,
                             const float *phik, const float *v, int64_t T, int64_t n_h,
                             int64_t F2, int64_t p, int64_t v_row_stride, int64_t v_head_stride,
                             int64_t chunk, const float *saved, void *ws, size_t ws_size)
{
    (void)chunk, (void)saved, (void)ws_size; /* recomputes everything from φ and v */
    double *gn = ws, *gd = gn + T * p, *dq = gd + T, *dk = dq + F2, *dvv = dk + T * F2;
    const int64_t d = n_h * p;
    for (int64_t h = 0; h < n_h; h++) {
        for (int64_t t = 0; t < T; t++) {
            double dn = den[h * T + t], yy = 0;
            for (int64_t i = 0; i < p; i++) {
                gn[t * p + i] = dy[t * d + h * p + i] / dn;
                yy += (double)dy[t * d + h * p + i] * y[t * d + h * p + i];
            }
            gd[t] = -yy / dn;
        }
        memset(dk, 0, sizeof(double) * (size_t)(T * F2));
        memset(dvv, 0, sizeof(double) * (size_t)(T * p));
        for (int64_t t = 0; t < T; t++) {
            const float *q = phiq + (t * n_h + h) * F2;
            memset(dq, 0, sizeof(double) * (size_t)F2);
            for (int64_t s = 0; s <= t; s++) {
                const float *k = phik + (s * n_h + h) * F2;
                const float *vs = v + s * v_row_stride + h * v_head_stride;
                double a = dot_d(q, k, F2), da = gd[t];
                for (int64_t i = 0; i < p; i++) {
                    da += gn[t * p + i] * vs[i];
                    dvv[s * p + i] += a * gn[t * p + i];
                }
                for (int64_t f = 0; f < F2; f++) {
                    dq[f] += da * k[f];
                    dk[s * F2 + f] += da * q[f];
                }
            }
            if (dphiq)
                for (int64_t f = 0; f < F2; f++)
                    dphiq[(t * n_h + h) * F2 + f] = (float)dq[f];
        }
        for (int64_t s = 0; s < T; s++) {
            if (dphik)
                for (int64_t f = 0; f < F2; f++)
                    dphik[(s * n_h + h) * F2 + f] = (float)dk[s * F2 + f];
            if (dv)
                for (int64_t i = 0; i < p; i++)
                    dv[s * v_row_stride + h * v_head_stride + i] = (float)dvv[s * p + i];
        }
    }
}

/* ---- cosine loss ------------------------------------------------------------
 * Σ_t (1 − cos(a_t, b_t)); d/da_t = −(b_t / (|a||b|) − cos · a_t / |a|²).
 * A row where |a_t| = 0 or |b_t| = 0 has no defined cosine: its loss counts
 * as 1 (cos taken as 0) and its gradient is 0. */
void hm_ref_cosine_loss(HM_CPU_CTX, double *loss, float *da, const float *a, const float *b, int64_t N, int64_t d,
                          float scale)
{
    double total = 0;
    for (int64_t t = 0; t < N; t++) {
        const float *ar = a + t * d, *br = b + t * d;
        double aa = dot_d(ar, ar, d), bb = dot_d(br, br, d), ab = dot_d(ar, br, d);
        if (aa == 0 || bb == 0) {
            total += 1;
            if (da)
                for (int64_t i = 0; i < d; i++)
                    da[t * d + i] = 0;
            continue;
        }
        double na = sqrt(aa), nb = sqrt(bb), c = ab / (na * nb);
        total += 1 - c;
        if (da)
            for (int64_t i = 0; i < d; i++)
                da[t * d + i] = (float)(scale * -(br[i] / (na * nb) - c * ar[i] / aa));
    }
    *loss += total;
}
