"""One local Ray for the whole test session (started on first use, stopped at the end), and
Ray workers for the tests.

- ``ray_pair``: clients for the session's two actors, bob and alice (a fresh client session
  per test, as the websocket tests' ``remote``); at the end of a test their stores must be
  empty again (the leak check of tests/conftest.py, for Ray workers).
- ``fresh_worker``: a worker with an actor of its own, for the tests that kill it.
"""
from __future__ import annotations

import gc

import pytest

import syft_lab.ray as sy_ray
from syft_lab.ray.worker import RayWorker, start_hosts


@pytest.fixture(scope="session")
def ray_runtime():
    runtime = sy_ray.init(num_cpus=2)
    yield runtime
    sy_ray.shutdown()


@pytest.fixture(scope="session")
def ray_hosts(ray_runtime):
    """bob's and alice's actors, started once (in parallel) for the session."""
    hosts = start_hosts([["bob"], ["alice"]])
    return {"bob": hosts[0], "alice": hosts[1]}


def leaked(worker) -> list:
    """What the worker stores that it does not hold on purpose (``load``)."""
    return [f"{worker.id}:{o['id']} {o.get('type')}{o.get('shape')}" for o in worker.summary() if not o.get("held")]


@pytest.fixture
def ray_pair(ray_hosts, request):
    bob = RayWorker("bob", _host=ray_hosts["bob"], progress=False)
    alice = RayWorker("alice", _host=ray_hosts["alice"], progress=False)
    yield bob, alice
    failed = getattr(request.node, "rep_call_failed", False)
    request.node.funcargs.clear()
    gc.collect()
    leaks = []
    for w in (bob, alice):
        if w.state == "connected":
            w.flush()
            leaks += leaked(w)
        w.close()  # ends the session: the actor releases whatever it still held for it
    if leaks and not failed:
        pytest.fail(f"objects left on the test's Ray workers ({len(leaks)}): {'; '.join(leaks)}", pytrace=False)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.when == "call":
        item.rep_call_failed = report.failed
    return report


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
