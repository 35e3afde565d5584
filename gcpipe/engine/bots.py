"""The built-in bots (rules.md §7) from short specs, and bot-vs-bot games played wholly in C.

Specs: "random", "greedy", "mcts[:ITERATIONS[:EXPLORATION[:ROLLOUT]]]", e.g. "mcts:2000" or
"mcts:2000:0.7:random"; MCTS defaults are 256 iterations, c = 0.7, greedy rollouts.  Every bot
draws from the game's own generator, so a game between bots is a pure function of its seed.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from gcpipe._engine import ffi, lib
from gcpipe.engine.game import END_REASONS, Game
from gcpipe.errors import UserError

KINDS = {"random": 0, "greedy": 1, "mcts": 2}        # GC_BOT_*
ROLLOUTS = {"random": 0, "greedy": 1}                # GC_ROLLOUT_*
MCTS_DEFAULT_ITERATIONS, MCTS_DEFAULT_EXPLORATION, MCTS_DEFAULT_ROLLOUT = 256, 0.7, "greedy"
# One node per iteration (40 bytes each): this bounds a workspace to about 400 MB.
MCTS_MAX_ITERATIONS = 10_000_000
TOURNAMENT_PLY_CAP = 600                             # rules.md §8: then COIN wins


@dataclass(frozen=True)
class BotSpec:
    """What a bot is; `str()` gives its canonical spec ("mcts:2000:0.7:greedy")."""
    kind: str
    iterations: int = 0
    exploration: float = 0.0
    rollout: str = ""

    def __str__(self) -> str:
        if self.kind != "mcts":
            return self.kind
        return f"mcts:{self.iterations}:{self.exploration:g}:{self.rollout}"

    def c_bot(self):
        """The engine's `gc_bot` for this spec (kept alive by the returned cdata)."""
        return ffi.new("gc_bot *", {"kind": KINDS[self.kind], "iterations": self.iterations,
                                    "exploration": self.exploration, "rollout": ROLLOUTS.get(self.rollout, 0)})


def parse_bot(spec: str) -> BotSpec:
    """Reads a bot spec; raises UserError saying what is wrong with a bad one."""
    if not isinstance(spec, str):
        raise UserError(f"a bot spec is a string like 'greedy' or 'mcts:2000', got {spec!r}")
    kind, *fields = spec.strip().split(":")
    if kind not in KINDS:
        raise UserError(f"unknown bot {spec!r}: use random, greedy or mcts[:ITERATIONS[:EXPLORATION[:ROLLOUT]]]")
    if kind != "mcts":
        if fields:
            raise UserError(f"bot {spec!r}: {kind} takes no settings")
        return BotSpec(kind)
    if len(fields) > 3:
        raise UserError(f"bot {spec!r}: mcts takes at most ITERATIONS:EXPLORATION:ROLLOUT")
    fields += [""] * (3 - len(fields))
    iterations = _parse_iterations(fields[0], spec) if fields[0] else MCTS_DEFAULT_ITERATIONS
    exploration = _parse_exploration(fields[1], spec) if fields[1] else MCTS_DEFAULT_EXPLORATION
    rollout = fields[2] or MCTS_DEFAULT_ROLLOUT
    if rollout not in ROLLOUTS:
        raise UserError(f"bot {spec!r}: rollout must be random or greedy, got {rollout!r}")
    return BotSpec("mcts", iterations, exploration, rollout)


def _parse_iterations(text: str, spec: str) -> int:
    try:
        iterations = int(text)
    except ValueError:
        raise UserError(f"bot {spec!r}: iterations must be a whole number, got {text!r}") from None
    if not 1 <= iterations <= MCTS_MAX_ITERATIONS:
        raise UserError(f"bot {spec!r}: iterations must be between 1 and {MCTS_MAX_ITERATIONS}")
    return iterations


def _parse_exploration(text: str, spec: str) -> float:
    try:
        exploration = float(text)
    except ValueError:
        raise UserError(f"bot {spec!r}: exploration must be a number, got {text!r}") from None
    if not math.isfinite(exploration) or exploration < 0:
        raise UserError(f"bot {spec!r}: exploration must be a finite number >= 0")
    return exploration


def _as_spec(bot: BotSpec | str) -> BotSpec:
    return bot if isinstance(bot, BotSpec) else parse_bot(bot)


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
    """A bot ready to move; an MCTS bot keeps one node pool for all its decisions."""

    def __init__(self, spec: BotSpec | str):
        self.spec = _as_spec(spec)
        self._c_bot = self.spec.c_bot()
        self._workspace = mcts_workspace(self.spec)

    def choose(self, game: Game) -> int:
        """The bot's action for the side to move.  The game's position is unchanged; its
        generator advances by the bot's draws (as it does in the published tournaments)."""
        action = lib.gc_bot_choose(game._state, self._c_bot, self._workspace)
        if action < 0:
            raise UserError("the bot cannot move: the game is over" if game.is_terminal()
                            else "the bot cannot move: the side to move has no legal action")
        return action

    def __repr__(self) -> str:
        return f"Bot({str(self.spec)!r})"


@dataclass(frozen=True)
class GameResults:
    """Per game: winner (0 Guerrilla, 1 COIN, as Game.winner), plies, end reason (END_REASONS index)."""
    winners: np.ndarray
    plies: np.ndarray
    end_reasons: np.ndarray

    def end_reason_names(self) -> list[str]:
        return [END_REASONS[r] for r in self.end_reasons]


def play_games(guerrilla: BotSpec | str, coin: BotSpec | str, seeds, ply_cap: int = TOURNAMENT_PLY_CAP) -> GameResults:
    """Plays one game per generator seed from the start position, both sides bots, in C
    (no tick, no timeout; after `ply_cap` plies COIN wins, rules.md §8)."""
    guerrilla_spec, coin_spec = _as_spec(guerrilla), _as_spec(coin)
    seeds = np.asarray(seeds)
    if seeds.ndim != 1 or (seeds.size and (seeds.dtype.kind not in "iu" or seeds.min() < 0
                                           or seeds.max() > 0xFFFFFFFF)):
        raise UserError("seeds must be a list of integers in 0 .. 2**32-1")
    if ply_cap < 1:
        raise UserError(f"ply_cap must be positive, got {ply_cap}")
    seeds = np.ascontiguousarray(seeds, dtype=np.uint32)
    n = len(seeds)
    winners, plies, ends = np.zeros(n, np.uint8), np.zeros(n, np.uint16), np.zeros(n, np.uint8)
    workspace = mcts_workspace(guerrilla_spec, coin_spec)
    code = lib.gc_play_bot_games(n, ffi.from_buffer("uint32_t[]", seeds), guerrilla_spec.c_bot(), coin_spec.c_bot(),
                                 workspace, ply_cap, ffi.from_buffer("uint8_t[]", winners),
                                 ffi.from_buffer("uint16_t[]", plies), ffi.from_buffer("uint8_t[]", ends))
    if code < 0:  # the specs were validated and the pool sized for them: an engine bug
        raise RuntimeError(f"the engine refused the bots {guerrilla_spec} / {coin_spec} (code {code})")
    return GameResults(winners=winners.astype(np.int8) - 1, plies=plies, end_reasons=ends)
