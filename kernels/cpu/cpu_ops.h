/* cpu_ops.h — private: the CPU implementations behind kernels/backend.h.
 * ref_*: plain loops, single-threaded, the oracle (kernels/cpu/ref_*.c).
 * fast_*: OpenBLAS + OpenMP (kernels/cpu/fast_*.c).
 * Shapes and semantics are those of the hm_backend_*_forward wrappers. */
#ifndef HM_CPU_OPS_H
#define HM_CPU_OPS_H

#include "backend.h"

void hm_ref_matmul_forward(HM_CPU_CTX, float *y, const float *x, const float *w, const float *b,
                           int64_t T, int64_t in, int64_t out);
void hm_ref_layernorm_forward(HM_CPU_CTX, float *y, float *mean, float *rstd, const float *x,
                              const float *w, const float *b, int64_t T, int64_t d, float eps);
void hm_ref_gelu_forward(HM_CPU_CTX, float *y, const float *x, int64_t n, enum hm_gelu_kind kind);
void hm_ref_rotary_forward(HM_CPU_CTX, float *x, int64_t T, int64_t n_h, int64_t r, int64_t row_stride,
                           int64_t head_stride, int64_t pos0, const float *inv_freq);
size_t hm_ref_attention_ws_size(HM_CPU_CTX, int64_t T, int64_t n_h, int64_t p);
void hm_ref_attention_forward(HM_CPU_CTX, float *out, float *lse, const float *qkv, int64_t T, int64_t n_h,
                              int64_t p, void *ws, size_t ws_size);
void hm_ref_add_forward(HM_CPU_CTX, float *y, const float *a, const float *b, int64_t n);
void hm_ref_embedding_forward(HM_CPU_CTX, float *y, const int32_t *ids, const float *table, int64_t T,
                              int64_t d);
void hm_ref_nll_forward(HM_CPU_CTX, float *nll, float *lse, const float *logits, const int32_t *targets,
                        int64_t T, int64_t V);

void hm_fast_matmul_forward(HM_CPU_CTX, float *y, const float *x, const float *w, const float *b,
                            int64_t T, int64_t in, int64_t out);
void hm_fast_layernorm_forward(HM_CPU_CTX, float *y, float *mean, float *rstd, const float *x,
                               const float *w, const float *b, int64_t T, int64_t d, float eps);
void hm_fast_gelu_forward(HM_CPU_CTX, float *y, const float *x, int64_t n, enum hm_gelu_kind kind);
void hm_fast_rotary_forward(HM_CPU_CTX, float *x, int64_t T, int64_t n_h, int64_t r, int64_t row_stride,
                            int64_t head_stride, int64_t pos0, const float *inv_freq);
void hm_fast_rotary_backward(HM_CPU_CTX, float *dx, int64_t T, int64_t n_h, int64_t r,
                             int64_t row_stride, int64_t head_stride, int64_t pos0,
                             const float *inv_freq);
size_t hm_fast_attention_ws_size(HM_CPU_CTX, int64_t T, int64_t n_h, int64_t p);
void hm_fast_attention_forward(HM_CPU_CTX, float *out, float *lse, const float *qkv, int64_t T,
                               int64_t n_h, int64_t p, void *ws, size_t ws_size);
void hm_fast_add_forward(HM_CPU_CTX, float *y, const float *a, const float *b, int64_t n);
void hm_fast_embedding_forward(HM_CPU_CTX, float *y, const int32_t *ids, const float *table, int64_t T,
                               int64_t d);
/* Softmax row pieces shared by nll_forward and cross_entropy_backward
 * (the KD term keeps its own, in double): the max of l [V]; e^{l − mx}
 * into g [V] (or NULL) returning the sum (fp32 partials of 256 terms into
 * a double); g *= s. */
float hm_fast_row_max(const float *l, int64_t V);
double hm_fast_row_exp(float *g, const float *l, float mx, int64_t V);
void hm_fast_row_scale(float *g, float s, int64_t V);
void hm_fast_nll_forward(HM_CPU_CTX, float *nll, float *lse, const float *logits, const int32_t *targets,
                         int64_t T, int64_t V);

#endif
