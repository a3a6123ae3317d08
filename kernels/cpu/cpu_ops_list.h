/* cpu_ops_list.h — private: the prototypes of the CPU implementations,
 * generated from kernels/ops.def: hm_ref_<op> for every op, hm_fast_<op>
 * for the ops whose fast column is `fast`. A definition that does not match
 * its entry is a compile error. */
#ifndef HM_CPU_OPS_LIST_H
#define HM_CPU_OPS_LIST_H

#include "backend.h"

/* First parameter of every CPU op implementation: the context it ignores. */
#define HM_CPU_CTX __attribute__((unused)) void *ctx

#define HM_CPU_FAST_DECL_fast(ret, name, params) ret hm_fast_##name(void *ctx, HM_UNPAREN params);
#define HM_CPU_FAST_DECL_ref(ret, name, params)
#define HM_OP(name, fast, flops, params, args)                                           \
    void hm_ref_##name(void *ctx, HM_UNPAREN params);                                     \
    HM_CPU_FAST_DECL_##fast(void, name, params)
#define HM_OP_SIZE(name, fast, params, args)                                             \
    size_t hm_ref_##name(void *ctx, HM_UNPAREN params);                                   \
    HM_CPU_FAST_DECL_##fast(size_t, name, params)
#include "ops.def"
#undef HM_OP
#undef HM_OP_SIZE

#endif
