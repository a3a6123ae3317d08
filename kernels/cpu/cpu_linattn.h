/* cpu_linattn.h — private: CPU Hedgehog linear attention ops (SPEC §2)
 * behind kernels/backend.h ("Hedgehog linear attention" section, where the
 * shapes and semantics are documented).
 * ref_*: plain loops with double accumulation, the quadratic masked form
 *        (kernels/cpu/ref_linattn.c), the oracle;
 * fast_*: OpenMP, chunked (block-parallel) form (kernels/cpu/fast_linattn.c).
 * Checked by tests/test_linattn.c. */
#ifndef HM_CPU_LINATTN_H
#define HM_CPU_LINATTN_H

#include "backend.h"

void hm_ref_featuremap_forward(HM_CPU_CTX, float *phi, const float *x, const float *W, const float *b,
                               int64_t T, int64_t n_h, int64_t p, int64_t F,
                               int64_t row_stride, int64_t head_stride);
void hm_ref_featuremap_backward(HM_CPU_CTX, float *dx, float *dW, float *db, const float *dphi,
                                const float *x, const float *phi, const float *W, int64_t T,
                                int64_t n_h, int64_t p, int64_t F, int64_t row_stride,
                                int64_t head_stride);
size_t hm_ref_linattn_ws_size(HM_CPU_CTX, int64_t T, int64_t n_h, int64_t F2, int64_t p, int64_t chunk);
void hm_ref_linattn_forward(HM_CPU_CTX, float *y, float *den, const float *phiq, const float *phik,
                            const float *v, int64_t T, int64_t n_h, int64_t F2, int64_t p,
                            int64_t v_row_stride, int64_t v_head_stride, float eps,
                            int64_t chunk, float *saved, void *ws, size_t ws_size);
size_t hm_ref_linattn_backward_ws_size(HM_CPU_CTX, int64_t T, int64_t n_h, int64_t F2, int64_t p,
                                       int64_t chunk);
void hm_ref_linattn_backward(HM_CPU_CTX, float *dphiq, float *dphik, float *dv, const float *dy,
                             const float *y, const float *den, const float *phiq,
                             const float *phik, const float *v, int64_t T, int64_t n_h,
                             int64_t F2, int64_t p, int64_t v_row_stride, int64_t v_head_stride,
                             int64_t chunk, const float *saved, void *ws, size_t ws_size);
double hm_ref_cosine_loss(HM_CPU_CTX, float *da, const float *a, const float *b, int64_t N, int64_t d,
                          float scale);

void hm_fast_featuremap_forward(HM_CPU_CTX, float *phi, const float *x, const float *W, const float *b,
                                int64_t T, int64_t n_h, int64_t p, int64_t F,
                                int64_t row_stride, int64_t head_stride);
void hm_fast_featuremap_backward(HM_CPU_CTX, float *dx, float *dW, float *db, const float *dphi,
                                 const float *x, const float *phi, const float *W, int64_t T,
                                 int64_t n_h, int64_t p, int64_t F, int64_t row_stride,
                                 int64_t head_stride);
size_t hm_fast_linattn_ws_size(HM_CPU_CTX, int64_t T, int64_t n_h, int64_t F2, int64_t p, int64_t chunk);
void hm_fast_linattn_forward(HM_CPU_CTX, float *y, float *den, const float *phiq, const float *phik,
                             const float *v, int64_t T, int64_t n_h, int64_t F2, int64_t p,
                             int64_t v_row_stride, int64_t v_head_stride, float eps,
                             int64_t chunk, float *saved, void *ws, size_t ws_size);
size_t hm_fast_linattn_backward_ws_size(HM_CPU_CTX, int64_t T, int64_t n_h, int64_t F2, int64_t p,
                                        int64_t chunk);
void hm_fast_linattn_backward(HM_CPU_CTX, float *dphiq, float *dphik, float *dv, const float *dy,
                              const float *y, const float *den, const float *phiq,
                              const float *phik, const float *v, int64_t T, int64_t n_h,
                              int64_t F2, int64_t p, int64_t v_row_stride,
                              int64_t v_head_stride, int64_t chunk, const float *saved, void *ws,
                              size_t ws_size);
double hm_fast_cosine_loss(HM_CPU_CTX, float *da, const float *a, const float *b, int64_t N, int64_t d,
                           float scale);

#endif
