/* Deterministic float32 elementary functions: the same bits on every machine and in every code
 * path (scalar and SIMD), because each is a fixed sequence of IEEE operations that are
 * correctly rounded everywhere (+, -, *, /, fused multiply-add, min/max of non-NaN values).
 * libm's expf is not such a function: its result may differ in the last bit between libraries,
 * versions and CPU-dependent implementations (glibc picks an FMA variant at load time). */
#ifndef GC_MATH_H
#define GC_MATH_H
#include <math.h>
#include <stdint.h>
#include <string.h>

/* Cephes' expf constants: ln 2 split in a part exact in float and a correction, and the minimax
 * polynomial of exp on [-ln2/2, ln2/2].  Shared with the SIMD copies in gc_net.c. */
#define GC_EXP_LO (-87.3f)               /* exp(-87.3) is still a normal float */
#define GC_EXP_HI 88.0f
#define GC_LOG2E 1.44269504088896341f
#define GC_ROUNDER 12582912.0f           /* 1.5 * 2^23: x + it rounds x to an integer (|x| < 2^22) */
#define GC_LN2_HI 0.693359375f
#define GC_LN2_LO (-2.12194440e-4f)
#define GC_EXP_P0 1.9875691500e-4f
#define GC_EXP_P1 1.3981999507e-3f
#define GC_EXP_P2 8.3334519073e-3f
#define GC_EXP_P3 4.1665795894e-2f
#define GC_EXP_P4 1.6666665459e-1f
#define GC_EXP_P5 5.0000001201e-1f

/* exp(x), within 2 ulp of the true value for x in [-87.3, 88]; x is clamped to that range. */
static inline float gc_expf(float x) {
    x = fminf(fmaxf(x, GC_EXP_LO), GC_EXP_HI);
    float n = fmaf(x, GC_LOG2E, GC_ROUNDER) - GC_ROUNDER;    /* round(x / ln 2) */
    float r = fmaf(n, -GC_LN2_HI, x);
    r = fmaf(n, -GC_LN2_LO, r);
    float p = GC_EXP_P0;
    p = fmaf(p, r, GC_EXP_P1);
    p = fmaf(p, r, GC_EXP_P2);
    p = fmaf(p, r, GC_EXP_P3);
    p = fmaf(p, r, GC_EXP_P4);
    p = fmaf(p, r, GC_EXP_P5);
    p = fmaf(p, r * r, r) + 1.0f;
    int32_t bits = ((int32_t)n + 127) << 23;                 /* 2^n */
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

static inline float gc_sigmoidf(float x) { return 1.0f / (1.0f + gc_expf(-x)); }

/* Cephes' logf polynomial on [sqrt(1/2) - 1, sqrt(2) - 1]. */
#define GC_LOG_Q0 7.0376836292e-2f
#define GC_LOG_Q1 (-1.1514610310e-1f)
#define GC_LOG_Q2 1.1676998740e-1f
#define GC_LOG_Q3 (-1.2420140846e-1f)
#define GC_LOG_Q4 1.4249322787e-1f
#define GC_LOG_Q5 (-1.6668057665e-1f)
#define GC_LOG_Q6 2.0000714765e-1f
#define GC_LOG_Q7 (-2.4999993993e-1f)
#define GC_LOG_Q8 3.3333331174e-1f

/* log(x) for normal x > 0, within 2 ulp (the Gumbel noise of the search).  x = m 2^e with m in
 * [sqrt(1/2), sqrt(2)) by the exponent bits, then log(m) by the polynomial. */
static inline float gc_logf(float x) {
    int32_t bits;
    memcpy(&bits, &x, sizeof bits);
    int32_t e = ((bits >> 23) & 0xFF) - 126;                 /* x = m 2^e, m in [0.5, 1) */
    bits = (bits & 0x007FFFFF) | 0x3F000000;
    float m;
    memcpy(&m, &bits, sizeof m);
    if (m < 0.70710678118654752f) {
        e -= 1;
        m = m + m - 1.0f;
    } else {
        m = m - 1.0f;
    }
    float z = m * m, y = GC_LOG_Q0;
    y = fmaf(y, m, GC_LOG_Q1);
    y = fmaf(y, m, GC_LOG_Q2);
    y = fmaf(y, m, GC_LOG_Q3);
    y = fmaf(y, m, GC_LOG_Q4);
    y = fmaf(y, m, GC_LOG_Q5);
    y = fmaf(y, m, GC_LOG_Q6);
    y = fmaf(y, m, GC_LOG_Q7);
    y = fmaf(y, m, GC_LOG_Q8);
    float ef = (float)e;
    y = y * m * z;
    y = fmaf(ef, GC_LN2_LO, y);
    y = fmaf(-0.5f, z, y);
    return fmaf(ef, GC_LN2_HI, m + y);
}

#endif
