/* The batched training environment (rules.md §4.4, §5, §6): N games stepped in one call over
 * caller-owned buffers, in the style of PufferLib's Ocean envs (flat structs, no allocation while
 * stepping).  Buffers are row-major with S slots per env (S = 2 in self-play, 1 in bot mode):
 *   observations uint8[N][S][120], action_masks uint8[N][S][256], actions int32[N][S],
 *   rewards float[N][S], terminals uint8[N][S], opponent_tags int32[N], slot_sides uint8[N][S].
 *
 * Randomness: each env owns a splitmix64 generator started at (seed << 32) + env index by
 * gc_vec_reset.  One
 * draw per game: its low 32 bits seed the game (gc_reset, the generator bots draw from), bit 32
 * picks slot 0's side when neither `env_sides` nor `side` fixes it.  The whole batch is a pure function of
 * (seed, N, configuration, actions). */
#ifndef GC_ENV_H
#define GC_ENV_H
#include "gc_bots.h"

/* Reward shaping of rules.md §6, per piece captured by the actor. */
#define GC_SHAPING_PER_COIN 0.05f
#define GC_SHAPING_PER_STONE 0.03f
#define GC_LOG_BANKS 8

/* One environment: the running game and the bookkeeping of the current episode. */
typedef struct {
    gc_state game;
    uint64_t rng;           /* splitmix64 state: game seeds and random sides */
    int32_t tick;           /* decision steps this episode (illegal ones included; bot moves excluded) */
    int32_t invalid;        /* illegal actions this episode, by either slot */
    float episode_return;   /* slot 0's summed rewards this episode */
    uint8_t slot0_side;     /* GC_GUERRILLA or GC_COIN: the side slot 0 plays this game */
    int16_t guerrilla_mobility;  /* the Guerrilla's legal actions when a COIN move last handed it the
                                  * turn (0: not yet this game); kept only with a COIN mobility reward */
} gc_env;

/* Sums over the games finished since the log was last cleared (Python turns them into means).
 * A game "wins" for slot 0 when slot 0's side is the winner; there are no draws. */
typedef struct {
    double games;
    double slot0_wins;
    double episode_return;      /* slot 0 */
    double episode_length;      /* ticks */
    double invalid_rate;        /* per game: illegal actions / ticks */
    double games_as_guerrilla, wins_as_guerrilla;  /* slot 0 playing Guerrilla */
    double games_as_coin, wins_as_coin;            /* slot 0 playing COIN */
    double stalemates;                             /* games whose side to move had no legal action */
    double hist_n, hist_wins;                      /* opponent tag >= 1: a frozen opponent */
    double bot_n, bot_wins;                        /* opponent tag < 0: the built-in bot */
    double hist_n_bank[GC_LOG_BANKS], hist_wins_bank[GC_LOG_BANKS];  /* tag i+1: bank i */
} gc_env_log;

/* A game that ended in the current step, kept per env until gc_vec_log_step adds it to the log:
 * steps of disjoint env sets may run at once, and logging in env order keeps the log's float sums
 * the same however the envs were split. */
typedef struct {
    uint8_t ended;            /* 1: the env's game ended in this step; the fields below hold it */
    uint8_t slot0_side;
    uint8_t slot0_won;
    uint8_t end_reason;       /* GC_END_* */
    int32_t opponent_tag;
    int32_t tick;
    int32_t invalid;
    float episode_return;
} gc_game_end;

