/* cpu_tiles.c — register-tile kernels shared by the chunked CPU linear
 * attention and selective scan (cpu_tiles.h). Tiles of HM_TILE_RB rows ×
 * HM_TILE_KB columns held in registers, k innermost-but-one, stride-1
 * along the columns; compiled for AVX-512F, AVX2+FMA and baseline
 * (cpu_simd.h). */
#include <string.h>

#include "cpu_simd.h"
#include "cpu_tiles.h"

#define HM_TILE_RB 4   /* rows per tile */
#define HM_TILE_KK 256 /* k rows per packed column-tail block */

static int64_t imin(int64_t a, int64_t b) { return a < b ? a : b; }

HM_CLONES void hm_tile_tri_scores(float *M, int64_t ldm, const float *X, int64_t ldx,
                                  const float *Yt, int64_t ldy, int64_t L, int64_t n)
{
    for (int64_t i0 = 0; i0 < L; i0 += HM_TILE_RB) {
        int64_t nr = imin(HM_TILE_RB, L - i0), ntile = hm_tile_round(i0 + nr);
        const float *x0 = X + i0 * ldx;
        const float *x1 = nr > 1 ? x0 + ldx : x0, *x2 = nr > 2 ? x0 + 2 * ldx : x0;
        const float *x3 = nr > 3 ? x0 + 3 * ldx : x0;
        for (int64_t j0 = 0; j0 < ntile; j0 += HM_TILE_KB) {
            float a0[HM_TILE_KB] = {0}, a1[HM_TILE_KB] = {0}, a2[HM_TILE_KB] = {0};
            float a3[HM_TILE_KB] = {0};
            for (int64_t f = 0; f < n; f++) {
                const float *yr = Yt + f * ldy + j0;
                const float c0 = x0[f], c1 = x1[f], c2 = x2[f], c3 = x3[f];
#pragma omp simd
                for (int jj = 0; jj < HM_TILE_KB; jj++) {
                    a0[jj] += c0 * yr[jj];
                    a1[jj] += c1 * yr[jj];
                    a2[jj] += c2 * yr[jj];
                    a3[jj] += c3 * yr[jj];
                }
            }
            float *m0 = M + i0 * ldm + j0;
            for (int jj = 0; jj < HM_TILE_KB; jj++)
                m0[jj] = a0[jj];
            if (nr > 1)
                for (int jj = 0; jj < HM_TILE_KB; jj++)
                    m0[ldm + jj] = a1[jj];
            if (nr > 2)
                for (int jj = 0; jj < HM_TILE_KB; jj++)
                    m0[2 * ldm + jj] = a2[jj];
            if (nr > 3)
                for (int jj = 0; jj < HM_TILE_KB; jj++)
                    m0[3 * ldm + jj] = a3[jj];
        }
    }
}

/* Eight rows of Y at a time, so that each row of Yt gets 8 consecutive
 * floats per store group (a row-at-a-time walk is a scalar store per
 * element); Y's rows are often far apart (the heads of a fused [T, n_h, F2]
 * tensor), but 8 of them stay in L1. */
HM_CLONES void hm_tile_transpose_pad(float *Yt, int64_t ldy, const float *Y, int64_t ldx,
                                     int64_t L, int64_t n)
{
    int64_t j = 0;
    for (; j + 8 <= L; j += 8) {
        const float *y0 = Y + j * ldx, *y1 = y0 + ldx, *y2 = y1 + ldx, *y3 = y2 + ldx;
        const float *y4 = y3 + ldx, *y5 = y4 + ldx, *y6 = y5 + ldx, *y7 = y6 + ldx;
        for (int64_t f = 0; f < n; f++) {
            float *o = Yt + f * ldy + j;
            o[0] = y0[f];
            o[1] = y1[f];
            o[2] = y2[f];
            o[3] = y3[f];
            o[4] = y4[f];
            o[5] = y5[f];
            o[6] = y6[f];
            o[7] = y7[f];
        }
    }
    for (; j < L; j++) {
        const float *yr = Y + j * ldx;
        for (int64_t f = 0; f < n; f++)
            Yt[f * ldy + j] = yr[f];
    }
    for (int64_t f = 0; f < n; f++)
        for (int64_t jj = L; jj < ldy; jj++)
            Yt[f * ldy + jj] = 0;
}

