/* The elementwise work of one MinGRU layer (model.md §1) over a time-major batch of segments, for
 * the training path's float32 tensors (gcpipe/train/sequence.py), forward and backward, in one
 * pass over memory where torch makes a dozen.  Each result is the same sequence of IEEE operations
 * as the torch expressions it replaces (and the gradients the ones autograd forms, summed in its
 * order), so the bits are torch's: `fused` says whether torch's addcmul, the recurrence's
 * s = b + a * s', rounds once (a fused multiply-add, as its vectorised CPU kernels do) or twice.
 * The sigmoids come from torch (its exp is not a fixed sequence of IEEE operations).
 *
 * Shapes, all contiguous: c and sig [T][B][3H] (the layer's projection h | k | p and its sigmoid),
 * x, s, x_out and their gradients [T][B][H], keep [T][B] (0 where the state resets before step
 * t, else 1), initial [B][H] (the state before step 0, already times keep[0]).  A call computes
 * the rows b in [first, end), so threads can share a batch. */
#ifndef GC_MINGRU_H
#define GC_MINGRU_H

/* s_t = a_t * s_{t-1} + b_t with a = (1 - z) * keep, b = z * g(h), z = sigmoid(k), then
 * x_out = x + sigmoid(p) * (s - x). */
void gc_mingru_forward(int T, int B, int H, int first, int end, int fused, const float *c, const float *sig,
                       const float *x, const float *keep, const float *initial, float *s, float *x_out);

/* From grad_out (x_out's gradient): grad_c, and grad_x = the gradient of x through the highway
 * alone (the caller's autograd adds the projection's).  carry [B][H] is scratch, left holding the
 * gradient of `initial`. */
void gc_mingru_backward(int T, int B, int H, int first, int end, const float *c, const float *sig,
                        const float *x, const float *keep, const float *initial, const float *s,
                        const float *grad_out, float *grad_c, float *grad_x, float *carry);

#endif
