"""Checkpoint files (model.md §2): raw little-endian float32, no header, the layout told by the size.

    legacy   587,264 bytes  enc.W enc.b dec.W(256 rows) dec.b(256) gru0.W gru1.W   no value head
    5c       586,240 bytes  enc.W dec.W(257 rows: 256 logits + value) gru0.W gru1.W
    5c-bias  587,808 bytes  enc.W enc.b dec.W(257 rows) dec.b(264: 256 + value + 7 zero pads) gru0.W gru1.W

Reading a file needs numpy alone: play (the C step) takes the weights as arrays, and torch, whose
import costs seconds per match job, is imported only when a checkpoint's torch module is asked for.
"""
from __future__ import annotations

import hashlib
import os
import warnings
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from gcpipe.errors import UserError
from gcpipe.io import checksum_path, checksum_problem, read_bytes, special_file_kind, write_checked
from gcpipe.engine import NUM_ACTIONS, OBS_SIZE
from gcpipe.nn.inference import net_arrays, net_parameters

if TYPE_CHECKING:
    import torch

    from gcpipe.nn.model import MinGRUPolicy

HIDDEN, LAYERS = 128, 2
_FLOAT = np.dtype("<f4")
_DEC_BIAS_PAD = 7
# No trained network comes near this (|w| of trained 5c nets stays below 10); a file that does
# is most likely not a checkpoint, and its float32 sums overflow.
ABSURD_WEIGHT = 1e4

# (name, shape) in file order for each layout.
_TENSORS: dict[str, list[tuple[str, tuple[int, ...]]]] = {
    "legacy": [("enc.W", (HIDDEN, OBS_SIZE)), ("enc.b", (HIDDEN,)), ("dec.W", (NUM_ACTIONS, HIDDEN)),
               ("dec.b", (NUM_ACTIONS,)), ("gru0.W", (3 * HIDDEN, HIDDEN)), ("gru1.W", (3 * HIDDEN, HIDDEN))],
    "5c": [("enc.W", (HIDDEN, OBS_SIZE)), ("dec.W", (NUM_ACTIONS + 1, HIDDEN)),
           ("gru0.W", (3 * HIDDEN, HIDDEN)), ("gru1.W", (3 * HIDDEN, HIDDEN))],
    "5c-bias": [("enc.W", (HIDDEN, OBS_SIZE)), ("enc.b", (HIDDEN,)), ("dec.W", (NUM_ACTIONS + 1, HIDDEN)),
                ("dec.b", (NUM_ACTIONS + 1 + _DEC_BIAS_PAD,)), ("gru0.W", (3 * HIDDEN, HIDDEN)),
                ("gru1.W", (3 * HIDDEN, HIDDEN))],
}
LAYOUTS = {name: 4 * sum(int(np.prod(shape)) for _, shape in tensors) for name, tensors in _TENSORS.items()}
assert LAYOUTS == {"legacy": 587264, "5c": 586240, "5c-bias": 587808}
_LAYOUT_BY_SIZE = {size: name for name, size in LAYOUTS.items()}
_ACCEPTED = ", ".join(f"{size} ({name})" for name, size in LAYOUTS.items())


class CheckpointWarning(UserWarning):
    """A conversion that drops something the target layout cannot hold (the value head), or
    weights of a magnitude no trained network has."""


@dataclass(frozen=True)
class Checkpoint:
    # A file's weights in gcpipe.nn.inference.net_arrays' names and shapes; None for a model in memory.
    arrays: dict[str, np.ndarray] | None = field(compare=False, repr=False)
    layout: str
    sha256: str
    size: int
    has_value_head: bool
    full_turn: bool           # recurrent semantics of rules.md §9: 5c layouts step on every ply
    path: Path | None         # None for a model held in memory

    @cached_property
    def model(self) -> MinGRUPolicy:
        """The network as a torch module in eval mode, built from the file's arrays on first use."""
        from gcpipe.nn.model import MinGRUPolicy

        model = MinGRUPolicy(HIDDEN, LAYERS, OBS_SIZE, NUM_ACTIONS, bias="encoder_bias" in self.arrays)
        _fill(model, self.arrays)
        return model.eval()

    @property
    def net(self) -> dict[str, np.ndarray]:
        """The weights as the C step reads them: the torch module's where there is one (given, or
        built and perhaps changed since), else the file's arrays, with no torch involved."""
        model = self.__dict__.get("model")
        return self.arrays if model is None else net_arrays(model)

    @classmethod
    def from_model(cls, model: MinGRUPolicy, layout: str | None = None) -> "Checkpoint":
        """A model in memory (e.g. during training) described as if saved in `layout` (default: 5c-bias
        if it has biases, else 5c); sha256 and size are those of that file."""
        layout = layout or ("5c-bias" if model.bias else "5c")
        data = to_bytes(model, layout)
        checkpoint = cls(arrays=None, layout=layout, sha256=hashlib.sha256(data).hexdigest(), size=len(data),
                         has_value_head=layout != "legacy", full_turn=layout != "legacy", path=None)
        checkpoint.__dict__["model"] = model.eval()   # the model itself, as the cached property holds it
        return checkpoint


