"""The kernel side of the world view's teaching parts (issue 18): the steps a patch carries,
workers that close or die, the keepalive, views that hold what they show weakly, pointers held
in containers."""
from __future__ import annotations

import gc
import types
import weakref

import pytest
import torch

import syft_lab as sy
from syft_lab.tensors.nodes import flatten
from syft_lab.inspection.model import world_dict
from syft_lab.widget import ChainWidget, WorldWidget, diff, live
from syft_lab.widget.tracker import StepContext


@pytest.fixture
def carol():
    w = sy.VirtualWorker("carol")
    yield w
    w.close()


def _fresh(scheduler) -> None:
    scheduler.states, scheduler.raw, scheduler.step = None, [], StepContext()


@pytest.fixture(autouse=True)
def fresh_live_state():
    _fresh(live.scheduler)
    yield
    _fresh(live.scheduler)


def test_a_patch_says_what_its_step_did_stored_moved_fetched(bob, alice, capture):
    ns = {}
    w = WorldWidget(namespace=ns)
    w._views.add("v1")
    sent = capture(w)
    live.scheduler.step.cell, live.scheduler.step.code = 3, "x_ptr = x.send(bob)"
    ns["x_ptr"] = torch.ones(2).send(bob)
    live.refresh_all()
    (patch,) = sent.of("world_patch")
    step = patch["step"]
    assert (step["cell"], step["by"], step["code"]) == (3, "cell", "x_ptr = x.send(bob)")
    assert [(e["type"], e["worker"], e["names"]) for e in step["events"]] == [("stored", "bob", ["x_ptr"])]
    live.scheduler.step.cell, live.scheduler.step.code = 4, "x_ptr = x_ptr.move(alice)"
    ns["x_ptr"] = ns["x_ptr"].move(alice)
    live.refresh_all()
    events = sent.of("world_patch")[-1]["step"]["events"]
    assert [(e["type"], e["worker"], e.get("to")) for e in events] == [("moved", "bob", "alice")]
    with live.action_step("x = x_ptr.get()"):
        ns["x"] = ns["x_ptr"].get()
        live.refresh_all()
    step = sent.of("world_patch")[-1]["step"]
    assert (step["by"], step["cell"], step["code"]) == ("action", None, "x = x_ptr.get()")
    assert [(e["type"], e["worker"]) for e in step["events"]] == [("fetched", "alice")]
    del ns["x_ptr"]
    gc.collect()


def test_describe_names_plan_runs_deletions_and_worker_changes():
    lane = lambda wid, objs, **kw: {"id": wid, "kind": "virtual", "state": "in-process", "objects": objs, **kw}  # noqa: E731
    plan_ptr = {"id": 9, "kind": "pointer", "type": "PlanPointer", "location": "bob", "id_at_location": 1, "names": ["f_ptr"]}
    t = {"id": 2, "kind": "tensor", "shape": [2], "dtype": "float32"}
    old = {"workers": [lane("me", [plan_ptr]), lane("bob", [{"id": 1, "kind": "plan"}, t]), lane("alice", [])]}
    new = {"workers": [lane("me", [plan_ptr]), lane("bob", [{"id": 1, "kind": "plan"}, {**t, "id": 3}]),
                       lane("alice", [], state="unreachable")]}
    events = diff.describe(old, new, raw=[], code="y = f_ptr(x_ptr)")
    assert [(e["type"], e["worker"], e.get("id")) for e in events] == [
        ("deleted", "bob", 2), ("plan run", "bob", 3), ("worker down", "alice", None)]


def test_a_closed_worker_stays_as_a_gone_lane_while_pointers_point_to_it(bob, carol, capture):
    ns = {"c": torch.ones(2).send(carol), "b": torch.ones(1).send(bob)}
    w = WorldWidget(namespace=ns)
    w._views.add("v1")
    sent = capture(w)
    carol.close()
    live.refresh_all()
    lanes = {lane["id"]: lane for lane in w.world["workers"]}
    gone = lanes.pop("carol")  # it still holds c's object (c owns it): the lane lists it, with no action
    assert {k: v for k, v in gone.items() if k != "objects"} == {"id": "carol", "kind": "virtual", "state": "closed",
                                                                   "gone": True}
    assert [(o["id"], o["actions"]) for o in gone["objects"]] == [(ns["c"].id_at_location, [])]
    me = {o["names"][0]: o for o in lanes["me"]["objects"] if o["names"]}
    assert me["c"].get("dangling") is True and "dangling" not in me["b"]
    events = sent.of("world_patch")[-1]["step"]["events"]
    assert ("worker down", "carol") in [(e["type"], e["worker"]) for e in events]
    del ns["c"]
    live.refresh_all()
    assert "carol" not in {lane["id"] for lane in w.world["workers"]}  # nothing points there now
    w.close()
    ns.clear()
    gc.collect()


def test_the_keepalive_refreshes_the_views_when_a_worker_state_changes(bob, capture, monkeypatch):
    w = WorldWidget(namespace={})
    w._views.add("v1")
    sent = capture(w)
    states = [("bob", "connected")]
    monkeypatch.setattr(live, "worker_states", lambda: tuple(states))
    assert live.keepalive_tick() is False  # the first reading is the baseline
    assert live.keepalive_tick() is False  # nothing changed: nothing is recomputed
    states[0] = ("bob", "disconnected")
    n = len(sent)
    assert live.keepalive_tick() is True
    assert live.keepalive_tick() is False
    assert len(sent) >= n  # a refresh ran (it sends only if the world changed)


