/* test_dtype.c — F16/BF16 ↔ F32 conversions (libconvert/checkpoint/dtype.c).
 *
 * Oracle: an independent reference written here with double arithmetic. The
 * value of every 16-bit pattern is decoded with ldexp; F32 → F16/BF16 is the
 * nearest pattern found by binary search over the (monotonic) positive
 * patterns, comparing exact double distances, ties to the even pattern, and
 * the pattern just above the largest finite one (0x7C00 / 0x7F80) standing
 * for the next power of two, so overflow to Inf follows round-to-nearest-even
 * exactly. Distances are exact in double: both values have ≤ 24 significant
 * bits within a factor of 2 of each other (or one is 0). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "dtype.h"
#include "testutil.h"

static uint32_t bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* ---- reference -------------------------------------------------------------- */

struct fmt16 {
    const char *name;
    int man_bits;      /* 10 (F16) or 7 (BF16) */
    int bias;          /* 15 or 127 */
    uint16_t inf;      /* 0x7C00 or 0x7F80 */
    uint16_t (*to)(float);
    float (*from)(uint16_t);
};

static const struct fmt16 F16 = {"F16", 10, 15, 0x7C00, hm_f32_to_f16, hm_f16_to_f32};
static const struct fmt16 BF16 = {"BF16", 7, 127, 0x7F80, hm_f32_to_bf16, hm_bf16_to_f32};

/* Magnitude of positive pattern p ≤ inf, as if the exponent went on (inf
 * decodes to 2^(emax+1)). */
static double ref_value(const struct fmt16 *f, uint32_t p)
{
    uint32_t e = p >> f->man_bits, m = p & ((1u << f->man_bits) - 1);
    if (e == 0)
        return ldexp((double)m, 1 - f->bias - f->man_bits);
    return ldexp((double)((1u << f->man_bits) + m), (int)e - f->bias - f->man_bits);
}

/* Round-to-nearest-even of a finite or infinite, non-NaN float. */
static uint16_t ref_round(const struct fmt16 *f, float x)
{
    uint16_t sign = (bits(x) >> 31) ? 0x8000 : 0;
    double a = fabs((double)x);
    if (isinf(a) || a >= ref_value(f, f->inf))
        return sign | f->inf;
    /* largest p with value(p) <= a */
    uint32_t lo = 0, hi = f->inf; /* value(lo) <= a < value(hi) */
    while (hi - lo > 1) {
        uint32_t mid = (lo + hi) / 2;
        if (ref_value(f, mid) <= a)
            lo = mid;
        else
            hi = mid;
    }
    double dlo = a - ref_value(f, lo), dhi = ref_value(f, hi) - a;
    uint32_t p = dlo < dhi ? lo : dhi < dlo ? hi : (lo % 2 == 0 ? lo : hi);
    return (uint16_t)(sign | p);
}

static int is_nan16(const struct fmt16 *f, uint16_t h)
{
    return (h & 0x7FFF) > f->inf;
}

static void check_one(const struct fmt16 *f, float x)
{
    uint16_t got = f->to(x);
    if (isnan(x)) {
        cr_assert(is_nan16(f, got), "%s(NaN 0x%08x) = 0x%04x is not NaN", f->name, bits(x), got);
        cr_assert_eq(got >> 15, bits(x) >> 31, "%s: NaN sign lost for 0x%08x", f->name, bits(x));
        /* payload: the top mantissa bits are kept; the quiet bit is added only
         * when they are all zero (they would spell Inf) */
        uint32_t keep = (bits(x) & 0x7FFFFF) >> (23 - f->man_bits);
        uint32_t quiet = 1u << (f->man_bits - 1);
        uint32_t want = keep ? keep : quiet;
        cr_assert_eq(got & ((1u << f->man_bits) - 1), want, "%s: NaN 0x%08x → 0x%04x", f->name,
                     bits(x), got);
        return;
    }
    uint16_t want = ref_round(f, x);
    cr_assert_eq(got, want, "%s(%a = 0x%08x) = 0x%04x, reference 0x%04x", f->name, (double)x,
                 bits(x), got, want);
}

/* ---- 16 → 32 → 16 -------------------------------------------------------------- */

static void all_patterns(const struct fmt16 *f)
{
    for (uint32_t h = 0; h < 65536; h++) {
        float v = f->from((uint16_t)h);
        if (is_nan16(f, (uint16_t)h)) {
            cr_assert(isnan(v), "%s 0x%04x → %a is not NaN", f->name, h, (double)v);
            cr_assert_eq(bits(v) >> 31, h >> 15, "%s 0x%04x: NaN sign lost", f->name, h);
            /* the payload moves to the top of the F32 mantissa */
            cr_assert_eq((bits(v) & 0x7FFFFF) >> (23 - f->man_bits),
                         h & ((1u << f->man_bits) - 1), "%s 0x%04x: payload lost", f->name, h);
        } else {
            double want = ref_value(f, h & 0x7FFF);
            if (h & 0x8000)
                want = -want;
            if ((h & 0x7FFF) == f->inf)
                want = (h & 0x8000) ? -INFINITY : INFINITY;
            cr_assert_eq((double)v, want, "%s 0x%04x → %a, want %a", f->name, h, (double)v, want);
            cr_assert_eq(signbit(v) != 0, (h >> 15) != 0, "%s 0x%04x: sign", f->name, h);
        }
        uint16_t back = f->to(v);
        cr_assert_eq(back, h, "%s 0x%04x → F32 0x%08x → 0x%04x", f->name, h, bits(v), back);
    }
}

