/* cpu_ssm.h — private: CPU HedgeMamba mixer ops (contract §3) behind
 * kernels/backend.h ("HedgeMamba mixer" section, where the shapes and
 * semantics are documented).
 * ref_*: plain loops with double accumulation (kernels/cpu/ref_ssm.c): the
 *        conv and pointwise ops, the quadratic masked form of the selective
 *        scan with each segment decay summed directly, and the one-token
 *        steps (also used by "fast": they are O(state) per token);
 * fast_*: OpenMP conv and pointwise ops (kernels/cpu/fast_ssm_ops.c) and the
 *        chunked (block-parallel) scan (kernels/cpu/fast_ssm.c).
 * Checked by tests/test_ssm.c. */
#ifndef HM_CPU_SSM_H
#define HM_CPU_SSM_H

#include "cpu_ops_list.h"

#endif
