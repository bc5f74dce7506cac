"""Worker events (object stored or deleted, pointer created or dropped) for views to follow.

A tiny synchronous bus: with no subscriber, emitting costs one truth test.
"""
from __future__ import annotations

from typing import Callable

_subscribers: list[Callable[[dict], None]] = []


def subscribe(callback: Callable[[dict], None]) -> Callable[[], None]:
    """Call ``callback(event)`` for every event; returns a function that unsubscribes."""
    _subscribers.append(callback)

    def unsubscribe():
        if callback in _subscribers:
            _subscribers.remove(callback)

    return unsubscribe


def emit(type_: str, worker: str, obj_id: int, **fields) -> None:
    if not _subscribers:
        return
    event = {"type": type_, "worker": worker, "id": obj_id, **fields}
    for cb in list(_subscribers):
        try:
            cb(event)
        except Exception:  # a broken view must not break the runtime
            import logging

            logging.getLogger("syft_lab").exception("event subscriber failed")
