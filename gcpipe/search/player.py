"""The search player: a checkpoint's network guiding gc_search, over the game slots of a match; the
`search` kind of gcpipe.players (config `{kind: search, path|run, simulations, ...}`, short spec
`search:PATH:SIMULATIONS`).

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

import re
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from gcpipe import paths
from gcpipe.engine import GameBatch
from gcpipe.errors import UserError
from gcpipe.protocol import CHECKPOINT_SCHEMA, RuntimePlayer, checkpoint_path
from gcpipe.search.settings import SETTINGS_SCHEMA, SearchSettings, make_settings

if TYPE_CHECKING:   # torch loads only when a search plays, not whenever players are defined
    from gcpipe.nn.checkpoint import Checkpoint
    from gcpipe.nn.inference import CompiledNet
    from gcpipe.search.searcher import SearchResult, Searcher


class SearchPlayer(RuntimePlayer):
    """A search guided by a checkpoint's net: the file (`path`, SHA-256 checked when `sha256` is
    given) or a training run's final.bin (`run`), and the search settings (SearchSettings; with
    `calibration: FILE`, the value coefficients a `gcpipe calibrate` file measured)."""
    kind = "search"
    schema = {**CHECKPOINT_SCHEMA, "properties": {
        **CHECKPOINT_SCHEMA["properties"], **SETTINGS_SCHEMA,
        "calibration": {"type": "string", "minLength": 1,
                        "description": "a value calibration file of this checkpoint (gcpipe calibrate); "
                                       "sets value 'calibrated'"},
    }}
    task_games = 256    # one full batch of concurrent searches per task
    pairs_per_step = 16

    @classmethod
    def spec_usage(cls) -> str:
        return "search:PATH:SIMULATIONS"

    @classmethod
    def spec_settings(cls, args: str | None) -> dict:
        path, _, simulations = (args or "").rpartition(":")
        if not path or not re.fullmatch(r"[0-9]+", simulations):
            raise UserError("write search:PATH:SIMULATIONS")
        return {"path": path, "simulations": int(simulations)}

    @classmethod
    def define(cls, settings: dict) -> tuple[dict, dict]:
        """Loads the checkpoint and checks it can guide this search, before any game."""
        from gcpipe.nn.checkpoint import load
        from gcpipe.search.calibration import calibrated_settings

        if settings.get("value") == "calibrated" and "value_coef" not in settings and "calibration" not in settings:
            raise UserError("value 'calibrated' needs a calibration file (calibration: FILE, from gcpipe calibrate) "
                            "or value_coef")
        path = checkpoint_path(settings)
        checkpoint = load(path, expected_sha256=settings.get("sha256"))
        search = make_settings("search settings",
                               **{key: value for key, value in settings.items() if key in SETTINGS_SCHEMA})
        if "calibration" in settings:
            search = calibrated_settings(search, settings["calibration"], checkpoint.sha256, "calibration")
        cls(checkpoint, search)   # a file the search cannot use fails here
        return ({"path": path, "sha256": checkpoint.sha256, "search": search},
                {"kind": cls.kind, "path": path, "sha256": checkpoint.sha256, "layout": checkpoint.layout,
                 **search.identity()})

    @classmethod
    def default_name(cls, settings: dict) -> str:
        return f"{paths.checkpoint_name(settings['path'])}-s{settings['search'].simulations}"

    @classmethod
    def build(cls, settings: dict) -> "SearchPlayer":
        from gcpipe.nn.checkpoint import load

        # The SHA-256 checked when the player was defined must still hold where it plays.
        return cls(load(settings["path"], expected_sha256=settings["sha256"]), settings["search"])

    def __init__(self, checkpoint: Checkpoint | str | Path, settings: SearchSettings, simd: str = "best"):
        from gcpipe.nn.checkpoint import Checkpoint, load
        from gcpipe.nn.inference import CompiledNet

        if not isinstance(checkpoint, Checkpoint):
            checkpoint = load(checkpoint)
        if not checkpoint.has_value_head and settings.value != "rollout":
            raise UserError(f"checkpoint {checkpoint.path or '(in memory)'} has no value head (layout "
                            f"{checkpoint.layout}): a search with it needs value 'rollout'")
        self._init(CompiledNet.from_arrays(checkpoint.net, simd), settings, checkpoint.full_turn)

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
        from gcpipe.search.searcher import Searcher, games_per_call

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

    def evaluate(self, games: GameBatch, slots: np.ndarray) -> np.ndarray:
        """The net's outputs [k, 257] on the positions of `slots`: the root step of the next `choose`
        (logits, then the value row), the state unchanged."""
        from gcpipe.nn.player import peek

        slots = np.ascontiguousarray(slots, np.int32)
        return peek(self.net, self._states, slots, games.observe(slots)[0])

    def root_edges(self, k: int = 0) -> list[tuple[int, int, float, int]]:
        """The root's visited edges in game k of the latest `choose`: (action, visits, W (Guerrilla's
        value sum), child node index), in the tree's creation order."""
        return self._searcher.root_edges(k)

    def principal_variation(self, k: int, first: int) -> list[int]:
        """The latest search's line in game k: `first` (the move chosen), then at each node the most
        visited child (the first created on a tie) down to an unexpanded node."""
        return self._searcher.principal_variation(k, first)

    def choose(self, games: GameBatch, slots: np.ndarray, want_policy: bool = False) -> np.ndarray:
        """Searches the games in `slots` (batch index = slot) and returns the moves, not applied."""
        self.last = self._searcher.run(games, slots, self._states, slots, want_policy)
        return self.last.actions
