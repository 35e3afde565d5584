#include "gc_env.h"
#include "gc_mcts.h"
#include "gc_tables.h"
#include <string.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "gc_env.c writes byte rows through little-endian words"
#endif

#define POINTS_ALL ((1ULL << GC_NUM_POINTS) - 1)
#define POINTS_COL0 0x0040810204081ULL       /* grid column gx = 0 */
#define POINTS_COL6 (POINTS_COL0 << 6)       /* grid column gx = 6 */
#define SQUARES_FILE_A 0x0101010101010101ULL /* x = 0 */
#define SQUARES_FILE_H 0x8080808080808080ULL /* x = 7 */

static uint64_t splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* Spreads the 16 bits of x to every fourth bit (bit i -> bit 4i). */
static inline uint64_t spread_stride4(uint64_t x) {
    x &= 0xFFFF;
    x = (x | x << 24) & 0x000000FF000000FFULL;
    x = (x | x << 12) & 0x000F000F000F000FULL;
    x = (x | x << 6) & 0x0303030303030303ULL;
    x = (x | x << 3) & 0x1111111111111111ULL;
    return x;
}

/* Writes mask bytes 4p..4p+3 for positions p < 16 * blocks: byte 4p+k = bit p of legal[k].
 * Interleaving the four boards gives the mask as a bit string (bit 4p+k), written 8 bytes at a time. */
static inline void write_mask_rows(const uint64_t legal[4], int blocks, uint8_t *mask) {
    for (int j = 0; j < blocks; j++) {
        uint64_t bits = spread_stride4(legal[0] >> 16 * j) | spread_stride4(legal[1] >> 16 * j) << 1 |
                        spread_stride4(legal[2] >> 16 * j) << 2 | spread_stride4(legal[3] >> 16 * j) << 3;
        for (int b = 0; b < 8; b++) {
            uint64_t w = gc_bits_to_bytes8(bits >> 8 * b);
            memcpy(mask + 64 * j + 8 * b, &w, 8);
        }
    }
}

/* The legal actions of the side to move as direction bitboards: bit p of legal[k] is action
 * 4p+k (Guerrilla: first point p, direction k; COIN: source square p, direction k).  All zero
 * once the game is over. */
static void legal_boards(const gc_state *s, uint64_t legal[4]) {
    if (s->winner) {
        legal[0] = legal[1] = legal[2] = legal[3] = 0;
    } else if (s->to_move == GC_GUERRILLA) {
        uint64_t empty = ~s->stones & POINTS_ALL;
        uint64_t firsts = s->stones_placed == 0 ? POINTS_ALL
            : (((s->stones << 1) & ~POINTS_COL0) | ((s->stones >> 1) & ~POINTS_COL6) | (s->stones << 7) |
               (s->stones >> 7)) & empty;
        legal[0] = firsts & (empty >> 7);                 /* down: second = first + 7 */
        legal[1] = firsts & (empty >> 1) & ~POINTS_COL6;  /* right: first + 1 */
        legal[2] = firsts & (empty << 1) & ~POINTS_COL0;  /* left: first - 1 */
        legal[3] = firsts & (empty << 7);                 /* up: first - 7 */
    } else if (s->must_capture) {
        int src = s->previous_cell;
        for (int d = 0; d < 4; d++) {
            int dst = GC_COIN_DST[src][d], crossed = GC_COIN_CROSSED[src][d];
            legal[d] = (dst >= 0 && !(s->coins >> dst & 1) && (s->stones >> crossed & 1)) ? 1ULL << src : 0;
        }
    } else {
        uint64_t free = ~s->coins;
        legal[0] = s->coins & (free << 9) & ~SQUARES_FILE_A;  /* up-left: dst = src - 9 */
        legal[1] = s->coins & (free << 7) & ~SQUARES_FILE_H;  /* up-right: src - 7 */
        legal[2] = s->coins & (free >> 7) & ~SQUARES_FILE_A;  /* down-left: src + 7 */
        legal[3] = s->coins & (free >> 9) & ~SQUARES_FILE_H;  /* down-right: src + 9 */
    }
}

/* The 256-byte legal-action mask (the bytes gc_action_mask writes). */
static void write_action_mask(const gc_state *s, uint8_t *mask) {
    uint64_t legal[4];
    legal_boards(s, legal);
    write_mask_rows(legal, 4, mask);  /* Guerrilla boards are zero beyond point 48 */
}

/* Bot mode: the bot plays until it is the agent's turn or the game is over. */
static int bot_replies(gc_vec *v, gc_env *e) {
    while (!e->game.winner && e->game.to_move != e->slot0_side) {
        int action = gc_bot_choose(&e->game, &v->bot, v->mcts);
        if (action < 0) return action == -1 ? 0 : action;  /* -1: no move, the rules ended the game */
        gc_apply(&e->game, action);
    }
    return 0;
}

