"""The training-time forward pass of MinGRUPolicy over segments, built for CPU speed.

The MinGRU state obeys a linear recurrence s_t = a_t * s_{t-1} + b_t whose coefficients
(a = 1 - z, b = z * g(h)) depend only on the layer's input, so every matrix product runs once
over all T steps and only the cheap elementwise recurrence is sequential.  It runs in float32,
time-major (each step's slice is contiguous), with a hand-written backward pass: on two cores
this is several times faster than autograd through T steps, and it gives the same numbers as
stepping `MinGRUPolicy.step` and the same gradients as a float64 log-space scan (tests/test_train.py
checks both against tests/sequence_oracle.py).  On float32 CPU tensors the matrix products run in
C in a fixed order (train/matmul.py), and each layer's elementwise work, forward and backward,
runs in C too (MinGRULayer: one pass over memory where torch's expressions, kept for other
devices, make a dozen) with the play-time step's gates: the update's forward gives the rollout's
logits and values to the bit, so PPO's first ratios are exactly 1 (in float32: not with
`update_precision: bfloat16`).  PPO's update (policy_segments) computes the action logits of the
rows that need them only: a waiting slot's need none.
"""
from __future__ import annotations

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from gcpipe._engine import lib
from gcpipe.engine import PASS_ACTION
from gcpipe.nn.model import MinGRUPolicy
from gcpipe.nn.select import candidate, floats
from gcpipe.train import matmul as products
from gcpipe.train.matmul import fixed_order, linear
from gcpipe.train.policy import policy_terms
from gcpipe.train.row_threads import run_rows


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


class MinGRULayer(torch.autograd.Function):
    """A MinGRU layer's outputs x + sigmoid(p) * (s - x) over T steps, s the states, from its
    projection c = W x [T, B, 3H] (h | k | p), its input x [T, B, H], keep [T, B] and the state
    before step 0 [B, H], and their gradients: csrc/gc_mingru.c in one pass over memory each way,
    with the play-time step's gates (csrc/gc_gates.h), so the update's forward is the rollout's to
    the bit.  Float32 CPU tensors, contiguous."""

    @staticmethod
    def forward(ctx, c: Tensor, x: Tensor, keep: Tensor, initial: Tensor) -> Tensor:
        steps, batch, hidden = x.shape
        s, x_out = torch.empty_like(x), torch.empty_like(x)
        pointers = [floats(t) for t in (c, x, keep, initial, s, x_out)]
        run_rows(lambda first, end: lib.gc_mingru_forward(products.SIMD_PATH, steps, batch, hidden, first, end,
                                                          *pointers), batch)
        ctx.save_for_backward(c, x, keep, initial, s)
        return x_out

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_out: Tensor) -> tuple[Tensor, Tensor, None, Tensor | None]:
        c, x, keep, initial, s = ctx.saved_tensors
        steps, batch, hidden = x.shape
        grad_out = grad_out.contiguous()
        grad_c, grad_x, carry = torch.empty_like(c), torch.empty_like(x), torch.empty_like(initial)
        pointers = [floats(t) for t in (c, x, keep, initial, s, grad_out, grad_c, grad_x, carry)]
        run_rows(lambda first, end: lib.gc_mingru_backward(products.SIMD_PATH, steps, batch, hidden, first, end,
                                                           *pointers), batch)
        # carry ends as the gradient of the state before step 0, through keep[0].
        return grad_c, grad_x, None, carry if ctx.needs_input_grad[3] else None


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


def mingru_layer(c: Tensor, x: Tensor, keep: Tensor, initial: Tensor) -> Tensor:
    """One MinGRU layer's output x + sigmoid(p) * (s - x) over T steps from its projection c = W x
    [T, B, 3H] (h | k | p), its input x [T, B, H], keep [T, B, 1] (0 where the state resets before
    the step) and the state before step 0 [B, H]: in C (MinGRULayer: the rollout's bits) for
    float32 CPU tensors, else torch's expressions (mingru_layer_torch: the same function, rounded
    otherwise)."""
    steps, batch, hidden = x.shape
    if (fixed_order(c, x, keep, initial) and c.shape == (steps, batch, 3 * hidden)
            and keep.shape == (steps, batch, 1) and initial.shape == (batch, hidden) and not keep.requires_grad
            and hidden % 16 == 0):
        return MinGRULayer.apply(c.contiguous(), x.contiguous(), keep.squeeze(-1).contiguous(), initial.contiguous())
    return mingru_layer_torch(c, x, keep, initial)


def mingru_layer_torch(c: Tensor, x: Tensor, keep: Tensor, initial: Tensor) -> Tensor:
    h, k, p = c.split(x.shape[-1], dim=-1)
    z = torch.sigmoid(k)
    g = candidate(h, torch.sigmoid(h))
    s = LinearRecurrence.apply((1.0 - z) * keep, z * g, initial * keep[0])
    return x + torch.sigmoid(p) * (s - x)


