#include "gc_env.h"
#include "gc_mcts.h"
#include <string.h>

static uint64_t splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* The built-in bot that moves for `side`. */
static const gc_bot *bot_for(const gc_vec *v, int side) {
    return &v->bots[side - GC_GUERRILLA];
}

/* Bot mode: the bot plays until it is the agent's turn or the game is over. */
static int bot_replies(const gc_vec *v, gc_env *e, gc_mcts *pool) {
    while (!e->game.winner && e->game.to_move != e->slot0_side) {
        int action = gc_bot_choose(&e->game, bot_for(v, e->game.to_move), pool);
        if (action < 0) return action == -1 ? 0 : action;  /* -1: no move, the rules ended the game */
        gc_apply(&e->game, action);
    }
    return 0;
}

static int start_game(const gc_vec *v, gc_env *e, gc_mcts *pool) {
    uint64_t draw = splitmix64(&e->rng);
    gc_reset(&e->game, (uint32_t)draw);
    int side = v->env_sides && v->env_sides[e - v->envs] ? v->env_sides[e - v->envs] : v->side;
    e->slot0_side = (uint8_t)(side ? side : (draw >> 32 & 1) ? GC_COIN : GC_GUERRILLA);
    e->tick = 0;
    e->invalid = 0;
    e->episode_return = 0.0f;
    e->guerrilla_mobility = 0;
    return v->selfplay ? 0 : bot_replies(v, e, pool);
}

/* Observations of every slot, the actor's legal mask, the waiting slot's pass-only mask, and
 * the slots' sides. */
static void write_env_view(const gc_vec *v, const gc_env *e, int i) {
    int slots = v->num_slots;
    uint8_t *obs = v->observations + (size_t)i * slots * GC_OBS_SIZE;
    uint8_t *mask = v->action_masks + (size_t)i * slots * GC_NUM_ACTIONS;
    uint8_t *sides = v->slot_sides + (size_t)i * slots;
    gc_observation(&e->game, obs);
    sides[0] = e->slot0_side;
    if (slots == 1) {
        gc_action_mask(&e->game, mask);
        return;
    }
    memcpy(obs + GC_OBS_SIZE, obs, GC_OBS_SIZE);
    sides[1] = (uint8_t)(GC_GUERRILLA + GC_COIN - e->slot0_side);
    int actor = e->game.to_move == e->slot0_side ? 0 : 1;
    uint8_t *waiting = mask + (1 - actor) * GC_NUM_ACTIONS;
    gc_action_mask(&e->game, mask + actor * GC_NUM_ACTIONS);
    memset(waiting, 0, GC_NUM_ACTIONS);
    waiting[GC_PASS_ACTION] = 1;
}

static void log_game(gc_vec *v, const gc_game_end *e) {
    gc_env_log *log = &v->log;
    int slot0_won = e->slot0_won;
    int32_t tag = e->opponent_tag;
    log->games += 1;
    log->slot0_wins += slot0_won;
    log->episode_return += e->episode_return;
    log->episode_length += e->tick;
    log->invalid_rate += (double)e->invalid / e->tick;
    log->stalemates += e->end_reason == GC_END_STALEMATE;
    if (e->slot0_side == GC_GUERRILLA) {
        log->games_as_guerrilla += 1;
        log->wins_as_guerrilla += slot0_won;
    } else {
        log->games_as_coin += 1;
        log->wins_as_coin += slot0_won;
    }
    if (v->selfplay && tag < 0) {
        log->bot_n += 1;
        log->bot_wins += slot0_won;
    }
    if (v->selfplay && tag > 0) {
        log->hist_n += 1;
        log->hist_wins += slot0_won;
        if (tag <= GC_LOG_BANKS) {
            log->hist_n_bank[tag - 1] += 1;
            log->hist_wins_bank[tag - 1] += slot0_won;
        }
    }
}

/* The largest MCTS bot's iterations (0: no MCTS bot): one search at a time uses a pool. */
static int pool_iterations(const gc_vec *v) {
    int most = 0;
    for (int k = 0; k < 2; k++)
        if (v->bots[k].kind == GC_BOT_MCTS && v->bots[k].iterations > most) most = v->bots[k].iterations;
    return most;
}

gc_mcts *gc_vec_new_pool(const gc_vec *v) {
    int iterations = pool_iterations(v);
    return iterations ? gc_mcts_new(iterations + 1) : NULL;  /* a search of N iterations uses N + 1 nodes */
}

