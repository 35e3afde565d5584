#include "gc_gemm.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifdef __FAST_MATH__
#error "gc_gemm.c fixes every rounding: build it without -ffast-math"
#endif

#if defined(__x86_64__)
#include <immintrin.h>
#define GEMM_X86 1
#define AVX2 __attribute__((target("avx2,fma")))
#define AVX512 __attribute__((target("avx512f,avx2,fma")))
#define INLINE_AVX2 static inline __attribute__((always_inline, target("avx2,fma")))
#define INLINE_AVX512 static inline __attribute__((always_inline, target("avx512f,avx2,fma")))
#endif

/* A tile is up to MR rows of C by up to `width` columns (two vectors on AVX2, four on AVX-512);
 * its accumulators live in registers for a pass over k.  A long K is taken in passes of KC steps,
 * so that a pass's slices of A and B stay in L2 (the weights' gradients sum over a whole
 * minibatch): the first pass starts each accumulator from its bias (or 0), a later one from the
 * value the pass before stored in C, which changes no bit.
 *
 * A call that computes at least PACK_ROWS rows on a vector path first copies its pass's slice of B
 * into panels of `width` columns, each k's columns contiguous and zero-padded to whole vectors (read
 * without masks on AVX-512; on AVX2 a last panel that is no whole vectors runs on padded copies):
 * a tile then reads B as one stream, where B's own rows lie a leading dimension apart and a panel of
 * them falls into a few L1 sets.  On a Zen 4, one thread, AVX-512: +10-13 % at the update's forward
 * and input-gradient shapes (4096 rows), the weights' gradients (long K) unchanged; AVX2: +2-17 %,
 * the weights' gradients included.  Under ~64 rows the copy costs more than it saves (AVX-512, 12
 * rows: 83 against 107 GFLOP/s), so smaller calls (Muon's Gram blocks) read B in place.  The copy
 * moves bits only. */
#define MR 6
#define KC 256
#define SHORT_K 1024      /* a K up to this is one pass */
#define PACK_ROWS 64      /* rows of a call from which it packs B */
#define GRAM_ROWS 12      /* gram_of's rows per call */

/* The tile of `rows` x `cols` at a (row m0 of A), b (row k0, column n0 of B, or of its packed
 * panel; rows ldb apart), c and bias (column n0, or NULL): c = start + A B over k in [k0, k1),
 * one fused multiply-add per k, where start is bias (or 0) when k0 is 0 and c's own value
 * otherwise. */
typedef void (*tile_fn)(int rows, int cols, int k0, int k1, const float *a, int64_t a_row, int64_t a_col,
                        const float *b, int64_t ldb, const float *bias, float *c, int64_t ldc);

/* A tile one element at a time, each sum by `fma` (inlined: a constant wherever this is). */
static inline __attribute__((always_inline)) void tile_by_elements(
        float (*fma)(float, float, float), int rows, int cols, int k0, int k1, const float *a, int64_t a_row,
        int64_t a_col, const float *b, int64_t ldb, const float *bias, float *c, int64_t ldc) {
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < cols; j++) {
            float acc = k0 ? c[r * ldc + j] : bias ? bias[j] : 0.0f;
            for (int k = k0; k < k1; k++) acc = fma(a[r * a_row + k * a_col], b[(k - k0) * ldb + j], acc);
            c[r * ldc + j] = acc;
        }
}

static void tile_scalar(int rows, int cols, int k0, int k1, const float *a, int64_t a_row, int64_t a_col,
                        const float *b, int64_t ldb, const float *bias, float *c, int64_t ldc) {
    tile_by_elements(fmaf, rows, cols, k0, k1, a, a_row, a_col, b, ldb, bias, c, ldc);
}

#ifdef GEMM_X86
/* A tile's pass over k, written once for both vector widths: each path defines VEC (its vector
 * type), HALF (columns per vector) and V_ZERO, V_LOAD, V_STORE, V_BROADCAST and V_FMA, then expands
 * TILE_PASS in a function with constant `rows` (1..MR), `vecs` (1..4 vectors of columns) and
 * `whole` (B's rows hold whole vectors: a packed panel), and the masks m0..m3 of its vectors
 * (AVX-512's masked loads never touch a masked-off element; AVX2's are not used: AMD leaves their
 * faults on masked-off elements to the implementation, so the AVX2 path takes whole vectors only
 * and leaves the last columns to the scalar tile).  The accumulators are named variables, not
 * arrays: GCC keeps arrays of vectors in memory, storing every one each step.  The unused rows and
 * vectors vanish at compile time. */
