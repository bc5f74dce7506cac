"""Keeping the views current: one post_run_cell hook and one event subscription for all widgets.

- After each cell runs, every active widget refreshes (variable names, new objects, stale
  pointers); a world widget then sends only the per-object changes.
- Worker events (stored, deleted, pointer_created) are noted by the world trackers
  (tracker.py: one per namespace shown) as per-object changes. Nothing is computed inside the
  event callback itself (it may run inside a garbage-collection finaliser): the changes are
  applied to the last snapshot at the next safe point, which is the end of the running cell,
  an action, or (between cells) the kernel's event loop. Only a resync recomputes a world.
  Remote workers push their events (workers/feed.py); what they pushed while no request was in
  flight is read before each refresh and at every keepalive tick. During a long cell, when
  every worker's changes arrive as events (in process, or pushed), a "stored", "changed" or
  "pointer_created" event also flushes at most every FLUSH_INTERVAL seconds, so a training
  loop or a FedAvg round shows its objects while it runs.
- ``pre_run_cell`` tells syft_lab.events which cell runs (``set_current_cell``, its In[] number:
  ``running_cell``): the op log of a LoggingTensor links each op to the cell that ran it.
- Every refresh is a *step* of the views' history: the cell (its number and source) or the
  action (its equivalent code) that made it, and what happened (diff.describe: stored, moved,
  fetched, deleted, plan run, worker changes). World views send it with their patch (each
  view's ``tracker.Feed`` makes the patch and its step).
- A refresh that raises never prints under the user's cell: the view says it in one line
  (``report_failure``), the traceback goes to the debug log.
- What the scheduler knows (the cell running, the step being recorded, the loop, the last
  refresh) is one ``scheduler`` object.
- Workers that close or die stay in the world as lanes marked ``gone`` while pointers still
  point to them (their pointers are marked ``dangling``). A keepalive on the kernel's event
  loop notices a connection that died (every KEEPALIVE seconds it reads each worker's state,
  which never touches the network) and pushes the change: the browser never polls.
- Views hold what they show weakly: after each cell, a syft object that ended the cell is
  kept by IPython's ``Out``, ``_`` and ``_<n>`` through a weak proxy, so ``del t`` releases it.
"""
from __future__ import annotations

import asyncio
import logging
import sys
import threading
import time
import weakref

from .. import events
from ..actions import ActionError
from ..ids import short
from ..tensors.base import ChainLayer
from ..tensors.nodes import LOCAL_OWNER
from ..workers.registry import all_workers
from . import diff
from .tracker import Feed, StepContext, WorldTracker

log = logging.getLogger("syft_lab.widget")

FLUSH_INTERVAL = 0.5  # seconds between mid-cell refreshes (at least 20x their own cost)
MID_CELL_EVENTS = ("stored", "changed", "pointer_created")  # what a mid-cell refresh shows
IN_PROCESS = ("local", "virtual")

_widgets: "weakref.WeakSet" = weakref.WeakSet()
KEEPALIVE = 2.0  # seconds between two reads of the workers' connection states
MAX_RAW = 10_000  # runtime events kept for the next step (a huge cell keeps the last ones)
CODE_CHARS = 240  # of a cell's source, in a step


class _Scheduler:
    """The state of the one scheduler of every view in the kernel: when the views refresh, and
    what the step they show is."""

    def __init__(self):
        self.ip = None  # the IPython shell whose cell hooks are installed
        self.in_cell = False  # a cell runs now (events then flush at most every FLUSH_INTERVAL)
        self.commands = False  # a cell ran since the last refresh: names and remote lanes to read
        self.flushing = False  # a refresh of every view runs now
        self.worlds: dict | None = None  # during a refresh: id of each tracker already updated
        self.dirty = False  # events arrived since the last refresh
        self.last_flush = 0.0  # time.monotonic() of the last refresh
        self.cost = 0.0  # seconds the last refresh took
        self.raw: list = []  # the runtime's events since the last refresh (the next step's)
        self.step = StepContext()  # the step being recorded (its raw events: the refresh's)
        self.loop = None  # the kernel's event loop (between cells, refreshes run from it)
        self.scheduled = False  # a refresh is queued on the loop
        self.ticking = False  # the keepalive runs
        self.states: tuple | None = None  # the workers' states the views show (keepalive's baseline)
        self.unsubscribe = None  # ends the subscription to syft_lab.events


