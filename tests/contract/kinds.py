"""The three kinds of worker the contract suite and the tutorial flows run over, and the one
leak detector every worker fixture uses (tests/conftest.py runs it at the end of each test).

    @pytest.fixture(params=KINDS)
    def world(request):
        return clients(request, request.param, ("bob", "alice"))   # leak-checked, closed after

- ``virtual``: VirtualWorkers, in process.
- ``websocket``: clients of worker processes on 127.0.0.1 (``procs``, by default the fixture
  ``worker_procs`` the requesting test sees; ``token``).
- ``ray``: clients of the session's Ray actors (``ray_hosts`` in tests/conftest.py: bob's, and
  alice's that hosts carol too), marked ``ray`` (``-m ray`` selects them; tests/conftest.py runs
  them in the process that runs every other Ray test).
"""
from __future__ import annotations

import pytest

import syft_lab as sy
from syft_lab.ray.worker import RayWorker
from syft_lab.workers.websocket import WebSocketWorker

KINDS = [pytest.param("virtual"), pytest.param("websocket", marks=pytest.mark.network),
         pytest.param("ray", marks=[pytest.mark.ray, pytest.mark.network])]

LEAK_CHECKED = pytest.StashKey[list]()


def leak_checked(request, *workers):
    """Hand ``workers`` (of any kind) to the leak detector: once the test and every fixture of it
    are torn down, they store nothing but what they hold on purpose; then they are closed
    (tests/conftest.py, pytest_runtest_teardown). Returns them."""
    request.node.stash.setdefault(LEAK_CHECKED, []).extend(workers)
    return workers


def leaked(worker) -> list[str]:
    """What ``worker`` (of any kind) still stores that no test asked it to keep (``load``ed data
    is held by the worker on purpose and does not count)."""
    if worker.state not in ("in-process", "connected"):
        return []  # closed by the test (its session released what it held), or killed by it
    worker.flush()  # the releases the collected pointers queued
    return [f"{worker.id}:{o['id']} {o.get('type')}{o.get('shape')}" for o in worker.summary() if not o.get("held")]


def ray_clients(ray_hosts, *ids) -> list:
    """Clients for the session's Ray workers ``ids`` (a fresh client session each)."""
    return [RayWorker(i, _host=ray_hosts[i], progress=False) for i in ids]


def clients(request, kind: str, ids, procs=None) -> tuple:
    """Workers ``ids`` of ``kind`` (fresh clients; leak-checked, closed at the test's end)."""
    if kind == "virtual":
        made = [sy.VirtualWorker(i) for i in ids]
    elif kind == "websocket":
        procs = procs if procs is not None else request.getfixturevalue("worker_procs")
        token = request.getfixturevalue("token")
        made = [WebSocketWorker(procs[i].url, id=i, token=token, progress=False) for i in ids]
    elif kind == "ray":
        made = ray_clients(request.getfixturevalue("ray_hosts"), *ids)
    else:
        raise ValueError(f"no worker kind {kind!r}")
    return leak_checked(request, *made)
