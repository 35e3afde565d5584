/* Each code path's float operations under one set of names, GC_<PATH>_<OP> for PATH in SCALAR,
 * AVX2 (8 lanes) and AVX-512 (16 lanes), so a computation written once over them (GC_OP) expands to
 * the same IEEE operations lane by lane on every path, and so the same bits; and gc_math.h's exp and
 * sigmoid so written for the vector paths.  For the C network step (gc_net.c) and the MinGRU gates
 * (gc_gates.h). */
#ifndef GC_SIMD_MATH_H
#define GC_SIMD_MATH_H
#include "gc_math.h"

#define GC_OP(P, name) GC_##P##_##name

#define GC_SCALAR_LOAD(p) (*(p))
#define GC_SCALAR_STORE(p, v) (*(p) = (v))
#define GC_SCALAR_SET1(v) (v)
#define GC_SCALAR_ADD(a, b) ((a) + (b))
#define GC_SCALAR_SUB(a, b) ((a) - (b))
#define GC_SCALAR_MUL(a, b) ((a) * (b))
#define GC_SCALAR_FMA(a, b, c) fmaf(a, b, c)
#define GC_SCALAR_SIGMOID(v) gc_sigmoidf(v)

#if defined(__x86_64__)
#include <immintrin.h>
#define GC_SIMD_X86 1
#define GC_AVX2 __attribute__((target("avx2,fma")))
#define GC_AVX512 __attribute__((target("avx512f,avx2,fma")))
/* A function compiled twice, with and without the FMA instructions, the copy for the CPU chosen at
 * load time (an ifunc): its fmaf, and gc_math.h's through it, one instruction, not a call into libm.
 * The same bits either way (fmaf is correctly rounded; -ffp-contract=off fuses nothing else). */
#define GC_FMA_CLONES __attribute__((target_clones("fma", "default")))

#define GC_AVX2_LOAD(p) _mm256_loadu_ps(p)
#define GC_AVX2_STORE(p, v) _mm256_storeu_ps(p, v)
#define GC_AVX2_SET1(v) _mm256_set1_ps(v)
#define GC_AVX2_ADD(a, b) _mm256_add_ps(a, b)
#define GC_AVX2_SUB(a, b) _mm256_sub_ps(a, b)
#define GC_AVX2_MUL(a, b) _mm256_mul_ps(a, b)
#define GC_AVX2_DIV(a, b) _mm256_div_ps(a, b)
#define GC_AVX2_MIN(a, b) _mm256_min_ps(a, b)
#define GC_AVX2_MAX(a, b) _mm256_max_ps(a, b)
#define GC_AVX2_FMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define GC_AVX2_NEGATE(v) _mm256_xor_ps(v, _mm256_set1_ps(-0.0f))      /* a sign flip, as -x */
#define GC_AVX2_EXP2_OF_INTEGER(n)   /* 2^n for integral n in float's exponent range */ \
    _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23))
#define GC_AVX2_SIGMOID(v) gc_sigmoid8(v)

#define GC_AVX512_LOAD(p) _mm512_loadu_ps(p)
#define GC_AVX512_STORE(p, v) _mm512_storeu_ps(p, v)
#define GC_AVX512_SET1(v) _mm512_set1_ps(v)
#define GC_AVX512_ADD(a, b) _mm512_add_ps(a, b)
#define GC_AVX512_SUB(a, b) _mm512_sub_ps(a, b)
#define GC_AVX512_MUL(a, b) _mm512_mul_ps(a, b)
#define GC_AVX512_DIV(a, b) _mm512_div_ps(a, b)
#define GC_AVX512_MIN(a, b) _mm512_min_ps(a, b)
#define GC_AVX512_MAX(a, b) _mm512_max_ps(a, b)
#define GC_AVX512_FMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define GC_AVX512_NEGATE(v) /* (integer xor: AVX-512F has no float one) */ \
    _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(v), _mm512_set1_epi32(INT32_MIN)))
#define GC_AVX512_EXP2_OF_INTEGER(n) \
    _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23))
#define GC_AVX512_SIGMOID(v) gc_sigmoid16(v)

/* gc_expf's operations on path P, over x (clamped in place). */
#define GC_EXP_BODY(P, VEC)                                                                      \
    x = GC_OP(P, MIN)(GC_OP(P, MAX)(x, GC_OP(P, SET1)(GC_EXP_LO)), GC_OP(P, SET1)(GC_EXP_HI));   \
    VEC rounder = GC_OP(P, SET1)(GC_ROUNDER);                                                    \
    VEC n = GC_OP(P, SUB)(GC_OP(P, FMA)(x, GC_OP(P, SET1)(GC_LOG2E), rounder), rounder);         \
    VEC r = GC_OP(P, FMA)(n, GC_OP(P, SET1)(-GC_LN2_HI), x);                                     \
    r = GC_OP(P, FMA)(n, GC_OP(P, SET1)(-GC_LN2_LO), r);                                         \
    VEC p = GC_OP(P, SET1)(GC_EXP_P0);                                                           \
    p = GC_OP(P, FMA)(p, r, GC_OP(P, SET1)(GC_EXP_P1));                                          \
    p = GC_OP(P, FMA)(p, r, GC_OP(P, SET1)(GC_EXP_P2));                                          \
    p = GC_OP(P, FMA)(p, r, GC_OP(P, SET1)(GC_EXP_P3));                                          \
    p = GC_OP(P, FMA)(p, r, GC_OP(P, SET1)(GC_EXP_P4));                                          \
    p = GC_OP(P, FMA)(p, r, GC_OP(P, SET1)(GC_EXP_P5));                                          \
    p = GC_OP(P, ADD)(GC_OP(P, FMA)(p, GC_OP(P, MUL)(r, r), r), GC_OP(P, SET1)(1.0f));           \
    return GC_OP(P, MUL)(p, GC_OP(P, EXP2_OF_INTEGER)(n));

GC_AVX2 static inline __m256 gc_exp8(__m256 x) { GC_EXP_BODY(AVX2, __m256) }
GC_AVX512 static inline __m512 gc_exp16(__m512 x) { GC_EXP_BODY(AVX512, __m512) }

GC_AVX2 static inline __m256 gc_sigmoid8(__m256 x) {
    __m256 one = GC_AVX2_SET1(1.0f);
    return GC_AVX2_DIV(one, GC_AVX2_ADD(one, gc_exp8(GC_AVX2_NEGATE(x))));
}

GC_AVX512 static inline __m512 gc_sigmoid16(__m512 x) {
    __m512 one = GC_AVX512_SET1(1.0f);
    return GC_AVX512_DIV(one, GC_AVX512_ADD(one, gc_exp16(GC_AVX512_NEGATE(x))));
}

#undef GC_EXP_BODY
#else
#define GC_FMA_CLONES
#endif
#endif
