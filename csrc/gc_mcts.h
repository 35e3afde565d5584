/* UCT search bot (rules.md §7): one tree per decision, drawing from the game's own generator,
 * so a search is a pure function of the state (rng included) and the settings. */
#ifndef GC_MCTS_H
#define GC_MCTS_H
#include "gc_bots.h"

/* Search results below 0 (no legal action returns 0, as the reference does). */
enum {
    GC_MCTS_BAD_CONFIG = -2 /* iterations < 1, unknown rollout, or more nodes than the workspace holds */
};

/* A reusable node pool: a search of N iterations needs N + 1 nodes.  Allocation happens here
 * only, never while searching.  Returns NULL when out of memory or max_nodes < 1. */
gc_mcts *gc_mcts_new(int max_nodes);
void gc_mcts_free(gc_mcts *ws);
int gc_mcts_capacity(const gc_mcts *ws);

/* Makes the workspace's searches take the portable code (the rollouts' walk picks, the scalar
 * selection) even on a CPU that runs the fast paths (pdep picks, AVX selection), for tests to
 * compare the two on one machine: the same results.  A new workspace takes the fast paths. */
void gc_mcts_set_portable(gc_mcts *ws, int portable);

/* Runs the search for the side to move and returns the chosen action.  The state is not
 * changed except for its generator, which advances by exactly the search's draws.
 * `rollout` is GC_ROLLOUT_RANDOM or GC_ROLLOUT_GREEDY. */
int gc_mcts_choose(gc_state *s, int iterations, double exploration, int rollout, gc_mcts *ws);

/* The rollout policy's pick for the side to move: the same action and the same draw as
 * gc_bot_random / gc_bot_greedy, computed from bitboards (by BMI2's pdep and pext where `pdep`
 * is nonzero and gc_rollout_pdep(), as the search does).  -1 when no legal action. */
int gc_rollout_pick(gc_state *s, int rollout, int pdep);

/* Plays the state to its end with the rollout policy (4096-ply safety cap, then COIN wins)
 * and returns the winner; the picks as gc_rollout_pick's with the same `pdep`. */
int gc_rollout(gc_state *s, int rollout, int pdep);

/* The rollouts' pick of the index-th action (ascending; index < the count) of a set given as four
 * direction masks (gc_legal_boards' layout): by BMI2's pdep where gc_rollout_pdep() (the CPU has BMI2
 * and AVX2 and runs pdep fast) and `pdep` is set, else by a walk over the sources.  The same action
 * either way. */
int gc_rollout_pdep(void);
int gc_nth_action(const uint64_t masks[4], int index, int pdep);

#endif
