"""The torch devices a training test runs on: the CPU everywhere, CUDA where torch sees a GPU (the
CUDA cases are skipped elsewhere, CI included; a machine with a GPU runs them: README, "Training on
a GPU")."""
import pytest
import torch

CUDA = pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="torch sees no GPU"))
DEVICES = ["cpu", CUDA]
