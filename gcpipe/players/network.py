"""Policy networks as players (rules.md §9): one recurrent state per game slot, moves sampled in C
from the softmax over the legal logits with each game's own generator.

The network's arithmetic sits behind `gcpipe.nn.player.NetworkPlayer` (forward and advance over
slots, reset of slots); this class only decides which slots step on which observations.  A
full-turn (standard 5c) net also steps on the positions where the other side moves (`observe`:
the state advances, no output is computed).
"""
from __future__ import annotations

import numpy as np

from gcpipe import paths
from gcpipe.engine import GameBatch
from gcpipe.errors import UserError
from gcpipe.protocol import CHECKPOINT_SCHEMA, RuntimePlayer, checkpoint_path


class NetPlayer(RuntimePlayer):
    """A checkpoint file (`path`, SHA-256 checked when `sha256` is given) or the final.bin of a
    pipeline training run (`run`); `full_turn` defaults from the checkpoint layout."""
    kind = "net"
    schema = {**CHECKPOINT_SCHEMA, "properties": {
        **CHECKPOINT_SCHEMA["properties"],
        "full_turn": {"type": "boolean",
                      "description": "Step on the other side's plies too (standard 5c). Default - from the layout."},
    }}
    task_games = 512
    pairs_per_step = 256

    @classmethod
    def spec_usage(cls) -> str:
        return "net:PATH"

    @classmethod
    def spec_settings(cls, args: str | None) -> dict:
        if not args:
            raise UserError("write net:PATH")
        return {"path": args}      # a path may hold ':' itself

    @classmethod
    def define(cls, settings: dict) -> tuple[dict, dict]:
        """Loads the checkpoint now, so a missing, malformed or mismatching file fails before any game."""
        from gcpipe.nn.checkpoint import load  # torch is imported only when a net plays

        path = checkpoint_path(settings)
        checkpoint = load(path, expected_sha256=settings.get("sha256"))
        full_turn = settings.get("full_turn", checkpoint.full_turn)
        return ({"path": path, "sha256": checkpoint.sha256, "full_turn": full_turn},
                {"kind": cls.kind, "path": path, "sha256": checkpoint.sha256, "layout": checkpoint.layout,
                 "full_turn": full_turn})

    @classmethod
    def default_name(cls, settings: dict) -> str:
        return paths.checkpoint_name(settings["path"])

    @classmethod
    def build(cls, settings: dict) -> "NetPlayer":
        from gcpipe.nn.checkpoint import load
        from gcpipe.nn.player import NetworkPlayer

        # The SHA-256 checked when the player was defined must still hold where it plays.
        return cls(NetworkPlayer(load(settings["path"], expected_sha256=settings["sha256"]),
                                 full_turn=settings["full_turn"]))

    def __init__(self, network):
        """A player of a NetworkPlayer (e.g. one of the policy being trained, built in memory)."""
        self.network = network

    def start(self, n_slots: int) -> None:
        self.network.start(n_slots)

    def new_games(self, slots: np.ndarray) -> None:
        self.network.reset(slots)

    def observe(self, games: GameBatch, slots: np.ndarray) -> None:
        if self.network.full_turn:
            self.network.advance(slots, games.observe(slots)[0])

    def evaluate(self, games: GameBatch, slots: np.ndarray) -> np.ndarray:
        """The net's outputs [k, 257] on the positions of `slots`, as the next `choose` computes
        them (logits, then the value row; the pass logit 255 is the COIN's value), the state unchanged."""
        return self.network.peek(slots, games.observe(slots)[0])

    def choose(self, games: GameBatch, slots: np.ndarray) -> np.ndarray:
        return games.sample(slots, self.network.forward(slots, games.observe(slots)[0]))
