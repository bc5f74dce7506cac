"""Many Ray workers at once: ``sy.ray.workers(32, prefix="client")``.

Where a person watches (progress.py's rule), a bar counts the workers that are up while their
actors start (``start_hosts_shown``; a single ``RayWorker("bob")`` starts its actor through it too) (each process imports torch: seconds each, minutes for dozens on a loaded laptop):
each actor is then started by ``start_hosts`` in a thread of its own, all in flight at once.
"""
from __future__ import annotations

from ..errors import SyftError
from ..workers.base import check_worker_id
from .starting import DEFAULT_NUM_CPUS, start_hosts_shown
from .worker import DEFAULT_TIMEOUT, RayWorker



def workers(n: int, prefix: str = "worker", *, start: int = 0, per_actor: int = 1,
            num_cpus: float = DEFAULT_NUM_CPUS, memory: int | None = None, resources: dict | None = None,
            max_restarts: int = 0, max_bytes: int | None = None, max_objects: int | None = None,
            threads: int = 1, timeout: float = DEFAULT_TIMEOUT, progress: bool | None = None,
            **actor_options) -> list:
    """``n`` RayWorkers named ``prefix0`` .. ``prefix{n-1}`` (from ``start``), started in parallel.

    Each is an actor placed by Ray with ``num_cpus`` (a fraction: a worker mostly waits),
    ``memory`` and custom ``resources`` (per actor); other keyword arguments are Ray actor
    options (``scheduling_strategy="SPREAD"`` to spread them over a cluster's nodes).

    ``per_actor=k`` runs ``k`` workers in one actor process: every process imports torch
    (~230 MiB, ~2 s of CPU to start), so 32 workers in 4 processes start several times faster
    and take a quarter of the memory. The workers of one actor share its CPUs and fate: killing
    the actor makes all of them unavailable (each error names its worker); their stores stay
    separate.

    ``progress``: a bar of the workers that are up, while they start: None where a person
    watches (a notebook, a terminal), True always, False never.
    """
    if type(n) is not int or n < 1:
        raise SyftError(f"workers(n) takes a positive number of workers, got {n!r}")
    if type(per_actor) is not int or per_actor < 1:
        raise SyftError(f"per_actor is a positive integer, got {per_actor!r}")
    ids = [check_worker_id(f"{prefix}{i}") for i in range(start, start + n)]
    groups = [ids[i:i + per_actor] for i in range(0, n, per_actor)]
    options = dict(num_cpus=num_cpus, memory=memory, resources=resources, max_restarts=max_restarts,
                   max_bytes=max_bytes, max_objects=max_objects, threads=threads, **actor_options)
    hosts = start_hosts_shown(groups, options, progress)
    return [RayWorker(worker_id, _host=host, timeout=timeout, max_restarts=max_restarts)
            for group, host in zip(groups, hosts) for worker_id in group]