#define EACH_ROW(DO) DO(0) DO(1) DO(2) DO(3) DO(4) DO(5)
#define EACH_VEC(r, DO) DO(r, 0) DO(r, 1) DO(r, 2) DO(r, 3)
#define DECLARE_VEC(r, v) VEC acc##r##v = start##v;
#define LOAD_VEC(r, v) if (vecs > v) acc##r##v = V_LOAD(c + r * ldc + v * HALF, m##v);
#define FMA_VEC(r, v) if (vecs > v) acc##r##v = V_FMA(av, b##v, acc##r##v);
#define STORE_VEC(r, v) if (vecs > v) V_STORE(c + r * ldc + v * HALF, m##v, acc##r##v);
#define DECLARE(r) EACH_VEC(r, DECLARE_VEC)
#define LOAD(r) if (rows > r) { EACH_VEC(r, LOAD_VEC) }
#define FMA(r) if (rows > r) { VEC av = V_BROADCAST(ak + r * a_row); EACH_VEC(r, FMA_VEC) }
#define STORE(r) if (rows > r) { EACH_VEC(r, STORE_VEC) }
#define START(v) VEC start##v = bias && vecs > v ? V_LOAD(bias + v * HALF, m##v) : V_ZERO();
#define B_LOAD(v) VEC b##v = vecs <= v ? V_ZERO() : whole ? V_LOAD(bk + v * HALF, ALL) : V_LOAD(bk + v * HALF, m##v);
#define TILE_PASS                                                                \
    START(0) START(1) START(2) START(3)                                          \
    EACH_ROW(DECLARE)                                                            \
    if (k0) { EACH_ROW(LOAD) }                                                   \
    const float *ak = a + k0 * a_col, *bk = b;                                   \
    for (int k = k0; k < k1; k++, ak += a_col, bk += ldb) {                      \
        B_LOAD(0) B_LOAD(1) B_LOAD(2) B_LOAD(3)                                  \
        EACH_ROW(FMA)                                                            \
    }                                                                            \
    EACH_ROW(STORE)
/* A tile function's body: its rows kernel with the row count as a constant. */
#define ROWS_CASE(n, kernel) case n: kernel(n, cols, k0, k1, a, a_row, a_col, b, ldb, bias, c, ldc); break;
#define BY_ROWS(kernel) switch (rows) { ROWS_CASE(6, kernel) ROWS_CASE(5, kernel) ROWS_CASE(4, kernel) \
                                        ROWS_CASE(3, kernel) ROWS_CASE(2, kernel) ROWS_CASE(1, kernel) }

/* ---- AVX2 + FMA: 16 or 8 columns (whole vectors); 12 accumulators, 2 B vectors and a broadcast
 * fill the 16 registers ---- */

#define VEC __m256
#define HALF 8
#define ALL 0
#define V_ZERO() _mm256_setzero_ps()
#define V_LOAD(p, mask) _mm256_loadu_ps(p)
#define V_STORE(p, mask, v) _mm256_storeu_ps(p, v)
#define V_BROADCAST(p) _mm256_broadcast_ss(p)
#define V_FMA(x, y, z) _mm256_fmadd_ps(x, y, z)

INLINE_AVX2 void tile_avx2_rows(const int rows, const int vecs, int k0, int k1, const float *a, int64_t a_row,
                                int64_t a_col, const float *b, int64_t ldb, const float *bias, float *c,
                                int64_t ldc) {
    const int whole = 1;       /* (V_LOAD and V_STORE drop TILE_PASS's mask arguments: no masks here) */
    TILE_PASS
}

INLINE_AVX2 void tile_avx2_two(const int rows, int cols, int k0, int k1, const float *a, int64_t a_row,
                               int64_t a_col, const float *b, int64_t ldb, const float *bias, float *c,
                               int64_t ldc) {
    (void)cols;
    tile_avx2_rows(rows, 2, k0, k1, a, a_row, a_col, b, ldb, bias, c, ldc);
}

