/* cpu_backend.c — the ref and fast vtables, generated from kernels/ops.def.
 * Both run on host memory (no memory members: malloc/free/memcpy). */
#include "backend_impl.h"
#include "cpu_ops_list.h"

static const struct hm_backend_ops g_ref_ops = {
#define HM_OP(name, fast, flops, params, args) .name = hm_ref_##name,
#define HM_OP_SIZE(name, fast, params, args) .name = hm_ref_##name,
#include "ops.def"
#undef HM_OP
#undef HM_OP_SIZE
};

/* fast runs its own implementation where ops.def's fast column says so,
 * ref's plain loop otherwise (the same host memory). */
static const struct hm_backend_ops g_fast_ops = {
#define HM_OP(name, fast, flops, params, args) .name = hm_##fast##_##name,
#define HM_OP_SIZE(name, fast, params, args) .name = hm_##fast##_##name,
#include "ops.def"
#undef HM_OP
#undef HM_OP_SIZE
};

const struct hm_backend_desc hm_backend_desc_ref = {.name = "ref", .ops = &g_ref_ops};
const struct hm_backend_desc hm_backend_desc_fast = {.name = "fast", .ops = &g_fast_ops};
