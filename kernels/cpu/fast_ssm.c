/* fast_ssm.c — fast CPU HedgeMamba selective scan (contract §3), CHUNKED.
 * Semantics: kernels/backend.h (the conv and pointwise ops live in
 * fast_ssm_ops.c); checked against ref_ssm.c (quadratic form)
 * and hm_backend_ssm_step (token recurrence) by tests/test_ssm.c. No BLAS:
 * every product is a small chunk block, one OpenMP region per call.
 *
 * Chunked scan, per head, chunk c = rows [t0, t0 + L), v̂ = [v; 1] (P1 = p+1
 * columns, the ones channel carries the normalizer):
 *   l_i = Σ_{r=t0..t0+i} Δ_r A  (chunk-local, in double, all ≤ 0, so every
 *         exp(l_i − l_j), j ≤ i, and exp(l_i) is ≤ 1: no overflow at any T;
 *         never a sequence-wide cumulative sum, which cancels — contract §3)
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
 * Every product is a register-tile GEMM of cpu_tiles.h (shared with
 * fast_linattn.c): the raw scores C_c B_c^T and Ĝ_c V̂_c^T are pure tiles and
 * the decays are applied afterwards to the [L, L] block, as row/column
 * scalings exp(l_i)·exp(−l_j) (both normal floats, their product ≤ 1) when
 * the chunk's total log-decay is ≥ −80, else as exp(l_i − l_j) per element
 * (strong decay; still chunk-local). The chunk states, carried-in terms and
 * the P·V̂-type products are tiles over scaled row copies. The backward
 * keeps its chunk states transposed, [P1, F2] (what dC and X multiply by,
 * no transposes per chunk); dv is formed as dv^T [p, L] against B_c^T.
 * U of the last chunk and V of the first are never used: not computed.
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

#include "cpu_simd.h"
#include "cpu_ssm.h"
#include "cpu_tiles.h"

#define HM_PAR_MIN 32768

static int64_t imin(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t imax(int64_t a, int64_t b) { return a > b ? a : b; }
static int64_t round16(int64_t n) { return (n + 15) / 16 * 16; }

/* ---- chunked selective scan: building blocks -------------------------------- */

static int64_t pick_chunk(int64_t chunk) { return chunk > 0 ? chunk : HM_SSM_CHUNK_DEFAULT; }

/* Workspace: a fixed part (per-(head, chunk) doubles: chunk log-decays, and
 * for the backward the dA and dD partials; then the chunk states, SB floats
 * each, once forward and twice backward) and per-thread scratch (CP =
 * round16(C), W = max(F2, P1)):
 *   doubles l, e, din [C]; floats Vc, Gc, Nm [C, P1], Kt [F2, CP],
 *   Vt [P1, CP], K, Y [C, CP], Sw [C, W], Dt [P1, CP], Dc, X [C, F2],
 *   ep, en, ei, wt, dtc [C], and Pc [C, F2] (a chunk's C or B rows packed:
 *   4 KB apart in [T, n_h, F2], a tile GEMM walking them down a column
 *   maps every row to one L1 set and runs at a quarter of its speed). */
struct ssm_layout {
    int64_t C, nc, SB;
    size_t fixed, per;
};

static int64_t scratch_floats(int64_t C, int64_t F2, int64_t P1)
{
    const int64_t CP = round16(C), W = imax(F2, P1);
    return 3 * C * P1 + F2 * CP + 2 * P1 * CP + 2 * C * CP + C * W + 3 * C * F2 + 5 * C;
}

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
                 sizeof(float) * (size_t)scratch_floats(g.C, F2, P1);
    g.per = (per + 63) / 64 * 64;
    return g;
}

static size_t ssm_ws(int64_t T, int64_t n_h, int64_t F2, int64_t p, int64_t chunk, int back)
{
    struct ssm_layout g = ssm_layout(T, n_h, F2, p, chunk, back);
    int nt = omp_get_max_threads();
    return g.fixed + g.per * (size_t)(nt > 0 ? nt : 1);
}

size_t hm_fast_ssm_ws_size(HM_CPU_CTX, int64_t T, int64_t n_h, int64_t F2, int64_t p, int64_t chunk)
{
    return ssm_ws(T, n_h, F2, p, chunk, 0);
}