INLINE_AVX2 void tile_avx2_one(const int rows, int cols, int k0, int k1, const float *a, int64_t a_row,
                               int64_t a_col, const float *b, int64_t ldb, const float *bias, float *c,
                               int64_t ldc) {
    (void)cols;
    tile_avx2_rows(rows, 1, k0, k1, a, a_row, a_col, b, ldb, bias, c, ldc);
}

INLINE_AVX2 float fma_instruction(float x, float y, float z) {
    return _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(x), _mm_set_ss(y), _mm_set_ss(z)));
}

/* The last N mod 8 columns on the AVX2 path when B is read in place (calls of fewer than PACK_ROWS
 * rows): tile_scalar's sums by the FMA instruction itself, not libm's fmaf (which need not be the
 * instruction), so that MXCSR's DAZ and FTZ, which the bfloat16 emulation sets, hold in every column. */
AVX2 static void tile_avx2_narrow(int rows, int cols, int k0, int k1, const float *a, int64_t a_row, int64_t a_col,
                                  const float *b, int64_t ldb, const float *bias, float *c, int64_t ldc) {
    tile_by_elements(fma_instruction, rows, cols, k0, k1, a, a_row, a_col, b, ldb, bias, c, ldc);
}

/* cols: 16, or 8 at the right edge. */
AVX2 static void tile_avx2(int rows, int cols, int k0, int k1, const float *a, int64_t a_row, int64_t a_col,
                           const float *b, int64_t ldb, const float *bias, float *c, int64_t ldc) {
    if (cols == 16) {
        BY_ROWS(tile_avx2_two)
    } else {
        BY_ROWS(tile_avx2_one)
    }
}

/* The same over a packed panel, cols 1..16.  A last panel of columns that are no whole vectors (N no
 * multiple of 8) has zero-padded rows, so the tile runs by vector on copies of C's and the bias's
 * columns padded the same way, and only `cols` columns go back to C.  Each column is the same sum as
 * in any other tile (the lanes are independent); the padding lanes are discarded. */
AVX2 static void tile_avx2_packed(int rows, int cols, int k0, int k1, const float *a, int64_t a_row, int64_t a_col,
                                  const float *b, int64_t ldb, const float *bias, float *c, int64_t ldc) {
    if (cols % 8 == 0) {
        tile_avx2(rows, cols, k0, k1, a, a_row, a_col, b, ldb, bias, c, ldc);
        return;
    }
    float padded_c[MR][16] = {{0}}, padded_bias[16] = {0};
    if (bias) memcpy(padded_bias, bias, sizeof(float) * cols);
    if (k0)
        for (int r = 0; r < rows; r++) memcpy(padded_c[r], c + r * ldc, sizeof(float) * cols);
    tile_avx2(rows, cols > 8 ? 16 : 8, k0, k1, a, a_row, a_col, b, ldb, bias ? padded_bias : NULL, &padded_c[0][0], 16);
    for (int r = 0; r < rows; r++) memcpy(c + r * ldc, padded_c[r], sizeof(float) * cols);
}

/* ---- AVX-512: up to 4 x 16 columns, masked at the right edge of C; 24 accumulators, 4 B
 * vectors and a broadcast of the 32 registers ---- */

INLINE_AVX512 __mmask16 mask16(int lanes) {  /* the first `lanes` (any int, clamped to 0..16) lanes set */
    return (__mmask16)(lanes >= 16 ? 0xFFFFu : lanes <= 0 ? 0u : (1u << lanes) - 1u);
}

#undef VEC
#undef HALF
#undef ALL
#undef V_ZERO
#undef V_LOAD
#undef V_STORE
#undef V_BROADCAST
#undef V_FMA
#define VEC __m512
#define HALF 16
#define ALL ((__mmask16)0xFFFFu)
#define V_ZERO() _mm512_setzero_ps()
#define V_LOAD(p, mask) _mm512_maskz_loadu_ps(mask, p)
#define V_STORE(p, mask, v) _mm512_mask_storeu_ps(p, mask, v)
#define V_BROADCAST(p) _mm512_set1_ps(*(p))
#define V_FMA(x, y, z) _mm512_fmadd_ps(x, y, z)

