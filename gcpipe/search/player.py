"""The search player: a checkpoint's network guiding gc_search, over the game slots of a match.

Player protocol (as every player): `start(n_slots)`, `new_games(slots)`, `observe(games, slots)`
when the other side is about to move, `choose(games, slots)` when this player is.  Recurrent
state: the player keeps one MinGRU state per slot.  A standard-5c file steps on every ply
(rules.md §9): `observe` steps it on the position the other side is about to play, and the
search's root evaluation is the step on the player's own position, so after each ply the state is
exactly a network player's.  Inside the tree every node steps the net once more on its own
position from its parent's state.  A legacy (actor-only) file's state steps on its own positions
only; inside the tree it still steps on every node (the tree models both sides with one net),
and it has no value head: such a player must use value 'rollout'.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from gcpipe.engine import GameBatch
from gcpipe.errors import UserError
from gcpipe.nn.checkpoint import Checkpoint, load
from gcpipe.nn.inference import CompiledNet
from gcpipe.search.searcher import SearchResult, Searcher, games_per_call
from gcpipe.search.settings import SearchSettings


class SearchPlayer:
    def __init__(self, checkpoint: Checkpoint | str | Path, settings: SearchSettings, simd: str = "best"):
        if not isinstance(checkpoint, Checkpoint):
            checkpoint = load(checkpoint)
        if not checkpoint.has_value_head and settings.value != "rollout":
            raise UserError(f"checkpoint {checkpoint.path or '(in memory)'} has no value head (layout "
                            f"{checkpoint.layout}): a search with it needs value 'rollout'")
        self._init(CompiledNet(checkpoint.model, simd), settings, checkpoint.full_turn)

    @classmethod
    def from_net(cls, net: CompiledNet, settings: SearchSettings, full_turn: bool = True) -> "SearchPlayer":
        """A search player over a compiled standard-5c network (e.g. one being trained)."""
        player = cls.__new__(cls)
        player._init(net, settings, full_turn)
        return player

    def _init(self, net: CompiledNet, settings: SearchSettings, full_turn: bool) -> None:
        self.net, self.settings, self.full_turn = net, settings, full_turn
        self._states: np.ndarray | None = None
        self._searcher: Searcher | None = None
        self.last: SearchResult | None = None     # the statistics of the latest choose()

    def start(self, n_slots: int) -> None:
        if n_slots <= 0:
            raise UserError(f"a search player needs at least one game slot, got {n_slots}")
        self._states = self.net.new_states(n_slots)
        self._searcher = Searcher(self.settings, self.net, min(n_slots, games_per_call(self.settings, self.net)))

    def new_games(self, slots: np.ndarray) -> None:
        self._states[np.asarray(slots, np.int64)] = 0.0

    def observe(self, games: GameBatch, slots: np.ndarray) -> None:
        if self.full_turn and len(slots):
            slots = np.ascontiguousarray(slots, np.int32)
            obs, _ = games.observe(slots)
            self.net.step(self._states, slots, obs)

    def choose(self, games: GameBatch, slots: np.ndarray, want_policy: bool = False) -> np.ndarray:
        """Searches the games in `slots` (batch index = slot) and returns the moves, not applied."""
        self.last = self._searcher.run(games, slots, self._states, slots, want_policy)
        return self.last.actions
