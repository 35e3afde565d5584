"""The `openspiel` player kind: OpenSpiel's algorithms as players in gcpipe's matches.

    players:
      osmcts: {kind: openspiel, algorithm: mcts, max_simulations: 1000, uct_c: 2.0, n_rollouts: 1, solve: true}

or the short spec `openspiel:mcts[:MAX_SIMULATIONS[:UCT_C[:N_ROLLOUTS]]]`.  `mcts` is OpenSpiel's
Python `MCTSBot` with its `RandomRolloutEvaluator`, the settings named as OpenSpiel names them
and defaulting to OpenSpiel's example (examples/mcts.py).  It plays the game registered by
gcpipe.openspiel, i.e. gcpipe's own rules in C.  Needs the `openspiel` extra.

Reproducibility: each decision takes one draw from the game's own generator (rules.md §8) and
seeds the bot's numpy generator with it, so a game is a function of its seed, as with every
other player, whatever the worker count.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from importlib import metadata

import numpy as np

from gcpipe.errors import UserError

ALGORITHMS = ("mcts",)
DEFAULTS = {"algorithm": "mcts", "max_simulations": 1000, "uct_c": 2.0, "n_rollouts": 1, "solve": True}
SPEC_FIELDS = ("max_simulations", "uct_c", "n_rollouts")      # after ALGORITHM, in this order
MAX_SIMULATIONS, MAX_ROLLOUTS = 10_000_000, 10_000


@dataclass(frozen=True)
class OpenSpielSpec:
    algorithm: str = DEFAULTS["algorithm"]
    max_simulations: int = DEFAULTS["max_simulations"]
    uct_c: float = DEFAULTS["uct_c"]
    n_rollouts: int = DEFAULTS["n_rollouts"]
    solve: bool = DEFAULTS["solve"]

    def __post_init__(self):
        if self.algorithm not in ALGORITHMS:
            raise UserError(f"openspiel algorithm must be one of {', '.join(ALGORITHMS)}, got {self.algorithm!r}")
        for key, low, high in (("max_simulations", 1, MAX_SIMULATIONS), ("n_rollouts", 1, MAX_ROLLOUTS)):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise UserError(f"openspiel {key} must be a whole number from {low} to {high}, got {value!r}")
        if (isinstance(self.uct_c, bool) or not isinstance(self.uct_c, (int, float))
                or not math.isfinite(self.uct_c) or self.uct_c < 0):
            raise UserError(f"openspiel uct_c must be a finite number >= 0, got {self.uct_c!r}")
        if not isinstance(self.solve, bool):
            raise UserError(f"openspiel solve must be true or false, got {self.solve!r}")
        object.__setattr__(self, "uct_c", float(self.uct_c))

    def identity(self) -> dict:
        """What the ledger records: the settings and the OpenSpiel release that played."""
        require_openspiel()
        return {"kind": "openspiel", "algorithm": self.algorithm, "max_simulations": self.max_simulations,
                "uct_c": self.uct_c, "n_rollouts": self.n_rollouts, "solve": self.solve,
                "open_spiel": metadata.version("open_spiel")}

    def default_name(self) -> str:
        """openspiel:mcts:1000 -> "os-mcts1000"; settings other than the defaults are spelled out."""
        name = f"os-{self.algorithm}{self.max_simulations}"
        if self.uct_c != DEFAULTS["uct_c"]:
            name += f"-c{self.uct_c:g}"
        if self.n_rollouts != DEFAULTS["n_rollouts"]:
            name += f"-r{self.n_rollouts}"
        if self.solve != DEFAULTS["solve"]:
            name += "-nosolve"
        return name


def parse_openspiel(text: str) -> OpenSpielSpec:
    """ALGORITHM[:MAX_SIMULATIONS[:UCT_C[:N_ROLLOUTS]]] (after `openspiel:`)."""
    algorithm, *values = text.split(":")
    if len(values) > len(SPEC_FIELDS):
        raise UserError(f"openspiel:{text}: write openspiel:mcts[:MAX_SIMULATIONS[:UCT_C[:N_ROLLOUTS]]]")
    settings = {}
    for key, value in zip(SPEC_FIELDS, values):
        if value:
            try:
                settings[key] = float(value) if key == "uct_c" else int(value)
            except ValueError:
                raise UserError(f"openspiel:{text}: {key} must be a number, got {value!r}") from None
    return OpenSpielSpec(algorithm=algorithm or DEFAULTS["algorithm"], **settings)


def require_openspiel() -> None:
    """Registers the game with pyspiel; one line saying what to install when OpenSpiel is absent."""
    import gcpipe.openspiel  # noqa: F401  (raises MissingExtraError)


class OpenSpielPlayer:
    """An OpenSpiel bot over game slots, in the batched player protocol: start(n_slots),
    new_games(slots), observe(games, slots) while the other side moves, and choose(games,
    slots) -> actions, which draws from each game's generator and leaves its position alone.
    The search starts afresh at every decision, so it keeps nothing per slot."""

    def __init__(self, spec: OpenSpielSpec):
        require_openspiel()
        import pyspiel
        from open_spiel.python.algorithms import mcts

        from gcpipe.openspiel import SHORT_NAME

        self.spec = spec
        self._game = pyspiel.load_game(SHORT_NAME)
        self._random = np.random.RandomState()
        evaluator = mcts.RandomRolloutEvaluator(spec.n_rollouts, self._random)
        self._bot = mcts.MCTSBot(self._game, spec.uct_c, spec.max_simulations, evaluator, solve=spec.solve,
                                 random_state=self._random)

    def start(self, n_slots: int) -> None:
        """Nothing to allocate."""

    def new_games(self, slots: np.ndarray) -> None:
        """Nothing to reset."""

    def observe(self, games, slots: np.ndarray) -> None:
        """Nothing to track."""

    def choose(self, games, slots: np.ndarray) -> np.ndarray:
        actions = np.empty(len(slots), np.int32)
        for k, slot in enumerate(slots):
            self._random.seed(games.draw(int(slot)))
            actions[k] = self._bot.step(self._game.state_at(games.game(int(slot))))
        return actions
