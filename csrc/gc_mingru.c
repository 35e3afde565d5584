#include "gc_mingru.h"
#include "gc_select.h"
#include <math.h>
#include <string.h>

/* Wider vectors where the CPU has them (no contraction: -ffp-contract=off keeps every rounding). */
#if defined(__x86_64__)
#define AVX2_TARGET __attribute__((target("avx2,fma")))
#define HAS_AVX2() (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
#else
#define AVX2_TARGET
#define HAS_AVX2() 1
#endif

/* One step's row: the torch expressions of sequence.py, operation for operation. */
static inline void forward_row(int H, int fused, const float *restrict c, const float *restrict sig,
                               const float *restrict x, float keep, const float *restrict previous,
                               float *restrict s, float *restrict x_out) {
    for (int j = 0; j < H; j++) {
        float h = c[j], z = sig[H + j], sp = sig[2 * H + j];
        float g = gc_candidate_of(h, sig[j]);
        float a = (1.0f - z) * keep, b = z * g;
        float st = fused ? fmaf(a, previous[j], b) : b + a * previous[j];
        s[j] = st;
        x_out[j] = x[j] + sp * (st - x[j]);
    }
}

static inline void forward_rows(int T, int B, int H, int first, int end, int fused, const float *c,
                                const float *sig, const float *x, const float *keep, const float *initial,
                                float *s, float *x_out) {
    for (int t = 0; t < T; t++)           /* time-major, so memory is read in order */
        for (int b = first; b < end; b++) {
            size_t row = (size_t)t * B + b;
            const float *previous = t ? s + (row - B) * H : initial + (size_t)b * H;
            forward_row(H, fused, c + row * 3 * H, sig + row * 3 * H, x + row * H, keep[row], previous,
                        s + row * H, x_out + row * H);
        }
}

AVX2_TARGET static void forward_avx2(int T, int B, int H, int first, int end, int fused, const float *c,
                                     const float *sig, const float *x, const float *keep, const float *initial,
                                     float *s, float *x_out) {
    if (fused)
        forward_rows(T, B, H, first, end, 1, c, sig, x, keep, initial, s, x_out);
    else
        forward_rows(T, B, H, first, end, 0, c, sig, x, keep, initial, s, x_out);
}

void gc_mingru_forward(int T, int B, int H, int first, int end, int fused, const float *c, const float *sig,
                       const float *x, const float *keep, const float *initial, float *s, float *x_out) {
    if (HAS_AVX2())   /* (torch fuses only where the CPU has FMA) */
        forward_avx2(T, B, H, first, end, fused, c, sig, x, keep, initial, s, x_out);
    else if (fused)
        forward_rows(T, B, H, first, end, 1, c, sig, x, keep, initial, s, x_out);
    else
        forward_rows(T, B, H, first, end, 0, c, sig, x, keep, initial, s, x_out);
}

/* One step's row, backward.  The gradients autograd forms for the torch expressions, with its
 * sums: x's highway gradient ge + (-gd); z's and h's two paths (a sum of two terms has one
 * rounding, whatever the order); torch's sigmoid_backward grad * (1 - y) * y; the recurrence's
 * g_t = grad_t + carry, carry = a_t g_t (sequence.py's LinearRecurrence). */
static inline void backward_row(int H, const float *restrict c, const float *restrict sig,
                                const float *restrict x, float keep, const float *restrict previous,
                                const float *restrict s, const float *restrict grad_out,
                                float *restrict grad_c, float *restrict grad_x, float *restrict carry) {
    for (int j = 0; j < H; j++) {
        float h = c[j], sh = sig[j], z = sig[H + j], sp = sig[2 * H + j];
        float ge = grad_out[j], d = s[j] - x[j];
        float gd = ge * sp, gsp = ge * d;
        grad_x[j] = ge + (-gd);
        grad_c[2 * H + j] = gsp * (1.0f - sp) * sp;
        float gs = gd + carry[j];                       /* the gradient of s_t, later steps included */
        carry[j] = ((1.0f - z) * keep) * gs;
        float gz = gs * gc_candidate_of(h, sh) + (-((gs * previous[j]) * keep));
        grad_c[H + j] = gz * (1.0f - z) * z;
        float gg = gs * z;
        int linear = h >= 0.0f;
        float gsh = gc_choose(linear, 0.0f, gg);
        grad_c[j] = gc_choose(linear, gg, 0.0f) + gsh * (1.0f - sh) * sh;
    }
}

static inline void backward_rows(int T, int B, int H, int first, int end, const float *c, const float *sig,
                                 const float *x, const float *keep, const float *initial, const float *s,
                                 const float *grad_out, float *grad_c, float *grad_x, float *carry) {
    memset(carry + (size_t)first * H, 0, sizeof(float) * (size_t)(end - first) * H);
    for (int t = T - 1; t >= 0; t--)
        for (int b = first; b < end; b++) {
            size_t row = (size_t)t * B + b;
            const float *previous = t ? s + (row - B) * H : initial + (size_t)b * H;
            backward_row(H, c + row * 3 * H, sig + row * 3 * H, x + row * H, keep[row], previous, s + row * H,
                         grad_out + row * H, grad_c + row * 3 * H, grad_x + row * H, carry + (size_t)b * H);
        }
}

AVX2_TARGET static void backward_avx2(int T, int B, int H, int first, int end, const float *c, const float *sig,
                                      const float *x, const float *keep, const float *initial, const float *s,
                                      const float *grad_out, float *grad_c, float *grad_x, float *carry) {
    backward_rows(T, B, H, first, end, c, sig, x, keep, initial, s, grad_out, grad_c, grad_x, carry);
}

void gc_mingru_backward(int T, int B, int H, int first, int end, const float *c, const float *sig,
                        const float *x, const float *keep, const float *initial, const float *s,
                        const float *grad_out, float *grad_c, float *grad_x, float *carry) {
    if (HAS_AVX2())
        backward_avx2(T, B, H, first, end, c, sig, x, keep, initial, s, grad_out, grad_c, grad_x, carry);
    else
        backward_rows(T, B, H, first, end, c, sig, x, keep, initial, s, grad_out, grad_c, grad_x, carry);
}