INLINE_AVX512 void tile_avx512_rows(const int whole, const int rows, const int vecs, int cols, int k0, int k1,
                                    const float *a, int64_t a_row, int64_t a_col, const float *b, int64_t ldb,
                                    const float *bias, float *c, int64_t ldc) {
    __mmask16 m0 = mask16(cols), m1 = mask16(cols - 16), m2 = mask16(cols - 32), m3 = mask16(cols - 48);
    TILE_PASS
}

/* The kernels by vector count, for B read in place (masked loads at its right edge) and for a
 * packed panel (whole vectors). */
#define TILE_VECS(name, whole, vecs)                                                                      \
    INLINE_AVX512 void name(const int rows, int cols, int k0, int k1, const float *a, int64_t a_row,      \
                            int64_t a_col, const float *b, int64_t ldb, const float *bias, float *c,      \
                            int64_t ldc) {                                                                \
        tile_avx512_rows(whole, rows, vecs, cols, k0, k1, a, a_row, a_col, b, ldb, bias, c, ldc);        \
    }
TILE_VECS(tile_avx512_in_place_1, 0, 1) TILE_VECS(tile_avx512_in_place_2, 0, 2)
TILE_VECS(tile_avx512_in_place_3, 0, 3) TILE_VECS(tile_avx512_in_place_4, 0, 4)
TILE_VECS(tile_avx512_panel_1, 1, 1) TILE_VECS(tile_avx512_panel_2, 1, 2)
TILE_VECS(tile_avx512_panel_3, 1, 3) TILE_VECS(tile_avx512_panel_4, 1, 4)
#define BY_VECS(kind) switch ((cols + 15) / 16) {                                                 \
        case 4: BY_ROWS(tile_avx512_##kind##_4) break; case 3: BY_ROWS(tile_avx512_##kind##_3) break; \
        case 2: BY_ROWS(tile_avx512_##kind##_2) break; default: BY_ROWS(tile_avx512_##kind##_1) }

/* cols: 1..64. */
AVX512 static void tile_avx512(int rows, int cols, int k0, int k1, const float *a, int64_t a_row, int64_t a_col,
                               const float *b, int64_t ldb, const float *bias, float *c, int64_t ldc) {
    BY_VECS(in_place)
}

/* The same over a packed panel: B's rows hold ceil(cols / 16) whole vectors. */
AVX512 static void tile_avx512_packed(int rows, int cols, int k0, int k1, const float *a, int64_t a_row,
                                      int64_t a_col, const float *b, int64_t ldb, const float *bias, float *c,
                                      int64_t ldc) {
    BY_VECS(panel)
}

#undef EACH_ROW
#undef EACH_VEC
#undef DECLARE_VEC
#undef LOAD_VEC
#undef FMA_VEC
#undef STORE_VEC
#undef DECLARE
#undef LOAD
#undef FMA
#undef STORE
#undef START
#undef B_LOAD
#undef TILE_PASS
#undef ROWS_CASE
#undef BY_ROWS
#undef TILE_VECS
#undef BY_VECS
#endif

/* n rounded up to a multiple of `vector`: a panel's row. */
static inline int whole_vectors(int n, int vector) { return (n + vector - 1) / vector * vector; }

/* B[k0..k1) x [n0, n0 + cols) into rows of `stride` floats at p, zero-padded past cols. */
static void pack_panel(int k0, int k1, int n0, int cols, int stride, const float *b, int64_t ldb, float *p) {
    for (int k = k0; k < k1; k++, p += stride) {
        memcpy(p, b + k * ldb + n0, sizeof(float) * cols);
        memset(p + cols, 0, sizeof(float) * (stride - cols));
    }
}

void gc_gemm(int simd, int M, int N, int K, const float *a, int64_t a_row, int64_t a_col, const float *b,
             int64_t ldb, const float *bias, float *c, int64_t ldc, int first, int end) {
    tile_fn tile = tile_scalar, narrow = tile_scalar;   /* narrow: fewer than `unit` columns */
    tile_fn packed = NULL;     /* the tile over a packed panel, on the vector paths */
    int width = 16, unit = 1, vector = 1;  /* columns of a whole tile (a narrower one takes a multiple of
                                            * unit) and of a vector */
    if (first < 0) first = 0;
    if (end > M) end = M;
#ifdef GEMM_X86
    if (simd == GC_NET_SIMD_AVX512)
        tile = tile_avx512, packed = tile_avx512_packed, width = 64, vector = 16;
    else if (simd == GC_NET_SIMD_AVX2)
        tile = tile_avx2, packed = tile_avx2_packed, narrow = tile_avx2_narrow, unit = vector = 8;
#else
    (void)simd;
#endif
    int pass = K <= SHORT_K ? (K ? K : 1) : KC;
    float *panels = NULL;     /* the pass's slice of B in panels; without the memory, B in place */
    if (packed && end - first >= PACK_ROWS && N > 0) panels = malloc(sizeof(float) * pass * whole_vectors(N, vector));
    for (int k0 = 0; k0 < K || k0 == 0; k0 += pass) {     /* (K = 0: one empty pass writes the start values) */
        int k1 = K - k0 < pass ? K : k0 + pass;
        /* Panel n0 / width starts at float (k1 - k0) * n0, its rows its columns rounded up to whole vectors. */
        for (int n0 = 0, cols; panels && n0 < N; n0 += cols) {
            cols = N - n0 < width ? N - n0 : width;
            pack_panel(k0, k1, n0, cols, whole_vectors(cols, vector), b, ldb, panels + (int64_t)(k1 - k0) * n0);
        }
        for (int m0 = first; m0 < end; m0 += MR) {
            int rows = end - m0 < MR ? end - m0 : MR;
            for (int n0 = 0, cols; n0 < N; n0 += cols) {
                tile_fn edge = tile;
                const float *bk = b + k0 * ldb + n0;
                int64_t ldp = ldb;
                if (panels) {
                    cols = N - n0 < width ? N - n0 : width;
                    edge = packed, bk = panels + (int64_t)(k1 - k0) * n0, ldp = whole_vectors(cols, vector);
                } else {
                    cols = N - n0 < width ? (N - n0) / unit * unit : width;
                    if (!cols) cols = N - n0, edge = narrow;
                }
                edge(rows, cols, k0, k1, a + m0 * a_row, a_row, a_col, bk, ldp, bias ? bias + n0 : NULL,
                     c + m0 * ldc + n0, ldc);
            }
        }
    }
    free(panels);
}

/* ---- Products with a matrix of bytes (gc_gemm_bytes, gc_gemm_bytes_grad) ---- */

#define BYTES_KB 256     /* k in blocks: a block's nonzero indices fit on the stack */
#define BYTES_CHUNK 128  /* gc_gemm_bytes' columns per pass over a row's nonzero bytes */
#define BYTES_RB 256     /* gc_gemm_bytes_grad's rows per block: their rows of D stay in L2 */

/* The indices of the nonzero bytes of x[k0..k1), ascending, into used; returns their count. */
static int nonzero_scalar(const uint8_t *x, int k0, int k1, int *used) {
    int n = 0;
    for (int k = k0; k < k1; k++) {
        used[n] = k;
        n += x[k] != 0;
    }
    return n;
}

/* One row of C over the nonzero bytes used[0..n) (a k block starting at k0): acc from the bias
 * (or 0) in the first block, from c in a later one; fma(w, byte, acc) per index, in order. */
static void bytes_row_scalar(int N, int n, const int *used, const uint8_t *x, const float *w, int64_t ldw,
                             const float *bias, float *c, int k0) {
    for (int j = 0; j < N; j++) {
        float acc = k0 ? c[j] : bias ? bias[j] : 0.0f;
        for (int u = 0; u < n; u++) acc = fmaf(w[used[u] * ldw + j], (float)x[used[u]], acc);
        c[j] = acc;
    }
}

typedef struct { int row; float value; } byte_entry;   /* a row of a block and its byte at one k */

/* The gradient's sums for one input k over a block's bin of rows (ascending): o[0..N) =
 * fma(d[row][j], byte, o[j]) row after row.  The sums of one k stay in registers over the bin,
 * where a pass row by row would store and reload them for every row. */
static void bytes_bin_scalar(int n, const byte_entry *bin, const float *d, int64_t ldd, float *o, int N) {
    for (int j = 0; j < N; j++) {
        float acc = o[j];
        for (int e = 0; e < n; e++) acc = fmaf(d[bin[e].row * ldd + j], bin[e].value, acc);
        o[j] = acc;
    }
}

#ifdef GEMM_X86
AVX2 static int nonzero_avx2(const uint8_t *x, int k0, int k1, int *used) {
    int n = 0, k = k0;
    for (; k + 32 <= k1; k += 32) {
        __m256i bytes = _mm256_loadu_si256((const __m256i *)(x + k));
        unsigned set = ~(unsigned)_mm256_movemask_epi8(_mm256_cmpeq_epi8(bytes, _mm256_setzero_si256()));
        for (; set; set &= set - 1) used[n++] = k + __builtin_ctz(set);
    }
    if (k < k1) {             /* the last bytes through a zero-padded copy: no branch per byte */
        uint8_t tail[32] = {0};
        memcpy(tail, x + k, (size_t)(k1 - k));
        __m256i bytes = _mm256_loadu_si256((const __m256i *)tail);
        unsigned set = ~(unsigned)_mm256_movemask_epi8(_mm256_cmpeq_epi8(bytes, _mm256_setzero_si256()));
        for (set &= (1u << (k1 - k)) - 1; set; set &= set - 1) used[n++] = k + __builtin_ctz(set);
    }
    return n;
}

AVX2 static void bytes_row_avx2(int N, int n, const int *used, const uint8_t *x, const float *w, int64_t ldw,
                                const float *bias, float *c, int k0) {
    int j = 0;
    for (; j + 64 <= N; j += 64) {                 /* 8 vectors of accumulators */
        __m256 acc[8];
        for (int v = 0; v < 8; v++)
            acc[v] = k0     ? _mm256_loadu_ps(c + j + 8 * v)
                   : bias ? _mm256_loadu_ps(bias + j + 8 * v) : _mm256_setzero_ps();
        for (int u = 0; u < n; u++) {
            const float *wk = w + used[u] * ldw + j;
            __m256 value = _mm256_set1_ps((float)x[used[u]]);
            for (int v = 0; v < 8; v++) acc[v] = _mm256_fmadd_ps(_mm256_loadu_ps(wk + 8 * v), value, acc[v]);
        }
        for (int v = 0; v < 8; v++) _mm256_storeu_ps(c + j + 8 * v, acc[v]);
    }
    for (; j + 8 <= N; j += 8) {
        __m256 acc = k0 ? _mm256_loadu_ps(c + j) : bias ? _mm256_loadu_ps(bias + j) : _mm256_setzero_ps();
        for (int u = 0; u < n; u++)
            acc = _mm256_fmadd_ps(_mm256_loadu_ps(w + used[u] * ldw + j), _mm256_set1_ps((float)x[used[u]]), acc);
        _mm256_storeu_ps(c + j, acc);
    }
    for (; j < N; j++) {                           /* (the instruction: as gc_gemm's narrow tile) */
        float acc = k0 ? c[j] : bias ? bias[j] : 0.0f;
        for (int u = 0; u < n; u++) acc = fma_instruction(w[used[u] * ldw + j], (float)x[used[u]], acc);
        c[j] = acc;
    }
}

AVX2 static void bytes_bin_avx2(int n, const byte_entry *bin, const float *d, int64_t ldd, float *o, int N) {
    int j = 0;
    for (; j + 32 <= N; j += 32) {
        __m256 acc[4];
        for (int v = 0; v < 4; v++) acc[v] = _mm256_loadu_ps(o + j + 8 * v);
        for (int e = 0; e < n; e++) {
            const float *row = d + bin[e].row * ldd + j;
            __m256 value = _mm256_set1_ps(bin[e].value);
            for (int v = 0; v < 4; v++) acc[v] = _mm256_fmadd_ps(_mm256_loadu_ps(row + 8 * v), value, acc[v]);
        }
        for (int v = 0; v < 4; v++) _mm256_storeu_ps(o + j + 8 * v, acc[v]);
    }
    for (; j + 8 <= N; j += 8) {
        __m256 acc = _mm256_loadu_ps(o + j);
        for (int e = 0; e < n; e++)
            acc = _mm256_fmadd_ps(_mm256_loadu_ps(d + bin[e].row * ldd + j), _mm256_set1_ps(bin[e].value), acc);
        _mm256_storeu_ps(o + j, acc);
    }
    for (; j < N; j++) {
        float acc = o[j];
        for (int e = 0; e < n; e++) acc = fma_instruction(d[bin[e].row * ldd + j], bin[e].value, acc);
        o[j] = acc;
    }
}

AVX512 static void bytes_row_avx512(int N, int n, const int *used, const uint8_t *x, const float *w, int64_t ldw,
                                    const float *bias, float *c, int k0) {
    for (int j = 0; j < N; j += BYTES_CHUNK) {     /* 8 vectors of accumulators, masked at the right edge */
        __mmask16 m[8];
        __m512 acc[8];
        for (int v = 0; v < 8; v++) {
            int lanes = N - j - 16 * v;
            m[v] = mask16(lanes < 0 ? 0 : lanes);
            acc[v] = k0 ? _mm512_maskz_loadu_ps(m[v], c + j + 16 * v)
                        : bias ? _mm512_maskz_loadu_ps(m[v], bias + j + 16 * v) : _mm512_setzero_ps();
        }
        for (int u = 0; u < n; u++) {
            const float *wk = w + used[u] * ldw + j;
            __m512 value = _mm512_set1_ps((float)x[used[u]]);
            for (int v = 0; v < 8; v++)
                acc[v] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m[v], wk + 16 * v), value, acc[v]);
        }
        for (int v = 0; v < 8; v++) _mm512_mask_storeu_ps(c + j + 16 * v, m[v], acc[v]);
    }
}

