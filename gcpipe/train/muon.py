"""Muon: momentum SGD whose update of each weight matrix is replaced by the nearest
semi-orthogonal matrix (Newton–Schulz iteration), as the reference trainer uses (model.md §4).
1-D parameters (biases) take the plain momentum update."""
from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from gcpipe._engine import ffi, lib
from gcpipe.nn.select import floats
from gcpipe.train import matmul
from gcpipe.train.row_threads import run_rows

# One (a, b, c) per iteration: X <- a X + (b A + c A^2) X with A = X X^T.  The early triples
# push small singular values up fast, the last ones settle them near 1.
NEWTON_SCHULZ_COEFFICIENTS = (
    (4.0848, -6.8946, 2.9270),
    (3.9505, -6.3029, 2.6377),
    (3.7418, -5.5913, 2.3037),
    (2.8769, -3.1427, 1.2046),
    (2.8366, -3.0525, 1.2012),
)


NEWTON_SCHULZ_EPS = 1e-7


def newton_schulz(matrix: Tensor, eps: float = NEWTON_SCHULZ_EPS) -> Tensor:
    """An approximately semi-orthogonal matrix with the singular vectors of `matrix` (2-D): after
    Frobenius normalisation, singular values not far below the largest end within ~10 % of 1
    (tiny ones stay small after only five iterations — enough for Muon).  torch's products, for
    what the C version (orthogonalise) does not take: other devices and dtypes."""
    transposed = matrix.size(0) > matrix.size(1)
    x = matrix.T if transposed else matrix   # iterate on the wide form: A = X X^T is the small Gram
    x = x / (x.norm() + eps)
    for a, b, c in NEWTON_SCHULZ_COEFFICIENTS:
        gram = x @ x.T
        x = a * x + (b * gram + c * gram @ gram) @ x
    return x.T if transposed else x


_COEFFICIENTS = np.array(NEWTON_SCHULZ_COEFFICIENTS, np.float32)


def orthogonalise(matrices: list[Tensor]) -> list[Tensor]:
    """newton_schulz of each matrix.  Float32 CPU matrices go through csrc/gc_gemm.c's
    gc_newton_schulz, the same iteration with fixed-order products and the norm summed in float64
    in index order, the matrices dealt to the training's threads (a matrix's result does not
    depend on which thread computes it)."""
    if not all(matmul.fixed_order(m) for m in matrices):
        return [newton_schulz(m) for m in matrices]
    inputs = [m.contiguous() for m in matrices]
    outputs = [torch.empty_like(m) for m in inputs]
    coefficients = ffi.from_buffer("float[]", _COEFFICIENTS)

    def run(first: int, end: int) -> None:
        for g, out in zip(inputs[first:end], outputs[first:end]):
            rows, cols = g.shape
            scratch = torch.empty(2 * rows * cols + 3 * min(rows, cols) ** 2, dtype=torch.float32)
            lib.gc_newton_schulz(matmul.SIMD_PATH, rows, cols, floats(g), len(_COEFFICIENTS), coefficients,
                                 NEWTON_SCHULZ_EPS, floats(out), floats(scratch))

    run_rows(run, len(inputs))       # (the matrices as the rows to split)
    return outputs


class Muon(torch.optim.Optimizer):
    """Nesterov momentum, then per 2-D parameter the orthogonalised update scaled by
    sqrt(max(1, rows/cols)) so tall matrices take comparably sized steps.  No weight decay."""

    def __init__(self, params, lr: float, momentum: float = 0.95, nesterov: bool = True):
        super().__init__(params, dict(lr=lr, momentum=momentum, nesterov=nesterov))

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            lr, beta = group["lr"], group["momentum"]
            params, updates = [], []
            for param in group["params"]:
                if param.grad is None:
                    continue
                state = self.state[param]
                if "momentum_buffer" not in state:
                    state["momentum_buffer"] = torch.zeros_like(param)
                buffer = state["momentum_buffer"]
                buffer.lerp_(param.grad, 1 - beta)
                params.append(param)
                updates.append(param.grad.lerp(buffer, beta) if group["nesterov"] else buffer)
            matrices = [i for i, param in enumerate(params) if param.ndim >= 2]
            shapes = [(params[i].shape[0], params[i][0].numel()) for i in matrices]
            orthogonal = orthogonalise([updates[i].reshape(shape) for i, shape in zip(matrices, shapes)])
            for i, (rows, cols), update in zip(matrices, shapes, orthogonal):
                updates[i] = update.view_as(params[i]) * max(1.0, rows / cols) ** 0.5
            for param, update in zip(params, updates):
                param.add_(update, alpha=-lr)
