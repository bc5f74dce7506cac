"""Which worker is running code right now: pointers created meanwhile are held by it.

A pointer made by an op that a worker runs on a pointer it stores (``x.send(bob).send(alice)``,
then ``y = p + p``) lives in that worker's store, not in this process; the views draw it in
that worker's lane. A leaf module, so tensors and workers can both import it.
"""
from __future__ import annotations

import contextlib
from contextvars import ContextVar

LOCAL = "me"

current_holder: ContextVar[str] = ContextVar("syft_lab_current_holder", default=LOCAL)


@contextlib.contextmanager
def held_by(worker_id: str):
    """Pointers created inside this block are held by ``worker_id``."""
    token = current_holder.set(worker_id)
    try:
        yield
    finally:
        current_holder.reset(token)
