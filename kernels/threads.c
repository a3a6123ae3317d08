#include "threads.h"

#include <omp.h>

#ifdef HM_HAVE_BLAS
/* OpenBLAS's own entry point; with the OpenMP build it shares OpenMP's pool. */
void openblas_set_num_threads(int num_threads);
#endif

void hm_threads_set(int n)
{
    if (n < 1)
        n = 1;
    omp_set_num_threads(n);
#ifdef HM_HAVE_BLAS
    openblas_set_num_threads(n);
#endif
}

int hm_threads_get(void)
{
    return omp_get_max_threads();
}