scheduler = _Scheduler()
# id(namespace) -> its WorldTracker, alive while a view holds it (views hold their tracker)
_trackers: "weakref.WeakValueDictionary[int, WorldTracker]" = weakref.WeakValueDictionary()
_main_thread = threading.main_thread()
_lock = threading.RLock()  # one refresh or action at a time, whatever thread asks


def call_on_main(fn) -> None:
    """Run ``fn`` on the kernel's main thread: now if we are on it, else from its event loop
    (JupyterLab can send widget messages on a subshell thread while a cell runs)."""
    if threading.current_thread() is _main_thread:
        with _lock:
            fn()
        return
    loop = scheduler.loop
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
        scheduler.loop = asyncio.get_running_loop()
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


def refreshing() -> bool:
    """Whether a refresh of every view is running (views then share its world)."""
    return scheduler.flushing


def tracker_for(namespace) -> WorldTracker:
    """The world tracker of ``namespace`` (one per namespace, shared by its views; a view keeps
    a reference to it, the tracker lives as long as one does)."""
    key = id(namespace)
    t = _trackers.get(key)
    if t is None or t.namespace is not namespace:
        t = WorldTracker(namespace)
        _trackers[key] = t
    return t


def current_world(tracker: WorldTracker) -> dict:
    """The tracker's world with its pending changes applied (once per refresh for every view
    of it). Views copy it before changing it."""
    cache = scheduler.worlds
    if cache is not None and id(tracker) in cache:
        return tracker.world
    before = tracker.world
    tracker.update()  # cheap with nothing pending: it reads the workers' states (lanes that came or went)
    if tracker.world is not before:
        tracker.step = None
    if cache is not None:
        cache[id(tracker)] = True
    return tracker.world


def action_entry(feed: Feed, worker: str, obj_id: int) -> dict | None:
    """The entry an action from a view names: the object must be in the world the kernel last
    sent that view (``feed.synced``), and the entry returned is the tracker's current one (its
    pending changes applied), so that an action is decided from the kernel's model as it is
    now, never from what a browser holds or wrote. None if the view was not shown it; an
    ActionError if it went since."""
    if diff.find_entry(feed.synced, worker, obj_id) is None:
        return None
    tracker = feed.tracker
    current_world(tracker)
    entry = tracker.entry(worker, obj_id)
    if entry is None:
        lane = tracker.lanes.get(worker)
        if lane is None or lane.header.get("gone"):
            raise ActionError(f"no worker named {worker!r} (it was closed since this view showed it)")
        if worker == LOCAL_OWNER:
            raise ActionError(f"object {short(obj_id)} is no longer bound in the notebook "
                              f"(deleted or rebound since this view showed it)")
        raise ActionError(f"worker {worker!r} no longer holds object {short(obj_id)} "
                          f"(it was fetched, moved or deleted since this view showed it)")
    return entry


class action_step:
    """``with action_step(code):`` the refreshes inside are the step of an action (a button)."""

    def __init__(self, code: str | None):
        self.code = code

    def __enter__(self):
        self.prev = scheduler.step.action
        scheduler.step.action = self.code or "(action)"
        scheduler.step.stored = {}  # an action's step is its own

    def __exit__(self, *exc):
        scheduler.step.action = self.prev


def poll_remote_events() -> None:
    """Emit what remote workers pushed while no request was in flight (another client's
    commands, a late push): never waits, never a request."""
    for w in all_workers():
        if getattr(w, "kind", "") not in IN_PROCESS and getattr(w, "follows_events", False):
            try:
                w.poll_events()
            except Exception:  # a broken connection: its lane says so at the refresh
                log.debug("syft_lab could not poll a worker's events", exc_info=True)


def _refresh_all(world_only: bool) -> None:
    if scheduler.flushing:
        return
    poll_remote_events()  # before the flag: its events are this refresh's
    scheduler.flushing = True
    scheduler.worlds = {}
    scheduler.step.raw, scheduler.raw = scheduler.raw, []
    commands, scheduler.commands = scheduler.commands, False
    t0 = time.perf_counter()
    try:
        scheduler.dirty = False
        if commands or not world_only:  # a cell or an action ran: names and remote workers
            for t in list(_trackers.values()):
                t.after_commands()
        for w in list(_widgets):
            if world_only and getattr(w, "view", None) != "world":
                continue
            if not w.active:
                continue
            try:
                w.refresh()
            except Exception as e:  # one broken view must not stop the others
                report_failure(w, e)
    finally:
        scheduler.flushing = False
        scheduler.worlds = None
        scheduler.step.raw = []
        scheduler.states = worker_states()  # what the views now show: the keepalive's baseline
        scheduler.cost = time.perf_counter() - t0
        scheduler.last_flush = time.monotonic()


