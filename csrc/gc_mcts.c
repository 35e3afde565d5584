#include "gc_mcts.h"
#include "gc_apply.h"
#include "gc_tables.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define ROLLOUT_PLY_CAP 4096

typedef struct {
    double wins;           /* playouts won by player_just_moved */
    double mean;           /* wins / visits, kept by the backup: a selection reads it for every child */
    int32_t visits;
    int32_t select_count;  /* the S of the UCT term: starts at 1, +1 per selection through it */
    int32_t parent, first_child, next_sibling; /* pool indices, -1 for none */
    int16_t move;
    int16_t child_count;
    int16_t legal_count;   /* legal actions of the node's state, -1 until first needed */
    uint8_t player_just_moved; /* GC_NONE at the root */
} mcts_node;

struct gc_mcts {
    int capacity;
    int portable;  /* gc_mcts_set_portable */
    mcts_node *nodes;
};

gc_mcts *gc_mcts_new(int max_nodes) {
    if (max_nodes < 1) return NULL;
    gc_mcts *ws = malloc(sizeof *ws);
    if (!ws) return NULL;
    ws->nodes = malloc((size_t)max_nodes * sizeof *ws->nodes);
    if (!ws->nodes) {
        free(ws);
        return NULL;
    }
    ws->capacity = max_nodes;
    ws->portable = 0;
    return ws;
}

void gc_mcts_free(gc_mcts *ws) {
    if (!ws) return;
    free(ws->nodes);
    free(ws);
}

int gc_mcts_capacity(const gc_mcts *ws) { return ws->capacity; }

void gc_mcts_set_portable(gc_mcts *ws, int portable) { ws->portable = portable != 0; }

/* ---- Rollout policies on bitboards.  They reproduce gc_bot_random / gc_bot_greedy (same
 * action, same single draw) without listing the ~150 Guerrilla actions per ply. ---- */

/* The rollout's helpers are inlined into each compiled copy of its loop (play_out_pdep, play_out_portable),
 * whose pick path is then a constant. */
#define ROLLOUT_INLINE static inline __attribute__((always_inline))

/* The index-th action in ascending order (index < the count) of an action set given as four
 * masks, bit `from` of masks[dir] standing for action from*4+dir.  A walk over the sources: a
 * variant that skips 64 actions at a time by popcount measured more instructions (callgrind,
 * greedy rollouts: 72 M against 53 M): the sets are small. */
static int nth_action_walk(const uint64_t masks[4], int index) {
    for (uint64_t from = masks[0] | masks[1] | masks[2] | masks[3];; from &= from - 1) {
        int f = __builtin_ctzll(from);
        int here = (int)((masks[0] >> f & 1) + (masks[1] >> f & 1) + (masks[2] >> f & 1) + (masks[3] >> f & 1));
        if (index < here) {
            for (int dir = 0;; dir++)
                if ((masks[dir] >> f & 1) && index-- == 0) return f * 4 + dir;
        }
        index -= here;
    }
}

#if defined(__x86_64__)
#include <immintrin.h>
/* The same by BMI2's pdep, without a branch per source: sources 16j..16j+15 interleaved into one
 * word (bit 4(from - 16j) + dir), then the index-th set bit of the word that holds it.  2.2 times
 * as fast as the walk on a Zen 4 over the positions of random games (9.4 against 20.6 ns). */
__attribute__((target("bmi2"))) static int nth_action_pdep(const uint64_t masks[4], int index) {
    for (int j = 0;; j++) {
        uint64_t word = _pdep_u64(masks[0] >> 16 * j, 0x1111111111111111ULL) |
                        _pdep_u64(masks[1] >> 16 * j, 0x2222222222222222ULL) |
                        _pdep_u64(masks[2] >> 16 * j, 0x4444444444444444ULL) |
                        _pdep_u64(masks[3] >> 16 * j, 0x8888888888888888ULL);
        int here = __builtin_popcountll(word);
        if (index < here) return 64 * j + __builtin_ctzll(_pdep_u64(1ULL << index, word));
        index -= here;
    }
}
#endif