int gc_vec_init(gc_vec *v) {
    if (v->num_envs < 1 || v->max_episode_length < 1 || v->side < 0 || v->side > GC_COIN || !v->envs ||
        !v->observations || !v->action_masks || !v->actions || !v->rewards || !v->terminals ||
        !v->opponent_tags || !v->slot_sides || !v->game_ends ||
        (v->coin_mobility_reward != 0.0f && !v->mobility_rewards))
        return -1;
    for (int i = 0; v->env_sides && i < v->num_envs; i++)
        if (v->env_sides[i] > GC_COIN) return -1;
    v->num_slots = v->selfplay ? 2 : 1;
    /* Bot mode's opponent, and in self-play the player of slot 1 in envs tagged < 0, per side. */
    for (int k = 0; k < 2; k++) {
        const gc_bot *b = &v->bots[k];
        if (b->kind < GC_BOT_RANDOM || b->kind > GC_BOT_MCTS) return -1;
        if (b->kind == GC_BOT_MCTS &&
            (b->iterations < 1 || (b->rollout != GC_ROLLOUT_RANDOM && b->rollout != GC_ROLLOUT_GREEDY)))
            return -1;
    }
    gc_vec_close(v);
    v->mcts = gc_vec_new_pool(v);
    return v->mcts || pool_iterations(v) == 0 ? 0 : -1;
}

void gc_vec_close(gc_vec *v) {
    if (v->mcts) gc_mcts_free(v->mcts);
    v->mcts = NULL;
}

int gc_vec_reset(gc_vec *v) {
    int slots = v->num_slots;
    memset(&v->log, 0, sizeof v->log);
    memset(v->rewards, 0, sizeof(float) * v->num_envs * slots);
    memset(v->terminals, 0, (size_t)v->num_envs * slots);
    for (int i = 0; i < v->num_envs; i++) {
        gc_env *e = &v->envs[i];
        e->rng = ((uint64_t)v->seed << 32) + (v->env_numbers ? v->env_numbers[i] : (uint64_t)i);
        int err = start_game(v, e, v->mcts);
        if (err) return err;
        write_env_view(v, e, i);
    }
    return 0;
}

/* The COIN's mobility reward of a legal COIN move (gc_vec.coin_mobility_reward): where it hands
 * the turn to the Guerrilla, the fall in the Guerrilla's legal actions since the last handover
 * (none at a game's first, whose count only starts the comparison). */
static float coin_mobility_reward(const gc_vec *v, gc_env *e) {
    const gc_state *g = &e->game;
    if (g->winner || g->to_move != GC_GUERRILLA) return 0.0f;   /* a chain goes on, or the game ended */
    int16_t previous = e->guerrilla_mobility;
    e->guerrilla_mobility = (int16_t)gc_legal_count(g);
    return previous ? v->coin_mobility_reward * (float)(previous - e->guerrilla_mobility) : 0.0f;
}