def tensor_offsets(layout: str) -> dict[str, tuple[int, tuple[int, ...]]]:
    """Byte offset and shape of every tensor of `layout` in the file."""
    offsets, at = {}, 0
    for name, shape in _TENSORS[_check_layout(layout)]:
        offsets[name] = (at, shape)
        at += 4 * int(np.prod(shape))
    return offsets


def detect_layout(path) -> str:
    """The layout of the file at `path`, from its size; UserError for anything that is not one."""
    return _layout_of_size(_stat_checkpoint(Path(path)), Path(path))


def load(path, expected_sha256: str | None = None) -> Checkpoint:
    """Reads a checkpoint (never modifying the file)."""
    path = Path(path)
    detect_layout(path)  # a directory, a missing file or a wrong size fails here, before reading
    data = _read_bytes(path)
    # The layout comes from the bytes actually read, in case the file changed since the stat.
    layout = _layout_of_size(len(data), path)
    if checksum_path(path).exists():   # written by gcpipe: verify what it recorded
        problem = checksum_problem(path, data)
        if problem:
            raise UserError(f"checkpoint {path} is damaged: {problem}")
    sha256 = hashlib.sha256(data).hexdigest()
    if expected_sha256 is not None and sha256 != expected_sha256.lower():
        raise UserError(f"checkpoint {path} has SHA-256 {sha256}, expected {expected_sha256.lower()}")
    arrays = _split(np.frombuffer(data, dtype=_FLOAT), layout)
    for name, array in arrays.items():
        bad = int(np.count_nonzero(~np.isfinite(array)))
        if bad:
            raise UserError(f"checkpoint {path} holds {bad} NaN/inf value(s) in tensor {name}")
        largest = float(np.abs(array).max(initial=0.0))
        if largest > ABSURD_WEIGHT:
            warnings.warn(f"checkpoint {path}: tensor {name} holds a weight of magnitude {largest:.3g}; trained "
                          f"networks stay far below {ABSURD_WEIGHT:g} (sums of such weights overflow float32): "
                          f"is this a checkpoint?", CheckpointWarning, stacklevel=2)
    return Checkpoint(arrays=_network_arrays(arrays, layout), layout=layout, sha256=sha256, size=len(data),
                      has_value_head=layout != "legacy", full_turn=layout != "legacy", path=path)


def save(model: MinGRUPolicy, path, layout: str) -> None:
    """Writes `model` in `layout` atomically (temp file + os.replace), with its SHA-256 sidecar
    (PATH.sha256; the file itself stays the raw layout).  Refuses (UserError) to drop
    nonzero biases into the bias-free 5c layout; warns (CheckpointWarning) when writing legacy
    drops a nonzero value head."""
    layout = _check_layout(layout)
    if (model.hidden, model.layers, model.obs_size, model.num_actions) != (HIDDEN, LAYERS, OBS_SIZE, NUM_ACTIONS):
        raise UserError(f"checkpoint layouts hold H={HIDDEN}, L={LAYERS} networks; this model has "
                        f"H={model.hidden}, L={model.layers}")
    write_checked(path, to_bytes(model, layout))


def to_bytes(model: MinGRUPolicy, layout: str) -> bytes:
    """The file contents of `model` in `layout` (see save for what is refused or warned about)."""
    layout = _check_layout(layout)
    weights = {"enc.W": model.encoder.weight, "dec.W": model.decoder.weight}
    weights.update({f"gru{i}.W": gru.weight for i, gru in enumerate(model.grus)})
    arrays = {name: w.detach().cpu().float().numpy() for name, w in weights.items()}
    enc_bias = _bias_array(model.encoder, HIDDEN)
    dec_bias = _bias_array(model.decoder, NUM_ACTIONS + 1)
    if layout == "5c" and (enc_bias.any() or dec_bias.any()):
        raise UserError("this network has nonzero biases, which layout 5c cannot hold; use layout 5c-bias")
    if layout == "legacy":
        if arrays["dec.W"][NUM_ACTIONS].any() or dec_bias[NUM_ACTIONS]:
            warnings.warn("layout legacy has no value head: the value head is dropped", CheckpointWarning,
                          stacklevel=2)
        arrays["dec.W"] = arrays["dec.W"][:NUM_ACTIONS]
        dec_bias = dec_bias[:NUM_ACTIONS]
    elif layout == "5c-bias":
        dec_bias = np.concatenate([dec_bias, np.zeros(_DEC_BIAS_PAD, np.float32)])
    arrays["enc.b"], arrays["dec.b"] = enc_bias, dec_bias
    data = np.concatenate([arrays[name].astype(_FLOAT).ravel() for name, _ in _TENSORS[layout]]).tobytes()
    assert len(data) == LAYOUTS[layout]
    return data


