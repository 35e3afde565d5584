#include "gc_net.h"
#include "gc_math.h"
#include "gc_gates.h"
#include "gc_simd_math.h"
#include <string.h>

#ifdef GC_SIMD_X86
#define GC_NET_X86 1
#define AVX2 GC_AVX2
#define AVX512 GC_AVX512
#endif

/* Rows per block: each weight loaded from memory serves this many rows.  A block's missing rows
 * (n not a multiple of ROWS) are computed on copies of the block's first row and discarded. */
#define ROWS 4
/* Rows that go through a layer together, block by block, before the next layer: the layer's
 * weights are read from L2 by every block but the first.  One block at a time through all the
 * layers reads the whole network per block, which (H = 128: about 0.6 MB) overflows a 512 KB L2. */
#define CHUNK (8 * ROWS)
#define MAX_H GC_NET_MAX_HIDDEN

typedef struct {
    float x[CHUNK][MAX_H];                      /* a layer's input, then its output */
    float c[ROWS][3 * MAX_H];                   /* W x: the h | k | p blocks */
    float out[ROWS][GC_NET_DECODER_STRIDE];
    float spare_state[MAX_H];                   /* the state of rows that are padding */
    float decode_x[ROWS][MAX_H];                /* rows waiting for a full decoder block */
    int decode_row[ROWS];                       /* ... and their indices in the call */
    int decode_count;
    float value_x[ROWS][MAX_H];                 /* rows waiting for a block of value outputs */
    int value_row[ROWS];
    int value_count;
} scratch;

/* The kernels of a step, one set per code path.  dense: y[r][j] = bias[j] (or 0) followed by
 * y += w[i][j] * x[r][i] for i = 0..in-1, fused, for r < ROWS and j < cols.  encode: the same
 * for one row over the nonzero observation bytes only (a zero input adds w * 0, which changes no
 * sum but -0; every path skips the same inputs).  gates: the MinGRU update (gc_gates.h).
 * pair: dense's sums for ROWS rows and two adjacent columns (the value outputs of rows that need
 * no logits), 2 * ROWS independent sums, where one row's column at a time would wait on each
 * multiply-add's latency. */
typedef struct {
    void (*dense)(const float *w, int in, int cols, const float *bias, const float (*x)[MAX_H], float *y, int ldy);
    void (*encode)(const gc_net *net, const uint8_t *obs, float *x);
    void (*gates)(int H, const float *c, const float *previous, float keep, const float *x, float *s, float *x_out);
    void (*pair)(const float *w, int in, int cols, const float *bias, const float (*x)[MAX_H], float (*y)[2]);
} kernels;

/* The pair kernel's body, the same on every path (fmaf: a call into libm on the scalar path, an
 * instruction on the others). */
#define PAIR_BODY                                                                \
    float acc[ROWS][2];                                                          \
    for (int r = 0; r < ROWS; r++) acc[r][0] = bias[0], acc[r][1] = bias[1];     \
    for (int i = 0; i < in; i++) {                                               \
        const float *wi = w + (size_t)i * cols;                                  \
        for (int r = 0; r < ROWS; r++) {                                         \
            acc[r][0] = fmaf(wi[0], x[r][i], acc[r][0]);                         \
            acc[r][1] = fmaf(wi[1], x[r][i], acc[r][1]);                         \
        }                                                                        \
    }                                                                            \
    for (int r = 0; r < ROWS; r++) y[r][0] = acc[r][0], y[r][1] = acc[r][1];

/* ---- scalar path ---- */

static void dense_scalar(const float *w, int in, int cols, const float *bias, const float (*x)[MAX_H], float *y,
                         int ldy) {
    for (int r = 0; r < ROWS; r++)
        for (int j = 0; j < cols; j++) {
            float acc = bias ? bias[j] : 0.0f;
            for (int i = 0; i < in; i++) acc = fmaf(w[(size_t)i * cols + j], x[r][i], acc);
            y[(size_t)r * ldy + j] = acc;
        }
}

