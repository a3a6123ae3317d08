/* fast_stage1.c — fast CPU attn_ce_loss (kernels/backend.h): the heads in
 * parallel, each by ref's own per-head loop (ref_stage1.c), each with its
 * slice of the workspace; the per-head sums are added in head order after
 * the loop, so the result is ref's bits at any thread count. (mse_loss runs
 * ref's loop by declaration in ops.def: O(N·d), the dense product before it
 * dominates.) */
#include "cpu_stage1.h"

/* ws (doubles): the head sums [n_h], then per head hm_cpu_attn_ce_head_doubles. */
size_t hm_fast_attn_ce_loss_ws_size(HM_CPU_CTX, int64_t T, int64_t n_h, int64_t F2, int64_t p)
{
    (void)p;
    return sizeof(double) * (size_t)(n_h * (1 + hm_cpu_attn_ce_head_doubles(T, F2)));
}

void hm_fast_attn_ce_loss(HM_CPU_CTX, double *loss, float *dphiq, float *dphik,
                          const float *phiq, const float *phik, const float *q, const float *k,
                          int64_t T, int64_t n_h, int64_t F2, int64_t p, int64_t qk_row_stride,
                          int64_t qk_head_stride, float eps, float scale, void *ws,
                          size_t ws_size)
{
    (void)ws_size;
    if (T <= 0 || n_h <= 0)
        return;
    double *sums = ws, *per = sums + n_h;
    const int64_t W = hm_cpu_attn_ce_head_doubles(T, F2);
#pragma omp parallel for schedule(dynamic, 1) if (n_h > 1 && T * T * (p + F2) >= 32768)
    for (int64_t h = 0; h < n_h; h++)
        sums[h] = hm_cpu_attn_ce_head(dphiq, dphik, phiq, phik, q, k, T, n_h, F2, p,
                                      qk_row_stride, qk_head_stride, (double)eps,
                                      (double)scale / (double)n_h, h, per + h * W);
    double total = 0;
    for (int64_t h = 0; h < n_h; h++)
        total += sums[h];
    *loss += total / (double)n_h;
}