AVX512 static void bytes_bin_avx512(int n, const byte_entry *bin, const float *d, int64_t ldd, float *o, int N) {
    for (int j = 0; j < N; j += 64) {             /* 4 vectors of sums, masked at the right edge */
        __mmask16 m[4];
        __m512 acc[4];
        for (int v = 0; v < 4; v++) {
            int lanes = N - j - 16 * v;
            m[v] = mask16(lanes < 0 ? 0 : lanes);
            acc[v] = _mm512_maskz_loadu_ps(m[v], o + j + 16 * v);
        }
        for (int e = 0; e < n; e++) {
            const float *row = d + bin[e].row * ldd + j;
            __m512 value = _mm512_set1_ps(bin[e].value);
            for (int v = 0; v < 4; v++)
                acc[v] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m[v], row + 16 * v), value, acc[v]);
        }
        for (int v = 0; v < 4; v++) _mm512_mask_storeu_ps(o + j + 16 * v, m[v], acc[v]);
    }
}

#endif

/* A code path's kernels for the byte products. */
typedef struct {
    int (*nonzero)(const uint8_t *x, int k0, int k1, int *used);
    void (*row)(int N, int n, const int *used, const uint8_t *x, const float *w, int64_t ldw, const float *bias,
                float *c, int k0);
    void (*bin)(int n, const byte_entry *bin, const float *d, int64_t ldd, float *o, int N);
} byte_kernels;

