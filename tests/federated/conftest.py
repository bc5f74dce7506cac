import pytest
import torch

import syft_lab as sy


@pytest.fixture
def trio(workers):
    """bob, alice (leak-checked by tests/conftest.py) and carol."""
    carol = sy.VirtualWorker("carol")
    yield (*workers, carol)
    carol.close()


def numbered(n: int, features: int = 2):
    """Sample i has data [i, i, ...] and target i: a batch tells which samples it holds."""
    ids = torch.arange(n)
    return ids.float().unsqueeze(1).repeat(1, features), ids


def peek(ptr) -> torch.Tensor:
    """A copy of a remote tensor's value; the object stays where it is."""
    return ptr.clone().get()
