"""The anywidget widgets: chain, world and plan views of the inspection model.

The kernel side never draws: each widget holds model dicts in synced traitlets, and
js/widget/ (bundled into static/widget.js) renders them. Buttons in the views send action
requests (syft_lab.actions) and get a reply; the views change because the model does.

Messages from the browser (all JSON objects with a ``type``):
    {"type": "hello", "view": "v1"}   a view was rendered     -> a widget no view showed refreshes
                                      (MAX_VIEWS names kept; HELLO_REFRESHES a second at most)
    {"type": "bye", "view": "v1"}     a view was removed
    {"type": "resync"}                the view lost track     -> the whole world is resent
    {"type": "action", ...}           see syft_lab.actions    -> {"type": "reply", ...}
Messages to the browser: {"type": "reply", ...}, {"type": "world_patch", ...} (diff.py),
{"type": "world_reset", "world": {...}}.

Every synced trait is kernel-to-browser only: a model says what its view may do, so a state
update from the browser (a comm ``update``) is dropped, and every action is checked against
the kernel's own current model of the object it names (``lookup``), never against a trait.
"""
from __future__ import annotations

import collections
import logging
import re
import time
import weakref
from pathlib import Path

import anywidget
import traitlets

from .. import actions
from ..inspection.model import container_items
from ..notebook import notebook_namespace
from ..inspection.text import render_tree, render_world
from ..tensors.nodes import LOCAL_OWNER, chain_nodes, walk
from ..workers.registry import all_workers
from . import live, svg, tracker

log = logging.getLogger("syft_lab.widget")

STATIC = Path(__file__).resolve().parent / "static" / "widget.js"
_MISSING_ESM = """
export default { render({ el }) {
  el.textContent = "syft_lab: the widget bundle is not built (run ./scripts/setup or npm run build).";
} };
"""
_VIEW_RE = re.compile(r"^[A-Za-z0-9_-]{1,40}$")
MAX_RESULTS = 4  # results of actions a chain view keeps showing under its object
# A widget keeps the names of the views showing it (a notebook shows one in a few places: its
# output, a sidebar, a page reloaded); a hello for more replaces one of them (only whether any
# view shows it matters: ``active``).
MAX_VIEWS = 16
# A hello refreshes a widget no view showed (it may be behind: a dormant widget is not refreshed
# after cells), at most HELLO_REFRESHES times a second; a widget already shown is refreshed after
# every cell and event anyway. So a browser's flood of hellos (5,000 in a burst) costs a few
# refreshes, not one each (one took the next cell 18.9 s), and the next cell catches up.
HELLO_REFRESHES = 4
REFRESH_FAILED = "not refreshed"  # the annotation a chain view shows its refresh failure in


def worker_headers() -> list[dict]:
    """Every known worker: id, kind and connection state (for the Send to / Move to menus)."""
    out = []
    for w in all_workers():
        try:
            state = w.state
        except Exception:
            state = "unreachable"
        out.append({"id": w.id, "kind": w.kind, "state": state})
    return out


def _set_silently(widget, name: str, value) -> None:
    """Update a synced trait on the Python side only (its changes went out as patches); a view
    that asks for the state later (a page reload) still gets the current value."""
    widget._trait_values[name] = value


