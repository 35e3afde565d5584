#include "gc_search.h"
#include "gc_math.h"
#include "gc_simd_math.h"
#include "gc_mcts.h"
#include <stdlib.h>
#include <string.h>

typedef struct {
    gc_state game;
    int32_t parent;         /* -1 at the root */
    int32_t first_edge;     /* -1 until expanded */
    int16_t num_edges;
    int16_t action;         /* the parent's edge that leads here (-1 at the root) */
    int32_t visits;         /* N: evaluations backed up through this node */
    double value_sum;       /* W, Guerrilla's values */
    float raw_value;        /* the leaf value given when the node was evaluated (Guerrilla's) */
} search_node;

typedef struct {
    float logit, prior;
    int32_t child;          /* -1 until the edge is first taken */
    int16_t action;
} search_edge;

/* One game's tree and search bookkeeping. */
typedef struct {
    search_node *nodes;
    search_edge *edges;
    int used_nodes, used_edges;
    uint32_t rng;           /* the game's generator while the search draws from it */
    int considered;         /* Gumbel: min(considered, legal root actions) */
    int done;               /* the decision needs no (more) simulations */
    int evaluations;        /* leaves sent to the net */
    float gumbel[GC_SEARCH_MAX_LEGAL];
} arena;

struct gc_search {
    gc_search_config config;
    int max_games, max_nodes, max_edges;
    size_t state_size;      /* L * H floats */
    arena *arenas;
    search_node *node_pool;
    search_edge *edge_pool;
    float *states;          /* [max_games][max_nodes][L][H] */
    int32_t *visit_table;   /* [considered + 1][simulations]: Sequential Halving's target visits */
    int32_t *eval_slots, *eval_game;
    uint8_t *eval_obs;
    float *eval_out;
};

static int finite_nonnegative(float x) { return x >= 0.0f && x <= 3.0e38f; }

int gc_search_check_config(const gc_search_config *c) {
    if (c->variant != GC_SEARCH_PUCT && c->variant != GC_SEARCH_GUMBEL) return -1;
    if (c->simulations < 1 || c->considered < 1 || c->rollouts < 0) return -1;
    if (c->value_squash != GC_VALUE_LINEAR && c->value_squash != GC_VALUE_LOGISTIC) return -1;
    if (!finite_nonnegative(c->c_puct) || !finite_nonnegative(c->c_visit) || !finite_nonnegative(c->c_scale)) return -1;
    for (int i = 0; i < 4; i++)
        if (!(c->value_coef[i] >= -3.0e38f && c->value_coef[i] <= 3.0e38f)) return -1;
    if (!(c->rollout_weight >= 0.0f && c->rollout_weight <= 1.0f)) return -1;
    if (!finite_nonnegative(c->temperature) || (c->variant == GC_SEARCH_GUMBEL && c->temperature > 0.0f)) return -1;
    if (c->rollout_weight > 0.0f && c->rollouts < 1) return -1;
    return 0;
}

/* mctx's get_sequence_of_considered_visits: the visit count that simulation s targets when k
 * actions are considered (k halves each phase; each phase spends about sims / log2(k) visits). */
static void fill_visit_table(int k, int sims, int32_t *out) {
    if (k <= 1) {
        for (int s = 0; s < sims; s++) out[s] = s;
        return;
    }
    int log2max = 0;
    while ((1 << log2max) < k) log2max++;
    int visits[GC_SEARCH_MAX_LEGAL] = {0};
    int num = k, len = 0;
    while (len < sims) {
        int extra = sims / (log2max * num);
        if (extra < 1) extra = 1;
        for (int e = 0; e < extra; e++) {
            for (int i = 0; i < num && len < sims; i++) out[len++] = visits[i];
            for (int i = 0; i < num; i++) visits[i]++;
        }
        num = num / 2 < 2 ? 2 : num / 2;
    }
}

