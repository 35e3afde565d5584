"""The built-in bots (rules.md §7) and bot-vs-bot games played wholly in C.

A bot is a `BotSpec`: kind (random, greedy, mcts) and, for MCTS, iterations, exploration c and
rollout policy.  The specs users write (config entries, "mcts:2000") are read and checked by the
player kinds of gcpipe.players; this module takes settled specs.  Every bot draws from the game's
own generator, so a game between bots is a pure function of its seed.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from gcpipe._engine import ffi, lib
from gcpipe.engine.game import END_REASONS, SIDE_NAMES, TOURNAMENT_PLY_CAP, Game, sides_from_c
from gcpipe.errors import UserError

KINDS = {"random": lib.GC_BOT_RANDOM, "greedy": lib.GC_BOT_GREEDY, "mcts": lib.GC_BOT_MCTS}
ROLLOUTS = {"random": lib.GC_ROLLOUT_RANDOM, "greedy": lib.GC_ROLLOUT_GREEDY}
# One node per iteration (40 bytes each): this bounds a search's node pool to about 400 MB.
MCTS_MAX_ITERATIONS = 10_000_000


@dataclass(frozen=True)
class BotSpec:
    """What a bot is; iterations, exploration and rollout matter to MCTS only."""
    kind: str
    iterations: int = 0
    exploration: float = 0.0
    rollout: str = "greedy"

    def c_bot(self):
        """The engine's `gc_bot` for this spec (kept alive by the returned cdata)."""
        return ffi.new("gc_bot *", {"kind": KINDS[self.kind], "iterations": self.iterations,
                                    "exploration": self.exploration, "rollout": ROLLOUTS[self.rollout]})


def kinds_by_side(opponent) -> tuple[str, str]:
    """The bot kinds (Guerrilla's, COIN's) of a training `opponent`: one kind for both sides, or a
    mapping {"guerrilla": kind, "coin": kind} naming the bot that plays each side.  UserError for
    anything else."""
    if isinstance(opponent, str):
        kinds = (opponent, opponent)
    elif isinstance(opponent, Mapping) and set(opponent) == set(SIDE_NAMES):
        kinds = tuple(opponent[side] for side in SIDE_NAMES)
    else:
        raise UserError(f"opponent must be a bot kind or a mapping with keys {' and '.join(SIDE_NAMES)}, "
                        f"got {opponent!r}")
    for kind in kinds:
        if kind not in KINDS:
            raise UserError(f"unknown opponent {kind!r}; choose one of {', '.join(KINDS)}")
    return kinds


class _Workspace:
    """An MCTS node pool for searches of up to `iterations` iterations (freed with the object)."""

    def __init__(self, iterations: int):
        pool = lib.gc_mcts_new(iterations + 1)
        if pool == ffi.NULL:
            raise MemoryError(f"cannot allocate an MCTS node pool for {iterations} iterations")
        self.pointer = ffi.gc(pool, lib.gc_mcts_free)


def mcts_workspace(*specs: BotSpec):
    """A node pool big enough for every MCTS bot among `specs` (searches must not overlap), or
    NULL when none is MCTS: the `workspace` of gc_bot_choose and gc_play_bot_games."""
    iterations = [s.iterations for s in specs if s.kind == "mcts"]
    return _Workspace(max(iterations)).pointer if iterations else ffi.NULL


class Bot:
    """A bot ready to move in single `Game`s; an MCTS bot keeps one node pool for all its decisions."""

    def __init__(self, spec: BotSpec):
        self.spec = spec
        self._c_bot = spec.c_bot()
        self._workspace = mcts_workspace(spec)

    def choose(self, game: Game) -> int:
        """The bot's action for the side to move.  The game's position is unchanged; its
        generator advances by the bot's draws (as it does in the published tournaments)."""
        action = lib.gc_bot_choose(game._state, self._c_bot, self._workspace)
        if action < 0:
            raise UserError("the bot cannot move: the game is over" if game.is_terminal()
                            else "the bot cannot move: the side to move has no legal action")
        return action

    def __repr__(self) -> str:
        return f"Bot({self.spec})"


@dataclass(frozen=True)
class GameResults:
    """Per game: winner (GUERRILLA or COIN), plies, end reason (END_REASONS index)."""
    winners: np.ndarray
    plies: np.ndarray
    end_reasons: np.ndarray

    def end_reason_names(self) -> list[str]:
        return [END_REASONS[r] for r in self.end_reasons]


def play_games(guerrilla: BotSpec, coin: BotSpec, seeds, ply_cap: int = TOURNAMENT_PLY_CAP,
               workspace=None) -> GameResults:
    """Plays one game per generator seed from the start position, both sides bots, in C
    (no tick, no timeout; after `ply_cap` plies COIN wins, rules.md §8).  `workspace`: an MCTS
    node pool from mcts_workspace(guerrilla, coin) to reuse across calls (default: a new one)."""
    seeds = np.asarray(seeds)
    if seeds.ndim != 1 or (seeds.size and (seeds.dtype.kind not in "iu" or seeds.min() < 0
                                           or seeds.max() > 0xFFFFFFFF)):
        raise UserError("seeds must be a list of integers in 0 .. 2**32-1")
    if ply_cap < 1:
        raise UserError(f"ply_cap must be positive, got {ply_cap}")
    seeds = np.ascontiguousarray(seeds, dtype=np.uint32)
    n = len(seeds)
    winners, plies, ends = np.zeros(n, np.uint8), np.zeros(n, np.uint16), np.zeros(n, np.uint8)
    if workspace is None:
        workspace = mcts_workspace(guerrilla, coin)
    code = lib.gc_play_bot_games(n, ffi.from_buffer("uint32_t[]", seeds), guerrilla.c_bot(), coin.c_bot(),
                                 workspace, ply_cap, ffi.from_buffer("uint8_t[]", winners),
                                 ffi.from_buffer("uint16_t[]", plies), ffi.from_buffer("uint8_t[]", ends))
    if code < 0:  # the specs were validated and the pool sized for them: an engine bug
        raise RuntimeError(f"the engine refused the bots {guerrilla} / {coin} (code {code})")
    return GameResults(winners=sides_from_c(winners), plies=plies, end_reasons=ends)