class SyftWidget(anywidget.AnyWidget):
    # The module's text, not its Path: for a Path, anywidget connects every instance to the
    # file's change signal with a strong reference, so no view would ever be freed (nor what
    # it shows).
    _esm = STATIC.read_text(encoding="utf-8") if STATIC.is_file() else _MISSING_ESM

    view = traitlets.Unicode("chain").tag(sync=True)
    workers = traitlets.List().tag(sync=True)

    def __init__(self, *, namespace: dict | None = None, **kwargs):
        self._namespace = namespace
        self._views: set[str] = set()  # the views showing it (at most MAX_VIEWS)
        self._hello_refreshes = collections.deque(maxlen=HELLO_REFRESHES)  # when hellos last refreshed it
        self._seen = False
        self._cells_unseen = 0
        super().__init__(**kwargs)
        self.on_msg(self._on_front_msg)
        live.register(self)

    # --- where names live -----------------------------------------------------------------
    @property
    def namespace(self) -> dict:
        if self._namespace is not None:
            return self._namespace
        ns = notebook_namespace()
        return ns if ns is not None else {}

    # --- liveness -------------------------------------------------------------------------
    @property
    def active(self) -> bool:
        """Refreshed by cell runs and events: shown in a view, or displayed and not yet seen."""
        return self.comm is not None and (bool(self._views) or (not self._seen and self._cells_unseen < 3))

    def close(self):
        live.unregister(self)
        super().close()

    def set_state(self, sync_data):
        """A state update from the browser: dropped, with no echo to other views. The bundle
        never writes a trait; a browser that does (a forged world offering more actions) must
        change nothing the kernel decides from."""
        if sync_data:
            log.info("syft_lab widget: ignored a browser state update of %s", ", ".join(map(str, sync_data))[:80])

    # --- messages from the browser ---------------------------------------------------------
    def _on_front_msg(self, _widget, content, buffers):
        # JupyterLab may deliver widget messages on a kernel subshell thread, while a cell runs
        # in the main thread: actions and refreshes touch the runtime, so they run on the main
        # thread (after the running cell, as they would without subshells).
        live.call_on_main(lambda: self._handle_safely(content))

    def _handle_safely(self, content):
        try:
            self.handle_message(content)
        except Exception as e:  # a bad message never breaks the kernel; the reply says what failed
            log.debug("syft_lab widget message failed", exc_info=True)
            self.send({"type": "reply", "ok": False, "req": actions._req_of(content),
                       "error": f"{type(e).__name__}: {e}"})

    def handle_message(self, content) -> dict | None:
        """Handle one message from a view; returns the reply sent, if any."""
        kind = content.get("type") if isinstance(content, dict) else None
        if kind == "action":
            reply = self.run_action(content)
        elif kind == "hello" and isinstance(content.get("view"), str) and _VIEW_RE.match(content["view"]):
            self._hello(content["view"])
            return None
        elif kind == "bye" and isinstance(content.get("view"), str):
            self._views.discard(content["view"])
            return None
        elif kind == "resync":
            self.resync()
            return None
        else:
            reply = {"ok": False, "req": actions._req_of(content),
                     "error": "malformed message: expected a JSON object with type action, hello, bye or resync"}
        reply = {"type": "reply", **reply}
        self.send(reply)
        return reply

    def _hello(self, view: str) -> None:
        """A view was rendered: remembered (at most MAX_VIEWS), and a widget no view showed
        catches up (at most HELLO_REFRESHES times a second)."""
        views = self._views
        woke = not views
        if view not in views:
            if len(views) >= MAX_VIEWS:
                views.pop()
            views.add(view)
        self._seen = True
        done = self._hello_refreshes
        now = time.monotonic()
        if woke and (len(done) < HELLO_REFRESHES or now - done[0] >= 1.0):
            done.append(now)
            self.refresh()

    def run_action(self, request) -> dict:
        reply = actions.perform(request, known=self.lookup, namespace=self.namespace, held=self.held())
        if reply.get("ok") and actions.mutates(reply.get("action")):
            self.after_action(reply)
            with live.action_step(reply.get("code")):
                live.refresh_all()  # every view changes at once, not at the next cell
        return reply

    # --- what subclasses provide ----------------------------------------------------------
    def lookup(self, worker: str, obj_id: int) -> dict | None:
        """The model entry (node or world object) that a view may name, or None."""
        return None

    def held(self) -> list:
        """Objects this widget shows that may not be bound in the notebook."""
        return []

    def after_action(self, reply: dict) -> None:
        pass

    def refresh(self) -> None:
        self._set_if_changed("workers", worker_headers())

    def resync(self) -> None:
        self.refresh()

    def refresh_failed(self, line: str) -> None:
        """A refresh raised (live.report_failure): show ``line`` in the view, keep the rest."""

    def _set_if_changed(self, name, value):
        if getattr(self, name) != value:
            setattr(self, name, value)

    # --- text and static fallbacks ------------------------------------------------------------
    def text(self) -> str:
        return object.__repr__(self)

    def html(self) -> str:
        return ""

    def _repr_mimebundle_(self, **kwargs):
        bundle = super()._repr_mimebundle_(**kwargs)
        if bundle is None:
            return None
        data, meta = bundle
        data = dict(data)
        data["text/plain"] = self.text()
        html = self.html()
        if html:
            data["text/html"] = html
        return data, meta


