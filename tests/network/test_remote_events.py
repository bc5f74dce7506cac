"""A worker process pushes its per-object events to the clients that follow it (feed.py,
docs/wire-format.md "Pushed events"): the notebook's world view follows a websocket worker's
lane object by object, during a cell too, sees another client's changes, and reads the lane
again after a reconnect. Uses the session's worker processes (bob, alice)."""
import gc

import pytest
import torch

import syft_lab as sy
from syft_lab import events
from syft_lab.widget import WorldWidget, live
from syft_lab.workers import registry
from syft_lab.workers.websocket import WebSocketWorker

pytestmark = pytest.mark.network


@pytest.fixture(autouse=True)
def idle_scheduler():
    live.scheduler.loop, live.scheduler.in_cell = None, False
    yield
    live.scheduler.in_cell = False


def _shown(ns):
    w = WorldWidget(namespace=ns)
    w._views.add("v1")
    w._seen = True
    sent = []
    w.send = lambda msg, buffers=None: sent.append(msg)
    return w, sent


def _lane(widget, worker_id):
    return {lane["id"]: lane for lane in widget.world["workers"]}[worker_id]


def test_a_remote_workers_events_arrive_on_the_bus_with_their_entries(remote):
    bob, _alice = remote
    assert bob.follow_events() and bob.follows_events
    got = []
    unsubscribe = events.subscribe(got.append)
    try:
        p = torch.ones(3).send(bob)
        q = p * 2
        q.add_(1)  # written in place on the worker: "changed"
        obj_id = q.id_at_location
        del q
        gc.collect()
        bob.flush()
    finally:
        unsubscribe()
    pushed = [(e["type"], e["id"]) for e in got if e.get("pushed")]
    assert ("stored", p.id_at_location) in pushed and ("deleted", obj_id) in pushed
    stored = next(e for e in got if e.get("pushed") and e["id"] == p.id_at_location)
    assert stored["worker"] == "bob" and stored["entry"]["shape"] == [3] and stored["entry"]["refcount"] == 1
    assert next(e for e in got if e.get("pushed") and e["id"] == obj_id and e["type"] == "deleted")["reason"] == "released"
    del p


def test_the_world_follows_a_websocket_lane_during_a_cell(remote, monkeypatch):
    bob, alice = remote
    ns = {}
    w, sent = _shown(ns)
    try:
        assert bob.follows_events and alice.follows_events  # the view asked them to push
        # a view refreshes mid-cell only when every worker pushes (another test's client would not)
        assert live._all_follow(), [(x.id, x.kind) for x in registry.all_workers()
                                    if x.kind not in ("local", "virtual") and not x.follows_events]
        live.scheduler.in_cell = True  # a long cell: the view changes while it runs
        live.scheduler.last_flush, live.scheduler.cost = 0.0, 0.0
        monkeypatch.setattr(live, "FLUSH_INTERVAL", 0.0)
        ns["x_ptr"] = torch.arange(4.0).send(bob)
        mid_cell = [m for m in sent if m.get("type") == "world_patch"]
        assert any(op[1] == "bob" and op[0] == "put" for m in mid_cell for op in m["ops"])
        entry = next(o for o in _lane(w, "bob")["objects"] if o["id"] == ns["x_ptr"].id_at_location)
        assert entry["shape"] == [4] and entry["refcount"] == 1 and "move" in entry["actions"]
        ns["y_ptr"] = ns["x_ptr"].move(alice)  # a move: gone from bob's lane, on alice's
        live.scheduler.in_cell = False
        live._post_run_cell()
        assert ns["x_ptr"].id_at_location not in {o["id"] for o in _lane(w, "bob")["objects"]}
        assert [o["shape"] for o in _lane(w, "alice")["objects"]] == [[4]]
    finally:
        w.close()
        ns.clear()
        gc.collect()
        bob.flush()
        alice.flush()


def test_another_clients_change_shows_without_a_request_of_this_view(remote, worker_procs, token):
    bob, _alice = remote
    ns = {}
    w, sent = _shown(ns)
    other = WebSocketWorker(worker_procs["bob"].url, id="bob", token=token, progress=False)
    registry.register(bob)  # the notebook's bob stays the one the world shows
    try:
        theirs = torch.full((2, 2), 7.0).send(other)
        other.ping()
        bob.ping()  # any reply comes after the events owed before it
        live.refresh_all(world_only=True)
        entry = next(o for o in _lane(w, "bob")["objects"] if o["id"] == theirs.id_at_location)
        assert entry["shape"] == [2, 2]
        # bob's connection drops (a network blip); the other client works meanwhile; the next
        # request reconnects, and what was pushed meanwhile is lost: the lane is read again
        bob.transport.drop()
        more = torch.zeros(5).send(other)
        other.ping()
        bob.ping()
        live.refresh_all(world_only=True)
        ids = {o["id"] for o in _lane(w, "bob")["objects"]}
        assert {theirs.id_at_location, more.id_at_location} <= ids
        del theirs, more
        gc.collect()
        other.flush()
        bob.ping()
        live.refresh_all(world_only=True)
        assert not _lane(w, "bob")["objects"]
    finally:
        other.close()
        registry.register(bob)
        w.close()
