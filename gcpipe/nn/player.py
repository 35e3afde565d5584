"""Network players for matches (rules.md §9): batched single-step inference over many games.

`NetworkPlayer` holds one recurrent state per game slot for one (player, side); the match runner
asks it for logits of the games where its net must step and lets `GameBatch.sample_apply` sample
the moves in C.  `NetworkBot` plays one `Game` with it (for `gcpipe play` and tests).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from gcpipe.engine import NUM_ACTIONS, OBS_SIZE, Game
from gcpipe.errors import UserError
from gcpipe.nn.checkpoint import Checkpoint, load

_MIN_ROWS = 2   # see NetworkPlayer.forward


class NetworkPlayer:
    """One network's recurrent states for `n_slots` concurrent games.

    `full_turn` (default: from the layout) says whether the net also steps on the waiting side's
    plies (standard 5c) or only on its own turns (legacy); the caller reads it to decide which
    slots to step.  The forward pass is the MinGRUPolicy step written with in-place operations on
    buffers kept between calls, the three gates of a layer coming from one matmul."""

    def __init__(self, checkpoint: Checkpoint | str | Path, full_turn: bool | None = None):
        if not isinstance(checkpoint, Checkpoint):
            checkpoint = load(checkpoint)
        self.checkpoint = checkpoint
        self.full_turn = checkpoint.full_turn if full_turn is None else bool(full_turn)
        model = checkpoint.model
        self.hidden, self.layers = model.hidden, model.layers
        with torch.no_grad():
            # Transposed copies so every product is x @ W with a contiguous (in, out) matrix.
            self._enc_w = model.encoder.weight.detach().float().t().contiguous()
            self._enc_b = None if model.encoder.bias is None else model.encoder.bias.detach().float().clone()
            self._gru_w = [gru.weight.detach().float().t().contiguous() for gru in model.grus]
            # Matches need only the logits, so the value row is left out.
            self._dec_w = model.decoder.weight.detach().float()[:NUM_ACTIONS].t().contiguous()
            self._dec_b = None if model.decoder.bias is None else model.decoder.bias.detach().float()[:NUM_ACTIONS].clone()
        self._state: torch.Tensor | None = None

    @property
    def n_slots(self) -> int:
        return 0 if self._state is None else self._state.shape[1]

    def start(self, n_slots: int) -> None:
        """Allocates zeroed states for game slots 0..n_slots-1."""
        if n_slots <= 0:
            raise UserError(f"a network player needs at least one game slot, got {n_slots}")
        self._state = torch.zeros(self.layers, n_slots, self.hidden)
        self._allocate(n_slots)

    def reset(self, slots: np.ndarray) -> None:
        """Zeroes the states of `slots` (a new game starts there)."""
        self._state[:, self._slot_tensor(slots)] = 0.0

    def state(self, slots: np.ndarray) -> np.ndarray:
        """A copy of the states [L, k, H] of `slots`."""
        return self._state[:, self._slot_tensor(slots)].numpy()   # advanced indexing copies

    def forward(self, slots: np.ndarray, obs: np.ndarray) -> np.ndarray:
        """Advances the states of `slots` by one step on observations obs [k,120] (uint8) and returns
        the logits [k,256] float32 — a view of a buffer that the next call overwrites.

        A game's logits are bit-identical whichever other games share the call: torch sends a
        one-row product to a matrix-vector routine that sums in another order, so a single row is
        computed as two (the second a copy, discarded) to keep match results independent of how
        games are batched."""
        if self._state is None:
            raise RuntimeError("call start(n_slots) before forward")
        slots = np.asarray(slots)
        k = len(slots)
        if obs.shape != (k, OBS_SIZE):
            raise ValueError(f"obs must have shape ({k}, {OBS_SIZE}), got {obs.shape}")
        if k == 0:
            return np.zeros((0, NUM_ACTIONS), np.float32)
        rows = max(k, _MIN_ROWS)
        whole = k == self.n_slots and k >= _MIN_ROWS and np.array_equal(slots, self._arange)
        H = self.hidden
        with torch.inference_mode():
            obs_rows, x = self._obs[:rows], self._x[:rows]
            obs_rows[:k].copy_(torch.from_numpy(np.ascontiguousarray(obs)))
            if whole:
                states = self._state
            else:
                index = self._slot_tensor(slots)
                if k < rows:
                    obs_rows[k:] = obs_rows[0]
                    index = torch.cat([index, index[:1].expand(rows - k)])
                gathered = self._gathered[:self.layers * rows * H].view(self.layers, rows, H)
                states = torch.index_select(self._state, 1, index, out=gathered)
            if self._enc_b is None:
                torch.mm(obs_rows, self._enc_w, out=x)
            else:
                torch.addmm(self._enc_b, obs_rows, self._enc_w, out=x)
            c, gates = self._c[:rows], self._gates[:rows]
            for layer, w in enumerate(self._gru_w):
                torch.mm(x, w, out=c)                  # the three gate blocks in one product
                torch.sigmoid(c, out=gates)
                h, g, z, p = c[:, :H], gates[:, :H], gates[:, H:2 * H], gates[:, 2 * H:]
                # g(h) = h + 0.5 for h >= 0, sigmoid(h) below, i.e. min(sigmoid(h), 0.5) + max(h, 0).
                g.clamp_(max=0.5).add_(h.clamp_(min=0.0))
                states[layer].lerp_(g, z)              # s' = s + z (g - s)
                x.lerp_(states[layer], p)              # y = x + sigmoid(p) (s' - x)
            if not whole:
                self._state.index_copy_(1, index[:k], states[:, :k])
            logits = self._logits[:rows]
            if self._dec_b is None:
                torch.mm(x, self._dec_w, out=logits)
            else:
                torch.addmm(self._dec_b, x, self._dec_w, out=logits)
        return logits[:k].numpy()

    def _allocate(self, n: int) -> None:
        H, rows = self.hidden, max(n, _MIN_ROWS)
        self._arange = np.arange(n)
        self._obs = torch.empty(rows, OBS_SIZE)
        self._x = torch.empty(rows, H)
        self._c = torch.empty(rows, 3 * H)
        self._gates = torch.empty(rows, 3 * H)
        self._gathered = torch.empty(self.layers * rows * H)
        self._logits = torch.empty(rows, NUM_ACTIONS)

    def _slot_tensor(self, slots: np.ndarray) -> torch.Tensor:
        index = torch.from_numpy(np.ascontiguousarray(slots, dtype=np.int64))
        if len(index) and (int(index.min()) < 0 or int(index.max()) >= self.n_slots):
            raise IndexError(f"slots must lie within 0..{self.n_slots - 1}")
        return index


class NetworkBot:
    """Plays one side of a single `Game` with a NetworkPlayer (one slot).  Call `observe(game)`
    before every ply the other side plays (a no-op for actor-only nets; full-turn nets step on it,
    output discarded) and `choose(game)` on the bot's own plies; `new_game()` at each game start."""

    def __init__(self, player: NetworkPlayer):
        self.player = player
        player.start(1)
        self._slot = np.zeros(1, np.int64)

    def new_game(self) -> None:
        self.player.reset(self._slot)

    def observe(self, game: Game) -> None:
        if self.player.full_turn and not game.is_terminal():
            self.player.forward(self._slot, game.observation()[None])

    def choose(self, game: Game) -> int:
        """Steps the net on the current observation and samples a legal action from its logits
        with the game's own generator (rules.md §9); the caller applies it."""
        if game.is_terminal():
            raise UserError("the game is over; there is no move to choose")
        logits = self.player.forward(self._slot, game.observation()[None])[0]
        return game.sample_action(logits)