# --- a refresh that fails -----------------------------------------------------------------------

FAILURE_CHARS = 200  # of the one line a view shows


def failure_line(e: BaseException) -> str:
    """What a view says when it could not refresh: one line, never a traceback."""
    text = " ".join(f"{type(e).__name__}: {e}".split())
    line = f"this view could not refresh ({text}); it shows the world as it was"
    return line if len(line) <= FAILURE_CHARS else line[: FAILURE_CHARS - 3] + "..."


def report_failure(view, e: BaseException) -> None:
    """A view's refresh raised: the view says so in one line (``view.refresh_failed``), and the
    traceback goes only to the debug log. A refresh runs after the user's cell, so anything it
    printed would land in that cell's output as if the user's code had failed."""
    log.debug("syft_lab view refresh failed", exc_info=e)
    fail = getattr(view, "refresh_failed", None)
    if fail is None:
        return
    try:
        fail(failure_line(e))
    except Exception:
        log.debug("syft_lab view could not show its refresh failure", exc_info=True)


# --- IPython cell hooks -----------------------------------------------------------------------

def _pre_run_cell(info=None, *_args):
    scheduler.in_cell = True
    scheduler.commands = True
    ip = scheduler.ip
    stored = getattr(info, "store_history", False)
    scheduler.step.cell = running_cell(ip) if stored else None
    scheduler.step.code = (getattr(info, "raw_cell", "") or "").strip()[:CODE_CHARS] if stored else None
    scheduler.step.stored = {}  # a new cell run: its own steps only
    events.set_current_cell(scheduler.step.cell)  # every op a LoggingTensor records names this cell


def running_cell(ip) -> int | None:
    """The In[] number of the cell that runs now, read in ``pre_run_cell``. IPython 9.8 and
    later count a cell *before* it runs (run_cell_async became re-entrant), so execution_count
    is the next cell's number by then; earlier versions count after it ran."""
    count = getattr(ip, "execution_count", None)
    if not isinstance(count, int) or isinstance(count, bool):
        return None
    version = getattr(sys.modules.get("IPython"), "version_info", (0,))  # ip exists: IPython is loaded
    return count - 1 if tuple(version[:2]) >= (9, 8) else count


def _post_run_cell(result=None, *_args):
    scheduler.in_cell = False
    count = getattr(result, "execution_count", None)  # IPython's own number for the cell that ran
    if scheduler.step.cell is not None and isinstance(count, int):
        scheduler.step.cell = count
    _capture_loop()
    if scheduler.ip is not None:
        try:
            weaken_output(scheduler.ip, result)
        except Exception:  # never a traceback under the user's cell
            log.debug("syft_lab could not weaken the cell's output", exc_info=True)
    for w in list(_widgets):
        if not w._seen:
            w._cells_unseen += 1
    try:
        refresh_all()
    finally:
        scheduler.step.cell = scheduler.step.code = None
        scheduler.step.stored = {}
        events.set_current_cell(None)


def _holds_remote(value) -> bool:
    """A syft object whose life decides a worker's (a pointer, a chain over one, a plan pointer)."""
    return isinstance(value, ChainLayer) or type(value).__name__ == "PlanPointer"


def weaken_output(ip, result) -> None:
    """Keep the value that ended a cell in Out, ``_`` and ``_<n>`` through a weak proxy when it
    is a syft object: showing ``t`` must not keep alice's object alive after ``del t``."""
    value = getattr(result, "result", None)
    if value is None or isinstance(value, weakref.ProxyTypes) or not _holds_remote(value):
        return
    try:
        proxy = weakref.proxy(value)
    except TypeError:  # not weak-referenceable: Out keeps it, as for any value
        return
    n = getattr(result, "execution_count", None)
    keys = ("_", "__", "___", f"_{n}")
    for store in (ip.user_ns, getattr(ip, "user_ns_hidden", {})):
        for k in keys:
            if store.get(k) is value:
                store[k] = proxy
    out = ip.user_ns.get("_oh")
    if isinstance(out, dict):
        for k, v in list(out.items()):
            if v is value:
                out[k] = proxy
    hook = getattr(ip, "displayhook", None)
    for attr in ("_", "__", "___"):
        if getattr(hook, attr, None) is value:
            setattr(hook, attr, proxy)
    result.result = proxy


