#include "gc_bf16.h"
#include "gc_gemm.h"
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>
#define BF16_X86 1
#endif

/* float -> bfloat16 bits: to nearest, ties to even; every NaN becomes x86's default NaN (0xFFC0),
 * so that which of two NaNs a sum keeps cannot depend on the code path; a result below the normal
 * range becomes a zero of its sign (both paths then read the same operands). */
static uint32_t bits_of(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7F800000u) == 0x7F800000u && (u & 0x007FFFFFu)) return 0xFFC0u;
    uint32_t h = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
    return (h & 0x7F80u) ? h : h & 0x8000u;
}

static float float_of(uint32_t h) {
    uint32_t u = h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

void gc_bf16_round_rows(int K, const float *x, int64_t xr, int64_t xk, float *out, int64_t ld, int first, int end) {
    int pairs = (K + 1) / 2;
    for (int r = first; r < end; r++)
        for (int j = 0; j < pairs; j++) {
            const float *row = x + r * xr;
            out[r * ld + 2 * j] = 2 * j + 1 < K ? float_of(bits_of(row[(2 * j + 1) * xk])) : 0.0f;
            out[r * ld + 2 * j + 1] = float_of(bits_of(row[2 * j * xk]));
        }
}

void gc_bf16_round_row_pairs(int K, int N, const float *y, int64_t yk, int64_t yn, float *out, int64_t ld,
                             int first, int end) {
    for (int j = first; j < end; j++) {
        const float *even = y + 2 * j * yk, *odd = even + yk;
        for (int n = 0; n < N; n++) {
            out[2 * j * ld + n] = 2 * j + 1 < K ? float_of(bits_of(odd[n * yn])) : 0.0f;
            out[(2 * j + 1) * ld + n] = float_of(bits_of(even[n * yn]));
        }
    }
}

void gc_bf16_gemm_emulated(int simd, int M, int N, int K, const float *a, int64_t a_row, int64_t a_col, const float *b,
                           int64_t ldb, const float *bias, float *c, int64_t ldc, int first, int end) {
#ifdef BF16_X86
    unsigned saved = _mm_getcsr();
    /* FTZ (bit 15) and DAZ (bit 6), rounding to nearest (bits 13-14 clear), this thread only */
    _mm_setcsr((saved & ~0x6000u) | 0x8040u);
    gc_gemm(simd, M, N, K, a, a_row, a_col, b, ldb, bias, c, ldc, first, end);
    _mm_setcsr(saved);
#else
    (void)simd, (void)M, (void)N, (void)K, (void)a, (void)a_row, (void)a_col, (void)b, (void)ldb, (void)bias, (void)c;
    (void)ldc;
    (void)first, (void)end;               /* (gcpipe/train/matmul.py takes this path on x86-64 only) */
#endif
}

#if defined(BF16_X86) && defined(__GNUC__) && (__GNUC__ >= 10 || defined(__clang__))
#define BF16_HARDWARE 1
#define BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512bf16")))
enum { ROWS = 12, PASS = 256 };   /* a tile's rows (24 accumulators); pairs of k per pass over A */

/* bits_of on 16 lanes: each lane's bfloat16 in its low half. */
BF16_TARGET static __m512i lanes_bits(__m512 f) {
    __m512i u = _mm512_castps_si512(f), exponent = _mm512_set1_epi32(0x7F800000);
    __mmask16 nan = _mm512_cmpeq_epi32_mask(_mm512_and_si512(u, exponent), exponent) &
                    _mm512_test_epi32_mask(u, _mm512_set1_epi32(0x007FFFFF));
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i h = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7FFF)), lsb), 16);
    __mmask16 tiny = _mm512_testn_epi32_mask(h, _mm512_set1_epi32(0x7F80));
    h = _mm512_mask_and_epi32(h, tiny, h, _mm512_set1_epi32(0x8000));
    return _mm512_mask_mov_epi32(h, nan, _mm512_set1_epi32(0xFFC0));
}

