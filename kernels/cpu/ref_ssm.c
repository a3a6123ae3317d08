/* ref_ssm.c — plain-loop HedgeMamba mixer ops (contract §3): causal depthwise
 * conv, softplus, SiLU gate, the selective scan with the ones channel, and
 * the one-token (generation) steps. The oracle for fast_ssm.c; written for
 * clarity with double accumulation; checked against central finite
 * differences by tests/test_ssm.c.
 *
 * The scan is written in its quadratic (masked) form per head,
 *   n_t = Σ_{s≤t} (C_t·B_s) w_ts v̂_s,  w_ts = Δ_s exp(A Σ_{r=s+1..t} Δ_r),
 * v̂_s = [v_s; 1], with the segment sum Σ_{r=s+1..t} Δ_r accumulated directly
 * while s walks down from t (O(T²) time, O(T) memory). Its backward adds the
 * decay gradient of every segment to each r inside it (a prefix sum over s
 * per row t), independently of the rowsum − colsum identity fast_ssm.c uses.
 *
 * Gotchas that have caused bugs:
 *   - never exp(L_t − L_s) from a sequence-wide cumulative sum L: in fp32 it
 *     cancels (contract §3); sum each segment directly (here) or chunk-locally;
 *   - the saved y includes the skip D v: the normalizer gradient needs
 *     y − D v (the normalized part only);
 *   - den saved by the forward includes eps (do not add it twice);
 *   - v/dv are strided views of the fused qkv: only the p v columns of each
 *     head are read or written. */
#include <math.h>
#include <string.h>

#include "cpu_ssm.h"

/* ---- causal depthwise conv ------------------------------------------------ */

void hm_ref_conv1d_forward(HM_CPU_CTX, float *c, const float *x, const float *w, const float *bias,
                           int64_t T, int64_t C, int64_t K)
{
    for (int64_t t = 0; t < T; t++)
        for (int64_t ch = 0; ch < C; ch++) {
            double s = bias ? bias[ch] : 0;
            for (int64_t k = 0; k < K; k++) {
                int64_t src = t - (K - 1) + k;
                if (src >= 0)
                    s += (double)w[ch * K + k] * x[src * C + ch];
            }
            c[t * C + ch] = (float)s;
        }
}

void hm_ref_conv1d_backward(HM_CPU_CTX, float *dx, float *dw, float *dbias, const float *dc, const float *x,
                            const float *w, int64_t T, int64_t C, int64_t K)
{
    for (int64_t ch = 0; ch < C; ch++) {
        if (dx) /* dx[s] = Σ_k w[k] dc[s + K − 1 − k] */
            for (int64_t s = 0; s < T; s++) {
                double g = 0;
                for (int64_t k = 0; k < K; k++) {
                    int64_t t = s + (K - 1) - k;
                    if (t < T)
                        g += (double)w[ch * K + k] * dc[t * C + ch];
                }
                dx[s * C + ch] = (float)g;
            }
        if (dw)
            for (int64_t k = 0; k < K; k++) {
                double g = 0;
                for (int64_t t = 0; t < T; t++) {
                    int64_t src = t - (K - 1) + k;
                    if (src >= 0)
                        g += (double)dc[t * C + ch] * x[src * C + ch];
                }
                dw[ch * K + k] += (float)g;
            }
        if (dbias) {
            double g = 0;
            for (int64_t t = 0; t < T; t++)
                g += dc[t * C + ch];
            dbias[ch] += (float)g;
        }
    }
}

void hm_ref_conv1d_step(HM_CPU_CTX, float *c_t, const float *x_t, float *window, const float *w,
                        const float *bias, int64_t C, int64_t K)
{
    for (int64_t ch = 0; ch < C; ch++) {
        double s = bias ? bias[ch] : 0;
        for (int64_t k = 0; k < K - 1; k++)
            s += (double)w[ch * K + k] * window[k * C + ch];
        s += (double)w[ch * K + K - 1] * x_t[ch];
        c_t[ch] = (float)s;
    }
    if (K > 1) { /* shift the window by one token, x_t enters last */
        memmove(window, window + C, sizeof(float) * (size_t)((K - 2) * C));
        memcpy(window + (K - 2) * C, x_t, sizeof(float) * (size_t)C);
    }
}

/* ---- pointwise ---------------------------------------------------------------- */

static double sigmoid_d(double z)
{
    if (z >= 0)
        return 1 / (1 + exp(-z));
    double e = exp(z);
    return e / (1 + e);
}

