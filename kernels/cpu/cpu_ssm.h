/* cpu_ssm.h — private: CPU HedgeMamba mixer ops (SPEC §3) behind
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

#include "backend.h"

void hm_ref_conv1d_forward(HM_CPU_CTX, float *c, const float *x, const float *w, const float *bias,
                           int64_t T, int64_t C, int64_t K);
void hm_ref_conv1d_backward(HM_CPU_CTX, float *dx, float *dw, float *dbias, const float *dc, const float *x,
                            const float *w, int64_t T, int64_t C, int64_t K);
void hm_ref_conv1d_step(HM_CPU_CTX, float *c_t, const float *x_t, float *window, const float *w,
                        const float *bias, int64_t C, int64_t K);
void hm_ref_softplus_forward(HM_CPU_CTX, float *y, const float *z, int64_t n);
void hm_ref_softplus_backward(HM_CPU_CTX, float *dz, const float *dy, const float *z, int64_t n);
void hm_ref_silu_gate_forward(HM_CPU_CTX, float *out, const float *y, const float *z, int64_t n);
void hm_ref_silu_gate_backward(HM_CPU_CTX, float *dy, float *dz, const float *dout, const float *y,
                               const float *z, int64_t n);
size_t hm_ref_ssm_ws_size(HM_CPU_CTX, int64_t T, int64_t n_h, int64_t F2, int64_t p, int64_t chunk);
void hm_ref_ssm_forward(HM_CPU_CTX, float *y, float *den, const float *C, const float *B, const float *v,
                        const float *dt, const float *A, const float *D, int64_t T, int64_t n_h,
                        int64_t F2, int64_t p, int64_t v_row_stride, int64_t v_head_stride,
                        float eps, int64_t chunk, void *ws, size_t ws_size);
size_t hm_ref_ssm_backward_ws_size(HM_CPU_CTX, int64_t T, int64_t n_h, int64_t F2, int64_t p,
                                   int64_t chunk);
void hm_ref_ssm_backward(HM_CPU_CTX, float *dC, float *dB, float *dv, float *ddt, float *dA, float *dD,
                         const float *dy, const float *y, const float *den, const float *C,
                         const float *B, const float *v, const float *dt, const float *A,
                         const float *D, int64_t T, int64_t n_h, int64_t F2, int64_t p,
                         int64_t v_row_stride, int64_t v_head_stride, int64_t chunk, void *ws,
                         size_t ws_size);
void hm_ref_ssm_chunk_carry(HM_CPU_CTX, float *y, float *den, const float *C, const float *B,
                            const float *v, const float *dt, const float *A, const float *D,
                            float *S, int64_t T, int64_t n_h, int64_t F2, int64_t p,
                            int64_t v_row_stride, int64_t v_head_stride);
void hm_ref_ssm_step(HM_CPU_CTX, float *y_t, float *S, const float *C_t, const float *B_t, const float *v_t,
                     const float *dt_t, const float *A, const float *D, int64_t n_h, int64_t F2,
                     int64_t p, float eps);

void hm_fast_conv1d_forward(HM_CPU_CTX, float *c, const float *x, const float *w, const float *bias,
                            int64_t T, int64_t C, int64_t K);
void hm_fast_conv1d_backward(HM_CPU_CTX, float *dx, float *dw, float *dbias, const float *dc,
                             const float *x, const float *w, int64_t T, int64_t C, int64_t K);
void hm_fast_softplus_forward(HM_CPU_CTX, float *y, const float *z, int64_t n);
void hm_fast_softplus_backward(HM_CPU_CTX, float *dz, const float *dy, const float *z, int64_t n);
void hm_fast_silu_gate_forward(HM_CPU_CTX, float *out, const float *y, const float *z, int64_t n);
void hm_fast_silu_gate_backward(HM_CPU_CTX, float *dy, float *dz, const float *dout, const float *y,
                                const float *z, int64_t n);
size_t hm_fast_ssm_ws_size(HM_CPU_CTX, int64_t T, int64_t n_h, int64_t F2, int64_t p, int64_t chunk);
void hm_fast_ssm_forward(HM_CPU_CTX, float *y, float *den, const float *C, const float *B, const float *v,
                         const float *dt, const float *A, const float *D, int64_t T,
                         int64_t n_h, int64_t F2, int64_t p, int64_t v_row_stride,
                         int64_t v_head_stride, float eps, int64_t chunk, void *ws,
                         size_t ws_size);
size_t hm_fast_ssm_backward_ws_size(HM_CPU_CTX, int64_t T, int64_t n_h, int64_t F2, int64_t p,
                                    int64_t chunk);
void hm_fast_ssm_backward(HM_CPU_CTX, float *dC, float *dB, float *dv, float *ddt, float *dA, float *dD,
                          const float *dy, const float *y, const float *den, const float *C,
                          const float *B, const float *v, const float *dt, const float *A,
                          const float *D, int64_t T, int64_t n_h, int64_t F2, int64_t p,
                          int64_t v_row_stride, int64_t v_head_stride, int64_t chunk, void *ws,
                          size_t ws_size);

#endif