class WaitingRowsDecoder(torch.autograd.Function):
    """The decoder over time-major rows x [N, H] (weight [A+1, H], bias or None) where only the rows
    `full` (ascending indices) need their action logits: (their logits [F, A], the pass logit and
    value of every row [N, 2]).  A row whose one legal move is the pass (a waiting slot's) has
    log-probability and entropy exactly 0 whatever its logits, and so their gradient is exactly 0:
    its logits are not computed, and the products of the backward skip the zeros they would add.
    A zero term changes no fixed-order sum (csrc/gc_gemm.h) but for the sign of a zero that an
    underflow made, so the gradients are the decoder's over every row and column (tested bit for
    bit).  Fixed-order float32 CPU tensors."""

    @staticmethod
    def forward(ctx, x: Tensor, weight: Tensor, bias: Tensor | None, full: Tensor, waiting: Tensor,
                bfloat16: bool = False):
        product = products.product_in(bfloat16)
        x_full = x.index_select(0, full)
        logits = product(x_full, weight[:PASS_ACTION + 1].T, None if bias is None else bias[:PASS_ACTION + 1])
        tail = product(x, weight[PASS_ACTION:].T, None if bias is None else bias[PASS_ACTION:])
        ctx.save_for_backward(x, x_full, weight, full, waiting)
        ctx.has_bias, ctx.bfloat16 = bias is not None, bfloat16
        return logits, tail

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_logits: Tensor, grad_tail: Tensor):
        x, x_full, weight, full, waiting = ctx.saved_tensors
        # The pass logit's gradient is the sum of both outputs' (as DecoderColumns adds them); the
        # logits' one is 0 in PPO (the pass is never an actor's move), not for every loss.
        grad_tail = grad_tail.clone()
        grad_tail[:, 0].index_add_(0, full, grad_logits[:, PASS_ACTION])
        grad_logits = grad_logits[:, :PASS_ACTION]
        grad_full = torch.cat([grad_logits, grad_tail.index_select(0, full)], dim=1)   # [F, A + 1]
        product = products.product_in(ctx.bfloat16)
        grad_x = torch.empty_like(x)
        grad_x.index_copy_(0, full, product(grad_full, weight))
        grad_x.index_copy_(0, waiting, product(grad_tail.index_select(0, waiting), weight[PASS_ACTION:]))
        grad_weight = torch.cat([product(grad_logits.T, x_full), product(grad_tail.T, x)])
        grad_bias = None
        if ctx.has_bias and ctx.needs_input_grad[2]:
            grad_bias = torch.cat([products.bias_gradient(grad_logits), products.bias_gradient(grad_tail)])
        return grad_x, grad_weight, grad_bias, None, None, None


def _hidden(policy: MinGRUPolicy, obs: Tensor, state: Tensor, starts: Tensor, bfloat16: bool = False) -> Tensor:
    """The last MinGRU layer's outputs [T, B, H] over the segments (forward_segments' arguments;
    `bfloat16`: the layers' products with bfloat16 operands, FixedOrderLinear)."""
    keep = (~starts.T).unsqueeze(-1).to(torch.float32)            # [T, B, 1]: 0 where the state resets
    x = linear(policy.encoder, obs.transpose(0, 1), bfloat16)      # [T, B, H], time-major
    for layer, gru in enumerate(policy.grus):
        x = mingru_layer(linear(gru, x, bfloat16), x, keep, state[layer])
    return x


def policy_segments(policy: MinGRUPolicy, obs: Tensor, state: Tensor, starts: Tensor, masks: Tensor,
                    actions: Tensor, bfloat16: bool = False) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """forward_segments' rows through policy_terms under the legal masks [B, T, A] and `actions`
    [B, T]: (log-probabilities, entropies, values, pass logits), each [B, T].  On fixed-order
    tensors the rows whose mask holds the pass skip the decoder's logits (WaitingRowsDecoder) and
    get log-probability and entropy 0, the policy terms' own values for them: the same bits and
    gradients, half the decoder's work.  That needs the pass to be such a row's one legal move, as
    it is for a waiting slot (rules.md §6; the env writes its mask, csrc/gc_env.c) and for no actor
    (255 is never a legal move), the same rule by which the rollout's C step skips their logits.
    `bfloat16` (fixed-order tensors only): the products' operands in bfloat16 (matmul_bf16), so
    the outputs are no longer the rollout's bits."""
    x = _hidden(policy, obs, state, starts, bfloat16)
    decoder = policy.decoder
    if not (fixed_order(x, decoder.weight) and masks.device.type == "cpu"):
        logits, pass_logits, values = DecoderColumns.apply(linear(decoder, x))
        return *policy_terms(logits, masks, actions), values, pass_logits
    steps, batch, hidden = x.shape
    needs_logits = ~masks[..., PASS_ACTION].T.reshape(-1)         # time-major, as x's rows
    full, waiting = needs_logits.nonzero().view(-1), (~needs_logits).nonzero().view(-1)
    logits, tail = WaitingRowsDecoder.apply(x.reshape(-1, hidden), decoder.weight, decoder.bias, full, waiting,
                                            bfloat16)
    t, b = full // batch, full % batch
    log_probs, entropies = policy_terms(logits.unsqueeze(1), masks[b, t].unsqueeze(1), actions[b, t].unsqueeze(1))
    zeros = torch.zeros(steps * batch, dtype=torch.float32)
    log_probs = zeros.index_copy(0, full, log_probs.view(-1)).view(steps, batch).T
    entropies = zeros.index_copy(0, full, entropies.view(-1)).view(steps, batch).T
    tail = tail.view(steps, batch, 2).transpose(0, 1)
    return log_probs, entropies, tail[..., 1], tail[..., 0]


def forward_segments(policy: MinGRUPolicy, obs: Tensor, state: Tensor, starts: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """obs [B, T, 120], state [L, B, H] (before step 0), starts [B, T] bool (state zeroed before
    that step) -> (logits [B, T, 256], values [B, T], pass logits [B, T]): the logits and values of
    stepping the policy T times, zeroing the state before the steps where `starts` is set; the pass
    logit (also logits[..., PASS_ACTION]) apart, for `side_value`'s COIN rows."""
    logits, pass_logits, values = DecoderColumns.apply(linear(policy.decoder, _hidden(policy, obs, state, starts)))
    return logits, values, pass_logits
