/* Applying an action (rules.md §2-§4): gc_apply_legal's body, inline so that the MCTS rollouts' loop
 * inlines it.  Private to the C side (cffi does not read it): gc_rules.h's gc_apply and gc_apply_legal
 * are the API. */
#ifndef GC_APPLY_H
#define GC_APPLY_H
#include "gc_rules.h"

static inline void gc_finish(gc_state *s, int winner, int reason) {
    s->winner = (uint8_t)winner;
    s->end_reason = (uint8_t)reason;
}

/* Places one stone, removes the coins it surrounds and runs the checks of rules.md §4.1.
 * Returns the coins captured; the game may be over afterwards. */
static inline int gc_place_stone(gc_state *s, int point) {
    s->stones |= 1ULL << point;
    s->stones_placed++;
    int captured = 0;
    /* Only squares touching the new stone can become surrounded: a coin move never leaves
     * its coin surrounded (the crossed point, a corner of the destination, is empty after it). */
    for (uint64_t sq = GC_POINT_SQUARES[point] & s->coins; sq; sq &= sq - 1) {
        int c = __builtin_ctzll(sq);
        if ((GC_SQUARE_CORNERS[c] & ~s->stones) == 0) {
            s->coins &= ~(1ULL << c);
            captured++;
        }
    }
    if (s->coins == 0) gc_finish(s, GC_GUERRILLA, GC_END_COINS_CLEARED);
    else if (s->stones_placed >= GC_STONE_SUPPLY) gc_finish(s, GC_COIN, GC_END_STONES_EXHAUSTED);
    else if (s->stones == 0) gc_finish(s, GC_COIN, GC_END_STONES_WIPED);
    return captured;
}

/* A Guerrilla action ended the game after `stones` placements, the last on `point`: the turn
 * never finished, so its bookkeeping stays visible (observation bytes 116-117). */
static inline int gc_end_guerrilla_turn(gc_state *s, int point, int stones, int captured) {
    s->turn_point = (uint8_t)(point + 1);
    s->turn_stones = (uint8_t)stones;
    return captured;
}

/* Whether the side to move has any legal action, by bitboards (no enumeration; the compiler folds
 * the union of the four boards into one mask). */
static inline int gc_side_has_legal_action(const gc_state *s) {
    uint64_t legal[4];
    if (s->to_move == GC_GUERRILLA)
        gc_guerrilla_boards(s, legal);
    else if (s->must_capture)
        return 1; /* a chain is only entered when a capture exists */
    else
        gc_coin_step_boards(s->coins, legal);
    return (legal[0] | legal[1] | legal[2] | legal[3]) != 0;
}

/* gc_apply_legal's body, inline for a hot loop of the caller's (the MCTS rollouts). */
static inline int gc_apply_legal_inline(gc_state *s, int action) {
    int captured;
    s->plies++;
    if (s->to_move == GC_GUERRILLA) {
        int first = action >> 2, second = GC_SECOND_POINT[first][action & 3];
        captured = gc_place_stone(s, first);
        if (s->winner) return gc_end_guerrilla_turn(s, first, 1, captured);
        captured += gc_place_stone(s, second);
        if (s->winner) return gc_end_guerrilla_turn(s, second, 2, captured);
        s->to_move = GC_COIN;
    } else {
        int src = action >> 2, d = action & 3;
        int dst = GC_COIN_DST[src][d], crossed = GC_COIN_CROSSED[src][d];
        s->coins = (s->coins & ~(1ULL << src)) | (1ULL << dst);
        captured = (int)(s->stones >> crossed & 1);
        s->stones &= ~(1ULL << crossed);
        if (captured && s->stones == 0) {  /* the chain flags stay as they were, as in the reference */
            gc_finish(s, GC_COIN, GC_END_STONES_WIPED);
            return captured;
        }
        if (captured && gc_coin_capture_steps(s->stones, s->coins, dst)) {
            s->must_capture = 1;
            s->previous_cell = (int8_t)dst;
        } else {
            s->must_capture = 0;
            s->previous_cell = -1;
            s->to_move = GC_GUERRILLA;
        }
    }
    if (!gc_side_has_legal_action(s))
        gc_finish(s, s->to_move == GC_GUERRILLA ? GC_COIN : GC_GUERRILLA, GC_END_STALEMATE);
    return captured;
}

#endif
