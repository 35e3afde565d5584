#include "gc_gemm.h"
#include <math.h>
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>
#define GEMM_X86 1
#define AVX2 __attribute__((target("avx2,fma")))
#define AVX512 __attribute__((target("avx512f,avx2,fma")))
#define INLINE_AVX2 static inline __attribute__((always_inline, target("avx2,fma")))
#define INLINE_AVX512 static inline __attribute__((always_inline, target("avx512f,avx2,fma")))
#endif

/* A tile is MR rows of C by two vectors of columns; its accumulators live in registers for a
 * pass over k.  A long K is taken in passes of KC steps, so that a pass's slices of A and B stay
 * in L2 (the weights' gradients sum over a whole minibatch); between passes each accumulator is
 * stored in C and loaded again, which changes no bit. */
#define MR 6
#define KC 256
#define SHORT_K 1024      /* a K up to this is one pass */

/* The tile of `rows` x `cols` at a (row m0 of A), b (column n0 of B) and c: c += A B over k in
 * [k0, k1), one fused multiply-add per k. */
typedef void (*tile_fn)(int rows, int cols, int k0, int k1, const float *a, int64_t a_row, int64_t a_col,
                        const float *b, int64_t ldb, float *c, int64_t ldc);

static void tile_scalar(int rows, int cols, int k0, int k1, const float *a, int64_t a_row, int64_t a_col,
                        const float *b, int64_t ldb, float *c, int64_t ldc) {
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < cols; j++) {
            float acc = c[r * ldc + j];
            for (int k = k0; k < k1; k++) acc = fmaf(a[r * a_row + k * a_col], b[k * ldb + j], acc);
            c[r * ldc + j] = acc;
        }
}

#ifdef GEMM_X86
/* ---- AVX2 + FMA: 2 x 8 columns; 12 accumulators, 2 B vectors and a broadcast fill the 16 registers ---- */