size_t hm_fast_ssm_backward_ws_size(HM_CPU_CTX, int64_t T, int64_t n_h, int64_t F2, int64_t p,
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
    float *Vc, *Gc, *Nm, *Kt, *Vt, *K, *Y, *Sw, *Dt, *Dc, *X, *ep, *en, *ei, *wt, *dtc, *Pc;
};

static struct ssm_scratch ssm_scratch(void *base, int64_t C, int64_t F2, int64_t P1)
{
    struct ssm_scratch s;
    const int64_t CP = round16(C), W = imax(F2, P1);
    s.l = base;
    s.e = s.l + C;
    s.din = s.e + C;
    s.Vc = (float *)(s.din + C);
    s.Gc = s.Vc + C * P1;
    s.Nm = s.Gc + C * P1;
    s.Kt = s.Nm + C * P1;
    s.Vt = s.Kt + F2 * CP;
    s.K = s.Vt + P1 * CP;
    s.Y = s.K + C * CP;
    s.Sw = s.Y + C * CP;
    s.Dt = s.Sw + C * W;
    s.Dc = s.Dt + P1 * CP;
    s.X = s.Dc + C * F2;
    s.ep = s.X + C * F2;
    s.en = s.ep + C;
    s.ei = s.en + C;
    s.wt = s.ei + C;
    s.dtc = s.wt + C;
    s.Pc = s.dtc + C;
    return s;
}

/* l[i] = Σ_{r≤i} Δ_{t0+r} A_h (chunk-local, double), ei[i] = exp(l_i),
 * dtc[i] = Δ_{t0+i} and the rows v̂. When the chunk's total log-decay is
 * ≥ −80, also ep[i] = exp(l_i) and en[i] = exp(−l_i) (both normal floats:
 * e^80 < FLT_MAX, e^−80 > FLT_MIN), so exp(l_i − l_j) = ep[i] en[j] to a few
 * ulp; returns 1 then, else 0 (strong decay: exp of each difference). */
static int chunk_prep(struct ssm_scratch *s, const float *dt, float A, const float *v,
                      int64_t ldv, int64_t vh, int64_t n_h, int64_t p, int64_t h, int64_t t0,
                      int64_t L)
{
    double acc = 0;
    for (int64_t i = 0; i < L; i++) {
        s->dtc[i] = dt[(t0 + i) * n_h + h];
        acc += (double)s->dtc[i] * A;
        s->l[i] = acc;
        s->ei[i] = (float)exp(acc);
        memcpy(s->Vc + i * (p + 1), v + (t0 + i) * ldv + h * vh, sizeof(float) * (size_t)p);
        s->Vc[i * (p + 1) + p] = 1;
    }
    if (acc < -80)
        return 0;
    for (int64_t i = 0; i < L; i++) {
        s->ep[i] = s->ei[i];
        s->en[i] = (float)exp(-s->l[i]);
    }
    return 1;
}

/* dst [L, n] = L rows of n floats of src at stride ld; returns dst. */
static const float *pack_rows(float *dst, const float *src, int64_t ld, int64_t L, int64_t n)
{
    for (int64_t j = 0; j < L; j++)
        memcpy(dst + j * n, src + j * ld, sizeof(float) * (size_t)n);
    return dst;
}

/* In place on the [L, L] score block K (rows at ldk): K_ij ← K_ij e_ij w_j
 * for j ≤ i (e_ij = exp(l_i − l_j), w = NULL: 1) and 0 for i < j < L. */
static void decay_tile(float *K, int64_t ldk, int64_t L, const struct ssm_scratch *s, int fac,
                       const float *w)
{
    for (int64_t i = 0; i < L; i++) {
        float *r = K + i * ldk;
        if (fac) {
            const float a = s->ep[i], *en = s->en;
            if (w) {
#pragma omp simd
                for (int64_t j = 0; j <= i; j++)
                    r[j] = r[j] * (a * en[j]) * w[j];
            } else {
#pragma omp simd
                for (int64_t j = 0; j <= i; j++)
                    r[j] = r[j] * (a * en[j]);
            }
        } else {
            const double li = s->l[i];
            for (int64_t j = 0; j <= i; j++)
                r[j] = r[j] * (float)exp(li - s->l[j]) * (w ? w[j] : 1.0f);
        }
        for (int64_t j = i + 1; j < L; j++)
            r[j] = 0;
    }
}