gc_search *gc_search_new(const gc_search_config *config, int max_games, int layers, int hidden) {
    if (gc_search_check_config(config) || max_games < 1 || layers < 1 || hidden < 1) return NULL;
    gc_search *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->config = *config;
    if (s->config.considered > GC_SEARCH_MAX_LEGAL) s->config.considered = GC_SEARCH_MAX_LEGAL;
    s->max_games = max_games;
    s->max_nodes = config->simulations + 1;
    s->max_edges = s->max_nodes * GC_SEARCH_MAX_LEGAL;
    s->state_size = (size_t)layers * hidden;
    size_t games = (size_t)max_games, sims = (size_t)config->simulations;
    /* The edge pools are sized for the widest trees; pages never touched cost no memory. */
    s->arenas = calloc(games, sizeof *s->arenas);
    s->node_pool = malloc(games * s->max_nodes * sizeof *s->node_pool);
    s->edge_pool = malloc(games * s->max_edges * sizeof *s->edge_pool);
    s->states = malloc(games * s->max_nodes * s->state_size * sizeof *s->states);
    s->visit_table = malloc(((size_t)s->config.considered + 1) * sims * sizeof *s->visit_table);
    s->eval_slots = malloc(games * sizeof *s->eval_slots);
    s->eval_game = malloc(games * sizeof *s->eval_game);
    s->eval_obs = malloc(games * GC_OBS_SIZE);
    s->eval_out = malloc(games * GC_NET_OUTPUTS * sizeof *s->eval_out);
    if (!s->arenas || !s->node_pool || !s->edge_pool || !s->states || !s->visit_table || !s->eval_slots ||
        !s->eval_game || !s->eval_obs || !s->eval_out) {
        gc_search_free(s);
        return NULL;
    }
    for (size_t g = 0; g < games; g++) {
        s->arenas[g].nodes = s->node_pool + g * s->max_nodes;
        s->arenas[g].edges = s->edge_pool + g * s->max_edges;
    }
    for (int k = 0; k <= s->config.considered; k++) fill_visit_table(k, config->simulations, s->visit_table + k * sims);
    return s;
}

void gc_search_free(gc_search *s) {
    if (!s) return;
    free(s->arenas);
    free(s->node_pool);
    free(s->edge_pool);
    free(s->states);
    free(s->visit_table);
    free(s->eval_slots);
    free(s->eval_game);
    free(s->eval_obs);
    free(s->eval_out);
    free(s);
}

static float *node_state(gc_search *s, int game, int node) {
    return s->states + ((size_t)game * s->max_nodes + node) * s->state_size;
}

static float outcome(const gc_state *g) { return g->winner == GC_GUERRILLA ? 1.0f : -1.0f; }

static float mover_sign(const search_node *node) { return node->game.to_move == GC_GUERRILLA ? 1.0f : -1.0f; }

static void backup(arena *a, int node, float value) {
    for (; node >= 0; node = a->nodes[node].parent) {
        a->nodes[node].visits++;
        a->nodes[node].value_sum += value;
    }
}

/* The leaf value of an evaluated position (see gc_search.h), rollouts drawing from the arena's rng
 * (the root's value is the net's alone: a decision with one legal move then draws nothing). */
GC_FMA_CLONES
static float leaf_value(const gc_search_config *c, arena *a, const gc_state *game, const float *out, int rollouts) {
    float x = c->value_coef[0] * out[GC_NUM_ACTIONS] + c->value_coef[1] * out[GC_PASS_ACTION] +
              c->value_coef[2] * (game->to_move == GC_GUERRILLA ? 1.0f : 0.0f) + c->value_coef[3];
    float value;
    if (c->value_squash == GC_VALUE_LOGISTIC) {
        value = 2.0f * gc_sigmoidf(x) - 1.0f;
    } else {
        value = x < -1.0f ? -1.0f : x > 1.0f ? 1.0f : x;
    }
    if (rollouts && c->rollouts > 0 && c->rollout_weight > 0.0f) {
        float total = 0.0f;
        for (int i = 0; i < c->rollouts; i++) {
            gc_state playout = *game;
            playout.rng = a->rng;
            total += gc_rollout(&playout, GC_ROLLOUT_GREEDY, 1) == GC_GUERRILLA ? 1.0f : -1.0f;
            a->rng = playout.rng;
        }
        value = (1.0f - c->rollout_weight) * value + c->rollout_weight * (total / (float)c->rollouts);
    }
    return value;
}

/* Gives an evaluated node its edges (legal actions ascending, priors = softmax of their logits as
 * in rules.md §9) and its leaf value. */
GC_FMA_CLONES
static void expand(const gc_search_config *c, arena *a, int index, const float *out, int rollouts) {
    search_node *node = &a->nodes[index];
    int16_t legal[GC_NUM_ACTIONS];
    int n = gc_legal_actions(&node->game, legal);
    search_edge *edges = a->edges + a->used_edges;
    node->first_edge = a->used_edges;
    node->num_edges = (int16_t)n;
    a->used_edges += n;
    float top = out[legal[0]], total = 0.0f;
    for (int i = 1; i < n; i++)
        if (out[legal[i]] > top) top = out[legal[i]];
    for (int i = 0; i < n; i++) {
        edges[i].action = legal[i];
        edges[i].logit = out[legal[i]];
        edges[i].child = -1;
        total += edges[i].prior = gc_expf(out[legal[i]] - top);
    }
    for (int i = 0; i < n; i++) edges[i].prior /= total;
    node->raw_value = leaf_value(c, a, &node->game, out, rollouts);
}