/* Whether this CPU takes the pdep path: BMI2 and AVX2 (play_out_pdep is built for both), but not AMD's
 * Zen 1 and 2, whose pdep is microcoded. */
static int fast_pdep(void) {
#if defined(__x86_64__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("bmi2") && __builtin_cpu_supports("avx2") && !__builtin_cpu_is("znver1") &&
           !__builtin_cpu_is("znver2");
#else
    return 0;
#endif
}

ROLLOUT_INLINE int nth_action(const uint64_t masks[4], int index, int pdep) {
#if defined(__x86_64__)
    if (pdep) return nth_action_pdep(masks, index);
#endif
    (void)pdep;
    return nth_action_walk(masks, index);
}

int gc_rollout_pdep(void) { return fast_pdep(); }

int gc_nth_action(const uint64_t masks[4], int index, int pdep) {
    return nth_action(masks, index, pdep && fast_pdep());
}

/* legal[k] has bit `from` set when action from*4+k of the side to move is legal (rules.md §2);
 * returns their count. */
ROLLOUT_INLINE int legal_by_direction(const gc_state *s, uint64_t legal[4]) {
    gc_legal_boards(s, legal);
    return gc_count_actions(legal);
}

ROLLOUT_INLINE int guerrilla_random(gc_state *s, int pdep) {
    uint64_t legal[4];
    int n = legal_by_direction(s, legal);
    if (n == 0) return -1;
    return nth_action(legal, (int)gc_rand_below(&s->rng, (uint32_t)n), pdep);
}

/* The four direction boards of a Guerrilla action set (gc_legal_boards' layout), lane k board k: the
 * greedy pick's bit planes take one operation for all four.  GCC's vector extension: AVX2 registers
 * where the build targets them, two SSE2 halves by default. */
typedef uint64_t boards4 __attribute__((vector_size(32)));

/* Greedy: an action scores the coins it captures, a coin being captured when its missing corners
 * (at most two, else no single action takes it) are among the two points placed.  The scores are
 * counted on the four direction boards at once, in three bit planes (an action touches six
 * squares: three dark ones in play, any six in hand-built states), with no branch per action;
 * the top score's actions, ascending, are gc_bot_greedy's best list. */
ROLLOUT_INLINE int guerrilla_greedy(gc_state *s, int pdep) {
    uint64_t legal[4];
    int n = legal_by_direction(s, legal);
    if (n == 0) return -1;
    /* Built from the four words, not loaded from where they were just stored: a wide load from
     * narrower stores stalls (no store forwarding; perf put 5 % of the loop on it). */
    boards4 legal4 = {legal[0], legal[1], legal[2], legal[3]}, ones = {0, 0, 0, 0}, twos = ones, fours = ones;
    for (uint64_t coins = s->coins; coins; coins &= coins - 1) {
        uint64_t miss = GC_SQUARE_CORNERS[__builtin_ctzll(coins)] & ~s->stones, rest = miss & (miss - 1);
        /* No action takes a coin missing three or more corners, nor one already surrounded
         * (hand-built states only): every corner has a stone, so no action places one there. */
        if (!miss || (rest & (rest - 1))) continue;
        /* The actions placing both missing corners (the one twice when one is missing). */
        int first = __builtin_ctzll(miss), second = rest ? __builtin_ctzll(rest) : first;
        boards4 captures = *(const boards4 *)GC_POINT_ACTIONS[first] & *(const boards4 *)GC_POINT_ACTIONS[second] &
                           legal4;
        boards4 carry = ones & captures;
        ones ^= captures;
        fours |= twos & carry;
        twos ^= carry;
    }
    /* The top score's actions: plane by plane from the highest, those with the bit if any has it
     * (all n legal actions where none captures). */
    boards4 best = legal4, planes[3] = {fours, twos, ones};
    int scored = 0;
    for (int i = 0; i < 3; i++) {
        boards4 with = best & planes[i];
        if (with[0] | with[1] | with[2] | with[3]) {
            best = with;
            scored = 1;
        }
    }
    uint64_t choices[4];
    memcpy(choices, &best, sizeof choices);
    int count = scored ? gc_count_actions(choices) : n;
    return nth_action(choices, (int)gc_rand_below(&s->rng, (uint32_t)count), pdep);
}

