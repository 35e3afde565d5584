"""Network inference for play (rules.md §9): batched single-step forwards over many games.

`NetworkPlayer` holds one recurrent state per game slot for one (player, side): `start(n)`,
`reset(slots)`, `forward(slots, obs) -> logits` and `advance(slots, obs)` are all its users see
(the `net` player kind, gcpipe.players.network, decides which slots step and samples the moves in
C).  The arithmetic is the C step of gcpipe.nn.inference, so a game's logits are bit-identical
however games are batched and on every machine.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from gcpipe.engine import NUM_ACTIONS, OBS_SIZE
from gcpipe.errors import UserError
from gcpipe.nn.checkpoint import Checkpoint, load
from gcpipe.nn.inference import OUTPUTS, CompiledNet


class NetworkPlayer:
    """One network's recurrent states for `n_slots` concurrent games.

    `full_turn` (default: from the layout) says whether the net also steps on the waiting side's
    plies (standard 5c) or only on its own turns (legacy); the caller reads it to decide which
    slots to step (`advance` for a waiting side: the state moves, no output is computed)."""

    def __init__(self, checkpoint: Checkpoint | str | Path, full_turn: bool | None = None, simd: str = "best"):
        if not isinstance(checkpoint, Checkpoint):
            checkpoint = load(checkpoint)
        self._init(CompiledNet.from_arrays(checkpoint.net, simd), checkpoint.full_turn if full_turn is None else full_turn)

    @classmethod
    def from_net(cls, net: CompiledNet, full_turn: bool) -> "NetworkPlayer":
        """A player of a compiled network (e.g. one being trained, or sent to a worker as arrays)."""
        player = cls.__new__(cls)
        player._init(net, full_turn)
        return player

    def _init(self, net: CompiledNet, full_turn: bool) -> None:
        self.net, self.full_turn = net, bool(full_turn)
        self.hidden, self.layers = self.net.hidden, self.net.layers
        self._states: np.ndarray | None = None
        self._outputs = np.zeros((0, OUTPUTS), np.float32)

    @property
    def n_slots(self) -> int:
        return 0 if self._states is None else len(self._states)

    def start(self, n_slots: int) -> None:
        """Allocates zeroed states for game slots 0..n_slots-1."""
        if n_slots <= 0:
            raise UserError(f"a network player needs at least one game slot, got {n_slots}")
        self._states = self.net.new_states(n_slots)
        self._outputs = np.zeros((n_slots, OUTPUTS), np.float32)

    def reset(self, slots: np.ndarray) -> None:
        """Zeroes the states of `slots` (a new game starts there)."""
        self._states[self._slot_array(slots)] = 0.0

    def state(self, slots: np.ndarray) -> np.ndarray:
        """A copy of the states [L, k, H] of `slots`."""
        return self._states[self._slot_array(slots)].transpose(1, 0, 2).copy()

    def forward(self, slots: np.ndarray, obs: np.ndarray) -> np.ndarray:
        """Advances the states of `slots` by one step on observations obs [k,120] (uint8) and returns
        the logits [k,256] float32 — a view of a buffer that the next call overwrites."""
        slots, obs = self._checked(slots, obs)
        out = self._outputs[:len(slots)]
        self.net.step(self._states, slots, obs, out)
        return out[:, :NUM_ACTIONS]

    def peek(self, slots: np.ndarray, obs: np.ndarray) -> np.ndarray:
        """The outputs [k, 257] (logits, then the value) that `forward` would compute, the states of
        `slots` left unchanged (the step runs on a copy)."""
        slots, obs = self._checked(slots, obs)
        return peek(self.net, self._states, slots, obs)

    def advance(self, slots: np.ndarray, obs: np.ndarray) -> None:
        """`forward` without the outputs: a full-turn net's step on the other side's ply."""
        slots, obs = self._checked(slots, obs)
        self.net.step(self._states, slots, obs)

    def _checked(self, slots, obs) -> tuple[np.ndarray, np.ndarray]:
        if self._states is None:
            raise RuntimeError("call start(n_slots) before forward")
        slots = self._slot_array(slots)
        if obs.shape != (len(slots), OBS_SIZE):
            raise ValueError(f"obs must have shape ({len(slots)}, {OBS_SIZE}), got {obs.shape}")
        return slots, np.ascontiguousarray(obs, dtype=np.uint8)

    def _slot_array(self, slots) -> np.ndarray:
        slots = np.ascontiguousarray(slots, dtype=np.int32)
        if len(slots) and (slots.min() < 0 or slots.max() >= self.n_slots):
            raise IndexError(f"slots must lie within 0..{self.n_slots - 1}")
        if len(slots) > 1 and np.bincount(slots).max() > 1:
            raise IndexError("slots must be distinct")
        return slots


def peek(net: CompiledNet, states: np.ndarray, slots: np.ndarray, obs: np.ndarray) -> np.ndarray:
    """The outputs [k, 257] of one step of `net` from states[slots[k]] on obs[k], the states unchanged."""
    copies = np.ascontiguousarray(states[slots])
    out = np.zeros((len(slots), OUTPUTS), np.float32)
    net.step(copies, np.arange(len(slots), dtype=np.int32), obs, out)
    return out