/* Y[i, 0:n] = a_i X[i, 0:n] for i < L.   X rows at ldx, Y rows at n. */
static void scale_rows(float *Y, const float *X, int64_t ldx, const float *a, int64_t L,
                       int64_t n)
{
    for (int64_t i = 0; i < L; i++) {
        const float ai = a[i], *xr = X + i * ldx;
        float *yr = Y + i * n;
#pragma omp simd
        for (int64_t k = 0; k < n; k++)
            yr[k] = ai * xr[k];
    }
}

/* ĝ_i = [dy_i / den_i; −dy_i·(y_i − D v_i) / den_i] for the chunk's rows. */
HM_CLONES static void chunk_ghat(float *Gc, const float *dy, const float *y, const float *den,
                       const float *Vc, float Dh, int64_t T, int64_t n_h, int64_t p, int64_t h,
                       int64_t t0, int64_t L)
{
    for (int64_t i = 0; i < L; i++) {
        const float *dyr = dy + (t0 + i) * n_h * p + h * p, *yr = y + (t0 + i) * n_h * p + h * p;
        const float inv = 1.0f / den[h * T + t0 + i], *vr = Vc + i * (p + 1);
        float *g = Gc + i * (p + 1), s = 0;
#pragma omp simd reduction(+ : s)
        for (int64_t k = 0; k < p; k++) {
            g[k] = dyr[k] * inv;
            s += dyr[k] * (yr[k] - Dh * vr[k]);
        }
        g[p] = -s * inv;
    }
}

/* st[F2, P1] = Σ_j wt_j X_j Y_j^T = X^T diag(wt) Y.   X: [L, F2] rows at
 * ldx; Y: [L, P1]; Sw: [L, P1] scratch. */
HM_CLONES static void outer_sum(float *st, const float *X, int64_t ldx, const float *Y, const float *wt,
                      float *Sw, int64_t L, int64_t F2, int64_t P1)
{
    scale_rows(Sw, Y, P1, wt, L, P1);
    hm_tile_gemm(st, P1, X, 1, ldx, Sw, P1, F2, P1, L, 0);
}

/* The same transposed: st[P1, F2] = Y^T diag(wt) X (the backward's layout). */
HM_CLONES static void outer_sum_t(float *st, const float *X, int64_t ldx, const float *Y, const float *wt,
                        float *Sw, int64_t L, int64_t F2, int64_t P1)
{
    scale_rows(Sw, Y, P1, wt, L, P1);
    hm_tile_gemm(st, F2, Sw, 1, P1, X, ldx, P1, F2, L, 0);
}

