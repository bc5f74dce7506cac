"""Keeping the views current: one post_run_cell hook and one event subscription for all widgets.

- After each cell runs, every active widget refreshes (variable names, new objects, stale
  pointers); a world widget then sends only the per-object changes.
- Worker events (stored, deleted, pointer_created) mark the world dirty. Nothing is computed
  inside the event callback itself (it may run inside a garbage-collection finaliser):
  the world is recomputed at the next safe point, which is the end of the running cell,
  an action, or (between cells) the kernel's event loop. During a long cell of in-process
  work, a "stored"/"pointer_created" event also flushes at most every FLUSH_INTERVAL seconds,
  so a training loop shows its objects while it runs.
"""
from __future__ import annotations

import threading
import time
import weakref

FLUSH_INTERVAL = 0.5  # seconds between mid-cell refreshes (at least 20x their own cost)

_widgets: "weakref.WeakSet" = weakref.WeakSet()
_state = {"dirty": False, "in_cell": False, "last_flush": 0.0, "cost": 0.0, "scheduled": False,
          "loop": None, "unsubscribe": None, "ip": None, "flushing": False, "worlds": None}
_main_thread = threading.main_thread()
_lock = threading.RLock()  # one refresh or action at a time, whatever thread asks


def call_on_main(fn) -> None:
    """Run ``fn`` on the kernel's main thread: now if we are on it, else from its event loop
    (JupyterLab can send widget messages on a subshell thread while a cell runs)."""
    if threading.current_thread() is _main_thread:
        with _lock:
            fn()
        return
    loop = _state["loop"]
    if loop is None or loop.is_closed():
        with _lock:
            fn()
        return

    def run():
        with _lock:
            fn()

    loop.call_soon_threadsafe(run)


def _capture_loop() -> None:
    if threading.current_thread() is not _main_thread:
        return
    try:
        import asyncio

        _state["loop"] = asyncio.get_running_loop()
    except RuntimeError:
        pass


def register(widget) -> None:
    _widgets.add(widget)


def unregister(widget) -> None:
    _widgets.discard(widget)


def widgets() -> list:
    return list(_widgets)


def refresh_all(world_only: bool = False) -> None:
    """Refresh every active widget now (after an action, at the end of a cell)."""
    with _lock:
        _refresh_all(world_only)


def world_for(namespace) -> dict:
    """The world snapshot of ``namespace``: computed once per refresh for every view that shows
    it (widgets and sidebar panels), fresh outside a refresh. Views copy it before changing it."""
    from ..inspection.model import world_dict

    cache = _state["worlds"]
    if cache is None:
        return world_dict(namespace)
    key = id(namespace)
    if key not in cache:
        cache[key] = world_dict(namespace)
    return cache[key]


def _refresh_all(world_only: bool) -> None:
    if _state["flushing"]:
        return
    _state["flushing"] = True
    _state["worlds"] = {}
    t0 = time.perf_counter()
    try:
        _state["dirty"] = False
        for w in list(_widgets):
            if world_only and getattr(w, "view", None) != "world":
                continue
            if not w.active:
                continue
            try:
                w.refresh()
            except Exception:  # one broken view must not stop the others
                import logging

                logging.getLogger("syft_lab.widget").exception("widget refresh failed")
    finally:
        _state["flushing"] = False
        _state["worlds"] = None
        _state["cost"] = time.perf_counter() - t0
        _state["last_flush"] = time.monotonic()


# --- IPython cell hooks -----------------------------------------------------------------------

def _pre_run_cell(*_args):
    _state["in_cell"] = True


def _post_run_cell(*_args):
    _state["in_cell"] = False
    _capture_loop()
    for w in list(_widgets):
        if not w._seen:
            w._cells_unseen += 1
    refresh_all()


def install(ip) -> None:
    """Register the cell hooks with IPython (once per shell)."""
    if ip is None or _state["ip"] is ip:
        return
    old = _state["ip"]
    if old is not None:
        uninstall()
    _capture_loop()
    ip.events.register("pre_run_cell", _pre_run_cell)
    ip.events.register("post_run_cell", _post_run_cell)
    _state["ip"] = ip


def uninstall() -> None:
    ip = _state["ip"]
    if ip is None:
        return
    for name, fn in (("pre_run_cell", _pre_run_cell), ("post_run_cell", _post_run_cell)):
        try:
            ip.events.unregister(name, fn)
        except ValueError:
            pass
    _state["ip"] = None


# --- worker events ----------------------------------------------------------------------------

def _all_in_process() -> bool:
    from ..workers.registry import all_workers

    return all(getattr(w, "kind", "") in ("local", "virtual") for w in all_workers())


def _on_event(event: dict) -> None:
    if not any(getattr(w, "view", None) == "world" and w.active for w in list(_widgets)):
        return
    _state["dirty"] = True
    if threading.current_thread() is not _main_thread:
        _schedule()
        return
    if not _state["in_cell"]:
        _schedule()  # between cells (a finaliser, a comm message): flush from the event loop
        return
    if event.get("type") in ("stored", "pointer_created") and not _state["flushing"]:
        now = time.monotonic()
        if now - _state["last_flush"] >= max(FLUSH_INTERVAL, 20 * _state["cost"]) and _all_in_process():
            refresh_all(world_only=True)


def _schedule() -> None:
    loop = _state["loop"]
    if loop is None or _state["scheduled"] or loop.is_closed():
        return
    _state["scheduled"] = True

    def run():  # on the main thread, between cells
        _state["scheduled"] = False
        if _state["dirty"] and not _state["in_cell"]:
            refresh_all(world_only=True)

    try:
        loop.call_soon_threadsafe(run)
    except RuntimeError:
        _state["scheduled"] = False


def watch_events() -> None:
    """Subscribe to syft_lab.events once (the first world widget does it)."""
    if _state["unsubscribe"] is None:
        from .. import events

        _state["unsubscribe"] = events.subscribe(_on_event)


def stop_watching() -> None:
    unsub = _state["unsubscribe"]
    if unsub is not None:
        unsub()
        _state["unsubscribe"] = None
