#include "threads.h"

#include <omp.h>

#ifdef HM_HAVE_BLAS
/* OpenBLAS's own entry point. OpenBLAS runs on one thread: the fast backend
 * parallelizes its GEMMs itself, over tiles whose shapes do not depend on the
 * thread count (kernels/cpu/fast_gemm.h), so that its bits do not either. */
void openblas_set_num_threads(int num_threads);
#endif

void hm_threads_set(int n)
{
    if (n < 1)
        n = 1;
    omp_set_num_threads(n);
#ifdef HM_HAVE_BLAS
    openblas_set_num_threads(1);
#endif
}

void hm_threads_set_blas(int n)
{
#ifdef HM_HAVE_BLAS
    openblas_set_num_threads(n < 1 ? 1 : n);
#else
    (void)n;
#endif
}

int hm_threads_get(void)
{
    return omp_get_max_threads();
}
