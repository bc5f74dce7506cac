import pytest
import torch

import syft_lab as sy


@pytest.fixture(autouse=True)
def hooked():
    sy.hook()
    yield


@pytest.fixture
def workers():
    """Fresh bob and alice for one test; their stores must be empty again at the end."""
    bob, alice = sy.VirtualWorker("bob"), sy.VirtualWorker("alice")
    yield bob, alice
    bob.close()
    alice.close()


@pytest.fixture
def bob(workers):
    return workers[0]


@pytest.fixture
def alice(workers):
    return workers[1]


def pytest_configure(config):
    torch.manual_seed(0)
