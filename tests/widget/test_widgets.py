"""Widget state: the model JSON in the traits, live updates as patches, messages, displays."""
import gc
import json
import re
import shutil
import subprocess
import weakref
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import syft_lab as sy
from syft_lab.tensors.nodes import flatten
from syft_lab import events
from syft_lab.inspection.model import world_dict
from syft_lab.plans import Plan
from syft_lab.widget import ChainWidget, PlanWidget, WorldWidget, diff, live, mimebundle, svg, tracker
from syft_lab.widget.widgets import STATIC

ROOT = Path(__file__).resolve().parents[2]
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


def test_the_bundle_is_built_and_small():
    assert STATIC.is_file(), "run npm run build (scripts/setup does)"
    # a guard against bloat (a second copy of a dependency, a source map): dagre is 48 KB of it
    assert STATIC.stat().st_size <= 168 * 1024
    assert ChainWidget._esm is not None and "export" in str(ChainWidget._esm)


def test_chain_widget_state_of_a_logging_tensor():
    lx = sy.LoggingTensor(torch.tensor([1., -2., 3.])) * 2
    c = ChainWidget(lx, namespace={"lx": lx})
    assert c.view == "chain"
    assert c.chains == [{"names": ["lx"], "root": sy.chain(lx).root}]
    assert [n["kind"] for n in flatten(c.chains[0]["root"])] == ["logging", "tensor"]
    assert json.loads(json.dumps(c.get_state()["chains"])) == c.chains
    assert {"id": "me", "kind": "local", "state": "in-process"} in c.workers


def test_chain_widget_follows_its_pointer(bob):
    p = torch.ones(2).send(bob)
    ns = {"p": p}
    c = ChainWidget(p, namespace=ns)
    assert [n["owner"] for n in flatten(c.chains[0]["root"])] == ["me", "bob"]
    p.get()
    c.refresh()
    assert flatten(c.chains[0]["root"])[0]["state"] == "gone" and len(flatten(c.chains[0]["root"])) == 1
    ns["q"] = ns.pop("p")
    c.refresh()
    assert c.chains[0]["names"] == ["q"]


def test_world_widget_first_render_then_only_per_object_patches(bob, alice, capture):
    ns = {f"t{i}": torch.ones(3).send(bob if i % 2 else alice) for i in range(50)}
    w = WorldWidget(namespace=ns)
    sent = capture(w)
    assert w.world["rev"] == 0 and {lane["id"] for lane in w.world["workers"]} >= {"me", "bob", "alice"}
    ns["new"] = torch.zeros(2).send(bob)
    w.refresh()
    (patch,) = sent.of("world_patch")
    assert patch["base"] == 0 and patch["rev"] == 1 and w.world["rev"] == 1
    assert len(patch["ops"]) == 2  # the new pointer in me's lane and the new tensor on bob
    assert len(json.dumps(patch)) < 2048
    expected = world_dict(ns)
    expected["rev"] = 1
    assert w.world == expected
    w.refresh()  # nothing changed: nothing is sent
    assert len(sent.of("world_patch")) == 1
    # the state a new view (a page reload) asks for is the current world, never sent whole
    assert w.get_state()["world"] == w.world


def test_names_follow_the_namespace_after_a_cell(bob, capture):
    x = torch.ones(2)
    ns = {"x": x}
    w = WorldWidget(namespace=ns)
    sent = capture(w)
    ns["y"] = ns.pop("x")
    live._post_run_cell()
    (patch,) = sent.of("world_patch")
    assert patch["ops"][0][0] == "put" and patch["ops"][0][3]["names"] == ["y"]


def test_events_mark_the_world_dirty_and_flush_later(bob, capture, monkeypatch):
    ns = {}
    w = WorldWidget(namespace=ns)
    w._views.add("v1")
    w._seen = True
    sent = capture(w)
    live.scheduler.in_cell = True
    try:
        live.scheduler.last_flush = 0.0
        ns["p"] = torch.ones(1).send(bob)  # in-process work mid-cell: a throttled flush
        assert sent.of("world_patch")
        n = len(sent)
        monkeypatch.setattr(live, "FLUSH_INTERVAL", 3600.0)  # however slow the machine, still within it
        ns["q"] = torch.ones(1).send(bob)  # within FLUSH_INTERVAL: no flush yet
        assert len(sent) == n and live.scheduler.dirty
    finally:
        live.scheduler.in_cell = False
    live._post_run_cell()
    assert len(sent) == n + 1 and not live.scheduler.dirty
    assert any(o.get("names") == ["q"] for o in w.world["workers"][0]["objects"])