static inline float dot_f(const float *a, const float *b, int64_t n)
{
    float s = 0;
#pragma omp simd reduction(+ : s)
    for (int64_t i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

/* Decayed scans over the nc chunk blocks of one head (n floats used of SB):
 * dir > 0: block c ← state before chunk c (I_c = e^{L_c} I_{c−1} + U_c, shifted);
 * dir < 0: block c ← gradient from after chunk c (J_c = V_c + e^{L_c} J_{c+1},
 * shifted). The block shifted out (the last for dir > 0, the first for
 * dir < 0) is never read, so it need not be initialized. One pass, in
 * segments of 256 floats with the running state on the stack. */
HM_CLONES static void decayed_scan(float *S, const double *Lc, int64_t nc, int64_t SB, int64_t n,
                                   int dir)
{
    for (int64_t e0 = 0; e0 < n; e0 += 256) {
        const int64_t ne = imin(256, n - e0);
        float run[256];
        for (int64_t e = 0; e < ne; e++)
            run[e] = 0;
        for (int64_t i = 0; i < nc; i++) {
            const int64_t c = dir > 0 ? i : nc - 1 - i;
            float *cur = S + c * SB + e0;
            if (i == nc - 1) { /* its own block is the one never read */
                for (int64_t e = 0; e < ne; e++)
                    cur[e] = run[e];
                break;
            }
            const float a = (float)exp(Lc[c]);
#pragma omp simd
            for (int64_t e = 0; e < ne; e++) {
                const float t = cur[e];
                cur[e] = run[e];
                run[e] = t + a * run[e];
            }
        }
    }
}

/* ---- chunked selective scan: forward ------------------------------------------- */

/* Phase 3 of the forward for head h, rows [t0, t0 + L); Sc: the state
 * before t0 (first = 1: it is zero). */
HM_CLONES
static void fwd_chunk(float *y, float *den, const float *C, const float *B, const float *v,
                      const float *dt, float Ah, float Dh, int64_t T, int64_t n_h, int64_t F2,
                      int64_t p, int64_t ldv, int64_t vh, float eps, int64_t h, int64_t t0,
                      int64_t L, int64_t Cs, const float *Sc, int first, struct ssm_scratch *s)
{
    const int64_t P1 = p + 1, ldq = n_h * F2, CP = round16(Cs);
    const float *Ch = C + (t0 * n_h + h) * F2, *Bh = B + (t0 * n_h + h) * F2;
    const int fac = chunk_prep(s, dt, Ah, v, ldv, vh, n_h, p, h, t0, L);
    /* K ← M_ij = (C_i·B_j) e_ij Δ_j (j ≤ i), 0 above */
    hm_tile_transpose_pad(s->Kt, CP, Bh, ldq, L, F2);
    hm_tile_tri_scores(s->K, CP, Ch, ldq, s->Kt, CP, L, F2);
    decay_tile(s->K, CP, L, s, fac, s->dtc);
    /* n_i = exp(l_i) C_i^T S_c + Σ_{j≤i} M_ij v̂_j */
    if (first) {
        memset(s->Nm, 0, sizeof(float) * (size_t)(L * P1));
    } else {
        scale_rows(s->Sw, Ch, ldq, s->ei, L, F2);
        hm_tile_gemm(s->Nm, P1, s->Sw, F2, 1, Sc, P1, L, P1, F2, 0);
    }
    hm_tile_gemm_tri(s->Nm, P1, s->K, CP, 1, s->Vc, P1, L, P1, L, 1, HM_TILE_A_LOWER);
    for (int64_t i = 0; i < L; i++) {
        const float *acc = s->Nm + i * P1;
        const float dn = acc[p] + eps, inv = 1.0f / dn, *vi = s->Vc + i * P1;
        float *yr = y + (t0 + i) * n_h * p + h * p;
        for (int64_t k = 0; k < p; k++)
            yr[k] = acc[k] * inv + Dh * vi[k];
        if (den)
            den[h * T + t0 + i] = dn;
    }
}

void hm_fast_ssm_forward(HM_CPU_CTX, float *y, float *den, const float *C, const float *B, const float *v,
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
            if (t0 + L >= T) { /* the last chunk's U is never used */
                Lc[task] = 0;
                continue;
            }
            chunk_prep(&s, dt, A[h], v, ldv, vh, n_h, p, h, t0, L);
            for (int64_t j = 0; j < L; j++)
                s.wt[j] = (float)exp(s.l[L - 1] - s.l[j]) * s.dtc[j];
            outer_sum(St + task * SB, pack_rows(s.Pc, B + (t0 * n_h + h) * F2, ldq, L, F2), F2,
                      s.Vc, s.wt, s.Sw, L, F2, P1);
            Lc[task] = s.l[L - 1];
        }
#pragma omp for schedule(static)
        for (int64_t h = 0; h < n_h; h++) /* (2) carried-in states */
            decayed_scan(St + h * nc * SB, Lc + h * nc, nc, SB, F2 * P1, +1);
#pragma omp for schedule(dynamic, 1)
        for (int64_t task = 0; task < ntask; task++) { /* (3) outputs */
            int64_t h = task / nc, c = task % nc, t0 = c * Cs, L = imin(Cs, T - t0);
            fwd_chunk(y, den, C, B, v, dt, A[h], D[h], T, n_h, F2, p, ldv, vh, eps, h, t0, L, Cs,
                      St + task * SB, c == 0, &s);
        }
    }
}

/* ---- chunked selective scan: backward ------------------------------------------ */

/* Phase 3 of the backward for head h, rows [t0, t0 + L): Sc is the state
 * before t0 (NULL for the first chunk, where it is 0), Rc the gradient
 * reaching the state at t0 + L − 1 from later rows and Sn the state at
 * t0 + L − 1 (both NULL for the last chunk, where Rc = 0). Writes dC, dB,
 * dv, ddt rows (each may be NULL) and the chunk's dA and dD partials. */