/* The stones on the squares' grid: point (x, y) (bit 7y + x) to bit 8y + x, the square whose
 * down-right corner it is.  A step from square (x, y) crosses point (x-1, y-1), (x, y-1), (x-1, y)
 * or (x, y) in directions 0-3, so with this board shifted by 9, 8, 1 or 0 bits, bit `src` says
 * whether the step from src crosses a stone (the legal boards hold only on-board steps). */
static uint64_t stones_by_square_shifts(uint64_t stones) {
    uint64_t squares = 0;
    for (int y = 0; y < 7; y++) squares |= (stones >> 7 * y & 0x7F) << 8 * y;
    return squares;
}

#if defined(__x86_64__)
__attribute__((target("bmi2"))) static uint64_t stones_by_square_pdep(uint64_t stones) {
    return _pdep_u64(stones, 0x007F7F7F7F7F7F7FULL);
}

/* nth_action for COIN's actions, whose sources are among `coins` (at most six): each coin's four
 * direction bits side by side, coins in ascending order, make one word of at most 24 bits, whose
 * index-th set bit names the coin and the direction; no branch. */
__attribute__((target("bmi2"))) static int nth_coin_action_pdep(const uint64_t masks[4], uint64_t coins, int index) {
    uint64_t word = _pdep_u64(_pext_u64(masks[0], coins), 0x1111111111111111ULL) |
                    _pdep_u64(_pext_u64(masks[1], coins), 0x2222222222222222ULL) |
                    _pdep_u64(_pext_u64(masks[2], coins), 0x4444444444444444ULL) |
                    _pdep_u64(_pext_u64(masks[3], coins), 0x8888888888888888ULL);
    int bit = __builtin_ctzll(_pdep_u64(1ULL << index, word));
    return __builtin_ctzll(_pdep_u64(1ULL << (bit >> 2), coins)) * 4 + (bit & 3);
}
#endif

ROLLOUT_INLINE uint64_t stones_by_square(uint64_t stones, int pdep) {
#if defined(__x86_64__)
    if (pdep) return stones_by_square_pdep(stones);
#endif
    (void)pdep;
    return stones_by_square_shifts(stones);
}

ROLLOUT_INLINE int nth_coin_action(const uint64_t masks[4], uint64_t coins, int index, int pdep) {
#if defined(__x86_64__)
    if (pdep) return nth_coin_action_pdep(masks, coins, index);
#endif
    (void)coins;
    return nth_action(masks, index, pdep);
}

/* COIN: the same action and draw as gc_bot_random / gc_bot_greedy (greedy: a capturing step if
 * any), on the direction boards. */
ROLLOUT_INLINE int coin_pick(gc_state *s, int rollout, int pdep) {
    uint64_t legal[4], captures[4];
    const uint64_t *choices = legal;
    int n = legal_by_direction(s, legal);
    if (n == 0) return -1;
    if (rollout == GC_ROLLOUT_GREEDY) {
        uint64_t stones = stones_by_square(s->stones, pdep);
        captures[0] = legal[0] & stones << 9;
        captures[1] = legal[1] & stones << 8;
        captures[2] = legal[2] & stones << 1;
        captures[3] = legal[3] & stones;
        int count = gc_count_actions(captures);
        if (count) {
            choices = captures;
            n = count;
        }
    }
    return nth_coin_action(choices, s->coins, (int)gc_rand_below(&s->rng, (uint32_t)n), pdep);
}

ROLLOUT_INLINE int rollout_pick(gc_state *s, int rollout, int pdep) {
    if (s->winner) return -1;
    if (s->to_move == GC_COIN) return coin_pick(s, rollout, pdep);
    return rollout == GC_ROLLOUT_GREEDY ? guerrilla_greedy(s, pdep) : guerrilla_random(s, pdep);
}

int gc_rollout_pick(gc_state *s, int rollout, int pdep) { return rollout_pick(s, rollout, pdep && fast_pdep()); }

