/* fast_attention.c — fast CPU rotary and causal softmax attention.
 * Semantics: kernels/backend.h; checked against ref_attention.c.
 *
 * Attention forward: one OpenMP region of tasks, one per head × block of
 * HM_ATT_BQ = 64 queries against the keys the block sees. A thread keeps
 * one head's K transposed and V packed (copied when its next task is
 * another head or needs more keys); the scores and the weighted values are
 * register-tile GEMMs (cpu_tiles.h), the softmax vectorized between them.
 * Measured, 8 heads of 64, 2 threads (ms per call): T 512 2.3, 1024 8.5,
 * 2048 33 — against 8–11, 22, 80 for per-block sgemm calls around an
 * OpenMP softmax (K = 64 products are OpenBLAS's weak case) and 15, 62,
 * 283 for the round-1 kernel (scalar exp, P·V as axpys). Block rows are
 * padded past 4 KB multiples (att_ld): aligned rows shared one L1 set and
 * halved the speed at T = 1024.
 *
 * Attention backward: 64 × 64 register-tile blocks in three passes (pack,
 * key blocks, query blocks; see the section below), no BLAS. */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "cpu_backward.h"
#include "cpu_ops.h"
#include "cpu_simd.h"
#include "cpu_tiles.h"
#include "cpu_vexp.h"

/* R(θ) (sign 1) or its transpose R(θ)^T = R(−θ) (sign −1, for gradients),
 * in place, with the ref's angles and rounding (fp32 angle, cos/sin
 * rounded to fp32; negating sin is exact, so both are bit-identical to the
 * ref), cos/sin once per (position, frequency) instead of per head. */
static void rotate(float *x, int64_t T, int64_t n_h, int64_t r, int64_t row_stride,
                   int64_t head_stride, int64_t pos0, const float *inv_freq, float sign)
{
    int64_t half = r / 2;
#pragma omp parallel for schedule(static) if (T * n_h * r >= 32768)
    for (int64_t t = 0; t < T; t++)
        for (int64_t j = 0; j < half; j++) {
            float theta = (float)(pos0 + t) * inv_freq[j];
            float c = (float)cos((double)theta), s = sign * (float)sin((double)theta);
            for (int64_t h = 0; h < n_h; h++) {
                float *v = x + t * row_stride + h * head_stride;
                float a = v[j], b = v[j + half];
                v[j] = a * c - b * s;
                v[j + half] = b * c + a * s;
            }
        }
}

void hm_fast_rotary_forward(HM_CPU_CTX, float *x, int64_t T, int64_t n_h, int64_t r, int64_t row_stride,
                            int64_t head_stride, int64_t pos0, const float *inv_freq)
{
    rotate(x, T, n_h, r, row_stride, head_stride, pos0, inv_freq, 1.0f);
}

void hm_fast_rotary_backward(HM_CPU_CTX, float *dx, int64_t T, int64_t n_h, int64_t r,
                             int64_t row_stride, int64_t head_stride, int64_t pos0,
                             const float *inv_freq)
{
    rotate(dx, T, n_h, r, row_stride, head_stride, pos0, inv_freq, -1.0f);
}

/* Query rows per task: one task is one head's block of HM_ATT_BQ queries
 * against the keys it sees (0 .. block end), both products register-tile
 * GEMMs (cpu_tiles.h) on one thread; tasks spread over the OpenMP pool,
 * head by head, each head's longest blocks first. */
#define HM_ATT_BQ 64

/* Row stride of the per-thread blocks: round(T) plus one tile, so that rows
 * are never a multiple of 4 KB apart (they would share one L1 set: at
 * T = 1024 that halved the products' speed). */
static int64_t att_ld(int64_t T)
{
    return hm_tile_round(T > 0 ? T : 1) + HM_TILE_KB;
}

/* Per thread: its copy of one head's K transposed, [p, round(T)], and of
 * its V packed, [round(T), p] (rows 3d apart in qkv are 4 KB multiples
 * apart at Pythia widths: one L1 set), then a block of scores
 * [BQ, round(T)]. */