HM_CLONES
static void bwd_chunk(float *dC, float *dB, float *dv, float *ddt, double *pA, double *pD,
                      const float *dy, const float *y, const float *den, const float *C,
                      const float *B, const float *v, const float *dt, float Ah, float Dh,
                      int64_t T, int64_t n_h, int64_t F2, int64_t p, int64_t ldv, int64_t vh,
                      int64_t h, int64_t t0, int64_t L, int64_t Cs, const float *Sc,
                      const float *Rc, const float *Sn, struct ssm_scratch *s)
{
    const int64_t P1 = p + 1, ldq = n_h * F2, CP = round16(Cs);
    const float *Bh = B + (t0 * n_h + h) * F2;
    const float *Ch = pack_rows(s->Pc, C + (t0 * n_h + h) * F2, ldq, L, F2); /* rows at F2 */
    const int fac = chunk_prep(s, dt, Ah, v, ldv, vh, n_h, p, h, t0, L);
    chunk_ghat(s->Gc, dy, y, den, s->Vc, Dh, T, n_h, p, h, t0, L);
    const double llast = s->l[L - 1];
    /* K ← M_ij = (C_i·B_j) e_ij Δ_j,  Y_ij = (ĝ_i·v̂_j) e_ij  (j ≤ i; 0 above) */
    if (dv) {
        hm_tile_transpose_pad(s->Kt, CP, Bh, ldq, L, F2);
        hm_tile_tri_scores(s->K, CP, Ch, F2, s->Kt, CP, L, F2);
        decay_tile(s->K, CP, L, s, fac, s->dtc);
    }
    hm_tile_transpose_pad(s->Vt, CP, s->Vc, P1, L, P1);
    hm_tile_tri_scores(s->Y, CP, s->Gc, P1, s->Vt, CP, L, P1);
    decay_tile(s->Y, CP, L, s, fac, NULL);
    /* Dc_i = dC_i = exp(l_i) S_c ĝ_i + Σ_{j≤i} Y_ij Δ_j B_j;  e_i = C_i·dC_i */
    if (Sc) {
        scale_rows(s->Sw, s->Gc, P1, s->ei, L, P1);
        hm_tile_gemm(s->Dc, F2, s->Sw, P1, 1, Sc, F2, L, F2, P1, 0);
    } else {
        memset(s->Dc, 0, sizeof(float) * (size_t)(L * F2));
    }
    scale_rows(s->Sw, Bh, ldq, s->dtc, L, F2);
    hm_tile_gemm_tri(s->Dc, F2, s->Y, CP, 1, s->Sw, F2, L, F2, L, 1, HM_TILE_A_LOWER);
    for (int64_t i = 0; i < L; i++) {
        s->e[i] = dot_f(Ch + i * F2, s->Dc + i * F2, F2);
        if (dC)
            memcpy(dC + ((t0 + i) * n_h + h) * F2, s->Dc + i * F2, sizeof(float) * (size_t)F2);
    }
    /* X_j = exp(l_last − l_j) R_c v̂_j + Σ_{i≥j} Y_ij C_i;  dB_j = Δ_j X_j;
     * din_j = B_j·X_j;  e_j −= Δ_j din_j */
    for (int64_t j = 0; j < L; j++)
        s->wt[j] = (float)exp(llast - s->l[j]);
    if (Rc) {
        scale_rows(s->Sw, s->Vc, P1, s->wt, L, P1);
        hm_tile_gemm(s->X, F2, s->Sw, P1, 1, Rc, F2, L, F2, P1, 0);
    } else {
        memset(s->X, 0, sizeof(float) * (size_t)(L * F2));
    }
    hm_tile_gemm_tri(s->X, F2, s->Y, 1, CP, Ch, F2, L, F2, L, 1, HM_TILE_A_UPPER);
    for (int64_t j = 0; j < L; j++) {
        const float dj = s->dtc[j], *X = s->X + j * F2;
        const float din = dot_f(Bh + j * ldq, X, F2);
        s->din[j] = din;
        s->e[j] -= (double)dj * din;
        if (dB) {
            float *o = dB + ((t0 + j) * n_h + h) * F2;
#pragma omp simd
            for (int64_t f = 0; f < F2; f++)
                o[f] = dj * X[f];
        }
    }
    /* dv_j = Δ_j exp(l_last − l_j) R_c[:, 0:p]^T B_j + Σ_{i≥j} M_ij g_i + D dy_j,
     * as Dv^T [p, L] (Kt = B_c^T, zero-padded) */
    if (dv) {
        float *Dv = s->Dt;
        if (Rc) {
            hm_tile_gemm(Dv, CP, Rc, F2, 1, s->Kt, CP, p, L, F2, 0);
            for (int64_t j = 0; j < L; j++)
                s->wt[j] *= s->dtc[j];
            for (int64_t k = 0; k < p; k++) {
                float *o = Dv + k * CP;
#pragma omp simd
                for (int64_t j = 0; j < L; j++)
                    o[j] *= s->wt[j];
            }
            hm_tile_gemm_tri(Dv, CP, s->Gc, 1, P1, s->K, CP, p, L, L, 1, HM_TILE_B_LOWER);
        } else {
            hm_tile_gemm_tri(Dv, CP, s->Gc, 1, P1, s->K, CP, p, L, L, 0, HM_TILE_B_LOWER);
        }
        float *Dr = s->Sw; /* dv rows [L, p] (Sw is free here) */
        hm_tile_transpose_pad(Dr, p, Dv, CP, p, L);
        for (int64_t j = 0; j < L; j++) {
            const float *dyr = dy + (t0 + j) * n_h * p + h * p, *dr = Dr + j * p;
            float *o = dv + (t0 + j) * ldv + h * vh;
#pragma omp simd
            for (int64_t k = 0; k < p; k++)
                o[k] = dr[k] + Dh * dyr[k];
        }
    }
    /* ∂L/∂(Δ_r A) = Σ_{t≥r in chunk} e_t + <R_c, S_next> */
    double suf = 0, a = 0, dd = 0;
    if (Sn)
#pragma omp simd reduction(+ : suf)
        for (int64_t q = 0; q < F2 * P1; q++)
            suf += (double)Rc[q] * Sn[q];
    for (int64_t r = L - 1; r >= 0; r--) {
        suf += s->e[r];
        const double dr = s->dtc[r];
        if (ddt)
            ddt[(t0 + r) * n_h + h] = (float)(s->din[r] + (double)Ah * suf);
        a += dr * suf;
        const float *dyr = dy + (t0 + r) * n_h * p + h * p, *vr = s->Vc + r * P1;
#pragma omp simd reduction(+ : dd)
        for (int64_t k = 0; k < p; k++)
            dd += (double)dyr[k] * vr[k];
    }
    *pA = a;
    *pD = dd;
}