/* A rollout with every pick and apply inlined, compiled once per pick path below. */
ROLLOUT_INLINE int play_out_inline(gc_state *s, int rollout, int pdep) {
    for (int ply = 0; !s->winner; ply++) {
        if (ply >= ROLLOUT_PLY_CAP) {
            gc_declare_coin_win(s, GC_END_PLY_CAP);
            break;
        }
        int action = rollout_pick(s, rollout, pdep);
        if (action < 0) { /* only a hand-built state can lack moves without being over */
            gc_declare_coin_win(s, GC_END_STALEMATE);
            break;
        }
        gc_apply_legal_inline(s, action);
    }
    return s->winner;
}

#if defined(__x86_64__)
/* The pdep pick path, built for the CPUs that take it (fast_pdep: BMI2 and AVX2), so that its
 * pdep and pext helpers inline and the greedy pick's boards take one AVX2 operation. */
__attribute__((target("avx2,bmi2"))) static int play_out_pdep(gc_state *s, int rollout) {
    return play_out_inline(s, rollout, 1);
}
#endif

static int play_out_portable(gc_state *s, int rollout) { return play_out_inline(s, rollout, 0); }

/* gc_rollout with the pick chosen by the caller (a search decides it once, not per playout). */
static int play_out(gc_state *s, int rollout, int pdep) {
#if defined(__x86_64__)
    if (pdep) return play_out_pdep(s, rollout);
#endif
    (void)pdep;
    return play_out_portable(s, rollout);
}

int gc_rollout(gc_state *s, int rollout, int pdep) { return play_out(s, rollout, pdep && fast_pdep()); }

static int node_legal_count(mcts_node *node, const gc_state *s) {
    if (node->legal_count < 0) node->legal_count = (int16_t)gc_legal_count(s);
    return node->legal_count;
}

static void init_node(mcts_node *node, int parent, int move, int player_just_moved) {
    node->wins = node->mean = 0.0;
    node->visits = 0;
    node->select_count = 1;
    node->parent = parent;
    node->first_child = -1;
    node->next_sibling = -1;
    node->move = (int16_t)move;
    node->child_count = 0;
    node->legal_count = -1;
    node->player_just_moved = (uint8_t)player_just_moved;
}

/* The child maximising wins/visits + c*sqrt(ln(S)/visits), S the parent's select_count;
 * strict > keeps the first of equal children in list order. */
static int select_child_scalar(mcts_node *nodes, mcts_node *parent, double exploration) {
    double log_s = log((double)parent->select_count);
    int best = -1;
    double best_value = -INFINITY;
    for (int i = parent->first_child; i >= 0; i = nodes[i].next_sibling) {
        const mcts_node *child = &nodes[i];
        double value = child->mean + exploration * sqrt(log_s / child->visits);
        if (value > best_value) {
            best_value = value;
            best = i;
        }
    }
    parent->select_count++;
    return best;
}

#if defined(__x86_64__)
/* The same values four children at a time: a division and a root per child, each correctly
 * rounded in a vector lane as alone, were most of a wide node's selection (the Guerrilla's ~170
 * children at the opening). */
__attribute__((target("avx"))) static int select_child_avx(mcts_node *nodes, mcts_node *parent,
                                                            double exploration) {
    __m256d log_s = _mm256_set1_pd(log((double)parent->select_count)), c = _mm256_set1_pd(exploration);
    int best = -1;
    double best_value = -INFINITY;
    for (int i = parent->first_child; i >= 0;) {
        /* Lanes past the last child: index -1, the first child's values (computed, never chosen). */
        int index[4] = {-1, -1, -1, -1};
        for (int k = 0; k < 4 && i >= 0; k++, i = nodes[i].next_sibling) index[k] = i;
        const mcts_node *n0 = &nodes[index[0]], *n1 = index[1] < 0 ? n0 : &nodes[index[1]],
                        *n2 = index[2] < 0 ? n0 : &nodes[index[2]], *n3 = index[3] < 0 ? n0 : &nodes[index[3]];
        __m256d mean = _mm256_set_pd(n3->mean, n2->mean, n1->mean, n0->mean);
        __m256d visits = _mm256_set_pd(n3->visits, n2->visits, n1->visits, n0->visits);
        double value[4];
        _mm256_storeu_pd(value, _mm256_add_pd(mean, _mm256_mul_pd(c, _mm256_sqrt_pd(_mm256_div_pd(log_s, visits)))));
        for (int j = 0; j < 4 && index[j] >= 0; j++)
            if (value[j] > best_value) {
                best_value = value[j];
                best = index[j];
            }
    }
    parent->select_count++;
    return best;
}
#endif

