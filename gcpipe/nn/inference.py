"""Network inference for play, in C (csrc/gc_net.h): the MinGRU step of model.md §1 with a fixed
summation order, so a game's outputs are bit-identical whichever other games share a call, however
many workers run and on every machine — whatever BLAS torch would have used.  Training keeps torch;
play (matches, `gcpipe play`, training evaluation, search) goes through here.

`CompiledNet` holds a network's weights laid out for the C step (input-major copies of the torch
matrices); `step` advances per-slot recurrent states held by the caller in one float32 array
[n_slots, L, H] and optionally writes the 257 outputs per row (256 action logits, then the value).
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING

import numpy as np

from gcpipe._engine import ffi, lib
from gcpipe.errors import UserError

if TYPE_CHECKING:
    from gcpipe.nn.model import MinGRUPolicy

OUTPUTS = lib.GC_NET_OUTPUTS                      # 256 logits + the value
# Code paths, all giving the same bits (csrc/gc_net.h); BEST is the widest this CPU has.
SIMD = {"best": lib.GC_NET_SIMD_BEST, "scalar": lib.GC_NET_SIMD_SCALAR, "avx2": lib.GC_NET_SIMD_AVX2,
        "avx512": lib.GC_NET_SIMD_AVX512}


def simd_code(name: str = "best") -> int:
    """The code of path `name`, where `best` is GCPIPE_SIMD if set (scalar, avx2 or avx512: the
    C network and the training's products run that path in this process, to check on one machine
    that every path gives the same bits), else the widest this CPU has.  UserError for an unknown
    name or a path this CPU lacks."""
    if name == "best":
        name = os.environ.get("GCPIPE_SIMD") or best_simd()
    if name not in SIMD or name == "best":
        raise UserError(f"unknown code path {name!r}; choose one of {', '.join(n for n in SIMD if n != 'best')}")
    if SIMD[name] > lib.gc_net_best_simd():
        raise UserError(f"this CPU cannot run the {name} code path (it has {best_simd()})")
    return SIMD[name]


def best_simd() -> str:
    """The name of the widest code path this CPU runs."""
    code = lib.gc_net_best_simd()
    return next(name for name, value in SIMD.items() if value == code)


def net_parameters(model: MinGRUPolicy) -> dict:
    """A model's weight tensors under the names of the C step's arrays: torch's (out, in) matrices
    and, where the model has them, the bias vectors."""
    parameters = {"encoder": model.encoder.weight, "decoder": model.decoder.weight}
    parameters.update({f"gru{i}": gru.weight for i, gru in enumerate(model.grus)})
    if model.encoder.bias is not None:
        parameters.update(encoder_bias=model.encoder.bias, decoder_bias=model.decoder.bias)
    return parameters


def net_arrays(model: MinGRUPolicy) -> dict[str, np.ndarray]:
    """A model's weights as CompiledNet.from_arrays takes them: net_parameters as float32 arrays."""
    return {name: tensor.detach().cpu().float().numpy().copy() for name, tensor in net_parameters(model).items()}


class CompiledNet:
    """A MinGRUPolicy's weights as gc_net_step reads them.  `simd` picks the code path (for tests
    and benchmarks; every path gives the same bits)."""

    def __init__(self, model: MinGRUPolicy, simd: str = "best"):
        self._build(net_arrays(model), simd)

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray], simd: str = "best") -> "CompiledNet":
        """From `net_arrays` output — no torch involved (e.g. in a forked worker process)."""
        net = cls.__new__(cls)
        net._build(arrays, simd)
        return net

    def _build(self, weights: dict[str, np.ndarray], simd: str) -> None:
        hidden = weights["encoder"].shape[0]
        layers = sum(name.startswith("gru") for name in weights)
        if hidden % 16 or not 16 <= hidden <= lib.GC_NET_MAX_HIDDEN or not 1 <= layers <= lib.GC_NET_MAX_LAYERS:
            raise UserError(f"the C network step holds hidden sizes that are multiples of 16 up to "
                            f"{lib.GC_NET_MAX_HIDDEN} and 1..{lib.GC_NET_MAX_LAYERS} layers; this network has "
                            f"H={hidden}, L={layers}")
        code = simd_code(simd)
        self.hidden, self.layers = hidden, layers
        stride = lib.GC_NET_DECODER_STRIDE

        def input_major(matrix: np.ndarray, columns: int | None = None) -> np.ndarray:
            out = np.zeros((matrix.shape[1], columns or matrix.shape[0]), np.float32)
            out[:, :matrix.shape[0]] = matrix.T
            return out

        def bias(name: str, size: int) -> np.ndarray:
            out = np.zeros(size, np.float32)
            if name in weights:
                out[:len(weights[name])] = weights[name]
            return out

        self._arrays = {"encoder": input_major(weights["encoder"]), "encoder_bias": bias("encoder_bias", hidden),
                        "decoder": input_major(weights["decoder"], stride), "decoder_bias": bias("decoder_bias", stride)}
        self._arrays.update({f"gru{i}": input_major(weights[f"gru{i}"]) for i in range(layers)})
        net = ffi.new("gc_net *")
        net.hidden, net.layers, net.simd = hidden, layers, code
        for name in ("encoder", "encoder_bias", "decoder", "decoder_bias"):
            setattr(net, name, _pointer(self._arrays[name]))
        for i in range(layers):
            net.gru[i] = _pointer(self._arrays[f"gru{i}"])
        if lib.gc_net_prepare(net) != 0:
            raise UserError(f"this CPU cannot run the {simd} code path (it has {best_simd()})")
        self._net = net
        self.simd = next(name for name, value in SIMD.items() if value == net.simd)

    def new_states(self, n_slots: int) -> np.ndarray:
        """Zeroed recurrent states for n_slots slots: float32 [n_slots, L, H]."""
        return np.zeros((n_slots, self.layers, self.hidden), np.float32)

    def step(self, states: np.ndarray, slots: np.ndarray, obs: np.ndarray, out: np.ndarray | None = None,
             want_logits: np.ndarray | None = None) -> None:
        """Advances states[slots[k]] on observation obs[k] (uint8 [k, 120]); with `out` (float32
        [k, 257]) also writes each row's logits and value.  With `want_logits` (uint8 [k]), a row
        flagged 0 gets only its pass logit and value, its other logits 0 (csrc/gc_net.h).  The
        caller guarantees the shapes, dtypes and distinct in-range slots (NetworkPlayer checks them)."""
        n = len(slots)
        if n:
            lib.gc_net_step(self._net, n, ffi.from_buffer("int32_t[]", slots), ffi.from_buffer("uint8_t[]", obs),
                            ffi.from_buffer("float[]", states),
                            ffi.NULL if want_logits is None else
                            ffi.from_buffer("uint8_t[]", np.ascontiguousarray(want_logits, np.uint8)),
                            ffi.NULL if out is None else ffi.from_buffer("float[]", out))

    @property
    def c_net(self):
        """The `gc_net *` (kept alive by this object) for C code that evaluates the net itself."""
        return self._net


def _pointer(array: np.ndarray):
    return ffi.from_buffer("float[]", array)
