"""The policy's distribution over the legal moves, for PPO: the rollout's sampling and the update's
log-probabilities and entropies (model.md §3).

On float32 CPU tensors both run in C (csrc/gc_policy.h) with one arithmetic, so the update
recomputes the rollout's log-probabilities to the bit, and in one pass over a row where torch's
masked softmax, cumulative sum, search, log-softmax and gather each make their own (and as many
again for the gradients).  Elsewhere (a GPU) torch's expressions: illegal logits replaced by -1e4,
then softmax and log-softmax, which give illegal moves a probability of about 0 where C gives 0."""
from __future__ import annotations

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from gcpipe._engine import ffi, lib
from gcpipe.nn.select import floats, mask_logits, uint8s
from gcpipe.train.row_threads import run_rows


def _in_c(logits: Tensor, masks: Tensor) -> bool:
    """Whether the C functions take these: float32 logits on the CPU whose last dimension is
    contiguous, and a contiguous bool mask of their shape."""
    return (logits.device.type == "cpu" and logits.dtype == torch.float32 and logits.stride(-1) == 1
            and logits.dim() in (2, 3) and masks.dtype == torch.bool and masks.is_contiguous()
            and masks.shape == logits.shape and logits.shape[-1] == lib.GC_NUM_ACTIONS)


def _layout(logits: Tensor) -> tuple[int, int, int, int]:
    """(n1, n2, stride1, stride2) of [n1, n2, A] logits, or of [n, A] ones as [n, 1, A]."""
    if logits.dim() == 2:
        return logits.shape[0], 1, logits.stride(0), 0
    return logits.shape[0], logits.shape[1], logits.stride(0), logits.stride(1)


def _pointers(logits: Tensor, masks: Tensor, actions: Tensor | None = None) -> list:
    pointers = [floats(logits), *_layout(logits)[2:], uint8s(masks)]
    return pointers if actions is None else pointers + [ffi.cast("int64_t *", actions.data_ptr())]


def sample_legal(logits: Tensor, masks: Tensor, generator: torch.Generator) -> tuple[Tensor, Tensor]:
    """One legal move per row of logits [n, A] drawn from the policy (inverse CDF on one uniform
    per row from `generator`) and its log-probability: (actions int64 [n], log_probs [n])."""
    return draw_legal(logits, masks, torch.rand(logits.shape[0], 1, generator=generator, device=logits.device))


def draw_legal(logits: Tensor, masks: Tensor, uniforms: Tensor) -> tuple[Tensor, Tensor]:
    """sample_legal on given uniforms [n, 1] in [0, 1)."""
    if not _in_c(logits, masks):
        return sample_actions(mask_logits(logits, masks), uniforms)
    n1, n2 = _layout(logits)[:2]
    actions, log_probs = torch.empty(n1, dtype=torch.int64), torch.empty(n1)
    uniforms = uniforms.to(torch.float32).reshape(n1).contiguous()
    pointers = [*_pointers(logits, masks), floats(uniforms)]
    run_rows(lambda first, end: lib.gc_policy_sample(n1, n2, *pointers, first, end,
                                                     ffi.cast("int64_t *", actions.data_ptr()), floats(log_probs)),
             n1)
    return actions, log_probs


def sample_actions(logits: Tensor, uniforms: Tensor) -> tuple[Tensor, Tensor]:
    """Actions drawn from softmax(logits) by inverse CDF on `uniforms` [n, 1], and their log-probs."""
    actions = inverse_cdf(logits, uniforms)
    log_probs = torch.log_softmax(logits, dim=-1).gather(-1, actions.unsqueeze(-1)).squeeze(-1)
    return actions, log_probs


def inverse_cdf(logits: Tensor, uniforms: Tensor) -> Tensor:
    """The action of each row whose interval of softmax(logits)'s CDF holds u = uniform * total: the
    number of CDF entries below u, found by binary search (the CDF of non-negative terms never
    decreases), not by counting a [rows, 256] comparison.  (softmax, not exp(log_softmax): exp of
    the -1e4 entries takes a slow underflow path on CPU.)  u is at least the smallest normal float:
    torch.rand returns 0 once in 2^24 draws, and u = 0 would pick action 0 however masked (two
    illegal moves in the default Guerrilla teacher's 100 M steps before this was fixed)."""
    cdf = torch.cumsum(torch.softmax(logits, dim=-1), dim=-1)
    u = (uniforms * cdf[:, -1:]).clamp_min_(torch.finfo(cdf.dtype).tiny)
    return torch.searchsorted(cdf, u).squeeze(-1).clamp_max_(logits.shape[-1] - 1)


class PolicyTerms(torch.autograd.Function):
    """(log-probability of the action, entropy) per row of logits [B, T, A] (any strides with the
    last dimension contiguous), by csrc/gc_policy.c, and the logits' gradient."""

    @staticmethod
    def forward(ctx, logits: Tensor, masks: Tensor, actions: Tensor) -> tuple[Tensor, Tensor]:
        n1, n2 = _layout(logits)[:2]
        log_probs, entropies = torch.empty(logits.shape[:-1]), torch.empty(logits.shape[:-1])
        pointers = _pointers(logits, masks, actions)
        run_rows(lambda first, end: lib.gc_policy_terms(n1, n2, *pointers, first, end, floats(log_probs),
                                                        floats(entropies)), n1 * n2)
        ctx.save_for_backward(logits, masks, actions)
        return log_probs, entropies

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_log_probs: Tensor, grad_entropies: Tensor) -> tuple[Tensor, None, None]:
        logits, masks, actions = ctx.saved_tensors
        n1, n2 = _layout(logits)[:2]
        grad_log_probs, grad_entropies = grad_log_probs.contiguous(), grad_entropies.contiguous()
        grad = torch.empty(logits.shape)
        pointers = _pointers(logits, masks, actions)
        run_rows(lambda first, end: lib.gc_policy_terms_grad(n1, n2, *pointers, floats(grad_log_probs),
                                                             floats(grad_entropies), first, end, floats(grad)),
                 n1 * n2)
        return grad, None, None


def policy_terms(logits: Tensor, masks: Tensor, actions: Tensor) -> tuple[Tensor, Tensor]:
    """The log-probability of `actions` [B, T] (int64) and the entropy of each row of logits
    [B, T, A] under the legal masks [B, T, A]: ([B, T], [B, T]), differentiable in the logits."""
    if _in_c(logits, masks) and logits.dim() == 3 and actions.dtype == torch.int64 and actions.is_contiguous():
        return PolicyTerms.apply(logits, masks, actions)
    masked = mask_logits(logits, masks)
    log_probs = torch.log_softmax(masked, dim=-1)
    entropies = -(torch.softmax(masked, dim=-1) * log_probs).sum(-1)
    return log_probs.gather(-1, actions.unsqueeze(-1)).squeeze(-1), entropies
