/* Element selections for the training path's float32 tensors (gcpipe/nn/select.py): the illegal
 * logits' mask (model.md §3), the MinGRU candidate g(h) (model.md §1) and their gradients.  They
 * only choose between their inputs (g's one sum, h + 0.5, is the same IEEE operation as torch's),
 * so the results are torch.where's bits; they exist because torch's CPU `where` runs a scalar loop,
 * several times slower than these.  Rows are `cols` contiguous floats; a row of a strided input
 * starts at row * stride, or for the logits at i * stride1 + j * stride2 (a transposed view).
 * gc_choose is also the MinGRU gates' (gc_gates.h). */
#ifndef GC_SELECT_H
#define GC_SELECT_H
#include <stdint.h>
#include <string.h>

/* a where keep is set, else b, by bit masks: no branch (the conditions are random signs and
 * masks, which a branch mispredicts half the time) and vectorised by the compiler. */
static inline float gc_choose(int keep, float a, float b) {
    uint32_t ua, ub, m = -(uint32_t)(keep != 0);
    memcpy(&ua, &a, 4);
    memcpy(&ub, &b, 4);
    uint32_t u = (ua & m) | (ub & ~m);
    float out;
    memcpy(&out, &u, 4);
    return out;
}

/* g(h) of model.md §1 from h and torch's sigmoid of h: h + 0.5 for h >= 0, else sigmoid(h). */
static inline float gc_candidate_of(float h, float sigmoid_h) {
    return gc_choose(h >= 0.0f, h + 0.5f, sigmoid_h);
}

/* out[i][j][c] = mask[i][j][c] ? logits row (i, j)[c] : illegal; mask and out are contiguous
 * [n1][n2][cols]. */
void gc_mask_logits(int n1, int n2, int cols, const float *logits, int64_t stride1, int64_t stride2,
                    const uint8_t *mask, float illegal, float *out);

/* out[k] = mask[k] ? grad[k] : 0 for k < n: the gradient of gc_mask_logits' input. */
void gc_mask_grad(int64_t n, const uint8_t *mask, const float *grad, float *out);

/* out[r][c] = h >= 0 ? h + 0.5 : sigmoid_h (g(h) of model.md §1, from torch's sigmoid of h), h and
 * sigmoid_h rows of strides h_stride and sigmoid_stride, out contiguous [rows][cols]. */
void gc_candidate(int64_t rows, int cols, const float *h, int64_t h_stride, const float *sigmoid_h,
                  int64_t sigmoid_stride, float *out);

/* The gradients of gc_candidate's two inputs from the output's (contiguous): grad_h = grad where
 * h >= 0, else 0; grad_sigmoid the other way round (contiguous [rows][cols]). */
void gc_candidate_grad(int64_t rows, int cols, const float *h, int64_t h_stride, const float *grad,
                       float *grad_h, float *grad_sigmoid);

#endif