static int edge_visits(const arena *a, const search_edge *e) { return e->child < 0 ? 0 : a->nodes[e->child].visits; }

/* sigma(completed Q) of every edge of a node (mctx's qtransform_completed_by_mix_value), from the
 * point of view of the side to move there. */
static void transformed_q(const gc_search_config *c, const arena *a, const search_node *node, float *sigma) {
    const search_edge *edges = a->edges + node->first_edge;
    int n = node->num_edges, sum_n = 0, max_n = 0;
    float sign = mover_sign(node), q[GC_SEARCH_MAX_LEGAL];
    double weighted = 0.0, probability = 0.0;
    for (int i = 0; i < n; i++) {
        int visits = edge_visits(a, &edges[i]);
        if (visits) {
            const search_node *child = &a->nodes[edges[i].child];
            q[i] = sign * (float)(child->value_sum / visits);
            float prior = edges[i].prior > 1e-30f ? edges[i].prior : 1e-30f;
            weighted += (double)prior * q[i];
            probability += prior;
        }
        sum_n += visits;
        if (visits > max_n) max_n = visits;
    }
    float raw = sign * node->raw_value;
    float mixed = sum_n ? (float)((raw + sum_n * (weighted / probability)) / (sum_n + 1)) : raw;
    float low = 1e30f, high = -1e30f;
    for (int i = 0; i < n; i++) {
        if (!edge_visits(a, &edges[i])) q[i] = mixed;
        if (q[i] < low) low = q[i];
        if (q[i] > high) high = q[i];
    }
    float range = high - low > 1e-8f ? high - low : 1e-8f, scale = (c->c_visit + (float)max_n) * c->c_scale;
    for (int i = 0; i < n; i++) sigma[i] = scale * ((q[i] - low) / range);
}

/* softmax(logit + sigma) over a node's edges. */
GC_FMA_CLONES
static void improved_policy(const arena *a, const search_node *node, const float *sigma, float *out) {
    const search_edge *edges = a->edges + node->first_edge;
    int n = node->num_edges;
    float top = -3.0e38f, total = 0.0f;
    for (int i = 0; i < n; i++)
        if (edges[i].logit + sigma[i] > top) top = edges[i].logit + sigma[i];
    for (int i = 0; i < n; i++) total += out[i] = gc_expf(edges[i].logit + sigma[i] - top);
    for (int i = 0; i < n; i++) out[i] /= total;
}

/* The root edge Gumbel scores: g + logit + sigma among the edges with `visits` visits. */
static int best_considered(const arena *a, const float *sigma, int visits) {
    const search_node *root = &a->nodes[0];
    const search_edge *edges = a->edges + root->first_edge;
    int best = -1;
    float best_score = 0.0f;
    for (int i = 0; i < root->num_edges; i++) {
        if (edge_visits(a, &edges[i]) != visits) continue;
        float score = a->gumbel[i] + edges[i].logit + sigma[i];
        if (best < 0 || score > best_score) {
            best = i;
            best_score = score;
        }
    }
    return best;
}

static int select_edge(const gc_search *s, const arena *a, int index, int simulation) {
    const gc_search_config *c = &s->config;
    const search_node *node = &a->nodes[index];
    const search_edge *edges = a->edges + node->first_edge;
    int n = node->num_edges, best = 0;
    if (c->variant == GC_SEARCH_PUCT) {
        float sign = mover_sign(node), first_play = sign * node->raw_value, best_score = 0.0f;
        int sum_n = 0;
        for (int i = 0; i < n; i++) sum_n += edge_visits(a, &edges[i]);
        float scale = c->c_puct * sqrtf((float)(sum_n > 1 ? sum_n : 1));
        for (int i = 0; i < n; i++) {
            int visits = edge_visits(a, &edges[i]);
            float q = visits ? sign * (float)(a->nodes[edges[i].child].value_sum / visits) : first_play;
            float score = q + scale * edges[i].prior / (float)(1 + visits);
            if (i == 0 || score > best_score) {
                best = i;
                best_score = score;
            }
        }
        return best;
    }
    float sigma[GC_SEARCH_MAX_LEGAL];
    transformed_q(c, a, node, sigma);
    if (index == 0) {
        int target = s->visit_table[(size_t)a->considered * c->simulations + simulation];
        /* Each simulation adds one visit to one root edge, so some edge has the target count. */
        return best_considered(a, sigma, target);
    }
    float policy[GC_SEARCH_MAX_LEGAL], best_score = 0.0f;
    improved_policy(a, node, sigma, policy);
    int sum_n = 0;
    for (int i = 0; i < n; i++) sum_n += edge_visits(a, &edges[i]);
    for (int i = 0; i < n; i++) {
        float score = policy[i] - (float)edge_visits(a, &edges[i]) / (float)(1 + sum_n);
        if (i == 0 || score > best_score) {
            best = i;
            best_score = score;
        }
    }
    return best;
}