def convert(source, target, layout: str) -> Checkpoint:
    """Reads `source`, writes it to `target` in `layout` and returns the written checkpoint.
    Refuses to overwrite the source itself."""
    source, target = Path(source), Path(target)
    _check_layout(layout)
    checkpoint = load(source)
    if target.exists() and (target.is_dir() or os.path.samefile(source, target)):
        what = "is a directory" if target.is_dir() else "is the input file"
        raise UserError(f"output {target} {what}; give another path")
    save(checkpoint.model, target, layout)
    return load(target)


def describe(path) -> dict:
    """What `gcpipe ckpt info` shows: layout, size, SHA-256, value head and each tensor's shape and
    L2 norm, read straight from the file."""
    checkpoint = load(path)
    data = np.frombuffer(_read_bytes(Path(path)), dtype=_FLOAT)
    tensors = [{"name": name, "shape": list(array.shape), "norm": float(np.linalg.norm(array.astype(np.float64)))}
               for name, array in _split(data, checkpoint.layout).items()]
    return {"path": str(path), "layout": checkpoint.layout, "bytes": checkpoint.size, "sha256": checkpoint.sha256,
            "value_head": checkpoint.has_value_head, "full_turn": checkpoint.full_turn, "tensors": tensors}


# -- helpers ---------------------------------------------------------------------------------
def _check_layout(layout: str) -> str:
    if layout not in LAYOUTS:
        raise UserError(f"unknown checkpoint layout {layout!r}; known: {', '.join(LAYOUTS)}")
    return layout


def _stat_checkpoint(path: Path) -> int:
    if path.is_dir():
        raise UserError(f"checkpoint {path} is a directory, not a .bin file")
    try:
        status = path.stat()
        if kind := special_file_kind(status.st_mode):
            raise UserError(f"checkpoint {path} is {kind}, not a .bin file")
        return status.st_size
    except FileNotFoundError:
        raise UserError(f"checkpoint {path} does not exist") from None
    except OSError as error:
        raise UserError(f"cannot read checkpoint {path}: {error.strerror}") from None


def _layout_of_size(size: int, path: Path) -> str:
    if size not in _LAYOUT_BY_SIZE:
        raise UserError(f"checkpoint {path} has {size} bytes, which is no known layout; accepted sizes: {_ACCEPTED}")
    return _LAYOUT_BY_SIZE[size]


def _read_bytes(path: Path) -> bytes:
    try:
        return read_bytes(path)
    except OSError as error:
        raise UserError(f"cannot read checkpoint {path}: {error.strerror}") from None


def _split(floats: np.ndarray, layout: str) -> dict[str, np.ndarray]:
    arrays, at = {}, 0
    for name, shape in _TENSORS[layout]:
        count = int(np.prod(shape))
        arrays[name] = floats[at:at + count].reshape(shape)
        at += count
    return arrays


def _bias_array(linear: torch.nn.Linear, size: int) -> np.ndarray:
    if linear.bias is None:
        return np.zeros(size, np.float32)
    return linear.bias.detach().cpu().float().numpy()


def _network_arrays(arrays: dict[str, np.ndarray], layout: str) -> dict[str, np.ndarray]:
    """A file's tensors as the network holds them (net_arrays' names): a decoder of 257 rows
    (legacy has no value row: zero) and its bias cut to them (5c-bias pads 7); 5c has no biases."""
    decoder = np.zeros((NUM_ACTIONS + 1, HIDDEN), np.float32)
    decoder[:len(arrays["dec.W"])] = arrays["dec.W"]
    net = {"encoder": arrays["enc.W"].astype(np.float32), "decoder": decoder}
    net.update({f"gru{i}": arrays[f"gru{i}.W"].astype(np.float32) for i in range(LAYERS)})
    if layout != "5c":
        decoder_bias = np.zeros(NUM_ACTIONS + 1, np.float32)
        rows = min(NUM_ACTIONS + 1, len(arrays["dec.b"]))
        decoder_bias[:rows] = arrays["dec.b"][:rows]
        net.update(encoder_bias=arrays["enc.b"].astype(np.float32), decoder_bias=decoder_bias)
    return net


def _fill(model: MinGRUPolicy, net: dict[str, np.ndarray]) -> None:
    import torch

    with torch.no_grad():
        for name, parameter in net_parameters(model).items():
            parameter.copy_(torch.from_numpy(net[name]))
