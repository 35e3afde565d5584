"""cffi (out-of-line API mode) build of the C engine in csrc/ into gcpipe._engine.

Used by setuptools at install (setup.py: cffi_modules) and by `gcpipe build`.  Extra compiler
flags come from GCPIPE_CFLAGS (e.g. "-march=native"), so builds are reproducible and recorded.
"""
import os
import platform
import shlex
from pathlib import Path

from cffi import FFI

CSRC = Path(__file__).resolve().parents[2] / "csrc"
SOURCES = sorted(str(p) for p in CSRC.glob("*.c"))
# -ffp-contract=off: no fused multiply-add the source does not write (gc_net.c fixes every sum's
# rounding; -std=c11 implies it with GCC, Clang needs it said).
BASE_CFLAGS = ["-std=c11", "-O3", "-fno-strict-aliasing", "-ffp-contract=off"]
# The popcount instruction (every x86-64 CPU since 2008-09: x86-64-v2): without it each
# __builtin_popcountll is a library call, a sixth of an MCTS rollout's instructions.
if platform.machine().lower() in ("x86_64", "amd64"):
    BASE_CFLAGS.append("-mpopcnt")
EXTRA_CFLAGS = shlex.split(os.environ.get("GCPIPE_CFLAGS", ""))

# The C declarations Python sees.  They restate csrc/*.h (cffi cannot read the headers' preprocessor
# lines), but every number is left to the compiler ("..."): the constants, enum values and array
# sizes Python uses come from the C headers through `lib`, never restated.
CDEF = """
#define GC_OBS_SIZE ...
#define GC_NUM_ACTIONS ...
#define GC_PASS_ACTION ...
#define GC_STONE_SUPPLY ...
#define GC_NUM_POINTS ...
#define GC_NUM_SQUARES ...
#define GC_TOURNAMENT_PLY_CAP ...
#define GC_MAX_GAME_PLIES ...
enum { GC_NONE, GC_GUERRILLA, GC_COIN, ... };
enum { GC_END_NONE, GC_END_COINS_CLEARED, GC_END_STONES_EXHAUSTED, GC_END_STONES_WIPED, GC_END_STALEMATE,
       GC_END_PLY_CAP, GC_END_TIMEOUT, ... };
enum { GC_VALID, GC_INVALID_BITS, GC_INVALID_COUNTS, GC_INVALID_SIDE, GC_INVALID_CHAIN, GC_INVALID_RESULT,
       GC_INVALID_TURN, ... };
enum { GC_BOT_RANDOM, GC_BOT_GREEDY, GC_BOT_MCTS, ... };
enum { GC_ROLLOUT_RANDOM, GC_ROLLOUT_GREEDY, ... };
enum { GC_MCTS_BAD_CONFIG, ... };

typedef struct {
    uint64_t stones;
    uint64_t coins;
    uint32_t rng;
    uint16_t plies;
    uint8_t stones_placed;
    uint8_t to_move;
    uint8_t must_capture;
    int8_t previous_cell;
    uint8_t winner;
    uint8_t end_reason;
    uint8_t turn_point;
    uint8_t turn_stones;
} gc_state;

uint32_t gc_rand(uint32_t *state);
void gc_reset(gc_state *s, uint32_t seed);
int gc_legal_actions(const gc_state *s, int16_t *out);
int gc_is_legal(const gc_state *s, int action);
void gc_action_mask(const gc_state *s, uint8_t *mask);
void gc_observation(const gc_state *s, uint8_t *obs);
int gc_apply(gc_state *s, int action);
void gc_declare_coin_win(gc_state *s, int reason);
int gc_validate(const gc_state *s);
int gc_action_captures(const gc_state *s, int action);
int gc_sample_action(gc_state *s, const float *logits);
void gc_batch_observe(const gc_state *states, const int32_t *idx, int n, uint8_t *obs, uint8_t *mask);
void gc_batch_sample(gc_state *states, const int32_t *idx, int n, const float *logits, int32_t *actions);
void gc_legal_softmax(int n, const float *logits, const uint8_t *mask, float *out);
double gc_mean_entropy(int n, const float *p);
int gc_batch_apply(gc_state *states, const int32_t *idx, int n, const int32_t *actions);

typedef struct {
    int kind;
    int iterations;
    double exploration;
    int rollout;
} gc_bot;
int gc_bot_random(gc_state *s);
int gc_bot_greedy(gc_state *s);

/* csrc/gc_bots.h (dispatch, game runner) and csrc/gc_mcts.h: the UCT bot */
typedef struct gc_mcts gc_mcts;
int gc_bot_choose(gc_state *s, const gc_bot *bot, gc_mcts *ws);
int gc_batch_bot_choose(gc_state *states, const int32_t *idx, int n, const gc_bot *bot, gc_mcts *ws, int32_t *actions);
int gc_play_bot_game(gc_state *s, const gc_bot *guerrilla, const gc_bot *coin, gc_mcts *ws, int ply_cap);
int gc_play_bot_games(int n, const uint32_t *seeds, const gc_bot *guerrilla, const gc_bot *coin,
                      gc_mcts *ws, int ply_cap, uint8_t *winners, uint16_t *plies, uint8_t *end_reasons);
gc_mcts *gc_mcts_new(int max_nodes);
void gc_mcts_free(gc_mcts *ws);
int gc_mcts_capacity(const gc_mcts *ws);
int gc_mcts_choose(gc_state *s, int iterations, double exploration, int rollout, gc_mcts *ws);
int gc_rollout_pick(gc_state *s, int rollout);
int gc_rollout(gc_state *s, int rollout);

/* csrc/gc_env.h: the batched training environment */
typedef struct {
    gc_state game;
    uint64_t rng;
    int32_t tick;
    int32_t invalid;
    float episode_return;
    uint8_t slot0_side;
    int16_t guerrilla_mobility;
} gc_env;
typedef struct {
    double games;
    double slot0_wins;
    double episode_return;
    double episode_length;
    double invalid_rate;
    double games_as_guerrilla, wins_as_guerrilla;
    double games_as_coin, wins_as_coin;
    double stalemates;
    double hist_n, hist_wins;
    double bot_n, bot_wins;
    double hist_n_bank[...], hist_wins_bank[...];
} gc_env_log;
typedef struct { ...; } gc_game_end;   /* C-only scratch: Python allocates, never reads it */
typedef struct {
    int num_envs;
    int num_slots;
    int selfplay;
    int side;
    const uint8_t *env_sides;
    int max_episode_length;
    uint32_t seed;
    gc_bot bots[2];
    gc_mcts *mcts;
    gc_env *envs;
    uint8_t *observations;
    uint8_t *action_masks;
    int32_t *actions;
    float *rewards;
    uint8_t *terminals;
    int32_t *opponent_tags;
    uint8_t *slot_sides;
    float coin_mobility_reward;
    float *mobility_rewards;
    gc_game_end *game_ends;
    gc_env_log log;
} gc_vec;
int gc_vec_init(gc_vec *v);
void gc_vec_close(gc_vec *v);
int gc_vec_reset(gc_vec *v);
int gc_vec_step(gc_vec *v);
#define GC_VEC_BLOCK ...
int gc_vec_step_envs(gc_vec *v, int part, int parts, gc_mcts *pool);
void gc_vec_log_step(gc_vec *v);
gc_mcts *gc_vec_new_pool(const gc_vec *v);
int64_t gc_bench_random_play(int64_t n_actions, uint32_t seed);
void gc_vec_random_actions(gc_vec *v, uint64_t *rng);

/* csrc/gc_math.h (static inline; cffi wraps it) and csrc/gc_net.h: network inference for play */
float gc_expf(float x);
#define GC_NET_MAX_HIDDEN ...
#define GC_NET_MAX_LAYERS ...
#define GC_NET_OUTPUTS ...
#define GC_NET_DECODER_STRIDE ...
enum { GC_NET_SIMD_BEST = -1, GC_NET_SIMD_SCALAR = 0, GC_NET_SIMD_AVX2 = 1, GC_NET_SIMD_AVX512 = 2 };
typedef struct {
    int hidden;
    int layers;
    int simd;
    const float *encoder;
    const float *encoder_bias;
    const float *gru[...];
    const float *decoder;
    const float *decoder_bias;
    ...;
} gc_net;
int gc_net_prepare(gc_net *net);
int gc_net_best_simd(void);
void gc_net_step(const gc_net *net, int n, const int32_t *slots, const uint8_t *obs, float *states,
                 const uint8_t *want_logits, float *out);

/* csrc/gc_search.h: network-guided tree search */
enum { GC_SEARCH_PUCT = 0, GC_SEARCH_GUMBEL = 1 };
enum { GC_VALUE_LINEAR = 0, GC_VALUE_LOGISTIC = 1 };
#define GC_SEARCH_MAX_LEGAL ...
typedef struct {
    int variant;
    int simulations;
    float c_puct;
    int considered;
    float c_visit, c_scale;
    int value_squash;
    float value_coef[...];
    int rollouts;
    float rollout_weight;
    float temperature;
} gc_search_config;
typedef struct gc_search gc_search;
typedef struct {
    float root_value;
    float search_value;
    int32_t visits_of_move;
    int32_t legal;
    int32_t evaluations;
} gc_search_stats;
gc_search *gc_search_new(const gc_search_config *config, int max_games, int layers, int hidden);
void gc_search_free(gc_search *search);
int gc_search_check_config(const gc_search_config *config);
int gc_search_run(gc_search *search, const gc_net *net, gc_state *games, const int32_t *idx, int n,
                  float *net_states, const int32_t *slots, int32_t *actions, float *policy, gc_search_stats *stats);
int gc_search_node_info(const gc_search *search, int k, int index, int32_t *parent, int32_t *action, int32_t *visits,
                        double *value_sum, float *raw_value, float *state);
float gc_logf(float x);

/* csrc/gc_select.h: selections for the training path's tensors */
void gc_mask_logits(int n1, int n2, int cols, const float *logits, int64_t stride1, int64_t stride2,
                    const uint8_t *mask, float illegal, float *out);
void gc_mask_grad(int64_t n, const uint8_t *mask, const float *grad, float *out);
void gc_candidate(int64_t rows, int cols, const float *h, int64_t h_stride, const float *sigmoid_h,
                  int64_t sigmoid_stride, float *out);
void gc_candidate_grad(int64_t rows, int cols, const float *h, int64_t h_stride, const float *grad,
                       float *grad_h, float *grad_sigmoid);

/* csrc/gc_mingru.h: a MinGRU layer's elementwise work for the training path's tensors */
void gc_mingru_forward(int simd, int T, int B, int H, int first, int end, const float *c, const float *x,
                       const float *keep, const float *initial, float *s, float *x_out);
void gc_mingru_backward(int simd, int T, int B, int H, int first, int end, const float *c, const float *x,
                        const float *keep, const float *initial, const float *s, const float *grad_out,
                        float *grad_c, float *grad_x, float *carry);

/* csrc/gc_policy.h: the policy's legal-move distribution for PPO */
void gc_policy_sample(int n1, int n2, const float *logits, int64_t stride1, int64_t stride2, const uint8_t *masks,
                      const float *uniforms, int first, int end, int64_t *actions, float *log_probs);
void gc_policy_terms(int n1, int n2, const float *logits, int64_t stride1, int64_t stride2, const uint8_t *masks,
                     const int64_t *actions, int first, int end, float *log_probs, float *entropies);
void gc_policy_terms_grad(int n1, int n2, const float *logits, int64_t stride1, int64_t stride2,
                          const uint8_t *masks, const int64_t *actions, const float *grad_log_probs,
                          const float *grad_entropies, int first, int end, float *grad_logits);

/* csrc/gc_gemm.h: the training path's matrix products, in a fixed summation order */
void gc_gemm(int simd, int M, int N, int K, const float *a, int64_t a_row, int64_t a_col, const float *b,
             int64_t ldb, const float *bias, float *c, int64_t ldc, int first, int end);
void gc_newton_schulz(int simd, int rows, int cols, const float *g, int iterations, const float *coefficients,
                      float eps, float *out, float *scratch);

/* csrc/gc_bf16.h: bfloat16 products, the instruction's bits on every x86-64 path */
int gc_bf16_hardware(void);
void gc_bf16_pack_row_pairs(int K, int N, const float *y, int64_t yk, int64_t yn, uint32_t *out, int64_t ld,
                            int first, int end);
void gc_bf16_round_rows(int K, const float *x, int64_t xr, int64_t xk, float *out, int64_t ld, int first, int end);
void gc_bf16_round_row_pairs(int K, int N, const float *y, int64_t yk, int64_t yn, float *out, int64_t ld,
                             int first, int end);
void gc_bf16_gemm(int M, int N, int K, const float *a, const uint32_t *packed_a, int64_t lda, const uint32_t *b,
                  int64_t ldb, const float *bias, float *c, int64_t ldc, int first, int end);
void gc_bf16_gemm_emulated(int simd, int M, int N, int K, const float *a, int64_t a_row, int64_t a_col, const float *b,
                           int64_t ldb, const float *bias, float *c, int64_t ldc, int first, int end);
"""

HEADERS = ["gc_math.h", "gc_rules.h", "gc_bots.h", "gc_mcts.h", "gc_env.h", "gc_net.h", "gc_search.h", "gc_select.h",
           "gc_mingru.h", "gc_gemm.h", "gc_policy.h", "gc_bf16.h"]

ffibuilder = FFI()
ffibuilder.cdef(CDEF)
ffibuilder.set_source(
    "gcpipe._engine",
    "".join(f'#include "{h}"\n' for h in HEADERS),
    sources=SOURCES,
    include_dirs=[str(CSRC)],
    extra_compile_args=BASE_CFLAGS + EXTRA_CFLAGS,
    libraries=["m"],
)

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
