"""The training path's matrix products in C with a fixed summation order (csrc/gc_gemm.h).

torch multiplies float32 matrices on the CPU with MKL, which picks its kernels by CPU vendor, model
and thread count, each summing in its own order: the same run gave other bytes on an AMD EPYC than
on an Intel Xeon, and on two Intel machines that report the same CPU.  Here every element of a
product is its start value followed by one fused multiply-add per input, inputs in order, on every
code path (AVX-512, AVX2, scalar) and however the rows are split among threads, so a product's bits
depend on its operands alone.  `linear` is the update's layers (encoder, MinGRU projections,
decoder) with their gradients, the encoder's over the observations' nonzero bytes
(ByteInputLinear); `matmul` also serves Muon's Newton–Schulz iteration.  Float32 CPU
tensors only: other devices and dtypes keep torch's products.  `matmul_bf16` is the opt-in
`update_precision: bfloat16` of PPO's update: operands rounded to bfloat16, summed as AVX512_BF16's
dot product sums them, by that instruction or by its exact emulation on the float32 paths.
"""
from __future__ import annotations

import os

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from gcpipe._engine import ffi, lib
from gcpipe.nn.inference import simd_code
from gcpipe.nn.select import floats, uint8s
from gcpipe.train.row_threads import run_rows

# The code path (every path gives the same bits): the widest this CPU has, or GCPIPE_SIMD's.
SIMD_PATH = simd_code()


def fixed_order(*tensors: Tensor) -> bool:
    """Whether these tensors take the C products: float32 on the CPU."""
    return all(t.device.type == "cpu" and t.dtype == torch.float32 for t in tensors)


def _product_of(name: str, a: Tensor, b: Tensor, bias: Tensor | None) -> tuple[Tensor | None, Tensor]:
    """The checks and the output of a product `name` of a @ b (+ bias): (bias contiguous, out)."""
    # The C products read N bias values whatever the tensor holds: a short one would be read past.
    fits = a.shape[1] == b.shape[0] and (bias is None or tuple(bias.shape) == (b.shape[1],))
    if not fits or not fixed_order(a, b, *([] if bias is None else [bias])):
        given = "" if bias is None else f" + {bias.dtype} {tuple(bias.shape)}"
        raise ValueError(f"{name} takes float32 CPU matrices that chain (and a bias of one value per column): "
                         f"{a.dtype} {tuple(a.shape)} @ {b.dtype} {tuple(b.shape)}{given}")
    return None if bias is None else bias.contiguous(), torch.empty(a.shape[0], b.shape[1], dtype=torch.float32)


def matmul(a: Tensor, b: Tensor, bias: Tensor | None = None) -> Tensor:
    """a [M, K] (any strides) @ b [K, N] (+ bias [N] in every row), float32 on the CPU, each element
    summed in input order from its bias (or 0)."""
    (rows, inner), cols = a.shape, b.shape[1]
    bias, out = _product_of("matmul", a, b, bias)
    b = b.contiguous()
    if rows and cols:
        pointers = (floats(a), a.stride(0), a.stride(1), floats(b), cols,
                    floats(bias) if bias is not None else ffi.NULL, floats(out), cols)
        run_rows(lambda first, end: lib.gc_gemm(SIMD_PATH, rows, cols, inner, *pointers, first, end), rows)
    return out


# bfloat16 products (csrc/gc_bf16.h): AVX512_BF16's instruction where the CPU has it, else (or
# with GCPIPE_BF16=emulate, to compare them) its emulation on gc_gemm's path: the same bits.
BF16_HARDWARE = bool(lib.gc_bf16_hardware()) and os.environ.get("GCPIPE_BF16") != "emulate"


def bf16_runs_here() -> bool:
    """Whether matmul_bf16 runs on this machine's code path: the instruction, or its emulation on
    the AVX2 or AVX-512 products (the scalar path's fmaf need not honour DAZ and FTZ)."""
    return BF16_HARDWARE or SIMD_PATH in (lib.GC_NET_SIMD_AVX2, lib.GC_NET_SIMD_AVX512)


def product_in(bfloat16: bool):
    """The product a layer of the update takes: matmul_bf16 with bfloat16 operands, else matmul."""
    return matmul_bf16 if bfloat16 else matmul


def _words(t: Tensor):
    return ffi.cast("uint32_t *", t.data_ptr())


