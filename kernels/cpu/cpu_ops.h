/* cpu_ops.h — private: the CPU implementations behind kernels/backend.h.
 * ref_*: plain loops, single-threaded, the oracle (kernels/cpu/ref_*.c).
 * fast_*: OpenBLAS + OpenMP (kernels/cpu/fast_*.c).
 * Shapes and semantics are those of the hm_backend_*_forward wrappers. */
#ifndef HM_CPU_OPS_H
#define HM_CPU_OPS_H

#include "cpu_ops_list.h"

/* Softmax row pieces shared by nll_forward and cross_entropy_backward
 * (the KD term keeps its own, in double): the max of l [V]; e^{l − mx}
 * into g [V] (or NULL) returning the sum (fp32 partials of 256 terms into
 * a double); g *= s. */
float hm_fast_row_max(const float *l, int64_t V);
double hm_fast_row_exp(float *g, const float *l, float mx, int64_t V);
void hm_fast_row_scale(float *g, float s, int64_t V);

#endif