typedef struct {
    int num_envs;
    int num_slots;            /* 2 self-play, 1 bot mode; set by gc_vec_init */
    int selfplay;
    int side;                 /* 0 random per game, GC_GUERRILLA or GC_COIN: slot 0's side */
    const uint8_t *env_sides; /* NULL, or per env: GC_GUERRILLA or GC_COIN fixes slot 0's side in
                               * that env's games, GC_NONE leaves it to `side` */
    int max_episode_length;   /* timeout in ticks (rules.md §4.4) */
    uint32_t seed;            /* base seed of the env generators */
    const uint64_t *env_numbers; /* NULL, or per env: the number its generator starts from beside the
                               * seed, (seed << 32) + number, where NULL means the env's index; a run
                               * whose envs are split over processes gives each env its number in the
                               * whole run, so that every game is the one-process run's */
    gc_bot bots[2];           /* the built-in bot by the side it plays, bots[GC_GUERRILLA - 1] and
                               * bots[GC_COIN - 1]: bot mode's opponent, self-play's slot 1 in the
                               * envs tagged < 0 */
    gc_mcts *mcts;            /* the MCTS bots' node pool (gc_vec_init) */
    gc_env *envs;             /* num_envs entries, caller-owned */
    uint8_t *observations;
    uint8_t *action_masks;
    int32_t *actions;
    float *rewards;
    uint8_t *terminals;
    int32_t *opponent_tags;   /* self-play: 0 current policy, i+1 frozen bank i (read at game end),
                               * < 0 the bot plays slot 1 (read every step; its action is ignored) */
    uint8_t *slot_sides;
    /* The COIN's mobility reward (0: none, and `mobility_rewards` may be NULL): where a COIN move
     * hands the turn to the Guerrilla, mobility_rewards[N][S] holds coin_mobility_reward times the
     * fall in the Guerrilla's legal actions since its previous turn (the first turn, before any
     * stone, is not counted) in the COIN's slot, 0 elsewhere; apart from `rewards` so that the
     * capture rewards' scaling (training's) leaves it alone. */
    float coin_mobility_reward;
    float *mobility_rewards;
    gc_game_end *game_ends;   /* num_envs entries, caller-owned scratch of one step */
    gc_env_log log;
} gc_vec;

/* Checks the configuration, sets num_slots and, for MCTS bots, allocates their node pool
 * (the only allocation; gc_vec_close frees it).  Returns 0, or -1 for a bad configuration
 * (sizes, sides, timeout, bot kind, MCTS settings) or when the pool cannot be allocated. */
int gc_vec_init(gc_vec *v);
void gc_vec_close(gc_vec *v);
/* Restarts the env generators from v->seed, clears the log, starts a new game in every env and
 * writes observations, masks and slot sides; rewards and terminals are zeroed.  Returns 0, or a
 * negative gc_bot_choose error of a bot opponent (bot mode, COIN agent: the bot opens). */
int gc_vec_reset(gc_vec *v);
/* One decision step of every env from v->actions (rules.md §6), auto-resetting finished games.
 * Returns 0, or a negative gc_bot_choose error of a bot opponent. */
int gc_vec_step(gc_vec *v);
/* gc_vec_step shared among threads: each concurrent gc_vec_step_claimed(v, next_block, pool) claims
 * the next block of GC_VEC_BLOCK envs from the counter *next_block (0 before the step, shared by the
 * calls) and steps it, until no block is left (its bots searching in `pool`, NULL for v->mcts; each
 * concurrent call with its own pool), recording the games that end in v->game_ends; once every call
 * has returned, gc_vec_log_step adds them to the log in env order.  Every env owns its generators and
 * a search's result does not depend on its pool's history, so any number of calls, whichever blocks
 * each claims, gives gc_vec_step's result.  Claiming, not a fixed share, keeps the threads busy to the
 * end of the step: the bot envs lie together, and a bot's search costs far more than an agent's move. */
#define GC_VEC_BLOCK 16
int gc_vec_step_claimed(gc_vec *v, int32_t *next_block, gc_mcts *pool);
void gc_vec_log_step(gc_vec *v);
/* Adds to the log the games of ends[0..n) that ended (entries whose `ended` is 1), in that order: the
 * games a run split over processes gathers, put in the order a one-process gc_vec_log_step adds them. */
void gc_vec_log_games(gc_vec *v, const gc_game_end *ends, int n);
/* A node pool for one more concurrent gc_vec_step_claimed (gc_mcts_free frees it); NULL when v has no
 * MCTS bot or the allocation fails. */
gc_mcts *gc_vec_new_pool(const gc_vec *v);

/* Benchmark helpers. */
/* Random play through the rules, legal enumeration included: plays n_actions uniformly random
 * legal actions (gc_rollout_pick's random choice, the MCTS rollout path), restarting finished
 * games; returns the games finished. */
int64_t gc_bench_random_play(int64_t n_actions, uint32_t seed);
/* For each env, writes into its actor slot a legal action drawn uniformly with the caller's
 * splitmix64 state `*rng` (and 255 into the waiting slot): a cheap self-play policy. */
void gc_vec_random_actions(gc_vec *v, uint64_t *rng);

#endif
