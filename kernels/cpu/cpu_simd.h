/* cpu_simd.h — private: one definition of the function multi-versioning
 * the fast CPU kernels use. The build targets baseline x86-64; hot loops are
 * compiled again for AVX-512F and AVX2+FMA and picked at load time.
 * Feature names, not "arch=" names: "arch=skylake-avx512" does not match
 * every AVX-512 machine (it fell back to SSE2 on our CI kind, 2–3× slower). */
#ifndef HM_CPU_SIMD_H
#define HM_CPU_SIMD_H

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define HM_CLONES __attribute__((target_clones("avx512f", "avx2,fma", "default")))
#else
#define HM_CLONES
#endif

#endif
