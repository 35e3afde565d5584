/* bfloat16 matrix products for training (gcpipe/train/matmul.py, `update_precision: bfloat16`):
 * C = start + A B with A and B rounded to bfloat16 (to nearest, ties to even; a result below
 * float's normal range becomes a zero of its sign, every NaN x86's default NaN) and summed in
 * float32 as AVX512_BF16's dot product sums them.  Over k in pairs (2j, 2j+1), k ascending:
 * acc += A(m,2j+1) B(2j+1,n), then acc += A(m,2j) B(2j,n), each one fused multiply-add with
 * denormal inputs taken as zero and a denormal result flushed to zero (an odd K ends with a zero
 * element).  The start is bias[n] or 0
 * (a denormal bias then reads as zero, and is copied as it is when K is 0).
 * Two ways to the same bits: the instruction (vdpbf16ps) over operands packed in pairs, on a CPU
 * that has it, and everywhere else gc_gemm's float32 products (gc_gemm.h) over the rounded
 * operands with each pair's elements swapped, under MXCSR's DAZ and FTZ (x86-64 only; measured
 * equal on a Zen 4: benchmarks/bf16_products.py). */
#ifndef GC_BF16_H
#define GC_BF16_H
#include <stdint.h>

/* 1 where the CPU has AVX512_BF16 (and this build can use it), else 0. */
int gc_bf16_hardware(void);

/* Pairs j in [first, end) of Y's rows (K x N, Y(k, n) = y[k * yk + n * yn]) for the instruction:
 * out[j * ld + n] = bits(Y(2j, n)) | bits(Y(2j + 1, n)) << 16 for n < N, 0 for n in [N, ld). */
void gc_bf16_pack_row_pairs(int K, int N, const float *y, int64_t yk, int64_t yn, uint32_t *out, int64_t ld,
                            int first, int end);
/* The same for gc_gemm, as rounded floats with each pair's elements swapped: rows of X into
 * out[r * ld + 2j] = X(r, 2j + 1), out[r * ld + 2j + 1] = X(r, 2j); pairs of Y's rows into
 * out[2j * ld + n] = Y(2j + 1, n), out[(2j + 1) * ld + n] = Y(2j, n) (0 past K). */
void gc_bf16_round_rows(int K, const float *x, int64_t xr, int64_t xk, float *out, int64_t ld, int first, int end);
void gc_bf16_round_row_pairs(int K, int N, const float *y, int64_t yk, int64_t yn, float *out, int64_t ld,
                             int first, int end);

/* Rows m in [first, end) of C (M x N, ldc) by the instruction (gc_bf16_hardware() must be 1), B
 * packed by gc_bf16_pack_row_pairs (rows of ldb >= N rounded up to 32 words), A either floats (a: M x K, rows of lda,
 * rounded here a block of rows at a time; packed_a NULL) or, for a transposed A, packed_a: A^T
 * packed by gc_bf16_pack_row_pairs ([pairs][lda] words, A(m, 2j) and A(m, 2j + 1) in word
 * j * lda + m, 11 readable words past M - 1; a NULL). */
void gc_bf16_gemm(int M, int N, int K, const float *a, const uint32_t *packed_a, int64_t lda, const uint32_t *b,
                  int64_t ldb, const float *bias, float *c, int64_t ldc, int first, int end);
/* Rows m in [first, end) of C by gc_gemm on the rounded, swapped operands (K = 2 * pairs; A(m, k)
 * at a[m * a_row + k * a_col]), under DAZ and FTZ: the instruction's bits on the AVX2 and AVX-512
 * paths. */
void gc_bf16_gemm_emulated(int simd, int M, int N, int K, const float *a, int64_t a_row, int64_t a_col, const float *b,
                           int64_t ldb, const float *bias, float *c, int64_t ldc, int first, int end);

#endif
