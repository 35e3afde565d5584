"""The network's two selections — the candidate g(h) of model.md §1 and the illegal logits' mask of
model.md §3 — with their gradients, in C (csrc/gc_select.c) for float32 CPU tensors.

They give torch.where's bits, forward and backward (they only choose between their inputs), but
torch's CPU `where` runs a scalar loop and these run several times faster (docs/experiments.md).  Other
tensors (CUDA, float64, layouts the kernels do not take) go through torch.where, as before."""
from __future__ import annotations

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from gcpipe._engine import ffi, lib

ILLEGAL_LOGIT = -1e4   # model.md §3: finite, so log-probs and entropy stay finite


def floats(t: Tensor):
    """A float * to the tensor's data for the C kernels."""
    return ffi.cast("float *", t.data_ptr())


def uint8s(t: Tensor):
    """A uint8_t * to the tensor's data (bytes or bools) for the C kernels."""
    return ffi.cast("uint8_t *", t.data_ptr())


def _empty(shape) -> Tensor:
    return torch.empty(shape, dtype=torch.float32, device="cpu")


def _on_cpu_float32(*tensors: Tensor) -> bool:
    return all(t.device.type == "cpu" and t.dtype == torch.float32 for t in tensors)


def _row_stride(t: Tensor) -> int | None:
    """The stride between consecutive rows (last dimension contiguous) over all leading dimensions
    of `t`, or None when its rows do not lie at one stride."""
    if t.dim() < 2 or t.stride(-1) != 1:
        return None
    expected = t.stride(-2)
    for dim in range(t.dim() - 3, -1, -1):
        expected *= t.shape[dim + 1]
        if t.shape[dim] > 1 and t.stride(dim) != expected:
            return None
    return t.stride(-2)


def _candidate(h: Tensor, sigmoid_h: Tensor, h_stride: int, sigmoid_stride: int) -> Tensor:
    out = _empty(h.shape)
    lib.gc_candidate(h.numel() // h.shape[-1], h.shape[-1], floats(h), h_stride, floats(sigmoid_h),
                     sigmoid_stride, floats(out))
    return out


class _Candidate(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h: Tensor, sigmoid_h: Tensor, h_stride: int, sigmoid_stride: int) -> Tensor:
        ctx.save_for_backward(h)
        ctx.h_stride = h_stride
        return _candidate(h, sigmoid_h, h_stride, sigmoid_stride)

    @staticmethod
    @once_differentiable   # torch.where's gradient is differentiable again; this one says it is not
    def backward(ctx, grad: Tensor) -> tuple[Tensor, Tensor, None, None]:
        (h,) = ctx.saved_tensors
        grad = grad.contiguous()
        grad_h, grad_sigmoid = _empty(h.shape), _empty(h.shape)
        lib.gc_candidate_grad(h.numel() // h.shape[-1], h.shape[-1], floats(h), ctx.h_stride, floats(grad),
                              floats(grad_h), floats(grad_sigmoid))
        return grad_h, grad_sigmoid, None, None


def candidate(h: Tensor, sigmoid_h: Tensor) -> Tensor:
    """g(h) = h + 0.5 for h >= 0, else sigmoid(h) (positive, so the MinGRU state stays positive),
    from h and its sigmoid, of the same shape."""
    strides = _row_stride(h), _row_stride(sigmoid_h)
    if _on_cpu_float32(h, sigmoid_h) and h.shape == sigmoid_h.shape and h.numel() and None not in strides:
        if torch.is_grad_enabled() and (h.requires_grad or sigmoid_h.requires_grad):
            return _Candidate.apply(h, sigmoid_h, *strides)
        return _candidate(h, sigmoid_h, *strides)
    return torch.where(h >= 0, h + 0.5, sigmoid_h)


def _mask_logits(logits: Tensor, mask: Tensor) -> Tensor:
    out = _empty(logits.shape)
    n1, n2, stride1, stride2 = ((logits.shape[0], 1, logits.stride(0), 0) if logits.dim() == 2 else
                                (logits.shape[0], logits.shape[1], logits.stride(0), logits.stride(1)))
    lib.gc_mask_logits(n1, n2, logits.shape[-1], floats(logits), stride1, stride2,
                       uint8s(mask), ILLEGAL_LOGIT, floats(out))
    return out


class _MaskLogits(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits: Tensor, mask: Tensor) -> Tensor:
        ctx.save_for_backward(mask)
        return _mask_logits(logits, mask)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad: Tensor) -> tuple[Tensor, None]:
        (mask,) = ctx.saved_tensors
        grad = grad.contiguous()
        out = _empty(grad.shape)
        lib.gc_mask_grad(grad.numel(), uint8s(mask), floats(grad), floats(out))
        return out, None


def mask_logits(logits: Tensor, mask: Tensor) -> Tensor:
    """Illegal logits (mask false) replaced by ILLEGAL_LOGIT; `mask` is bool, of the logits' shape
    ([rows, actions] or [B, T, actions]), the result contiguous."""
    if (_on_cpu_float32(logits) and mask.dtype == torch.bool and mask.device.type == "cpu"
            and mask.is_contiguous() and mask.shape == logits.shape and logits.dim() in (2, 3)
            and logits.stride(-1) == 1 and logits.numel()):
        if torch.is_grad_enabled() and logits.requires_grad:
            return _MaskLogits.apply(logits, mask)
        return _mask_logits(logits, mask)
    return torch.where(mask, logits, ILLEGAL_LOGIT)
