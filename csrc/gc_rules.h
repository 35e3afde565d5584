/* Guerrilla Checkers rules (rules.md §1-§5, §8): one flat state struct per game,
 * bitboards for stones (49 points) and coins (64 squares), no allocation, no globals. */
#ifndef GC_RULES_H
#define GC_RULES_H
#include <stdint.h>

#include "gc_math.h"
#include "gc_tables.h"

#define GC_OBS_SIZE 120
#define GC_NUM_ACTIONS 256
#define GC_PASS_ACTION 255
#define GC_STONE_SUPPLY 66
#define GC_NUM_POINTS 49
#define GC_NUM_SQUARES 64
/* No legal game is longer.  The Guerrilla acts at most 33 times (every action but a game-ending one
 * places two stones, and the 66th stone ends the game), so COIN has at most 32 turns.  A COIN turn
 * is one non-capturing step or c >= 1 capturing steps, so its plies are 32 - (turns with a capture)
 * + (stones captured).  If the Guerrilla's 33rd action comes, a stone is still on the board after
 * COIN's 32nd turn: at most 63 of the 64 stones placed were captured, in at least one turn:
 * 33 + 32 - 1 + 63.  If the game ends sooner: at most 32 + 32 - 1 + 64.  Either way 127.
 * (rules.md §4.4; the 132 its correction replaces counts 33 COIN turns and the first capture of a
 * turn twice.) */
#define GC_MAX_GAME_PLIES 127

/* Sides (also the observation's side-to-move byte and the winner field). */
enum { GC_NONE = 0, GC_GUERRILLA = 1, GC_COIN = 2 };

/* How a game ended. */
enum {
    GC_END_NONE = 0,
    GC_END_COINS_CLEARED = 1,    /* Guerrilla captured every coin */
    GC_END_STONES_EXHAUSTED = 2, /* the 66th stone was placed without clearing the board */
    GC_END_STONES_WIPED = 3,     /* stones were placed, none is left on the board */
    GC_END_STALEMATE = 4,        /* the side to move has no legal action and loses */
    GC_END_PLY_CAP = 5,          /* tournament cap (600 plies): COIN wins */
    GC_END_TIMEOUT = 6           /* environment tick limit: COIN wins */
};

typedef struct {
    uint64_t stones;        /* bit g: stone on point g */
    uint64_t coins;         /* bit c: coin on square c */
    uint32_t rng;           /* Park-Miller state, one per game (rules.md §8) */
    uint16_t plies;         /* legal actions applied since the start */
    uint8_t stones_placed;  /* stones ever placed, 0..66 */
    uint8_t to_move;        /* GC_GUERRILLA or GC_COIN; unchanged once the game is over */
    uint8_t must_capture;   /* COIN is in a capture chain */
    int8_t previous_cell;   /* the chaining coin's square, -1 when none */
    uint8_t winner;         /* GC_NONE while the game runs */
    uint8_t end_reason;     /* GC_END_* */
    /* The Guerrilla turn in progress as the reference keeps it (observation bytes 116-117): the
     * last point placed + 1 and the stones placed this turn.  Actions are whole turns, so both
     * are 0 between actions; only a Guerrilla action that ends the game leaves them set. */
    uint8_t turn_point;
    uint8_t turn_stones;
} gc_state;

/* Park-Miller "minimal standard" step of BSD rand_r: advances *state and returns the draw, 16807 s
 * mod (2^31 - 1) for the state s (123459876 for 0).  rand_r takes Schrage's route; folding the
 * product's bits above 31 onto the rest (2^31 = 1 modulo 2^31 - 1) gives the same value for every
 * 32-bit state (all checked) in fewer dependent steps.  Inline: an MCTS rollout draws once a ply. */
static inline uint32_t gc_rand(uint32_t *state) {
    uint64_t product = 16807 * (uint64_t)(*state ? *state : 123459876);
    uint64_t folded = (product & 0x7FFFFFFF) + (product >> 31);
    *state = (uint32_t)(folded >= 0x7FFFFFFF ? folded - 0x7FFFFFFF : folded);
    return *state;
}

/* gc_rand(state) % n for 1 <= n <= 256, by two multiplications (Lemire's "fastmod", exact for
 * 32-bit operands) where a division would sit on a rollout ply's critical path. */
static inline uint32_t gc_rand_below(uint32_t *state, uint32_t n) {
    uint64_t fraction = GC_FASTMOD[n] * gc_rand(state);
    return (uint32_t)(((unsigned __int128)fraction * n) >> 64);
}

/* The start position; `seed` becomes the generator state (no draw is made). */
void gc_reset(gc_state *s, uint32_t seed);

/* Writes the legal actions of the side to move in ascending order, returns their count
 * (0 once the game is over).  `out` holds at least 256 entries. */