class _Shown:
    """An object a view shows, held weakly where Python allows it: a view must not keep a
    pointer (and so its worker's object) alive after the notebook dropped it."""

    def __init__(self, obj):
        try:
            self._ref, self._strong = weakref.ref(obj), None
        except TypeError:
            self._ref, self._strong = None, obj

    def get(self):
        return self._ref() if self._ref is not None else self._strong


def _gone_root(last: dict | None) -> dict:
    """What a view shows of an object that no longer exists: its root, marked gone, alone."""
    root = dict(last) if last else {"kind": "tensor", "type": "object", "id": 0, "owner": LOCAL_OWNER,
                                    "display": {"label": "object", "lines": [], "badge": None}, "annotations": []}
    root.update(state="gone", error="deleted in the notebook: this view no longer holds it", children=[], actions=[])
    root["display"] = {**root.get("display", {}), "badge": "gone"}
    root.pop("preview", None)
    return root


def _node_in(chains: list, worker: str, obj_id: int, *, offering: bool) -> dict | None:
    """The node ``obj_id`` owned by ``worker`` in the chains' trees: one that offers actions
    first; with ``offering`` only such a node."""
    found = None
    for chain in chains:
        root = chain.get("root")
        for node in walk(root) if root else ():
            if node.get("id") == obj_id and node.get("owner", LOCAL_OWNER) == worker:
                if node.get("actions"):
                    return node
                found = found or node
    return None if offering else found


class ChainWidget(SyftWidget):
    """The chain tree of one object (its root, down to the data), and the results of its buttons.

    ``chains`` is a list of {"names", "root", "code"?}: the object's chain first, then one per
    action result (``x_ptr`` after Send), newest last. The widget holds the objects it shows
    weakly: once the notebook drops one, its chain shows it as gone."""

    chains = traitlets.List().tag(sync=True)

    def __init__(self, obj, *, namespace: dict | None = None, **kwargs):
        self._objects = [_Shown(obj)]
        self._codes = [None]
        self._last: list = [None]
        kwargs.setdefault("view", "chain")
        super().__init__(namespace=namespace, **kwargs)
        self.chains = self._compute()
        self.workers = worker_headers()

    @property
    def subject(self):
        return self._objects[0].get()

    def _compute(self) -> list[dict]:
        out = []
        ns = self.namespace
        for i, (shown, code) in enumerate(zip(self._objects, self._codes)):
            obj = shown.get()
            if obj is None:
                out.append({"names": [], "root": _gone_root(self._last[i])})
                continue
            try:
                root = chain_nodes(obj)
            except Exception as e:  # a view must render even if the runtime cannot describe it
                root = {"kind": "unreachable", "type": type(e).__name__, "id": 0, "owner": LOCAL_OWNER, "error": str(e),
                        "display": {"label": type(e).__name__, "lines": [str(e)[:80]], "badge": None},
                        "annotations": [], "actions": [], "children": []}
            self._last[i] = root
            entry = {"names": actions.names_of(obj, ns), "root": root}
            if code:
                entry["code"] = code
            out.append(entry)
        return out

    def refresh(self) -> None:
        super().refresh()
        self._set_if_changed("chains", self._compute())

    def held(self) -> list:
        return [o for o in (s.get() for s in self._objects) if o is not None]

    def refresh_failed(self, line: str) -> None:
        """The chains as they were, the first one's root annotated with ``line`` (once)."""
        chains = [dict(c) for c in self.chains]
        if not chains or not chains[0].get("root"):
            return
        root = dict(chains[0]["root"])
        notes = [a for a in root.get("annotations", []) if a.get("label") != REFRESH_FAILED]
        root["annotations"] = notes + [{"label": REFRESH_FAILED, "value": line}]
        chains[0]["root"] = root
        self._set_if_changed("chains", chains)

    def lookup(self, worker: str, obj_id: int) -> dict | None:
        """The node an action names: one this view was shown offering actions, as the kernel
        describes it now (its current ``actions`` decide, not what the view was shown)."""
        if _node_in(self.chains, worker, obj_id, offering=True) is None:
            return None
        return _node_in(self._compute(), worker, obj_id, offering=False)

    def after_action(self, reply: dict) -> None:
        name = reply.get("name")
        obj = self.namespace.get(name) if name else None
        if obj is None:
            return
        self._objects.append(_Shown(obj))
        self._codes.append(reply.get("code"))
        self._last.append(None)
        if len(self._objects) > 1 + MAX_RESULTS:  # the subject stays; the oldest result goes
            del self._objects[1], self._codes[1], self._last[1]

    def text(self) -> str:
        return "\n".join(render_tree(c["root"]) for c in self.chains if c.get("root"))

    def html(self) -> str:
        parts = []
        for c in self.chains:
            title = " = ".join(c.get("names") or []) or None
            parts.append(svg.chain_svg(c["root"], c.get("code") or title))
        return "<div>" + "".join(parts) + "</div>"


