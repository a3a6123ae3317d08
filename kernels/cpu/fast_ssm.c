/* fast_ssm.c — fast CPU HedgeMamba selective scan (SPEC §3), CHUNKED.
 * Semantics: kernels/backend.h (the conv and pointwise ops live in
 * fast_ssm_ops.c); checked against ref_ssm.c (quadratic form)
 * and hm_backend_ssm_step (token recurrence) by tests/test_ssm.c. No BLAS:
 * every product is a small chunk block, one OpenMP region per call.
 *
 * Chunked scan, per head, chunk c = rows [t0, t0 + L), v̂ = [v; 1] (P1 = p+1
 * columns, the ones channel carries the normalizer):
 *   l_i = Σ_{r=t0..t0+i} Δ_r A  (chunk-local, in double, all ≤ 0, so every
 *         exp(l_i − l_j), j ≤ i, and exp(l_i) is ≤ 1: no overflow at any T;
 *         never a sequence-wide cumulative sum, which cancels — SPEC §3)
 *   M_ij = (C_i·B_j) exp(l_i − l_j) Δ_j  (j ≤ i)                      [L, L]
 *   n_i  = Σ_{j≤i} M_ij v̂_j + exp(l_i) C_i^T S_c                      [P1]
 *   S_c  = state before t0 [F2, P1]; S_{c+1} = exp(l_last) S_c + U_c,
 *   U_c  = Σ_j exp(l_last − l_j) Δ_j B_j v̂_j^T.
 * Three phases in one parallel region: (1) per (head, chunk) U_c; (2) per
 * head the decayed prefix scan over chunks; (3) per (head, chunk) outputs.
 *
 * Backward, ĝ_i = [dy_i / den_i; −dy_i·(y_i − D v_i) / den_i], G_ij = ĝ_i·v̂_j,
 * Y_ij = G_ij exp(l_i − l_j), R_c = gradient reaching the state at the end
 * of chunk c from later rows (reverse decayed scan of
 * V_c = Σ_i exp(l_i) C_i ĝ_i^T: R_{c−1} = V_c + exp(l_last) R_c):
 *   dC_i = Σ_{j≤i} Y_ij Δ_j B_j + exp(l_i) S_c ĝ_i
 *   X_j  = Σ_{i≥j} Y_ij C_i + exp(l_last − l_j) R_c v̂_j,  dB_j = Δ_j X_j
 *   dv_j = Σ_{i≥j} M_ij gn_i + Δ_j exp(l_last − l_j) R_c[:, 0:p]^T B_j + D dy_j
 * and the log-decay gradient ∂L/∂(Δ_r A) = Σ_{s<r≤t} P_ts (P_ts the
 * contribution of the pair) = Σ_{t≥r} (C_t·dC_t − Δ_t B_t·X_t), summed only
 * inside the chunk plus the boundary term <R_c, S_{c+1}> (the pairs that
 * straddle the chunk end), so the cancellation stays chunk-local:
 *   ddt_r = B_r·X_r + A ∂L/∂(Δ_r A),  dA += Σ_r Δ_r ∂L/∂(Δ_r A).
 * Memory: the chunk states n_h · ceil(T/C) · F2 · P1 floats (twice for the
 * backward) plus per-thread C×C blocks — never T×T.
 *
 * Gotchas that have caused bugs:
 *   - y saved by the forward includes D v: subtract it for the normalizer;
 *   - den includes eps; v/dv are strided (only the p v columns are touched);
 *   - the last chunk is short when C does not divide T, and T < C is a
 *     single short chunk;
 *   - the per-chunk dA/dD partials are summed in chunk order after the
 *     parallel region (deterministic, no atomics). */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "cpu_ssm.h"

#define HM_PAR_MIN 32768