/* Walks down from the root to a node not yet in the tree and adds it.  Returns it when it needs
 * the net; a terminal position is backed up at once and -1 returned. */
static int descend(gc_search *s, int game, int simulation) {
    arena *a = &s->arenas[game];
    int index = 0;
    for (;;) {
        search_node *node = &a->nodes[index];
        if (node->game.winner) {
            backup(a, index, node->raw_value);
            return -1;
        }
        search_edge *edge = &a->edges[node->first_edge + select_edge(s, a, index, simulation)];
        if (edge->child >= 0) {
            index = edge->child;
            continue;
        }
        int child = a->used_nodes++;
        search_node *leaf = &a->nodes[child];
        leaf->game = node->game;
        gc_apply(&leaf->game, edge->action);
        leaf->parent = index;
        leaf->action = edge->action;
        leaf->first_edge = -1;
        leaf->num_edges = 0;
        leaf->visits = 0;
        leaf->value_sum = 0.0;
        edge->child = child;
        if (leaf->game.winner) {
            leaf->raw_value = outcome(&leaf->game);
            backup(a, child, leaf->raw_value);
            return -1;
        }
        memcpy(node_state(s, game, child), node_state(s, game, index), sizeof(float) * s->state_size);
        return child;
    }
}

/* The move of a finished search, its improved policy and statistics. */
/* PUCT at a temperature: a root edge drawn with probability proportional to N^(1/T), computed as
 * (N / max N)^(1/T) <= 1 (N itself at T = 1), so no weight saturates gc_expf's range and the sum
 * cannot overflow however small T is. */
GC_FMA_CLONES
static int draw_visited(const arena *a, float temperature, uint32_t *rng) {
    const search_node *root = &a->nodes[0];
    const search_edge *edges = a->edges + root->first_edge;
    float weight[GC_SEARCH_MAX_LEGAL], total = 0.0f;
    int last = 0, max_n = 0;
    for (int i = 0; i < root->num_edges; i++)
        if (edge_visits(a, &edges[i]) > max_n) max_n = edge_visits(a, &edges[i]);
    float log_max = gc_logf((float)max_n);
    for (int i = 0; i < root->num_edges; i++) {
        int visits = edge_visits(a, &edges[i]);
        weight[i] = !visits ? 0.0f
                    : temperature == 1.0f ? (float)visits
                    : gc_expf((gc_logf((float)visits) - log_max) / temperature);
        total += weight[i];
        if (visits) last = i;
    }
    float r = (float)gc_rand(rng) / 2147483648.0f * total, running = 0.0f;
    for (int i = 0; i < root->num_edges; i++) {
        running += weight[i];
        if (weight[i] > 0.0f && running >= r) return i;
    }
    return last;
}

GC_FMA_CLONES
static int decide(const gc_search *s, arena *a, float *policy, gc_search_stats *stats) {
    const gc_search_config *c = &s->config;
    const search_node *root = &a->nodes[0];
    const search_edge *edges = a->edges + root->first_edge;
    int n = root->num_edges, best = 0, max_n = 0, sum_n = 0;
    for (int i = 0; i < n; i++) {
        int visits = edge_visits(a, &edges[i]);
        sum_n += visits;
        if (visits > max_n) {
            max_n = visits;
            best = i;
        }
    }
    float sigma[GC_SEARCH_MAX_LEGAL], target[GC_SEARCH_MAX_LEGAL];
    if (c->variant == GC_SEARCH_GUMBEL) {
        transformed_q(c, a, root, sigma);
        improved_policy(a, root, sigma, target);
        if (n > 1) best = best_considered(a, sigma, max_n);
    } else {
        for (int i = 0; i < n; i++)
            target[i] = sum_n ? (float)edge_visits(a, &edges[i]) / (float)sum_n : edges[i].prior;
        if (c->temperature > 0.0f && n > 1) best = draw_visited(a, c->temperature, &a->rng);
    }
    if (policy) {
        memset(policy, 0, sizeof(float) * GC_NUM_ACTIONS);
        for (int i = 0; i < n; i++) policy[edges[i].action] = target[i];
    }
    if (stats) {
        stats->root_value = root->raw_value;
        stats->search_value = (float)(root->value_sum / root->visits);
        stats->visits_of_move = edge_visits(a, &edges[best]);
        stats->legal = n;
        stats->evaluations = a->evaluations;
    }
    return edges[best].action;
}

