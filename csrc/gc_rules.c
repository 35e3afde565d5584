#include "gc_rules.h"
#include "gc_apply.h"
#include "gc_math.h"
#include "gc_simd_math.h"
#include <string.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "gc_observation and gc_action_mask write byte rows through little-endian words"
#endif

/* Squares (3,2) (2,3) (4,3) (3,4) (5,4) (4,5), all of odd x+y: indices 19, 26, 28, 35, 37, 44
 * (rules.md §1; its correction says why not 45, which would be (5,5), of even parity: with 44 the
 * published Random/Greedy cells come out exactly). */
#define START_COINS ((1ULL << 19) | (1ULL << 26) | (1ULL << 28) | (1ULL << 35) | (1ULL << 37) | (1ULL << 44))

void gc_reset(gc_state *s, uint32_t seed) {
    memset(s, 0, sizeof *s);
    s->coins = START_COINS;
    s->rng = seed;
    s->to_move = GC_GUERRILLA;
    s->previous_cell = -1;
}

int gc_is_legal(const gc_state *s, int action) {
    if (action < 0 || action >= GC_NUM_ACTIONS) return 0;
    uint64_t legal[4];
    gc_legal_boards(s, legal);
    return (int)(legal[action & 3] >> (action >> 2) & 1);
}

int gc_legal_actions(const gc_state *s, int16_t *out) {
    uint64_t legal[4];
    gc_legal_boards(s, legal);
    int n = 0;
    for (uint64_t from = legal[0] | legal[1] | legal[2] | legal[3]; from; from &= from - 1) {
        int p = __builtin_ctzll(from);
        for (int k = 0; k < 4; k++)
            if (legal[k] >> p & 1) out[n++] = (int16_t)(p * 4 + k);
    }
    return n;
}

/* Bits 0..7 of `bits` as eight bytes 0/1 (byte i = bit i): replicate the byte, keep bit i in
 * byte i, then turn every nonzero byte into 1 (adding 0x7F never carries out of a byte here). */
static inline uint64_t gc_bits_to_bytes8(uint64_t bits) {
    uint64_t t = ((bits & 0xFF) * 0x0101010101010101ULL) & 0x8040201008040201ULL;
    return ((t + 0x7F7F7F7F7F7F7F7FULL) >> 7) & 0x0101010101010101ULL;
}

/* Spreads the 16 bits of x to every fourth bit (bit i -> bit 4i). */
static inline uint64_t spread_stride4(uint64_t x) {
    x &= 0xFFFF;
    x = (x | x << 24) & 0x000000FF000000FFULL;
    x = (x | x << 12) & 0x000F000F000F000FULL;
    x = (x | x << 6) & 0x0303030303030303ULL;
    x = (x | x << 3) & 0x1111111111111111ULL;
    return x;
}

/* Writes mask bytes 4p..4p+3 for positions p < 16 * blocks: byte 4p+k = bit p of legal[k].
 * Interleaving the four boards gives the mask as a bit string (bit 4p+k), written 8 bytes at a time. */
static inline void write_mask_rows(const uint64_t legal[4], int blocks, uint8_t *mask) {
    for (int j = 0; j < blocks; j++) {
        uint64_t bits = spread_stride4(legal[0] >> 16 * j) | spread_stride4(legal[1] >> 16 * j) << 1 |
                        spread_stride4(legal[2] >> 16 * j) << 2 | spread_stride4(legal[3] >> 16 * j) << 3;
        for (int b = 0; b < 8; b++) {
            uint64_t w = gc_bits_to_bytes8(bits >> 8 * b);
            memcpy(mask + 64 * j + 8 * b, &w, 8);
        }
    }
}

void gc_action_mask(const gc_state *s, uint8_t *mask) {
    uint64_t legal[4];
    gc_legal_boards(s, legal);
    write_mask_rows(legal, 4, mask); /* Guerrilla boards are zero beyond point 48 */
}

/* The 120 bytes of rules.md §5, written with word stores (the batch env writes one per env step).  Stones fill
 * bytes 0..55 (bits 49..55 are zero), then coins overwrite bytes 49..112. */
void gc_observation(const gc_state *s, uint8_t *obs) {
    for (int i = 0; i < 7; i++) {
        uint64_t w = gc_bits_to_bytes8(s->stones >> (8 * i));
        memcpy(obs + 8 * i, &w, 8);
    }
    for (int i = 0; i < 8; i++) {
        uint64_t w = gc_bits_to_bytes8(s->coins >> (8 * i));
        memcpy(obs + 49 + 8 * i, &w, 8);
    }
    obs[113] = s->to_move;
    obs[114] = s->must_capture;
    obs[115] = (uint8_t)(s->previous_cell + 1);
    obs[116] = s->turn_point;
    obs[117] = s->turn_stones;
    obs[118] = s->stones_placed;
    obs[119] = (uint8_t)gc_stones_on_board(s);
}

int gc_apply(gc_state *s, int action) {
    return gc_is_legal(s, action) ? gc_apply_legal(s, action) : -1;
}

