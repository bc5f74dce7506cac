"""Ray workers for the tests. The session's local Ray and its actors (``ray_runtime``,
``ray_hosts``) and ``ray_pair`` (bob and alice, leak-checked) are in tests/conftest.py, shared
with the worker contract suite (tests/contract/).

- ``fresh_worker``: a worker with an actor of its own, for the tests that kill it;
- ``kill_actor``: kill an actor and wait until it is dead.
"""
from __future__ import annotations

import pytest

from syft_lab.ray.worker import RayWorker


@pytest.fixture
def fresh_worker(ray_runtime):
    """Start a RayWorker with its own actor: fresh_worker("carol", max_restarts=1)."""
    started = []

    def start(worker_id, **options):
        w = RayWorker(worker_id, progress=False, **options)
        started.append(w)
        return w

    yield start
    import ray

    for w in started:
        w.close()
        ray.kill(w.actor)


@pytest.fixture
def kill_actor():
    """kill_actor(actor): ``ray.kill`` and wait until the actor is dead (see ``_kill_and_wait``)."""
    return _kill_and_wait


def _kill_and_wait(actor, timeout: float = 30.0) -> None:
    """``ray.kill(actor)`` and wait until the actor is dead: ray.kill only asks Ray to kill it, so a
    call sent right after may still be answered (a test of "the next call fails" must not race it)."""
    import time

    import ray

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
    raise AssertionError(f"the actor was still answering {timeout} s after ray.kill")