Test(dtype, f16_all_patterns_round_trip_exactly) { all_patterns(&F16); }
Test(dtype, bf16_all_patterns_round_trip_exactly) { all_patterns(&BF16); }

/* ---- 32 → 16 ------------------------------------------------------------------ */

/* Every representable value, every midpoint between neighbours and ±2 F32
 * ulps around each, both signs. */
static void boundaries(const struct fmt16 *f)
{
    for (uint32_t p = 0; p < f->inf; p++) {
        double v = ref_value(f, p), mid = (v + ref_value(f, p + 1)) / 2;
        double pts[2] = {v, mid};
        for (int k = 0; k < 2; k++) {
            float c = (float)pts[k];
            if (!isfinite(c))
                c = 3.40282347e38f; /* the BF16 midpoint above its max is past FLT_MAX */
            cr_assert(k == 0 || (double)c == pts[k] || !isfinite((float)pts[k]),
                      "%s: midpoint of 0x%04x not exact in F32", f->name, p);
            uint32_t u = bits(c);
            for (int64_t d = -2; d <= 2; d++) {
                int64_t w = (int64_t)u + d;
                if (w < 0 || w >= 0x7F800000)
                    continue;
                check_one(f, from_bits((uint32_t)w));
                check_one(f, from_bits((uint32_t)w | 0x80000000u));
            }
        }
    }
}

Test(dtype, f16_rounding_at_every_boundary) { boundaries(&F16); }
Test(dtype, bf16_rounding_at_every_boundary) { boundaries(&BF16); }

static void random_patterns(const struct fmt16 *f, uint64_t seed, int64_t n)
{
    uint64_t s = seed;
    for (int64_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)tu_rand_u64(&s);
        /* half the draws near the format's range, where rounding happens */
        if (i & 1) {
            int emin = f == &F16 ? 127 - 26 : 1, emax = f == &F16 ? 127 + 17 : 254;
            uint32_t e = (uint32_t)(emin + (int)(tu_rand_u64(&s) % (uint64_t)(emax - emin + 1)));
            u = (u & 0x807FFFFFu) | (e << 23);
        }
        check_one(f, from_bits(u));
    }
}

/* ~10^7 draws per format (seeded; the seed is in the failure message via the
 * value printed by check_one). */
Test(dtype, f16_random_f32_patterns, .timeout = 600) { random_patterns(&F16, 0xF16, 10000000); }
Test(dtype, bf16_random_f32_patterns, .timeout = 600) { random_patterns(&BF16, 0xBF16, 10000000); }

Test(dtype, f32_special_values)
{
    /* every F32 exponent with mantissas 0, 1, the halfway bits, all ones */
    for (uint32_t e = 0; e < 256; e++) {
        static const uint32_t mans[] = {0, 1, 0x1000, 0x1FFF, 0x2000, 0x3000, 0x8000, 0xFFFF,
                                        0x10000, 0x18000, 0x400000, 0x7FFFFF};
        for (size_t k = 0; k < sizeof mans / sizeof *mans; k++)
            for (uint32_t s = 0; s < 2; s++) {
                float x = from_bits(s << 31 | e << 23 | mans[k]);
                check_one(&F16, x);
                check_one(&BF16, x);
            }
    }
}

