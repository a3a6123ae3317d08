/* cpu_family.h — private: the CPU ops of the llama family skeleton
 * (RMSNorm, the GQA expansion of [q | k | v] into per-query-head triples)
 * and the causal attention of new rows against a KV cache (a decoding step
 * or a prefill chunk). Semantics are those of the hm_backend_* wrappers in
 * kernels/backend.h; ref in ref_family.c, fast in fast_attention_cached.c. */
#ifndef HM_CPU_FAMILY_H
#define HM_CPU_FAMILY_H

#include <string.h>

#include "cpu_ops_list.h"

/* One row of the GQA expansion (shared by ref and fast): x [(n_h + 2 n_kv) p]
 * as [q | k | v] → y [n_h, 3, p] (q_h, k_g(h), v_g(h)). */
static inline void hm_qkv_expand_row(float *y, const float *x, int64_t n_h, int64_t n_kv,
                                     int64_t p)
{
    const int64_t grp = n_h / n_kv;
    for (int64_t h = 0; h < n_h; h++) {
        const int64_t g = h / grp;
        memcpy(y + h * 3 * p, x + h * p, sizeof(float) * (size_t)p);
        memcpy(y + h * 3 * p + p, x + n_h * p + g * p, sizeof(float) * (size_t)p);
        memcpy(y + h * 3 * p + 2 * p, x + (n_h + n_kv) * p + g * p, sizeof(float) * (size_t)p);
    }
}

#endif
