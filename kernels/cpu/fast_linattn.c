/* fast_linattn.c — fast CPU Hedgehog feature maps, chunked causal linear
 * attention and cosine loss (contract §2). Semantics: kernels/backend.h;
 * checked against ref_linattn.c by tests/test_linattn.c. No BLAS: every
 * product here is small (C×C chunk blocks, p×F maps), so each op is one
 * OpenMP region over heads × chunks with cache-sized loops (BENCH.md: a
 * generic BLAS runs these 64×128 blocks on one core).
 *
 * Chunked linear attention, per head, chunk c = rows [t0, t1), L = t1 − t0,
 * with v̂_s = [v_s; 1] (the ones channel carries the normalizer, as the
 * stage-2 state of contract §3 does):
 *   A = (ΦQ_c ΦK_c^T) ⊙ causal mask                            [L, L]
 *   n̂_t = Σ_{s in c, s≤t} A_ts v̂_s + φq_t^T Ŝ_c                [p + 1]
 *   y_t = n̂_t[0:p] / (n̂_t[p] + eps),  Ŝ_c = Σ_{s < t0} φk_s v̂_s^T  [F2, p+1]
 * Backward with ĝ_t = [dy_t / den_t; −(dy_t · y_t) / den_t], so that
 * ∂L/∂a_ts = ĝ_t · v̂_s =: B_ts (s ≤ t):
 *   dφq_t = Σ_{s in c, s≤t} B_ts φk_s + Ŝ_c ĝ_t
 *   dφk_s = Σ_{t in c, t≥s} B_ts φq_t + dŜ_c v̂_s,  dŜ_c = Σ_{t ≥ t1} φq_t ĝ_t^T
 *   dv_s  = Σ_{t in c, t≥s} A_ts g_t + dŜ_c[:, 0:p]^T φk_s
 * Three phases in one parallel region: (1) per (head, chunk) the chunk's own
 * state ΦK_c^T V̂_c (and ΦQ_c^T Ĝ_c); (2) per head an exclusive prefix
 * (suffix) scan over the chunks; (3) per (head, chunk) the intra-chunk block
 * plus the carried-in state. Every phase is parallel; memory is the chunk
 * states, n_h · ceil(T/C) · F2 · (p + 1) floats (≈ n_h · T · F2 for C ≥ p),
 * plus per-thread C×C blocks — never T×T. A forward given `saved` also
 * writes each carried-in state transposed (backend.h's layout, the
 * backward's own); a backward given it skips computing Ŝ and its scan
 * (the same sums in the same order: the result is bit for bit the same).
 *
 * Score blocks (ΦQ ΦK^T, Ĝ V̂^T) are register tiles (cpu_tiles.h, shared
 * with fast_ssm.c) over a transposed, zero-padded copy of the chunk's keys;
 * columns past the diagonal are computed and masked. Operands a tile walks
 * down a column (the chunk's φ rows, 4 KB apart in [T, n_h, F2]; v rows in
 * the fused qkv) are packed first: unpacked, every row lands in one L1 set
 * and the tile runs at a quarter of its speed. The backward keeps its
 * chunk states transposed, [P1, F2] with the normalizer as row p (see
 * bwd_chunk).
 *
 * Feature maps: per (head, 64-row block) one tile GEMM u = X W_h into φ and
 * the two softmaxes in place with cpu_vexp.h's expf (HM_CLONES, vectorized;
 * F a multiple of 16 reduces its rows in cpu_v16.h vectors);
 * the backward's du block, x^T block and W_h^T panel live on the stack
 * (≤ 128 KB; p or F > 1024 run the ref loops).
 *
 * Gotchas that have caused bugs:
 *   - den saved by the forward includes eps (do not add it twice);
 *   - v/dv are strided views of the fused qkv: only the p v columns of each
 *     head are read or written;
 *   - the last chunk is short when C does not divide T (L < C), and T < C
 *     means a single short chunk: tiles are padded to 16 columns with zeros. */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "cpu_linattn.h"
#include "cpu_simd.h"
#include "cpu_tiles.h"
#include "cpu_vexp.h"

#define HM_PAR_MIN 32768
#define HM_FM_FMAX 1024   /* feature maps wider (F or p) than this run the ref loops */
#define HM_FM_BLK 8192    /* floats of a row block's du [R, F] and x^T [p, R] (stack) */
#define HM_FM_WT 16384    /* floats of a W^T panel [F, P] (stack) */