int gc_apply_legal(gc_state *s, int action) { return gc_apply_legal_inline(s, action); }

void gc_declare_coin_win(gc_state *s, int reason) {
    if (!s->winner) gc_finish(s, GC_COIN, reason);
}

int gc_action_captures(const gc_state *s, int action) {
    if (s->to_move == GC_GUERRILLA) {
        int first = action >> 2, second = GC_SECOND_POINT[first][action & 3];
        uint64_t stones = s->stones | (1ULL << first) | (1ULL << second);
        int n = 0;
        for (uint64_t sq = (GC_POINT_SQUARES[first] | GC_POINT_SQUARES[second]) & s->coins; sq; sq &= sq - 1)
            n += (GC_SQUARE_CORNERS[__builtin_ctzll(sq)] & ~stones) == 0;
        return n;
    }
    return (int)(s->stones >> GC_COIN_CROSSED[action >> 2][action & 3] & 1);
}

int gc_validate(const gc_state *s) {
    if (s->stones & ~GC_POINTS_ALL) return GC_INVALID_BITS;
    int on_board = gc_stones_on_board(s), coins = gc_coin_count(s);
    if (coins > 6 || s->stones_placed > GC_STONE_SUPPLY || on_board > s->stones_placed)
        return GC_INVALID_COUNTS;
    if (s->to_move != GC_GUERRILLA && s->to_move != GC_COIN) return GC_INVALID_SIDE;
    if (s->must_capture) {
        /* A capture that ends the game leaves the chain square it started from, now empty. */
        if (s->to_move != GC_COIN || s->previous_cell < 0 || s->previous_cell >= GC_NUM_SQUARES ||
            !(s->coins >> s->previous_cell & 1 || s->winner))
            return GC_INVALID_CHAIN;
    } else if (s->previous_cell != -1) {
        return GC_INVALID_CHAIN;
    }
    if (s->winner > GC_COIN || s->end_reason > GC_END_TIMEOUT || (s->winner == 0) != (s->end_reason == 0))
        return GC_INVALID_RESULT;
    if (s->turn_stones > 2 || (s->turn_stones == 0) != (s->turn_point == 0) || s->turn_point > GC_NUM_POINTS ||
        (s->turn_stones && (!s->winner || s->to_move != GC_GUERRILLA || !(s->stones >> (s->turn_point - 1) & 1))))
        return GC_INVALID_TURN;
    return GC_VALID;
}

GC_FMA_CLONES
void gc_legal_softmax(int n, const float *logits, const uint8_t *mask, float *out) {
    for (int k = 0; k < n; k++) {
        const float *row = logits + (size_t)k * GC_NUM_ACTIONS;
        const uint8_t *legal = mask + (size_t)k * GC_NUM_ACTIONS;
        float *p = out + (size_t)k * GC_NUM_ACTIONS, top = -INFINITY;
        for (int a = 0; a < GC_NUM_ACTIONS; a++)
            if (legal[a] && row[a] > top) top = row[a];
        double total = 0.0;
        for (int a = 0; a < GC_NUM_ACTIONS; a++) total += p[a] = legal[a] ? gc_expf(row[a] - top) : 0.0f;
        for (int a = 0; a < GC_NUM_ACTIONS; a++) p[a] = total > 0.0 ? (float)(p[a] / total) : 0.0f;
    }
}

GC_FMA_CLONES
double gc_mean_entropy(int n, const float *p) {
    double total = 0.0;
    for (int64_t i = 0; i < (int64_t)n * GC_NUM_ACTIONS; i++)
        total -= (double)p[i] * gc_logf(p[i] > 1e-12f ? p[i] : 1e-12f);
    return n ? total / n : NAN;
}

GC_FMA_CLONES
int gc_sample_action(gc_state *s, const float *logits) {
    int16_t legal[GC_NUM_ACTIONS];
    float w[GC_NUM_ACTIONS], top;
    int n = gc_legal_actions(s, legal);
    if (n == 0) return -1;
    float total = gc_legal_weights(logits, legal, n, w, &top);
    return legal[gc_inverse_cdf(w, n, (float)gc_rand(&s->rng) / 2147483648.0f * total)];
}

void gc_batch_observe(const gc_state *states, const int32_t *idx, int n, uint8_t *obs, uint8_t *mask) {
    for (int k = 0; k < n; k++) {
        gc_observation(&states[idx[k]], obs + (size_t)k * GC_OBS_SIZE);
        gc_action_mask(&states[idx[k]], mask + (size_t)k * GC_NUM_ACTIONS);
    }
}

void gc_batch_sample(gc_state *states, const int32_t *idx, int n, const float *logits, int32_t *actions) {
    for (int k = 0; k < n; k++) actions[k] = gc_sample_action(&states[idx[k]], logits + (size_t)k * GC_NUM_ACTIONS);
}

int gc_batch_apply(gc_state *states, const int32_t *idx, int n, const int32_t *actions) {
    for (int k = 0; k < n; k++)
        if (gc_apply(&states[idx[k]], actions[k]) < 0) return k;
    return n;
}