def test_dormant_widgets_are_not_refreshed(bob, capture):
    w = WorldWidget(namespace={})
    sent = capture(w)
    w.handle_message({"type": "hello", "view": "v1"})
    w.handle_message({"type": "bye", "view": "v1"})
    assert not w.active
    torch.ones(1).send(bob)
    live._post_run_cell()
    assert not sent.of("world_patch")
    w.handle_message({"type": "hello", "view": "v2"})  # shown again: catches up at once
    assert w.active


def test_resync_sends_the_whole_world_once(bob, capture):
    w = WorldWidget(namespace={})
    sent = capture(w)
    w.handle_message({"type": "resync"})
    (reset,) = sent.of("world_reset")
    assert reset["world"] == w.world and reset["world"]["rev"] == 1


def test_focus_on_one_worker(bob, alice):
    torch.ones(1).send(bob)
    w = sy.widget.widget_for(bob)
    assert isinstance(w, WorldWidget) and w.focus == ["bob"]
    assert "bob (virtual)" in w.text() and "alice" not in w.text()


def test_plan_widget_from_a_plan_node(plan_node):
    class FakePlan:  # the shape of the lead's Plan: its chain is one "plan" node
        kind = "plan"
        id = plan_node["id"]

        def _inspection_nodes(self, owner, with_values):
            return [dict(plan_node, owner=owner)]

    p = FakePlan()
    w = sy.widget.widget_for(p)
    assert isinstance(w, PlanWidget) and w.view == "plan"
    assert w.plan_node()["graph"] == plan_node["graph"]
    html = w.html()
    assert html.startswith("<svg") and "mlp" in html and "[4, 2]" in html and "sent to bob, alice" in html


def test_real_plan_displays_as_plan_view(bob):
    @sy.plan
    def f(x):
        return (x * 2).relu() + 1

    f(torch.ones(3))
    w = sy.widget.widget_for(f)
    assert isinstance(w, PlanWidget) and isinstance(f, Plan)
    node = w.plan_node()
    roles = {n["role"] for n in node["graph"]["nodes"]}
    assert {"input", "op", "output"} <= roles
    assert node["sent_to"] == []  # the view says "not sent to any worker"
    ptr = f.send(bob)
    w2 = sy.widget.widget_for(ptr)
    assert isinstance(w2, PlanWidget) and w2.plan_node() is not None
    w.refresh()
    assert w.plan_node()["sent_to"] == ["bob"]


def test_mimebundles_have_widget_text_and_static_svg(bob):
    lx = sy.LoggingTensor(torch.ones(2))
    data, _ = mimebundle(lx)
    assert WIDGET_MIME in data and data["text/plain"] == repr(lx)
    assert data["text/html"].startswith("<div><svg") and "LoggingTensor" in data["text/html"]
    p = torch.ones(2).send(bob)
    data, _ = mimebundle(p)
    assert data["text/plain"] == repr(p) and "on bob" in data["text/html"]
    wv = sy.world({"p": p})
    data, _ = mimebundle(wv)
    assert data["text/plain"] == repr(wv) and "bob (virtual" in data["text/html"]
    data, _ = mimebundle(bob)
    assert data["text/plain"].startswith("<VirtualWorker 'bob'")
    with pytest.raises(TypeError):
        mimebundle(42)


