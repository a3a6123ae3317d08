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
 * halved the speed at T = 1024. */
#include <math.h>

#include "cpu_ops.h"
#include <omp.h>
#include <string.h>

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
