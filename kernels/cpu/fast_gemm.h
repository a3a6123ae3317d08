/* fast_gemm.h — the fast backend's one sgemm. Row-major, cblas semantics:
 * C[M,N] = alpha·op(A)[M,K]·op(B)[K,N] + beta·C. It runs as fixed tiles of C
 * (HM_GEMM_ROWS × HM_GEMM_COLS), each a single-threaded OpenBLAS call from
 * an OpenMP loop: the tiles' shapes do not depend on the thread count, and
 * so neither do the bits. (OpenBLAS's own threading splits the work by the
 * thread count and, on some CPUs, rounds differently for 1 and 2 threads;
 * hm_threads_set keeps OpenBLAS at one thread.) */
#ifndef HM_FAST_GEMM_H
#define HM_FAST_GEMM_H

#ifdef HM_HAVE_BLAS
#include <cblas.h>

void hm_fast_sgemm(enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, int M, int N, int K,
                   float alpha, const float *A, int lda, const float *B, int ldb, float beta,
                   float *C, int ldc);
#endif

#endif