def install(ip) -> None:
    """Register the cell hooks with IPython (once per shell)."""
    if ip is None or scheduler.ip is ip:
        return
    old = scheduler.ip
    if old is not None:
        uninstall()
    _capture_loop()
    ip.events.register("pre_run_cell", _pre_run_cell)
    ip.events.register("post_run_cell", _post_run_cell)
    scheduler.ip = ip


def uninstall() -> None:
    ip = scheduler.ip
    if ip is None:
        return
    for name, fn in (("pre_run_cell", _pre_run_cell), ("post_run_cell", _post_run_cell)):
        try:
            ip.events.unregister(name, fn)
        except ValueError:
            pass
    scheduler.ip = None


# --- worker events ----------------------------------------------------------------------------

def _all_follow() -> bool:
    """Every worker's changes arrive as events (in process, or pushed by a remote worker): a
    refresh then makes no request, so it may run in the middle of a cell."""
    return all(getattr(w, "kind", "") in IN_PROCESS or getattr(w, "follows_events", False) for w in all_workers())


def _on_event(event: dict) -> None:
    for t in list(_trackers.values()):
        t.on_event(event)
    if not any(getattr(w, "view", None) == "world" and w.active for w in list(_widgets)):
        return
    raw = scheduler.raw
    if len(raw) >= MAX_RAW:
        del raw[: MAX_RAW // 2]
    raw.append(event)
    scheduler.dirty = True
    if threading.current_thread() is not _main_thread:
        _schedule()
        return
    if not scheduler.in_cell:
        _schedule()  # between cells (a finaliser, a comm message): flush from the event loop
        return
    if event.get("type") in MID_CELL_EVENTS and not scheduler.flushing:
        now = time.monotonic()
        if now - scheduler.last_flush >= max(FLUSH_INTERVAL, 20 * scheduler.cost) and _all_follow():
            refresh_all(world_only=True)


def _schedule() -> None:
    loop = scheduler.loop
    if loop is None or scheduler.scheduled or loop.is_closed():
        return
    scheduler.scheduled = True

    def run():  # on the main thread, between cells
        scheduler.scheduled = False
        if scheduler.dirty and not scheduler.in_cell:
            refresh_all(world_only=True)

    try:
        loop.call_soon_threadsafe(run)
    except RuntimeError:
        scheduler.scheduled = False


def watch_events() -> None:
    """Subscribe to syft_lab.events once (the first world widget does it)."""
    if scheduler.unsubscribe is None:
        scheduler.unsubscribe = events.subscribe(_on_event)
    _start_keepalive()


def worker_states() -> tuple:
    """(id, state) of every worker: read locally (a websocket client's state), never over the network."""
    out = []
    for w in all_workers():
        try:
            out.append((w.id, w.state))
        except Exception:
            out.append((w.id, "unreachable"))
    return tuple(out)


def keepalive_tick() -> bool:
    """One keepalive check: refresh the world views when a worker's state changed since the
    last check (a killed worker process, a dropped connection). True if it refreshed."""
    if not scheduler.in_cell and not scheduler.flushing:
        poll_remote_events()  # pushes that came while idle (another client's commands) schedule a refresh
    states = worker_states()
    before, scheduler.states = scheduler.states, states
    if before is None or states == before or scheduler.in_cell or scheduler.flushing:
        return False
    if not any(getattr(w, "view", None) == "world" and w.active for w in list(_widgets)):
        return False
    refresh_all(world_only=True)
    return True


def _start_keepalive() -> None:
    loop = scheduler.loop
    if scheduler.ticking or loop is None or loop.is_closed():
        return
    scheduler.ticking = True

    def tick():
        try:
            with _lock:
                keepalive_tick()
        except Exception:  # on the event loop, between cells: nothing to print it under
            log.debug("syft_lab keepalive failed", exc_info=True)
        if loop.is_closed():
            scheduler.ticking = False
            return
        loop.call_later(KEEPALIVE, tick)

    try:
        loop.call_soon_threadsafe(lambda: loop.call_later(KEEPALIVE, tick))
    except RuntimeError:
        scheduler.ticking = False