static int has_avx(void) {
#if defined(__x86_64__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx");
#else
    return 0;
#endif
}

static int select_child(mcts_node *nodes, mcts_node *parent, double exploration, int avx) {
#if defined(__x86_64__)
    if (avx) return select_child_avx(nodes, parent, exploration);
#endif
    (void)avx;
    return select_child_scalar(nodes, parent, exploration);
}

/* Draws one untried action (legal, ascending, minus the children's moves) and adds its child. */
static int expand(mcts_node *nodes, int *used, int parent, gc_state *s, int pdep) {
    uint64_t untried[4];
    gc_legal_boards(s, untried);
    for (int i = nodes[parent].first_child; i >= 0; i = nodes[i].next_sibling)
        untried[nodes[i].move & 3] &= ~(1ULL << (nodes[i].move >> 2));
    int action = nth_action(untried, (int)gc_rand_below(&s->rng, (uint32_t)gc_count_actions(untried)), pdep);
    int mover = s->to_move;
    gc_apply_legal(s, action);
    int child = (*used)++;
    init_node(&nodes[child], parent, action, mover);
    nodes[child].next_sibling = nodes[parent].first_child;
    nodes[parent].first_child = child;
    nodes[parent].child_count++;
    return child;
}

int gc_mcts_choose(gc_state *s, int iterations, double exploration, int rollout, gc_mcts *ws) {
    if (iterations < 1 || iterations >= ws->capacity || (rollout != GC_ROLLOUT_RANDOM && rollout != GC_ROLLOUT_GREEDY))
        return GC_MCTS_BAD_CONFIG;
    int16_t legal[GC_NUM_ACTIONS];
    int n = gc_legal_actions(s, legal);
    if (n <= 1) return n == 1 ? legal[0] : 0;

    /* The reference keeps c as a float: with c = (double)0.7f the published MCTS 2K vs MCTS 2K
     * cell is 30-70 exactly (with the double 0.7, game 9 turns and it is 31-69). */
    exploration = (float)exploration;
    mcts_node *nodes = ws->nodes;
    int used = 1;
    init_node(&nodes[0], -1, -1, GC_NONE);
    nodes[0].legal_count = (int16_t)n;
    /* The search's draws continue the live game's sequence (rules.md §7-§8). */
    uint32_t rng = s->rng;
    int pdep = !ws->portable && fast_pdep(), avx = !ws->portable && has_avx();
    for (int it = 0; it < iterations; it++) {
        gc_state sim = *s;
        sim.rng = rng;
        int node = 0;
        while (!sim.winner && nodes[node].child_count == node_legal_count(&nodes[node], &sim)) {
            node = select_child(nodes, &nodes[node], exploration, avx);
            gc_apply_legal(&sim, nodes[node].move);
        }
        if (!sim.winner) node = expand(nodes, &used, node, &sim, pdep);
        int winner = play_out(&sim, rollout, pdep);
        for (; node >= 0; node = nodes[node].parent) {
            nodes[node].visits++;
            if (nodes[node].player_just_moved == winner) nodes[node].wins += 1.0;
            nodes[node].mean = nodes[node].wins / nodes[node].visits;
        }
        rng = sim.rng;
    }
    s->rng = rng;

    int best = -1, best_visits = -1;
    for (int i = nodes[0].first_child; i >= 0; i = nodes[i].next_sibling)
        if (nodes[i].visits > best_visits) {
            best_visits = nodes[i].visits;
            best = nodes[i].move;
        }
    return best;
}
