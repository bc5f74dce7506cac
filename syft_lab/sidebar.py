"""The kernel side of the JupyterLab sidebar (js/lab/): one comm per open panel, carrying the
world view of this kernel, pushed as it changes (no polling).

The lab extension bootstraps it with a silent execute that binds no variable::

    __import__("syft_lab.sidebar", fromlist=["register"]).register()

then opens a comm to the target ``syft_lab.sidebar``. Messages are JSON objects with a ``type``:

browser -> kernel
    comm open ``{"type": "hello", "version": 1}``       -> a snapshot
    ``{"type": "resync"}``                                 -> a snapshot (the panel lost track)
    ``{"type": "action", "req", "action", "target", "worker"?, "name"?}``
                                       -> ``{"type": "reply", ...}`` from syft_lab.actions.perform
kernel -> browser
    ``{"type": "snapshot", "protocol": 1, "world": {... "rev": n}}``
    ``{"type": "world_patch", "base": n, "rev": n + 1, "lanes"?, "ops"}`` (syft_lab.widget.diff)
    ``{"type": "reply", "ok": false, "req": ..., "error": "..."}`` for anything not understood;
    a bad message changes nothing.

Pushes happen after each cell, after an action, and after worker events (stored, deleted,
pointer created or dropped). When they happen is decided by syft_lab.widget.live, the one
scheduler of every view in the kernel: the open panels together are one view there, and one
world is computed per refresh for all of them.
"""
from __future__ import annotations

import json
import logging

import comm as _comm

from . import actions
from .inspection.model import container_items
from .notebook import notebook_namespace
from .widget import live, tracker

TARGET = "syft_lab.sidebar"
PROTOCOL = 1
MAX_PANELS = 16  # comms kept per kernel; a reloaded page never closes its old one
MAX_MESSAGE = 64 * 1024  # bytes of JSON a panel message may have (an action is ~200)

log = logging.getLogger("syft_lab.sidebar")

_panels: list["Panel"] = []
_state = {"registered": False}


def _namespace() -> dict:
    ns = notebook_namespace()
    return ns if ns is not None else {}


class Panel:
    """One sidebar panel's comm: the world it was last sent, and its revision (its feed). Its
    world comes from the namespace's tracker (widget/tracker.py), shared with the notebook's
    world widgets."""

    def __init__(self, comm, namespace: dict | None = None):
        self.comm = comm
        self._namespace = namespace
        self.tracker = live.tracker_for(namespace)
        self.feed = tracker.Feed(self.tracker)
        self.closed = False

    @property
    def namespace(self) -> dict:
        return self._namespace if self._namespace is not None else _namespace()

    @property
    def world(self) -> dict:
        """The world last sent, with its revision."""
        return self.feed.world

    # --- to the browser ----------------------------------------------------------------------
    def send(self, msg: dict) -> None:
        if self.closed:
            return
        self.comm.send(msg)

    def snapshot(self) -> dict:
        try:
            world = live.current_world(self.tracker)
        except Exception as e:  # the panel still gets a world, saying in one line what went wrong
            live.report_failure(None, e)
            world = self.feed.marked(live.failure_line(e))
        world = self.feed.reset(world)
        msg = {"type": "snapshot", "protocol": PROTOCOL, "world": world}
        self.send(msg)
        return msg

    def resync(self) -> dict:
        """The panel lost track: the world is recomputed, then sent whole."""
        self.tracker.resync()
        return self.snapshot()

    def refresh(self) -> dict | None:
        """Send what changed since the last message (a patch), or nothing."""
        return self._deliver(self.feed.patch(live.current_world(self.tracker), live.scheduler.step))

    def refresh_failed(self, line: str) -> None:
        """The world as it was, ``line`` on its "me" lane, until a refresh works again."""
        self._deliver(self.feed.failed(line))

    def _deliver(self, patch: dict | None) -> dict | None:
        if patch is not None:
            self.send(patch)
        return patch

    # --- from the browser --------------------------------------------------------------------
    def lookup(self, worker: str, obj_id: int) -> dict | None:
        """An object of the world this panel was shown (actions may name only those), as the
        kernel's current model has it."""
        return live.action_entry(self.feed, worker, obj_id)

    def handle(self, data) -> dict | None:
        """Handle one message from the panel; returns the reply sent (or the snapshot)."""
        kind = data.get("type") if isinstance(data, dict) else None
        too_big = False
        if isinstance(data, dict):
            try:
                too_big = len(json.dumps(data, separators=(",", ":"))) > MAX_MESSAGE
            except (TypeError, ValueError):
                too_big = True
        if too_big:
            reply = {"ok": False, "req": None, "error": f"message larger than {MAX_MESSAGE} bytes"}
        elif kind == "action":
            held = [v for _path, v in container_items(self.namespace)]  # data["bob"] has buttons too
            reply = actions.perform(data, known=self.lookup, namespace=self.namespace, held=held)
            self.send({"type": "reply", **reply})
            if reply.get("ok") and actions.mutates(reply.get("action")):
                with live.action_step(reply.get("code")):
                    refresh_all()  # the panels and the notebook's widgets show it at once
            return {"type": "reply", **reply}
        elif kind == "resync":
            return self.resync()
        elif kind == "hello":
            return self.snapshot()
        else:
            reply = {"ok": False, "req": actions._req_of(data),
                     "error": "malformed message: expected a JSON object with type action, resync or hello"}
        reply = {"type": "reply", **reply}
        self.send(reply)
        return reply