static int64_t att_per_thread_floats(int64_t T, int64_t p)
{
    return (2 * p + HM_ATT_BQ) * att_ld(T);
}

size_t hm_fast_attention_ws_size(HM_CPU_CTX, int64_t T, int64_t n_h, int64_t p)
{
    (void)n_h;
    int nt = omp_get_max_threads();
    return sizeof(float) * (size_t)att_per_thread_floats(T, p) * (size_t)(nt > 0 ? nt : 1);
}

/* One score row of raw q·k: softmax of scale·row over its n live keys (lse
 * kept), zeros for the masked keys n..e−1 the block's product reads. */
HM_CLONES static void att_row_softmax(float *row, int64_t n, int64_t e, float scale, float *lse)
{
    float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
    for (int64_t j = 0; j < n; j++) {
        row[j] *= scale;
        mx = row[j] > mx ? row[j] : mx;
    }
    float sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < n; j++) {
        row[j] = hm_vexpf(row[j] - mx);
        sum += row[j];
    }
    float inv = 1.0f / sum;
#pragma omp simd
    for (int64_t j = 0; j < n; j++)
        row[j] *= inv;
    for (int64_t j = n; j < e; j++)
        row[j] = 0.0f;
    *lse = mx + logf(sum);
}

/* Per head h, rows [t0, t1): S = Q K[0:t1]^T (tile GEMM against kt, this
 * thread's transposed K of head h holding at least keys 0..t1−1), softmax
 * rows, out = P V[0:t1] (tile GEMM against vp, its packed V). sc: [BQ, Tp].
 * Score columns past t1 (the tile's rounding) are computed, never read. */
static void att_task(float *out, float *lse, const float *qkv, const float *kt, const float *vp,
                     float *sc, int64_t T, int64_t n_h, int64_t p, int64_t h, int64_t t0,
                     int64_t t1)
{
    const int64_t d = n_h * p, ld = 3 * d, Tp = att_ld(T), m = t1 - t0;
    const float *q = qkv + h * 3 * p;
    const float scale = (float)(1.0 / sqrt((double)p));
    hm_tile_gemm(sc, Tp, q + t0 * ld, ld, 1, kt, Tp, m, hm_tile_round(t1), p, 0);
    for (int64_t i = 0; i < m; i++) {
        float l;
        att_row_softmax(sc + i * Tp, t0 + i + 1, t1, scale, &l);
        if (lse)
            lse[h * T + t0 + i] = l;
    }
    hm_tile_gemm(out + t0 * d + h * p, d, sc, Tp, 1, vp, p, m, p, t1, 0);
}

/* A workspace for fewer threads than the pool runs fewer threads
 * (precondition: one thread's att_per_thread_floats). */
void hm_fast_attention_forward(HM_CPU_CTX, float *out, float *lse, const float *qkv, int64_t T,
                               int64_t n_h, int64_t p, void *ws, size_t ws_size)
{
    if (T <= 0 || n_h <= 0 || p <= 0)
        return;
    const int64_t Tp = att_ld(T), per = att_per_thread_floats(T, p), ld = 3 * n_h * p;
    int64_t avail = (int64_t)(ws_size / (sizeof(float) * (size_t)per));
    int nthr = omp_get_max_threads();
    if (avail < nthr)
        nthr = (int)(avail > 0 ? avail : 1);
    const int64_t nblk = (T + HM_ATT_BQ - 1) / HM_ATT_BQ, ntask = n_h * nblk;
    if (ntask < nthr)
        nthr = (int)ntask;
    float *base = ws;
#pragma omp parallel num_threads(nthr)
    {
        float *kt = base + (int64_t)omp_get_thread_num() * per, *vp = kt + p * Tp;
        float *sc = vp + p * Tp;
        int64_t kt_head = -1, kt_keys = 0; /* what kt and vp hold */
#pragma omp for schedule(dynamic, 1)
        for (int64_t task = 0; task < ntask; task++) {
            int64_t h = task / nblk, blk = nblk - 1 - task % nblk; /* longest first */
            int64_t t0 = blk * HM_ATT_BQ, t1 = t0 + HM_ATT_BQ < T ? t0 + HM_ATT_BQ : T;
            if (h != kt_head || t1 > kt_keys) {
                hm_tile_transpose_pad(kt, Tp, qkv + h * 3 * p + p, ld, t1, p);
                for (int64_t j = 0; j < t1; j++)
                    memcpy(vp + j * p, qkv + j * ld + h * 3 * p + 2 * p, sizeof(float) * (size_t)p);
                kt_head = h, kt_keys = t1;
            }
            att_task(out, lse, qkv, kt, vp, sc, T, n_h, p, h, t0, t1);
        }
    }
}