int gc_legal_actions(const gc_state *s, int16_t *out);
int gc_is_legal(const gc_state *s, int action);
/* 256 bytes, 1 per legal action (written from gc_legal_boards, 8 bytes at a time). */
void gc_action_mask(const gc_state *s, uint8_t *mask);
/* 120 bytes (rules.md §5).  At a terminal state the last turn's bytes stay as the reference leaves
 * them: after a COIN capture that ends the game, the chain flag and previous square of the move
 * (bytes 114-115, those from before it); after a Guerrilla action that ends it, the last point
 * placed + 1 and the stones placed that turn (bytes 116-117). */
void gc_observation(const gc_state *s, uint8_t *obs);

/* Applies a legal action and returns the stones or coins it captured; returns -1 and leaves
 * the state untouched if the action is illegal or the game is over.  Runs every end-of-game
 * check of rules.md §4.1-§4.3. */
int gc_apply(gc_state *s, int action);

/* gc_apply for an action the caller knows is legal (a search's own moves): no check. */
int gc_apply_legal(gc_state *s, int action);

/* Ends the game by the caller's rule (ply cap, timeout): COIN wins with `reason`. */
void gc_declare_coin_win(gc_state *s, int reason);

/* Consistency of a state read from outside (0 = fine, else a GC_INVALID_* code). */
enum {
    GC_VALID = 0, GC_INVALID_BITS, GC_INVALID_COUNTS, GC_INVALID_SIDE,
    GC_INVALID_CHAIN, GC_INVALID_RESULT, GC_INVALID_TURN
};
int gc_validate(const gc_state *s);

static inline int gc_stones_on_board(const gc_state *s) { return __builtin_popcountll(s->stones); }
static inline int gc_coin_count(const gc_state *s) { return __builtin_popcountll(s->coins); }

/* Captures a legal action would make, without changing the board (the Greedy score). */
int gc_action_captures(const gc_state *s, int action);

/* Network move choice (rules.md §9): softmax over the legal logits only, sampled with the
 * game's generator (one draw); returns -1 when there is no legal action.  exp is gc_math.h's,
 * so the choice is the same on every machine (libm's expf may differ in the last bit). */
int gc_sample_action(gc_state *s, const float *logits);

/* The draw's two steps, shared with training's sampler (gc_policy.c).  gc_legal_weights: w[i] =
 * exp(logits[legal[i]] - top) for the count listed moves, top their largest logit (into *top),
 * and their sum in list order (returned).  gc_inverse_cdf: the first i whose running sum
 * w[0] + ... + w[i] reaches u (count - 1 if none does, as rounding could make). */
static inline float gc_legal_weights(const float *logits, const int16_t *legal, int count, float *w, float *top) {
    float largest = -INFINITY, total = 0.0f;
    for (int i = 0; i < count; i++)
        if (logits[legal[i]] > largest) largest = logits[legal[i]];
    for (int i = 0; i < count; i++) total += w[i] = gc_expf(logits[legal[i]] - largest);
    *top = largest;
    return total;
}

static inline int gc_inverse_cdf(const float *w, int count, float u) {
    float running = 0.0f;
    for (int i = 0; i < count; i++) {
        running += w[i];
        if (running >= u) return i;
    }
    return count - 1;
}

/* Batched helpers over an array of game states, for players that act on many games at once.
 * `idx` selects n games; inputs and outputs are row k for game idx[k]. */
void gc_batch_observe(const gc_state *states, const int32_t *idx, int n, uint8_t *obs, uint8_t *mask);
/* gc_sample_action in each selected game (one draw from its generator); writes the actions. */
void gc_batch_sample(gc_state *states, const int32_t *idx, int n, const float *logits, int32_t *actions);
/* Row k of out: the softmax of logits row k over its legal actions (mask row k nonzero), 0 on the
 * others; exp is gc_math.h's and each row's total is summed in double, actions in order, so the
 * result is the same on every machine.  A row without a legal action is all 0. */
void gc_legal_softmax(int n, const float *logits, const uint8_t *mask, float *out);
/* The mean over n rows of GC_NUM_ACTIONS probabilities of -sum p log max(p, 1e-12), in double,
 * rows and actions in order, log gc_math.h's: the same on every machine. */
double gc_mean_entropy(int n, const float *p);
/* Applies actions[k] in game idx[k] in order, stopping at the first that is not legal there;
 * returns n when all were applied, else that k (games from idx[k] on are unchanged). */
int gc_batch_apply(gc_state *states, const int32_t *idx, int n, const int32_t *actions);

/* ---- Bitboard geometry shared by the rules, the batch env and the MCTS rollouts (inline: hot paths). */
#define GC_POINTS_ALL ((1ULL << GC_NUM_POINTS) - 1)
/* Points in grid column 0 and column 6, for the left/right neighbour shifts. */
#define GC_POINTS_COL0 0x0040810204081ULL
#define GC_POINTS_COL6 (GC_POINTS_COL0 << 6)
#define GC_SQUARES_FILE_A 0x0101010101010101ULL /* x = 0 */
#define GC_SQUARES_FILE_H 0x8080808080808080ULL /* x = 7 */

