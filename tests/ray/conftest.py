"""Ray workers for the tests. The session's local Ray and its actors (``ray_runtime``,
``ray_hosts``) and ``ray_pair`` (bob and alice, leak-checked) are in tests/conftest.py, shared
with the worker contract suite (tests/contract/).

- ``fresh_worker``: a worker with an actor of its own, for the tests that kill it.
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
