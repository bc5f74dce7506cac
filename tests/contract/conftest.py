"""Workers for the contract suite: ``world`` gives bob, alice and carol of one kind (virtual,
websocket, ray: tests/contract/kinds.py), fresh clients per test, leak-checked. The worker
processes (started once for the session, side by side) are those of tests/network/conftest.py."""
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: where the `network` package is

from network.conftest import start_processes, token, token_file  # noqa: E402,F401
from contract.kinds import KINDS, clients, leak_checked  # noqa: E402


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



@pytest.fixture
def doomed(request, kind, token_file):
    """``(erin, kill)``: a worker of ``kind`` with a process of its own (websocket: a worker
    process; ray: an actor), and a function that kills that process and waits until it is gone."""
    if kind == "websocket":
        proc = start_processes(("erin",), token_file)["erin"]
        (erin,) = clients(request, kind, ("erin",), procs={"erin": proc})
        yield erin, proc.kill
        proc.kill()
    elif kind == "ray":
        import ray

        from syft_lab.ray.starting import start_hosts
        from syft_lab.ray.worker import RayWorker

        request.getfixturevalue("ray_runtime")
        (host,) = start_hosts([["erin"]])
        (erin,) = leak_checked(request, RayWorker("erin", _host=host, progress=False))
        yield erin, lambda: _kill_actor(ray, host[0])
        ray.kill(host[0])
    else:
        raise ValueError(f"no process of its own for a {kind} worker")


def _kill_actor(ray, actor, timeout: float = 60.0) -> None:
    """``ray.kill`` and wait until the actor no longer answers (ray.kill only asks Ray to kill it)."""
    ray.kill(actor)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            ray.get(actor.hello.remote(), timeout=5)
        except ray.exceptions.RayActorError:
            return
        except ray.exceptions.GetTimeoutError:
            continue
        time.sleep(0.05)
    raise AssertionError(f"the actor still answered {timeout} s after ray.kill")
