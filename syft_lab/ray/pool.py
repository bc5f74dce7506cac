"""Many Ray workers at once: ``sy.ray.workers(32, prefix="client")``."""
from __future__ import annotations

from ..errors import SyftError
from ..workers.base import check_worker_id
from .worker import DEFAULT_NUM_CPUS, DEFAULT_TIMEOUT, RayWorker, start_hosts


def workers(n: int, prefix: str = "worker", *, start: int = 0, per_actor: int = 1,
            num_cpus: float = DEFAULT_NUM_CPUS, memory: int | None = None, resources: dict | None = None,
            max_restarts: int = 0, max_bytes: int | None = None, max_objects: int | None = None,
            threads: int = 1, timeout: float = DEFAULT_TIMEOUT, **actor_options) -> list:
    """``n`` RayWorkers named ``prefix0`` .. ``prefix{n-1}`` (from ``start``), started in parallel.

    Each is an actor placed by Ray with ``num_cpus`` (a fraction: a worker mostly waits),
    ``memory`` and custom ``resources`` (per actor); other keyword arguments are Ray actor
    options (``scheduling_strategy="SPREAD"`` to spread them over a cluster's nodes).

    ``per_actor=k`` runs ``k`` workers in one actor process: every process imports torch
    (~230 MiB, ~2 s of CPU to start), so 32 workers in 4 processes start several times faster
    and take a quarter of the memory. The workers of one actor share its CPUs and fate: killing
    the actor makes all of them unavailable (each error names its worker); their stores stay
    separate.
    """
    if type(n) is not int or n < 1:
        raise SyftError(f"workers(n) takes a positive number of workers, got {n!r}")
    if type(per_actor) is not int or per_actor < 1:
        raise SyftError(f"per_actor is a positive integer, got {per_actor!r}")
    ids = [check_worker_id(f"{prefix}{i}") for i in range(start, start + n)]
    groups = [ids[i:i + per_actor] for i in range(0, n, per_actor)]
    hosts = start_hosts(groups, num_cpus=num_cpus, memory=memory, resources=resources,
                        max_restarts=max_restarts, max_bytes=max_bytes, max_objects=max_objects,
                        threads=threads, **actor_options)
    return [RayWorker(worker_id, _host=host, timeout=timeout, max_restarts=max_restarts)
            for group, host in zip(groups, hosts) for worker_id in group]
