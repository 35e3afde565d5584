#include "gc_policy.h"
#include "gc_math.h"
#include "gc_simd_math.h"
#include "gc_rules.h"
#include <float.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

/* A row's normaliser over its legal moves, listed in action order: their count, the w of each
 * and log Z. */
typedef struct {
    int16_t legal[GC_NUM_ACTIONS];
    float w[GC_NUM_ACTIONS];
    int count;
    float total, log_z;
} normaliser;

/* Inlined into each caller's GC_FMA_CLONES copies: called, it would be one default-target copy whose
 * gc_expf calls libm's fmaf. */
static inline __attribute__((always_inline)) void normalise(const float *row, const uint8_t *mask, normaliser *n) {
    int count = 0;
#ifdef __SSE2__
    /* 16 mask bytes a compare (SSE2 is part of x86-64): most rows have few legal moves, a waiting
     * slot's one, so most compares find none. */
    for (int base = 0; base < GC_NUM_ACTIONS; base += 16) {
        __m128i bytes = _mm_loadu_si128((const __m128i *)(mask + base));
        unsigned bits = ~(unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(bytes, _mm_setzero_si128())) & 0xFFFFu;
        for (; bits; bits &= bits - 1) n->legal[count++] = (int16_t)(base + __builtin_ctz(bits));
    }
#else
    for (int a = 0; a < GC_NUM_ACTIONS; a++) {     /* branch-free: most rows have few legal moves */
        n->legal[count] = (int16_t)a;
        count += mask[a] != 0;
    }
#endif
    float top, total = gc_legal_weights(row, n->legal, count, n->w, &top);
    n->count = count, n->total = total, n->log_z = top + gc_logf(total);
}

static double entropy_of(const float *row, const normaliser *n) {
    double entropy = 0.0;
    for (int i = 0; i < n->count; i++)
        entropy += (double)(n->w[i] / n->total) * (double)(n->log_z - row[n->legal[i]]);
    return entropy;
}

#define ROW_LOGITS(r) (logits + (int64_t)((r) / n2) * stride1 + (int64_t)((r) % n2) * stride2)
#define ROW_MASK(r) (masks + (int64_t)(r) * GC_NUM_ACTIONS)

GC_FMA_CLONES
void gc_policy_sample(int n1, int n2, const float *logits, int64_t stride1, int64_t stride2, const uint8_t *masks,
                      const float *uniforms, int first, int end, int64_t *actions, float *log_probs) {
    (void)n1;
    normaliser n;
    for (int r = first; r < end; r++) {
        const float *row = ROW_LOGITS(r);
        normalise(row, ROW_MASK(r), &n);
        float u = uniforms[r] * n.total;
        if (u < FLT_MIN) u = FLT_MIN;        /* u = 0 would take a first move however improbable */
        int chosen = n.count ? n.legal[gc_inverse_cdf(n.w, n.count, u)] : -1;
        actions[r] = chosen;                 /* (-1 for a row without a legal move) */
        log_probs[r] = chosen < 0 ? NAN : row[chosen] - n.log_z;
    }
}

GC_FMA_CLONES
void gc_policy_terms(int n1, int n2, const float *logits, int64_t stride1, int64_t stride2, const uint8_t *masks,
                     const int64_t *actions, int first, int end, float *log_probs, float *entropies) {
    (void)n1;
    normaliser n;
    for (int r = first; r < end; r++) {
        const float *row = ROW_LOGITS(r);
        normalise(row, ROW_MASK(r), &n);
        int64_t a = actions[r];
        log_probs[r] = a >= 0 && a < GC_NUM_ACTIONS ? row[a] - n.log_z : NAN;   /* (NaN: not a move) */
        entropies[r] = (float)entropy_of(row, &n);
    }
}

GC_FMA_CLONES
void gc_policy_terms_grad(int n1, int n2, const float *logits, int64_t stride1, int64_t stride2,
                          const uint8_t *masks, const int64_t *actions, const float *grad_log_probs,
                          const float *grad_entropies, int first, int end, float *grad_logits) {
    (void)n1;
    normaliser n;
    for (int r = first; r < end; r++) {
        const float *row = ROW_LOGITS(r);
        float *grad = grad_logits + (int64_t)r * GC_NUM_ACTIONS;
        normalise(row, ROW_MASK(r), &n);
        float entropy = (float)entropy_of(row, &n), g_lp = grad_log_probs[r], g_h = grad_entropies[r];
        memset(grad, 0, sizeof(float) * GC_NUM_ACTIONS);
        for (int i = 0; i < n.count; i++) {
            int a = n.legal[i];
            float p = n.w[i] / n.total;
            grad[a] = g_lp * ((a == actions[r] ? 1.0f : 0.0f) - p) + g_h * (p * (n.log_z - row[a] - entropy));
        }
    }
}
