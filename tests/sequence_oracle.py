"""An independent reference for the training forward pass (gcpipe/train/sequence.py): all T steps
of MinGRUPolicy at once by the log-space parallel scan of Heinsen, in float64, with autograd for
gradients.  Slow but derived differently from both `MinGRUPolicy.step` and the segment forward."""
import torch
from torch import Tensor
from torch.nn import functional as F

from gcpipe.nn.model import MinGRUPolicy


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


def forward_sequence(model: MinGRUPolicy, obs: Tensor, state: Tensor, starts: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """T steps at once: obs [B,T,120], state [L,B,H], starts [B,T] bool (True: the state is zeroed
    before that step) -> (logits [B,T,256], values [B,T], final state [L,B,H]).  Equal to calling
    `model.step` T times, but the recurrence runs as a parallel scan."""
    x = model.encoder(obs.to(model.encoder.weight.dtype))
    starts = starts.to(torch.bool)
    finals = []
    for layer, gru in enumerate(model.grus):
        c = gru(x)
        h, k, p = c.split(model.hidden, dim=-1)
        h64, k64 = h.double(), k.double()
        log_a = -F.softplus(k64)
        log_b = -F.softplus(-k64) + _log_candidate(h64)
        s = _scan_with_resets(log_a, log_b, state[layer].double(), starts).to(x.dtype)
        x = x + torch.sigmoid(p) * (s - x)
        finals.append(s[:, -1])
    logits, values = model._decode(x)
    return logits, values, torch.stack(finals)