void hm_ref_softplus_forward(HM_CPU_CTX, float *y, const float *z, int64_t n)
{
    for (int64_t i = 0; i < n; i++) { /* max(z, 0) + log1p(exp(−|z|)): no overflow */
        double x = z[i];
        y[i] = (float)((x > 0 ? x : 0) + log1p(exp(-fabs(x))));
    }
}

void hm_ref_softplus_backward(HM_CPU_CTX, float *dz, const float *dy, const float *z, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        dz[i] = (float)((double)dy[i] * sigmoid_d(z[i]));
}

void hm_ref_silu_gate_forward(HM_CPU_CTX, float *out, const float *y, const float *z, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        out[i] = (float)((double)y[i] * z[i] * sigmoid_d(z[i]));
}

void hm_ref_silu_gate_backward(HM_CPU_CTX, float *dy, float *dz, const float *dout, const float *y,
                               const float *z, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        double g = dout[i], zz = z[i], sg = sigmoid_d(zz), yy = y[i];
        if (dy)
            dy[i] = (float)(g * zz * sg);
        if (dz)
            dz[i] = (float)(g * yy * sg * (1 + zz * (1 - sg)));
    }
}

/* ---- selective scan (quadratic form) ---------------------------------------- */

static double dot_d(const float *a, const float *b, int64_t n)
{
    double s = 0;
    for (int64_t i = 0; i < n; i++)
        s += (double)a[i] * b[i];
    return s;
}

size_t hm_ref_ssm_ws_size(HM_CPU_CTX, int64_t T, int64_t n_h, int64_t F2, int64_t p, int64_t chunk)
{
    (void)T, (void)n_h, (void)F2, (void)chunk;
    return sizeof(double) * (size_t)(p + 1); /* the numerator of one row */
}

void hm_ref_ssm_forward(HM_CPU_CTX, float *y, float *den, const float *C, const float *B, const float *v,
                        const float *dt, const float *A, const float *D, int64_t T, int64_t n_h,
                        int64_t F2, int64_t p, int64_t v_row_stride, int64_t v_head_stride,
                        float eps, int64_t chunk, void *ws, size_t ws_size)
{
    (void)chunk, (void)ws_size;
    double *num = ws; /* [p + 1] */
    for (int64_t h = 0; h < n_h; h++)
        for (int64_t t = 0; t < T; t++) {
            const float *c = C + (t * n_h + h) * F2;
            memset(num, 0, sizeof(double) * (size_t)(p + 1));
            double seg = 0; /* Σ_{r=s+1..t} Δ_r A, summed directly */
            for (int64_t s = t; s >= 0; s--) {
                if (s < t)
                    seg += (double)dt[(s + 1) * n_h + h] * A[h];
                double a = dot_d(c, B + (s * n_h + h) * F2, F2) * exp(seg) * dt[s * n_h + h];
                const float *vs = v + s * v_row_stride + h * v_head_stride;
                for (int64_t i = 0; i < p; i++)
                    num[i] += a * vs[i];
                num[p] += a;
            }
            double dn = num[p] + eps;
            const float *vt = v + t * v_row_stride + h * v_head_stride;
            for (int64_t i = 0; i < p; i++)
                y[t * n_h * p + h * p + i] = (float)(num[i] / dn + (double)D[h] * vt[i]);
            if (den)
                den[h * T + t] = (float)dn;
        }
}

/* Per head, with gn_t = dy_t / den_t, gd_t = −dy_t·(y_t − D v_t) / den_t,
 * G_ts = gn_t·v_s + gd_t, K_ts = C_t·B_s, e_ts = exp(A Σ_{r=s+1..t} Δ_r),
 * P_ts = G_ts K_ts e_ts Δ_s:
 *   dC_t = Σ_s G_ts e_ts Δ_s B_s,   dB_s = Σ_t G_ts e_ts Δ_s C_t,
 *   dv_s = Σ_t K_ts e_ts Δ_s gn_t + D dy_s,
 *   ∂L/∂(Δ_r A) = Σ_{s<r≤t} P_ts =: a_r,
 *   ddt_r = Σ_t G_tr K_tr e_tr + A a_r,  dA += Σ_r Δ_r a_r,  dD += Σ_t dy_t·v_t.
 * ws (doubles): gn [T, p], gd [T], P [T], dB [T, F2], dv [T, p], a [T],
 * din [T], dC [F2]. */