/* One decision step of envs [begin, end). */
static int step_env_range(gc_vec *v, int begin, int end, gc_mcts *pool) {
    int slots = v->num_slots;
    for (int i = begin; i < end; i++) {
        gc_env *e = &v->envs[i];
        gc_game_end *ended = &v->game_ends[i];
        ended->ended = 0;
        gc_state *g = &e->game;
        float *reward = v->rewards + (size_t)i * slots;
        uint8_t *terminal = v->terminals + (size_t)i * slots;
        int actor_side = g->to_move;
        int actor = actor_side == e->slot0_side ? 0 : 1;
        int action;
        if (actor == 1 && v->opponent_tags[i] < 0) {  /* self-play against the built-in bot */
            action = gc_bot_choose(g, bot_for(v, actor_side), pool);
            if (action < 0) return action;  /* the game is live, so only a bot error gets here */
        } else {
            action = v->actions[(size_t)i * slots + actor];
        }
        reward[0] = 0.0f;
        terminal[0] = 0;
        if (slots == 2) {
            reward[1] = 0.0f;
            terminal[1] = 0;
        }
        float *mobility = v->coin_mobility_reward != 0.0f ? v->mobility_rewards + (size_t)i * slots : NULL;
        float mobility_reward = 0.0f;
        if (mobility) {
            mobility[0] = 0.0f;
            if (slots == 2) mobility[1] = 0.0f;
        }

        e->tick++;
        int captured = gc_apply(g, action);
        if (captured < 0) {
            e->invalid++;
            reward[actor] = -1.0f;
        } else {
            float shaping = captured * (actor_side == GC_GUERRILLA ? GC_SHAPING_PER_COIN : GC_SHAPING_PER_STONE);
            reward[actor] = shaping > 1.0f ? 1.0f : shaping;
            /* before a bot reply */
            if (mobility && actor_side == GC_COIN) mobility_reward = coin_mobility_reward(v, e);
            if (!v->selfplay) {
                int err = bot_replies(v, e, pool);
                if (err) return err;
            }
        }
        /* Timeout (rules.md §4.4): COIN wins, and at the boundary it beats a no-legal-move loss. */
        if (e->tick >= v->max_episode_length && (!g->winner || g->end_reason == GC_END_STALEMATE)) {
            g->winner = GC_COIN;
            g->end_reason = GC_END_TIMEOUT;
        }

        if (mobility && !g->winner) mobility[actor] = mobility_reward;  /* the outcome replaces it */
        int slot0_won = g->winner == e->slot0_side;
        if (g->winner) {
            reward[0] = slot0_won ? 1.0f : -1.0f;  /* replaces the step's shaping */
            terminal[0] = 1;
            if (slots == 2) {
                reward[1] = -reward[0];
                terminal[1] = 1;
            }
        }
        e->episode_return += reward[0];
        if (g->winner) {
            *ended = (gc_game_end){.ended = 1, .slot0_side = e->slot0_side, .slot0_won = (uint8_t)slot0_won,
                                 .end_reason = g->end_reason, .opponent_tag = v->opponent_tags[i],
                                 .tick = e->tick, .invalid = e->invalid, .episode_return = e->episode_return};
            int err = start_game(v, e, pool);  /* auto-reset: the finished game's reward/terminal stay */
            if (err) return err;
        }
        write_env_view(v, e, i);
    }
    return 0;
}

int gc_vec_step(gc_vec *v) {
    int32_t next_block = 0;
    int err = gc_vec_step_claimed(v, &next_block, NULL);
    if (!err) gc_vec_log_step(v);
    return err;
}

void gc_vec_log_step(gc_vec *v) {
    gc_vec_log_games(v, v->game_ends, v->num_envs);
}

void gc_vec_log_games(gc_vec *v, const gc_game_end *ends, int n) {
    for (int i = 0; i < n; i++)
        if (ends[i].ended) log_game(v, &ends[i]);
}

int gc_vec_step_claimed(gc_vec *v, int32_t *next_block, gc_mcts *pool) {
    if (!pool) pool = v->mcts;
    for (;;) {
        int block = __atomic_fetch_add(next_block, 1, __ATOMIC_RELAXED) * GC_VEC_BLOCK;
        if (block >= v->num_envs) return 0;
        int end = block + GC_VEC_BLOCK < v->num_envs ? block + GC_VEC_BLOCK : v->num_envs;
        int err = step_env_range(v, block, end, pool);
        if (err) return err;
    }
}

int64_t gc_bench_random_play(int64_t n_actions, uint32_t seed) {
    gc_state s;
    int64_t games = 0;
    gc_reset(&s, seed);
    for (int64_t k = 0; k < n_actions; k++) {
        gc_apply(&s, gc_rollout_pick(&s, GC_ROLLOUT_RANDOM, 1));
        if (s.winner) {
            games++;
            gc_reset(&s, s.rng);
        }
    }
    return games;
}

void gc_vec_random_actions(gc_vec *v, uint64_t *rng) {
    int slots = v->num_slots;
    for (int i = 0; i < v->num_envs; i++) {
        const gc_env *e = &v->envs[i];
        uint64_t legal[4];
        gc_legal_boards(&e->game, legal);
        int counts[4], n = 0;
        for (int k = 0; k < 4; k++) n += counts[k] = __builtin_popcountll(legal[k]);
        int32_t *row = v->actions + (size_t)i * slots;
        int actor = e->game.to_move == e->slot0_side ? 0 : 1;
        if (slots == 2) row[1 - actor] = GC_PASS_ACTION;
        /* The r-th legal action in (direction, position) order: uniform over the legal set. */
        int r = n ? (int)(splitmix64(rng) % (uint64_t)n) : 0, k = 0;
        while (k < 3 && r >= counts[k]) r -= counts[k++];
        uint64_t board = legal[k];
        for (; r > 0; r--) board &= board - 1;
        row[actor] = board ? 4 * __builtin_ctzll(board) + k : GC_PASS_ACTION;
    }
}
