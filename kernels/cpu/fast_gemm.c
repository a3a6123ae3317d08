/* fast_gemm.c — hm_fast_sgemm: OpenBLAS sgemm on fixed tiles of C, in
 * parallel over the tiles (fast_gemm.h). */
#include "fast_gemm.h"

#ifdef HM_HAVE_BLAS
#include <stddef.h>
#include <stdint.h>

#define HM_GEMM_ROWS 128
#define HM_GEMM_COLS 1024
#define HM_GEMM_PAR_MIN 32768 /* multiply-adds below which one thread does all */

void hm_fast_sgemm(enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, int M, int N, int K,
                   float alpha, const float *A, int lda, const float *B, int ldb, float beta,
                   float *C, int ldc)
{
    const int mb = (M + HM_GEMM_ROWS - 1) / HM_GEMM_ROWS, nb = (N + HM_GEMM_COLS - 1) / HM_GEMM_COLS;
    const int tiles = mb * nb;
#pragma omp parallel for schedule(dynamic, 1) if (tiles > 1 && (int64_t)M * N * K >= HM_GEMM_PAR_MIN)
    for (int t = 0; t < tiles; t++) {
        const int m0 = t / nb * HM_GEMM_ROWS, n0 = t % nb * HM_GEMM_COLS;
        const int m = M - m0 < HM_GEMM_ROWS ? M - m0 : HM_GEMM_ROWS;
        const int n = N - n0 < HM_GEMM_COLS ? N - n0 : HM_GEMM_COLS;
        /* op(A)'s rows m0.., op(B)'s columns n0.. */
        const float *a = ta == CblasNoTrans ? A + (size_t)m0 * (size_t)lda : A + m0;
        const float *b = tb == CblasNoTrans ? B + n0 : B + (size_t)n0 * (size_t)ldb;
        cblas_sgemm(CblasRowMajor, ta, tb, m, n, K, alpha, a, lda, b, ldb, beta,
                    C + (size_t)m0 * (size_t)ldc + n0, ldc);
    }
}
#endif