def test_display_hooks_in_a_kernel_shell(bob):
    """In a kernel, syft objects display as the widget; plain tensors keep torch's display."""
    from IPython.core.interactiveshell import InteractiveShell

    from syft_lab.widget import install_display_hooks

    ip = InteractiveShell.instance()
    had_kernel = hasattr(ip, "kernel")
    ip.kernel = object()
    f = ip.display_formatter.mimebundle_formatter
    saved = dict(f.type_printers), dict(f.deferred_printers)
    try:
        assert install_display_hooks(ip)
        lx = sy.LoggingTensor(torch.ones(2))
        data, _ = ip.display_formatter.format(lx)
        assert WIDGET_MIME in data and data["text/plain"] == repr(lx)
        data, _ = ip.display_formatter.format(torch.ones(2))
        assert WIDGET_MIME not in data and data["text/plain"] == repr(torch.ones(2))
        for obj in (torch.ones(1).send(bob), bob, sy.world({})):
            assert WIDGET_MIME in ip.display_formatter.format(obj)[0]
        # sy.chain(pp) ending a cell shows the chain view (issue 39.5), its text tree as the plain text
        pp = torch.ones(1).send(bob)
        chain = sy.chain(pp)
        data, _ = ip.display_formatter.format(chain)
        assert WIDGET_MIME in data and data["text/plain"] == repr(chain)
        del pp
        gc.collect()
        data, _ = ip.display_formatter.format(chain)  # its tensor is gone: the text tree stays
        assert WIDGET_MIME not in data and data["text/plain"] == repr(chain)
    finally:
        f.type_printers.clear()
        f.type_printers.update(saved[0])
        f.deferred_printers.clear()
        f.deferred_printers.update(saved[1])
        live.uninstall()
        if not had_kernel:
            del ip.kernel
        InteractiveShell.clear_instance()


def test_no_hooks_outside_a_kernel():
    from IPython.core.interactiveshell import InteractiveShell

    from syft_lab.widget import install_display_hooks

    ip = InteractiveShell.instance()
    try:
        assert not install_display_hooks(ip)
    finally:
        InteractiveShell.clear_instance()


# --- world patches: Python's diff, applied by Python and by the browser's patch.js -----------

def _worlds():
    entry = st.builds(lambda i, tags, names: {"id": i, "kind": "tensor", "type": "Tensor", "shape": [2],
                                              "dtype": "float32", "tags": tags, "names": names},
                      st.integers(1, 30), st.lists(st.sampled_from(["#a", "#b"]), max_size=2, unique=True),
                      st.lists(st.sampled_from(["x", "y"]), max_size=1))

    def lane(wid, objs):
        seen, out = set(), []
        for o in objs:
            if o["id"] not in seen:
                seen.add(o["id"])
                out.append(o)
        return {"id": wid, "kind": "virtual", "state": "in-process", "objects": out}

    lanes = st.lists(st.tuples(st.sampled_from(["me", "bob", "alice", "carol"]), st.lists(entry, max_size=8)),
                     max_size=4).map(lambda ls: [lane(w, o) for w, o in {w: o for w, o in ls}.items()])
    return lanes.map(lambda ls: {"schema": "syft_lab.world", "version": 1, "workers": ls})


@settings(max_examples=200, deadline=None)
@given(_worlds(), _worlds())
def test_diff_then_apply_gives_the_new_world(a, b):
    patch = diff.diff(a, b)
    if patch is None:
        assert a == b
    else:
        assert diff.apply(a, patch) == b