static byte_kernels byte_kernels_for(int simd) {
#ifdef GEMM_X86
    if (simd == GC_NET_SIMD_AVX512) return (byte_kernels){nonzero_avx2, bytes_row_avx512, bytes_bin_avx512};
    if (simd == GC_NET_SIMD_AVX2) return (byte_kernels){nonzero_avx2, bytes_row_avx2, bytes_bin_avx2};
#else
    (void)simd;
#endif
    return (byte_kernels){nonzero_scalar, bytes_row_scalar, bytes_bin_scalar};
}

void gc_gemm_bytes(int simd, int M, int N, int K, const uint8_t *x, int64_t x_row, const float *w, int64_t ldw,
                   const float *bias, float *c, int64_t ldc, int first, int end) {
    byte_kernels kernels = byte_kernels_for(simd);
    if (first < 0) first = 0;
    if (end > M) end = M;
    int used[BYTES_KB];
    for (int m = first; m < end; m++)
        for (int k0 = 0; k0 < K || k0 == 0; k0 += BYTES_KB) {  /* (K = 0: the start values) */
            int k1 = K - k0 < BYTES_KB ? K : k0 + BYTES_KB;
            int n = kernels.nonzero(x + m * x_row, k0, k1, used);
            kernels.row(N, n, used, x + m * x_row, w, ldw, bias, c + m * ldc, k0);
        }
}

