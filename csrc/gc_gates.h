/* The MinGRU gates of model.md §1 for one row of H units, forward and backward, on each code path
 * (scalar, AVX2, AVX-512), every path the same IEEE operations lane by lane and so the same bits.
 * The forward is the play-time step's (gc_net.c) and the training's (gc_mingru.c), so the update
 * recomputes the rollout's outputs to the bit.  From the layer's projection c = h | k | p, its
 * input x and the previous state (times keep: 0 where the state resets, else 1):
 *     prev = previous * keep,  z = sigmoid(k),  g = h + 0.5 if h >= 0 else sigmoid(h)
 *     s = z (g - prev) + prev   (one fused multiply-add)
 *     x_out = sigmoid(p) (s - x) + x   (one fused multiply-add)
 * The backward takes x_out's gradient and `carry`, the gradient of s from the later steps, and
 * writes the gradients of c and of x (through the highway alone) and the new carry, the gradient
 * of `previous`.  H is a multiple of 16.  Writing s and x_out over previous and x is allowed. */
#ifndef GC_GATES_H
#define GC_GATES_H
#include "gc_math.h"
#include "gc_select.h"
#include "gc_simd_math.h"

/* The bodies, over vectors of W lanes of type VEC, in path P's operations (gc_simd_math.h) and
 * its select GC_<P>_IF_NOT_NEGATIVE(h, a, b): a where h >= 0, else b. */
#define GC_GATES_FORWARD_BODY(P, VEC, W)                                                         \
    VEC keep_v = GC_OP(P, SET1)(keep), half = GC_OP(P, SET1)(0.5f);                              \
    for (int j = 0; j < H; j += W) {                                                             \
        VEC h = GC_OP(P, LOAD)(c + j);                                                           \
        VEC z = GC_OP(P, SIGMOID)(GC_OP(P, LOAD)(c + H + j));                                    \
        VEC sp = GC_OP(P, SIGMOID)(GC_OP(P, LOAD)(c + 2 * H + j));                               \
        VEC g = GC_OP(P, IF_NOT_NEGATIVE)(h, GC_OP(P, ADD)(h, half), GC_OP(P, SIGMOID)(h));      \
        VEC prev = GC_OP(P, MUL)(GC_OP(P, LOAD)(previous + j), keep_v);                          \
        VEC st = GC_OP(P, FMA)(z, GC_OP(P, SUB)(g, prev), prev);                                 \
        VEC xv = GC_OP(P, LOAD)(x + j);                                                          \
        GC_OP(P, STORE)(s + j, st);                                                              \
        GC_OP(P, STORE)(x_out + j, GC_OP(P, FMA)(sp, GC_OP(P, SUB)(st, xv), xv));                \
    }

#define GC_GATES_BACKWARD_BODY(P, VEC, W)                                                        \
    VEC keep_v = GC_OP(P, SET1)(keep), one = GC_OP(P, SET1)(1.0f), half = GC_OP(P, SET1)(0.5f);  \
    for (int j = 0; j < H; j += W) {                                                             \
        VEC h = GC_OP(P, LOAD)(c + j);                                                           \
        VEC z = GC_OP(P, SIGMOID)(GC_OP(P, LOAD)(c + H + j));                                    \
        VEC sp = GC_OP(P, SIGMOID)(GC_OP(P, LOAD)(c + 2 * H + j));                               \
        VEC sh = GC_OP(P, SIGMOID)(h), g = GC_OP(P, IF_NOT_NEGATIVE)(h, GC_OP(P, ADD)(h, half), sh); \
        VEC prev = GC_OP(P, MUL)(GC_OP(P, LOAD)(previous + j), keep_v);                          \
        VEC ge = GC_OP(P, LOAD)(grad_out + j);                                                   \
        VEC d = GC_OP(P, SUB)(GC_OP(P, LOAD)(s + j), GC_OP(P, LOAD)(x + j));                     \
        VEC g_p = GC_OP(P, MUL)(ge, d), g_d = GC_OP(P, MUL)(ge, sp);     /* x_out = sp d + x */  \
        GC_OP(P, STORE)(grad_x + j, GC_OP(P, SUB)(ge, g_d));                                     \
        VEC g_s = GC_OP(P, ADD)(g_d, GC_OP(P, LOAD)(carry + j));   /* s = z (g - prev) + prev */ \
        VEC g_z = GC_OP(P, MUL)(g_s, GC_OP(P, SUB)(g, prev)), g_g = GC_OP(P, MUL)(g_s, z);       \
        GC_OP(P, STORE)(carry + j, GC_OP(P, MUL)(GC_OP(P, MUL)(g_s, GC_OP(P, SUB)(one, z)), keep_v)); \
        GC_OP(P, STORE)(grad_c + H + j, GC_OP(P, MUL)(g_z, GC_OP(P, MUL)(z, GC_OP(P, SUB)(one, z)))); \
        GC_OP(P, STORE)(grad_c + 2 * H + j, GC_OP(P, MUL)(g_p, GC_OP(P, MUL)(sp, GC_OP(P, SUB)(one, sp)))); \
        GC_OP(P, STORE)(grad_c + j, GC_OP(P, IF_NOT_NEGATIVE)(h, g_g,                            \
                                    GC_OP(P, MUL)(g_g, GC_OP(P, MUL)(sh, GC_OP(P, SUB)(one, sh))))); \
    }

#define GC_GATES_FORWARD_ARGS int H, const float *c, const float *previous, float keep, const float *x, \
                              float *s, float *x_out
#define GC_GATES_BACKWARD_ARGS int H, const float *c, const float *previous, float keep, const float *x, \
                               const float *s, const float *grad_out, float *grad_c, float *grad_x, float *carry

#define GC_SCALAR_IF_NOT_NEGATIVE(h, a, b) gc_choose((h) >= 0.0f, a, b)
static inline void gc_gates_forward_scalar(GC_GATES_FORWARD_ARGS) { GC_GATES_FORWARD_BODY(SCALAR, float, 1) }
static inline void gc_gates_backward_scalar(GC_GATES_BACKWARD_ARGS) { GC_GATES_BACKWARD_BODY(SCALAR, float, 1) }

#ifdef GC_SIMD_X86
#define GC_AVX2_IF_NOT_NEGATIVE(h, a, b) _mm256_blendv_ps(b, a, _mm256_cmp_ps(h, _mm256_setzero_ps(), _CMP_GE_OQ))
GC_AVX2 static inline void gc_gates_forward_avx2(GC_GATES_FORWARD_ARGS) { GC_GATES_FORWARD_BODY(AVX2, __m256, 8) }
GC_AVX2 static inline void gc_gates_backward_avx2(GC_GATES_BACKWARD_ARGS) { GC_GATES_BACKWARD_BODY(AVX2, __m256, 8) }

#define GC_AVX512_IF_NOT_NEGATIVE(h, a, b) \
    _mm512_mask_blend_ps(_mm512_cmp_ps_mask(h, _mm512_setzero_ps(), _CMP_GE_OQ), b, a)
GC_AVX512 static inline void gc_gates_forward_avx512(GC_GATES_FORWARD_ARGS) {
    GC_GATES_FORWARD_BODY(AVX512, __m512, 16)
}
GC_AVX512 static inline void gc_gates_backward_avx512(GC_GATES_BACKWARD_ARGS) {
    GC_GATES_BACKWARD_BODY(AVX512, __m512, 16)
}
#endif

#endif
