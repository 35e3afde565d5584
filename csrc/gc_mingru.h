/* The elementwise work of one MinGRU layer (model.md §1) over a time-major batch of segments, for
 * the training path's float32 tensors (gcpipe/train/sequence.py), forward and backward, in one
 * pass over memory where torch makes a dozen.  The forward is the play-time step's arithmetic
 * (gc_gates.h, with gc_math.h's sigmoid), so with the fixed-order products (gc_gemm.h) the update
 * recomputes the rollout's outputs to the bit; the backward is its exact derivative, rounded as
 * gc_gates.h writes it.  `simd` is a GC_NET_SIMD_* path the CPU runs; every path gives the same bits.
 *
 * Shapes, all contiguous: c [T][B][3H] (the layer's projection h | k | p), x, s, x_out and their
 * gradients [T][B][H], keep [T][B] (0 where the state resets before step t, else 1), initial
 * [B][H] (the state before step 0).  A call computes the rows b in [first, end), so threads can
 * share a batch. */
#ifndef GC_MINGRU_H
#define GC_MINGRU_H

/* s (the states) and x_out = the layer's outputs. */
void gc_mingru_forward(int simd, int T, int B, int H, int first, int end, const float *c, const float *x,
                       const float *keep, const float *initial, float *s, float *x_out);

/* From grad_out (x_out's gradient): grad_c, and grad_x = the gradient of x through the highway
 * alone (the caller's autograd adds the projection's).  carry [B][H] is scratch, left holding the
 * gradient of `initial`. */
void gc_mingru_backward(int simd, int T, int B, int H, int first, int end, const float *c, const float *x,
                        const float *keep, const float *initial, const float *s, const float *grad_out,
                        float *grad_c, float *grad_x, float *carry);

#endif