static void encode_scalar(const gc_net *net, const uint8_t *obs, float *x) {
    int H = net->hidden;
    memcpy(x, net->encoder_bias, sizeof(float) * H);
    for (int i = 0; i < GC_OBS_SIZE; i++) {
        if (!obs[i]) continue;
        const float *w = net->encoder + (size_t)i * H, v = obs[i];
        for (int j = 0; j < H; j++) x[j] = fmaf(w[j], v, x[j]);
    }
}

static void pair_scalar(const float *w, int in, int cols, const float *bias, const float (*x)[MAX_H], float (*y)[2]) {
    PAIR_BODY
}

static const kernels scalar_kernels = {dense_scalar, encode_scalar, gc_gates_forward_scalar, pair_scalar};

#ifdef GC_NET_X86
/* ---- AVX2 + FMA path: 8 outputs per vector, the scalar path's operations lane by lane ---- */

/* Three vectors (24 outputs) by ROWS rows per pass: 12 accumulators, 3 weight vectors and a
 * broadcast fill the 16 registers. */
AVX2 static void dense_avx2(const float *w, int in, int cols, const float *bias, const float (*x)[MAX_H], float *y,
                            int ldy) {
    int j = 0;
    for (; j + 24 <= cols; j += 24) {
        __m256 acc[ROWS][3];
        for (int v = 0; v < 3; v++) {
            __m256 start = bias ? _mm256_loadu_ps(bias + j + 8 * v) : _mm256_setzero_ps();
            for (int r = 0; r < ROWS; r++) acc[r][v] = start;
        }
        for (int i = 0; i < in; i++) {
            const float *wi = w + (size_t)i * cols + j;
            __m256 w0 = _mm256_loadu_ps(wi), w1 = _mm256_loadu_ps(wi + 8), w2 = _mm256_loadu_ps(wi + 16);
            for (int r = 0; r < ROWS; r++) {
                __m256 xv = _mm256_broadcast_ss(&x[r][i]);
                acc[r][0] = _mm256_fmadd_ps(w0, xv, acc[r][0]);
                acc[r][1] = _mm256_fmadd_ps(w1, xv, acc[r][1]);
                acc[r][2] = _mm256_fmadd_ps(w2, xv, acc[r][2]);
            }
        }
        for (int r = 0; r < ROWS; r++)
            for (int v = 0; v < 3; v++) _mm256_storeu_ps(y + (size_t)r * ldy + j + 8 * v, acc[r][v]);
    }
    for (; j < cols; j += 8) {
        __m256 acc[ROWS];
        for (int r = 0; r < ROWS; r++) acc[r] = bias ? _mm256_loadu_ps(bias + j) : _mm256_setzero_ps();
        for (int i = 0; i < in; i++) {
            __m256 wv = _mm256_loadu_ps(w + (size_t)i * cols + j);
            for (int r = 0; r < ROWS; r++) acc[r] = _mm256_fmadd_ps(wv, _mm256_broadcast_ss(&x[r][i]), acc[r]);
        }
        for (int r = 0; r < ROWS; r++) _mm256_storeu_ps(y + (size_t)r * ldy + j, acc[r]);
    }
}

AVX2 static void encode_avx2(const gc_net *net, const uint8_t *obs, float *x) {
    int H = net->hidden, used[GC_OBS_SIZE], n = 0;
    for (int i = 0; i < GC_OBS_SIZE; i++)
        if (obs[i]) used[n++] = i;
    for (int j = 0; j < H; j += 64) {
        __m256 acc[8];
        for (int v = 0; v < 8 && j + 8 * v < H; v++) acc[v] = _mm256_loadu_ps(net->encoder_bias + j + 8 * v);
        for (int u = 0; u < n; u++) {
            const float *w = net->encoder + (size_t)used[u] * H + j;
            __m256 value = _mm256_set1_ps((float)obs[used[u]]);
            for (int v = 0; v < 8 && j + 8 * v < H; v++)
                acc[v] = _mm256_fmadd_ps(_mm256_loadu_ps(w + 8 * v), value, acc[v]);
        }
        for (int v = 0; v < 8 && j + 8 * v < H; v++) _mm256_storeu_ps(x + j + 8 * v, acc[v]);
    }
}

