"""Many Ray workers at once: ``sy.ray.workers(32, prefix="client")``.

Where a person watches (progress.py's rule), a bar counts the workers that are up while their
actors start (``start_hosts_shown``; a single ``RayWorker("bob")`` starts its actor through it too) (each process imports torch: seconds each, minutes for dozens on a loaded laptop):
each actor is then started by ``start_hosts`` in a thread of its own, all in flight at once.
"""
from __future__ import annotations

import concurrent.futures
import time

from .. import progress as progress_bars
from ..errors import SyftError
from ..workers.base import check_worker_id
from .runtime import StartProgress, ensure_initialized
from .worker import DEFAULT_NUM_CPUS, DEFAULT_TIMEOUT, RayWorker, start_hosts

START_SECONDS = 60.0  # an actor's start, plus START_PER_ACTOR for each actor starting with it
START_PER_ACTOR = 5.0


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


def start_hosts_shown(groups: list, options: dict, progress: bool | None) -> list:
    """``start_hosts(groups, **options)``, with a bar of the workers that are up where a person
    watches (``progress`` None), always (True) or never (False): ``sy.ray.workers(n)`` and a
    single ``RayWorker("bob")`` start their actors the same way."""
    watched = progress is True or (progress is None and progress_bars.someone_watches())
    if not watched:
        return start_hosts(groups, **options)
    return _start_watched(groups, sum(len(g) for g in groups), options, progress)


def _start_watched(groups: list, n: int, options: dict, progress) -> list:
    """``start_hosts(groups)`` with a bar of the workers that are up: each group's actor is
    started (and waited for) in a thread of its own, all at once; a failure stops every actor
    started and raises the first error, as ``start_hosts`` does."""
    ray = ensure_initialized()  # (a local Ray says what it starts on its own bar)
    processes = len(groups)
    what = f"starting {n} Ray worker{'s' if n != 1 else ''}" + (
        f" in {processes} processes" if processes != n else "") + " (each process imports torch)"
    bar = StartProgress(what, total=n, show=progress, unit="worker")
    t0 = time.monotonic()
    timeout = START_SECONDS + START_PER_ACTOR * processes  # as start_hosts gives them all together
    hosts: list = [None] * processes
    failed = None
    with concurrent.futures.ThreadPoolExecutor(max_workers=min(processes, 64),
                                               thread_name_prefix="syft-lab ray start") as pool:
        futures = {pool.submit(start_hosts, [ids], start_timeout=timeout, **options): i
                   for i, ids in enumerate(groups)}
        for done in concurrent.futures.as_completed(futures):
            i = futures[done]
            try:
                (hosts[i],) = done.result()
                bar.update(len(groups[i]))
            except BaseException as e:
                failed = failed or e
    if failed is not None:
        for host in hosts:
            if host is not None:
                ray.kill(host[0])
        bar.close()
        raise failed
    bar.close(f"{n} Ray worker{'s' if n != 1 else ''} up in {time.monotonic() - t0:.1f} s")
    return hosts