/* acc rows r < nr of a 4 × 16 tile → Cm rows (= or +=), the first nc columns. */
static inline __attribute__((always_inline)) void tile_store(float *o, int64_t ldc, int64_t nr,
                                                             int64_t nc, const float *a0,
                                                             const float *a1, const float *a2,
                                                             const float *a3, int accumulate)
{
    const float *acc[HM_TILE_RB] = {a0, a1, a2, a3};
    if (nc == HM_TILE_KB) {
        for (int64_t r = 0; r < nr; r++) {
            float *orow = o + r * ldc;
            const float *ar = acc[r];
            if (accumulate) {
#pragma omp simd
                for (int jj = 0; jj < HM_TILE_KB; jj++)
                    orow[jj] += ar[jj];
            } else {
#pragma omp simd
                for (int jj = 0; jj < HM_TILE_KB; jj++)
                    orow[jj] = ar[jj];
            }
        }
        return;
    }
    for (int64_t r = 0; r < nr; r++) {
        float *orow = o + r * ldc;
        if (accumulate)
            for (int64_t jj = 0; jj < nc; jj++)
                orow[jj] += acc[r][jj];
        else
            for (int64_t jj = 0; jj < nc; jj++)
                orow[jj] = acc[r][jj];
    }
}

/* The k range [*lo, *hi) where the rows [i0, i0 + nr) × columns [j0, ...)
 * of a tile can meet a nonzero product under tri. */
static inline __attribute__((always_inline)) void tile_krange(enum hm_tile_tri tri, int64_t i0,
                                                              int64_t nr, int64_t j0, int64_t K,
                                                              int64_t *lo, int64_t *hi)
{
    *lo = 0;
    *hi = K;
    if (tri == HM_TILE_A_LOWER)
        *hi = imin(K, i0 + nr);
    else if (tri == HM_TILE_A_UPPER)
        *lo = imin(K, i0);
    else if (tri == HM_TILE_B_LOWER)
        *lo = imin(K, j0);
}

/* Full 16-column tiles row block by row block; then the column tail (N not
 * a multiple of 16) against one zero-padded copy of its columns per
 * HM_TILE_KK rows of B, made once for all row blocks (not once per row
 * block: with N = p + 1 that copy and its clearing cost as much as the
 * products). For K > HM_TILE_KK the tail columns are summed into Cm per
 * HM_TILE_KK rows of k (still in increasing k order). A tail of one or two
 * columns with A read transposed (ars = 1) is a vector loop along i
 * instead (15/16 of a tile would be padding). */