int gc_gemm_bytes_grad(int simd, int M, int N, int K, const uint8_t *x, int64_t x_row, const float *d, int64_t ldd,
                       float *out, int64_t ldo, int first, int end) {
    byte_kernels kernels = byte_kernels_for(simd);
    if (first < 0) first = 0;
    if (end > K) end = K;
    if (end <= first) return 0;
    for (int k = first; k < end; k++) memset(out + k * ldo, 0, sizeof(float) * N);
    /* Rows in blocks, each block's nonzero bytes binned by k (rows ascending in a bin): a bin's
     * sums stay in registers, where a pass row by row would store and reload them for every row,
     * and the blocks run in order, so every element is summed over the rows in order. */
    int kb = end - first < BYTES_KB ? end - first : BYTES_KB;
    int *count = malloc(sizeof(int) * (kb + 1));
    byte_entry *entries = malloc(sizeof(byte_entry) * BYTES_RB * kb);
    int *used = malloc(sizeof(int) * BYTES_RB * kb), *used_n = malloc(sizeof(int) * BYTES_RB);
    if (!count || !entries || !used || !used_n) {
        free(count), free(entries), free(used), free(used_n);
        return -1;
    }
    for (int r0 = 0; r0 < M; r0 += BYTES_RB) {
        int rows = M - r0 < BYTES_RB ? M - r0 : BYTES_RB;
        for (int k0 = first; k0 < end; k0 += kb) {
            int k1 = end - k0 < kb ? end : k0 + kb;
            memset(count, 0, sizeof(int) * (kb + 1));
            for (int r = 0; r < rows; r++) {
                used_n[r] = kernels.nonzero(x + (r0 + r) * x_row, k0, k1, used + r * kb);
                for (int u = 0; u < used_n[r]; u++) count[used[r * kb + u] - k0 + 1]++;
            }
            for (int k = 0; k < k1 - k0; k++) count[k + 1] += count[k];      /* bin k starts at count[k - k0] */
            for (int r = 0; r < rows; r++) {
                const uint8_t *xr = x + (r0 + r) * x_row;
                for (int u = 0; u < used_n[r]; u++) {
                    int k = used[r * kb + u];
                    entries[count[k - k0]++] = (byte_entry){r, (float)xr[k]};
                }
            }
            /* (count[k - k0] now ends bin k, and bin k starts where bin k - 1 ends) */
            for (int k = k0, start = 0; k < k1; start = count[k - k0], k++)
                if (count[k - k0] > start)
                    kernels.bin(count[k - k0] - start, entries + start, d + r0 * ldd, ldd, out + k * ldo, N);
        }
    }
    free(count), free(entries), free(used), free(used_n);
    return 0;
}

