/* fast_attention_cached.c — fast CPU attention of new rows against a KV
 * cache (hm_backend_attention_cached). Semantics: kernels/backend.h;
 * checked against hm_ref_attention_cached (ref_family.c) by
 * tests/test_kernels_family.c.
 *
 * T = 1 (a decoding step: memory-bound on reading the cache). One OpenMP
 * region; a task is (kv head g, a batch of its query heads, a block of
 * HM_ATTC_BLOCK or more positions). It reads each k row once for the whole
 * batch (the scores go to the heads' scratch rows), takes the block max and
 * the exps in place, then reads each v row once, with one axpy per head into
 * stack accumulators. A head with one block writes its output; otherwise
 * the block leaves (max, sum, acc[p]) in its own spent score area (a block
 * holds ≥ HM_ATTC_BLOCK ≥ p + 2 positions) and, after the barrier, the
 * blocks of a head are merged (split softmax: rescaled by exp(m_b − M)).
 * Blocks depend on n only, so the result does not depend on the thread count.
 *
 * T > 1 (a prefill chunk against a long cache), per head, heads in turn:
 *   S [T, n] = Q_h K_g^T / sqrt(p);  row t: softmax over s ≤ P0 + t, zero
 *   past it (only the last T columns are ever masked), normalized;
 *   out_h = P V_g.
 * With BLAS, both products are one multi-threaded sgemm each, outside any
 * OpenMP region (backend.h, threads), and the softmax an OpenMP loop over
 * rows. Without BLAS (or sizes past int), the products are cpu_tiles.h
 * register tiles in OpenMP loops: S over blocks of HM_ATTC_KN keys (each
 * transposed on the stack, HM_ATTC_KD dims at a time), P V over blocks of
 * HM_ATTC_RB rows, each reading only the columns its rows can see.
 *
 * Measured (2 threads, AMD EPYC with AVX-512, n_h = n_kv = 8, p = 64):
 * T = 1, n = 4097: ref 4.1 ms, fast 0.84 ms (≈ 20 GB/s of cache read);
 * T = 64, P0 = 16384: ref 3.5 s, fast 42 ms with BLAS (QK^T ≈ 10 ms, P V ≈
 * 18 ms, the scalar expf ≈ 15 ms: a vectorized exp is the next step), 64 ms
 * with the tiles.
 *
 * Gotchas: q rows are strided (the [T, n_h, 3p] layout) but p-contiguous;
 * the exps use expf as ref does (the scores, not the exps, differ in
 * rounding: other summation order). */
#include <math.h>
#include <string.h>

#include "cpu_family.h"
#include "cpu_simd.h"
#include "cpu_tiles.h"

#ifdef HM_HAVE_BLAS
#include <cblas.h>
#endif

#define HM_PAR_MIN 32768
#define HM_ATTC_BLOCK 1024 /* min positions per task of a decoding step */
#define HM_ATTC_ACC 1024   /* stack accumulator floats of a task (heads × p) */
#define HM_ATTC_HB 32      /* query heads per task at most */
#define HM_ATTC_PMAX 512   /* p above this: ref (p + 2 ≤ HM_ATTC_BLOCK, p ≤ ACC) */
#define HM_ATTC_KN 64      /* keys per transposed block (no-BLAS scores) */
#define HM_ATTC_KD 128     /* dims per transposed block */
#define HM_ATTC_RB 8       /* query rows per P V task (no-BLAS) */

static int64_t imin(int64_t a, int64_t b) { return a < b ? a : b; }

/* ---- T = 1 ------------------------------------------------------------------ */

/* Heads h0 .. h0 + nh − 1 (kv head g) over positions [s0, s1). sc: [n_h, n]
 * scratch rows. Writes out_h (one block: s0 = 0, s1 = n) or the partial
 * (max, sum, acc[p]) at sc[h n + s0]. */
