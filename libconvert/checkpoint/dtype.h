/* dtype.h — conversions between F32 and F16/BF16/F64, round to nearest even.
 *
 * F16/BF16 → F32 is exact for every bit pattern (NaN payloads kept).
 * F32 → F16/BF16 rounds to nearest even; overflow gives ±Inf; subnormals
 * are produced correctly; NaN stays NaN (sign and as much of the payload as
 * fits are kept; the quiet bit is set only when the kept payload is 0).
 * Hence F16/BF16 → F32 → F16/BF16 is the identity on all 65,536 patterns. */
#ifndef HM_DTYPE_H
#define HM_DTYPE_H

#include <stddef.h>
#include <stdint.h>
#include "hm_error.h"
#include "safetensors.h"

float hm_f16_to_f32(uint16_t h);
uint16_t hm_f32_to_f16(float f);
float hm_bf16_to_f32(uint16_t h);
uint16_t hm_f32_to_bf16(float f);

/* dst[n] (F32) ← src[n] stored little-endian as dtype (F32/F16/BF16/F64).
 * HM_ERR_UNSUPPORTED for other dtypes. src may be unaligned. */
enum hm_status hm_to_f32(const void *src, enum hm_dtype dtype, int64_t n, float *dst,
                         struct hm_error *err);
/* dst[n × size(dtype)] ← src[n] (F32), for F32/F16/BF16. */
enum hm_status hm_from_f32(const float *src, int64_t n, enum hm_dtype dtype, void *dst,
                           struct hm_error *err);

#endif