/* Points orthogonally adjacent to any point of `b`. */
static inline uint64_t gc_neighbours(uint64_t b) {
    return (((b << 1) & ~GC_POINTS_COL0) | ((b >> 1) & ~GC_POINTS_COL6) | (b << 7) | (b >> 7)) & GC_POINTS_ALL;
}

static inline uint64_t gc_placeable_points(const gc_state *s) {
    if (s->stones_placed == 0) return GC_POINTS_ALL;
    return gc_neighbours(s->stones) & ~s->stones;
}

/* The steps of a coin on square src that would capture (rules.md §3): bit d set where step d stays on
 * the board, its destination holds no coin and the point it crosses a stone.  No branch per direction:
 * in a rollout whether a chain goes on is a coin toss for the branch predictor.  From (x, y) the steps
 * cross points (x-1, y-1), (x, y-1), (x-1, y), (x, y): bits 0, 1, 7, 8 from point 7y + x - 8, read after
 * shifting the stones up 8 to keep the amount non-negative; they land on squares src - 9, src - 7,
 * src + 7, src + 9: bits 0, 2, 16, 18 of the free squares rotated right by src - 9.  An off-board step
 * reads a wrapped point or square, masked off by GC_COIN_STEPS. */
static inline unsigned gc_coin_capture_steps(uint64_t stones, uint64_t coins, int src) {
    uint64_t crossed = (stones << 8) >> (7 * (src >> 3) + (src & 7));
    unsigned turn = (unsigned)(src - 9) & 63;
    uint64_t dst = ~coins >> turn | ~coins << ((64 - turn) & 63);
    uint64_t stone_bits = (crossed & 3) | (crossed >> 5 & 0xC);
    uint64_t free_bits = (dst & 1) | (dst >> 1 & 2) | (dst >> 14 & 4) | (dst >> 15 & 8);
    return (unsigned)(stone_bits & free_bits) & GC_COIN_STEPS[src];
}

/* The Guerrilla's placements, as direction bitboards (below): first point p, direction k. */
static inline void gc_guerrilla_boards(const gc_state *s, uint64_t legal[4]) {
    uint64_t empty = ~s->stones & GC_POINTS_ALL, firsts = gc_placeable_points(s);
    legal[0] = firsts & (empty >> 7);                    /* down: second = first + 7 */
    legal[1] = firsts & (empty >> 1) & ~GC_POINTS_COL6;  /* right: first + 1 */
    legal[2] = firsts & (empty << 1) & ~GC_POINTS_COL0;  /* left: first - 1 */
    legal[3] = firsts & (empty << 7);                    /* up: first - 7 */
}

/* The COIN's steps outside a capture chain, as direction bitboards: source square p, direction k. */
static inline void gc_coin_step_boards(uint64_t coins, uint64_t legal[4]) {
    uint64_t free = ~coins;
    legal[0] = coins & (free << 9) & ~GC_SQUARES_FILE_A;  /* up-left: dst = src - 9 */
    legal[1] = coins & (free << 7) & ~GC_SQUARES_FILE_H;  /* up-right: src - 7 */
    legal[2] = coins & (free >> 7) & ~GC_SQUARES_FILE_A;  /* down-left: src + 7 */
    legal[3] = coins & (free >> 9) & ~GC_SQUARES_FILE_H;  /* down-right: src + 9 */
}

/* The legal actions as direction bitboards: bit p of legal[k] is action 4p+k (Guerrilla: first
 * point p, direction k; COIN: source square p, direction k).  All zero once the game is over. */
static inline void gc_legal_boards(const gc_state *s, uint64_t legal[4]) {
    if (s->winner) {
        legal[0] = legal[1] = legal[2] = legal[3] = 0;
    } else if (s->to_move == GC_GUERRILLA) {
        gc_guerrilla_boards(s, legal);
    } else if (s->must_capture) {
        uint64_t steps = gc_coin_capture_steps(s->stones, s->coins, s->previous_cell);
        for (int d = 0; d < 4; d++) legal[d] = (steps >> d & 1) << s->previous_cell;
    } else {
        gc_coin_step_boards(s->coins, legal);
    }
}

/* The number of actions in four direction bitboards (gc_legal_boards' layout). */
static inline int gc_count_actions(const uint64_t legal[4]) {
    return __builtin_popcountll(legal[0]) + __builtin_popcountll(legal[1]) + __builtin_popcountll(legal[2]) +
           __builtin_popcountll(legal[3]);
}

/* The number of legal actions of the side to move. */
static inline int gc_legal_count(const gc_state *s) {
    uint64_t legal[4];
    gc_legal_boards(s, legal);
    return gc_count_actions(legal);
}

#endif
