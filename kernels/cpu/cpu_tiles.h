/* cpu_tiles.h — private: the register-tile kernels of the chunked CPU
 * linear-attention and selective-scan forms (kernels/cpu/fast_linattn.c,
 * kernels/cpu/fast_ssm.c). Small dense blocks only (C×C chunk scores, chunk
 * × state products); no BLAS. Each output element is one sum over k in
 * increasing k order, so the result does not depend on the tile shape.
 * Implemented in kernels/cpu/cpu_tiles.c, compiled per SIMD level
 * (cpu_simd.h). */
#ifndef HM_CPU_TILES_H
#define HM_CPU_TILES_H

#include <stdint.h>

#define HM_TILE_KB 16 /* columns per tile (one AVX-512 vector); pad unit */

static inline int64_t hm_tile_round(int64_t n)
{
    return (n + HM_TILE_KB - 1) / HM_TILE_KB * HM_TILE_KB;
}

/* M[i][j] = Σ_{f<n} X[i][f] · Yt[f][j] for i < L and j < hm_tile_round(i + 1)
 * at least (so every j ≤ i is computed; other columns below
 * hm_tile_round(L) may be written too, never read by the callers unless
 * masked). X: rows at stride ldx; Yt: [n, ldy] with ldy ≥ hm_tile_round(L),
 * zero-padded past L; M: rows at stride ldm ≥ hm_tile_round(L). */
void hm_tile_tri_scores(float *M, int64_t ldm, const float *X, int64_t ldx, const float *Yt,
                        int64_t ldy, int64_t L, int64_t n);

/* Which entries of a factor are known to be zero (the masked side of a
 * causal C×C block), so that hm_tile_gemm_tri skips their products:
 *   HM_TILE_FULL      none;
 *   HM_TILE_A_LOWER   A(i, k) = 0 for k > i  (a lower-triangular score block);
 *   HM_TILE_A_UPPER   A(i, k) = 0 for k < i  (one read transposed);
 *   HM_TILE_B_LOWER   B(k, j) = 0 for j > k.
 * Only whole row blocks / column tiles are skipped (their k range is cut to
 * where a nonzero can be); entries inside a tile that are zero by the
 * promise are still multiplied. The products left out are exact zeros, so
 * for finite inputs the result is bit for bit that of HM_TILE_FULL (the
 * sum over k keeps its order; a leading or trailing +0 changes nothing). */
enum hm_tile_tri { HM_TILE_FULL, HM_TILE_A_LOWER, HM_TILE_A_UPPER, HM_TILE_B_LOWER };

/* Cm[i][j] (= or, accumulate ≠ 0, +=) Σ_{k<K} A[i·ars + k·acs] · B[k·ldb + j]
 * for i < M, j < N (A may be read transposed: ars = 1, acs = its row
 * stride). Stride-1 along j of B and Cm. tri: the zeros promised (above).
 * K = 0 reads neither A nor B (B may be NULL) and writes zeros (or
 * leaves Cm, accumulating). */
void hm_tile_gemm_tri(float *Cm, int64_t ldc, const float *A, int64_t ars, int64_t acs,
                      const float *B, int64_t ldb, int64_t M, int64_t N, int64_t K,
                      int accumulate, enum hm_tile_tri tri);

static inline void hm_tile_gemm(float *Cm, int64_t ldc, const float *A, int64_t ars,
                                int64_t acs, const float *B, int64_t ldb, int64_t M, int64_t N,
                                int64_t K, int accumulate)
{
    hm_tile_gemm_tri(Cm, ldc, A, ars, acs, B, ldb, M, N, K, accumulate, HM_TILE_FULL);
}

/* Yt[f][j] = Y[j][f] for j < L, 0 for L ≤ j < ldy.   Y: [L, n] rows at ldx. */
void hm_tile_transpose_pad(float *Yt, int64_t ldy, const float *Y, int64_t ldx, int64_t L,
                           int64_t n);

/* Zero M[i][j] for i < j < L (the part of a score block past the diagonal). */
void hm_tile_mask_upper(float *M, int64_t ldm, int64_t L);

#endif
