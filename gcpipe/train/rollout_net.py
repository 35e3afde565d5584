"""PPO's rollout step through the play-time C network (`rollout_net` c, and auto on the CPU;
nn/inference.py).

The rollout steps every network-played row once a tick.  torch's step runs each matrix product
over all rows and then a dozen elementwise passes over tensors of several MB; the C step takes
four rows at a time through the whole network in cache (csrc/gc_net.c), the rows split among the
training's threads.  Its outputs are the same on every machine and at every thread count
(csrc/gc_net.h), where torch's products are MKL's, which differ by CPU.  The update recomputes
the rollout's values and log-probabilities to the bit (the fixed-order products, the same gates,
csrc/gc_gates.h, and the same draw arithmetic, train/policy.py), so PPO's first ratios are exactly
1.  Waiting slots (whose one legal move is the pass) get their values alone, skipping most of the
decoder.

The recurrent states live in the C step's layout [rows, L, H]; `states` is the [L, rows, H] view
the trainer indexes, so the trainer's own torch code (the initial states of the segments, the
reset at a game's end, saving and loading the run's state) reads and writes the same memory."""
from __future__ import annotations

import weakref

import numpy as np
import torch
from torch import Tensor

from gcpipe.nn.inference import OUTPUTS, CompiledNet
from gcpipe.nn.model import MinGRUPolicy
from gcpipe.train.row_threads import run_rows


class RolloutNet:
    """The C step of `rows` recurrent rows; `compile(model)` before stepping with new weights."""

    def __init__(self, rows: int, layers: int, hidden: int):
        self._storage = torch.zeros(rows, layers, hidden)
        self._states = self._storage.numpy()
        self.states = self._storage.permute(1, 0, 2)          # [L, rows, H], as PPO.state
        self._nets: weakref.WeakKeyDictionary[MinGRUPolicy, CompiledNet] = weakref.WeakKeyDictionary()

    def compile(self, model: MinGRUPolicy) -> None:
        """Lays out `model`'s current weights for the C step (after each update of a trained model;
        a frozen one needs it once)."""
        self._nets[model] = CompiledNet(model)

    def step(self, model: MinGRUPolicy, rows: Tensor, obs: Tensor, want_logits: Tensor | None = None
             ) -> tuple[Tensor, Tensor]:
        """Advances the states of `rows` (int32, CPU) on their observations obs [len(rows), 120]
        (uint8) with `model`'s compiled weights: (logits [n, 256], values [n]), views of one
        float32 [n, 257] array.  Rows where `want_logits` (bool [n]) is false get only their pass
        logit and value, their other logits 0 (the waiting slots: their one legal action is the pass)."""
        if model not in self._nets:
            self.compile(model)
        net = self._nets[model]
        slots, observations = rows.numpy(), obs.contiguous().numpy()
        wanted = None if want_logits is None else want_logits.contiguous().numpy().view(np.uint8)
        out = np.empty((len(slots), OUTPUTS), np.float32)
        run_rows(lambda first, end: net.step(self._states, slots[first:end], observations[first:end],
                                             out[first:end], None if wanted is None else wanted[first:end]),
                 len(slots))
        outputs = torch.from_numpy(out)
        return outputs[:, :OUTPUTS - 1], outputs[:, OUTPUTS - 1]

    def peek(self, model: MinGRUPolicy, rows: Tensor, obs: Tensor) -> tuple[Tensor, Tensor]:
        """The pass logits and values step would give, without advancing the states (the bootstrap
        values after an epoch): (logits [n, 256] with only the pass column filled, values [n])."""
        saved = self._storage[rows.long()].clone()
        try:
            return self.step(model, rows, obs, torch.zeros(len(rows), dtype=torch.bool))
        finally:
            self._storage[rows.long()] = saved
