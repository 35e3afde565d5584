"""The training path's matrix products in C with a fixed summation order (csrc/gc_gemm.h).

torch multiplies float32 matrices on the CPU with MKL, which picks its kernels by CPU vendor, model
and thread count, each summing in its own order: the same run gave other bytes on an AMD EPYC than
on an Intel Xeon, and on two Intel machines that report the same CPU.  Here every element of a
product is its start value followed by one fused multiply-add per input, inputs in order, on every
code path (AVX-512, AVX2, scalar) and however the rows are split among threads, so a product's bits
depend on its operands alone.  `linear` is the update's layers (encoder, MinGRU projections,
decoder) with their gradients; `matmul` also serves Muon's Newton–Schulz iteration.  Float32 CPU
tensors only: other devices and dtypes keep torch's products.
"""
from __future__ import annotations

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from gcpipe._engine import ffi, lib
from gcpipe.nn.inference import simd_code
from gcpipe.nn.select import floats
from gcpipe.train.row_threads import run_rows

# The code path (every path gives the same bits): the widest this CPU has, or GCPIPE_SIMD's.
SIMD_PATH = simd_code()


def fixed_order(*tensors: Tensor) -> bool:
    """Whether these tensors take the C products: float32 on the CPU."""
    return all(t.device.type == "cpu" and t.dtype == torch.float32 for t in tensors)


def matmul(a: Tensor, b: Tensor, bias: Tensor | None = None) -> Tensor:
    """a [M, K] (any strides) @ b [K, N] (+ bias [N] in every row), float32 on the CPU, each element
    summed in input order from its bias (or 0)."""
    (rows, inner), (inner_b, cols) = a.shape, b.shape
    if inner != inner_b or not fixed_order(a, b, *([] if bias is None else [bias])):
        raise ValueError(f"matmul takes float32 CPU matrices that chain: {a.dtype} {tuple(a.shape)} @ "
                         f"{b.dtype} {tuple(b.shape)}")
    b = b.contiguous()
    bias = None if bias is None else bias.contiguous()
    out = torch.empty(rows, cols, dtype=torch.float32)
    if rows and cols:
        pointers = (floats(a), a.stride(0), a.stride(1), floats(b), cols,
                    floats(bias) if bias is not None else ffi.NULL, floats(out), cols)
        run_rows(lambda first, end: lib.gc_gemm(SIMD_PATH, rows, cols, inner, *pointers, first, end), rows)
    return out


class FixedOrderLinear(torch.autograd.Function):
    """x @ weight.T (+ bias) over x's last dimension, as torch.nn.functional.linear, and its
    gradients, each product by `matmul`.  The bias's gradient is a product too (ones @ grad): a
    sum over the rows in order."""

    @staticmethod
    def forward(ctx, x: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
        flat = x.reshape(-1, x.shape[-1])
        ctx.save_for_backward(flat, weight)
        ctx.input_shape, ctx.has_bias = x.shape, bias is not None
        return matmul(flat, weight.T, bias).view(*x.shape[:-1], weight.shape[0])

    @staticmethod
    @once_differentiable
    def backward(ctx, grad: Tensor) -> tuple[Tensor | None, Tensor | None, Tensor | None]:
        flat, weight = ctx.saved_tensors
        grad = grad.reshape(-1, weight.shape[0])
        grad_x = matmul(grad, weight).view(ctx.input_shape) if ctx.needs_input_grad[0] else None
        grad_weight = matmul(grad.T, flat) if ctx.needs_input_grad[1] else None
        grad_bias = None
        if ctx.has_bias and ctx.needs_input_grad[2]:
            grad_bias = matmul(torch.ones(1, grad.shape[0], dtype=torch.float32), grad).view(-1)
        return grad_x, grad_weight, grad_bias


def linear(layer: torch.nn.Linear, x: Tensor) -> Tensor:
    """layer(x), by FixedOrderLinear where the tensors take the C products."""
    if fixed_order(x, layer.weight):
        return FixedOrderLinear.apply(x, layer.weight, layer.bias)
    return layer(x)
