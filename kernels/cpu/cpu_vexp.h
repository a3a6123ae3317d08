/* cpu_vexp.h — private: branch-free expf and erff that vectorize inside
 * HM_CLONES loops (libm's expf and erff are scalar calls that stop a loop
 * from vectorizing). Used by the fast kernels only; the ref kernels keep
 * libm, and the tests hold every fast kernel to its ref's tolerance. */
#ifndef HM_CPU_VEXP_H
#define HM_CPU_VEXP_H

#include <stdint.h>

#include "cpu_v16.h"

/* The core both forms below share, for a float or an hm_v16 xc already
 * clamped to [−87.33654, 88.72283]: n = rint(xc / ln2) by the 1.5·2^23
 * trick, r = xc − n ln2 (ln2 split in two for an exact product), e = e^r
 * by Cephes' degree-6 polynomial; r and p are the caller's scratch of
 * xc's type. */
#define HM_EXPF_CORE(xc, n, r, p, e)                                                             \
    do {                                                                                         \
        n = (xc) * 1.44269504088896341f + 12582912.0f;                                           \
        n -= 12582912.0f;                                                                        \
        r = (xc) - n * 0.693359375f;                                                             \
        r = r - n * -2.12194440e-4f;                                                             \
        p = r * 1.9875691500e-4f + 1.3981999507e-3f;                                             \
        p = p * r + 8.3334519073e-3f;                                                            \
        p = p * r + 4.1665795894e-2f;                                                            \
        p = p * r + 1.6666665459e-1f;                                                            \
        p = p * r + 5.0000001201e-1f;                                                            \
        e = p * r * r + r + 1.0f;                                                                \
    } while (0)

/* e^x, within 2 ulp of expf over the normal range (HM_EXPF_CORE, 2^n built
 * in the exponent bits). x < −87.33654 gives 0 (so −∞ does, as masked
 * scores need), x > 88.72283 gives +∞, NaN stays NaN. */
static inline __attribute__((always_inline)) float hm_vexpf(float x)
{
    const float hi = 88.72283f, lo = -87.33654f;
    float xc = x > hi ? hi : x;
    xc = xc < lo ? lo : xc;
    float n, r, p, e;
    HM_EXPF_CORE(xc, n, r, p, e);
    union {
        uint32_t u;
        float f;
    } s;
    float top = n > 127.0f ? 2.0f : 1.0f; /* e^x near FLT_MAX: n = 128 */
    n = n > 127.0f ? 127.0f : n;
    s.u = (uint32_t)((int32_t)n + 127) << 23;
    float y = e * s.f * top;
    y = x < lo ? 0.0f : y;
    y = x > hi ? __builtin_inff() : y;
    return x != x ? x : y;
}

/* hm_vexpf on 16 lanes known to be ≤ 0 or NaN (softmax arguments x − max):
 * no overflow branch; x < −87.33654 (−∞ too) gives 0, NaN stays NaN. */
static inline __attribute__((always_inline)) hm_v16 hm_v16_exp_nonpos(hm_v16 x)
{
    const float lo = -87.33654f;
    const hm_i16 small = x < lo;
    const hm_v16 xc = hm_v16_select(small, hm_v16_splat(lo), x);
    hm_v16 n, r, p, e;
    HM_EXPF_CORE(xc, n, r, p, e);
    const hm_v16 s = (hm_v16)((__builtin_convertvector(n, hm_i16) + 127) << 23);
    return hm_v16_select(small, hm_v16_splat(0.0f), e * s);
}

/* e^x in double, within 2e-15 relative over [−708, 709]: x = n ln2 + r,
 * |r| ≤ ln2/2 (ln2 in two parts), e^r by its Taylor polynomial to degree 12
 * (truncation < 2e-16), 2^n in the exponent bits; below −708 gives 0, above
 * 709 +∞, NaN stays NaN. For the KD term, whose value the tests hold to
 * 1e-9 (an fp32 exp would not do). */
static inline __attribute__((always_inline)) double hm_vexp_d(double x)
{
    const double hi = 709.0, lo = -708.0;
    double xc = x > hi ? hi : x;
    xc = xc < lo ? lo : xc;
    double n = xc * 1.4426950408889634 + 6755399441055744.0; /* rint by 1.5·2^52 */
    n -= 6755399441055744.0;
    double r = xc - n * 6.93147180369123816490e-01;
    r = r - n * 1.90821492927058770002e-10;
    double p = 1.0 / 479001600.0;
    p = p * r + 1.0 / 39916800.0;
    p = p * r + 1.0 / 3628800.0;
    p = p * r + 1.0 / 362880.0;
    p = p * r + 1.0 / 40320.0;
    p = p * r + 1.0 / 5040.0;
    p = p * r + 1.0 / 720.0;
    p = p * r + 1.0 / 120.0;
    p = p * r + 1.0 / 24.0;
    p = p * r + 1.0 / 6.0;
    p = p * r + 0.5;
    p = p * r + 1.0;
    p = p * r + 1.0;
    union {
        uint64_t u;
        double f;
    } s;
    /* n + 1023 as the low mantissa bits of 1.5·2^52 + n + 1023, shifted
     * into the exponent: no double→int64 conversion (AVX-512F lacks a
     * vector one) */
    s.f = n + (1023.0 + 6755399441055744.0);
    s.u <<= 52;
    double y = p * s.f;
    y = x < lo ? 0.0 : y;
    y = x > hi ? __builtin_inf() : y;
    return x != x ? x : y;
}

/* erf(z) as a rational function z·P(z²)/Q(z²) on [−4, 4] (clamped beyond,
 * where |1 − erf| < 2e-8): the fp32 approximation of Eigen's
 * generic_fast_erf_float / XLA, a few ulp from erf. */
static inline __attribute__((always_inline)) float hm_verff(float z)
{
    z = z < -4.0f ? -4.0f : z > 4.0f ? 4.0f : z;
    float z2 = z * z;
    float pn = -2.72614225801306e-10f;
    pn = pn * z2 + 2.77068142495902e-08f;
    pn = pn * z2 + -2.10102402082508e-06f;
    pn = pn * z2 + -5.69250639462346e-05f;
    pn = pn * z2 + -7.34990630326855e-04f;
    pn = pn * z2 + -2.95459980854025e-03f;
    pn = pn * z2 + -1.60960333262415e-02f;
    float qd = -1.45660718464996e-05f;
    qd = qd * z2 + -2.13374055278905e-04f;
    qd = qd * z2 + -1.68282697438203e-03f;
    qd = qd * z2 + -7.37332916720468e-03f;
    qd = qd * z2 + -1.42647390514189e-02f;
    return z * pn / qd;
}

/* tanh(u) = 1 − 2 / (e^{2u} + 1): exact limits ±1; near 0 its absolute
 * error is a few 1e-8 (relative error grows there), which is what GELU's
 * 1 + tanh needs — not a general tanh. */
static inline __attribute__((always_inline)) float hm_vtanhf_gelu(float u)
{
    return 1.0f - 2.0f / (hm_vexpf(2.0f * u) + 1.0f);
}

#endif
