"""Shared test fixtures."""
import pytest
import torch


@pytest.fixture
def one_thread():
    """Byte-identical results (resume) need a fixed thread count; one keeps the tests cheap too."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)
