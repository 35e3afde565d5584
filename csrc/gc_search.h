/* Network-guided tree search (the AlphaZero line; the batching of DeepMind's mctx) over many games
 * at once: each simulation step descends one path per game, evaluates every new leaf in one
 * gc_net_step call and backs the values up.  No allocation while searching: the workspace holds
 * one arena per concurrent game (nodes, edges and recurrent states), sized at creation.
 *
 * Tree.  A node is a position reached from the root by a path of actions; it stores the game
 * state, the MinGRU state after the net stepped on every observation along the path (a standard
 * 5c net steps on every ply, so that state is a function of the path: no transpositions), the
 * net's value of the position and, once expanded, one edge per legal action with the action's
 * logit and prior (softmax over the legal logits).  Statistics are kept in the child node: its
 * visits N and the sum W of the values backed up through it.
 *
 * Values.  Every value is the Guerrilla's: +1 a certain Guerrilla win, -1 a certain COIN win.  A
 * node's Q for the side choosing among its edges is W/N, negated when COIN chooses, so values
 * back up by mover, not by ply parity (a COIN capture chain is several moves by one side).  A
 * leaf's value mixes the net's value with greedy rollouts (lambda = rollout_weight):
 *   net value  v = squash(a * out[256] + b * out[255] + c * [Guerrilla to move] + d), squash being
 *              clamp to [-1, 1] (GC_VALUE_LINEAR) or tanh(x / 2) = 2 sigmoid(x) - 1 (GC_VALUE_LOGISTIC);
 *              out[256] is the value row and out[255] the pass logit, which gcpipe's side_value
 *              training makes the COIN's value (model.md §6);
 *   rollouts   the mean outcome of `rollouts` greedy playouts from the leaf (rules.md §7);
 *   leaf value (1 - lambda) v + lambda * rollouts.
 *
 * Selection.  GC_SEARCH_PUCT: argmax Q + c_puct P sqrt(max(1, sum N)) / (1 + N), an unvisited edge's
 * Q being the node's own net value (first-play value); the move played is the most visited root
 * edge.  GC_SEARCH_GUMBEL (Danihelka et al. 2022, as mctx): at the root, Gumbel noise g(a) drawn
 * from the game's generator, the top `considered` actions by g + logit visited by Sequential
 * Halving, the move played being argmax g + logit + sigma(completed Q) among the most visited;
 * below the root, argmax pi'(a) - N(a) / (1 + sum N) with the improved policy
 * pi' = softmax(logit + sigma(completed Q)).  Completed Q: the Q of visited edges, the mixed value
 * of mctx for the others, rescaled to [0, 1] over the node's edges; sigma(q) =
 * (c_visit + max N) * c_scale * q.
 *
 * Randomness.  Only the Gumbel noise (one draw per legal root action, ascending), the rollouts
 * and a PUCT move drawn at a temperature (one draw after the search) draw, all from the searched
 * game's own generator (rules.md §8), which advances by exactly those draws: a search is a pure
 * function of the game state, the net state and the settings, whatever other games share the
 * batch. */
#ifndef GC_SEARCH_H
#define GC_SEARCH_H
#include "gc_net.h"

enum { GC_SEARCH_PUCT = 0, GC_SEARCH_GUMBEL = 1 };
enum { GC_VALUE_LINEAR = 0, GC_VALUE_LOGISTIC = 1 };
#define GC_SEARCH_MAX_LEGAL 168          /* legal actions at the start: the most any position has */

typedef struct {
    int variant;                 /* GC_SEARCH_* */
    int simulations;             /* leaf evaluations per decision (the root's is extra) */
    float c_puct;                /* PUCT exploration */
    int considered;              /* Gumbel: root actions considered (m) */
    float c_visit, c_scale;      /* Gumbel: sigma(q) = (c_visit + max N) * c_scale * q */
    int value_squash;            /* GC_VALUE_* */
    float value_coef[4];         /* a, b, c, d of the net value (see above) */
    int rollouts;                /* greedy playouts per leaf */
    float rollout_weight;        /* lambda */
    float temperature;           /* PUCT's move: 0 the most visited root edge, T > 0 an edge drawn with
                                  * probability proportional to N^(1/T) (one draw); Gumbel: must be 0 */
} gc_search_config;

typedef struct gc_search gc_search;

/* What a decision reports besides its move. */
typedef struct {
    float root_value;            /* the net value of the root (Guerrilla's) */
    float search_value;          /* the root's W / N after the search (Guerrilla's) */
    int32_t visits_of_move;      /* visits of the root edge played */
    int32_t legal;               /* legal actions at the root */
    int32_t evaluations;         /* leaves the net evaluated (simulations that ended in a terminal
                                    position, or a root with one legal move, evaluate none) */
} gc_search_stats;

/* A workspace for searches of up to `max_games` games at once with a net of `layers` x `hidden`.
 * NULL for an invalid configuration or when memory runs out. */
gc_search *gc_search_new(const gc_search_config *config, int max_games, int layers, int hidden);
void gc_search_free(gc_search *search);
/* -1 if `config` is not usable (simulations < 1, considered < 1, unknown variant or squash,
 * negative or non-finite constants, rollout_weight outside [0, 1], rollouts > 0 needed), else 0. */
int gc_search_check_config(const gc_search_config *config);

/* Searches games[idx[k]] for k < n (n <= max_games, every game running) and writes the chosen
 * action to actions[k].  The root's net step advances the player's recurrent state of game k,
 * net_states + slots[k] * L * H, exactly as a network player's step would; the games' positions
 * are unchanged, their generators advance by the search's draws.  When not NULL, policy[k * 256 + a]
 * receives the improved policy (Gumbel: softmax(logit + sigma(completed Q)); PUCT: visit
 * fractions) over the legal actions (0 elsewhere) and stats[k] the decision's statistics.
 * Returns 0, or -1 if n exceeds the workspace or a game is over. */
int gc_search_run(gc_search *search, const gc_net *net, gc_state *games, const int32_t *idx, int n,
                  float *net_states, const int32_t *slots, int32_t *actions, float *policy, gc_search_stats *stats);

/* Introspection for tests and tools: node `index` (0 = root, in creation order) of the latest
 * tree of game k: its parent, the action leading to it, N, W, the leaf value it was given and,
 * when `state` is not NULL, its recurrent state (L * H floats).  -1 past the last node. */
int gc_search_node_info(const gc_search *search, int k, int index, int32_t *parent, int32_t *action, int32_t *visits,
                        double *value_sum, float *raw_value, float *state);

#endif