static int64_t imin(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t round16(int64_t n) { return (n + 15) / 16 * 16; }

/* ---- chunked selective scan: building blocks -------------------------------- */

static int64_t pick_chunk(int64_t chunk) { return chunk > 0 ? chunk : HM_SSM_CHUNK_DEFAULT; }

/* Workspace: a fixed part (per-(head, chunk) doubles: chunk log-decays, and
 * for the backward the dA and dD partials; then the chunk states, SB floats
 * each, once forward and twice backward) and per-thread scratch:
 *   doubles l [C], e [C], din [C]; floats Vc [C, P1], Gc [C, P1], three
 *   [C, C] blocks, two [F2] rows, two [P1] rows, wt, ep, en [C]. */
struct ssm_layout {
    int64_t C, nc, SB;
    size_t fixed, per;
};

static struct ssm_layout ssm_layout(int64_t T, int64_t n_h, int64_t F2, int64_t p, int64_t chunk,
                                    int back)
{
    struct ssm_layout g;
    const int64_t P1 = p + 1;
    g.C = pick_chunk(chunk);
    g.nc = (T > 0 ? T + g.C - 1 : g.C) / g.C;
    g.SB = round16(F2 * P1);
    size_t nd = (size_t)((back ? 3 : 1) * n_h * g.nc);
    size_t nf = (size_t)((back ? 2 : 1) * n_h * g.nc * g.SB);
    g.fixed = (sizeof(double) * nd + sizeof(float) * nf + 63) / 64 * 64;
    size_t per = sizeof(double) * (size_t)(3 * g.C) +
                 sizeof(float) * (size_t)(2 * g.C * P1 + 3 * g.C * g.C + 2 * F2 + 2 * P1 + 3 * g.C);
    g.per = (per + 63) / 64 * 64;
    return g;
}

static size_t ssm_ws(int64_t T, int64_t n_h, int64_t F2, int64_t p, int64_t chunk, int back)
{
    struct ssm_layout g = ssm_layout(T, n_h, F2, p, chunk, back);
    int nt = omp_get_max_threads();
    return g.fixed + g.per * (size_t)(nt > 0 ? nt : 1);
}

size_t hm_fast_ssm_ws_size(int64_t T, int64_t n_h, int64_t F2, int64_t p, int64_t chunk)
{
    return ssm_ws(T, n_h, F2, p, chunk, 0);
}

size_t hm_fast_ssm_backward_ws_size(int64_t T, int64_t n_h, int64_t F2, int64_t p,
                                    int64_t chunk)
{
    return ssm_ws(T, n_h, F2, p, chunk, 1);
}

/* Threads the workspace allows (precondition: it holds the fixed part and
 * one thread's scratch); 1 for small problems. */
static int ssm_threads(const struct ssm_layout *g, size_t ws_size, int64_t ntask, int64_t work)
{
    int64_t avail = (int64_t)((ws_size - g->fixed) / g->per);
    int nthr = omp_get_max_threads();
    if (avail < nthr)
        nthr = (int)(avail > 0 ? avail : 1);
    if (ntask < nthr)
        nthr = (int)ntask;
    if (work < HM_PAR_MIN)
        nthr = 1;
    return nthr > 0 ? nthr : 1;
}

/* Per-thread scratch views. */
struct ssm_scratch {
    double *l, *e, *din;
    float *Vc, *Gc, *K, *E, *Y, *r1, *r2, *a1, *a2, *wt, *ep, *en;
};

static struct ssm_scratch ssm_scratch(void *base, int64_t C, int64_t F2, int64_t P1)
{
    struct ssm_scratch s;
    s.l = base;
    s.e = s.l + C;
    s.din = s.e + C;
    s.Vc = (float *)(s.din + C);
    s.Gc = s.Vc + C * P1;
    s.K = s.Gc + C * P1;
    s.E = s.K + C * C;
    s.Y = s.E + C * C;
    s.r1 = s.Y + C * C;
    s.r2 = s.r1 + F2;
    s.a1 = s.r2 + F2;
    s.a2 = s.a1 + P1;
    s.wt = s.a2 + P1;
    s.ep = s.wt + C;
    s.en = s.ep + C;
    return s;
}

/* l[i] = Σ_{r≤i} Δ_{t0+r} A_h (chunk-local, double) and the rows v̂. When
 * the chunk's total log-decay is ≥ −80, also ep[i] = exp(l_i) and
 * en[i] = exp(−l_i) (both normal floats: e^80 < FLT_MAX, e^−80 > FLT_MIN),
 * so exp(l_i − l_j) = ep[i] en[j] to a few ulp; returns 1 then, else 0
 * (strong decay: the caller takes exp of each difference). */
static int chunk_prep(double *l, float *ep, float *en, float *Vc, const float *dt, float A,
                      const float *v, int64_t ldv, int64_t vh, int64_t n_h, int64_t p,
                      int64_t h, int64_t t0, int64_t L)
{
    double s = 0;
    for (int64_t i = 0; i < L; i++) {
        s += (double)dt[(t0 + i) * n_h + h] * A;
        l[i] = s;
        memcpy(Vc + i * (p + 1), v + (t0 + i) * ldv + h * vh, sizeof(float) * (size_t)p);
        Vc[i * (p + 1) + p] = 1;
    }
    if (s < -80)
        return 0;
    for (int64_t i = 0; i < L; i++) {
        ep[i] = (float)exp(l[i]);
        en[i] = (float)exp(-l[i]);
    }
    return 1;
}

/* exp(l_i − l_j), j ≤ i (≤ 1). */
static inline float seg_decay(const double *l, const float *ep, const float *en, int fac,
                              int64_t i, int64_t j)
{
    return fac ? ep[i] * en[j] : (float)exp(l[i] - l[j]);
}

/* ĝ_i = [dy_i / den_i; −dy_i·(y_i − D v_i) / den_i] for the chunk's rows. */
static void chunk_ghat(float *Gc, const float *dy, const float *y, const float *den,
                       const float *Vc, float Dh, int64_t T, int64_t n_h, int64_t p, int64_t h,
                       int64_t t0, int64_t L)
{
    for (int64_t i = 0; i < L; i++) {
        const float *dyr = dy + (t0 + i) * n_h * p + h * p, *yr = y + (t0 + i) * n_h * p + h * p;
        const float inv = 1.0f / den[h * T + t0 + i], *vr = Vc + i * (p + 1);
        float *g = Gc + i * (p + 1), s = 0;
        for (int64_t k = 0; k < p; k++) {
            g[k] = dyr[k] * inv;
            s += dyr[k] * (yr[k] - Dh * vr[k]);
        }
        g[p] = -s * inv;
    }
}

/* st[F2, P1] = Σ_j wt_j X_j Y_j^T.   X: [L, F2] rows at ldx; Y: [L, P1]. */
static void outer_sum(float *st, const float *X, int64_t ldx, const float *Y, const float *wt,
                      int64_t L, int64_t F2, int64_t P1)
{
    memset(st, 0, sizeof(float) * (size_t)(F2 * P1));
    for (int64_t j = 0; j < L; j++) {
        const float *xr = X + j * ldx, *yr = Y + j * P1;
        for (int64_t f = 0; f < F2; f++) {
            const float a = wt[j] * xr[f];
            float *o = st + f * P1;
#pragma omp simd
            for (int64_t k = 0; k < P1; k++)
                o[k] += a * yr[k];
        }
    }
}

static inline float dot_f(const float *a, const float *b, int64_t n)
{
    float s = 0;
#pragma omp simd reduction(+ : s)
    for (int64_t i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

/* o[P1] = Σ_f x_f S[f, :]   (S: [F2, P1]) */
static void vec_state(float *o, const float *x, const float *S, int64_t F2, int64_t P1)
{
    memset(o, 0, sizeof(float) * (size_t)P1);
    for (int64_t f = 0; f < F2; f++) {
        const float a = x[f], *sr = S + f * P1;
#pragma omp simd
        for (int64_t k = 0; k < P1; k++)
            o[k] += a * sr[k];
    }
}

/* Decayed scans over the nc chunk blocks of one head (n floats used of SB):
 * dir > 0: block c ← state before chunk c (I_c = e^{L_c} I_{c−1} + U_c, shifted);
 * dir < 0: block c ← gradient from after chunk c (J_c = V_c + e^{L_c} J_{c+1},
 * shifted). */
static void decayed_scan(float *S, const double *Lc, int64_t nc, int64_t SB, int64_t n, int dir)
{
    if (dir > 0) {
        for (int64_t c = 1; c < nc; c++) {
            const float a = (float)exp(Lc[c]), *prev = S + (c - 1) * SB;
            float *cur = S + c * SB;
#pragma omp simd
            for (int64_t e = 0; e < n; e++)
                cur[e] += a * prev[e];
        }
        memmove(S + SB, S, sizeof(float) * (size_t)((nc - 1) * SB));
        memset(S, 0, sizeof(float) * (size_t)SB);
    } else {
        for (int64_t c = nc - 2; c >= 0; c--) {
            const float a = (float)exp(Lc[c]), *next = S + (c + 1) * SB;
            float *cur = S + c * SB;
#pragma omp simd
            for (int64_t e = 0; e < n; e++)
                cur[e] += a * next[e];
        }
        memmove(S, S + SB, sizeof(float) * (size_t)((nc - 1) * SB));
        memset(S + (nc - 1) * SB, 0, sizeof(float) * (size_t)SB);
    }
}

/* ---- chunked selective scan: forward ------------------------------------------- */

void hm_fast_ssm_forward(float *y, float *den, const float *C, const float *B, const float *v,
                         const float *dt, const float *A, const float *D, int64_t T,
                         int64_t n_h, int64_t F2, int64_t p, int64_t v_row_stride,
                         int64_t v_head_stride, float eps, int64_t chunk, void *ws,
                         size_t ws_size)
{
    if (T <= 0 || n_h <= 0 || p <= 0 || F2 <= 0)
        return;
    const struct ssm_layout g = ssm_layout(T, n_h, F2, p, chunk, 0);
    const int64_t Cs = g.C, nc = g.nc, SB = g.SB, P1 = p + 1, ntask = n_h * nc, ldq = n_h * F2;
    const int64_t ldv = v_row_stride, vh = v_head_stride;
    double *Lc = ws;
    float *St = (float *)(Lc + ntask);
    char *scr = (char *)ws + g.fixed;
    int nthr = ssm_threads(&g, ws_size, ntask, T * n_h * F2 * p);
#pragma omp parallel num_threads(nthr)
    {
        struct ssm_scratch s = ssm_scratch(scr + (size_t)omp_get_thread_num() * g.per, Cs, F2, P1);
#pragma omp for schedule(static)
        for (int64_t task = 0; task < ntask; task++) { /* (1) U_c */
            int64_t h = task / nc, t0 = task % nc * Cs, L = imin(Cs, T - t0);
            chunk_prep(s.l, s.ep, s.en, s.Vc, dt, A[h], v, ldv, vh, n_h, p, h, t0, L);
            for (int64_t j = 0; j < L; j++)
                s.wt[j] = (float)exp(s.l[L - 1] - s.l[j]) * dt[(t0 + j) * n_h + h];
            outer_sum(St + task * SB, B + (t0 * n_h + h) * F2, ldq, s.Vc, s.wt, L, F2, P1);
            Lc[task] = s.l[L - 1];
        }
#pragma omp for schedule(static)
        for (int64_t h = 0; h < n_h; h++) /* (2) carried-in states */
            decayed_scan(St + h * nc * SB, Lc + h * nc, nc, SB, F2 * P1, +1);
#pragma omp for schedule(dynamic, 1)
        for (int64_t task = 0; task < ntask; task++) { /* (3) outputs */
            int64_t h = task / nc, t0 = task % nc * Cs, L = imin(Cs, T - t0);
            const float *Sc = St + task * SB, Dh = D[h];
            const int fac =
                chunk_prep(s.l, s.ep, s.en, s.Vc, dt, A[h], v, ldv, vh, n_h, p, h, t0, L);
            for (int64_t i = 0; i < L; i++) {
                const float *ci = C + ((t0 + i) * n_h + h) * F2;
                float *acc = s.a1, *mrow = s.K;
                vec_state(acc, ci, Sc, F2, P1); /* exp(l_i) C_i^T S_c */
                const float ei = (float)exp(s.l[i]);
                for (int64_t j = 0; j <= i; j++)
                    mrow[j] = dot_f(ci, B + ((t0 + j) * n_h + h) * F2, F2) *
                              seg_decay(s.l, s.ep, s.en, fac, i, j) * dt[(t0 + j) * n_h + h];
#pragma omp simd
                for (int64_t k = 0; k < P1; k++)
                    acc[k] *= ei;
                for (int64_t j = 0; j <= i; j++) { /* Σ_{j≤i} M_ij v̂_j */
                    const float m = mrow[j], *vr = s.Vc + j * P1;
#pragma omp simd
                    for (int64_t k = 0; k < P1; k++)
                        acc[k] += m * vr[k];
                }
                const float dn = acc[p] + eps, inv = 1.0f / dn, *vi = s.Vc + i * P1;
                float *yr = y + (t0 + i) * n_h * p + h * p;
                for (int64_t k = 0; k < p; k++)
                    yr[k] = acc[k] * inv + Dh * vi[k];
                if (den)
                    den[h * T + t0 + i] = dn;
            }
        }
    }
}

/* ---- chunked selective scan: backward ------------------------------------------ */

/* Phase 3 of the backward for head h, rows [t0, t0 + L): Sc is the state
 * before t0, Rc the gradient reaching the state at t0 + L − 1 from later
 * rows, Sn the state at t0 + L − 1 (NULL for the last chunk, where Rc = 0).
 * Writes dC, dB, dv, ddt rows (each may be NULL) and the chunk's dA and dD
 * partials. */
static void bwd_chunk(float *dC, float *dB, float *dv, float *ddt, double *pA, double *pD,
                      const float *dy, const float *y, const float *den, const float *C,
                      const float *B, const float *v, const float *dt, float Ah, float Dh,
                      int64_t T, int64_t n_h, int64_t F2, int64_t p, int64_t ldv, int64_t vh,
                      int64_t h, int64_t t0, int64_t L, int64_t Cs, const float *Sc,
                      const float *Rc, const float *Sn, struct ssm_scratch *s)
{
    const int64_t P1 = p + 1, ldq = n_h * F2;
    const float *Ch = C + (t0 * n_h + h) * F2, *Bh = B + (t0 * n_h + h) * F2;
    const int fac =
        chunk_prep(s->l, s->ep, s->en, s->Vc, dt, Ah, v, ldv, vh, n_h, p, h, t0, L);
    chunk_ghat(s->Gc, dy, y, den, s->Vc, Dh, T, n_h, p, h, t0, L);
    const double llast = s->l[L - 1];
    /* K_ij ← M_ij = (C_i·B_j) e_ij Δ_j,  Y_ij = (ĝ_i·v̂_j) e_ij  (j ≤ i) */
    for (int64_t i = 0; i < L; i++)
        for (int64_t j = 0; j <= i; j++) {
            const float e = seg_decay(s->l, s->ep, s->en, fac, i, j);
            s->K[i * Cs + j] = dot_f(Ch + i * ldq, Bh + j * ldq, F2) * e * dt[(t0 + j) * n_h + h];
            s->Y[i * Cs + j] = dot_f(s->Gc + i * P1, s->Vc + j * P1, P1) * e;
        }
    /* dC_i = exp(l_i) S_c ĝ_i + Σ_{j≤i} Y_ij Δ_j B_j;  e_i = C_i·dC_i */
    for (int64_t i = 0; i < L; i++) {
        float *row = s->r1;
        const float ei = (float)exp(s->l[i]), *gi = s->Gc + i * P1;
        for (int64_t f = 0; f < F2; f++)
            row[f] = ei * dot_f(Sc + f * P1, gi, P1);
        for (int64_t j = 0; j <= i; j++) {
            const float a = s->Y[i * Cs + j] * dt[(t0 + j) * n_h + h], *bj = Bh + j * ldq;
#pragma omp simd
            for (int64_t f = 0; f < F2; f++)
                row[f] += a * bj[f];
        }
        s->e[i] = dot_f(Ch + i * ldq, row, F2);
        if (dC)
            memcpy(dC + ((t0 + i) * n_h + h) * F2, row, sizeof(float) * (size_t)F2);
    }
    /* X_j = exp(l_last − l_j) R_c v̂_j + Σ_{i≥j} Y_ij C_i;  dB_j = Δ_j X_j;
     * din_j = B_j·X_j;  e_j −= Δ_j din_j;
     * dv_j = Σ_{i≥j} M_ij gn_i + Δ_j exp(l_last − l_j) R_c[:, 0:p]^T B_j + D dy_j */
    for (int64_t j = 0; j < L; j++) {
        float *X = s->r2, *acc = s->a1;
        const float ej = (float)exp(llast - s->l[j]), dj = dt[(t0 + j) * n_h + h];
        const float *bj = Bh + j * ldq, *vj = s->Vc + j * P1;
        for (int64_t f = 0; f < F2; f++)
            X[f] = ej * dot_f(Rc + f * P1, vj, P1);
        for (int64_t i = j; i < L; i++) {
            const float a = s->Y[i * Cs + j], *ci = Ch + i * ldq;
#pragma omp simd
            for (int64_t f = 0; f < F2; f++)
                X[f] += a * ci[f];
        }
        const float din = dot_f(bj, X, F2);
        s->din[j] = din;
        s->e[j] -= (double)dj * din;
        if (dB) {
            float *o = dB + ((t0 + j) * n_h + h) * F2;
#pragma omp simd
            for (int64_t f = 0; f < F2; f++)
                o[f] = dj * X[f];
        }
        if (dv) {
            vec_state(acc, bj, Rc, F2, P1);
            const float sc = dj * ej;
            const float *dyr = dy + (t0 + j) * n_h * p + h * p;
#pragma omp simd
            for (int64_t k = 0; k < p; k++)
                acc[k] = sc * acc[k] + Dh * dyr[k];
            for (int64_t i = j; i < L; i++) {
                const float m = s->K[i * Cs + j], *gi = s->Gc + i * P1;
#pragma omp simd
                for (int64_t k = 0; k < p; k++)
                    acc[k] += m * gi[k];
            }
            memcpy(dv + (t0 + j) * ldv + h * vh, acc, sizeof(float) * (size_t)p);
        }
    }
    /* ∂L/∂(Δ_r A) = Σ_{t≥r in chunk} e_t + <R_c, S_next> */
    double suf = 0, a = 0, dd = 0;
    if (Sn)
        for (int64_t q = 0; q < F2 * P1; q++)
            suf += (double)Rc[q] * Sn[q];
    for (int64_t r = L - 1; r >= 0; r--) {
        suf += s->e[r];
        const double dr = dt[(t0 + r) * n_h + h];
        if (ddt)
            ddt[(t0 + r) * n_h + h] = (float)(s->din[r] + (double)Ah * suf);
        a += dr * suf;
        const float *dyr = dy + (t0 + r) * n_h * p + h * p, *vr = s->Vc + r * P1;
        for (int64_t k = 0; k < p; k++)
            dd += (double)dyr[k] * vr[k];
    }
    *pA = a;
    *pD = dd;
}

void hm_fast_ssm_backward(float *dC, float *dB, float *dv, float *ddt, float *dA, float *dD,
                          const float *dy, const float *y, const float *den, const float *C,
                          const float *B, const float *v, const float *dt, const float *A,
                          const float *D, int64_t T, int64_t n_h, int64_t F2, int64_t p,
                          int64_t v_row_stride, int64_t v_head_stride, int64_t chunk, void *ws,
                          size_t ws_size)
{
    if (T <= 0 || n_h <= 0 || p <= 0 || F2 <= 0)
        return;
    const struct ssm_layout g = ssm_layout(T, n_h, F2, p, chunk, 1);
    const int64_t Cs = g.C, nc = g.nc, SB = g.SB, P1 = p + 1, ntask = n_h * nc, ldq = n_h * F2;
    const int64_t ldv = v_row_stride, vh = v_head_stride;
    double *Lc = ws, *pA = Lc + ntask, *pD = pA + ntask;
    float *St = (float *)(pD + ntask), *Rt = St + ntask * SB;
    char *scr = (char *)ws + g.fixed;
    int nthr = ssm_threads(&g, ws_size, ntask, T * n_h * F2 * p);
#pragma omp parallel num_threads(nthr)
    {
        struct ssm_scratch s = ssm_scratch(scr + (size_t)omp_get_thread_num() * g.per, Cs, F2, P1);
#pragma omp for schedule(static)
        for (int64_t task = 0; task < ntask; task++) { /* (1) U_c and V_c */
            int64_t h = task / nc, t0 = task % nc * Cs, L = imin(Cs, T - t0);
            chunk_prep(s.l, s.ep, s.en, s.Vc, dt, A[h], v, ldv, vh, n_h, p, h, t0, L);
            chunk_ghat(s.Gc, dy, y, den, s.Vc, D[h], T, n_h, p, h, t0, L);
            for (int64_t j = 0; j < L; j++)
                s.wt[j] = (float)exp(s.l[L - 1] - s.l[j]) * dt[(t0 + j) * n_h + h];
            outer_sum(St + task * SB, B + (t0 * n_h + h) * F2, ldq, s.Vc, s.wt, L, F2, P1);
            for (int64_t j = 0; j < L; j++)
                s.wt[j] = (float)exp(s.l[j]);
            outer_sum(Rt + task * SB, C + (t0 * n_h + h) * F2, ldq, s.Gc, s.wt, L, F2, P1);
            Lc[task] = s.l[L - 1];
        }
#pragma omp for schedule(static)
        for (int64_t h = 0; h < n_h; h++) { /* (2) carried-in and carried-back states */
            decayed_scan(St + h * nc * SB, Lc + h * nc, nc, SB, F2 * P1, +1);
            decayed_scan(Rt + h * nc * SB, Lc + h * nc, nc, SB, F2 * P1, -1);
        }
#pragma omp for schedule(dynamic, 1)
        for (int64_t task = 0; task < ntask; task++) { /* (3) gradients */
            int64_t h = task / nc, c = task % nc, t0 = c * Cs, L = imin(Cs, T - t0);
            bwd_chunk(dC, dB, dv, ddt, pA + task, pD + task, dy, y, den, C, B, v, dt, A[h], D[h],
                      T, n_h, F2, p, ldv, vh, h, t0, L, Cs, St + task * SB, Rt + task * SB,
                      c + 1 < nc ? St + (task + 1) * SB : NULL, &s);
        }
    }
    for (int64_t h = 0; h < n_h; h++) { /* partials in chunk order: deterministic */
        double a = 0, dd = 0;
        for (int64_t c = 0; c < nc; c++) {
            a += pA[h * nc + c];
            dd += pD[h * nc + c];
        }
        if (dA)
            dA[h] += (float)a;
        if (dD)
            dD[h] += (float)dd;
    }
}