/* Pairs [j0, j0 + count) of `rows` (<= 12) rows of A into block[r * count + j - j0]; the rows
 * past `rows` are zero. */
BF16_TARGET static void pack_block(int K, const float *a, int64_t lda, int rows, int j0, int count,
                                   uint32_t *block) {
    for (int r = 0; r < ROWS; r++) {
        uint32_t *out = block + r * count;
        if (r >= rows) {
            memset(out, 0, sizeof(uint32_t) * count);
            continue;
        }
        const float *row = a + r * lda;
        int j = j0;
        for (; j + 16 <= j0 + count && 2 * j + 32 <= K; j += 16)      /* 16 pairs: 32 floats to 32 halves */
            for (int half = 0; half < 2; half++)
                _mm256_storeu_si256((__m256i *)(out + j - j0 + 8 * half),
                                    _mm512_cvtepi32_epi16(lanes_bits(_mm512_loadu_ps(row + 2 * j + 16 * half))));
        for (; j < j0 + count; j++)
            out[j - j0] = bits_of(row[2 * j]) | (2 * j + 1 < K ? bits_of(row[2 * j + 1]) << 16 : 0);
    }
}

/* One tile's pass: `rows` rows by 32 columns from n0 over `count` packed pairs (row r's pair j at
 * a[r * a_row + j * a_pair]; 12 rows readable), each accumulator starting from the bias (first
 * pass) or from C (later ones).  The instruction applies DAZ and FTZ itself, whatever MXCSR says. */
BF16_TARGET static void tile(int count, const uint32_t *a, int64_t a_row, int64_t a_pair, const uint32_t *b,
                             int64_t ldb, const float *bias, int first_pass, int n0, int N, int rows, float *c,
                             int64_t ldc) {
    int left = N - n0;
    __mmask16 m0 = left >= 16 ? 0xFFFF : (__mmask16)((1u << left) - 1u);
    __mmask16 m1 = left >= 32 ? 0xFFFF : left <= 16 ? 0 : (__mmask16)((1u << (left - 16)) - 1u);
    __m512 acc[ROWS][2];
    for (int r = 0; r < ROWS; r++) {
        if (!first_pass && r < rows) {
            acc[r][0] = _mm512_maskz_loadu_ps(m0, c + r * ldc + n0);
            acc[r][1] = _mm512_maskz_loadu_ps(m1, c + r * ldc + n0 + 16);
        } else if (bias) {
            acc[r][0] = _mm512_maskz_loadu_ps(m0, bias + n0);
            acc[r][1] = _mm512_maskz_loadu_ps(m1, bias + n0 + 16);
        } else {
            acc[r][0] = acc[r][1] = _mm512_setzero_ps();
        }
    }
    for (int j = 0; j < count; j++) {
        __m512bh b0 = (__m512bh)_mm512_loadu_si512(b + j * ldb + n0);
        __m512bh b1 = (__m512bh)_mm512_loadu_si512(b + j * ldb + n0 + 16);
        for (int r = 0; r < ROWS; r++) {
            __m512bh v = (__m512bh)_mm512_set1_epi32((int)a[r * a_row + j * a_pair]);
            acc[r][0] = _mm512_dpbf16_ps(acc[r][0], v, b0);
            acc[r][1] = _mm512_dpbf16_ps(acc[r][1], v, b1);
        }
    }
    for (int r = 0; r < rows; r++) {
        _mm512_mask_storeu_ps(c + r * ldc + n0, m0, acc[r][0]);
        _mm512_mask_storeu_ps(c + r * ldc + n0 + 16, m1, acc[r][1]);
    }
}

/* packed_a: NULL to round A's rows (floats, lda) a block at a time, or A packed by
 * gc_bf16_pack_row_pairs ([pairs][lda] words, 11 readable columns past M). */
