#include "gc_select.h"

void gc_mask_logits(int n1, int n2, int cols, const float *logits, int64_t stride1, int64_t stride2,
                    const uint8_t *mask, float illegal, float *out) {
    for (int i = 0; i < n1; i++)
        for (int j = 0; j < n2; j++) {
            const float *row = logits + i * stride1 + j * stride2;
            int64_t base = ((int64_t)i * n2 + j) * cols;
            const uint8_t *m = mask + base;
            float *o = out + base;
            for (int c = 0; c < cols; c++) o[c] = gc_choose(m[c], row[c], illegal);
        }
}

void gc_mask_grad(int64_t n, const uint8_t *mask, const float *grad, float *out) {
    for (int64_t k = 0; k < n; k++) out[k] = gc_choose(mask[k], grad[k], 0.0f);
}

void gc_candidate(int64_t rows, int cols, const float *h, int64_t h_stride, const float *sigmoid_h,
                  int64_t sigmoid_stride, float *out) {
    for (int64_t r = 0; r < rows; r++) {
        const float *hr = h + r * h_stride, *sr = sigmoid_h + r * sigmoid_stride;
        float *o = out + r * cols;
        for (int c = 0; c < cols; c++) o[c] = gc_candidate_of(hr[c], sr[c]);
    }
}

void gc_candidate_grad(int64_t rows, int cols, const float *h, int64_t h_stride, const float *grad,
                       float *grad_h, float *grad_sigmoid) {
    for (int64_t r = 0; r < rows; r++) {
        const float *hr = h + r * h_stride, *g = grad + r * cols;
        float *gh = grad_h + r * cols, *gs = grad_sigmoid + r * cols;
        for (int c = 0; c < cols; c++) {
            int keep = hr[c] >= 0.0f;
            gh[c] = gc_choose(keep, g[c], 0.0f);
            gs[c] = gc_choose(keep, 0.0f, g[c]);
        }
    }
}
