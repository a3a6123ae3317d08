/* threads.h — one thread pool for OpenMP and OpenBLAS (shared/BENCH.md). */
#ifndef HM_THREADS_H
#define HM_THREADS_H

/* Set the number of threads for OpenMP regions (n ≥ 1). OpenBLAS stays on one
 * thread: hm's GEMMs parallelize over fixed tiles (kernels/cpu/fast_gemm.h). */
void hm_threads_set(int n);
/* OpenBLAS's own thread count, for a peer measured against hm (bench/): a
 * plain OpenBLAS call at its best. Set it back to 1 before hm runs again. */
void hm_threads_set_blas(int n);
/* Current thread count. */
int hm_threads_get(void);

#endif