AVX2 static void pair_fma(const float *w, int in, int cols, const float *bias, const float (*x)[MAX_H],
                          float (*y)[2]) {
    PAIR_BODY
}

static const kernels avx2_kernels = {dense_avx2, encode_avx2, gc_gates_forward_avx2, pair_fma};

/* ---- AVX-512 path: 16 outputs per vector; 32 registers hold 3 vectors by ROWS rows ---- */

AVX512 static void dense_avx512(const float *w, int in, int cols, const float *bias, const float (*x)[MAX_H],
                                float *y, int ldy) {
    int j = 0;
    for (; j + 48 <= cols; j += 48) {
        __m512 acc[ROWS][3];
        for (int v = 0; v < 3; v++) {
            __m512 start = bias ? _mm512_loadu_ps(bias + j + 16 * v) : _mm512_setzero_ps();
            for (int r = 0; r < ROWS; r++) acc[r][v] = start;
        }
        for (int i = 0; i < in; i++) {
            const float *wi = w + (size_t)i * cols + j;
            __m512 w0 = _mm512_loadu_ps(wi), w1 = _mm512_loadu_ps(wi + 16), w2 = _mm512_loadu_ps(wi + 32);
            for (int r = 0; r < ROWS; r++) {
                __m512 xv = _mm512_set1_ps(x[r][i]);
                acc[r][0] = _mm512_fmadd_ps(w0, xv, acc[r][0]);
                acc[r][1] = _mm512_fmadd_ps(w1, xv, acc[r][1]);
                acc[r][2] = _mm512_fmadd_ps(w2, xv, acc[r][2]);
            }
        }
        for (int r = 0; r < ROWS; r++)
            for (int v = 0; v < 3; v++) _mm512_storeu_ps(y + (size_t)r * ldy + j + 16 * v, acc[r][v]);
    }
    for (; j < cols; j += 16) {
        __m512 acc[ROWS];
        for (int r = 0; r < ROWS; r++) acc[r] = bias ? _mm512_loadu_ps(bias + j) : _mm512_setzero_ps();
        for (int i = 0; i < in; i++) {
            __m512 wv = _mm512_loadu_ps(w + (size_t)i * cols + j);
            for (int r = 0; r < ROWS; r++) acc[r] = _mm512_fmadd_ps(wv, _mm512_set1_ps(x[r][i]), acc[r]);
        }
        for (int r = 0; r < ROWS; r++) _mm512_storeu_ps(y + (size_t)r * ldy + j, acc[r]);
    }
}

static const kernels avx512_kernels = {dense_avx512, encode_avx2, gc_gates_forward_avx512, pair_fma};
#endif

int gc_net_best_simd(void) {
#ifdef GC_NET_X86
    __builtin_cpu_init();
    int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    if (avx2 && __builtin_cpu_supports("avx512f")) return GC_NET_SIMD_AVX512;
    if (avx2) return GC_NET_SIMD_AVX2;
#endif
    return GC_NET_SIMD_SCALAR;
}

int gc_net_prepare(gc_net *net) {
    if (net->hidden < 16 || net->hidden > MAX_H || net->hidden % 16 || net->layers < 1 ||
        net->layers > GC_NET_MAX_LAYERS || !net->encoder || !net->encoder_bias || !net->decoder || !net->decoder_bias)
        return -1;
    for (int l = 0; l < net->layers; l++)
        if (!net->gru[l]) return -1;
    int best = gc_net_best_simd();
    if (net->simd == GC_NET_SIMD_BEST) net->simd = best;
    if (net->simd < GC_NET_SIMD_SCALAR || net->simd > best) return -1;
    return 0;
}

static const kernels *kernels_of(int simd) {
#ifdef GC_NET_X86
    if (simd == GC_NET_SIMD_AVX512) return &avx512_kernels;
    if (simd == GC_NET_SIMD_AVX2) return &avx2_kernels;
#endif
    (void)simd;
    return &scalar_kernels;
}