class _FakeShell:
    def __init__(self):
        self.user_ns = {"_oh": {}}
        self.user_ns_hidden = {}
        self.displayhook = type("Hook", (), {"_": None, "__": None, "___": None})()


def test_the_value_that_ended_a_cell_is_kept_weakly_by_out_and_underscores(alice):
    ip = _FakeShell()
    t = torch.ones(1).send(alice)
    for store in (ip.user_ns, ip.user_ns_hidden):
        store.update({"_": t, "_5": t})
    ip.user_ns["_oh"][5] = t
    ip.displayhook._ = t
    result = types.SimpleNamespace(result=t, execution_count=5)
    live.weaken_output(ip, result)
    assert isinstance(ip.user_ns["_oh"][5], weakref.ProxyTypes)
    assert ip.user_ns["_"].location.id == "alice"  # the proxy still works while t lives
    assert len(alice.objects) == 1
    del t
    gc.collect()
    assert alice.objects == {}


def test_a_chain_view_holds_its_object_weakly_and_shows_it_gone(alice):
    ns = {"t": torch.ones(1).send(alice)}
    view = ChainWidget(ns["t"], namespace=ns)
    assert flatten(view.chains[0]["root"])[0]["kind"] == "pointer"
    del ns["t"]
    gc.collect()
    assert alice.objects == {}
    view.refresh()
    head = flatten(view.chains[0]["root"])[0]
    assert (head["kind"], head["state"]) == ("pointer", "gone")
    assert view.held() == []
    view.close()


def test_pointers_in_containers_are_named_by_path(bob, alice):
    ns = {"data": {"bob": torch.ones(2).send(bob)}, "parts": [torch.zeros(1).send(alice)],
          "y_ptr": torch.ones(3).send(alice)}
    ns["y"] = ns["y_ptr"].get()
    me = {o["id"]: o for o in world_dict(ns)["workers"][0]["objects"] if o["kind"] == "pointer"
          and (o["names"] or o.get("held_in"))}
    # the fetched y_ptr, still bound, stays as a gone row
    assert sorted(tuple(o.get("held_in", ())) for o in me.values() if o["state"] == "ok") == [("data['bob']",),
                                                                                                ("parts[0]",)]
    assert [(o["names"], o["state"]) for o in me.values() if o["state"] != "ok"] == [(["y_ptr"], "gone")]
    w = WorldWidget(namespace=ns)
    assert {id(v) for v in w.held()} == {id(ns["data"]["bob"]), id(ns["parts"][0])}
    w.close()
    ns.clear()
    gc.collect()


def test_ops_recorded_in_a_cell_carry_its_number_for_the_op_log(monkeypatch):
    """pre_run_cell names the running cell (syft_lab.events.set_current_cell): every op a
    LoggingTensor records then carries it, the oplog action returns it, and the chain view links
    the op to that cell ("cell [n]"); outside a cell ops carry none."""
    ip = types.SimpleNamespace(execution_count=8, user_ns={})  # In[7]: IPython >= 9.8 counts it before it runs
    monkeypatch.setattr(live.scheduler, "ip", ip)
    lx = sy.LoggingTensor(torch.ones(2))
    live._pre_run_cell(types.SimpleNamespace(store_history=True, raw_cell="y = lx * 2"))
    try:
        y = lx * 2
    finally:
        live._post_run_cell(None)
    z = y + 1  # after the cell: no cell
    ns = {"z": z}
    view = ChainWidget(z, namespace=ns)
    head = view.chains[0]["root"]
    reply = view.handle_message({"type": "action", "action": "oplog", "target": {"worker": "me", "id": head["id"]}})
    assert reply["ok"] and [(r["op"], r["cell"]) for r in reply["log"]] == [("aten.mul.Tensor", 7),
                                                                           ("aten.add.Tensor", None)]
    view.close()


def test_a_shared_tensor_put_in_a_container_keeps_its_share_marks_in_the_view(bob, alice, carol, capture):
    """The container bug of #25 in the live view: the patch that shows a secret put in a dict of
    lists marks its shares (index, of, the secret's path), on the pointers and on the parties'
    lanes, and the browser's world (the first one with the patch applied) says the same."""
    ns = {}
    w = WorldWidget(namespace=ns)
    w._views.add("v1")
    sent = capture(w)
    first = w.world
    ns["d"] = {"data": [torch.tensor([1.0, 2.0]).fix_precision().share(bob, alice, crypto_provider=carol)]}
    group = ns["d"]["data"][0].child.group
    live.refresh_all()
    (patch,) = sent.of("world_patch")
    browser = diff.apply(first, patch)
    for world in (w.world, browser):
        lanes = {lane["id"]: lane for lane in world["workers"]}
        for rows in ([o for o in lanes["me"]["objects"] if o.get("group") == group],
                     [o for lid in ("bob", "alice") for o in lanes[lid]["objects"]]):
            assert sorted((o["share"]["index"], o["share"]["of"], o["secret"]) for o in rows) == [
                (0, 2, "d['data'][0]"), (1, 2, "d['data'][0]")], rows
            assert all(o["actions"] == [] for o in rows)  # a share alone is never fetched or moved
    # moved to another container, the marks follow the secret's new path
    ns["held"] = [ns.pop("d")["data"]]
    live.refresh_all()
    lanes = {lane["id"]: lane for lane in w.world["workers"]}
    assert sorted(o["secret"] for lid in ("bob", "alice") for o in lanes[lid]["objects"]) == ["held[0][0]"] * 2
    del ns["held"]
    gc.collect()