/* ---- attention backward ------------------------------------------------------
 * Register tiles (cpu_tiles.h) over 64 × 64 blocks, per group of heads, in
 * three passes of one OpenMP region:
 *   0. tasks of (head, row block): the head's Q, dO and K rows packed
 *      ([T, p] each: in qkv and dout they are 2–6 KB apart, and a tile
 *      walking them down a column would map them to one L1 set) and
 *      D_i = dO_i · O_i;
 *   A. tasks of (head, key block kb), longest first: for each query block
 *      qb ≥ kb, S = Q K^T, P = exp(S / sqrt(p) − lse) (0 past the
 *      diagonal), dP = dO V^T written into the head's dS buffer [T, ldS],
 *      dS = P ⊙ (dP − D) / sqrt(p) in place; dV_kb += P^T dO_qb and
 *      dK_kb += dS^T Q_qb in the task's own accumulators (no reduction
 *      between threads), written to dqkv at the end;
 *   B. tasks of (head, query block): dQ = dS K over the keys it sees.
 * Every output is one sum in increasing order of the query (dK, dV) or key
 * (dQ) index, whatever the thread count. */
#define HM_ATTB 64                  /* query and key rows per block */
#define HM_ATTB_GROUP (1 << 24)    /* floats of per-head buffers per group (64 MB) */

/* Row stride of a dS buffer: whole 64-column blocks (a tile writes all 64
 * columns of the last, partial key block) plus one tile, off 4 KB multiples. */
static int64_t attb_ld(int64_t T)
{
    return (T + HM_ATTB - 1) / HM_ATTB * HM_ATTB + HM_TILE_KB;
}

/* Floats of one head's buffers: dS [T, ldS], Q, dO, K [T, p], D [T]. */
static int64_t attb_head_floats(int64_t T, int64_t p)
{
    return hm_tile_round(T * attb_ld(T) + 3 * T * p + T);
}

/* Per thread: Kt, Vt [p, B] (the key block transposed), dK, dV [B, p]
 * accumulators, S [B, B]. */
static int64_t attb_per_thread(int64_t p)
{
    return hm_tile_round(2 * p * HM_ATTB + 2 * HM_ATTB * p + HM_ATTB * HM_ATTB);
}

/* Heads per group. */
static int64_t attb_group(int64_t T, int64_t n_h, int64_t p)
{
    int64_t g = HM_ATTB_GROUP / attb_head_floats(T, p);
    return g < 1 ? 1 : g > n_h ? n_h : g;
}

size_t hm_fast_attention_backward_ws_size(HM_CPU_CTX, int64_t T, int64_t n_h, int64_t p)
{
    if (T < 1)
        T = 1;
    int nt = omp_get_max_threads();
    return sizeof(float) * (size_t)(attb_group(T, n_h, p) * attb_head_floats(T, p) +
                                    attb_per_thread(p) * (nt > 0 ? nt : 1));
}

/* One head's buffers inside a group's block of the workspace. */
struct attb_head {
    float *dS, *Q, *dO, *K, *D;
};

