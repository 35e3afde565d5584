"""The MinGRU policy of model.md §1: encoder, two MinGRU layers with highway gates, decoder whose
rows 0..255 are action logits and row 256 the value (the "standard 5c" arrangement).

`MinGRUPolicy.step` is the definition of the network (one step of every row).  Two other
implementations exist for speed, each checked against it: train/sequence.py's segment forward
with a hand-written backward pass (training, several times faster than autograd through steps),
and nn/player.py's in-place batched step over game slots (play).  The float64 log-space scan
that checks the training forward's gradients lives with the tests (tests/sequence_oracle.py)."""
from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from gcpipe.engine import NUM_ACTIONS, OBS_SIZE
from gcpipe.nn.select import candidate


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

    def matrix_shapes(self) -> list[tuple[int, int]]:
        """(inputs, outputs) of each matrix product of a step, in order: encoder, each MinGRU
        layer's projection, decoder (what benchmarks count as the step's floating-point work)."""
        return ([(self.obs_size, self.hidden)] + [(self.hidden, 3 * self.hidden)] * self.layers
                + [(self.hidden, self.num_actions + 1)])

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
            s = s + z * (candidate(h, gates[:, :self.hidden]) - s)
            x = x + p * (s - x)
            new_state.append(s)
        logits, value = self._decode(x)
        return logits, value, torch.stack(new_state)

    def forward(self, obs: Tensor, state: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        return self.step(obs, state)
