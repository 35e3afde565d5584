/* Matrix products for the training path (gcpipe/train/matmul.py) in a fixed summation order: every
 * element of C = A B is its start value (bias[n], or 0) followed by one fused multiply-add per k,
 * k ascending — the order of the play-time step (gc_net.h) — whatever the code path (AVX-512,
 * AVX2+FMA or scalar fmaf; vector lanes run over n, never over a sum), the blocking, the rows a
 * call computes and the CPU.  So a product's bits depend on its operands alone, not on which BLAS
 * kernel a CPU is given (MKL picks its kernels by vendor and model).  Compile without FP
 * contraction (-ffp-contract=off). */
#ifndef GC_GEMM_H
#define GC_GEMM_H
#include <stdint.h>

#include "gc_net.h"   /* the GC_NET_SIMD_* code paths */

/* The rows m in [first, end) of C = A B (+ bias in every row), M x N from K.  A(m, k) is
 * a[m * a_row + k * a_col] (any strides, so A may be a transposed view); B is row-major with
 * leading dimension ldb, C with ldc, not overlapping A or B; bias has N entries or is NULL.
 * `simd` is a GC_NET_SIMD_* path the CPU runs (gc_net_best_simd). */
void gc_gemm(int simd, int M, int N, int K, const float *a, int64_t a_row, int64_t a_col, const float *b,
             int64_t ldb, const float *bias, float *c, int64_t ldc, int first, int end);

/* Products with a matrix of bytes X (M x K, x[m * x_row + k]: observations), the same sums as
 * gc_gemm's with X cast to float, over each row's nonzero bytes only: a zero byte's term w * 0
 * changes no sum but the sign of a zero start (a bias of -0 stays -0, as in the play-time step's
 * encoder, gc_net.c, which skips the same bytes) and, for an infinite or NaN factor, the NaN that
 * 0 * inf would make.  About a fifth of an observation's bytes are nonzero.
 *
 * gc_gemm_bytes: rows m in [first, end) of C = X W (+ bias in every row), W (K x N) row-major with
 * leading dimension ldw, C with ldc.  gc_gemm_bytes_grad: rows k in [first, end) of G = X^T D
 * (K x N, out[k * ldo + n]) for D (M x N, d[m * ldd + n]), each element summed from 0 over m
 * ascending (the transpose of the weights' gradient D^T X of a layer whose input is X); out must
 * not overlap d.  Returns 0, or -1 where its scratch could not be allocated. */
void gc_gemm_bytes(int simd, int M, int N, int K, const uint8_t *x, int64_t x_row, const float *w, int64_t ldw,
                   const float *bias, float *c, int64_t ldc, int first, int end);
int gc_gemm_bytes_grad(int simd, int M, int N, int K, const uint8_t *x, int64_t x_row, const float *d, int64_t ldd,
                       float *out, int64_t ldo, int first, int end);

/* Muon's Newton–Schulz orthogonalisation (gcpipe/train/muon.py) of one rows x cols matrix g, on
 * one thread, every product by gc_gemm: X = g / (|g| + eps) in its wide form (transposed when
 * rows > cols), then per iteration i with (a, b, c) = coefficients[3i..3i+2]
 *     A = X X^T,  X <- a X + (b A + (c A) A) X
 * each elementwise operation rounded as written; out (rows x cols) gets X in g's shape.  |g| is
 * the Frobenius norm summed in double in index order.  scratch holds 2 * rows * cols +
 * 3 * m * m floats, m = min(rows, cols). */
void gc_newton_schulz(int simd, int rows, int cols, const float *g, int iterations, const float *coefficients,
                      float eps, float *out, float *scratch);

#endif
