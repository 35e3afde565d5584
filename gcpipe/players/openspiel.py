"""The `openspiel` player kind: OpenSpiel's algorithms as players in gcpipe's matches.

    players:
      osmcts: {kind: openspiel, algorithm: mcts, max_simulations: 1000, uct_c: 2.0, n_rollouts: 1, solve: true}

or the short spec `openspiel:mcts[:MAX_SIMULATIONS[:UCT_C[:N_ROLLOUTS]]]`.  `mcts` is OpenSpiel's
Python `MCTSBot` with its `RandomRolloutEvaluator`, the settings named as OpenSpiel names them
and defaulting to OpenSpiel's example (examples/mcts.py).  It plays the game registered by
gcpipe.openspiel, i.e. gcpipe's own rules in C.  Needs the `openspiel` extra: defining such a
player without it is one line saying what to install.

Reproducibility: each decision takes one draw from the game's own generator (rules.md §8) and
seeds the bot's numpy generator with it, so a game is a function of its seed, as with every
other player, whatever the worker count.
"""
from __future__ import annotations

from importlib import metadata

import numpy as np

from gcpipe.engine import GameBatch
from gcpipe.protocol import RuntimePlayer


def require_openspiel() -> None:
    """Registers the game with pyspiel; MissingExtraError (one line: what to install) without OpenSpiel."""
    import gcpipe.openspiel  # noqa: F401


class OpenSpielPlayer(RuntimePlayer):
    """An OpenSpiel bot over game slots.  The search starts afresh at every decision, so it keeps
    nothing per slot and observes nothing."""
    kind = "openspiel"
    schema = {"properties": {
        "algorithm": {"enum": ["mcts"], "default": "mcts",
                      "description": "OpenSpiel's algorithm: mcts (MCTSBot with RandomRolloutEvaluator)."},
        "max_simulations": {"type": "integer", "minimum": 1, "maximum": 10_000_000, "default": 1000,
                            "description": "Simulations per decision."},
        "uct_c": {"type": "number", "minimum": 0, "default": 2.0, "description": "UCT's exploration constant."},
        "n_rollouts": {"type": "integer", "minimum": 1, "maximum": 10_000, "default": 1,
                       "description": "Random rollouts per leaf evaluation."},
        "solve": {"type": "boolean", "default": True,
                  "description": "Back up the exact values of solved subtrees (MCTS-Solver)."},
    }}
    spec_fields = ("algorithm", "max_simulations", "uct_c", "n_rollouts")
    task_games = 1      # seconds per game
    pairs_per_step = 16

    @classmethod
    def spec_usage(cls) -> str:
        return "openspiel:mcts[:MAX_SIMULATIONS[:UCT_C[:N_ROLLOUTS]]]"

    @classmethod
    def define(cls, settings: dict) -> tuple[dict, dict]:
        """Checks that OpenSpiel is installed; the ledger records the OpenSpiel release too."""
        require_openspiel()
        settings = {key: settings[key] for key in cls.schema["properties"]}
        return settings, {"kind": cls.kind, **settings, "open_spiel": metadata.version("open_spiel")}

    @classmethod
    def default_name(cls, settings: dict) -> str:
        """openspiel:mcts:1000 -> "os-mcts1000"; settings other than the defaults are spelled out."""
        defaults = {key: value["default"] for key, value in cls.schema["properties"].items()}
        name = f"os-{settings['algorithm']}{settings['max_simulations']}"
        if settings["uct_c"] != defaults["uct_c"]:
            name += f"-c{settings['uct_c']:g}"
        if settings["n_rollouts"] != defaults["n_rollouts"]:
            name += f"-r{settings['n_rollouts']}"
        if settings["solve"] != defaults["solve"]:
            name += "-nosolve"
        return name

    def __init__(self, settings: dict):
        require_openspiel()
        import pyspiel
        from open_spiel.python.algorithms import mcts

        from gcpipe.openspiel import SHORT_NAME

        self._game = pyspiel.load_game(SHORT_NAME)
        self._random = np.random.RandomState()
        evaluator = mcts.RandomRolloutEvaluator(settings["n_rollouts"], self._random)
        self._bot = mcts.MCTSBot(self._game, settings["uct_c"], settings["max_simulations"], evaluator,
                                 solve=settings["solve"], random_state=self._random)

    def choose(self, games: GameBatch, slots: np.ndarray) -> np.ndarray:
        actions = np.empty(len(slots), np.int32)
        for k, slot in enumerate(slots):
            self._random.seed(games.draw(int(slot)))
            actions[k] = self._bot.step(self._game.state_at(games.game(int(slot))))
        return actions
