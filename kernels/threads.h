/* threads.h — one thread pool for OpenMP and OpenBLAS (shared/BENCH.md). */
#ifndef HM_THREADS_H
#define HM_THREADS_H

/* Set the number of threads for OpenMP regions and BLAS calls (n ≥ 1). */
void hm_threads_set(int n);
/* Current thread count. */
int hm_threads_get(void);

#endif