def matmul_bf16(a: Tensor, b: Tensor, bias: Tensor | None = None) -> Tensor:
    """a [M, K] @ b [K, N] (+ bias [N]) with a and b rounded to bfloat16 and summed in float32 as
    AVX512_BF16's dot product sums them (csrc/gc_bf16.h): the same bits on its instruction and on
    the AVX2 and AVX-512 float32 paths.  Float32 CPU matrices, any strides; x86-64 only."""
    (rows, inner), cols = a.shape, b.shape[1]
    if not bf16_runs_here():
        raise ValueError("matmul_bf16 needs x86-64 with AVX2 and FMA (or AVX512_BF16)")
    bias, out = _product_of("matmul_bf16", a, b, bias)
    if not (rows and cols):
        return out
    pairs = (inner + 1) // 2
    bias_pointer = floats(bias) if bias is not None else ffi.NULL
    # A transposed view (the weights' gradients, grad^T x) is packed as pairs of its columns, read
    # in memory order; any other A by rows.
    transposed = a.stride(1) != 1 and a.stride(0) == 1 and inner > 0
    if not transposed:
        a = a if a.stride(1) == 1 else a.contiguous()
    if BF16_HARDWARE:
        width = -(-cols // 32) * 32
        packed_b = torch.empty(pairs, width, dtype=torch.int32)
        run_rows(lambda first, end: lib.gc_bf16_pack_row_pairs(inner, cols, floats(b), b.stride(0), b.stride(1),
                                                               _words(packed_b), width, first, end), pairs)
        if transposed:
            lda = rows + 11                                 # (a tile reads 12 rows)
            packed_a = torch.empty(pairs, lda, dtype=torch.int32)
            run_rows(lambda first, end: lib.gc_bf16_pack_row_pairs(inner, rows, floats(a), a.stride(1), 1,
                                                                   _words(packed_a), lda, first, end), pairs)
            a_floats, a_words = ffi.NULL, _words(packed_a)
        else:
            a_floats, a_words, lda = floats(a), ffi.NULL, a.stride(0)
        product = lambda first, end: lib.gc_bf16_gemm(  # noqa: E731
            rows, cols, inner, a_floats, a_words, lda, _words(packed_b), width, bias_pointer, floats(out), cols,
            first, end)
    else:
        rounded_b = torch.empty(2 * pairs, cols, dtype=torch.float32)
        run_rows(lambda first, end: lib.gc_bf16_round_row_pairs(inner, cols, floats(b), b.stride(0), b.stride(1),
                                                                floats(rounded_b), cols, first, end), pairs)
        if transposed:
            rounded_a = torch.empty(2 * pairs, rows, dtype=torch.float32)       # A^T's rows
            run_rows(lambda first, end: lib.gc_bf16_round_row_pairs(inner, rows, floats(a), a.stride(1), 1,
                                                                    floats(rounded_a), rows, first, end), pairs)
            a_row, a_col = 1, rows
        else:
            rounded_a = torch.empty(rows, 2 * pairs, dtype=torch.float32)
            run_rows(lambda first, end: lib.gc_bf16_round_rows(inner, floats(a), a.stride(0), 1, floats(rounded_a),
                                                               2 * pairs, first, end), rows)
            a_row, a_col = 2 * pairs, 1
        product = lambda first, end: lib.gc_bf16_gemm_emulated(  # noqa: E731
            SIMD_PATH, rows, cols, 2 * pairs, floats(rounded_a), a_row, a_col, floats(rounded_b), cols, bias_pointer,
            floats(out), cols, first, end)
    run_rows(product, rows)
    return out


class FixedOrderLinear(torch.autograd.Function):
    """x @ weight.T (+ bias) over x's last dimension, as torch.nn.functional.linear, and its
    gradients, each product by `matmul`.  The bias's gradient is a product too (ones @ grad): a
    sum over the rows in order.  With `bfloat16` the output's and the gradients' products are
    `matmul_bf16`'s, the bias's gradient float32's."""

    @staticmethod
    def forward(ctx, x: Tensor, weight: Tensor, bias: Tensor | None, bfloat16: bool = False) -> Tensor:
        flat = x.reshape(-1, x.shape[-1])
        ctx.save_for_backward(flat, weight)
        ctx.input_shape, ctx.has_bias, ctx.bfloat16 = x.shape, bias is not None, bfloat16
        return product_in(bfloat16)(flat, weight.T, bias).view(*x.shape[:-1], weight.shape[0])

    @staticmethod
    @once_differentiable
    def backward(ctx, grad: Tensor) -> tuple[Tensor | None, Tensor | None, Tensor | None, None]:
        flat, weight = ctx.saved_tensors
        grad = grad.reshape(-1, weight.shape[0])
        product = product_in(ctx.bfloat16)
        grad_x = product(grad, weight).view(ctx.input_shape) if ctx.needs_input_grad[0] else None
        grad_weight = product(grad.T, flat) if ctx.needs_input_grad[1] else None
        grad_bias = bias_gradient(grad) if ctx.has_bias and ctx.needs_input_grad[2] else None
        return grad_x, grad_weight, grad_bias, None


class ByteInputLinear(torch.autograd.Function):
    """FixedOrderLinear's float32 products for a layer whose input is bytes (the observations,
    x [..., K] uint8, which have no gradient): each sum over the nonzero bytes only
    (csrc/gc_gemm.h, gc_gemm_bytes), the same bits as FixedOrderLinear over x cast to float32 but
    for the sign of a zero bias, which stays as the play-time step's encoder leaves it (tested).
    About a fifth of an observation's bytes are nonzero: the encoder's products in the update run
    several times faster, and the float32 copy of the observations is not made."""

    @staticmethod
    def forward(ctx, x: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
        flat = x.reshape(-1, x.shape[-1]).contiguous()
        (rows, inner), cols = flat.shape, weight.shape[0]
        # (The C products read K inputs per row and N bias values, whatever the tensors hold.)
        if weight.shape[1] != inner or (bias is not None and tuple(bias.shape) != (cols,)):
            given = "" if bias is None else f" + bias {tuple(bias.shape)}"
            raise ValueError(f"ByteInputLinear takes bytes [..., K] and a weight [N, K]: {tuple(x.shape)} and "
                             f"{tuple(weight.shape)}{given}")
        w = weight.T.contiguous()                                   # [K, N]
        out = torch.empty(rows, cols, dtype=torch.float32)
        bias = None if bias is None else bias.contiguous()
        if rows and cols:
            pointers = (uint8s(flat), inner, floats(w), cols, floats(bias) if bias is not None else ffi.NULL,
                        floats(out), cols)
            run_rows(lambda first, end: lib.gc_gemm_bytes(SIMD_PATH, rows, cols, inner, *pointers, first, end), rows)
        ctx.save_for_backward(flat)
        ctx.has_bias = bias is not None
        return out.view(*x.shape[:-1], cols)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad: Tensor) -> tuple[None, Tensor | None, Tensor | None]:
        (flat,) = ctx.saved_tensors
        (rows, inner), cols = flat.shape, grad.shape[-1]
        grad = grad.reshape(rows, cols).contiguous()
        grad_weight = None
        if ctx.needs_input_grad[1]:
            transposed = torch.empty(inner, cols, dtype=torch.float32)     # x^T grad, summed over the rows in order

            def inputs(first: int, end: int) -> None:
                if lib.gc_gemm_bytes_grad(SIMD_PATH, rows, cols, inner, uint8s(flat), inner, floats(grad), cols,
                                          floats(transposed), cols, first, end):
                    raise MemoryError("gc_gemm_bytes_grad: no memory for its scratch")

            run_rows(inputs, inner)
            grad_weight = transposed.T.contiguous()
        grad_bias = bias_gradient(grad) if ctx.has_bias and ctx.needs_input_grad[2] else None
        return None, grad_weight, grad_bias


def bias_gradient(grad: Tensor) -> Tensor:
    """The bias's gradient of a layer's output gradient grad [rows, N]: its rows summed in order
    (ones @ grad by `matmul`)."""
    return matmul(torch.ones(1, grad.shape[0], dtype=torch.float32), grad).view(-1)


def linear(layer: torch.nn.Linear, x: Tensor, bfloat16: bool = False) -> Tensor:
    """layer(x), by FixedOrderLinear where the tensors take the C products (with bfloat16 operands
    if asked: float32 CPU tensors only, which the run settings check); a uint8 x (observations)
    by ByteInputLinear where the weights take them in float32, else cast to float32."""
    if x.dtype == torch.uint8:
        if fixed_order(layer.weight) and x.device.type == "cpu" and not bfloat16:
            return ByteInputLinear.apply(x, layer.weight, layer.bias)
        x = x.to(torch.float32)
    if fixed_order(x, layer.weight):
        return FixedOrderLinear.apply(x, layer.weight, layer.bias, bfloat16)
    return layer(x)