static int start_game(gc_vec *v, gc_env *e) {
    uint64_t draw = splitmix64(&e->rng);
    gc_reset(&e->game, (uint32_t)draw);
    e->slot0_side = (uint8_t)(v->side ? v->side : (draw >> 32 & 1) ? GC_COIN : GC_GUERRILLA);
    e->tick = 0;
    e->invalid = 0;
    e->episode_return = 0.0f;
    return v->selfplay ? 0 : bot_replies(v, e);
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
        write_action_mask(&e->game, mask);
        return;
    }
    memcpy(obs + GC_OBS_SIZE, obs, GC_OBS_SIZE);
    sides[1] = (uint8_t)(GC_GUERRILLA + GC_COIN - e->slot0_side);
    int actor = e->game.to_move == e->slot0_side ? 0 : 1;
    uint8_t *waiting = mask + (1 - actor) * GC_NUM_ACTIONS;
    write_action_mask(&e->game, mask + actor * GC_NUM_ACTIONS);
    memset(waiting, 0, GC_NUM_ACTIONS);
    waiting[GC_PASS_ACTION] = 1;
}

static void log_game(gc_vec *v, const gc_env *e, int slot0_won, int32_t tag) {
    gc_env_log *log = &v->log;
    log->games += 1;
    log->slot0_wins += slot0_won;
    log->episode_return += e->episode_return;
    log->episode_length += e->tick;
    log->invalid_rate += (double)e->invalid / e->tick;
    if (e->slot0_side == GC_GUERRILLA) {
        log->games_as_guerrilla += 1;
        log->wins_as_guerrilla += slot0_won;
    } else {
        log->games_as_coin += 1;
        log->wins_as_coin += slot0_won;
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

int gc_vec_init(gc_vec *v) {
    if (v->num_envs < 1 || v->max_episode_length < 1 || v->side < 0 || v->side > GC_COIN || !v->envs ||
        !v->observations || !v->action_masks || !v->actions || !v->rewards || !v->terminals ||
        !v->opponent_tags || !v->slot_sides)
        return -1;
    v->num_slots = v->selfplay ? 2 : 1;
    if (!v->selfplay) {
        const gc_bot *b = &v->bot;
        if (b->kind < GC_BOT_RANDOM || b->kind > GC_BOT_MCTS) return -1;
        if (b->kind == GC_BOT_MCTS) {
            if (b->iterations < 1 || (b->rollout != GC_ROLLOUT_RANDOM && b->rollout != GC_ROLLOUT_GREEDY))
                return -1;
            gc_vec_close(v);
            v->mcts = gc_mcts_new(b->iterations + 1);  /* a search of N iterations uses N + 1 nodes */
            if (!v->mcts) return -1;
        }
    }
    return 0;
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
        e->rng = ((uint64_t)v->seed << 32) + (uint64_t)i;
        int err = start_game(v, e);
        if (err) return err;
        write_env_view(v, e, i);
    }
    return 0;
}

int gc_vec_step(gc_vec *v) {
    int slots = v->num_slots;
    for (int i = 0; i < v->num_envs; i++) {
        gc_env *e = &v->envs[i];
        gc_state *g = &e->game;
        float *reward = v->rewards + (size_t)i * slots;
        uint8_t *terminal = v->terminals + (size_t)i * slots;
        int actor_side = g->to_move;
        int actor = actor_side == e->slot0_side ? 0 : 1;
        int action = v->actions[(size_t)i * slots + actor];
        reward[0] = 0.0f;
        terminal[0] = 0;
        if (slots == 2) {
            reward[1] = 0.0f;
            terminal[1] = 0;
        }

        e->tick++;
        int captured = gc_apply(g, action);
        if (captured < 0) {
            e->invalid++;
            reward[actor] = -1.0f;
        } else {
            float shaping = captured * (actor_side == GC_GUERRILLA ? GC_SHAPING_PER_COIN : GC_SHAPING_PER_STONE);
            reward[actor] = shaping > 1.0f ? 1.0f : shaping;
            if (!v->selfplay) {
                int err = bot_replies(v, e);
                if (err) return err;
            }
        }
        /* Timeout (rules.md §4.4): COIN wins, and at the boundary it beats a no-legal-move loss. */
        if (e->tick >= v->max_episode_length && (!g->winner || g->end_reason == GC_END_STALEMATE)) {
            g->winner = GC_COIN;
            g->end_reason = GC_END_TIMEOUT;
        }

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
            log_game(v, e, slot0_won, v->opponent_tags[i]);
            int err = start_game(v, e);  /* auto-reset: the finished game's reward/terminal stay */
            if (err) return err;
        }
        write_env_view(v, e, i);
    }
    return 0;
}

int64_t gc_bench_random_play(int64_t n_actions, uint32_t seed) {
    gc_state s;
    int64_t games = 0;
    gc_reset(&s, seed);
    for (int64_t k = 0; k < n_actions; k++) {
        gc_apply(&s, gc_rollout_pick(&s, GC_ROLLOUT_RANDOM));
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
        legal_boards(&e->game, legal);
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
