"""The MinGRU policy of model.md §1: encoder, two MinGRU layers with highway gates, decoder whose
rows 0..255 are action logits and row 256 the value (the "standard 5c" arrangement)."""
from __future__ import annotations

import math

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from gcpipe.engine import NUM_ACTIONS, OBS_SIZE


def _candidate(h: Tensor, sigmoid_h: Tensor) -> Tensor:
    """g(h): h + 0.5 for h >= 0, else sigmoid(h) — positive, so the state stays positive."""
    return torch.where(h >= 0, h + 0.5, sigmoid_h)


def _log_candidate(h: Tensor) -> Tensor:
    """log g(h).  The clamp keeps log's argument positive in the branch `where` discards, so its
    gradient there is finite (0 * inf would poison the backward pass with NaN)."""
    return torch.where(h >= 0, torch.log(h.clamp_min(0) + 0.5), -F.softplus(-h))


def _scan_with_resets(log_a: Tensor, log_b: Tensor, initial: Tensor, starts: Tensor) -> Tensor:
    """All states of s_t = a_t * s_{t-1} + b_t (s reset to 0 before steps where starts is True)
    by the log-space parallel scan of Heinsen.  log_a, log_b: [B,T,H] float64; initial: [B,H] >= 0;
    starts: [B,T] bool.  Returns the states [B,T,H] (float64).

    With A_t = sum_{i<=t} log a_i, s_t = exp(A_t) * sum_j exp(log b_j - A_j) over the j of the
    current episode (and the initial state when no reset came before t).  A single
    logcumsumexp serves every episode at once: each term gets `big * episode_number` added, so
    the terms of earlier episodes are smaller by at least exp(-big) — exactly zero in float64 —
    and the offset is subtracted again afterwards.  float64 keeps the ~1e2 magnitudes of the
    cumulative sums from eating the precision of states of order 1."""
    episode = torch.cumsum(starts, dim=1, dtype=torch.float64).unsqueeze(-1)        # [B,T,1]
    # At a reset, a_t would multiply the zeroed state: it plays no part, so leave it out of A.
    cum_log_a = torch.cumsum(log_a.masked_fill(starts.unsqueeze(-1), 0.0), dim=1)
    terms = torch.cat([torch.log(initial.clamp_min(1e-30)).unsqueeze(1), log_b - cum_log_a], dim=1)
    with torch.no_grad():
        big = float(terms.max() - terms.min()) + 100.0
    offsets = torch.cat([torch.zeros_like(episode[:, :1]), episode], dim=1) * big
    log_sums = torch.logcumsumexp(terms + offsets, dim=1)[:, 1:] - offsets[:, 1:]
    return torch.exp(cum_log_a + log_sums)


class MinGRUPolicy(nn.Module):
    """Policy and value network.  `bias` gives the encoder and decoder bias vectors (legacy and
    5c-bias layouts); the MinGRU projections never have one."""

    def __init__(self, hidden: int = 128, layers: int = 2, obs_size: int = OBS_SIZE,
                 num_actions: int = NUM_ACTIONS, bias: bool = False, generator: torch.Generator | None = None):
        super().__init__()
        self.hidden, self.layers, self.obs_size, self.num_actions = hidden, layers, obs_size, num_actions
        self.bias = bias
        self.encoder = nn.Linear(obs_size, hidden, bias=bias)
        self.grus = nn.ModuleList(nn.Linear(hidden, 3 * hidden, bias=False) for _ in range(layers))
        self.decoder = nn.Linear(hidden, num_actions + 1, bias=bias)
        self.reset_parameters(generator)

    @torch.no_grad()
    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        """The native trainer's init: uniform ±gain/sqrt(fan_in), gain √2 for the encoder and 1
        elsewhere; biases zero."""
        for linear, gain in [(self.encoder, math.sqrt(2.0)), (self.decoder, 1.0)] + [(g, 1.0) for g in self.grus]:
            bound = gain / math.sqrt(linear.in_features)
            linear.weight.uniform_(-bound, bound, generator=generator)
            if linear.bias is not None:
                linear.bias.zero_()

    def initial_state(self, batch: int) -> Tensor:
        return torch.zeros(self.layers, batch, self.hidden, device=self.encoder.weight.device)

    def _decode(self, x: Tensor) -> tuple[Tensor, Tensor]:
        out = self.decoder(x)
        return out[..., :self.num_actions], out[..., self.num_actions]

    def step(self, obs: Tensor, state: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """One step: obs [B,120] (uint8 or float), state [L,B,H] -> (logits [B,256], value [B], new state)."""
        x = self.encoder(obs.to(self.encoder.weight.dtype))
        new_state = []
        for layer, gru in enumerate(self.grus):
            c = gru(x)
            gates = torch.sigmoid(c)
            h, z, p = c[:, :self.hidden], gates[:, self.hidden:2 * self.hidden], gates[:, 2 * self.hidden:]
            s = state[layer]
            s = s + z * (_candidate(h, gates[:, :self.hidden]) - s)
            x = x + p * (s - x)
            new_state.append(s)
        logits, value = self._decode(x)
        return logits, value, torch.stack(new_state)

    def forward_sequence(self, obs: Tensor, state: Tensor, starts: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """T steps at once: obs [B,T,120], state [L,B,H], starts [B,T] bool (True: the state is zeroed
        before that step) -> (logits [B,T,256], values [B,T], final state [L,B,H]).  Equal to calling
        `step` T times, but the recurrence runs as a parallel scan."""
        x = self.encoder(obs.to(self.encoder.weight.dtype))
        starts = starts.to(torch.bool)
        finals = []
        for layer, gru in enumerate(self.grus):
            c = gru(x)
            h, k, p = c.split(self.hidden, dim=-1)
            h64, k64 = h.double(), k.double()
            log_a = -F.softplus(k64)
            log_b = -F.softplus(-k64) + _log_candidate(h64)
            s = _scan_with_resets(log_a, log_b, state[layer].double(), starts).to(x.dtype)
            x = x + torch.sigmoid(p) * (s - x)
            finals.append(s[:, -1])
        logits, values = self._decode(x)
        return logits, values, torch.stack(finals)

    def forward(self, obs: Tensor, state: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        return self.step(obs, state)
