"""ServiceConnection (workers/connection.py): the one place a message is answered, for every host.

What a client sees through it: the reply, an error reply for a failure, the events it is owed
before its reply, an object that comes back when its reply could not go, and a policy that
says where a message may be answered. And the hosts' drivers answer only through it."""
import ast
from pathlib import Path

import pytest
import torch

from syft_lab.commands import NewObject, Ref
from syft_lab.plans.graph import Node, PlanBuilds, PlanGraph, Value
from syft_lab.wire.format import Decoder, encode_bytes
from syft_lab.workers.connection import ServiceConnection
from syft_lab.workers.feed import EventFeed
from syft_lab.workers.limits import Limits
from syft_lab.workers.service import Session, WorkerService

SYFT = Path(__file__).resolve().parents[2] / "syft_lab"


def connection(worker="conn", feed=False, **limits):
    """A connection to a new service: with ``limits`` a worker process's, else an in-process one's."""
    service = WorkerService(worker, Limits(**limits)) if limits else WorkerService(worker, unlimited=True)
    return ServiceConnection(service, Session(), EventFeed({worker: service.core}) if feed else None)


def ok(conn, msg):
    out = conn.respond(msg)
    assert "err" not in out.message, out.message
    conn.sent(out.then)
    return out.message["ok"]


def decoded(out):
    d = Decoder()
    for frame in out.encoded.frames:
        msg = d.feed(frame)
    return msg


def test_a_reply_and_its_bytes_say_the_same_and_a_failure_is_an_error_reply():
    conn = connection()
    out = conn.respond({"r": 5, "c": "store", "o": torch.ones(3)})
    assert decoded(out) == out.message and out.message["r"] == 5 and out.message["ok"] in conn.service.core.objects
    bad = conn.respond({"r": 6, "c": "fetch", "id": 12345})
    assert bad.message == {"r": 6, "err": {"t": "ObjectNotFoundError", "id": 12345,
                                            "m": bad.message["err"]["m"]}} and decoded(bad) == bad.message
    assert ok(conn, {"c": "ping"}) == "pong"  # the connection lives on


def test_a_reply_that_cannot_travel_is_an_error_and_its_object_comes_back():
    conn = connection(max_bytes=2**30)
    service = conn.service
    x = ok(conn, {"c": "store", "o": torch.ones(1000)})
    used = service.core.budget.used
    service.max_message_size = 1000  # the object's reply is now too large to send
    out = conn.respond({"r": 2, "c": "fetch", "id": x})
    assert out.message["err"]["t"] == "WireError" and out.then is None
    assert torch.equal(service.core.objects[x], torch.ones(1000))  # back in the store, held by this session
    assert conn.session.refs == {x: 1} and service.core.budget.used == used
    service.max_message_size = 2**20
    assert torch.equal(decoded(conn.respond({"r": 3, "c": "fetch", "id": x}))["ok"], torch.ones(1000))


def test_a_get_whose_reply_did_not_go_out_puts_the_object_back_and_frees_the_budget():
    conn = connection(max_bytes=2**30)
    service = conn.service
    x = ok(conn, {"c": "store", "o": torch.ones(10).expand(4, 10)})  # sent whole: its get makes a copy
    used = service.core.budget.used
    out = conn.respond({"r": 2, "c": "fetch", "id": x})
    assert x not in service.core.objects and service.core.budget.used > used  # the copy, held by the reply
    conn.failed(out.then)  # the connection dropped while it travelled
    assert x in service.core.objects and conn.session.refs == {x: 1}
    assert service.core.budget.used == used


def test_a_plan_leaves_the_store_only_once_its_reply_has_gone_out():
    conn = connection()
    specs = [{"name": "x", "role": "input", "shape": [2], "dtype": "float32"}]
    node = Node(torch.ops.aten.neg.default, [Value("input", 0)], {}, [((2,), "float32")])
    builds = PlanBuilds("neg", [PlanGraph("neg", specs, [], [node], [Value("node", 0)], True)])
    pid = ok(conn, {"c": "store_plan", "g": builds.to_json()})
    out = conn.respond({"c": "fetch", "id": pid})
    assert "neg" in out.message["ok"]["plan"] and pid in conn.service.core.objects  # there while it travels
    conn.sent(out.then)
    assert pid not in conn.service.core.objects


