"""The update's fixed-order matrix products (csrc/gc_gemm.c through gcpipe/train/matmul.py) at the
default model's shapes, and Muon's orthogonalisation of its four matrices (docs/speed.md,
docs/experiments.md).

    python benchmarks/products.py [--threads N] [--rows R]

prints each product's best time of repeated calls over one second and its GFLOP/s: a minibatch's
forward (R rows into the MinGRU projections and the decoder), its input gradients, its weights'
gradients (the long sums over the rows) and the bias gradient.  To compare two builds, run it in
each tree (PYTHONPATH=TREE) in turn: this machine's speed drifts between minutes."""
from __future__ import annotations

import argparse

from gcpipe.torch_env import before_torch

before_torch()

import time  # noqa: E402

import torch  # noqa: E402

from gcpipe.train.matmul import matmul  # noqa: E402
from gcpipe.train.muon import orthogonalise  # noqa: E402

HIDDEN, PROJECTION, DECODER = 128, 384, 257       # the default MinGRUPolicy's widths


def positive(text: str) -> int:
    value = int(text) if text.isdigit() else 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {text!r}")
    return value


def best_seconds(call, budget: float = 1.0) -> float:
    call()
    best, start = float("inf"), time.perf_counter()
    while time.perf_counter() - start < budget:
        t = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - t)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=positive, default=2)
    parser.add_argument("--rows", type=positive, default=8192, help="rows of a minibatch (segments x steps)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    generator = torch.Generator().manual_seed(0)
    rows = args.rows

    def rand(*shape):
        return torch.randn(*shape, generator=generator)

    cases = []
    for width in (PROJECTION, DECODER):
        x, weight, grad = rand(rows, HIDDEN), rand(width, HIDDEN), rand(rows, width)
        cases += [(f"forward {rows}x{HIDDEN} -> {width}", lambda x=x, w=weight: matmul(x, w.T), rows * HIDDEN * width),
                  (f"input gradient {rows}x{width} -> {HIDDEN}", lambda g=grad, w=weight: matmul(g, w),
                   rows * HIDDEN * width),
                  (f"weights' gradient {width}x{rows} -> {HIDDEN}", lambda g=grad, x=x: matmul(g.T, x),
                   rows * HIDDEN * width)]
    ones, grad = torch.ones(1, rows), rand(rows, PROJECTION)
    cases.append((f"bias gradient {rows} rows x {PROJECTION}", lambda: matmul(ones, grad), rows * PROJECTION))
    for name, call, multiply_adds in cases:
        seconds = best_seconds(call)
        print(f"{name:40s} {seconds * 1e3:7.3f} ms  {2 * multiply_adds / seconds / 1e9:6.1f} GFLOP/s")
    matrices = [rand(HIDDEN, 120), rand(PROJECTION, HIDDEN), rand(PROJECTION, HIDDEN), rand(DECODER, HIDDEN)]
    print(f"{'Muon, the four matrices':40s} {best_seconds(lambda: orthogonalise(matrices)) * 1e3:7.3f} ms")


if __name__ == "__main__":
    main()
