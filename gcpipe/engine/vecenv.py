"""The batched training environment (rules.md §4.4, §5, §6) over numpy buffers shared with C.

Self-play (`selfplay=True`, two slots): slot 0 is the trainable policy, slot 1 the opponent. Each
tick both slots receive the same 120-byte observation; the actor slot's mask lists the legal
actions, the waiting slot's mask allows only 255 (pass), and only the actor slot's action is read.
`side` None draws slot 0's side per game (rules.md §6's side 0), GUERRILLA or COIN fixes it; a
sequence of num_envs sides sets it per env (NO_SIDE: drawn per game), e.g. to give the agent one
side in the envs against one bot and the other side against the other.
Bot mode (`selfplay=False`, one slot): slot 0 plays `side` against a built-in bot that replies
inside `step` (a COIN agent receives the position after the bot's opening).  In self-play, the
bot plays slot 1 of every env whose opponent tag is negative: at slot 1's turns the env asks the
bot and ignores `actions` for that slot.  `opponent` is one bot kind for both sides or a mapping
{"guerrilla": kind, "coin": kind} naming the bot of each side (e.g. a strong sparring partner
where the agent plays Guerrilla, a weak one where it plays COIN).

Rewards: legal action -> 0.05 per coin (Guerrilla) / 0.03 per stone (COIN) captured, to the actor;
illegal action -> state unchanged, -1 to the actor; the step that ends a game gives +1 to the
winner's slot and -1 to the loser's (replacing that step's shaping) with both terminals 1, and
the returned observation is already the next game's first.  Every decision step of the env is a
tick (bot moves are not); at `max_episode_length` ticks COIN wins.  With `coin_mobility_reward`
m > 0 (gcpipe's own, not in rules.md §6), `mobility_rewards` float32 [N, S] holds, in the COIN's slot of a step whose
COIN move hands the turn to the Guerrilla, m times the fall in the Guerrilla's number of legal
actions since its previous turn (counted from its second turn: the first, with no stone down,
allows any point), and 0 elsewhere: a signal toward the line that leaves the Guerrilla no move.

Randomness: env i owns a splitmix64 generator started at (seed << 32) + i on `reset`; each game
takes one draw, whose low 32 bits seed the game (its generator feeds the bots) and whose bit 32
picks slot 0's side where `side` leaves it open.  `env_numbers` gives env i another number than i
(an env of a run split over processes keeps its number in the whole run: the same games).
Everything is a pure function of (seed, num_envs, env numbers, config, actions) — not of
`threads`, the number of threads a step runs on (the bots' searches are most of a step's work): each claims blocks of envs until none is left and steps them with its own node
pool, and the games that ended are logged in env order afterwards.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from gcpipe._engine import ffi, lib
from gcpipe.engine.bots import KINDS, MCTS_MAX_ITERATIONS, ROLLOUTS, kinds_by_side
from gcpipe.engine.game import COIN, GUERRILLA, NO_SIDE, NUM_ACTIONS, OBS_SIZE, check_seed, side_to_c, sides_from_c
from gcpipe.errors import UserError, check_int, is_finite_number, is_int

C_INT_MAX = 2**31 - 1   # the C struct's int settings hold no more

_ZERO_LOG = ffi.new("gc_env_log *")  # all zeros
_GAME_END = np.dtype((np.void, ffi.sizeof("gc_game_end")))   # a raw gc_game_end


class VecEnv:
    """`num_envs` games stepped together; see the module docstring for the semantics.

    Buffers (attributes, fixed for the env's lifetime; write into them, do not rebind):
    observations uint8 [N, S, 120], action_masks uint8 [N, S, 256], actions int32 [N, S],
    rewards float32 [N, S], terminals uint8 [N, S], opponent_tags int32 [N] (self-play: 0 = slot 1
    is the current policy, i + 1 = a frozen opponent from bank i, both only read for the log when
    a game ends, so set an env's tag for its next game right after the step that returned its
    terminal; negative = the built-in bot plays slot 1, read at every step).  `slot_sides` int8
    [N, S] is a fresh array (GUERRILLA or COIN) of the sides in the games now in `observations`.

    `pop_log()` summarises the games finished since the last call (all are per-game means
    unless noted; a mean over no games is NaN), with the keys of LOG_FIELDS:
      games (count), slot_0_score (slot 0's win fraction, 0..1 — rules.md §6's perf and score,
      the same number, logged once; a "score" is always a win fraction since there are no
      draws), slot_1_score (1 - slot_0_score),
      episode_return (slot 0's summed rewards), episode_length (ticks), invalid_rate (illegal
      actions of either slot / ticks, per game), stalemate_rate (the fraction of games that ended
      with the side to move unable to act, rules.md §4.3), games_as_guerrilla / games_as_coin /
      wins_as_guerrilla / wins_as_coin (counts for slot 0's side), slot_0_score_as_guerrilla /
      slot_0_score_as_coin (win fraction over the games on that side), hist_n (count of games
      against frozen opponents, tag >= 1), hist_score (slot 0's win fraction in them), and per
      bank i < 8 hist_n_bank_i (count, tag i + 1) and hist_score_bank_i; bot_n (count of
      self-play games against the built-in bot, tag < 0) and bot_score (slot 0's win fraction).
    """

    def __init__(self, num_envs: int, *, selfplay: bool = True, side: int | Sequence[int] | None = None,
                 opponent: str | Mapping[str, str] = "random",
                 mcts_iterations: int = 256, mcts_exploration: float = 0.7, mcts_rollout: str = "greedy",
                 max_episode_length: int = 256, seed: int = 0, threads: int = 1,
                 coin_mobility_reward: float = 0.0, env_numbers: Sequence[int] | None = None):
        self._vec = None        # close() (also from __del__ after a failed __init__) reads these three
        self._executor = None
        self._pools = []
        check_int("num_envs", num_envs, 1, C_INT_MAX)
        if side is None or is_int(side):
            env_sides = None
            if side is not None and side not in (GUERRILLA, COIN):
                raise UserError(f"side must be None (random), GUERRILLA ({GUERRILLA}), COIN ({COIN}) or one "
                                f"of these per env, got {side!r}")
        else:
            env_sides = np.asarray(side)
            if env_sides.shape != (num_envs,) or not np.isin(env_sides, (NO_SIDE, GUERRILLA, COIN)).all():
                raise UserError(f"per-env sides must be {num_envs} values, each NO_SIDE ({NO_SIDE}), "
                                f"GUERRILLA ({GUERRILLA}) or COIN ({COIN})")
        if env_numbers is not None:
            env_numbers = np.asarray(env_numbers)
            if (env_numbers.shape != (num_envs,) or env_numbers.dtype.kind not in "iu"
                    or (env_numbers.size and (env_numbers.min() < 0 or env_numbers.max() >= 2**32))):
                raise UserError(f"env_numbers must be {num_envs} whole numbers in [0, 2**32)")
        check_int("max_episode_length", max_episode_length, 1, C_INT_MAX)
        check_seed(seed)
        check_int("threads", threads, 1)
        if not is_finite_number(coin_mobility_reward) or coin_mobility_reward < 0:
            raise UserError(f"coin_mobility_reward must be a finite number >= 0, got {coin_mobility_reward!r}")
        kinds = kinds_by_side(opponent)
        if "mcts" in kinds:
            check_int("mcts_iterations", mcts_iterations, 1, MCTS_MAX_ITERATIONS)
            if not is_finite_number(mcts_exploration) or mcts_exploration < 0:
                raise UserError(f"mcts_exploration must be a finite number >= 0, got {mcts_exploration!r}")
            if mcts_rollout not in ROLLOUTS:
                raise UserError(f"unknown mcts_rollout {mcts_rollout!r}; choose random or greedy")

        self.num_envs = int(num_envs)
        self.selfplay = bool(selfplay)
        self.num_slots = 2 if self.selfplay else 1
        n, s = self.num_envs, self.num_slots
        self._observations = np.zeros((n, s, OBS_SIZE), np.uint8)
        self._action_masks = np.zeros((n, s, NUM_ACTIONS), np.uint8)
        self._actions = np.zeros((n, s), np.int32)
        self._rewards = np.zeros((n, s), np.float32)
        self._terminals = np.zeros((n, s), np.uint8)
        self._opponent_tags = np.zeros(n, np.int32)
        self._slot_sides = np.zeros((n, s), np.uint8)
        self._mobility_rewards = np.zeros((n, s), np.float32) if coin_mobility_reward else None
        self._envs = ffi.new("gc_env[]", n)
        self._game_ends = ffi.new("gc_game_end[]", n)
        vec = ffi.new("gc_vec *")
        vec.num_envs = n
        vec.selfplay = int(self.selfplay)
        vec.side = side_to_c(side) if side is not None and env_sides is None else 0
        if env_sides is not None:     # C codes; the attribute keeps the buffer alive
            self._env_sides = np.array([lib.GC_NONE if x == NO_SIDE else side_to_c(x) for x in env_sides], np.uint8)
            vec.env_sides = ffi.from_buffer("uint8_t[]", self._env_sides)
        if env_numbers is not None:   # the attribute keeps the buffer alive
            self._env_numbers = env_numbers.astype(np.uint64)
            vec.env_numbers = ffi.from_buffer("uint64_t[]", self._env_numbers)
        vec.max_episode_length = int(max_episode_length)
        vec.seed = int(seed)
        # The bot of each side, in gc_vec's order (Guerrilla, COIN), which is SIDE_NAMES'.
        vec.bots = [{"kind": KINDS[kind], "iterations": int(mcts_iterations), "exploration": float(mcts_exploration),
                     "rollout": ROLLOUTS.get(mcts_rollout, 0)} for kind in kinds]
        vec.envs = self._envs
        # The C struct points into the numpy arrays; the attributes keep them alive.
        vec.observations = ffi.from_buffer("uint8_t[]", self._observations)
        vec.action_masks = ffi.from_buffer("uint8_t[]", self._action_masks)
        vec.actions = ffi.from_buffer("int32_t[]", self._actions)
        vec.rewards = ffi.from_buffer("float[]", self._rewards)
        vec.terminals = ffi.from_buffer("uint8_t[]", self._terminals)
        vec.opponent_tags = ffi.from_buffer("int32_t[]", self._opponent_tags)
        vec.slot_sides = ffi.from_buffer("uint8_t[]", self._slot_sides)
        if coin_mobility_reward:
            vec.coin_mobility_reward = float(coin_mobility_reward)
            vec.mobility_rewards = ffi.from_buffer("float[]", self._mobility_rewards)
        vec.game_ends = self._game_ends
        pool_error = UserError(f"cannot set up the environment (MCTS node pool of {mcts_iterations + 1} nodes "
                               "could not be allocated)")
        if lib.gc_vec_init(vec) != 0:
            raise pool_error
        self._vec = vec
        self._mcts_capacity = int(mcts_iterations)     # the node pools' size (set_mcts_iterations)
        # Thread 0 steps with the env's own pool, each other thread with one of these; a thread
        # claims blocks of GC_VEC_BLOCK envs, so more threads than blocks would idle.
        self.threads = min(int(threads), -(-n // lib.GC_VEC_BLOCK))
        self._pools = [lib.gc_vec_new_pool(vec) for _ in range(self.threads - 1)]
        if vec.mcts != ffi.NULL and ffi.NULL in self._pools:
            self.close()
            raise pool_error
        if self.threads > 1:
            self._executor = ThreadPoolExecutor(self.threads - 1, thread_name_prefix="vecenv")
        self._policy_rng = ffi.new("uint64_t *", ~int(seed) & (2**64 - 1))
        self._started = False

    # Read-only attributes: C holds pointers to these exact arrays.
    observations = property(lambda self: self._observations)
    action_masks = property(lambda self: self._action_masks)
    actions = property(lambda self: self._actions)
    rewards = property(lambda self: self._rewards)
    terminals = property(lambda self: self._terminals)
    opponent_tags = property(lambda self: self._opponent_tags)
    mobility_rewards = property(lambda self: self._mobility_rewards)   # None without coin_mobility_reward

    @property
    def slot_sides(self) -> np.ndarray:
        return sides_from_c(self._slot_sides)

    def set_mcts_iterations(self, iterations: int) -> None:
        """The MCTS bots' iterations from the next step on: at most the `mcts_iterations` the env was
        built with, which sized their node pools."""
        self._check_open()
        bots = [bot for bot in self._vec.bots if bot.kind == KINDS["mcts"]]
        if not bots:
            raise UserError("set_mcts_iterations: this env has no MCTS bot")
        check_int("mcts_iterations", iterations, 1, self._mcts_capacity)
        for bot in bots:
            bot.iterations = int(iterations)

    def reset(self) -> None:
        """Restarts the generators from the seed, clears the log and starts a game in every env."""
        self._check_open()
        _check_bot(lib.gc_vec_reset(self._vec))
        self._started = True

    def step(self, actions: np.ndarray | None = None) -> None:
        """One decision step of every env; `actions` (int [N, S]) is copied into `self.actions`."""
        self._check_open()
        if not self._started:
            raise UserError("call reset() before step()")
        if actions is not None:
            self._load_actions(actions)
        if self._executor is None:
            _check_bot(lib.gc_vec_step(self._vec))
            return
        # cffi releases the GIL inside C calls, so the threads claim and step blocks at once.
        next_block = ffi.new("int32_t *", 0)
        others = [self._executor.submit(lib.gc_vec_step_claimed, self._vec, next_block, pool)
                  for pool in self._pools]
        codes = [lib.gc_vec_step_claimed(self._vec, next_block, ffi.NULL)] + [f.result() for f in others]
        for code in codes:
            _check_bot(code)
        lib.gc_vec_log_step(self._vec)

    def game_ends(self) -> tuple[np.ndarray, np.ndarray]:
        """The games the last step ended: (their envs, their raw gc_game_end records, a numpy void
        each), for `log_games` in another process."""
        self._check_open()
        records = np.frombuffer(ffi.buffer(self._game_ends), _GAME_END)
        ended = np.flatnonzero(records.view(np.uint8)[ffi.offsetof("gc_game_end", "ended")::_GAME_END.itemsize])
        return ended, records[ended].copy()

    def log_games(self, records: np.ndarray) -> None:
        """Adds to the log the ended games among `records` (game_ends' records, of any envs), in order."""
        self._check_open()
        records = np.ascontiguousarray(records)
        if records.dtype != _GAME_END:
            raise UserError("log_games takes the records of VecEnv.game_ends")
        lib.gc_vec_log_games(self._vec, ffi.from_buffer("gc_game_end[]", records), len(records))

    def random_actions(self) -> None:
        """Writes into `actions` a uniformly random legal action for every actor slot (and 255 for
        waiting slots), drawn in C from a splitmix64 stream seeded like the envs: a cheap policy
        for benchmarks and smoke runs."""
        self._check_open()
        if not self._started:
            raise UserError("call reset() before random_actions()")
        lib.gc_vec_random_actions(self._vec, self._policy_rng)

    def pop_log(self) -> dict[str, float]:
        """Means over the games finished since the last call (see the class docstring)."""
        self._check_open()
        out = _summary(self._vec.log)
        self._vec.log = _ZERO_LOG[0]
        return out

    def get_state(self) -> bytes:
        """Everything later steps and logs depend on — the games in progress, their generators,
        the log sums and the buffers — as bytes for `set_state` (exact resume of a training run)."""
        self._check_open()
        log = ffi.buffer(ffi.addressof(self._vec.log), ffi.sizeof("gc_env_log"))
        return b"".join([bytes([self._started]), bytes(ffi.buffer(self._envs)), bytes(log)]
                        + [a.tobytes() for a in self._state_arrays()])

    def set_state(self, state: bytes) -> None:
        """Restores a `get_state` of an env built with the same arguments."""
        self._check_open()
        if not isinstance(state, bytes) or len(state) != self._state_size(self.num_envs):
            raise UserError("this saved environment state belongs to a differently configured VecEnv")
        started, envs, log, *parts = self._state_sections(state, self.num_envs)
        self._started = bool(started[0])
        ffi.memmove(self._envs, envs, envs.size)
        ffi.memmove(ffi.addressof(self._vec.log), log, len(log))
        for array, part in zip(self._state_arrays(), parts):
            array.reshape(-1).view(np.uint8)[:] = part.reshape(-1)

    def _section_sizes(self) -> list[int]:
        """get_state's sections, in order: a section's bytes per env, or -n for n bytes of the whole
        (the started flag, the log)."""
        per_env = [a.nbytes // self.num_envs for a in self._state_arrays()]
        return [-1, ffi.sizeof("gc_env"), -ffi.sizeof("gc_env_log")] + per_env

    def _state_size(self, num_envs: int) -> int:
        return sum(-size if size < 0 else size * num_envs for size in self._section_sizes())

    def _state_sections(self, state: bytes, num_envs: int) -> list:
        """A get_state of `num_envs` envs in sections: the whole's as bytes, the per-env ones as
        uint8 arrays [num_envs, bytes per env]."""
        sections, at = [], 0
        for size in self._section_sizes():
            if size < 0:
                sections.append(state[at:at - size])
                at -= size
            else:
                sections.append(np.frombuffer(state, np.uint8, num_envs * size, at).reshape(num_envs, size))
                at += num_envs * size
        return sections

    def join_states(self, states: list[bytes], numbers: list[np.ndarray], num_envs: int) -> bytes:
        """The get_state of one env of `num_envs` envs from the states of envs holding its envs
        `numbers` (each such env built like this one but for its envs; together every env once):
        each env's part where its number says, the whole's parts (started, log) this env's."""
        parts = [self._state_sections(state, len(envs)) for state, envs in zip(states, numbers)]
        out = []
        for i, own in enumerate(self._state_sections(self.get_state(), self.num_envs)):
            if isinstance(own, bytes):
                out.append(own)
                continue
            joined = np.zeros((num_envs, own.shape[1]), np.uint8)
            for part, envs in zip(parts, numbers):
                joined[envs] = part[i]
            out.append(joined.tobytes())
        return b"".join(out)

    def share_of_state(self, state: bytes, numbers: np.ndarray, num_envs: int) -> bytes:
        """The part of a get_state of `num_envs` envs that an env holding its envs `numbers` sets."""
        return b"".join(section if isinstance(section, bytes) else section[numbers].tobytes()
                        for section in self._state_sections(state, num_envs))

    def _state_arrays(self) -> list[np.ndarray]:
        return [self._observations, self._action_masks, self._actions, self._rewards, self._terminals,
                self._opponent_tags, self._slot_sides]

    def close(self) -> None:
        """Frees the bots' search pools and stops the step threads; the env cannot be used afterwards."""
        if self._executor is not None:
            self._executor.shutdown()
            self._executor = None
        for pool in self._pools:
            if pool != ffi.NULL:
                lib.gc_mcts_free(pool)
        self._pools = []
        if self._vec is not None:
            lib.gc_vec_close(self._vec)
            self._vec = None

    def __del__(self):
        self.close()

    def __enter__(self) -> "VecEnv":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._vec is None:
            raise UserError("this VecEnv is closed")

    def _load_actions(self, actions) -> None:
        actions = np.asarray(actions)
        if actions.shape != self._actions.shape:
            raise UserError(f"actions must have shape {self._actions.shape}, got {actions.shape}")
        if actions.dtype.kind not in "iu":
            raise UserError(f"actions must be integers, got dtype {actions.dtype}")
        if actions.dtype != np.int32 and actions.size:
            low, high = actions.min(), actions.max()
            # Out-of-range actions are legal inputs (illegal moves); only values int32 cannot hold
            # would silently wrap into a different action.
            if low < np.iinfo(np.int32).min or high > np.iinfo(np.int32).max:
                raise UserError(f"actions must fit in int32, got values in [{low}, {high}]")
        np.copyto(self._actions, actions, casting="unsafe")


def _summary(log) -> dict[str, float]:
    """What pop_log reports about the sums of a gc_env_log (see VecEnv)."""
    games, wins = log.games, log.slot0_wins
    out = {
        "games": games,
        "episode_return": _mean(log.episode_return, games),
        "episode_length": _mean(log.episode_length, games),
        "invalid_rate": _mean(log.invalid_rate, games),
        "stalemate_rate": _mean(log.stalemates, games),
        "games_as_guerrilla": log.games_as_guerrilla,
        "wins_as_guerrilla": log.wins_as_guerrilla,
        "games_as_coin": log.games_as_coin,
        "wins_as_coin": log.wins_as_coin,
        "slot_0_score": _mean(wins, games),
        "slot_1_score": _mean(games - wins, games),
        "slot_0_score_as_guerrilla": _mean(log.wins_as_guerrilla, log.games_as_guerrilla),
        "slot_0_score_as_coin": _mean(log.wins_as_coin, log.games_as_coin),
        "hist_score": _mean(log.hist_wins, log.hist_n),
        "hist_n": log.hist_n,
    }
    for i in range(len(log.hist_n_bank)):
        out[f"hist_score_bank_{i}"] = _mean(log.hist_wins_bank[i], log.hist_n_bank[i])
        out[f"hist_n_bank_{i}"] = log.hist_n_bank[i]
    out["bot_score"] = _mean(log.bot_wins, log.bot_n)
    out["bot_n"] = log.bot_n
    return out


def _mean(total: float, count: float) -> float:
    return total / count if count else math.nan


# What pop_log returns, in this order (the trainer's metrics.csv columns).
LOG_FIELDS = tuple(_summary(_ZERO_LOG))


def _check_bot(code: int) -> None:
    if code != 0:
        raise UserError(f"the bot opponent failed (engine error {code})")
