/* cpu_backward.h — private: CPU backward ops behind kernels/backend.h.
 * Conventions (all ops): gradients of PARAMETERS accumulate (+=) so the
 * caller zeroes them once per step and can accumulate micro-batches;
 * gradients of ACTIVATIONS are written (=) unless the op says "accumulates".
 * A NULL gradient pointer skips that output (frozen weights skip the work). */
#ifndef HM_CPU_BACKWARD_H
#define HM_CPU_BACKWARD_H

#include "cpu_ops_list.h"

#endif