Test(dtype, hand_picked_cases)
{
    /* overflow */
    cr_assert_eq(hm_f32_to_f16(65504.0f), 0x7BFF);
    cr_assert_eq(hm_f32_to_f16(65519.99f), 0x7BFF);
    cr_assert_eq(hm_f32_to_f16(65520.0f), 0x7C00, "the midpoint to 2^16 ties to Inf (even)");
    cr_assert_eq(hm_f32_to_f16(-1e10f), 0xFC00);
    cr_assert_eq(hm_f32_to_f16(INFINITY), 0x7C00);
    cr_assert_eq(hm_f32_to_f16(-INFINITY), 0xFC00);
    cr_assert_eq(hm_f32_to_bf16(3.40282347e38f), 0x7F80, "FLT_MAX rounds up to Inf in BF16");
    cr_assert_eq(hm_f32_to_bf16(-INFINITY), 0xFF80);
    /* ties to even */
    cr_assert_eq(hm_f32_to_f16(1.0f + 0x1p-11f), 0x3C00);
    cr_assert_eq(hm_f32_to_f16(1.0f + 3 * 0x1p-11f), 0x3C02);
    cr_assert_eq(hm_f32_to_bf16(1.0f + 0x1p-8f), 0x3F80);
    cr_assert_eq(hm_f32_to_bf16(1.0f + 3 * 0x1p-8f), 0x3F82);
    /* subnormals */
    cr_assert_eq(hm_f32_to_f16(0x1p-24f), 0x0001);
    cr_assert_eq(hm_f32_to_f16(0x1p-25f), 0x0000, "half the smallest subnormal ties to 0");
    cr_assert_eq(hm_f32_to_f16(0x1.000002p-25f), 0x0001);
    cr_assert_eq(hm_f32_to_f16(3 * 0x1p-25f), 0x0002);
    cr_assert_eq(hm_f32_to_f16(0x1p-14f - 0x1p-25f), 0x0400, "rounds up into the normals");
    cr_assert_eq(hm_f32_to_f16(-0x1p-30f), 0x8000);
    cr_assert_eq(hm_f16_to_f32(0x0001), 0x1p-24f);
    cr_assert_eq(hm_f16_to_f32(0x03FF), 0x3FFp-24f);
    cr_assert_eq(hm_f32_to_bf16(from_bits(0x00000001)), 0x0000);
    cr_assert_eq(hm_f32_to_bf16(from_bits(0x00018000)), 0x0002);
    cr_assert_eq(hm_bf16_to_f32(0x0001), from_bits(0x00010000));
    /* signed zeros */
    cr_assert_eq(hm_f32_to_f16(0.0f), 0x0000);
    cr_assert_eq(hm_f32_to_f16(-0.0f), 0x8000);
    cr_assert_eq(hm_f32_to_bf16(-0.0f), 0x8000);
    cr_assert_eq(bits(hm_f16_to_f32(0x8000)), 0x80000000u);
    cr_assert_eq(bits(hm_bf16_to_f32(0x8000)), 0x80000000u);
    /* NaN */
    cr_assert_eq(hm_f32_to_f16(from_bits(0x7FC00000)), 0x7E00);
    cr_assert_eq(hm_f32_to_f16(from_bits(0xFFC00000)), 0xFE00);
    cr_assert(is_nan16(&F16, hm_f32_to_f16(from_bits(0x7F800001))), "low-payload NaN → Inf");
    cr_assert(is_nan16(&BF16, hm_f32_to_bf16(from_bits(0x7F800001))), "low-payload NaN → Inf");
    cr_assert_eq(hm_f32_to_bf16(from_bits(0x7FC00000)), 0x7FC0);
}

Test(dtype, array_conversions)
{
    /* unaligned little-endian sources, each dtype */
    unsigned char raw[1 + 4 * 8];
    float src[4] = {1.5f, -0.0f, 65504.0f, 0x1p-24f}, out[4];
    struct hm_error err;
    cr_assert_eq(hm_from_f32(src, 4, HM_DTYPE_F16, raw + 1, &err), HM_OK);
    cr_assert(raw[1] == 0x00 && raw[2] == 0x3E, "F16 stored little-endian");
    cr_assert_eq(hm_to_f32(raw + 1, HM_DTYPE_F16, 4, out, &err), HM_OK);
    cr_assert(memcmp(src, out, sizeof src) == 0);
    cr_assert_eq(hm_from_f32(src, 4, HM_DTYPE_BF16, raw + 1, &err), HM_OK);
    cr_assert_eq(hm_to_f32(raw + 1, HM_DTYPE_BF16, 4, out, &err), HM_OK);
    cr_assert_eq(out[0], 1.5f);
    cr_assert_eq(bits(out[1]), 0x80000000u);
    cr_assert_eq(out[2], 65536.0f, "65504 rounds to 65536 in BF16");
    cr_assert_eq(hm_from_f32(src, 4, HM_DTYPE_F32, raw + 1, &err), HM_OK);
    cr_assert_eq(hm_to_f32(raw + 1, HM_DTYPE_F32, 4, out, &err), HM_OK);
    cr_assert(memcmp(src, out, sizeof src) == 0);
    double d[2] = {0.1, -1e300};
    memcpy(raw + 1, d, sizeof d);
    cr_assert_eq(hm_to_f32(raw + 1, HM_DTYPE_F64, 2, out, &err), HM_OK);
    cr_assert_eq(out[0], 0.1f);
    cr_assert(isinf(out[1]) && out[1] < 0);
    cr_assert_eq(hm_to_f32(raw, HM_DTYPE_U8, 1, out, &err), HM_ERR_UNSUPPORTED);
    cr_assert(strstr(err.msg, "U8"), "%s", err.msg);
    cr_assert_eq(hm_from_f32(src, 1, HM_DTYPE_I64, raw, &err), HM_ERR_UNSUPPORTED);
    cr_assert_eq(hm_to_f32(raw, HM_DTYPE_F16, 0, out, &err), HM_OK, "n = 0");
}