static struct attb_head attb_bufs(float *base, int64_t T, int64_t p)
{
    struct attb_head b = {.dS = base};
    b.Q = b.dS + T * attb_ld(T), b.dO = b.Q + T * p, b.K = b.dO + T * p, b.D = b.K + T * p;
    return b;
}

/* Pass 0 for head h, rows [r0, r0 + m). */
static void attb_pack_task(const struct attb_head *b, const float *dout, const float *qkv,
                           const float *out, int64_t n_h, int64_t p, int64_t h, int64_t r0,
                           int64_t m)
{
    const int64_t d = n_h * p, ld = 3 * d;
    for (int64_t r = r0; r < r0 + m; r++) {
        const float *q = qkv + r * ld + h * 3 * p, *dO = dout + r * d + h * p;
        const float *O = out + r * d + h * p;
        memcpy(b->Q + r * p, q, sizeof(float) * (size_t)p);
        memcpy(b->K + r * p, q + p, sizeof(float) * (size_t)p);
        memcpy(b->dO + r * p, dO, sizeof(float) * (size_t)p);
        float s = 0;
        for (int64_t c = 0; c < p; c++)
            s += dO[c] * O[c];
        b->D[r] = s;
    }
}

/* Rows r < m of one (query block, key block) pair, in place: S (raw q·k,
 * rows at B) becomes P, dP (rows at ldd) becomes dS. Keys past the
 * diagonal (k0 + j > q0 + r) and past the block's nk keys are zero in both
 * (the 64 columns a tile reads). */
HM_CLONES static void attb_rows(float *S, float *dP, int64_t ldd, int64_t m, int64_t nk,
                                int64_t q0, int64_t k0, const float *lse, const float *D,
                                float scale)
{
    for (int64_t r = 0; r < m; r++) {
        float *sr = S + r * HM_ATTB, *dr = dP + r * ldd;
        int64_t n = q0 + r - k0 + 1;
        n = n < nk ? n : nk;
        const float l = lse[r], Di = D[r];
#pragma omp simd
        for (int64_t j = 0; j < n; j++) {
            const float pij = hm_vexpf(sr[j] * scale - l);
            sr[j] = pij;
            dr[j] = pij * (dr[j] - Di) * scale;
        }
        for (int64_t j = n; j < HM_ATTB; j++)
            sr[j] = dr[j] = 0.0f;
    }
}

/* Pass A for head h, key block [k0, k0 + nk): dK, dV rows of the block
 * written into dqkv; the dS blocks of every query block from it on into the
 * head's buffer. */
static void attb_key_task(float *dqkv, const struct attb_head *b, const float *qkv,
                          const float *lse, int64_t T, int64_t n_h, int64_t p, int64_t h,
                          int64_t k0, int64_t nk, float *my)
{
    const int64_t ld = 3 * n_h * p, B = HM_ATTB, ldS = attb_ld(T);
    const float scale = (float)(1.0 / sqrt((double)p));
    float *Kt = my, *Vt = Kt + p * B, *dK = Vt + p * B, *dV = dK + B * p, *S = dV + B * p;
    hm_tile_transpose_pad(Kt, B, b->K + k0 * p, p, nk, p);
    hm_tile_transpose_pad(Vt, B, qkv + h * 3 * p + 2 * p + k0 * ld, ld, nk, p);
    for (int64_t q0 = k0; q0 < T; q0 += B) {
        const int64_t m = q0 + B < T ? B : T - q0;
        const float *Q = b->Q + q0 * p, *dO = b->dO + q0 * p;
        float *dP = b->dS + q0 * ldS + k0;
        hm_tile_gemm(S, B, Q, p, 1, Kt, B, m, B, p, 0);
        hm_tile_gemm(dP, ldS, dO, p, 1, Vt, B, m, B, p, 0);
        attb_rows(S, dP, ldS, m, nk, q0, k0, lse + h * T + q0, b->D + q0, scale);
        const int acc = q0 > k0;
        hm_tile_gemm(dV, p, S, 1, B, dO, p, nk, p, m, acc);  /* P^T dO */
        hm_tile_gemm(dK, p, dP, 1, ldS, Q, p, nk, p, m, acc); /* dS^T Q */
    }
    for (int64_t j = 0; j < nk; j++) {
        float *row = dqkv + (k0 + j) * ld + h * 3 * p;
        memcpy(row + p, dK + j * p, sizeof(float) * (size_t)p);
        memcpy(row + 2 * p, dV + j * p, sizeof(float) * (size_t)p);
    }
}

