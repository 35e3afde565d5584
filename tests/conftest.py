"""Shared test fixtures; torch's kernels pinned as the CLI pins them (gcpipe/torch_env.py: its AVX2
kernels, MKL's COMPATIBLE branch), so the suite computes the same bits on every x86-64 CPU."""
from gcpipe.torch_env import before_torch

before_torch()       # before torch loads

import pytest  # noqa: E402
import torch  # noqa: E402


@pytest.fixture
def one_thread():
    """Byte-identical results (resume) need a fixed thread count; one keeps the tests cheap too."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


@pytest.fixture(scope="session")
def edited_engines(tmp_path_factory):
    """Engines built from copies of the sources (tests/engines.py): {"tie_break": folder,
    "neutral": folder, "compiler": the caching compiler}, each with its build record build.json."""
    from engines import NEUTRAL, TIE_BREAK, build, caching_compiler, copy_sources

    root = tmp_path_factory.mktemp("engines")
    compiler = caching_compiler(root)
    engines = {"compiler": compiler}
    for name, edits in (("neutral", NEUTRAL), ("tie_break", [TIE_BREAK])):
        engines[name] = copy_sources(root / name, edits)
        build(engines[name], compiler)
    return engines