HM_CLONES static void step_block(float *out, float *sc, const float *q, int64_t qhs,
                                 const float *kc, const float *vc, int64_t n, int64_t n_kv,
                                 int64_t p, int64_t g, int64_t h0, int64_t nh, int64_t s0,
                                 int64_t s1, float scale)
{
    float acc[HM_ATTC_ACC], mx[HM_ATTC_HB];
    double sum[HM_ATTC_HB];
    const int64_t ld = n_kv * p;
    for (int64_t s = s0; s < s1; s++) {
        const float *k = kc + s * ld + g * p;
        for (int64_t j = 0; j < nh; j++) {
            const float *qh = q + (h0 + j) * qhs;
            float a = 0;
#pragma omp simd reduction(+ : a)
            for (int64_t i = 0; i < p; i++)
                a += qh[i] * k[i];
            sc[(h0 + j) * n + s] = a * scale;
        }
    }
    for (int64_t j = 0; j < nh; j++) {
        float *r = sc + (h0 + j) * n, m = -INFINITY;
        for (int64_t s = s0; s < s1; s++)
            m = r[s] > m ? r[s] : m;
        double l = 0;
        for (int64_t s = s0; s < s1; s++) {
            r[s] = expf(r[s] - m);
            l += r[s];
        }
        mx[j] = m;
        sum[j] = l;
    }
    memset(acc, 0, sizeof(float) * (size_t)(nh * p));
    for (int64_t s = s0; s < s1; s++) {
        const float *v = vc + s * ld + g * p;
        for (int64_t j = 0; j < nh; j++) {
            const float w = sc[(h0 + j) * n + s];
            float *a = acc + j * p;
#pragma omp simd
            for (int64_t i = 0; i < p; i++)
                a[i] += w * v[i];
        }
    }
    for (int64_t j = 0; j < nh; j++) {
        if (s0 == 0 && s1 == n) {
            const float inv = (float)(1.0 / sum[j]);
            for (int64_t i = 0; i < p; i++)
                out[(h0 + j) * p + i] = acc[j * p + i] * inv;
        } else {
            float *st = sc + (h0 + j) * n + s0;
            st[0] = mx[j];
            st[1] = (float)sum[j];
            memcpy(st + 2, acc + j * p, sizeof(float) * (size_t)p);
        }
    }
}

/* out_h from the partials of its nb blocks (split softmax). */
static void step_merge(float *o, const float *r, int64_t n, int64_t nb, int64_t p)
{
    float M = -INFINITY;
    for (int64_t b = 0; b < nb; b++)
        M = r[b * n / nb] > M ? r[b * n / nb] : M;
    double L = 0;
    memset(o, 0, sizeof(float) * (size_t)p);
    for (int64_t b = 0; b < nb; b++) {
        const float *st = r + b * n / nb, w = expf(st[0] - M);
        L += (double)w * st[1];
        for (int64_t i = 0; i < p; i++)
            o[i] += w * st[2 + i];
    }
    const float inv = (float)(1.0 / L);
    for (int64_t i = 0; i < p; i++)
        o[i] *= inv;
}

static void attention_step(float *out, const float *q, int64_t qhs, const float *kc,
                           const float *vc, int64_t n, int64_t n_h, int64_t n_kv, int64_t p,
                           float *scratch)
{
    const int64_t grp = n_h / n_kv, hb = imin(imin(grp, HM_ATTC_HB), HM_ATTC_ACC / p);
    const int64_t nbat = (grp + hb - 1) / hb, nb = n / HM_ATTC_BLOCK > 1 ? n / HM_ATTC_BLOCK : 1;
    const int64_t ntask = n_kv * nbat * nb;
    const float scale = 1.0f / sqrtf((float)p);
#pragma omp parallel if (n * n_kv * p >= HM_PAR_MIN && ntask > 1)
    {
#pragma omp for schedule(dynamic, 1)
        for (int64_t task = 0; task < ntask; task++) {
            const int64_t b = task % nb, bat = task / nb % nbat, g = task / nb / nbat;
            const int64_t h0 = g * grp + bat * hb, nh = imin(hb, (g + 1) * grp - h0);
            step_block(out, scratch, q, qhs, kc, vc, n, n_kv, p, g, h0, nh, b * n / nb,
                       (b + 1) * n / nb, scale);
        }
        if (nb > 1) {
#pragma omp for schedule(static)
            for (int64_t h = 0; h < n_h; h++)
                step_merge(out + h * p, scratch + h * n, n, nb, p);
        }
    }
}

/* ---- T > 1 ------------------------------------------------------------------ */

/* r [n]: softmax over r[0 .. m), normalized; 0 past it. */
HM_CLONES static void softmax_row(float *r, int64_t m, int64_t n)
{
    float mx = -INFINITY;
    for (int64_t s = 0; s < m; s++)
        mx = r[s] > mx ? r[s] : mx;
    double sum = 0;
    for (int64_t s = 0; s < m; s++) {
        r[s] = expf(r[s] - mx);
        sum += r[s];
    }
    const float inv = (float)(1.0 / sum);
#pragma omp simd
    for (int64_t s = 0; s < m; s++)
        r[s] *= inv;
    for (int64_t s = m; s < n; s++)
        r[s] = 0;
}

/* Row t of S [T, n] sees s ≤ P0 + t. */
static void chunk_softmax(float *S, int64_t P0, int64_t T, int64_t n)
{
#pragma omp parallel for schedule(static) if (T * n >= HM_PAR_MIN)
    for (int64_t t = 0; t < T; t++)
        softmax_row(S + t * n, P0 + t + 1, n);
}