def test_patch_js_applies_python_patches_identically(tmp_path):
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is needed for the widget (scripts/setup installs it with npm)")
    import random

    rng = random.Random(1)
    cases = []
    for _ in range(60):
        ws = [_random_world(rng) for _ in range(2)]
        ws[0]["rev"] = 0
        patch = diff.diff(ws[0], ws[1]) or {"type": "world_patch", "ops": []}
        patch.update(base=0, rev=1)
        expected = diff.apply(ws[0], patch)
        cases.append({"world": ws[0], "patch": patch, "expected": expected})
    f = tmp_path / "cases.json"
    f.write_text(json.dumps(cases))
    script = ("import {applyWorldPatch} from './js/widget/patch.js'; import {readFileSync} from 'node:fs';"
              "import {isDeepStrictEqual} from 'node:util';"
              "const cases = JSON.parse(readFileSync(process.argv[1]));"
              # the JS world also carries the patch's step (for the views' highlights); Python's does not
              "const bad = cases.filter(c => { const {step, ...world} = applyWorldPatch(c.world, c.patch);"
              " return !isDeepStrictEqual(world, c.expected) || step !== (c.patch.step ?? null); });"
              "console.log(JSON.stringify({n: cases.length, bad: bad.length}));")
    out = subprocess.run([node, "--input-type=module", "-e", script, str(f)], cwd=ROOT, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {"n": 60, "bad": 0}


def _random_world(rng):
    lanes = []
    for wid in rng.sample(["me", "bob", "alice", "carol"], rng.randint(1, 4)):
        ids = rng.sample(range(1, 40), rng.randint(0, 10))
        lanes.append({"id": wid, "kind": "virtual", "state": rng.choice(["in-process", "connected"]),
                      "objects": [{"id": i, "kind": "tensor", "type": "Tensor", "shape": [rng.randint(1, 3)],
                                   "dtype": "float32", "tags": [], "names": []} for i in ids]})
    return {"schema": "syft_lab.world", "version": 1, "workers": lanes}


def test_static_svgs_render_every_kind(plan_node):
    nodes = [{"kind": "unreachable", "type": "WorkerUnavailableError", "id": 5, "owner": "carol", "error": "gone"}]
    assert "gone" in svg.chain_svg(nodes)
    layers = svg.plan_layers(plan_node["graph"])
    assert layers["in3"] == 0 and layers["v0"] == 1 and layers["out0"] == 6
    big = {"workers": [{"id": "bob", "kind": "virtual", "objects": [
        {"id": i, "kind": "tensor", "type": "Tensor", "shape": [1], "dtype": "float32"} for i in range(1, 100)]}]}
    assert "... 59 more" in svg.world_svg(big)
    assert svg.worker_hue("bob") == 205 and svg.worker_hue("me") is None


def test_js_unit_tests_pass():
    """The JS layer (layout, patches, rendering helpers) runs under node's own test runner."""
    node = shutil.which("node")
    assert node, "node is needed (scripts/setup)"
    if not (ROOT / "node_modules" / "linkedom").is_dir():
        pytest.fail("npm install has not run (scripts/setup runs it)")
    out = subprocess.run([node, "--test", "tests/js/"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    # every test( ... ) of the JS files ran and passed: a run of zero tests is no pass
    written = sum(len(re.findall(r"^\s*test\(", f.read_text(), re.M)) for f in (ROOT / "tests" / "js").glob("*.test.js"))
    summary = dict(re.findall(r"^# (tests|pass|fail|skipped|todo|cancelled) (\d+)$", out.stdout, re.M))
    assert written >= 20 and summary == {"tests": str(written), "pass": str(written), "fail": "0", "skipped": "0",
                                         "todo": "0", "cancelled": "0"}, out.stdout[-2000:]


def test_messages_from_a_subshell_thread_run_on_the_main_thread(bob, capture):
    """JupyterLab may deliver widget messages on a kernel subshell thread: actions are queued
    on the main thread's event loop (after any running cell), never run beside a cell."""
    import threading

    class MainLoop:  # stands for the kernel's loop: records what is handed to it
        def __init__(self):
            self.queued = []

        def is_closed(self):
            return False

        def call_soon_threadsafe(self, fn):
            self.queued.append((fn, threading.current_thread()))

    x = torch.ones(2)
    ns = {"x": x}
    w = WorldWidget(namespace=ns)
    sent = capture(w)
    (entry,) = [o for o in w.world["workers"][0]["objects"] if o.get("names") == ["x"]]
    ran_on = []
    real = w.handle_message
    w.handle_message = lambda c: (ran_on.append(threading.current_thread()), real(c))[1]
    loop = MainLoop()
    live.scheduler.loop = loop
    msg = {"type": "action", "req": 5, "action": "send", "target": {"worker": "me", "id": entry["id"]},
           "worker": "bob"}
    t = threading.Thread(target=w._on_front_msg, args=(w, msg, []))
    t.start()
    t.join()
    assert not ran_on and "x_ptr" not in ns  # queued for the main thread, not run on the subshell
    (fn, from_thread), = loop.queued
    assert from_thread is t
    fn()  # the main loop runs it
    assert ran_on == [threading.main_thread()] and "x_ptr" in ns
    assert sent.of("reply")[0]["ok"] and sent.of("reply")[0]["req"] == 5
    # on the main thread itself, a message is handled at once
    w._on_front_msg(w, {"type": "resync"}, [])
    assert sent.of("world_reset")


def test_sy_inspect_is_one_live_widget_and_show_displays(bob, monkeypatch):
    shown = []
    monkeypatch.setattr("IPython.display.display", lambda *a, **k: shown.append((a, k)))
    w1 = sy.inspect()
    assert sy.inspect() is w1 and isinstance(w1, WorldWidget) and w1.view == "world"
    assert sy.widget.widget_for(sy.world()) is w1
    x = torch.ones(2)
    assert sy.show(x) is None
    (args, kwargs), = shown
    assert WIDGET_MIME in args[0] and kwargs["raw"] is True
    w1.close()
    assert sy.inspect() is not w1  # a closed widget is replaced


def test_a_plan_is_sent_from_its_view(bob):
    @sy.plan
    def g(x):
        return x + 1

    g(torch.ones(2))
    ns = {"g": g, "bob": bob}
    w = PlanWidget(g, namespace=ns)
    head = flatten(w.chains[0]["root"])[0]
    reply = w.handle_message({"type": "action", "action": "send", "target": {"worker": "me", "id": head["id"]},
                              "worker": "bob"})
    assert reply["ok"] and reply["name"] == "g_ptr" and reply["code"] == "g_ptr = g.send(bob)"
    assert type(ns["g_ptr"]).__name__ == "PlanPointer" and w.plan_node()["sent_to"] == ["bob"]
    ptr_id = flatten(w.chains[1]["root"])[0]["id"]
    reply = w.handle_message({"type": "action", "action": "get", "target": {"worker": "me", "id": ptr_id}})
    assert reply["ok"] and reply["name"] == "g" and type(ns["g"]).__name__ == "Plan"


def test_one_world_is_computed_per_refresh_for_every_view_of_a_namespace(bob, capture, monkeypatch):
    ns = {"x": torch.ones(2)}
    views = [WorldWidget(namespace=ns), WorldWidget(namespace=ns)]
    sents = [capture(v) for v in views]
    calls = []
    real = tracker.WorldTracker.update
    monkeypatch.setattr(tracker.WorldTracker, "update", lambda self: calls.append(1) or real(self))
    ns["x_ptr"] = ns["x"].send(bob)
    live.refresh_all()
    assert len(calls) == 1
    patches = []
    for view, sent in zip(views, sents):
        (patch,) = sent.of("world_patch")
        patches.append(patch)
        assert view.world["rev"] == 1 and any(o.get("names") == ["x_ptr"] for lane in view.world["workers"]
                                              for o in lane["objects"])
    assert views[0].world is not views[1].world  # each view keeps its own copy
    assert patches[0]["ops"] == patches[1]["ops"] and patches[0]["step"] is patches[1]["step"]


def lane(world, worker_id):
    return next(ln for ln in world["workers"] if ln["id"] == worker_id)


def test_a_worker_event_is_one_entry_changed_not_a_recomputed_world(bob, alice, capture, monkeypatch):
    """An event names its object: that entry is read again from its worker's store, and the patch
    carries it alone; no lane is read whole, no world is recomputed (widget/tracker.py)."""
    ns = {"ptrs": [torch.ones(2).send(w) for w in (bob, alice) for _ in range(20)]}
    w = WorldWidget(namespace=ns)
    sent = capture(w)
    lanes_read = []
    real = tracker.lane_of
    monkeypatch.setattr(tracker, "lane_of", lambda worker, names: lanes_read.append(worker.id) or real(worker, names))
    held = bob.load(torch.arange(3.).tag("#new"))  # bob stores it (one event), "me" gets a weak pointer
    live.refresh_all(world_only=True)  # what the event loop does after the events
    assert lanes_read == []  # no lane is read whole: not bob's nor alice's, nor "me" for its new pointer
    (patch,) = sent.of("world_patch")
    (op,) = [op for op in patch["ops"] if op[1] == "bob"]
    assert op[0] == "put" and op[3]["tags"] == ["#new"] and op[3]["held"] is True
    assert op[2] == len(lane(w.world, "bob")["objects"]) - 1  # appended, in store order
    # the weak pointer load returned is one row of "me", where a whole read puts it
    (mine,) = [op for op in patch["ops"] if op[1] == "me"]
    assert mine[0] == "put" and mine[3]["id"] == held._ref.pointer_id and mine[3]["owning"] is False
    assert (mine[3]["location"], mine[3]["id_at_location"]) == ("bob", op[3]["id"])
    assert lane(w.world, "me")["objects"] == lane(world_dict(ns), "me")["objects"]  # what a whole read gives
    assert [e for e in patch["step"]["events"] if e["worker"] == "bob"] == [
        {"type": "stored", "worker": "bob", "id": op[3]["id"], "names": []}]
    lanes_read.clear()
    obj_id = op[3]["id"]
    bob.core.objects.pop(obj_id)  # as a worker-side delete would: then its event
    bob.core.held.discard(obj_id)
    events.emit("deleted", "bob", obj_id, reason="released")
    live.refresh_all(world_only=True)
    assert sent.of("world_patch")[-1]["ops"] == [["del", "bob", obj_id]] and lanes_read == []
    del held
    # after a cell, names may have changed: the "me" lane is read again, in-process lanes are not
    live.refresh_all()
    assert lanes_read == ["me"]
    # a resync recomputes every lane
    w.handle_message({"type": "resync"})
    assert sorted(lanes_read[1:]) == sorted(lane_["id"] for lane_ in w.world["workers"])
    assert sent.of("world_reset")[-1]["world"]["workers"] == w.world["workers"]


def test_a_closed_view_lets_go_of_its_namespace(bob):
    """Closing a view frees what it showed: the worker's object goes with the last pointer."""
    ns = {"p": torch.ones(2).send(bob)}
    views = [ChainWidget(ns["p"], namespace=ns), WorldWidget(namespace=ns)]
    refs = [weakref.ref(v) for v in views]
    for view in views:
        view.close()
    del views, view, ns
    gc.collect()
    assert [r() for r in refs] == [None, None]
    assert bob.objects == {}


def test_the_static_svg_draws_a_tree_one_column_per_share_and_any_layer_from_its_display():
    fixtures = ROOT / "tests" / "js" / "fixtures"
    shared = json.loads((fixtures / "shared_chain.json").read_text())["root"]
    picture = svg.chain_svg(shared, "sx")
    for worker in ("bob", "alice", "dan"):
        assert f"on me -&gt; {worker}" in picture  # each share's branch names its worker
        assert svg._colour(worker) in picture  # in that worker's colour
    assert "crypto provider: carol" in picture and "3 shares, field 2^62" in picture and "[secret]" in picture
    assert "values stay on bob" in picture
    # three columns side by side (the first under the root): boxes start at three different x
    assert len(set(re.findall(r'<rect x="(\d+)"', picture))) == 3
    note = json.loads((fixtures / "note_chain.json").read_text())["root"]
    text = svg.chain_svg(note)
    assert "NoteTensor" in text and all(line in text for line in note["display"]["lines"])
    # a plain chain stays one column
    assert len(set(re.findall(r'<rect x="(\d+)"', text))) == 1


def test_new_lanes_keep_the_registry_order_as_a_recomputed_world_does():
    """Workers made in one cell arrive in one update: their lanes are in the order the world
    itself gives (the registry's), whatever order the tracker read them in."""
    t = tracker.WorldTracker({})
    t.update()
    names = [f"lane{i}" for i in range(8)]  # enough that a set's order would differ
    made = [sy.VirtualWorker(n) for n in names]
    try:
        t.after_commands()
        got = [ln["id"] for ln in t.update()["workers"]]
        assert got == [ln["id"] for ln in world_dict({})["workers"]]
        assert got[-8:] == names
        made[2].close()  # made again under the same name: last in the registry, and in the view
        made[2] = sy.VirtualWorker("lane2")
        t.after_commands()
        got = [ln["id"] for ln in t.update()["workers"]]
        assert got == [ln["id"] for ln in world_dict({})["workers"]] and got[-1] == "lane2"
    finally:
        for w in made:
            w.close()


def test_a_chain_view_whose_refresh_fails_says_so_in_one_line(bob, monkeypatch, capsys):
    p = torch.tensor([1., 2.]).send(bob)
    ns = {"p": p}
    view = ChainWidget(p, namespace=ns)
    view._views.add("v1")
    shown = view.chains[0]["root"]

    def broken(self):
        raise ReferenceError("weakly-referenced object no longer exists")

    monkeypatch.setattr(ChainWidget, "_compute", broken)
    live.refresh_all()
    (note,) = [a for a in view.chains[0]["root"]["annotations"] if a["label"] == "not refreshed"]
    assert "ReferenceError: weakly-referenced object no longer exists" in note["value"] and "\n" not in note["value"]
    live.refresh_all()  # failing again says it once
    assert [a["label"] for a in view.chains[0]["root"]["annotations"]].count("not refreshed") == 1
    assert {k: v for k, v in view.chains[0]["root"].items() if k != "annotations"} == \
        {k: v for k, v in shown.items() if k != "annotations"}  # the chain as it was
    assert capsys.readouterr() == ("", "")  # nothing printed
    monkeypatch.undo()
    live.refresh_all()
    assert all(a["label"] != "not refreshed" for a in view.chains[0]["root"]["annotations"])
    view.close()
    del ns["p"], p
