/* cpu_stage1.h — private: the CPU stage-1 objectives besides cosine_loss
 * (mse_loss, attn_ce_loss; contracts in kernels/backend.h).
 * ref_stage1.c: plain loops in double, the oracle; fast_stage1.c: attn_ce_loss
 * over heads in parallel, each head by ref's own loop (hm_cpu_attn_ce_head),
 * so fast gives ref's bits at any thread count. Checked by tests/test_stage1_loss.c. */
#ifndef HM_CPU_STAGE1_H
#define HM_CPU_STAGE1_H

#include "cpu_ops_list.h"

/* Doubles of one head's scratch in hm_cpu_attn_ce_head: P, e [T], dφq [F2], dφk [T, F2]. */
static inline int64_t hm_cpu_attn_ce_head_doubles(int64_t T, int64_t F2)
{
    return 2 * T + F2 + T * F2;
}

/* Head h of attn_ce_loss: returns Σ_t CE_th (double, t in order) and writes
 * head h's rows of dphiq, dphik (each may be NULL) with c · ∂CE/∂φ,
 * c = scale / n_h. Arguments as the op's; ws: hm_cpu_attn_ce_head_doubles. */
double hm_cpu_attn_ce_head(float *dphiq, float *dphik, const float *phiq, const float *phik,
                           const float *q, const float *k, int64_t T, int64_t n_h, int64_t F2,
                           int64_t p, int64_t rs, int64_t hs, double eps, double c, int64_t h,
                           double *ws);

#endif
