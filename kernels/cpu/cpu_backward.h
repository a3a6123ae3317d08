/* cpu_backward.h — private: CPU backward ops behind kernels/backend.h.
 * Conventions (all ops): gradients of PARAMETERS accumulate (+=) so the
 * caller zeroes them once per step and can accumulate micro-batches;
 * gradients of ACTIVATIONS are written (=) unless the op says "accumulates".
 * A NULL gradient pointer skips that output (frozen weights skip the work). */
#ifndef HM_CPU_BACKWARD_H
#define HM_CPU_BACKWARD_H

#include "backend.h"

void hm_ref_matmul_backward(HM_CPU_CTX, float *dx, float *dw, float *db, const float *dy, const float *x,
                            const float *w, int64_t T, int64_t in, int64_t out);
void hm_ref_layernorm_backward(HM_CPU_CTX, float *dx, float *dw, float *db, const float *dy,
                               const float *x, const float *mean, const float *rstd,
                               const float *w, int64_t T, int64_t d);
void hm_ref_gelu_backward(HM_CPU_CTX, float *dx, const float *dy, const float *x, int64_t n,
                          enum hm_gelu_kind kind);
void hm_ref_rotary_backward(HM_CPU_CTX, float *dx, int64_t T, int64_t n_h, int64_t r, int64_t row_stride,
                            int64_t head_stride, int64_t pos0, const float *inv_freq);
void hm_ref_attention_backward(HM_CPU_CTX, float *dqkv, const float *dout, const float *qkv,
                               const float *out, const float *lse, int64_t T, int64_t n_h,
                               int64_t p, void *ws, size_t ws_size);
size_t hm_ref_attention_backward_ws_size(HM_CPU_CTX, int64_t T, int64_t n_h, int64_t p);
void hm_ref_embedding_backward(HM_CPU_CTX, float *dtable, const float *dy, const int32_t *ids, int64_t T,
                               int64_t d);
double hm_ref_cross_entropy_backward(HM_CPU_CTX, float *dlogits, const float *logits,
                                     const int32_t *targets, int64_t T, int64_t V,
                                     float scale);

void hm_fast_matmul_backward(HM_CPU_CTX, float *dx, float *dw, float *db, const float *dy, const float *x,
                             const float *w, int64_t T, int64_t in, int64_t out);
void hm_fast_layernorm_backward(HM_CPU_CTX, float *dx, float *dw, float *db, const float *dy,
                                const float *x, const float *mean, const float *rstd,
                                const float *w, int64_t T, int64_t d);
void hm_fast_gelu_backward(HM_CPU_CTX, float *dx, const float *dy, const float *x, int64_t n,
                           enum hm_gelu_kind kind);
void hm_fast_attention_backward(HM_CPU_CTX, float *dqkv, const float *dout, const float *qkv,
                                const float *out, const float *lse, int64_t T, int64_t n_h,
                                int64_t p, void *ws, size_t ws_size);
size_t hm_fast_attention_backward_ws_size(HM_CPU_CTX, int64_t T, int64_t n_h, int64_t p);
double hm_fast_cross_entropy_backward(HM_CPU_CTX, float *dlogits, const float *logits,
                                      const int32_t *targets, int64_t T, int64_t V,
                                      float scale);

#endif
