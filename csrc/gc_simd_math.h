/* gc_math.h's exp and sigmoid on AVX2 (8 lanes) and AVX-512 (16 lanes): the scalar functions'
 * operations lane by lane, so every path gives the same bits.  For the C network step (gc_net.c)
 * and the training's MinGRU layers (gc_mingru.c). */
#ifndef GC_SIMD_MATH_H
#define GC_SIMD_MATH_H
#include "gc_math.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define GC_SIMD_X86 1
#define GC_AVX2 __attribute__((target("avx2,fma")))
#define GC_AVX512 __attribute__((target("avx512f,avx2,fma")))

GC_AVX2 static inline __m256 gc_exp8(__m256 x) {
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(GC_EXP_LO)), _mm256_set1_ps(GC_EXP_HI));
    __m256 rounder = _mm256_set1_ps(GC_ROUNDER);
    __m256 n = _mm256_sub_ps(_mm256_fmadd_ps(x, _mm256_set1_ps(GC_LOG2E), rounder), rounder);
    __m256 r = _mm256_fmadd_ps(n, _mm256_set1_ps(-GC_LN2_HI), x);
    r = _mm256_fmadd_ps(n, _mm256_set1_ps(-GC_LN2_LO), r);
    __m256 p = _mm256_set1_ps(GC_EXP_P0);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(GC_EXP_P1));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(GC_EXP_P2));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(GC_EXP_P3));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(GC_EXP_P4));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(GC_EXP_P5));
    p = _mm256_add_ps(_mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r), _mm256_set1_ps(1.0f));
    __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(bits));
}

GC_AVX2 static inline __m256 gc_sigmoid8(__m256 x) {
    __m256 one = _mm256_set1_ps(1.0f), minus_x = _mm256_xor_ps(x, _mm256_set1_ps(-0.0f));
    return _mm256_div_ps(one, _mm256_add_ps(one, gc_exp8(minus_x)));
}

GC_AVX512 static inline __m512 gc_exp16(__m512 x) {
    x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(GC_EXP_LO)), _mm512_set1_ps(GC_EXP_HI));
    __m512 rounder = _mm512_set1_ps(GC_ROUNDER);
    __m512 n = _mm512_sub_ps(_mm512_fmadd_ps(x, _mm512_set1_ps(GC_LOG2E), rounder), rounder);
    __m512 r = _mm512_fmadd_ps(n, _mm512_set1_ps(-GC_LN2_HI), x);
    r = _mm512_fmadd_ps(n, _mm512_set1_ps(-GC_LN2_LO), r);
    __m512 p = _mm512_set1_ps(GC_EXP_P0);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(GC_EXP_P1));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(GC_EXP_P2));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(GC_EXP_P3));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(GC_EXP_P4));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(GC_EXP_P5));
    p = _mm512_add_ps(_mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.0f));
    __m512i bits = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
    return _mm512_mul_ps(p, _mm512_castsi512_ps(bits));
}

GC_AVX512 static inline __m512 gc_sigmoid16(__m512 x) {
    __m512 one = _mm512_set1_ps(1.0f);      /* -x as a sign flip, as the scalar path's (not 0 - x) */
    __m512 minus_x = _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(x), _mm512_set1_epi32(INT32_MIN)));
    return _mm512_div_ps(one, _mm512_add_ps(one, gc_exp16(minus_x)));
}

#endif
#endif