BF16_TARGET static void gemm_hardware(int M, int N, int K, const float *a, const uint32_t *packed_a, int64_t lda,
                                      const uint32_t *b, int64_t ldb, const float *bias, float *c, int64_t ldc,
                                      int first, int end) {
    uint32_t block[ROWS * PASS];
    int pairs = (K + 1) / 2;
    if (end > M) end = M;
    for (int m0 = first; m0 < end; m0 += ROWS) {
        int rows = end - m0 < ROWS ? end - m0 : ROWS;
        for (int j0 = 0; j0 < pairs || j0 == 0; j0 += PASS) {     /* (K = 0: one empty pass) */
            int count = pairs - j0 < PASS ? pairs - j0 : PASS;
            const uint32_t *tile_a = block;
            int64_t a_row = count, a_pair = 1;
            if (packed_a) tile_a = packed_a + (int64_t)j0 * lda + m0, a_row = 1, a_pair = lda;
            else pack_block(K, a + (int64_t)m0 * lda, lda, rows, j0, count, block);
            for (int n0 = 0; n0 < N; n0 += 32)
                tile(count, tile_a, a_row, a_pair, b + (int64_t)j0 * ldb, ldb, bias, j0 == 0, n0, N, rows,
                     c + (int64_t)m0 * ldc, ldc);
        }
    }
}
#endif

#ifdef BF16_HARDWARE
/* Row pairs of a Y whose rows are contiguous (yn = 1), 16 columns a step. */
BF16_TARGET static void pack_row_pairs_contiguous(int K, int N, const float *y, int64_t yk, uint32_t *out, int64_t ld,
                                                  int first, int end) {
    for (int j = first; j < end; j++) {
        const float *even = y + 2 * j * yk, *odd = even + yk;
        int has_odd = 2 * j + 1 < K, n = 0;
        for (; n + 16 <= N; n += 16) {
            __m512i words = lanes_bits(_mm512_loadu_ps(even + n));
            if (has_odd) words = _mm512_or_si512(words, _mm512_slli_epi32(lanes_bits(_mm512_loadu_ps(odd + n)), 16));
            _mm512_storeu_si512(out + j * ld + n, words);
        }
        for (; n < N; n++) out[j * ld + n] = bits_of(even[n]) | (has_odd ? bits_of(odd[n]) << 16 : 0);
        for (; n < ld; n++) out[j * ld + n] = 0;
    }
}
#endif

void gc_bf16_pack_row_pairs(int K, int N, const float *y, int64_t yk, int64_t yn, uint32_t *out, int64_t ld,
                            int first, int end) {
#ifdef BF16_HARDWARE
    if (yn == 1 && gc_bf16_hardware()) {
        pack_row_pairs_contiguous(K, N, y, yk, out, ld, first, end);
        return;
    }
#endif
    for (int j = first; j < end; j++) {
        const float *even = y + 2 * j * yk, *odd = even + yk;
        for (int n = 0; n < N; n++)
            out[j * ld + n] = bits_of(even[n * yn]) | (2 * j + 1 < K ? bits_of(odd[n * yn]) << 16 : 0);
        for (int n = N; n < ld; n++) out[j * ld + n] = 0;
    }
}

int gc_bf16_hardware(void) {
#ifdef BF16_HARDWARE
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512bf16");
#else
    return 0;
#endif
}

void gc_bf16_gemm(int M, int N, int K, const float *a, const uint32_t *packed_a, int64_t lda, const uint32_t *b,
                  int64_t ldb, const float *bias, float *c, int64_t ldc, int first, int end) {
#ifdef BF16_HARDWARE
    gemm_hardware(M, N, K, a, packed_a, lda, b, ldb, bias, c, ldc, first, end);
#else
    (void)M, (void)N, (void)K, (void)a, (void)packed_a, (void)lda, (void)b, (void)ldb, (void)bias, (void)c, (void)ldc;
    (void)first, (void)end;
#endif
}
