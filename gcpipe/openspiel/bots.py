"""gcpipe's players as OpenSpiel bots, so OpenSpiel's tools (evaluate_bots, its tournaments) can
play them against OpenSpiel's algorithms."""
from __future__ import annotations

import numpy as np
import pyspiel

from gcpipe.engine import Game, GameBatch
from gcpipe.protocol import RuntimePlayer

_SLOT = np.zeros(1, np.int32)   # the one game


class GcpipeBot(pyspiel.Bot):
    """Any gcpipe player as a `pyspiel.Bot`: the runtime of a defined player
    (`gcpipe.players.parse_spec("mcts:2000").runtime()`), driven through the player protocol
    over a batch of one game.  A full-turn network also steps on the other side's plies
    (rules.md §9), told of them by `inform_action`.

    gcpipe's players draw from the game's own generator (rules.md §8), which an OpenSpiel state
    does not carry; this bot keeps one of its own, seeded with `seed`, and lends it to each
    position it moves in, so its play is a function of the seed and the positions alone."""

    def __init__(self, player: RuntimePlayer, seed: int):
        pyspiel.Bot.__init__(self)
        self.player = player
        self._games = GameBatch(1)
        self._rng = Game(seed).rng_state
        player.start(1)
        player.new_games(_SLOT)

    def restart_at(self, state) -> None:
        self.player.new_games(_SLOT)

    def restart(self) -> None:
        self.restart_at(None)

    def inform_action(self, state, player_id, action) -> None:
        # evaluate_bots calls it for the other side's plies only, before the ply is applied: the
        # position a full-turn net observes.
        self._games.put(0, state.engine_game)
        self.player.observe(self._games, _SLOT)

    def step(self, state) -> int:
        position = state.engine_game.clone()
        position.rng_state = self._rng
        self._games.put(0, position)
        action = int(self.player.choose(self._games, _SLOT)[0])
        self._rng = self._games.game(0).rng_state
        return action