static void transpose(int rows, int cols, const float *in, float *out) {
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++) out[(int64_t)j * rows + i] = in[(int64_t)i * cols + j];
}

/* A = X X^T (m x m) from X (m x n) and T = X^T: the tiles on and above the diagonal, the rest
 * mirrored.  Element (i, j) sums x[i][k] x[j][k] over k in order and (j, i) the same products
 * (a product's rounding does not depend on its operands' order) in the same order, so the mirror
 * is the bits gc_gemm would write there, at about half the Gram's work. */
static void gram_of(int simd, int m, int n, const float *x, const float *t, float *gram) {
    for (int r0 = 0; r0 < m; r0 += GRAM_ROWS) {
        int r1 = m - r0 < GRAM_ROWS ? m : r0 + GRAM_ROWS;
        gc_gemm(simd, m, m - r0, n, x, n, 1, t + r0, m, NULL, gram + r0, m, r0, r1);
    }
    for (int i = 1; i < m; i++)
        for (int j = 0; j < i; j++) gram[(int64_t)i * m + j] = gram[(int64_t)j * m + i];
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
        gram_of(simd, m, n, x, t, gram);                                                 /* A = X X^T */
        for (int64_t i = 0; i < (int64_t)m * m; i++) p[i] = c * gram[i];
        gc_gemm(simd, m, m, m, p, m, 1, gram, m, NULL, square, m, 0, m);                /* (c A) A */
        for (int64_t i = 0; i < (int64_t)m * m; i++) p[i] = b * gram[i] + square[i];
        gc_gemm(simd, m, n, m, p, m, 1, x, n, NULL, t, n, 0, m);                        /* (b A + c A A) X */
        for (int64_t i = 0; i < size; i++) x[i] = a * x[i] + t[i];
    }
    if (wide) memcpy(out, x, sizeof(float) * size);
    else transpose(m, n, x, out);
}
