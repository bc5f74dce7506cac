"""The tracker (issue 26.3 and 26.6): a closed worker is a grey gone lane whatever its kind, and
a plan's state entries say "state of <plan>" on the per-object path as on a full recompute."""
from __future__ import annotations

import gc

import pytest
import torch
from torch import nn

import syft_lab as sy
from syft_lab import events
from syft_lab.widget import WorldWidget, live
from syft_lab.widget.tracker import WorldTracker

GONE = {"id": "bob_c", "state": "closed", "gone": True}


def _virtual():
    return sy.VirtualWorker("bob_c")


def _process():
    return sy.start_worker("bob_c")


def _lanes(world) -> dict:
    return {lane["id"]: lane for lane in world["workers"]}


def _closed_lane_and_pointer(world):
    lanes = _lanes(world)
    (x,) = [o for o in lanes["me"]["objects"] if o["names"] == ["x"]]
    return lanes.get("bob_c"), {k: x.get(k) for k in ("location", "dangling", "actions")}


@pytest.mark.parametrize("make", [_virtual, pytest.param(_process, marks=[pytest.mark.network, pytest.mark.slow])],
                         ids=["virtual", "websocket"])
def test_a_closed_worker_is_a_grey_lane_with_dangling_pointers_whatever_its_kind(make):
    bob = make()
    ns = {"x": torch.ones(2).send(bob), "bob": bob}
    view = WorldWidget(namespace=ns)
    view._views.add("v1")
    assert _lanes(view.world)["bob_c"]["state"] != "closed"
    bob.close()
    live.refresh_all()
    # the view that saw it open, and a tracker made after the close (a fresh sy.inspect())
    for world in (view.world, WorldTracker(ns).update()):
        lane, x = _closed_lane_and_pointer(world)
        # #39.1: an in-process worker still holds x's object (x owns it) and its lane lists it; a
        # worker process released it when this client's session ended with the close
        held = [(ns["x"].id_at_location, [])] if bob.kind == "virtual" else []
        assert [(o["id"], o["actions"]) for o in lane.pop("objects")] == held
        assert lane == {**GONE, "kind": bob.kind}
        assert x == {"location": "bob_c", "dangling": True, "actions": []}
    view.close()
    del ns["x"]
    assert "bob_c" not in _lanes(WorldTracker(ns).update())  # nothing points there: the lane goes
    ns.clear()
    gc.collect()


def test_a_plan_sent_to_a_worker_marks_its_state_on_the_per_object_path(bob):
    model = nn.Linear(3, 1)

    def train_step(x):
        return model(x).sum()

    step = sy.plan(train_step, state=model, args_shape=[(-1, 3)])
    step.build(torch.ones(2, 3))
    ns = {"step": step}
    tracker = WorldTracker(ns)
    tracker.update()
    seen = []
    unsubscribe = events.subscribe(seen.append)
    try:
        ns["pp"] = step.send(bob)
    finally:
        unsubscribe()
    assert any(e.get("type") == "stored" and e.get("worker") == "bob" for e in seen)
    for e in seen:
        tracker.on_event(e)
    applied = tracker.update()
    assert tracker.last_ops is not None  # the per-object path ran, not a recompute
    bob_lane = _lanes(applied)["bob"]["objects"]
    (plan,) = [o for o in bob_lane if o["kind"] == "plan"]
    state = [o for o in bob_lane if o["kind"] != "plan"]
    assert len(state) == 2 and all(o.get("state_of") == "train_step" and o["state_of_id"] == plan["id"]
                                   for o in state), state
    fresh = _lanes(WorldTracker(ns).update())["bob"]["objects"]
    assert {o["id"]: o for o in bob_lane} == {o["id"]: o for o in fresh}  # the same entries