INLINE_AVX2 __m256i mask8(int lanes) {       /* the first `lanes` (0..8) lanes set */
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(lanes), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* The accumulators are named variables, not arrays: GCC keeps arrays of vectors in memory,
 * storing every one each step.  `rows` is a constant at each call, so the unused rows vanish. */
#define EACH_ROW(DO) DO(0) DO(1) DO(2) DO(3) DO(4) DO(5)

INLINE_AVX2 void tile_avx2_rows(const int rows, int cols, int k0, int k1, const float *a, int64_t a_row,
                                int64_t a_col, const float *b, int64_t ldb, float *c, int64_t ldc) {
    __m256i m0 = mask8(cols < 8 ? cols : 8), m1 = mask8(cols > 8 ? cols - 8 : 0);
#define DECLARE(r) __m256 acc##r##0 = _mm256_setzero_ps(), acc##r##1 = _mm256_setzero_ps();
#define LOAD(r) if (rows > r) { acc##r##0 = _mm256_maskload_ps(c + r * ldc, m0); \
                                acc##r##1 = _mm256_maskload_ps(c + r * ldc + 8, m1); }
#define FMA(r) if (rows > r) { __m256 av = _mm256_broadcast_ss(ak + r * a_row); \
                               acc##r##0 = _mm256_fmadd_ps(av, b0, acc##r##0); \
                               acc##r##1 = _mm256_fmadd_ps(av, b1, acc##r##1); }
#define STORE(r) if (rows > r) { _mm256_maskstore_ps(c + r * ldc, m0, acc##r##0); \
                                 _mm256_maskstore_ps(c + r * ldc + 8, m1, acc##r##1); }
    EACH_ROW(DECLARE)
    EACH_ROW(LOAD)
    const float *ak = a + k0 * a_col, *bk = b + k0 * ldb;
    for (int k = k0; k < k1; k++, ak += a_col, bk += ldb) {
        __m256 b0 = _mm256_maskload_ps(bk, m0), b1 = _mm256_maskload_ps(bk + 8, m1);
        EACH_ROW(FMA)
    }
    EACH_ROW(STORE)
#undef DECLARE
#undef LOAD
#undef FMA
#undef STORE
}

AVX2 static void tile_avx2(int rows, int cols, int k0, int k1, const float *a, int64_t a_row, int64_t a_col,
                           const float *b, int64_t ldb, float *c, int64_t ldc) {
    switch (rows) {   /* a constant row count per call, so the accumulators stay in registers */
    case 6: tile_avx2_rows(6, cols, k0, k1, a, a_row, a_col, b, ldb, c, ldc); break;
    case 5: tile_avx2_rows(5, cols, k0, k1, a, a_row, a_col, b, ldb, c, ldc); break;
    case 4: tile_avx2_rows(4, cols, k0, k1, a, a_row, a_col, b, ldb, c, ldc); break;
    case 3: tile_avx2_rows(3, cols, k0, k1, a, a_row, a_col, b, ldb, c, ldc); break;
    case 2: tile_avx2_rows(2, cols, k0, k1, a, a_row, a_col, b, ldb, c, ldc); break;
    default: tile_avx2_rows(1, cols, k0, k1, a, a_row, a_col, b, ldb, c, ldc); break;
    }
}

/* ---- AVX-512: 2 x 16 columns, masked at the right edge of C ---- */

INLINE_AVX512 __mmask16 mask16(int lanes) {  /* the first `lanes` (0..16) lanes set */
    return (__mmask16)(lanes >= 16 ? 0xFFFFu : (1u << lanes) - 1u);
}

INLINE_AVX512 void tile_avx512_rows(const int rows, int cols, int k0, int k1, const float *a, int64_t a_row,
                                    int64_t a_col, const float *b, int64_t ldb, float *c, int64_t ldc) {
    __mmask16 m0 = mask16(cols), m1 = mask16(cols > 16 ? cols - 16 : 0);
#define DECLARE(r) __m512 acc##r##0 = _mm512_setzero_ps(), acc##r##1 = _mm512_setzero_ps();
#define LOAD(r) if (rows > r) { acc##r##0 = _mm512_maskz_loadu_ps(m0, c + r * ldc); \
                                acc##r##1 = _mm512_maskz_loadu_ps(m1, c + r * ldc + 16); }
#define FMA(r) if (rows > r) { __m512 av = _mm512_set1_ps(ak[r * a_row]); \
                               acc##r##0 = _mm512_fmadd_ps(av, b0, acc##r##0); \
                               acc##r##1 = _mm512_fmadd_ps(av, b1, acc##r##1); }
#define STORE(r) if (rows > r) { _mm512_mask_storeu_ps(c + r * ldc, m0, acc##r##0); \
                                 _mm512_mask_storeu_ps(c + r * ldc + 16, m1, acc##r##1); }
    EACH_ROW(DECLARE)
    EACH_ROW(LOAD)
    const float *ak = a + k0 * a_col, *bk = b + k0 * ldb;
    for (int k = k0; k < k1; k++, ak += a_col, bk += ldb) {
        __m512 b0 = _mm512_maskz_loadu_ps(m0, bk), b1 = _mm512_maskz_loadu_ps(m1, bk + 16);
        EACH_ROW(FMA)
    }
    EACH_ROW(STORE)
#undef DECLARE
#undef LOAD
#undef FMA
#undef STORE
}

AVX512 static void tile_avx512(int rows, int cols, int k0, int k1, const float *a, int64_t a_row, int64_t a_col,
                               const float *b, int64_t ldb, float *c, int64_t ldc) {
    switch (rows) {
    case 6: tile_avx512_rows(6, cols, k0, k1, a, a_row, a_col, b, ldb, c, ldc); break;
    case 5: tile_avx512_rows(5, cols, k0, k1, a, a_row, a_col, b, ldb, c, ldc); break;
    case 4: tile_avx512_rows(4, cols, k0, k1, a, a_row, a_col, b, ldb, c, ldc); break;
    case 3: tile_avx512_rows(3, cols, k0, k1, a, a_row, a_col, b, ldb, c, ldc); break;
    case 2: tile_avx512_rows(2, cols, k0, k1, a, a_row, a_col, b, ldb, c, ldc); break;
    default: tile_avx512_rows(1, cols, k0, k1, a, a_row, a_col, b, ldb, c, ldc); break;
    }
}
#endif

void gc_gemm(int simd, int M, int N, int K, const float *a, int64_t a_row, int64_t a_col, const float *b,
             int64_t ldb, const float *bias, float *c, int64_t ldc, int first, int end) {
    (void)M;
    tile_fn tile = tile_scalar;
    int width = 16;                   /* columns per tile */
#ifdef GEMM_X86
    if (simd == GC_NET_SIMD_AVX512) tile = tile_avx512, width = 32;
    else if (simd == GC_NET_SIMD_AVX2) tile = tile_avx2;
#else
    (void)simd;
#endif
    for (int m = first; m < end; m++) {
        float *row = c + m * ldc;
        if (bias) memcpy(row, bias, sizeof(float) * N);
        else memset(row, 0, sizeof(float) * N);
    }
    int pass = K <= SHORT_K ? K : KC;
    for (int k0 = 0; k0 < K; k0 += pass) {
        int k1 = K - k0 < pass ? K : k0 + pass;
        for (int m0 = first; m0 < end; m0 += MR) {
            int rows = end - m0 < MR ? end - m0 : MR;
            for (int n0 = 0; n0 < N; n0 += width)
                tile(rows, N - n0 < width ? N - n0 : width, k0, k1, a + m0 * a_row, a_row, a_col, b + n0, ldb,
                     c + m0 * ldc + n0, ldc);
        }
    }
}

static void transpose(int rows, int cols, const float *in, float *out) {
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++) out[(int64_t)j * rows + i] = in[(int64_t)i * cols + j];
}

void gc_newton_schulz(int simd, int rows, int cols, const float *g, int iterations, const float *coefficients,
                      float eps, float *out, float *scratch) {
    int wide = rows <= cols, m = wide ? rows : cols, n = wide ? cols : rows;   /* X is m x n, m <= n */
    int64_t size = (int64_t)m * n;
    float *x = scratch, *t = x + size, *gram = t + size, *square = gram + (int64_t)m * m, *p = square + (int64_t)m * m;
    double sum = 0.0;
    for (int64_t i = 0; i < size; i++) sum += (double)g[i] * g[i];
    float scale = (float)sqrt(sum) + eps;
    if (wide) memcpy(x, g, sizeof(float) * size);
    else transpose(rows, cols, g, x);
    for (int64_t i = 0; i < size; i++) x[i] = x[i] / scale;
    for (int it = 0; it < iterations; it++) {
        float a = coefficients[3 * it], b = coefficients[3 * it + 1], c = coefficients[3 * it + 2];
        transpose(m, n, x, t);
        gc_gemm(simd, m, m, n, x, n, 1, t, m, NULL, gram, m, 0, m);                     /* A = X X^T */
        for (int64_t i = 0; i < (int64_t)m * m; i++) p[i] = c * gram[i];
        gc_gemm(simd, m, m, m, p, m, 1, gram, m, NULL, square, m, 0, m);                /* (c A) A */
        for (int64_t i = 0; i < (int64_t)m * m; i++) p[i] = b * gram[i] + square[i];
        gc_gemm(simd, m, n, m, p, m, 1, x, n, NULL, t, n, 0, m);                        /* (b A + c A A) X */
        for (int64_t i = 0; i < size; i++) x[i] = a * x[i] + t[i];
    }
    if (wide) memcpy(out, x, sizeof(float) * size);
    else transpose(m, n, x, out);
}
