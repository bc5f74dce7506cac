"""Every known worker by id: what sy.world() shows and what ids in messages resolve to."""
from __future__ import annotations

from ..errors import SyftError

_workers: dict = {}


def register(worker) -> None:
    """Make ``worker`` known under its id (a new worker with an id in use takes its place)."""
    _workers[worker.id] = worker


def unregister(worker) -> None:
    if _workers.get(worker.id) is worker:
        del _workers[worker.id]


def lookup(worker_id: str):
    """The worker known under ``worker_id``, or None."""
    return _workers.get(worker_id)


def get_worker(worker_id: str):
    try:
        return _workers[worker_id]
    except KeyError:
        known = ", ".join(sorted(_workers)) or "none"
        raise SyftError(f"no worker named {worker_id!r} (known workers: {known})") from None


def all_workers() -> list:
    return list(_workers.values())