size_t hm_ref_ssm_backward_ws_size(HM_CPU_CTX, int64_t T, int64_t n_h, int64_t F2, int64_t p,
                                   int64_t chunk)
{
    (void)n_h, (void)chunk;
    return sizeof(double) * (size_t)(T * (2 * p + F2 + 4) + F2);
}

void hm_ref_ssm_backward(HM_CPU_CTX, float *dC, float *dB, float *dv, float *ddt, float *dA, float *dD,
                         const float *dy, const float *y, const float *den, const float *C,
                         const float *B, const float *v, const float *dt, const float *A,
                         const float *D, int64_t T, int64_t n_h, int64_t F2, int64_t p,
                         int64_t v_row_stride, int64_t v_head_stride, int64_t chunk, void *ws,
                         size_t ws_size)
{
    (void)chunk, (void)ws_size;
    double *gn = ws, *gd = gn + T * p, *P = gd + T, *dBd = P + T, *dvd = dBd + T * F2;
    double *da = dvd + T * p, *din = da + T, *dc = din + T;
    const int64_t d = n_h * p;
    for (int64_t h = 0; h < n_h; h++) {
        const double Ah = A[h], Dh = D[h];
        double dDh = 0;
        for (int64_t t = 0; t < T; t++) {
            const float *vt = v + t * v_row_stride + h * v_head_stride;
            double dn = den[h * T + t], yy = 0;
            for (int64_t i = 0; i < p; i++) {
                double g = dy[t * d + h * p + i];
                gn[t * p + i] = g / dn;
                yy += g * ((double)y[t * d + h * p + i] - Dh * vt[i]);
                dDh += g * vt[i];
            }
            gd[t] = -yy / dn;
        }
        memset(dBd, 0, sizeof(double) * (size_t)(T * F2));
        memset(dvd, 0, sizeof(double) * (size_t)(T * p));
        memset(da, 0, sizeof(double) * (size_t)T);
        memset(din, 0, sizeof(double) * (size_t)T);
        for (int64_t t = 0; t < T; t++) {
            const float *c = C + (t * n_h + h) * F2;
            memset(dc, 0, sizeof(double) * (size_t)F2);
            double seg = 0;
            for (int64_t s = t; s >= 0; s--) {
                if (s < t)
                    seg += (double)dt[(s + 1) * n_h + h] * Ah;
                const float *b = B + (s * n_h + h) * F2;
                const float *vs = v + s * v_row_stride + h * v_head_stride;
                double e = exp(seg), ds = dt[s * n_h + h], K = dot_d(c, b, F2), G = gd[t];
                for (int64_t i = 0; i < p; i++)
                    G += gn[t * p + i] * vs[i];
                for (int64_t f = 0; f < F2; f++) {
                    dc[f] += G * e * ds * b[f];
                    dBd[s * F2 + f] += G * e * ds * c[f];
                }
                for (int64_t i = 0; i < p; i++)
                    dvd[s * p + i] += K * e * ds * gn[t * p + i];
                din[s] += G * K * e;
                P[s] = G * K * e * ds;
            }
            double pre = 0; /* a_r += Σ_{s<r} P_ts for r ≤ t */
            for (int64_t r = 1; r <= t; r++) {
                pre += P[r - 1];
                da[r] += pre;
            }
            if (dC)
                for (int64_t f = 0; f < F2; f++)
                    dC[(t * n_h + h) * F2 + f] = (float)dc[f];
        }
        double dAh = 0;
        for (int64_t s = 0; s < T; s++) {
            if (dB)
                for (int64_t f = 0; f < F2; f++)
                    dB[(s * n_h + h) * F2 + f] = (float)dBd[s * F2 + f];
            if (dv)
                for (int64_t i = 0; i < p; i++)
                    dv[s * v_row_stride + h * v_head_stride + i] =
                        (float)(dvd[s * p + i] + Dh * dy[s * d + h * p + i]);
            if (ddt)
                ddt[s * n_h + h] = (float)(din[s] + Ah * da[s]);
            dAh += (double)dt[s * n_h + h] * da[s];
        }
        if (dA)
            dA[h] += (float)dAh;
        if (dD)
            dD[h] += (float)dDh;
    }
}

/* ---- recurrent form (generation) -------------------------------------------
 * S_h ← α S_h + Δ B [v; 1]^T, n = C^T S_h, α = exp(Δ A_h): fp32, constant
 * memory, the same for every backend. */