HM_CLONES void hm_tile_gemm_tri(float *Cm, int64_t ldc, const float *A, int64_t ars,
                                int64_t acs, const float *B, int64_t ldb, int64_t M, int64_t N,
                                int64_t K, int accumulate, enum hm_tile_tri tri)
{
    const int64_t Nf = N / HM_TILE_KB * HM_TILE_KB;
    for (int64_t i0 = 0; i0 < M; i0 += HM_TILE_RB) {
        int64_t nr = imin(HM_TILE_RB, M - i0);
        const float *r0 = A + i0 * ars;
        const float *r1 = nr > 1 ? r0 + ars : r0, *r2 = nr > 2 ? r0 + 2 * ars : r0;
        const float *r3 = nr > 3 ? r0 + 3 * ars : r0;
        for (int64_t j0 = 0; j0 < Nf; j0 += HM_TILE_KB) {
            float a0[HM_TILE_KB] = {0}, a1[HM_TILE_KB] = {0}, a2[HM_TILE_KB] = {0};
            float a3[HM_TILE_KB] = {0};
            int64_t klo, khi;
            tile_krange(tri, i0, nr, j0, K, &klo, &khi);
            for (int64_t k = klo; k < khi; k++) {
                const float *br = B + k * ldb + j0;
                const float c0 = r0[k * acs], c1 = r1[k * acs], c2 = r2[k * acs];
                const float c3 = r3[k * acs];
#pragma omp simd
                for (int jj = 0; jj < HM_TILE_KB; jj++) {
                    a0[jj] += c0 * br[jj];
                    a1[jj] += c1 * br[jj];
                    a2[jj] += c2 * br[jj];
                    a3[jj] += c3 * br[jj];
                }
            }
            tile_store(Cm + i0 * ldc + j0, ldc, nr, HM_TILE_KB, a0, a1, a2, a3, accumulate);
        }
    }
    if (Nf == N)
        return;
    const int64_t nc = N - Nf;
    if (nc <= 2 && ars == 1) { /* narrow tail (N = p + 1): vectors along i, not j */
        for (int64_t jj = 0; jj < nc; jj++)
            for (int64_t i0 = 0; i0 < M; i0 += HM_TILE_KK) {
                const int64_t mi = imin(HM_TILE_KK, M - i0);
                float acc[HM_TILE_KK];
                for (int64_t i = 0; i < mi; i++)
                    acc[i] = 0;
                for (int64_t k = tri == HM_TILE_B_LOWER ? imin(K, Nf + jj) : 0; k < K; k++) {
                    const float b = B[k * ldb + Nf + jj], *ar = A + i0 + k * acs;
#pragma omp simd
                    for (int64_t i = 0; i < mi; i++)
                        acc[i] += ar[i] * b;
                }
                float *o = Cm + i0 * ldc + Nf + jj;
                for (int64_t i = 0; i < mi; i++)
                    o[i * ldc] = accumulate ? o[i * ldc] + acc[i] : acc[i];
            }
        return;
    }
    float pk[HM_TILE_KK][HM_TILE_KB];
    for (int64_t kb = 0; kb < K || kb == 0; kb += HM_TILE_KK) {
        const int64_t nk = imin(HM_TILE_KK, K - kb);
        for (int64_t k = 0; k < nk; k++)
            for (int64_t jj = 0; jj < HM_TILE_KB; jj++)
                pk[k][jj] = jj < nc ? B[(kb + k) * ldb + Nf + jj] : 0.0f;
        for (int64_t i0 = 0; i0 < M; i0 += HM_TILE_RB) {
            int64_t nr = imin(HM_TILE_RB, M - i0);
            const float *r0 = A + i0 * ars;
            const float *r1 = nr > 1 ? r0 + ars : r0, *r2 = nr > 2 ? r0 + 2 * ars : r0;
            const float *r3 = nr > 3 ? r0 + 3 * ars : r0;
            float a0[HM_TILE_KB] = {0}, a1[HM_TILE_KB] = {0}, a2[HM_TILE_KB] = {0};
            float a3[HM_TILE_KB] = {0};
            int64_t klo, khi;
            tile_krange(tri, i0, nr, Nf, K, &klo, &khi);
            klo = klo > kb ? klo - kb : 0;
            khi = imin(nk, khi - kb);
            for (int64_t k = klo; k < khi; k++) {
                const float *br = pk[k];
                const int64_t ka = (kb + k) * acs;
                const float c0 = r0[ka], c1 = r1[ka], c2 = r2[ka], c3 = r3[ka];
#pragma omp simd
                for (int jj = 0; jj < HM_TILE_KB; jj++) {
                    a0[jj] += c0 * br[jj];
                    a1[jj] += c1 * br[jj];
                    a2[jj] += c2 * br[jj];
                    a3[jj] += c3 * br[jj];
                }
            }
            tile_store(Cm + i0 * ldc + Nf, ldc, nr, nc, a0, a1, a2, a3, accumulate || kb > 0);
        }
        if (K == 0)
            break;
    }
}

void hm_tile_mask_upper(float *M, int64_t ldm, int64_t L)
{
    for (int64_t i = 0; i < L; i++)
        for (int64_t j = i + 1; j < L; j++)
            M[i * ldm + j] = 0;
}