GC_FMA_CLONES
int gc_search_run(gc_search *s, const gc_net *net, gc_state *games, const int32_t *idx, int n, float *net_states,
                  const int32_t *slots, int32_t *actions, float *policy, gc_search_stats *stats) {
    const gc_search_config *c = &s->config;
    if (n > s->max_games) return -1;
    for (int k = 0; k < n; k++)
        if (games[idx[k]].winner) return -1;
    /* The roots: one net step each, from the player's state, which it advances. */
    for (int k = 0; k < n; k++) {
        arena *a = &s->arenas[k];
        search_node *root = &a->nodes[0];
        root->game = games[idx[k]];
        root->parent = -1;
        root->action = -1;
        root->first_edge = -1;
        root->num_edges = 0;
        root->visits = 0;
        root->value_sum = 0.0;
        a->used_nodes = 1;
        a->used_edges = 0;
        a->evaluations = 0;
        a->rng = root->game.rng;
        memcpy(node_state(s, k, 0), net_states + (size_t)slots[k] * s->state_size, sizeof(float) * s->state_size);
        s->eval_slots[k] = k * s->max_nodes;
        gc_observation(&root->game, s->eval_obs + (size_t)k * GC_OBS_SIZE);
    }
    gc_net_step(net, n, s->eval_slots, s->eval_obs, s->states, NULL, s->eval_out);
    for (int k = 0; k < n; k++) {
        arena *a = &s->arenas[k];
        memcpy(net_states + (size_t)slots[k] * s->state_size, node_state(s, k, 0), sizeof(float) * s->state_size);
        expand(c, a, 0, s->eval_out + (size_t)k * GC_NET_OUTPUTS, 0);
        backup(a, 0, a->nodes[0].raw_value);
        int legal = a->nodes[0].num_edges;
        a->done = legal <= 1;
        a->considered = legal < c->considered ? legal : c->considered;
        if (c->variant == GC_SEARCH_GUMBEL && !a->done)
            for (int i = 0; i < legal; i++) {
                /* u uniform on 2^23 points strictly inside (0, 1), exact in float */
                float u = ((float)(gc_rand(&a->rng) >> 8) + 0.5f) * (1.0f / 8388608.0f);
                a->gumbel[i] = -gc_logf(-gc_logf(u));
            }
    }
    /* Simulations: one new leaf per game per step, all evaluated in one net call. */
    for (int sim = 0; sim < c->simulations; sim++) {
        int m = 0;
        for (int k = 0; k < n; k++) {
            if (s->arenas[k].done) continue;
            int leaf = descend(s, k, sim);
            if (leaf < 0) continue;
            s->eval_slots[m] = k * s->max_nodes + leaf;
            s->eval_game[m] = k;
            s->arenas[k].evaluations++;
            gc_observation(&s->arenas[k].nodes[leaf].game, s->eval_obs + (size_t)m * GC_OBS_SIZE);
            m++;
        }
        if (m) gc_net_step(net, m, s->eval_slots, s->eval_obs, s->states, NULL, s->eval_out);
        for (int j = 0; j < m; j++) {
            arena *a = &s->arenas[s->eval_game[j]];
            int leaf = s->eval_slots[j] - s->eval_game[j] * s->max_nodes;
            expand(c, a, leaf, s->eval_out + (size_t)j * GC_NET_OUTPUTS, 1);
            backup(a, leaf, a->nodes[leaf].raw_value);
        }
    }
    for (int k = 0; k < n; k++) {
        arena *a = &s->arenas[k];
        actions[k] = decide(s, a, policy ? policy + (size_t)k * GC_NUM_ACTIONS : NULL, stats ? stats + k : NULL);
        games[idx[k]].rng = a->rng;
    }
    return 0;
}

int gc_search_node_info(const gc_search *s, int game, int index, int32_t *parent, int32_t *action, int32_t *visits,
                        double *value_sum, float *raw_value, float *state) {
    if (game < 0 || game >= s->max_games || index < 0 || index >= s->arenas[game].used_nodes) return -1;
    const search_node *node = &s->arenas[game].nodes[index];
    *parent = node->parent;
    *action = node->action;
    *visits = node->visits;
    *value_sum = node->value_sum;
    *raw_value = node->raw_value;
    if (state)
        memcpy(state, s->states + ((size_t)game * s->max_nodes + index) * s->state_size, sizeof(float) * s->state_size);
    return 0;
}
