/* The next lever for the training's products, measured before it is built: bfloat16 operands
 * summed in float32 by AVX512_BF16's dot product (vdpbf16ps: two multiply-adds a lane, twice
 * float32's per instruction).  Run by benchmarks/bf16_products.py.
 *
 * 1. Its bits: per lane, srcdest += a[2j+1] b[2j+1], then += a[2j] b[2j] (the odd pair element
 *    first, as Intel's manual writes it), each one fused multiply-add, with denormal inputs taken
 *    as zero and denormal results flushed to zero.  If this CPU's instruction is that function,
 *    a float32 fixed-order product of the same bfloat16 values, pair elements swapped, under
 *    DAZ/FTZ gives its bits on any CPU with FMA: the same training on every machine, at
 *    float32's speed where the instruction is missing.
 * 2. Its speed: a 12 x 32 tile (24 accumulators, as csrc/gc_gemm.c's AVX-512 tile) over the
 *    update's forward product [8192 x 128] @ [128 x 384], one thread, float32 FMA against the dot. */
#include <float.h>
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { M = 8192, N = 384, K = 128, ROWS = 12 };

static uint32_t state = 1;
static float uniform(void) { state = state * 1664525u + 1013904223u; return (state >> 8) / 16777216.0f - 0.5f; }
static uint16_t to_bf16(float f) {                 /* round to nearest, ties to even (finite f) */
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)((u + 0x7FFF + ((u >> 16) & 1)) >> 16);
}
static float from_bf16(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static float flush(float x) { return fabsf(x) < FLT_MIN ? copysignf(0.0f, x) : x; }
static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

/* The emulation: one pair into acc, odd element first, DAZ on every input and FTZ on each result. */
static float pair_emulated(float acc, uint16_t a0, uint16_t a1, uint16_t b0, uint16_t b1) {
    acc = flush(fmaf(flush(from_bf16(a1)), flush(from_bf16(b1)), flush(acc)));
    return flush(fmaf(flush(from_bf16(a0)), flush(from_bf16(b0)), acc));
}

__attribute__((target("avx512f,avx512bf16"))) static float pair_hardware(float acc, uint16_t a0, uint16_t a1,
                                                                         uint16_t b0, uint16_t b1) {
    __m512bh a = (__m512bh)_mm512_set1_epi32((int)(a0 | (uint32_t)a1 << 16));
    __m512bh b = (__m512bh)_mm512_set1_epi32((int)(b0 | (uint32_t)b1 << 16));
    float out[16];
    _mm512_storeu_ps(out, _mm512_dpbf16_ps(_mm512_set1_ps(acc), a, b));
    return out[0];
}

__attribute__((target("avx512f,fma"))) static void product_fp32(const float *a, const float *b, float *c) {
    for (int m0 = 0; m0 < M; m0 += ROWS)
        for (int n0 = 0; n0 < N; n0 += 32) {
            __m512 acc[ROWS][2];
            for (int r = 0; r < ROWS; r++) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
            for (int k = 0; k < K; k++) {
                __m512 b0 = _mm512_loadu_ps(b + k * N + n0), b1 = _mm512_loadu_ps(b + k * N + n0 + 16);
                for (int r = 0; r < ROWS; r++) {
                    __m512 v = _mm512_set1_ps(a[(m0 + r) * K + k]);
                    acc[r][0] = _mm512_fmadd_ps(v, b0, acc[r][0]);
                    acc[r][1] = _mm512_fmadd_ps(v, b1, acc[r][1]);
                }
            }
            for (int r = 0; r < ROWS; r++) {
                _mm512_storeu_ps(c + (m0 + r) * N + n0, acc[r][0]);
                _mm512_storeu_ps(c + (m0 + r) * N + n0 + 16, acc[r][1]);
            }
        }
}

/* a: [M][K/2] pairs along k; b: [K/2][N] pairs along k. */
__attribute__((target("avx512f,avx512bf16"))) static void product_bf16(const uint32_t *a, const uint32_t *b,
                                                                       float *c) {
    for (int m0 = 0; m0 < M; m0 += ROWS)
        for (int n0 = 0; n0 < N; n0 += 32) {
            __m512 acc[ROWS][2];
            for (int r = 0; r < ROWS; r++) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
            for (int k = 0; k < K / 2; k++) {
                __m512bh b0 = (__m512bh)_mm512_loadu_si512(b + k * N + n0);
                __m512bh b1 = (__m512bh)_mm512_loadu_si512(b + k * N + n0 + 16);
                for (int r = 0; r < ROWS; r++) {
                    __m512bh v = (__m512bh)_mm512_set1_epi32((int)a[(m0 + r) * (K / 2) + k]);
                    acc[r][0] = _mm512_dpbf16_ps(acc[r][0], v, b0);
                    acc[r][1] = _mm512_dpbf16_ps(acc[r][1], v, b1);
                }
            }
            for (int r = 0; r < ROWS; r++) {
                _mm512_storeu_ps(c + (m0 + r) * N + n0, acc[r][0]);
                _mm512_storeu_ps(c + (m0 + r) * N + n0 + 16, acc[r][1]);
            }
        }
}

int main(void) {
    if (!__builtin_cpu_supports("avx512bf16")) {
        printf("this CPU has no AVX512_BF16: nothing to measure\n");
        return 0;
    }
    /* 1. Single pairs, exponents spread so that some accumulators are denormal and some products
     * underflow (where DAZ/FTZ decide the bits), then whole products of ordinary values. */
    long cases = 1000000, plain = 0, emulated = 0;
    for (long i = 0; i < cases; i++) {
        float v[5];
        for (int j = 0; j < 5; j++) v[j] = ldexpf(uniform(), -(int)((uniform() + 0.5f) * 60.0f));
        float acc = i % 3 ? v[0] : ldexpf(v[0], -100);
        uint16_t a0 = to_bf16(v[1]), a1 = to_bf16(v[2]), b0 = to_bf16(ldexpf(v[3], -60)), b1 = to_bf16(ldexpf(v[4], -60));
        float hardware = pair_hardware(acc, a0, a1, b0, b1);
        float fused = fmaf(from_bf16(a0), from_bf16(b0), fmaf(from_bf16(a1), from_bf16(b1), acc));
        float emulation = pair_emulated(acc, a0, a1, b0, b1);
        plain += memcmp(&hardware, &fused, 4) != 0;
        emulated += memcmp(&hardware, &emulation, 4) != 0;
    }
    printf("%ld single pairs: %ld differ from plain fused multiply-adds, %ld from the DAZ/FTZ emulation\n",
           cases, plain, emulated);

    float *a = malloc(sizeof(float) * M * K), *b = malloc(sizeof(float) * K * N), *c = malloc(sizeof(float) * M * N);
    uint32_t *a2 = malloc(sizeof(uint32_t) * M * K / 2), *b2 = malloc(sizeof(uint32_t) * K / 2 * N);
    for (int i = 0; i < M * K; i++) a[i] = uniform() * 4.0f;
    for (int i = 0; i < K * N; i++) b[i] = uniform() * 0.2f;
    for (int m = 0; m < M; m++)
        for (int k = 0; k < K / 2; k++)
            a2[m * (K / 2) + k] = to_bf16(a[m * K + 2 * k]) | (uint32_t)to_bf16(a[m * K + 2 * k + 1]) << 16;
    for (int k = 0; k < K / 2; k++)
        for (int n = 0; n < N; n++)
            b2[k * N + n] = to_bf16(b[2 * k * N + n]) | (uint32_t)to_bf16(b[(2 * k + 1) * N + n]) << 16;
    product_bf16(a2, b2, c);
    long elements = 0, differing = 0;
    for (int m = 0; m < M; m += 7)
        for (int n = 0; n < N; n++, elements++) {
            float acc = 0.0f;
            for (int k = 0; k < K / 2; k++) {
                uint32_t x = a2[m * (K / 2) + k], y = b2[k * N + n];
                acc = pair_emulated(acc, x & 0xFFFF, x >> 16, y & 0xFFFF, y >> 16);
            }
            differing += memcmp(&acc, &c[m * N + n], 4) != 0;
        }
    printf("[8192 x 128] @ [128 x 384] in bfloat16: %ld of %ld sampled elements differ from the emulation\n",
           differing, elements);

    /* 2. Speed: the fastest of 20 runs each, interleaved. */
    double fp32 = 1e9, bf16 = 1e9;
    for (int rep = 0; rep < 20; rep++) {
        double t = now();
        product_fp32(a, b, c);
        fp32 = fmin(fp32, now() - t);
        t = now();
        product_bf16(a2, b2, c);
        bf16 = fmin(bf16, now() - t);
    }
    double flop = 2.0 * M * N * K;
    printf("one thread: float32 FMA %.1f GFLOP/s, bfloat16 dot %.1f GFLOP/s (x%.2f)\n", flop / fp32 / 1e9,
           flop / bf16 / 1e9, fp32 / bf16);
    return emulated || differing;
}
