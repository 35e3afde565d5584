"""The engine's bots as players (rules.md §7): random, greedy and MCTS choose in C, drawing from
each game's own generator, and keep no state between plies."""
from __future__ import annotations

import numpy as np

from gcpipe.engine import GameBatch
from gcpipe.engine.bots import MCTS_MAX_ITERATIONS, BotSpec, GameResults, mcts_workspace, play_games
from gcpipe.protocol import RuntimePlayer


class BotPlayer(RuntimePlayer):
    def __init__(self, settings: dict):
        self.spec = BotSpec(self.kind, **settings)
        self._c_bot = self.spec.c_bot()
        self._workspace = mcts_workspace(self.spec)

    def choose(self, games: GameBatch, slots: np.ndarray) -> np.ndarray:
        return games.bot_choose(slots, self._c_bot, self._workspace)

    def play_whole_games(self, coin: RuntimePlayer, seeds: np.ndarray, ply_cap: int) -> GameResults | None:
        """Games against another engine bot are played whole in C, several times faster than
        ply by ply; None for any other opponent."""
        if not isinstance(coin, BotPlayer):
            return None
        # Searches never overlap within a process, so the larger pool serves both sides.
        workspace = max((self, coin), key=lambda bot: bot.spec.iterations)._workspace
        return play_games(self.spec, coin.spec, seeds, ply_cap, workspace)


class RandomPlayer(BotPlayer):
    """A uniformly random legal action."""
    kind = "random"


class GreedyPlayer(BotPlayer):
    """The action capturing the most, ties broken at random."""
    kind = "greedy"


class MctsPlayer(BotPlayer):
    """UCT search; "MCTS 2K" = 2000 iterations, exploration 0.7, greedy rollouts."""
    kind = "mcts"
    schema = {"properties": {
        "iterations": {"type": "integer", "minimum": 1, "maximum": MCTS_MAX_ITERATIONS, "default": 256,
                       "description": "UCT iterations per decision (MCTS 2K: 2000)."},
        "exploration": {"type": "number", "minimum": 0, "default": 0.7, "description": "UCT's exploration constant."},
        "rollout": {"enum": ["random", "greedy"], "default": "greedy",
                    "description": "The bot that plays the rollouts to the end of the game."},
    }}
    spec_fields = ("iterations", "exploration", "rollout")
    task_games = 1   # seconds per game
    pairs_per_step = 16

    @classmethod
    def default_name(cls, settings: dict) -> str:
        """mcts:2000 -> "mcts2000"; settings other than the defaults are spelled out."""
        name = f"mcts{settings['iterations']}"
        defaults = cls.schema["properties"]
        if (settings["exploration"], settings["rollout"]) != (defaults["exploration"]["default"],
                                                              defaults["rollout"]["default"]):
            name += f"-c{settings['exploration']:g}-{settings['rollout']}"
        return name
