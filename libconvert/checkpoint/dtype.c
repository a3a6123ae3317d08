#include "dtype.h"

#include <string.h>

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

float hm_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1F;
    uint32_t man = h & 0x3FF;
    if (exp == 0x1F) /* Inf / NaN: keep the payload */
        return bits_f32(sign | 0x7F800000u | (man << 13));
    if (exp == 0) {
        if (man == 0)
            return bits_f32(sign);
        /* subnormal: man × 2^-24, exact in f32 */
        float v = (float)man * 0x1p-24f;
        return sign ? -v : v;
    }
    return bits_f32(sign | ((exp + 112) << 23) | (man << 13));
}

uint16_t hm_f32_to_f16(float f)
{
    uint32_t u = f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
    uint32_t exp = (u >> 23) & 0xFF;
    uint32_t man = u & 0x7FFFFF;
    if (exp == 0xFF) {
        if (man == 0)
            return sign | 0x7C00;
        /* NaN: sign and the top 10 payload bits kept, so F16 → F32 → F16 is
         * the identity (signaling NaNs included); the quiet bit is set only
         * when the kept payload would be 0 (that pattern is Inf). */
        uint16_t q = (uint16_t)(man >> 13);
        return sign | 0x7C00 | (q ? q : 0x200);
    }
    int32_t e = (int32_t)exp - 127 + 15;
    if (e >= 0x1F)
        return sign | 0x7C00; /* overflow → Inf (RNE never rounds back down) */
    if (e <= 0) {
        /* subnormal or zero in f16: value = m × 2^-24 with rounding */
        if (e < -10)
            return sign; /* below half the smallest subnormal: rounds to 0 */
        uint32_t m = man | 0x800000; /* implicit bit */
        uint32_t shift = (uint32_t)(14 - e);     /* 14..24 */
        uint32_t q = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1);
        uint32_t half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1)))
            q++;
        return sign | (uint16_t)q; /* q may carry into the smallest normal: correct */
    }
    uint32_t q = ((uint32_t)e << 10) | (man >> 13);
    uint32_t rem = man & 0x1FFF;
    if (rem > 0x1000 || (rem == 0x1000 && (q & 1)))
        q++; /* may carry into the exponent, up to Inf: correct */
    return sign | (uint16_t)q;
}

float hm_bf16_to_f32(uint16_t h)
{
    return bits_f32((uint32_t)h << 16);
}

uint16_t hm_f32_to_bf16(float f)
{
    uint32_t u = f32_bits(f);
    if ((u & 0x7F800000u) == 0x7F800000u && (u & 0x7FFFFF)) {
        /* NaN stays NaN: truncate the payload (BF16 → F32 → BF16 is the
         * identity); set the quiet bit only if the kept payload is 0. */
        uint16_t h = (uint16_t)(u >> 16);
        return (h & 0x7F) ? h : (uint16_t)(h | 0x40);
    }
    uint32_t rounding = 0x7FFF + ((u >> 16) & 1);
    return (uint16_t)((u + rounding) >> 16);
}

enum hm_status hm_to_f32(const void *src, enum hm_dtype dtype, int64_t n, float *dst,
                         struct hm_error *err)
{
    const unsigned char *s = src;
    switch (dtype) {
    case HM_DTYPE_F32:
        memcpy(dst, s, (size_t)n * 4);
        return HM_OK;
    case HM_DTYPE_F16:
        for (int64_t i = 0; i < n; i++)
            dst[i] = hm_f16_to_f32((uint16_t)(s[2 * i] | (s[2 * i + 1] << 8)));
        return HM_OK;
    case HM_DTYPE_BF16:
        for (int64_t i = 0; i < n; i++)
            dst[i] = hm_bf16_to_f32((uint16_t)(s[2 * i] | (s[2 * i + 1] << 8)));
        return HM_OK;
    case HM_DTYPE_F64:
        for (int64_t i = 0; i < n; i++) {
            double d;
            memcpy(&d, s + 8 * i, 8);
            dst[i] = (float)d;
        }
        return HM_OK;
    default:
        return hm_error_set(err, HM_ERR_UNSUPPORTED, "dtype %s cannot be converted to F32",
                            hm_dtype_name(dtype));
    }
}

enum hm_status hm_from_f32(const float *src, int64_t n, enum hm_dtype dtype, void *dst,
                           struct hm_error *err)
{
    unsigned char *d = dst;
    switch (dtype) {
    case HM_DTYPE_F32:
        memcpy(d, src, (size_t)n * 4);
        return HM_OK;
    case HM_DTYPE_F16:
    case HM_DTYPE_BF16:
        for (int64_t i = 0; i < n; i++) {
            uint16_t h = dtype == HM_DTYPE_F16 ? hm_f32_to_f16(src[i]) : hm_f32_to_bf16(src[i]);
            d[2 * i] = (unsigned char)(h & 0xFF);
            d[2 * i + 1] = (unsigned char)(h >> 8);
        }
        return HM_OK;
    default:
        return hm_error_set(err, HM_ERR_UNSUPPORTED, "cannot store F32 as %s",
                            hm_dtype_name(dtype));
    }
}
