"""The self-play opponent pool: frozen snapshots of the policy played by slot 1 of the
"historical" envs (model.md §4: a fifth of the envs, up to 100 snapshots).

The historical envs are split into banks (env j of them belongs to bank j mod banks; the bank is
the env's opponent tag, logged as hist_*_bank_i).  Each bank plays one snapshot.  A refresh draws
a new snapshot per bank, but an env only switches when its current game ends, so no game ever
changes opponent midway; until then the old snapshot stays loaded for the envs still using it.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from torch import nn


class OpponentPool:
    def __init__(self, capacity: int, num_envs: int, num_banks: int, seed: int,
                 make_model: Callable[[], nn.Module]):
        self.capacity = capacity
        self.num_banks = min(num_banks, num_envs)
        self.env_bank = np.arange(num_envs) % self.num_banks
        self.entries: list[int] = []                       # pool order, oldest first: snapshot keys
        self._weights: dict[int, dict[str, torch.Tensor]] = {}
        self.bank_snapshot = np.full(self.num_banks, -1, np.int64)  # what each bank's next games play
        self.env_snapshot = np.full(num_envs, -1, np.int64)         # what each env plays now
        self._rng = np.random.Generator(np.random.PCG64(seed))
        self._make_model = make_model
        self._models: dict[int, nn.Module] = {}

    def add(self, key: int, model: nn.Module) -> None:
        """Adds a frozen copy of `model` under `key` (the global step), dropping the oldest entry
        beyond capacity.  The first snapshot is assigned to every bank and env at once."""
        self._weights[key] = {name: t.detach().clone() for name, t in model.state_dict().items()}
        self.entries.append(key)
        del self.entries[:-self.capacity]
        if self.bank_snapshot[0] < 0:
            self.bank_snapshot[:] = key
            self.env_snapshot[:] = key
        self._forget_unused()

    def refresh(self) -> None:
        """Each bank draws a snapshot uniformly from the pool for its envs' next games."""
        self.bank_snapshot[:] = [self.entries[i] for i in self._rng.integers(len(self.entries), size=self.num_banks)]
        self._forget_unused()

    def episodes_ended(self, envs: np.ndarray) -> None:
        """Envs (indices among the historical envs) whose game just ended take their bank's snapshot."""
        self.env_snapshot[envs] = self.bank_snapshot[self.env_bank[envs]]
        self._forget_unused()

    def pending_swaps(self) -> int:
        """Envs still playing a game against a snapshot other than their bank's current one."""
        return int(np.count_nonzero(self.env_snapshot != self.bank_snapshot[self.env_bank]))

    def groups(self) -> list[tuple[nn.Module, np.ndarray]]:
        """(frozen model, indices of the historical envs it plays now) for every snapshot in use."""
        keys, inverse = np.unique(self.env_snapshot, return_inverse=True)
        return [(self.model(int(key)), np.flatnonzero(inverse == i)) for i, key in enumerate(keys)]

    def model(self, key: int) -> nn.Module:
        if key not in self._models:
            model = self._make_model()
            model.load_state_dict(self._weights[key])
            model.eval().requires_grad_(False)
            self._models[key] = model
        return self._models[key]

    def _forget_unused(self) -> None:
        live = set(self.entries) | set(self.bank_snapshot.tolist()) | set(self.env_snapshot.tolist())
        for key in [k for k in self._weights if k not in live]:
            del self._weights[key]
            self._models.pop(key, None)

    def state_dict(self) -> dict:
        return {"entries": list(self.entries), "weights": self._weights,
                "bank_snapshot": self.bank_snapshot.copy(), "env_snapshot": self.env_snapshot.copy(),
                "rng": self._rng.bit_generator.state}

    def load_state_dict(self, state: dict) -> None:
        self.entries = list(state["entries"])
        self._weights = dict(state["weights"])
        self.bank_snapshot = np.asarray(state["bank_snapshot"], np.int64).copy()
        self.env_snapshot = np.asarray(state["env_snapshot"], np.int64).copy()
        self._rng.bit_generator.state = state["rng"]
        self._models.clear()
