"""The torch devices a training test runs on: the CPU everywhere, CUDA where torch sees a GPU (the
CUDA cases are skipped elsewhere, CI included; benchmarks/gpu.sh runs them on a machine with a GPU:
docs/gpu.md)."""
import pytest
import torch

CUDA = pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="torch sees no GPU"))
DEVICES = ["cpu", CUDA]