class PlanWidget(ChainWidget):
    """A plan's op graph (laid out in the browser with dagre) and where the plan was sent."""

    def __init__(self, obj, *, namespace: dict | None = None, **kwargs):
        kwargs.setdefault("view", "plan")
        super().__init__(obj, namespace=namespace, **kwargs)

    def plan_node(self) -> dict | None:
        for c in self.chains[:1]:
            for n in walk(c["root"]) if c.get("root") else ():
                if n.get("kind") == "plan":
                    return n
        return None

    def html(self) -> str:
        node = self.plan_node()
        return svg.plan_svg(node) if node is not None else super().html()


class WorldWidget(SyftWidget):
    """Every worker, its objects, the local pointers and the arrows between them, kept live.

    The first render carries the whole world; after that only per-object patches cross the
    comm (diff.py), after each cell and after worker events."""

    world = traitlets.Dict().tag(sync=True)
    focus = traitlets.List(traitlets.Unicode()).tag(sync=True)

    def __init__(self, *, namespace: dict | None = None, focus=(), **kwargs):
        kwargs.setdefault("view", "world")
        super().__init__(namespace=namespace, focus=list(focus), **kwargs)
        self._tracker = live.tracker_for(namespace)  # shared with the other views of namespace
        self._feed = tracker.Feed(self._tracker)  # what this view was sent, and what goes next
        try:
            world = live.current_world(self._tracker)
        except Exception as e:  # the view still opens, saying in one line what went wrong
            live.report_failure(None, e)
            world = self._feed.marked(live.failure_line(e))
        self.world = self._feed.start(world)
        self.workers = worker_headers()
        live.watch_events()

    def refresh(self) -> None:
        super().refresh()
        if not live.refreshing():  # asked directly (a view said hello, sy.inspect()): re-read
            self._tracker.after_commands()  # names and remote lanes, as after a cell
        self._deliver(self._feed.patch(live.current_world(self._tracker), live.scheduler.step))

    def refresh_failed(self, line: str) -> None:
        """The world as it was, ``line`` on its "me" lane, until a refresh works again."""
        self._deliver(self._feed.failed(line))

    def resync(self) -> None:
        """The view lost track: the world is recomputed and sent whole."""
        super().refresh()
        self._tracker.resync()
        world = self._feed.reset(live.current_world(self._tracker))
        _set_silently(self, "world", world)
        self._push({"type": "world_reset", "world": world})

    def _deliver(self, patch: dict | None) -> None:
        if patch is not None:
            _set_silently(self, "world", self._feed.world)
            self._push(patch)

    def held(self) -> list:
        """Pointers inside the notebook's lists and dicts (``data["bob"]``): the view shows them,
        so its buttons may act on them."""
        return [v for _path, v in container_items(self.namespace)]

    def _push(self, msg: dict) -> None:
        self.send(msg)

    def lookup(self, worker: str, obj_id: int) -> dict | None:
        """An object this view was shown, as the kernel's current model has it."""
        if self.focus and worker not in self.focus and worker != LOCAL_OWNER:
            return None
        return live.action_entry(self._feed, worker, obj_id)

    def text(self) -> str:
        return render_world(self._focused())

    def _focused(self) -> dict:
        if not self.focus:
            return self.world
        return {**self.world, "workers": [w for w in self.world.get("workers", []) if w["id"] in self.focus]}

    def html(self) -> str:
        return svg.world_svg(self.world, self.focus or None)
