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

#endif
