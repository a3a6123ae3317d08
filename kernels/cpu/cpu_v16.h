/* cpu_v16.h — private: a 16-lane fp32 vector (GCC/clang vector extension)
 * for the fast kernels' row reductions. Inside an HM_CLONES function it
 * compiles to one AVX-512 register, two AVX2 ones or four SSE ones. Use it
 * where a row is reduced (max, sum) and then used again: `omp simd
 * reduction` loops lower such a reduction through a 16-slot stack array
 * filled and folded one scalar at a time, which cost as much as the row's
 * exps (the feature-map softmax ran 2× slower). Every helper is
 * always_inline: a v16 passed to a function compiled for another target
 * changes ABI, and GCC says so (-Wpsabi) wherever a v16 is passed in code
 * compiled for the baseline; the warning is off for every file that
 * includes this header, the note by -Wno-psabi (CMakeLists.txt). Unaligned
 * loads and stores (memcpy). */
#ifndef HM_CPU_V16_H
#define HM_CPU_V16_H

#include <stdint.h>
#include <string.h>

#pragma GCC diagnostic ignored "-Wpsabi"

typedef float hm_v16 __attribute__((vector_size(64)));
typedef int32_t hm_i16 __attribute__((vector_size(64)));

#define HM_V16_INLINE static inline __attribute__((always_inline))

HM_V16_INLINE hm_v16 hm_v16_load(const float *p)
{
    hm_v16 v;
    memcpy(&v, p, sizeof v);
    return v;
}

HM_V16_INLINE void hm_v16_store(float *p, hm_v16 v) { memcpy(p, &v, sizeof v); }

HM_V16_INLINE hm_v16 hm_v16_splat(float x) { return (hm_v16){0} + x; }

/* m ? a : b per lane (m from a lane comparison: all ones or zero). */
HM_V16_INLINE hm_v16 hm_v16_select(hm_i16 m, hm_v16 a, hm_v16 b)
{
    return (hm_v16)(((hm_i16)a & m) | ((hm_i16)b & ~m));
}

HM_V16_INLINE hm_v16 hm_v16_max(hm_v16 a, hm_v16 b) { return hm_v16_select(a > b, a, b); }
HM_V16_INLINE hm_v16 hm_v16_min(hm_v16 a, hm_v16 b) { return hm_v16_select(a < b, a, b); }

/* v with lane i taken from lane i ^ k (k = 8, 4, 2, 1: a butterfly step). */
#if defined(__clang__)
#define HM_V16_SWAP8(v) __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7)
#define HM_V16_SWAP4(v) __builtin_shufflevector(v, v, 4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11)
#define HM_V16_SWAP2(v) __builtin_shufflevector(v, v, 2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13)
#define HM_V16_SWAP1(v) __builtin_shufflevector(v, v, 1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14)
#else
#define HM_V16_SWAP8(v) __builtin_shuffle(v, (hm_i16){8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7})
#define HM_V16_SWAP4(v) __builtin_shuffle(v, (hm_i16){4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11})
#define HM_V16_SWAP2(v) __builtin_shuffle(v, (hm_i16){2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13})
#define HM_V16_SWAP1(v) __builtin_shuffle(v, (hm_i16){1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14})
#endif

/* r[i][j] ↔ r[j][i]: four butterfly stages of two-register shuffles (at
 * stage k, rows i and i + k swap their off-diagonal k × k blocks). */
#if defined(__clang__)
#define HM_V16_MIX(a, b, ...) __builtin_shufflevector(a, b, __VA_ARGS__)
#else
#define HM_V16_MIX(a, b, ...) __builtin_shuffle(a, b, (hm_i16){__VA_ARGS__})
#endif
#define HM_V16_STAGE(r, k, LO, HI)                                                             \
    for (int i_ = 0; i_ < 16; i_++)                                                            \
        if (!(i_ & (k))) {                                                                     \
            const hm_v16 a_ = r[i_], b_ = r[i_ + (k)];                                         \
            r[i_] = HM_V16_MIX(a_, b_, LO);                                                    \
            r[i_ + (k)] = HM_V16_MIX(a_, b_, HI);                                              \
        }
HM_V16_INLINE void hm_v16_transpose(hm_v16 r[16])
{
#define HM_L1 0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30
#define HM_H1 1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31
#define HM_L2 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29
#define HM_H2 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31
#define HM_L4 0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27
#define HM_H4 4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31
#define HM_L8 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23
#define HM_H8 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31
    HM_V16_STAGE(r, 1, HM_L1, HM_H1)
    HM_V16_STAGE(r, 2, HM_L2, HM_H2)
    HM_V16_STAGE(r, 4, HM_L4, HM_H4)
    HM_V16_STAGE(r, 8, HM_L8, HM_H8)
#undef HM_L1
#undef HM_H1
#undef HM_L2
#undef HM_H2
#undef HM_L4
#undef HM_H4
#undef HM_L8
#undef HM_H8
}

/* Horizontal reductions (a butterfly: a fixed order for a given input). */
HM_V16_INLINE float hm_v16_hsum(hm_v16 v)
{
    v += HM_V16_SWAP8(v);
    v += HM_V16_SWAP4(v);
    v += HM_V16_SWAP2(v);
    v += HM_V16_SWAP1(v);
    return v[0];
}

HM_V16_INLINE float hm_v16_hmax(hm_v16 v)
{
    v = hm_v16_max(v, HM_V16_SWAP8(v));
    v = hm_v16_max(v, HM_V16_SWAP4(v));
    v = hm_v16_max(v, HM_V16_SWAP2(v));
    v = hm_v16_max(v, HM_V16_SWAP1(v));
    return v[0];
}

HM_V16_INLINE float hm_v16_hmin(hm_v16 v) { return -hm_v16_hmax(-v); } /* exact */

#endif
