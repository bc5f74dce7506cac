"""Starting Ray worker actors: one actor per group of worker ids (``start_hosts``), with a bar
of the workers that are up where a person watches (``start_hosts_shown``): ``sy.ray.workers(n)``
and a single ``RayWorker("bob")`` start theirs the same way."""
from __future__ import annotations

import concurrent.futures
import time

from .. import progress as progress_bars
from ..errors import WorkerUnavailableError
from ..wire.format import DEFAULT_MAX_MESSAGE_SIZE
from .host import WorkerHost, unpack
from .runtime import StartProgress, ensure_initialized

DEFAULT_NUM_CPUS = 0.05  # a worker waits most of the time: many share a core
START_SECONDS = 60.0  # an actor's start, plus START_PER_ACTOR for each actor starting with it
START_PER_ACTOR = 5.0

_actor_classes: dict = {}


def host_class(ray):
    """``WorkerHost`` as a Ray actor class (made once per process)."""
    cls = _actor_classes.get(id(ray))
    if cls is None:
        cls = _actor_classes[id(ray)] = ray.remote(WorkerHost)
    return cls


def start_hosts(groups, *, num_cpus=DEFAULT_NUM_CPUS, memory=None, resources=None, max_restarts=0,
                max_bytes=None, max_objects=None, threads=1, start_timeout=None, **actor_options):
    """Start one actor per group of worker ids; returns ``[(handle, info), ...]``. The actors
    start in parallel (Ray places them: each process imports torch, ~2 s of CPU); raises
    WorkerUnavailableError if one has not answered within ``start_timeout`` (default 60 s plus
    5 s per actor)."""
    timeout = start_timeout if start_timeout is not None else START_SECONDS + START_PER_ACTOR * len(groups)
    ray = ensure_initialized()
    options = dict(num_cpus=num_cpus, max_restarts=max_restarts, **actor_options)
    if memory is not None:
        options["memory"] = memory
    if resources:
        options["resources"] = dict(resources)
    cls = host_class(ray).options(**options)
    handles = [cls.remote(list(ids), max_bytes, max_objects, threads) for ids in groups]
    try:
        replies = ray.get([h.hello.remote() for h in handles], timeout=timeout)
    except Exception as e:
        for h in handles:
            ray.kill(h)
        names = ", ".join(i for ids in groups for i in ids)
        raise WorkerUnavailableError(f"Ray worker(s) {names} did not start within {timeout} s: {_why(e)}") from None
    return [(h, unpack(r, DEFAULT_MAX_MESSAGE_SIZE)["ok"]) for h, r in zip(handles, replies)]


def _why(e) -> str:
    lines = [line for line in str(e).strip().splitlines() if line.strip()]
    return f"{type(e).__name__}: {lines[0] if lines else ''}"[:300]


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
