"""Muon: momentum SGD whose update of each weight matrix is replaced by the nearest
semi-orthogonal matrix (Newton–Schulz iteration), as the reference trainer uses (model.md §4).
1-D parameters (biases) take the plain momentum update."""
from __future__ import annotations

import torch
from torch import Tensor

# One (a, b, c) per iteration: X <- a X + (b A + c A^2) X with A = X X^T.  The early triples
# push small singular values up fast, the last ones settle them near 1.
NEWTON_SCHULZ_COEFFICIENTS = (
    (4.0848, -6.8946, 2.9270),
    (3.9505, -6.3029, 2.6377),
    (3.7418, -5.5913, 2.3037),
    (2.8769, -3.1427, 1.2046),
    (2.8366, -3.0525, 1.2012),
)


def newton_schulz(matrix: Tensor, eps: float = 1e-7) -> Tensor:
    """An approximately semi-orthogonal matrix with the singular vectors of `matrix` (2-D): after
    Frobenius normalisation, singular values not far below the largest end within ~10 % of 1
    (tiny ones stay small after only five iterations — enough for Muon)."""
    transposed = matrix.size(0) > matrix.size(1)
    x = matrix.T if transposed else matrix   # iterate on the wide form: A = X X^T is the small Gram
    x = x / (x.norm() + eps)
    for a, b, c in NEWTON_SCHULZ_COEFFICIENTS:
        gram = x @ x.T
        x = a * x + (b * gram + c * gram @ gram) @ x
    return x.T if transposed else x


class Muon(torch.optim.Optimizer):
    """Nesterov momentum, then per 2-D parameter the orthogonalised update scaled by
    sqrt(max(1, rows/cols)) so tall matrices take comparably sized steps.  No weight decay."""

    def __init__(self, params, lr: float, momentum: float = 0.95, nesterov: bool = True):
        super().__init__(params, dict(lr=lr, momentum=momentum, nesterov=nesterov))

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            lr, beta = group["lr"], group["momentum"]
            for param in group["params"]:
                if param.grad is None:
                    continue
                state = self.state[param]
                if "momentum_buffer" not in state:
                    state["momentum_buffer"] = torch.zeros_like(param)
                buffer = state["momentum_buffer"]
                buffer.lerp_(param.grad, 1 - beta)
                update = param.grad.lerp(buffer, beta) if group["nesterov"] else buffer
                if param.ndim >= 2:
                    rows, cols = param.shape[0], param[0].numel()
                    update = newton_schulz(update.reshape(rows, cols)).view_as(param)
                    update = update * max(1.0, rows / cols) ** 0.5
                param.add_(update, alpha=-lr)
