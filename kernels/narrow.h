/* narrow.h — the exact widening of the narrow weight dtypes (bf16, f16) to
 * fp32, one definition for the CPU ops and the CUDA kernels (widen_rows).
 * Both are subsets of fp32: the widened value is exact, so an op reading a
 * widened tensor computes what it computes on the fp32 checkpoint of the
 * same values. */
#ifndef HM_NARROW_H
#define HM_NARROW_H

#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define HM_NARROW_FN static inline __host__ __device__
#else
#define HM_NARROW_FN static inline
#endif

HM_NARROW_FN float hm_bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* bf16 is the top half of an fp32. */
HM_NARROW_FN float hm_bf16_f32(uint16_t b) { return hm_bits_f32((uint32_t)b << 16); }

/* IEEE half: sign, 5-bit exponent (bias 15), 10-bit mantissa. */
HM_NARROW_FN float hm_f16_f32(uint16_t h)
{
    const uint32_t s = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 31) /* Inf, NaN (payload kept) */
        return hm_bits_f32(s | 0x7f800000u | (m << 13));
    if (e)
        return hm_bits_f32(s | ((e + 112u) << 23) | (m << 13));
    /* zero or subnormal: m · 2^-24, exact in fp32 */
    const float v = (float)m * 5.9604644775390625e-8f;
    return s ? -v : v;
}

#endif
