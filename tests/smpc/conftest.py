"""Parties for the secure computation tests: in-process workers, and real worker processes."""
import gc
import sys
from pathlib import Path

import pytest

import syft_lab as sy
from syft_lab.workers.websocket import WebSocketWorker

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: where the `network` package is

from network.conftest import start_processes, token, token_file  # noqa: E402,F401


def _stores_empty(workers):
    return {w.id: len(w.core.objects) for w in workers if w.core.objects}


@pytest.fixture
def parties2():
    """alice and bob as parties, carol the crypto provider (VirtualWorkers). Every store is
    empty again at the end: intermediate shares and triples are released."""
    ws = [sy.VirtualWorker(n) for n in ("alice", "bob", "carol")]
    yield ws[0], ws[1], ws[2]
    gc.collect()
    left = _stores_empty(ws)
    for w in ws:
        w.close()
    assert not left, f"objects left on the workers: {left}"


@pytest.fixture
def parties3():
    """alice, bob and dave as parties, carol the crypto provider."""
    ws = [sy.VirtualWorker(n) for n in ("alice", "bob", "dave", "carol")]
    yield ws[0], ws[1], ws[2], ws[3]
    gc.collect()
    left = _stores_empty(ws)
    for w in ws:
        w.close()
    assert not left, f"objects left on the workers: {left}"


@pytest.fixture(params=[2, 3], ids=["2 parties", "3 parties"])
def parties(request):
    """(parties, crypto provider) for 2 and 3 parties."""
    n = request.param
    names = ("alice", "bob", "dave")[:n]
    ws = [sy.VirtualWorker(x) for x in names]
    provider = sy.VirtualWorker("carol")
    yield ws, provider
    gc.collect()
    left = _stores_empty(ws + [provider])
    for w in ws + [provider]:
        w.close()
    assert not left, f"objects left on the workers: {left}"


@pytest.fixture(scope="session")
def smpc_procs(token_file):
    """alice, bob, dave (parties) and carol (crypto provider) as worker processes on 127.0.0.1:
    started once for every smpc test file a test process runs (each test is its own client
    session, and a closed session's objects are released)."""
    procs = start_processes(("alice", "bob", "carol", "dave"), token_file)
    yield procs
    for p in procs.values():
        p.kill()


@pytest.fixture
def remote_parties(smpc_procs, token):
    ws = [WebSocketWorker(smpc_procs[w].url, id=w, token=token, progress=False) for w in ("alice", "bob", "carol")]
    yield tuple(ws)
    for w in ws:
        w.close()


@pytest.fixture
def remote_parties3(smpc_procs, token):
    """alice, bob, dave (parties) and carol (provider): clients of the worker processes."""
    ws = [WebSocketWorker(smpc_procs[w].url, id=w, token=token, progress=False)
          for w in ("alice", "bob", "dave", "carol")]
    yield tuple(ws)
    for w in ws:
        w.close()