static int64_t round16(int64_t n) { return (n + 15) / 16 * 16; }
static int64_t imin(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t imax(int64_t a, int64_t b) { return a > b ? a : b; }

/* ---- feature map -------------------------------------------------------------
 * Per (head, block of R rows): u = X_blk W_h is one register-tile GEMM
 * (cpu_tiles.h) written straight into φ's first half, then the two
 * softmaxes in place with cpu_vexp.h's expf (vectorized, HM_CLONES). The
 * backward forms du for the block (stack), then dx = du W_h^T against a
 * transposed W_h panel, dW_h += X_blk^T du and db_h += Σ du, all tiles. */

/* Rows of a block: du [R, F] and x^T [p, R] each fit HM_FM_BLK floats. */
static int64_t fm_rows(int64_t p, int64_t F) { return imin(64, HM_FM_BLK / imax(p, F)); }

/* Columns of a W^T panel [F, P] (all p when they fit HM_FM_WT floats). */
static int64_t fm_panel(int64_t p, int64_t F)
{
    return p * F <= HM_FM_WT ? p : HM_FM_WT / F / 16 * 16;
}

/* One row, F a multiple of 16: the row's max, min and sums as 16-lane
 * partials folded once (cpu_v16.h), the exps 16 lanes at a time. */
static inline __attribute__((always_inline)) void fm_softmax_row16(float *u, const float *b,
                                                                   int64_t F)
{
    float *m = u + F;
    hm_v16 mx = hm_v16_load(u) + hm_v16_load(b), mn = mx;
    hm_v16_store(u, mx);
    for (int64_t j = 16; j < F; j += 16) {
        const hm_v16 x = hm_v16_load(u + j) + hm_v16_load(b + j);
        hm_v16_store(u + j, x);
        mx = hm_v16_max(mx, x);
        mn = hm_v16_min(mn, x);
    }
    const float hi = hm_v16_hmax(mx), lo = hm_v16_hmin(mn);
    hm_v16 sp = {0}, sm = {0};
    for (int64_t j = 0; j < F; j += 16) {
        const hm_v16 x = hm_v16_load(u + j);
        const hm_v16 ep = hm_v16_exp_nonpos(x - hi), em = hm_v16_exp_nonpos(lo - x);
        hm_v16_store(u + j, ep);
        hm_v16_store(m + j, em);
        sp += ep;
        sm += em;
    }
    const float ip = 1.0f / hm_v16_hsum(sp), im = 1.0f / hm_v16_hsum(sm);
    for (int64_t j = 0; j < F; j += 16) {
        hm_v16_store(u + j, hm_v16_load(u + j) * ip);
        hm_v16_store(m + j, hm_v16_load(m + j) * im);
    }
}

/* R rows of u (rows at ldp) ← softmax(u + b), softmax(−u − b) into u, u + F. */
HM_CLONES static void fm_softmax_rows(float *phi, int64_t ldp, const float *b, int64_t R,
                                      int64_t F)
{
    if (F % 16 == 0) {
        for (int64_t r = 0; r < R; r++)
            fm_softmax_row16(phi + r * ldp, b, F);
        return;
    }
    for (int64_t r = 0; r < R; r++) {
        float *u = phi + r * ldp, *m = u + F;
        float mx = -INFINITY, mn = INFINITY;
#pragma omp simd reduction(max : mx) reduction(min : mn)
        for (int64_t j = 0; j < F; j++) {
            const float uj = u[j] + b[j];
            u[j] = uj;
            mx = uj > mx ? uj : mx;
            mn = uj < mn ? uj : mn;
        }
        float sp = 0, sm = 0;
#pragma omp simd reduction(+ : sp, sm)
        for (int64_t j = 0; j < F; j++) {
            const float ep = hm_vexpf(u[j] - mx), em = hm_vexpf(mn - u[j]);
            u[j] = ep;
            m[j] = em;
            sp += ep;
            sm += em;
        }
        const float ip = 1.0f / sp, im = 1.0f / sm;
#pragma omp simd
        for (int64_t j = 0; j < F; j++) {
            u[j] *= ip;
            m[j] *= im;
        }
    }
}

void hm_fast_featuremap_forward(HM_CPU_CTX, float *phi, const float *x, const float *W, const float *b,
                                int64_t T, int64_t n_h, int64_t p, int64_t F,
                                int64_t row_stride, int64_t head_stride)
{
    const int64_t F2 = 2 * F, R = 64, nb = (T + R - 1) / R, ntask = n_h * nb;
#pragma omp parallel for schedule(static) if (T * n_h * p * F >= HM_PAR_MIN)
    for (int64_t task = 0; task < ntask; task++) {
        const int64_t h = task % n_h, t0 = task / n_h * R, L = imin(R, T - t0);
        float *o = phi + (t0 * n_h + h) * F2;
        hm_tile_gemm(o, n_h * F2, x + t0 * row_stride + h * head_stride, row_stride, 1,
                     W + h * p * F, F, L, F, p, 0);
        fm_softmax_rows(o, n_h * F2, b + h * F, L, F);
    }
}

/* du [R, F] of R rows (φ, dφ rows at ldp):
 * du = s ⊙ (g − s·g) − s' ⊙ (g' − s'·g')  (see ref_linattn.c). F a
 * multiple of 16 takes 16-lane partial dots (cpu_v16.h). */
HM_CLONES static void fm_du_rows(float *du, const float *phi, const float *dphi, int64_t ldp,
                                 int64_t R, int64_t F)
{
    for (int64_t r = 0; r < R; r++) {
        const float *ph = phi + r * ldp, *g = dphi + r * ldp;
        float *o = du + r * F, dp = 0, dm = 0;
        if (F % 16 == 0) {
            hm_v16 vp = {0}, vm = {0};
            for (int64_t j = 0; j < F; j += 16) {
                vp += hm_v16_load(ph + j) * hm_v16_load(g + j);
                vm += hm_v16_load(ph + F + j) * hm_v16_load(g + F + j);
            }
            dp = hm_v16_hsum(vp);
            dm = hm_v16_hsum(vm);
        } else {
#pragma omp simd reduction(+ : dp, dm)
            for (int64_t j = 0; j < F; j++) {
                dp += ph[j] * g[j];
                dm += ph[F + j] * g[F + j];
            }
        }
#pragma omp simd
        for (int64_t j = 0; j < F; j++)
            o[j] = ph[j] * (g[j] - dp) - ph[F + j] * (g[F + j] - dm);
    }
}

/* Wt [F, np] = W_h[i0 : i0 + np, :]^T. */
static void fm_wt(float *Wt, const float *Wh, int64_t i0, int64_t np, int64_t F)
{
    for (int64_t i = 0; i < np; i++) {
        const float *wr = Wh + (i0 + i) * F;
        for (int64_t f = 0; f < F; f++)
            Wt[f * np + i] = wr[f];
    }
}

/* Rows [t0, t1) of head h in blocks of fm_rows: dx rows written (if dx),
 * dW_h, db_h accumulated (if given; the caller owns head h). The dx of a
 * row does not depend on the blocking or on dW/db being asked for. */
static void fm_bwd_rows(float *dx, float *dW, float *db, const float *dphi, const float *x,
                        const float *phi, const float *W, int64_t t0, int64_t t1, int64_t h,
                        int64_t n_h, int64_t p, int64_t F, int64_t rs, int64_t hs)
{
    const int64_t F2 = 2 * F, R = fm_rows(p, F), P = fm_panel(p, F), ldp = n_h * F2;
    const float *Wh = W + h * p * F;
    float du[HM_FM_BLK], xt[HM_FM_BLK], Wt[HM_FM_WT];
    if (dx && P == p)
        fm_wt(Wt, Wh, 0, p, F);
    for (int64_t r0 = t0; r0 < t1; r0 += R) {
        const int64_t L = imin(R, t1 - r0);
        const float *xr = x + r0 * rs + h * hs;
        fm_du_rows(du, phi + (r0 * n_h + h) * F2, dphi + (r0 * n_h + h) * F2, ldp, L, F);
        if (dx)
            for (int64_t i0 = 0; i0 < p; i0 += P) {
                const int64_t np = imin(P, p - i0);
                if (P < p)
                    fm_wt(Wt, Wh, i0, np, F);
                hm_tile_gemm(dx + r0 * rs + h * hs + i0, rs, du, F, 1, Wt, np, L, np, F, 0);
            }
        if (dW) { /* dW_h += X_blk^T du, X_blk^T packed [p, L] */
            hm_tile_transpose_pad(xt, L, xr, rs, L, p);
            hm_tile_gemm(dW + h * p * F, F, xt, L, 1, du, F, p, F, L, 1);
        }
        if (db)
            for (int64_t r = 0; r < L; r++) {
                float *dbh = db + h * F;
                const float *d = du + r * F;
#pragma omp simd
                for (int64_t j = 0; j < F; j++)
                    dbh[j] += d[j];
            }
    }
}

/* One task per head when dW or db is asked for (it owns dW_h and db_h: no
 * reduction); else tasks of one row block × one head. */
void hm_fast_featuremap_backward(HM_CPU_CTX, float *dx, float *dW, float *db, const float *dphi,
                                 const float *x, const float *phi, const float *W, int64_t T,
                                 int64_t n_h, int64_t p, int64_t F, int64_t row_stride,
                                 int64_t head_stride)
{
    if (F > HM_FM_FMAX || p > HM_FM_FMAX) {
        hm_ref_featuremap_backward(ctx, dx, dW, db, dphi, x, phi, W, T, n_h, p, F, row_stride,
                                   head_stride);
        return;
    }
    if (!dx && !dW && !db)
        return;
    if (!dW && !db) { /* rows are independent */
        const int64_t R = fm_rows(p, F), nb = (T + R - 1) / R, ntask = n_h * nb;
#pragma omp parallel for schedule(static) if (T * n_h * p * F >= HM_PAR_MIN)
        for (int64_t task = 0; task < ntask; task++) {
            const int64_t h = task % n_h, t0 = task / n_h * R;
            fm_bwd_rows(dx, NULL, NULL, dphi, x, phi, W, t0, imin(t0 + R, T), h, n_h, p, F,
                        row_stride, head_stride);
        }
        return;
    }
#pragma omp parallel for schedule(static) if (T * n_h * p * F >= HM_PAR_MIN)
    for (int64_t h = 0; h < n_h; h++)
        fm_bwd_rows(dx, dW, db, dphi, x, phi, W, 0, T, h, n_h, p, F, row_stride, head_stride);
}

/* ---- chunked linear attention: building blocks ---------------------------- */

/* dst [L, n] = L rows of n floats of src at stride ld; returns dst. The
 * chunk's rows of one head in a [T, n_h, F2] or fused qkv tensor are 4 KB
 * (or 6 KB) apart: a tile GEMM walking them down a column maps every row
 * to the same L1 set and runs at a quarter of its speed; packed rows do
 * not. */
static const float *pack_rows(float *dst, const float *src, int64_t ld, int64_t L, int64_t n)
{
    for (int64_t j = 0; j < L; j++)
        memcpy(dst + j * n, src + j * ld, sizeof(float) * (size_t)n);
    return dst;
}

/* st[F2, p] = Σ_s X_s V_s^T and sz[F2] = Σ_s X_s w_s over L rows.
 * X: rows at stride ldx [L, F2]; V: rows at stride ldv [L, p]; w: [L] or
 * NULL (all ones); pk: scratch [L, F2] + [L, p] (packed copies). */
HM_CLONES static void chunk_state(float *st, float *sz, const float *X, int64_t ldx, const float *V,
                        int64_t ldv, const float *w, int64_t L, int64_t F2, int64_t p,
                        float *pk)
{
    X = pack_rows(pk, X, ldx, L, F2);
    if (ldv != p)
        V = pack_rows(pk + L * F2, V, ldv, L, p);
    hm_tile_gemm(st, p, X, 1, F2, V, p, F2, p, L, 0); /* st = X^T V */
    memset(sz, 0, sizeof(float) * (size_t)F2);
    for (int64_t s = 0; s < L; s++) {
        const float *xr = X + s * F2, ws = w ? w[s] : 1.0f;
#pragma omp simd
        for (int64_t f = 0; f < F2; f++)
            sz[f] += xr[f] * ws;
    }
}

/* Per-thread scratch (floats), rounded up to 16 (CP = round16(C)):
 *   forward:  Kt [F2, CP] + Vc [C, p] + A [C, CP] + Num [C, p]
 *   backward: Kt [F2, CP] + Vt [P1, CP] + Vh, Gh [C, P1] + A, B [C, CP]
 *             + Dv [p, CP] + Qc, Kc [C, F2] + Dr [C, p]   (P1 = p + 1)
 * (Qc, Kc: the chunk's φ rows packed). Phase 1 of the backward uses the
 * first C·P1 + C·F2 floats for V̂ or Ĝ and a packed φ. */
static int64_t scratch_floats(int64_t F2, int64_t p, int64_t C, int back)
{
    int64_t CP = round16(C), n;
    if (!back)
        n = F2 * CP + 2 * C * p + C * CP;
    else
        n = F2 * CP + (p + 1) * CP + 2 * C * (p + 1) + 2 * C * CP + p * CP + 2 * C * F2 + C * p;
    return round16(n);
}

/* The saved block of backend.h, Ŝ^T [P1, F2], from the forward's carried-in
 * state St [F2, p] + z [F2] (the same sums: bit for bit what the backward's
 * own phases (1)-(2) compute). */
HM_CLONES static void save_state(float *Sh, const float *St, int64_t F2, int64_t p)
{
    if (F2 % 16 || p % 16) {
        hm_tile_transpose_pad(Sh, F2, St, p, F2, p);
    } else { /* 16 × 16 blocks transposed in registers */
        for (int64_t f0 = 0; f0 < F2; f0 += 16)
            for (int64_t k0 = 0; k0 < p; k0 += 16) {
                hm_v16 r[16];
                for (int i = 0; i < 16; i++)
                    r[i] = hm_v16_load(St + (f0 + i) * p + k0);
                hm_v16_transpose(r);
                for (int i = 0; i < 16; i++)
                    hm_v16_store(Sh + (k0 + i) * F2 + f0, r[i]);
            }
    }
    memcpy(Sh + p * F2, St + F2 * p, sizeof(float) * (size_t)F2);
}

/* Floats of the chunk states: one block [F2, p] + [F2] per (head, chunk),
 * twice for the backward (Ŝ and dŜ). */
static int64_t state_floats(int64_t T, int64_t n_h, int64_t F2, int64_t p, int64_t C, int back)
{
    int64_t nc = (T + C - 1) / C;
    return (back ? 2 : 1) * n_h * nc * hm_linattn_saved_block(F2, p);
}

static size_t ws_bytes(int64_t T, int64_t n_h, int64_t F2, int64_t p, int64_t chunk, int back)
{
    int64_t C = hm_linattn_chunk(chunk);
    int nt = omp_get_max_threads();
    if (T < 1)
        T = 1;
    return sizeof(float) * (size_t)(state_floats(T, n_h, F2, p, C, back) +
                                    scratch_floats(F2, p, C, back) * (nt > 0 ? nt : 1));
}

size_t hm_fast_linattn_ws_size(HM_CPU_CTX, int64_t T, int64_t n_h, int64_t F2, int64_t p, int64_t chunk)
{
    return ws_bytes(T, n_h, F2, p, chunk, 0);
}

size_t hm_fast_linattn_backward_ws_size(HM_CPU_CTX, int64_t T, int64_t n_h, int64_t F2, int64_t p,
                                        int64_t chunk)
{
    return ws_bytes(T, n_h, F2, p, chunk, 1);
}

/* Threads the workspace allows (precondition: it holds the states and one
 * thread's scratch). */
static int pick_threads(size_t ws_size, int64_t states, int64_t per, int64_t ntask, int64_t work)
{
    int64_t avail = ((int64_t)(ws_size / sizeof(float)) - states) / per;
    int nthr = omp_get_max_threads();
    if (avail < nthr)
        nthr = (int)(avail > 0 ? avail : 1);
    if (ntask < nthr)
        nthr = (int)ntask;
    if (work < HM_PAR_MIN)
        nthr = 1;
    return nthr > 0 ? nthr : 1;
}

/* In place over nc blocks of SB floats: block c becomes the sum of blocks
 * before it (dir > 0) or after it (dir < 0); the first (last) becomes 0.
 * One pass, in segments of 256 floats with the running sum on the stack
 * (no shift of the whole array afterwards). */
HM_CLONES static void exclusive_scan(float *S, int64_t nc, int64_t SB, int dir)
{
    for (int64_t e0 = 0; e0 < SB; e0 += 256) {
        const int64_t ne = imin(256, SB - e0);
        float run[256];
        for (int64_t e = 0; e < ne; e++)
            run[e] = 0;
        for (int64_t i = 0; i < nc; i++) {
            float *cur = S + (dir > 0 ? i : nc - 1 - i) * SB + e0;
#pragma omp simd
            for (int64_t e = 0; e < ne; e++) {
                const float t = cur[e];
                cur[e] = run[e];
                run[e] += t;
            }
        }
    }
}

/* ---- chunked linear attention: forward ------------------------------------ */

/* Phase 3 of the forward for head h, rows [t0, t0 + L). St: [F2, p] then
 * z [F2], the state of all rows before t0 (first: the first chunk, where it
 * is zero and its products are skipped, K = 0: the same +0 sums). */
HM_CLONES static void fwd_chunk(float *y, float *den, const float *phiq, const float *phik,
                      const float *v, int64_t T, int64_t n_h, int64_t F2, int64_t p, int64_t ldv,
                      int64_t vh, float eps, int64_t C, int64_t h, int64_t t0, int64_t L,
                      const float *St, int first, float *my)
{
    const int64_t CP = round16(C), ldq = n_h * F2;
    /* q is read along its rows only: no packed copy (it measured slower) */
    const float *q = phiq + (t0 * n_h + h) * F2, *k = phik + (t0 * n_h + h) * F2;
    const float *z = St + F2 * p;
    float *Kt = my, *Vc = Kt + F2 * CP, *A = Vc + C * p, *Num = A + C * CP;
    hm_tile_transpose_pad(Kt, CP, k, ldq, L, F2);
    for (int64_t j = 0; j < L; j++)
        memcpy(Vc + j * p, v + (t0 + j) * ldv + h * vh, sizeof(float) * (size_t)p);
    hm_tile_tri_scores(A, CP, q, ldq, Kt, CP, L, F2);
    hm_tile_mask_upper(A, CP, L);
    hm_tile_gemm(Num, p, q, ldq, 1, St, p, L, p, first ? 0 : F2, 0); /* carried-in: ΦQ_c S */
    hm_tile_gemm_tri(Num, p, A, CP, 1, Vc, p, L, p, L, 1, HM_TILE_A_LOWER); /* intra: A V_c */
    for (int64_t i = 0; i < L; i++) {
        const float *qi = q + i * ldq, *Ai = A + i * CP;
        float dn = 0, da = 0;
        if (!first) {
#pragma omp simd reduction(+ : dn)
            for (int64_t f = 0; f < F2; f++)
                dn += qi[f] * z[f];
        }
#pragma omp simd reduction(+ : da)
        for (int64_t j = 0; j <= i; j++)
            da += Ai[j];
        dn += da + eps;
        const float inv = 1.0f / dn, *nr = Num + i * p;
        float *yr = y + (t0 + i) * n_h * p + h * p;
#pragma omp simd
        for (int64_t k2 = 0; k2 < p; k2++)
            yr[k2] = nr[k2] * inv;
        if (den)
            den[h * T + t0 + i] = dn;
    }
}

void hm_fast_linattn_forward(HM_CPU_CTX, float *y, float *den, const float *phiq, const float *phik,
                             const float *v, int64_t T, int64_t n_h, int64_t F2, int64_t p,
                             int64_t v_row_stride, int64_t v_head_stride, float eps,
                             int64_t chunk, float *saved, void *ws, size_t ws_size)
{
    if (T <= 0 || n_h <= 0 || p <= 0 || F2 <= 0)
        return;
    const int64_t C = hm_linattn_chunk(chunk), nc = (T + C - 1) / C;
    const int64_t SB = hm_linattn_saved_block(F2, p); /* backend.h's saved block */
    const int64_t states = state_floats(T, n_h, F2, p, C, 0), per = scratch_floats(F2, p, C, 0);
    const int64_t ntask = n_h * nc, ldq = n_h * F2;
    float *St = ws, *scr = St + states;
    int nthr = pick_threads(ws_size, states, per, ntask, T * n_h * F2 * p);
#pragma omp parallel num_threads(nthr)
    {
        float *my = scr + (int64_t)omp_get_thread_num() * per;
#pragma omp for schedule(static)
        for (int64_t task = 0; task < ntask; task++) { /* (1) each chunk's own state */
            int64_t h = task / nc, c = task % nc, t0 = c * C, L = imin(C, T - t0);
            float *S = St + task * SB;
            chunk_state(S, S + F2 * p, phik + (t0 * n_h + h) * F2, ldq,
                        v + t0 * v_row_stride + h * v_head_stride, v_row_stride, NULL, L, F2, p,
                        my);
        }
#pragma omp for schedule(static)
        for (int64_t h = 0; h < n_h; h++) /* (2) carried-in states */
            exclusive_scan(St + h * nc * SB, nc, SB, +1);
#pragma omp for schedule(dynamic, 1)
        for (int64_t task = 0; task < ntask; task++) { /* (3) outputs */
            int64_t h = task / nc, c = task % nc, t0 = c * C, L = imin(C, T - t0);
            fwd_chunk(y, den, phiq, phik, v, T, n_h, F2, p, v_row_stride, v_head_stride, eps,
                      C, h, t0, L, St + task * SB, c == 0, my);
            if (saved)
                save_state(saved + task * SB, St + task * SB, F2, p);
        }
    }
}

/* ---- chunked linear attention: backward ----------------------------------- */

/* The backward keeps its chunk states transposed with the normalizer as
 * one more row, Ŝ^T = V̂^T ΦK [P1, F2] and dŜ^T = Ĝ^T ΦQ [P1, F2] (P1 =
 * p + 1, v̂ = [v; 1], ĝ = [g; gd]): dφq = Ĝ Ŝ^T and dφk = V̂ dŜ^T are then
 * single tile GEMMs (no per-chunk transposes of the states, no separate
 * normalizer loops), and dv is formed as dv^T [p, L] against ΦK_c^T. */

/* Ĝ [L, P1] of rows [t0, t0 + L) of head h: dy / den, then −(dy·y)/den. */
HM_CLONES static void chunk_grads(float *Gh, const float *dy, const float *y, const float *den,
                                  int64_t T, int64_t n_h, int64_t p, int64_t h, int64_t t0,
                                  int64_t L)
{
    for (int64_t i = 0; i < L; i++) {
        const float *dyr = dy + (t0 + i) * n_h * p + h * p, *yr = y + (t0 + i) * n_h * p + h * p;
        const float inv = 1.0f / den[h * T + t0 + i];
        float *g = Gh + i * (p + 1), s = 0;
#pragma omp simd reduction(+ : s)
        for (int64_t k = 0; k < p; k++) {
            g[k] = dyr[k] * inv;
            s += dyr[k] * yr[k];
        }
        g[p] = -s * inv;
    }
}

/* V̂ [L, P1] = [v rows; 1] of rows [t0, t0 + L) of head h. */
static void chunk_vhat(float *Vh, const float *v, int64_t ldv, int64_t vh, int64_t p,
                       int64_t h, int64_t t0, int64_t L)
{
    for (int64_t j = 0; j < L; j++) {
        memcpy(Vh + j * (p + 1), v + (t0 + j) * ldv + h * vh, sizeof(float) * (size_t)p);
        Vh[j * (p + 1) + p] = 1;
    }
}

/* Phase 3 of the backward for head h, rows [t0, t0 + L). Sp: Ŝ^T [P1, F2]
 * of the rows before t0 (NULL for the first chunk, where it is zero); Dn:
 * dŜ^T [P1, F2] = Σ ĝ φq^T of the rows from t0 + L on (NULL for the last).
 * A zero state's products are skipped (K = 0 writes the zero block): the
 * same +0 sums. */
HM_CLONES static void bwd_chunk(float *dphiq, float *dphik, float *dv, const float *dy,
                                const float *y, const float *den, const float *phiq,
                                const float *phik, const float *v, int64_t T, int64_t n_h,
                                int64_t F2, int64_t p, int64_t ldv, int64_t vh, int64_t C,
                                int64_t h, int64_t t0, int64_t L, const float *Sp,
                                const float *Dn, float *my)
{
    const int64_t CP = round16(C), ldq = n_h * F2, P1 = p + 1;
    float *Kt = my, *Vt = Kt + F2 * CP, *Vh = Vt + P1 * CP, *Gh = Vh + C * P1;
    float *A = Gh + C * P1, *B = A + C * CP, *Dv = B + C * CP, *Qc = Dv + p * CP;
    const float *q = pack_rows(Qc, phiq + (t0 * n_h + h) * F2, ldq, L, F2);
    const float *k = pack_rows(Qc + C * F2, phik + (t0 * n_h + h) * F2, ldq, L, F2);
    chunk_vhat(Vh, v, ldv, vh, p, h, t0, L);
    chunk_grads(Gh, dy, y, den, T, n_h, p, h, t0, L);
    if (dphiq || dphik) { /* B_ij = ĝ_i · v̂_j, j ≤ i */
        hm_tile_transpose_pad(Vt, CP, Vh, P1, L, P1);
        hm_tile_tri_scores(B, CP, Gh, P1, Vt, CP, L, P1);
        hm_tile_mask_upper(B, CP, L);
    }
    if (dv) { /* A_ij = φq_i · φk_j, j ≤ i */
        hm_tile_transpose_pad(Kt, CP, k, F2, L, F2);
        hm_tile_tri_scores(A, CP, q, F2, Kt, CP, L, F2);
        hm_tile_mask_upper(A, CP, L);
    }
    if (dphiq) { /* Ŝ ĝ_i + Σ_{j≤i} B_ij φk_j */
        float *o = dphiq + (t0 * n_h + h) * F2;
        hm_tile_gemm(o, ldq, Gh, P1, 1, Sp, F2, L, F2, Sp ? P1 : 0, 0);
        hm_tile_gemm_tri(o, ldq, B, CP, 1, k, F2, L, F2, L, 1, HM_TILE_A_LOWER);
    }
    if (dphik) { /* dŜ v̂_j + Σ_{i≥j} B_ij φq_i */
        float *o = dphik + (t0 * n_h + h) * F2;
        hm_tile_gemm(o, ldq, Vh, P1, 1, Dn, F2, L, F2, Dn ? P1 : 0, 0);
        hm_tile_gemm_tri(o, ldq, B, 1, CP, q, F2, L, F2, L, 1, HM_TILE_A_UPPER);
    }
    if (dv) { /* dv^T: dŜ[:, 0:p]^T φk_j + Σ_{i≥j} A_ij g_i */
        if (Dn)
            hm_tile_gemm(Dv, CP, Dn, F2, 1, Kt, CP, p, L, F2, 0);
        hm_tile_gemm_tri(Dv, CP, Gh, 1, P1, A, CP, p, L, L, Dn != NULL, HM_TILE_B_LOWER);
        float *Dr = Qc + 2 * C * F2; /* dv rows [L, p] */
        hm_tile_transpose_pad(Dr, p, Dv, CP, p, L);
        for (int64_t j = 0; j < L; j++)
            memcpy(dv + (t0 + j) * ldv + h * vh, Dr + j * p, sizeof(float) * (size_t)p);
    }
}

void hm_fast_linattn_backward(HM_CPU_CTX, float *dphiq, float *dphik, float *dv, const float *dy,
                              const float *y, const float *den, const float *phiq,
                              const float *phik, const float *v, int64_t T, int64_t n_h,
                              int64_t F2, int64_t p, int64_t v_row_stride,
                              int64_t v_head_stride, int64_t chunk, const float *saved, void *ws,
                              size_t ws_size)
{
    if (T <= 0 || n_h <= 0 || p <= 0 || F2 <= 0)
        return;
    const int64_t C = hm_linattn_chunk(chunk), nc = (T + C - 1) / C;
    const int64_t SB = hm_linattn_saved_block(F2, p); /* backend.h's saved block */
    const int64_t states = state_floats(T, n_h, F2, p, C, 1), per = scratch_floats(F2, p, C, 1);
    const int64_t ntask = n_h * nc, ldq = n_h * F2, P1 = p + 1;
    const int64_t ldv = v_row_stride, vh = v_head_stride;
    float *Sk = ws, *Dq = Sk + states / 2, *scr = Sk + states;
    const int own = dphiq && !saved; /* Ŝ^T computed here, not handed over */
    int nthr = pick_threads(ws_size, states, per, ntask, T * n_h * F2 * p);
#pragma omp parallel num_threads(nthr)
    {
        float *my = scr + (int64_t)omp_get_thread_num() * per;
#pragma omp for schedule(static)
        for (int64_t task = 0; task < ntask; task++) { /* (1) the chunk's own states */
            int64_t h = task / nc, c = task % nc, t0 = c * C, L = imin(C, T - t0);
            float *Xh = my, *Xc = Xh + C * P1;
            if (own) { /* Ŝ^T = V̂^T ΦK */
                chunk_vhat(Xh, v, ldv, vh, p, h, t0, L);
                pack_rows(Xc, phik + (t0 * n_h + h) * F2, ldq, L, F2);
                hm_tile_gemm(Sk + task * SB, F2, Xh, 1, P1, Xc, F2, P1, F2, L, 0);
            }
            if (dphik || dv) { /* dŜ^T = Ĝ^T ΦQ */
                chunk_grads(Xh, dy, y, den, T, n_h, p, h, t0, L);
                pack_rows(Xc, phiq + (t0 * n_h + h) * F2, ldq, L, F2);
                hm_tile_gemm(Dq + task * SB, F2, Xh, 1, P1, Xc, F2, P1, F2, L, 0);
            }
        }
#pragma omp for schedule(static)
        for (int64_t h = 0; h < n_h; h++) { /* (2) carried-in / carried-back states */
            if (own)
                exclusive_scan(Sk + h * nc * SB, nc, SB, +1);
            if (dphik || dv)
                exclusive_scan(Dq + h * nc * SB, nc, SB, -1);
        }
#pragma omp for schedule(dynamic, 1)
        for (int64_t task = 0; task < ntask; task++) { /* (3) gradients */
            int64_t h = task / nc, c = task % nc, t0 = c * C, L = imin(C, T - t0);
            bwd_chunk(dphiq, dphik, dv, dy, y, den, phiq, phik, v, T, n_h, F2, p, ldv, vh, C, h,
                      t0, L, c == 0 ? NULL : (saved ? saved : Sk) + task * SB,
                      c == nc - 1 ? NULL : Dq + task * SB, my);
        }
    }
}

/* ---- cosine loss ------------------------------------------------------------
 * As hm_ref_cosine_loss (zero-norm rows: loss 1, gradient 0), rows in
 * parallel, per-row sums in double. */
void hm_fast_cosine_loss(HM_CPU_CTX, double *loss, float *da, const float *a, const float *b, int64_t N, int64_t d,
                           float scale)
{
    double total = 0;
#pragma omp parallel for schedule(static) reduction(+ : total) if (N * d >= HM_PAR_MIN)
    for (int64_t t = 0; t < N; t++) {
        const float *ar = a + t * d, *br = b + t * d;
        double aa = 0, bb = 0, ab = 0;
#pragma omp simd reduction(+ : aa, bb, ab)
        for (int64_t i = 0; i < d; i++) {
            aa += (double)ar[i] * ar[i];
            bb += (double)br[i] * br[i];
            ab += (double)ar[i] * br[i];
        }
        float *g = da ? da + t * d : NULL;
        if (aa == 0 || bb == 0) {
            total += 1;
            if (g)
                memset(g, 0, sizeof(float) * (size_t)d);
            continue;
        }
        double inab = 1 / sqrt(aa * bb), c = ab * inab;
        total += 1 - c;
        if (g) {
            const float cb = (float)(-scale * inab), ca = (float)(scale * c / aa);
#pragma omp simd
            for (int64_t i = 0; i < d; i++)
                g[i] = cb * br[i] + ca * ar[i];
        }
    }
    *loss += total;
}
