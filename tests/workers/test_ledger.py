"""A worker's ledger (#26.8): what it saw and what left it, message by message, never a value;
over a VirtualWorker and over the service sans-I/O (sessions, the token, bad notes, the cap)."""
import json

import pytest
import torch

import syft_lab as sy
from syft_lab import events
from syft_lab.errors import SyftError
from syft_lab.workers.ledger import LEDGER_CAP, Ledger
from syft_lab.workers.connection import ServiceConnection
from syft_lab.workers.service import Session, WorkerService

SECRET = 271828.5


@pytest.fixture
def workers():
    ws = [sy.VirtualWorker(n) for n in ("bob", "alice")]
    yield ws
    for w in ws:
        w.close()


@pytest.fixture
def cell():
    """The notebook cell running now (as the pre_run_cell hook sets it), reset afterwards."""
    def set_(n):
        events.set_current_cell(n)
    yield set_
    events.set_current_cell(None)


def _brief(records):
    return [(r["kind"], r["direction"], r["peer"]) for r in records]


def test_a_virtual_workers_ledger_lists_what_it_saw_and_what_left(workers, cell):
    bob, alice = workers
    cell(3)
    x = torch.tensor([SECRET, 2.0, 3.0]).send(bob)
    y = x + 1
    cell(4)
    got = y.get()
    moved = x.move(alice)
    assert torch.equal(got, torch.tensor([SECRET + 1, 3.0, 4.0]))
    assert "271828.5" not in json.dumps(bob.ledger())
    records = bob.ledger()
    assert _brief(records) == [("stored", "in", "me"), ("op", "in", "me"), ("fetched", "out", "me"),
                               ("moved", "out", "alice")]
    stored, op, fetched, move = records
    assert stored["bytes"] == 12 and stored["cell"] == 3 and stored["id"] == x.id_at_location
    assert op["op"] == "add" and op["bytes"] == 0 and op["cell"] == 3  # a Python scalar: no tensor bytes
    assert fetched["bytes"] == 12 and fetched["cell"] == 4 and fetched["id"] == y.id_at_location
    assert move["peer_kind"] == "worker" and move["cell"] == 4
    for r in records:
        assert set(r) >= {"kind", "direction", "peer", "bytes", "cell", "time", "id"}
    [arrived] = alice.ledger()
    assert (arrived["kind"], arrived["direction"], arrived["peer"], arrived["peer_kind"]) == ("moved", "in", "bob", "worker")
    assert arrived["id"] == moved.id_at_location and arrived["bytes"] == 12
    assert "271828.5" not in json.dumps([bob.ledger(), alice.ledger()])  # never a value


def test_what_left_a_worker_is_every_get_and_move_of_its_objects(workers):
    bob, alice = workers
    ptrs = [torch.ones(2).send(bob) for _ in range(3)]
    ptrs[0].get()
    ptrs[1].move(alice)
    out = [r for r in bob.ledger() if r["direction"] == "out"]
    left = {r["id"]: r["kind"] for r in out if r["kind"] in ("fetched", "moved")}
    assert left[ptrs[0].id_at_location] == "fetched"
    assert left[ptrs[1].id_at_location] == "moved"
    assert ptrs[2].id_at_location not in left  # still there: nothing left


def test_the_lane_carries_the_ledger_in_the_world_model(workers):
    bob, alice = workers
    x = torch.ones(3).send(bob)
    x.get()
    lanes = {w["id"]: w for w in sy.world({}).to_dict()["workers"]}
    view = lanes["bob"]["ledger"]
    assert [(r["kind"], r["direction"], r["peer"]) for r in view["records"]] == [("stored", "in", "me"),
                                                                                ("fetched", "out", "me")]
    assert view["totals"] == {"stored in": [1, 12], "fetched out": [1, 12]}
    assert view["seq"] == 2 and view["dropped"] == 0 and view["cap"] == LEDGER_CAP
    assert "time" not in view["records"][0]  # the view needs no times (the lane header stays small)
    assert "ledger: in: 1 stored (12 B); out: 1 fetched (12 B)" in repr(sy.world({}))
    assert lanes["alice"]["ledger"]["records"] == []


def test_the_ledger_is_a_ring_buffer_with_a_cap():
    led = Ledger(cap=5)
    s = Session()
    for i in range(12):
        led.add("op", "in", s, 8, None, i)
    reply = led.read(s)
    assert [r["id"] for r in reply["records"]] == [7, 8, 9, 10, 11]
    assert reply["seq"] == 12 and reply["dropped"] == 7
    assert reply["totals"] == [["op", "in", 5, 40]]  # a session's part: its kept records
    assert led.read(s, everything=True)["totals"] == [["op", "in", 12, 96]]  # every record ever
    assert len(led.records) == 5


