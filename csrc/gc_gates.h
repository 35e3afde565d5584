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

/* The bodies, over vectors of W lanes: each path defines VEC and the V_* operations. */
#define GC_GATES_FORWARD_BODY                                                                    \
    VEC keep_v = V_SET1(keep);                                                                   \
    for (int j = 0; j < H; j += W) {                                                             \
        VEC h = V_LOAD(c + j), z = V_SIGMOID(V_LOAD(c + H + j)), sp = V_SIGMOID(V_LOAD(c + 2 * H + j)); \
        VEC g = V_IF_NOT_NEGATIVE(h, V_ADD(h, V_SET1(0.5f)), V_SIGMOID(h));                     \
        VEC prev = V_MUL(V_LOAD(previous + j), keep_v);                                          \
        VEC st = V_FMA(z, V_SUB(g, prev), prev);                                                 \
        VEC xv = V_LOAD(x + j);                                                                  \
        V_STORE(s + j, st);                                                                      \
        V_STORE(x_out + j, V_FMA(sp, V_SUB(st, xv), xv));                                        \
    }

#define GC_GATES_BACKWARD_BODY                                                                   \
    VEC keep_v = V_SET1(keep), one = V_SET1(1.0f);                                               \
    for (int j = 0; j < H; j += W) {                                                             \
        VEC h = V_LOAD(c + j), z = V_SIGMOID(V_LOAD(c + H + j)), sp = V_SIGMOID(V_LOAD(c + 2 * H + j)); \
        VEC sh = V_SIGMOID(h), g = V_IF_NOT_NEGATIVE(h, V_ADD(h, V_SET1(0.5f)), sh);            \
        VEC prev = V_MUL(V_LOAD(previous + j), keep_v);                                          \
        VEC ge = V_LOAD(grad_out + j), d = V_SUB(V_LOAD(s + j), V_LOAD(x + j));                 \
        VEC g_p = V_MUL(ge, d), g_d = V_MUL(ge, sp);                   /* x_out = sp d + x */    \
        V_STORE(grad_x + j, V_SUB(ge, g_d));                                                     \
        VEC g_s = V_ADD(g_d, V_LOAD(carry + j));                       /* s = z (g - prev) + prev */ \
        VEC g_z = V_MUL(g_s, V_SUB(g, prev)), g_g = V_MUL(g_s, z);                               \
        V_STORE(carry + j, V_MUL(V_MUL(g_s, V_SUB(one, z)), keep_v));                            \
        V_STORE(grad_c + H + j, V_MUL(g_z, V_MUL(z, V_SUB(one, z))));                            \
        V_STORE(grad_c + 2 * H + j, V_MUL(g_p, V_MUL(sp, V_SUB(one, sp))));                      \
        V_STORE(grad_c + j, V_IF_NOT_NEGATIVE(h, g_g, V_MUL(g_g, V_MUL(sh, V_SUB(one, sh)))));   \
    }

#define GC_GATES_FORWARD_ARGS int H, const float *c, const float *previous, float keep, const float *x, \
                              float *s, float *x_out
#define GC_GATES_BACKWARD_ARGS int H, const float *c, const float *previous, float keep, const float *x, \
                               const float *s, const float *grad_out, float *grad_c, float *grad_x, float *carry

/* ---- scalar ---- */
#define VEC float
#define W 1
#define V_LOAD(p) (*(p))
#define V_STORE(p, v) (*(p) = (v))
#define V_SET1(v) (v)
#define V_ADD(a, b) ((a) + (b))
#define V_SUB(a, b) ((a) - (b))
#define V_MUL(a, b) ((a) * (b))
#define V_FMA(a, b, c) fmaf(a, b, c)
#define V_SIGMOID(v) gc_sigmoidf(v)
#define V_IF_NOT_NEGATIVE(h, a, b) gc_choose((h) >= 0.0f, a, b)
static inline void gc_gates_forward_scalar(GC_GATES_FORWARD_ARGS) { GC_GATES_FORWARD_BODY }
static inline void gc_gates_backward_scalar(GC_GATES_BACKWARD_ARGS) { GC_GATES_BACKWARD_BODY }
#undef VEC
#undef W
#undef V_LOAD
#undef V_STORE
#undef V_SET1
#undef V_ADD
#undef V_SUB
#undef V_MUL
#undef V_FMA
#undef V_SIGMOID
#undef V_IF_NOT_NEGATIVE

#ifdef GC_SIMD_X86
/* ---- AVX2 + FMA ---- */
#define VEC __m256
#define W 8
#define V_LOAD(p) _mm256_loadu_ps(p)
#define V_STORE(p, v) _mm256_storeu_ps(p, v)
#define V_SET1(v) _mm256_set1_ps(v)
#define V_ADD(a, b) _mm256_add_ps(a, b)
#define V_SUB(a, b) _mm256_sub_ps(a, b)
#define V_MUL(a, b) _mm256_mul_ps(a, b)
#define V_FMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define V_SIGMOID(v) gc_sigmoid8(v)
#define V_IF_NOT_NEGATIVE(h, a, b) _mm256_blendv_ps(b, a, _mm256_cmp_ps(h, _mm256_setzero_ps(), _CMP_GE_OQ))
GC_AVX2 static inline void gc_gates_forward_avx2(GC_GATES_FORWARD_ARGS) { GC_GATES_FORWARD_BODY }
GC_AVX2 static inline void gc_gates_backward_avx2(GC_GATES_BACKWARD_ARGS) { GC_GATES_BACKWARD_BODY }
#undef VEC
#undef W
#undef V_LOAD
#undef V_STORE
#undef V_SET1
#undef V_ADD
#undef V_SUB
#undef V_MUL
#undef V_FMA
#undef V_SIGMOID
#undef V_IF_NOT_NEGATIVE

/* ---- AVX-512 ---- */
#define VEC __m512
#define W 16
#define V_LOAD(p) _mm512_loadu_ps(p)
#define V_STORE(p, v) _mm512_storeu_ps(p, v)
#define V_SET1(v) _mm512_set1_ps(v)
#define V_ADD(a, b) _mm512_add_ps(a, b)
#define V_SUB(a, b) _mm512_sub_ps(a, b)
#define V_MUL(a, b) _mm512_mul_ps(a, b)
#define V_FMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define V_SIGMOID(v) gc_sigmoid16(v)
#define V_IF_NOT_NEGATIVE(h, a, b) _mm512_mask_blend_ps(_mm512_cmp_ps_mask(h, _mm512_setzero_ps(), _CMP_GE_OQ), b, a)
GC_AVX512 static inline void gc_gates_forward_avx512(GC_GATES_FORWARD_ARGS) { GC_GATES_FORWARD_BODY }
GC_AVX512 static inline void gc_gates_backward_avx512(GC_GATES_BACKWARD_ARGS) { GC_GATES_BACKWARD_BODY }
#undef VEC
#undef W
#undef V_LOAD
#undef V_STORE
#undef V_SET1
#undef V_ADD
#undef V_SUB
#undef V_MUL
#undef V_FMA
#undef V_SIGMOID
#undef V_IF_NOT_NEGATIVE
#endif

#undef GC_GATES_FORWARD_BODY
#undef GC_GATES_BACKWARD_BODY
#undef GC_GATES_FORWARD_ARGS
#undef GC_GATES_BACKWARD_ARGS
#endif
