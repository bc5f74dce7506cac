"""The event feed's bounds (feed.py), sans I/O: records are coalesced by object, and a
subscriber that lags past MAX_PENDING objects gets a gap in its sequence (a resync) instead of
an unbounded queue; the client reads a gap as a resync of that worker's lane."""
import torch

from syft_lab import events
from syft_lab.workers import feed
from syft_lab.workers.service import Session, WorkerService


def test_records_are_coalesced_by_object_and_carry_its_entry():
    service = WorkerService("feedw", unlimited=True)
    f = feed.EventFeed({"feedw": service.core})
    s = f.subscribe("feedw")
    try:
        session = Session()
        obj_id = service.call({"c": "store", "o": torch.ones(2)}, session)[0]
        service.core.objects[obj_id].tags = {"#a"}
        events.emit("changed", "feedw", obj_id)
        push = f.take(s)
        assert push["seq"] == 1 and [(r["type"], r["id"]) for r in push["events"]] == [("stored", obj_id)]
        assert push["events"][0]["entry"]["tags"] == ["#a"] and push["events"][0]["entry"]["refcount"] == 1
        assert f.take(s) is None
        service.end_session(session)
        assert [r["type"] for r in f.take(s)["events"]] == ["deleted"]
    finally:
        f.unsubscribe(s)
    assert not f.active


def test_a_lagging_subscriber_gets_a_gap_not_a_queue(monkeypatch):
    monkeypatch.setattr(feed, "MAX_PENDING", 10)
    service = WorkerService("feedw", unlimited=True)
    f = feed.EventFeed({"feedw": service.core})
    s = f.subscribe("feedw")
    try:
        session = Session()
        for _ in range(11):
            service.call({"c": "store", "o": torch.ones(1)}, session)
        assert len(s.pending) <= 10
        push = f.take(s)
        assert push["seq"] == 2  # 1 skipped: the client reads the lane again
        service.end_session(session)
    finally:
        f.unsubscribe(s)