def test_in_process_results_are_the_objects_and_a_view_of_the_store_is_a_copy():
    conn = connection()
    x = conn.result({"c": "store", "o": torch.arange(4.0)})
    copy = conn.result({"c": "fetch", "id": x, "keep": True})
    copy.add_(1)
    assert torch.equal(conn.service.core.objects[x], torch.arange(4.0))
    with pytest.raises(Exception, match="unknown command"):
        conn.result({"c": "nope"})


def test_where_a_message_may_be_answered():
    conn = connection(max_bytes=2**30)
    for cmd in ("hello", "ping", "subscribe"):
        assert conn.at_once({"c": cmd}) and not conn.at_once({"c": cmd, "rel": [1]})
    assert not conn.at_once({"c": "run"}) and not conn.at_once({"c": "fetch"})
    x = ok(conn, {"c": "store", "o": torch.ones(4)})
    assert conn.quick({"c": "run", "op": "aten.add.Tensor", "a": [Ref(x), Ref(x)], "k": None})
    assert not conn.quick({"c": "run", "op": "aten.mm.default", "a": [Ref(x), 3], "k": None})
    assert not conn.quick({"c": "fetch", "id": x})
    assert not connection().quick({"c": "run", "op": "aten.add.Tensor", "a": [1, 1], "k": None})  # no limits: in process
    assert conn.on_arrival({"c": "ping"}) and not conn.on_arrival({"c": "subscribe"})
    assert not conn.on_arrival({"c": "summary"})  # a read across sessions waits for closed ones' releases


def test_a_followers_messages_wait_for_the_handler_its_pushes_go_first():
    conn = connection("arrival", feed=True)
    assert conn.on_arrival({"c": "ping"})
    ok(conn, {"c": "subscribe"})
    assert not conn.on_arrival({"c": "ping"}) and conn.follows
    conn.close()


def test_a_follower_is_owed_the_events_of_every_session_before_its_reply():
    mine = connection("followed", feed=True)
    other = ServiceConnection(mine.service, Session(), mine.feed)
    assert mine.push_owed() is None  # not a follower
    seq = ok(mine, {"c": "subscribe"})["seq"]
    x = ok(other, {"c": "store", "o": torch.ones(2)})
    push = mine.push_owed()
    assert push["seq"] == seq + 1 and [(e["type"], e["id"]) for e in push["events"]] == [("stored", x)]
    assert mine.push_owed() is None  # once
    ok(other, {"c": "incref", "id": x})  # a count changed without an event: a follower is told too
    assert [e["entry"]["refcount"] for e in mine.push_owed()["events"]] == [2]
    mine.close()
    assert not mine.feed.active and mine.session.ended


def test_one_whole_message_in_and_its_whole_reply_out():
    conn = connection()
    reply = Decoder().feed(conn.respond_whole(encode_bytes({"r": 4, "c": "store", "o": torch.ones(3)})))
    assert reply["r"] == 4 and type(reply["ok"]) is int
    bad = Decoder().feed(conn.respond_whole(b"not a message"))
    assert bad["r"] == 0 and bad["err"]["t"] == "WireError"


def test_run_results_belong_to_the_session_that_ran_them():
    conn = connection()
    x = ok(conn, {"c": "store", "o": torch.ones(2)})
    out = ok(conn, {"c": "run", "op": "aten.add.Tensor", "a": [Ref(x), Ref(x)], "k": None})
    assert type(out) is NewObject and conn.session.refs == {x: 1, out.id: 1}


# --- the hosts' drivers only move bytes: every answer, error reply and after-send hook is the connection's
DRIVERS = ["workers/server.py", "ray/host.py", "workers/virtual.py"]
ANSWERING = {"call", "handle", "encoded_reply", "handle_bytes", "run_op", "in_process_ops", "error_reply",
             "reply_done"}


@pytest.mark.parametrize("driver", DRIVERS)
def test_a_driver_answers_only_through_its_service_connection(driver):
    tree = ast.parse((SYFT / driver).read_text())
    found = []
    for node in ast.walk(tree):
        value = node.value if isinstance(node, ast.Attribute) else None
        if (isinstance(value, ast.Name) and value.id == "then") or (isinstance(value, ast.Attribute)
                                                                    and value.attr == "then"):
            found.append(f"line {node.lineno}: then.{node.attr}")  # a Then's hooks are the connection's
        elif isinstance(node, ast.Attribute) and node.attr in ANSWERING:
            found.append(f"line {node.lineno}: .{node.attr}")
        elif isinstance(node, ast.Name) and node.id in ANSWERING:
            found.append(f"line {node.lineno}: {node.id}")
    assert found == []
