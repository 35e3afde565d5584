#include "gc_bots.h"
#include "gc_mcts.h"

int gc_bot_random(gc_state *s) {
    int16_t legal[GC_NUM_ACTIONS];
    int n = gc_legal_actions(s, legal);
    if (n == 0) return -1;
    return legal[gc_rand_below(&s->rng, (uint32_t)n)];
}

int gc_bot_greedy(gc_state *s) {
    int16_t legal[GC_NUM_ACTIONS], best[GC_NUM_ACTIONS];
    int n = gc_legal_actions(s, legal), count = 0, top = -1;
    if (n == 0) return -1;
    for (int i = 0; i < n; i++) {
        int score = gc_action_captures(s, legal[i]);
        if (score > top) {
            top = score;
            count = 0;
        }
        if (score == top) best[count++] = legal[i];
    }
    return best[gc_rand_below(&s->rng, (uint32_t)count)];
}

int gc_bot_choose(gc_state *s, const gc_bot *bot, gc_mcts *ws) {
    int16_t legal[GC_NUM_ACTIONS];
    switch (bot->kind) {
    case GC_BOT_RANDOM: return gc_bot_random(s);
    case GC_BOT_GREEDY: return gc_bot_greedy(s);
    case GC_BOT_MCTS:
        if (!ws) return GC_MCTS_BAD_CONFIG;
        /* The search answers 0 for "no legal action" (as the reference does); bots answer -1. */
        if (gc_legal_actions(s, legal) == 0) return -1;
        return gc_mcts_choose(s, bot->iterations, bot->exploration, bot->rollout, ws);
    default: return GC_MCTS_BAD_CONFIG;
    }
}

int gc_batch_bot_choose(gc_state *states, const int32_t *idx, int n, const gc_bot *bot, gc_mcts *ws, int32_t *actions) {
    for (int k = 0; k < n; k++) {
        int action = gc_bot_choose(&states[idx[k]], bot, ws);
        if (action < 0) return action;
        actions[k] = action;
    }
    return 0;
}

int gc_play_bot_game(gc_state *s, const gc_bot *guerrilla, const gc_bot *coin, gc_mcts *ws, int ply_cap) {
    while (!s->winner) {
        if (s->plies >= ply_cap) {
            gc_declare_coin_win(s, GC_END_PLY_CAP);
            break;
        }
        int action = gc_bot_choose(s, s->to_move == GC_GUERRILLA ? guerrilla : coin, ws);
        if (action < 0) return action;
        gc_apply(s, action);
    }
    return s->winner;
}

int gc_play_bot_games(int n, const uint32_t *seeds, const gc_bot *guerrilla, const gc_bot *coin,
                      gc_mcts *ws, int ply_cap, uint8_t *winners, uint16_t *plies, uint8_t *end_reasons) {
    for (int i = 0; i < n; i++) {
        gc_state s;
        gc_reset(&s, seeds[i]);
        int winner = gc_play_bot_game(&s, guerrilla, coin, ws, ply_cap);
        if (winner < 0) return winner;
        winners[i] = s.winner;
        plies[i] = s.plies;
        end_reasons[i] = s.end_reason;
    }
    return 0;
}
