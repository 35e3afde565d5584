/* MinGRU policy inference for play (model.md §1) over a checkpoint's float32 weights, for a batch
 * of game slots, in a fixed summation order: every output element is its bias followed by one
 * fused multiply-add per input, in input order, whatever the batch, the CPU or the code path
 * (AVX-512, AVX2+FMA or scalar fmaf; vector lanes run over outputs, never over a sum).  So a
 * game's outputs are bit-identical whichever other games share the call and on every machine
 * with IEEE float32 and a correctly rounded fmaf (any x86-64 or arm64 C library).  The only
 * elementary function, exp, is gc_math.h's.  Compile without FP contraction (-ffp-contract=off).
 *
 * Weights are caller-owned, laid out input-major (the transpose of a torch Linear's weight), so
 * a row of the matrix is the contribution of one input to every output. */
#ifndef GC_NET_H
#define GC_NET_H
#include <stdint.h>

#include "gc_rules.h"

#define GC_NET_MAX_HIDDEN 512
#define GC_NET_MAX_LAYERS 4
#define GC_NET_OUTPUTS (GC_NUM_ACTIONS + 1)   /* 256 action logits, then the value */
#define GC_NET_DECODER_STRIDE 272             /* GC_NET_OUTPUTS rounded up to whole 16-float vectors */

/* Code paths; all give the same bits.  GC_NET_SIMD_BEST picks the widest the CPU has. */
enum { GC_NET_SIMD_BEST = -1, GC_NET_SIMD_SCALAR = 0, GC_NET_SIMD_AVX2 = 1, GC_NET_SIMD_AVX512 = 2 };

typedef struct {
    int hidden;                          /* H: a multiple of 16, at most GC_NET_MAX_HIDDEN */
    int layers;                          /* L: 1..GC_NET_MAX_LAYERS */
    int simd;                            /* GC_NET_SIMD_*; gc_net_prepare resolves BEST */
    const float *encoder;                /* [GC_OBS_SIZE][H] */
    const float *encoder_bias;           /* [H] (zeros for bias-free layouts) */
    const float *gru[GC_NET_MAX_LAYERS]; /* [H][3H]: columns h | k | p (model.md §1) */
    const float *decoder;                /* [H][GC_NET_DECODER_STRIDE], columns past 256 zero */
    const float *decoder_bias;           /* [GC_NET_DECODER_STRIDE] */
} gc_net;

/* Checks the shape, resolves GC_NET_SIMD_BEST and refuses a path the CPU lacks.  Returns 0, or
 * -1 for an unsupported shape or code path. */
int gc_net_prepare(gc_net *net);

/* The code path GC_NET_SIMD_BEST stands for on this CPU. */
int gc_net_best_simd(void);

/* One step for n rows: row k reads the 120 observation bytes obs[k] and the recurrent state
 * states + slots[k] * L * H ([L][H] floats), advances that state in place and, when `out` is not
 * NULL, writes its GC_NET_OUTPUTS outputs to out + k * GC_NET_OUTPUTS.  Slots must be distinct.
 * want_logits (NULL: every row) flags the rows that need their action logits: a row with a zero
 * flag (a waiting slot, whose only legal action is the pass) gets only the outputs read as values
 * (the pass logit, the COIN's value under gcpipe's side_value convention, and the value), its
 * other logits written as 0; it skips most of the decoder's work.  Rows are independent: a row's
 * results do not depend on n, on the other rows or on its flag. */
void gc_net_step(const gc_net *net, int n, const int32_t *slots, const uint8_t *obs, float *states,
                 const uint8_t *want_logits, float *out);

#endif
