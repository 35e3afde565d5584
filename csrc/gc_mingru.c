#include "gc_mingru.h"
#include "gc_gates.h"
#include "gc_net.h"
#include <string.h>

/* One code path's gate rows, forward and backward. */
typedef struct {
    void (*forward)(int H, const float *c, const float *previous, float keep, const float *x, float *s,
                    float *x_out);
    void (*backward)(int H, const float *c, const float *previous, float keep, const float *x, const float *s,
                     const float *grad_out, float *grad_c, float *grad_x, float *carry);
} gates;

static gates gates_of(int simd) {
#ifdef GC_SIMD_X86
    if (simd == GC_NET_SIMD_AVX512) return (gates){gc_gates_forward_avx512, gc_gates_backward_avx512};
    if (simd == GC_NET_SIMD_AVX2) return (gates){gc_gates_forward_avx2, gc_gates_backward_avx2};
#endif
    (void)simd;
    return (gates){gc_gates_forward_scalar, gc_gates_backward_scalar};
}

void gc_mingru_forward(int simd, int T, int B, int H, int first, int end, const float *c, const float *x,
                       const float *keep, const float *initial, float *s, float *x_out) {
    gates g = gates_of(simd);
    for (int t = 0; t < T; t++)           /* time-major, so memory is read in order */
        for (int b = first; b < end; b++) {
            size_t row = (size_t)t * B + b;
            const float *previous = t ? s + (row - B) * H : initial + (size_t)b * H;
            g.forward(H, c + row * 3 * H, previous, keep[row], x + row * H, s + row * H, x_out + row * H);
        }
}

void gc_mingru_backward(int simd, int T, int B, int H, int first, int end, const float *c, const float *x,
                        const float *keep, const float *initial, const float *s, const float *grad_out,
                        float *grad_c, float *grad_x, float *carry) {
    gates g = gates_of(simd);
    memset(carry + (size_t)first * H, 0, sizeof(float) * (size_t)(end - first) * H);
    for (int t = T - 1; t >= 0; t--)
        for (int b = first; b < end; b++) {
            size_t row = (size_t)t * B + b;
            const float *previous = t ? s + (row - B) * H : initial + (size_t)b * H;
            g.backward(H, c + row * 3 * H, previous, keep[row], x + row * H, s + row * H, grad_out + row * H,
                       grad_c + row * 3 * H, grad_x + row * H, carry + (size_t)b * H);
        }
}
