"""gcpipe's players as OpenSpiel bots, so OpenSpiel's tools (evaluate_bots, its tournaments) can
play them against OpenSpiel's algorithms."""
from __future__ import annotations

import pyspiel

from gcpipe.engine import Game


class GcpipeBot(pyspiel.Bot):
    """A single-game gcpipe player as a `pyspiel.Bot`: anything with `choose(game) -> action`
    (an engine `Bot`: random, greedy, MCTS), and optionally `new_game()` and `observe(game)`
    (a `NetworkBot`: a full-turn network also steps on the other side's plies, rules.md §9).

    gcpipe's players draw from the game's own generator (rules.md §8), which an OpenSpiel state
    does not carry; this bot keeps one of its own, seeded with `seed`, and lends it to each
    position it moves in, so its play is a function of the seed and the positions alone."""

    def __init__(self, player, seed: int):
        pyspiel.Bot.__init__(self)
        self.player = player
        self._rng = Game(seed).rng_state

    def restart_at(self, state) -> None:
        new_game = getattr(self.player, "new_game", None)
        if new_game is not None:
            new_game()

    def restart(self) -> None:
        self.restart_at(None)

    def inform_action(self, state, player_id, action) -> None:
        # Called before the other side's ply is applied: the position a full-turn net observes.
        observe = getattr(self.player, "observe", None)
        if observe is not None:
            observe(state.engine_game)

    def step(self, state) -> int:
        game = state.engine_game.clone()
        game.rng_state = self._rng
        action = self.player.choose(game)
        self._rng = game.rng_state
        return action
