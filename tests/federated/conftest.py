import pytest

import syft_lab as sy
from federated_data import unload


@pytest.fixture
def trio(workers):
    """bob, alice (leak-checked by tests/conftest.py) and carol."""
    carol = sy.VirtualWorker("carol")
    yield (*workers, carol)
    carol.close()


@pytest.fixture(name="unload")
def unload_fixture():
    """``federated_data.unload``, as a fixture."""
    return unload