/* S [T, n] = scale · Q K^T with register tiles. q: rows at qrs; k: rows at ldk. */
static void chunk_scores_tiles(float *S, const float *q, int64_t qrs, const float *k,
                               int64_t ldk, int64_t T, int64_t n, int64_t p, float scale)
{
    const int64_t nblk = (n + HM_ATTC_KN - 1) / HM_ATTC_KN;
#pragma omp parallel for schedule(dynamic, 1) if (T * n * p >= HM_PAR_MIN)
    for (int64_t jb = 0; jb < nblk; jb++) {
        float kt[HM_ATTC_KD * HM_ATTC_KN];
        const int64_t j0 = jb * HM_ATTC_KN, nc = imin(HM_ATTC_KN, n - j0);
        for (int64_t d0 = 0; d0 < p; d0 += HM_ATTC_KD) {
            const int64_t dc = imin(HM_ATTC_KD, p - d0);
            hm_tile_transpose_pad(kt, HM_ATTC_KN, k + j0 * ldk + d0, ldk, nc, dc);
            hm_tile_gemm(S + j0, n, q + d0, qrs, 1, kt, HM_ATTC_KN, T, nc, dc, d0 > 0);
        }
        for (int64_t t = 0; t < T; t++)
            for (int64_t j = 0; j < nc; j++)
                S[t * n + j0 + j] *= scale;
    }
}

/* o [T, p] (rows at ldo) = P [T, n] V (rows at ldv); row t reads s ≤ P0 + t. */
static void chunk_pv_tiles(float *o, int64_t ldo, const float *P, const float *v, int64_t ldv,
                           int64_t P0, int64_t T, int64_t n, int64_t p)
{
    const int64_t nblk = (T + HM_ATTC_RB - 1) / HM_ATTC_RB;
#pragma omp parallel for schedule(dynamic, 1) if (T * n * p >= HM_PAR_MIN)
    for (int64_t rb = nblk - 1; rb >= 0; rb--) { /* the longest rows first */
        const int64_t t0 = rb * HM_ATTC_RB, nr = imin(HM_ATTC_RB, T - t0);
        hm_tile_gemm(o + t0 * ldo, ldo, P + t0 * n, n, 1, v, ldv, nr, p, imin(n, P0 + t0 + nr), 0);
    }
}

#ifdef HM_HAVE_BLAS
static int fits_int(int64_t x) { return x > 0 && x <= INT32_MAX; }
#endif

static void attention_chunk(float *out, const float *q, int64_t qrs, int64_t qhs,
                            const float *kc, const float *vc, int64_t P0, int64_t T,
                            int64_t n_h, int64_t n_kv, int64_t p, float *S)
{
    const int64_t n = P0 + T, grp = n_h / n_kv, ldk = n_kv * p, ldo = n_h * p;
    const float scale = 1.0f / sqrtf((float)p);
#ifdef HM_HAVE_BLAS
    const int blas = fits_int(T) && fits_int(n) && qrs >= p && fits_int(qrs) && fits_int(ldk) &&
                     fits_int(ldo);
#endif
    for (int64_t h = 0; h < n_h; h++) {
        const float *qh = q + h * qhs, *k = kc + h / grp * p, *v = vc + h / grp * p;
        float *o = out + h * p;
#ifdef HM_HAVE_BLAS
        if (blas) {
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)T, (int)n, (int)p, scale,
                        qh, (int)qrs, k, (int)ldk, 0.0f, S, (int)n);
            chunk_softmax(S, P0, T, n);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)T, (int)p, (int)n, 1.0f,
                        S, (int)n, v, (int)ldk, 0.0f, o, (int)ldo);
            continue;
        }
#endif
        chunk_scores_tiles(S, qh, qrs, k, ldk, T, n, p, scale);
        chunk_softmax(S, P0, T, n);
        chunk_pv_tiles(o, ldo, S, v, ldk, P0, T, n, p);
    }
}

void hm_fast_attention_cached(HM_CPU_CTX, float *out, const float *q, int64_t q_row_stride,
                              int64_t q_head_stride, const float *kc, const float *vc, int64_t P0,
                              int64_t T, int64_t n_h, int64_t n_kv, int64_t p, float *scratch)
{
    if (T <= 0 || n_h <= 0 || p <= 0)
        return;
    if (p > HM_ATTC_PMAX) { /* precondition of the stack accumulators */
        hm_ref_attention_cached(ctx, out, q, q_row_stride, q_head_stride, kc, vc, P0, T, n_h,
                                n_kv, p, scratch);
        return;
    }
    if (T == 1)
        attention_step(out, q, q_head_stride, kc, vc, P0 + 1, n_h, n_kv, p, scratch);
    else
        attention_chunk(out, q, q_row_stride, q_head_stride, kc, vc, P0, T, n_h, n_kv, p,
                        scratch);
}
