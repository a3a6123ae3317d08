/* cpu_linattn.h — private: CPU Hedgehog linear attention ops (contract §2)
 * behind kernels/backend.h ("Hedgehog linear attention" section, where the
 * shapes and semantics are documented).
 * ref_*: plain loops with double accumulation, the quadratic masked form
 *        (kernels/cpu/ref_linattn.c), the oracle;
 * fast_*: OpenMP, chunked (block-parallel) form (kernels/cpu/fast_linattn.c).
 * Checked by tests/test_linattn.c. */
#ifndef HM_CPU_LINATTN_H
#define HM_CPU_LINATTN_H

#include "cpu_ops_list.h"

#endif