/* The decoder over the rows gathered in s->decode_x (padding rows copy row 0), into out. */
static void decode_block(const gc_net *net, const kernels *k, scratch *s, float *out) {
    for (int r = s->decode_count; r < ROWS; r++) memcpy(s->decode_x[r], s->decode_x[0], sizeof(float) * net->hidden);
    k->dense(net->decoder, net->hidden, GC_NET_DECODER_STRIDE, net->decoder_bias, (const float (*)[MAX_H])s->decode_x,
             &s->out[0][0], GC_NET_DECODER_STRIDE);
    for (int r = 0; r < s->decode_count; r++)
        memcpy(out + (size_t)s->decode_row[r] * GC_NET_OUTPUTS, s->out[r], sizeof(float) * GC_NET_OUTPUTS);
    s->decode_count = 0;
}

/* The pass logit and value of the rows gathered in s->value_x (padding rows copy row 0), their
 * other logits 0. */
static void value_block(const gc_net *net, const kernels *k, scratch *s, float *out) {
    for (int r = s->value_count; r < ROWS; r++) memcpy(s->value_x[r], s->value_x[0], sizeof(float) * net->hidden);
    float pairs[ROWS][2];
    k->pair(net->decoder + GC_PASS_ACTION, net->hidden, GC_NET_DECODER_STRIDE, net->decoder_bias + GC_PASS_ACTION,
            (const float (*)[MAX_H])s->value_x, pairs);
    for (int r = 0; r < s->value_count; r++) {
        float *y = out + (size_t)s->value_row[r] * GC_NET_OUTPUTS;
        memset(y, 0, sizeof(float) * GC_PASS_ACTION);
        y[GC_PASS_ACTION] = pairs[r][0], y[GC_PASS_ACTION + 1] = pairs[r][1];
    }
    s->value_count = 0;
}

void gc_net_step(const gc_net *net, int n, const int32_t *slots, const uint8_t *obs, float *states,
                 const uint8_t *want_logits, float *out) {
    const kernels *k = kernels_of(net->simd);
    int H = net->hidden;
    size_t state_size = (size_t)net->layers * H;
    scratch s;
    s.decode_count = s.value_count = 0;
    for (int first = 0; first < n; first += CHUNK) {
        int rows = n - first < CHUNK ? n - first : CHUNK;
        int padded = (rows + ROWS - 1) / ROWS * ROWS;
        for (int r = 0; r < rows; r++) k->encode(net, obs + (size_t)(first + r) * GC_OBS_SIZE, s.x[r]);
        for (int r = rows; r < padded; r++) memcpy(s.x[r], s.x[padded - ROWS], sizeof(float) * H);
        for (int l = 0; l < net->layers; l++)
            for (int b = 0; b < padded; b += ROWS) {
                k->dense(net->gru[l], H, 3 * H, NULL, (const float (*)[MAX_H])s.x[b], &s.c[0][0], 3 * MAX_H);
                for (int r = 0; r < ROWS; r++) {
                    float *state = b + r < rows ? states + (size_t)slots[first + b + r] * state_size + (size_t)l * H
                                                : s.spare_state;
                    if (b + r >= rows) memset(state, 0, sizeof(float) * H);
                    k->gates(H, s.c[r], state, 1.0f, s.x[b + r], state, s.x[b + r]);
                }
            }
        if (!out) continue;
        /* Rows that want logits go through the decoder in whole blocks; the others get their two
         * value outputs alone in blocks of their own, each the same sum as in a decoder block. */
        for (int r = 0; r < rows; r++) {
            int row = first + r;
            if (!want_logits || want_logits[row]) {
                memcpy(s.decode_x[s.decode_count], s.x[r], sizeof(float) * H);
                s.decode_row[s.decode_count++] = row;
                if (s.decode_count == ROWS) decode_block(net, k, &s, out);
                continue;
            }
            memcpy(s.value_x[s.value_count], s.x[r], sizeof(float) * H);
            s.value_row[s.value_count++] = row;
            if (s.value_count == ROWS) value_block(net, k, &s, out);
        }
    }
    if (out && s.decode_count) decode_block(net, k, &s, out);
    if (out && s.value_count) value_block(net, k, &s, out);
}
