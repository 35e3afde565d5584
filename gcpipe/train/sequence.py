"""The training-time forward pass of MinGRUPolicy over segments, built for CPU speed.

The MinGRU state obeys a linear recurrence s_t = a_t * s_{t-1} + b_t whose coefficients
(a = 1 - z, b = z * g(h)) depend only on the layer's input, so every matrix product runs once
over all T steps and only the cheap elementwise recurrence is sequential.  It runs in float32,
time-major (each step's slice is contiguous), with a hand-written backward pass: on two cores
this is several times faster than autograd through T steps, and it gives the same numbers as
stepping `MinGRUPolicy.step` and the same gradients as a float64 log-space scan (tests/test_train.py
checks both against tests/sequence_oracle.py).
"""
from __future__ import annotations

import torch
from torch import Tensor

from gcpipe.engine import PASS_ACTION
from gcpipe.nn.model import MinGRUPolicy, _candidate


class LinearRecurrence(torch.autograd.Function):
    """s_t = a_t * s_{t-1} + b_t for t = 0..T-1 from s_{-1} = initial; a, b [T, B, H]."""

    @staticmethod
    def forward(ctx, a: Tensor, b: Tensor, initial: Tensor) -> Tensor:
        states = torch.empty_like(b)
        previous = initial
        for t in range(a.shape[0]):
            torch.addcmul(b[t], a[t], previous, out=states[t])
            previous = states[t]
        ctx.save_for_backward(a, states, initial)
        return states

    @staticmethod
    def backward(ctx, grad_states: Tensor):
        a, states, initial = ctx.saved_tensors
        # g_t = dL/ds_t including the path through later steps: g_t = grad_t + a_{t+1} g_{t+1}.
        grad_b = torch.empty_like(grad_states)
        carry = torch.zeros_like(initial)
        for t in reversed(range(a.shape[0])):
            torch.add(grad_states[t], carry, out=grad_b[t])
            carry = a[t] * grad_b[t]
        previous = torch.cat([initial.unsqueeze(0), states[:-1]])
        return grad_b * previous, grad_b, carry


class Gates(torch.autograd.Function):
    """A MinGRU layer's gates from its projection c [T, B, 3H] = (h, k, p) and keep [T, B, 1]: the
    recurrence's coefficients a = (1 - z) keep and b = z g(h) with z = sigmoid(k), and the highway
    gate sigmoid(p).  The backward is autograd's chain through those elementwise operations, op for
    op (so the same bits), but writes the three gradients into one [T, B, 3H] tensor where autograd
    would concatenate three (its SplitBackward: a tenth of the update on two cores)."""

    @staticmethod
    def forward(ctx, c: Tensor, keep: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        h, k, p = c.split(c.shape[-1] // 3, dim=-1)
        z, sigmoid_h, highway = torch.sigmoid(k), torch.sigmoid(h), torch.sigmoid(p)
        candidate = _candidate(h, sigmoid_h)
        ctx.save_for_backward(h >= 0, z, sigmoid_h, candidate, highway, keep)
        return (1.0 - z) * keep, z * candidate, highway

    @staticmethod
    def backward(ctx, grad_a: Tensor, grad_b: Tensor, grad_highway: Tensor):
        positive, z, sigmoid_h, candidate, highway, keep = ctx.saved_tensors
        hidden = z.shape[-1]
        grad = grad_b.new_empty(*z.shape[:-1], 3 * hidden)
        grad_h, grad_k, grad_p = grad.split(hidden, dim=-1)
        # z feeds a (through 1 - z) and b: the two gradients summed (two terms: order-free).
        grad_z = (grad_a * keep).neg_().add_(grad_b * candidate)
        torch.ops.aten.sigmoid_backward(grad_z, z, grad_input=grad_k)
        # g(h) = where(h >= 0, h + 0.5, sigmoid(h)): each branch takes the gradient where it is chosen.
        grad_candidate = grad_b * z
        grad_h.copy_(torch.where(positive, grad_candidate, 0.0)).add_(
            torch.ops.aten.sigmoid_backward(torch.where(positive, 0.0, grad_candidate), sigmoid_h))
        torch.ops.aten.sigmoid_backward(grad_highway, highway, grad_input=grad_p)
        return grad, None


class DecoderColumns(torch.autograd.Function):
    """The decoder's time-major output [T, B, A+1] seen batch-major as logits [B, T, A], the pass
    logit [B, T] (column PASS_ACTION, the COIN rows' value with `side_value`) and the value [B, T].
    The same views autograd's slicing gives; the backward writes their gradients into one
    time-major tensor, where autograd would zero-fill a batch-major tensor per slice, add them and
    copy the sum time-major for the decoder's matrix product (the update runs 3-4 % faster on a
    quiet 2-core machine).  Only data moves, so the gradients are the same bits."""

    @staticmethod
    def forward(ctx, out: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        actions = out.shape[-1] - 1
        batch_major = out.transpose(0, 1)
        return batch_major[..., :actions], batch_major[..., PASS_ACTION], batch_major[..., actions]

    @staticmethod
    def backward(ctx, grad_logits: Tensor, grad_pass: Tensor, grad_values: Tensor) -> Tensor:
        # (An unused output's gradient arrives as zeros: autograd materialises it.)
        batch, steps, actions = grad_logits.shape
        grad = grad_logits.new_empty(steps, batch, actions + 1)
        grad[..., :actions] = grad_logits.transpose(0, 1)
        grad[..., PASS_ACTION] += grad_pass.T
        grad[..., actions] = grad_values.T
        return grad


def forward_segments(policy: MinGRUPolicy, obs: Tensor, state: Tensor, starts: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """obs [B, T, 120], state [L, B, H] (before step 0), starts [B, T] bool (state zeroed before
    that step) -> (logits [B, T, 256], values [B, T], pass logits [B, T]): the logits and values of
    stepping the policy T times, zeroing the state before the steps where `starts` is set; the pass
    logit (also logits[..., PASS_ACTION]) apart, for `side_value`'s COIN rows."""
    keep = (~starts.T).unsqueeze(-1).to(torch.float32)            # [T, B, 1]: 0 where the state resets
    x = policy.encoder(obs.transpose(0, 1).to(torch.float32))      # [T, B, H], time-major
    for layer, gru in enumerate(policy.grus):
        a, b, highway = Gates.apply(gru(x), keep)
        s = LinearRecurrence.apply(a, b, state[layer] * keep[0])
        x = x + highway * (s - x)
    logits, pass_logits, values = DecoderColumns.apply(policy.decoder(x))
    return logits, values, pass_logits