class _Panels:
    """All open panels, as one view of live's scheduler: one world per refresh for all."""

    view = "world"
    _seen = True
    _cells_unseen = 0

    @property
    def active(self) -> bool:
        return any(not p.closed for p in _panels)

    def refresh(self) -> None:
        open_panels = [p for p in _panels if not p.closed]
        for p in open_panels:  # one tracker: the world is updated once for all (and the widgets)
            try:
                p.refresh()
            except Exception as e:  # one line in the panel, never a traceback under the user's cell
                live.report_failure(p, e)


_VIEW = _Panels()


# --- comm target -------------------------------------------------------------------------------

def _on_open(comm, open_msg) -> None:
    panel = Panel(comm)
    _panels.append(panel)
    while len(_panels) > MAX_PANELS:
        old = _panels.pop(0)
        old.closed = True
        try:
            old.comm.close()
        except Exception:
            pass

    def on_msg(msg):
        data = msg.get("content", {}).get("data")
        live.call_on_main(lambda: _handle_safely(panel, data))

    def on_close(_msg=None):
        panel.closed = True
        if panel in _panels:
            _panels.remove(panel)

    comm.on_msg(on_msg)
    comm.on_close(on_close)
    data = open_msg.get("content", {}).get("data") if isinstance(open_msg, dict) else None
    live.call_on_main(lambda: _handle_safely(panel, data if isinstance(data, dict) and data else {"type": "hello"}))


def _handle_safely(panel: Panel, data) -> None:
    try:
        panel.handle(data)
    except Exception as e:  # a bad message never breaks the kernel; the reply says what failed
        log.debug("syft_lab sidebar message failed", exc_info=True)
        try:
            panel.send({"type": "reply", "ok": False, "req": actions._req_of(data), "error": f"{type(e).__name__}: {e}"})
        except Exception:
            pass


def register(ip=None) -> bool:
    """Register the comm target and the cell and event hooks (idempotent). False outside a kernel."""
    if ip is None:
        try:
            from IPython import get_ipython  # optional: outside IPython there is no kernel

            ip = get_ipython()
        except ImportError:
            ip = None
    try:
        manager = _comm.get_comm_manager()
    except Exception:
        return False
    if manager is None or not hasattr(manager, "register_target"):
        return False
    live._capture_loop()
    if not _state["registered"]:
        manager.register_target(TARGET, _on_open)
        _state["registered"] = True
    if ip is not None and hasattr(ip, "events"):
        live.install(ip)
    live.watch_events()
    live.register(_VIEW)
    return True


def panels() -> list[Panel]:
    return list(_panels)


def refresh_all() -> None:
    """Push the changes to every open panel (and every widget) now."""
    live.refresh_all()