/* A workspace smaller than hm_fast_attention_backward_ws_size makes smaller
 * head groups, then fewer threads; one too small for one head's buffers and
 * one thread's scratch runs the ref (which needs 2 T floats). */
void hm_fast_attention_backward(HM_CPU_CTX, float *dqkv, const float *dout, const float *qkv,
                                const float *out, const float *lse, int64_t T, int64_t n_h,
                                int64_t p, void *ws, size_t ws_size)
{
    if (T <= 0 || n_h <= 0 || p <= 0)
        return;
    const int64_t hf = attb_head_floats(T, p), per = attb_per_thread(p), ldS = attb_ld(T);
    const int64_t nb = (T + HM_ATTB - 1) / HM_ATTB, wsf = (int64_t)(ws_size / sizeof(float));
    const int64_t ld = 3 * n_h * p;
    if (hf + per > wsf) {
        hm_ref_attention_backward(ctx, dqkv, dout, qkv, out, lse, T, n_h, p, ws, ws_size);
        return;
    }
    int nthr = omp_get_max_threads();
    if (nthr < 1 || T * T * n_h * p < (1 << 20)) /* tiny: the pool's start costs more */
        nthr = 1;
    int64_t G = attb_group(T, n_h, p);
    while (G > 1 && G * hf + nthr * per > wsf)
        G--;
    while (nthr > 1 && G * hf + nthr * per > wsf)
        nthr--;
    float *base = ws, *scr = base + G * hf;
#pragma omp parallel num_threads(nthr)
    {
        float *my = scr + (int64_t)omp_get_thread_num() * per;
        for (int64_t h0 = 0; h0 < n_h; h0 += G) {
            const int64_t g = h0 + G < n_h ? G : n_h - h0, ntask = g * nb;
#pragma omp for schedule(static)
            for (int64_t task = 0; task < ntask; task++) { /* 0: pack, D */
                const int64_t hh = task % g, r0 = task / g * HM_ATTB;
                const struct attb_head b = attb_bufs(base + hh * hf, T, p);
                attb_pack_task(&b, dout, qkv, out, n_h, p, h0 + hh, r0,
                               r0 + HM_ATTB < T ? HM_ATTB : T - r0);
            }
#pragma omp for schedule(dynamic, 1)
            for (int64_t task = 0; task < ntask; task++) { /* A: key blocks, longest first */
                const int64_t hh = task % g, k0 = task / g * HM_ATTB;
                const struct attb_head b = attb_bufs(base + hh * hf, T, p);
                attb_key_task(dqkv, &b, qkv, lse, T, n_h, p, h0 + hh, k0,
                              k0 + HM_ATTB < T ? HM_ATTB : T - k0, my);
            }
#pragma omp for schedule(dynamic, 1)
            for (int64_t task = 0; task < ntask; task++) { /* B: dQ, longest first */
                const int64_t hh = task % g, q0 = (nb - 1 - task / g) * HM_ATTB;
                const int64_t m = q0 + HM_ATTB < T ? HM_ATTB : T - q0;
                const struct attb_head b = attb_bufs(base + hh * hf, T, p);
                hm_tile_gemm(dqkv + q0 * ld + (h0 + hh) * 3 * p, ld, b.dS + q0 * ldS, ldS, 1,
                             b.K, p, m, p, q0 + m, 0);
            }
        }
    }
}