def test_a_read_of_every_session_with_a_limit_gives_the_newest_records_oldest_first():
    led = Ledger(cap=50)
    a, b = Session(), Session()
    for i in range(30):
        led.add("op", "in", a if i % 3 else b, 8, None, i)
    tail = led.read(a, everything=True, limit=4)
    assert [r["id"] for r in tail["records"]] == [26, 27, 28, 29]
    assert [r["mine"] for r in tail["records"]] == [True, False, True, True]  # 27 is b's
    assert tail["totals"] == [["op", "in", 30, 240]]  # every record, not only the tail's
    assert [r["id"] for r in led.read(a, everything=True, since=27, limit=10)["records"]] == [27, 28, 29]
    assert [r["id"] for r in led.read(a, everything=True)["records"]] == list(range(30))


def test_the_lane_shows_the_newest_records_of_a_long_ledger(workers):
    from syft_lab.inspection.model import LEDGER_VIEW
    bob, _ = workers
    kept = [bob.load(torch.full((i % 5 + 1,), 1.0)) for i in range(LEDGER_VIEW + 25)]
    view = {w["id"]: w for w in sy.world({}).to_dict()["workers"]}["bob"]["ledger"]
    assert [r["bytes"] for r in view["records"]] == [4 * (i % 5 + 1) for i in range(25, LEDGER_VIEW + 25)]
    assert view["totals"]["stored in"][0] == LEDGER_VIEW + 25 and view["seq"] == LEDGER_VIEW + 25
    assert len(kept) == LEDGER_VIEW + 25


def test_a_session_reads_its_own_part_and_the_token_reads_all():
    service = WorkerService("bob", unlimited=True)
    service.ledger_token = "the-token"
    a, b = Session(), Session()
    conn_a, conn_b = ServiceConnection(service, a), ServiceConnection(service, b)
    conn_a.answer({"r": 1, "c": "store", "o": torch.ones(2)})
    conn_b.answer({"r": 2, "c": "store", "o": torch.ones(3)})
    mine, _ = conn_a.answer({"r": 3, "c": "ledger"})
    assert [r["bytes"] for r in mine["ok"]["records"]] == [8]
    assert mine["ok"]["scope"] == "session" and mine["ok"]["records"][0]["mine"] is True
    assert mine["ok"]["records"][0]["peer"] == "client 1"  # a label: never the session's own id
    assert a.id not in json.dumps(mine) and b.id not in json.dumps(mine)
    every, _ = conn_a.answer({"r": 4, "c": "ledger", "all": True, "token": "the-token"})
    assert [(r["bytes"], r["mine"], r["session"]) for r in every["ok"]["records"]] == [
        (8, True, "client 1"), (12, False, "client 2")]
    assert b.id not in json.dumps(every)
    for bad in ({"all": True}, {"all": True, "token": "wrong"}):
        reply, _ = conn_a.answer({"r": 5, "c": "ledger", **bad})
        assert reply["err"]["t"] == "SyftError" and "token" in reply["err"]["m"]
    open_service = WorkerService("carol", unlimited=True)  # no token set: each session its own part only
    reply, _ = ServiceConnection(open_service, a).answer({"r": 6, "c": "ledger", "all": True, "token": ""})
    assert "token" in reply["err"]["m"]


def test_a_message_may_say_its_cell_and_what_its_data_is():
    service = WorkerService("alice", unlimited=True)
    conn = ServiceConnection(service, Session())
    conn.answer({"r": 1, "c": "store", "o": torch.ones(4, dtype=torch.int64), "cell": 9,
                 "note": {"why": "dealer", "peer": "carol"}})
    reply, _ = conn.answer({"r": 2, "c": "ledger"})
    [rec] = reply["ok"]["records"]
    assert (rec["kind"], rec["peer"], rec["peer_kind"], rec["cell"], rec["bytes"]) == (
        "dealer material", "carol", "crypto provider", 9, 32)


@pytest.mark.parametrize("note", [
    "dealer", {"why": "gift"}, {"why": "dealer", "peer": 3}, {"why": "dealer", "extra": 1},
    {"items": {"x" * 100: 1}}, {"carries": [{"why": "opened", "bytes": -1}]}, {"carries": "all"},
])
def test_a_bad_note_is_a_clear_error_and_nothing_is_stored(note):
    service = WorkerService("alice", unlimited=True)
    s = Session()
    reply, _ = ServiceConnection(service, s).answer({"r": 1, "c": "store", "o": torch.ones(2), "note": note})
    assert reply["err"]["t"] == "SyftError" and "note" in reply["err"]["m"]
    assert service.core.objects == {} and service.ledger.seq == 0


@pytest.mark.parametrize("query", [{"since": -1}, {"limit": 0}, {"limit": LEDGER_CAP + 1}, {"since": "0"}])
def test_ledger_takes_bounded_paging(query):
    service = WorkerService("alice", unlimited=True)
    reply, _ = ServiceConnection(service, Session()).answer({"r": 1, "c": "ledger", **query})
    assert reply["err"]["t"] == "SyftError"


def test_a_refused_command_adds_no_record(workers):
    bob, _ = workers
    x = torch.ones(2).send(bob)
    before = len(bob.ledger())
    with pytest.raises(SyftError):
        bob.submit_request({"c": "fetch", "id": 12345}).result()
    with pytest.raises(SyftError):
        bob.submit_request({"c": "store", "o": "not a tensor"}).result()
    assert len(bob.ledger()) == before
