"""Worker events (object stored or deleted, pointer created or dropped) for views to follow.

A tiny synchronous bus: with no subscriber, emitting costs one truth test.

Also the notebook cell running now (``current_cell``): the widget's ``pre_run_cell`` hook sets
it with ``set_current_cell(execution_count)`` and every op a LoggingTensor records carries it,
so the op log links each op to the cell that ran it.
"""
from __future__ import annotations

import logging
from typing import Callable


class _CurrentCell:
    """The execution count of the notebook cell running now, or None outside a notebook."""

    __slots__ = ("number",)

    def __init__(self):
        self.number: int | None = None

    def __repr__(self):
        return f"current_cell({self.number})"


current_cell = _CurrentCell()


def set_current_cell(number: int | None) -> None:
    """Called by the notebook's ``pre_run_cell`` hook (syft_lab/widget/live.py) with the
    cell's execution count; ``None`` when no cell runs."""
    if number is not None and (type(number) is not int or number < 0):
        raise ValueError(f"a cell number is a non-negative int, got {number!r}")
    if cell_ends and number != current_cell.number:
        for fn in list(cell_ends):
            try:
                fn()
            except Exception:  # (a worker gone: its next request says so)
                pass
    current_cell.number = number


# Called when the current cell changes, before it does: what a cell started is sent while that
# cell is still the one its messages name (smpc/runtime.py: the rounds it held back).
cell_ends: list[Callable[[], None]] = []

_subscribers: list[Callable[[dict], None]] = []


def subscribe(callback: Callable[[dict], None]) -> Callable[[], None]:
    """Call ``callback(event)`` for every event; returns a function that unsubscribes."""
    _subscribers.append(callback)

    def unsubscribe():
        if callback in _subscribers:
            _subscribers.remove(callback)

    return unsubscribe


def activity(what: str, worker: str | None = None, **fields) -> None:
    """What a kit did, in a learner's words, for the views' History (diff.describe): ``what`` is
    "trained" (``clients``: worker ids, ``round``) or "averaged" (``worker``: where, ``models``:
    how many). Names and counts only, never a value."""
    emit("activity", worker, None, what=what, **fields)


def emit(type_: str, worker: str, obj_id: int, **fields) -> None:
    if not _subscribers:
        return
    event = {"type": type_, "worker": worker, "id": obj_id, **fields}
    for cb in list(_subscribers):
        try:
            cb(event)
        except Exception:  # a broken view must not break the runtime
            logging.getLogger("syft_lab").exception("event subscriber failed")
