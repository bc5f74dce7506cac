"""Workers for the contract suite: ``world`` gives bob, alice and carol of one kind (virtual,
websocket, ray: tests/contract/kinds.py), fresh clients per test, leak-checked. The worker
processes (started once for the session, side by side) are those of tests/network/conftest.py."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: where the `network` package is

from network.conftest import start_processes, token, token_file  # noqa: E402,F401
from contract.kinds import KINDS, clients  # noqa: E402


@pytest.fixture(scope="session")
def worker_procs(token_file):
    """bob, alice and carol as worker processes on 127.0.0.1."""
    procs = start_processes(("bob", "alice", "carol"), token_file)
    yield procs
    for p in procs.values():
        p.kill()


@pytest.fixture(params=KINDS)
def kind(request) -> str:
    return request.param


@pytest.fixture
def world(request, kind):
    """bob, alice and carol, all of ``kind``."""
    return clients(request, kind, ("bob", "alice", "carol"))