/* Per head h, with α_r = exp(Δ_r A_h) and decay_t = Π_{r≤t} α_r (a running
 * product in double, local to the chunk: no differences of cumulative sums):
 *   n0_t = decay_t · C_t^T S                      (the carried state's share)
 *   num_t = (y_t − D v_t) · den_t + n0_t[0:p],    den_t ← den_t + n0_t[p]
 *   y_t ← num_t / den_t + D v_t
 *   S ← decay_{T−1} S + Σ_s (Δ_s Π_{u>s} α_u) B_s [v_s; 1]^T
 * dt, A NULL: Δ = 1, A = 0 (hedgehog); D NULL: 0. */
void hm_ref_ssm_chunk_carry(HM_CPU_CTX, float *y, float *den, const float *C, const float *B,
                            const float *v, const float *dt, const float *A, const float *D,
                            float *S, int64_t T, int64_t n_h, int64_t F2, int64_t p,
                            int64_t v_row_stride, int64_t v_head_stride)
{
    const int64_t P1 = p + 1;
    for (int64_t h = 0; h < n_h; h++) {
        float *Sh = S + h * F2 * P1;
        const double Ah = A ? A[h] : 0.0, Dh = D ? D[h] : 0.0;
        double decay = 1;
        for (int64_t t = 0; t < T; t++) {
            const double dtt = dt ? dt[t * n_h + h] : 1.0;
            decay *= exp(dtt * Ah);
            const float *c = C + (t * n_h + h) * F2;
            const float *vt = v + t * v_row_stride + h * v_head_stride;
            float *yt = y + t * n_h * p + h * p;
            double n0p = 0;
            for (int64_t f = 0; f < F2; f++)
                n0p += (double)c[f] * Sh[f * P1 + p];
            const double dl = den[h * T + t], dn = dl + decay * n0p;
            for (int64_t i = 0; i < p; i++) {
                double n0 = 0;
                for (int64_t f = 0; f < F2; f++)
                    n0 += (double)c[f] * Sh[f * P1 + i];
                const double num = ((double)yt[i] - Dh * vt[i]) * dl + decay * n0;
                yt[i] = (float)(num / dn + Dh * vt[i]);
            }
            den[h * T + t] = (float)dn;
        }
        /* the state after the chunk: weights from the end, products only */
        for (int64_t k = 0; k < F2 * P1; k++)
            Sh[k] = (float)(decay * Sh[k]);
        double w_after = 1; /* Π_{u>s} α_u */
        for (int64_t s = T - 1; s >= 0; s--) {
            const double dts = dt ? dt[s * n_h + h] : 1.0;
            const double w = dts * w_after;
            const float *b = B + (s * n_h + h) * F2;
            const float *vs = v + s * v_row_stride + h * v_head_stride;
            for (int64_t f = 0; f < F2; f++) {
                float *row = Sh + f * P1;
                const double bf = w * b[f];
                for (int64_t i = 0; i < p; i++)
                    row[i] = (float)(row[i] + bf * vs[i]);
                row[p] = (float)(row[p] + bf);
            }
            w_after *= exp(dts * Ah);
        }
    }
}

void hm_ref_ssm_step(HM_CPU_CTX, float *y_t, float *S, const float *C_t, const float *B_t, const float *v_t,
                     const float *dt_t, const float *A, const float *D, int64_t n_h, int64_t F2,
                     int64_t p, float eps)
{
    const int64_t P1 = p + 1;
    for (int64_t h = 0; h < n_h; h++) {
        float *Sh = S + h * F2 * P1;
        const float *b = B_t + h * F2, *c = C_t + h * F2, *vh = v_t + h * p;
        const float ds = dt_t[h], al = expf(ds * A[h]);
        for (int64_t f = 0; f < F2; f++) {
            float *row = Sh + f * P1;
            const float bf = ds * b[f];
            for (int64_t i = 0; i < p; i++)
                row[i] = al * row[i] + bf * vh[i];
            row[p] = al * row[p] + bf;
        }
        double dn = eps;
        for (int64_t f = 0; f < F2; f++)
            dn += (double)c[f] * Sh[f * P1 + p];
        for (int64_t i = 0; i < p; i++) {
            double nu = 0;
            for (int64_t f = 0; f < F2; f++)
                nu += (double)c[f] * Sh[f * P1 + i];
            y_t[h * p + i] = (float)(nu / dn + (double)D[h] * vh[i]);
        }
    }
}
