/* Built-in bots (rules.md §7): they list legal actions in ascending order and draw from the
 * game's own generator, so a game between bots is a pure function of its seed. */
#ifndef GC_BOTS_H
#define GC_BOTS_H
#include "gc_rules.h"

enum { GC_BOT_RANDOM = 0, GC_BOT_GREEDY = 1, GC_BOT_MCTS = 2 };
enum { GC_ROLLOUT_RANDOM = 0, GC_ROLLOUT_GREEDY = 1 };

typedef struct {
    int kind;            /* GC_BOT_* */
    int iterations;      /* MCTS only */
    double exploration;  /* MCTS only: UCT constant c */
    int rollout;         /* MCTS only: GC_ROLLOUT_* */
} gc_bot;

/* Each returns the chosen action, or -1 when the side to move has no legal action. */
int gc_bot_random(gc_state *s);
int gc_bot_greedy(gc_state *s);

/* The MCTS node pool (gc_mcts.h); bots of other kinds need none. */
typedef struct gc_mcts gc_mcts;

#define GC_TOURNAMENT_PLY_CAP 600

/* Any bot's choice for the side to move: -1 when the game is over or the side has no legal
 * action, GC_MCTS_BAD_CONFIG (-2) for an unusable MCTS configuration or workspace. */
int gc_bot_choose(gc_state *s, const gc_bot *bot, gc_mcts *ws);

/* gc_bot_choose in each game idx[k], writing actions[k] (the positions are unchanged; the
 * generators advance by the bot's draws).  Returns 0, or the first negative gc_bot_choose result
 * (actions written up to that game). */
int gc_batch_bot_choose(gc_state *states, const int32_t *idx, int n, const gc_bot *bot, gc_mcts *ws, int32_t *actions);

/* Plays from the current state to the end, each side choosing with its bot; after `ply_cap`
 * plies COIN is declared the winner (GC_END_PLY_CAP).  Returns the winner, or a negative
 * gc_bot_choose error with the state left where it stopped. */
int gc_play_bot_game(gc_state *s, const gc_bot *guerrilla, const gc_bot *coin, gc_mcts *ws, int ply_cap);

/* Plays `n` games, game i from the start position with generator state seeds[i], and writes
 * each game's winner, plies and end reason.  Returns 0, or the first negative error. */
int gc_play_bot_games(int n, const uint32_t *seeds, const gc_bot *guerrilla, const gc_bot *coin,
                      gc_mcts *ws, int ply_cap, uint8_t *winners, uint16_t *plies, uint8_t *end_reasons);

#endif