void hm_fast_ssm_backward(HM_CPU_CTX, float *dC, float *dB, float *dv, float *ddt, float *dA, float *dD,
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
            int64_t h = task / nc, c = task % nc, t0 = c * Cs, L = imin(Cs, T - t0);
            chunk_prep(&s, dt, A[h], v, ldv, vh, n_h, p, h, t0, L);
            Lc[task] = s.l[L - 1];
            if (c + 1 < nc) { /* U of the last chunk is never used */
                for (int64_t j = 0; j < L; j++)
                    s.wt[j] = (float)exp(s.l[L - 1] - s.l[j]) * s.dtc[j];
                outer_sum_t(St + task * SB, pack_rows(s.Pc, B + (t0 * n_h + h) * F2, ldq, L, F2),
                            F2, s.Vc, s.wt, s.Sw, L, F2, P1);
            }
            if (c > 0) { /* nor V of the first */
                chunk_ghat(s.Gc, dy, y, den, s.Vc, D[h], T, n_h, p, h, t0, L);
                outer_sum_t(Rt + task * SB, pack_rows(s.Pc, C + (t0 * n_h + h) * F2, ldq, L, F2),
                            F2, s.Gc, s.ei, s.Sw, L, F2, P1);
            }
        }
#pragma omp for schedule(static)
        for (int64_t h = 0; h < n_h; h++) { /* (2) carried-in and carried-back states */
            decayed_scan(St + h * nc * SB, Lc + h * nc, nc, SB, F2 * P1, +1);
            decayed_scan(Rt + h * nc * SB, Lc + h * nc, nc, SB, F2 * P1, -1);
        }
#pragma omp for schedule(dynamic, 1)
        for (int64_t task = 0; task < ntask; task++) { /* (3) gradients */
            int64_t h = task / nc, c = task % nc, t0 = c * Cs, L = imin(Cs, T - t0);
            const int last = c + 1 == nc;
            bwd_chunk(dC, dB, dv, ddt, pA + task, pD + task, dy, y, den, C, B, v, dt, A[h], D[h],
                      T, n_h, F2, p, ldv, vh, h, t0, L, Cs, c > 0 ? St + task * SB : NULL,
                      last ? NULL : Rt + task * SB, last ? NULL : St + (task + 1) * SB, &s);
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
