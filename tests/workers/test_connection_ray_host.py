"""The Ray host (ray/host.py) as a driver of ServiceConnection, run without Ray: packed
messages in, packed replies out, the events a follower is owed before its reply, a move
between two of its workers, a session's end. (tests/ray runs it as a Ray actor.)"""
import pytest
import torch

import syft_lab.ray.host as host_module
from syft_lab.commands import NewObject, Ref
from syft_lab.wire.format import encode

SID = "s" * 16


@pytest.fixture
def host(monkeypatch):
    monkeypatch.setattr(host_module, "node_info", lambda: {"node": "127.0.0.1"})  # (Ray's runtime context)
    h = host_module.WorkerHost(["bob", "carol"])
    yield h
    for w in ("bob", "carol"):
        h.end_session(w, SID)


def message(fields, worker="bob"):
    return host_module.pack(encode({**fields, "@w": worker, "@s": SID}, chunk_size=host_module.NO_CHUNK))


def read(packed):
    """A reply, or (push, reply) when events were owed first."""
    if type(packed) is tuple:
        return tuple(read(p) for p in packed)
    return host_module.unpack(packed, 2**30)


def test_a_followers_reply_comes_after_the_events_it_is_owed(host):
    assert read(host.call(message({"r": 1, "c": "subscribe"}))) == {"r": 1, "ok": {"seq": 0}}
    push, reply = read(host.call(message({"r": 2, "c": "store", "o": torch.ones(3)})))
    x = reply["ok"]
    assert push["seq"] == 1 and [(e["type"], e["id"]) for e in push["events"]] == [("stored", x)]
    push, reply = read(host.call(message({"r": 3, "c": "incref", "id": x})))  # a count changed, no event
    assert reply == {"r": 3, "ok": None} and push["events"][0]["entry"]["refcount"] == 2


def test_several_commands_in_one_call_and_a_fetch_of_the_plan_runs_output(host):
    x = read(host.call(message({"r": 1, "c": "store", "o": torch.arange(3.0)})))["ok"]
    ran, got = read(host.calls([message({"r": 2, "c": "run", "op": "aten.add.Tensor", "a": [Ref(x), Ref(x)],
                                         "k": None}),
                                message({"r": 3, "c": "fetch", "id": x, "keep": True})]))
    assert type(ran["ok"]) is NewObject and torch.equal(got["ok"], torch.arange(3.0))
    refused = read(host.calls([message({"r": 4, "c": "fetch", "@o": 0})]))
    assert "plan run before this fetch" in refused["err"]["m"]


def test_a_move_between_two_workers_of_the_host_and_an_unknown_worker(host):
    x = read(host.call(message({"r": 1, "c": "store", "o": torch.ones(2)})))["ok"]
    source = host.call(message({"r": 2, "c": "fetch", "id": x}))
    moved = read(host.receive(message({"r": 3, "c": "store"}, "carol"), source))
    assert moved["ok"][1:] == [[2], torch.float32] and x not in host.services["bob"].core.objects
    assert torch.equal(host.services["carol"].core.objects[moved["ok"][0]], torch.ones(2))
    bad = read(host.call(message({"r": 4, "c": "ping"}, "zed")))
    assert bad["err"]["m"] == "this Ray actor hosts bob, carol, not 'zed'"


def test_a_session_that_ends_releases_what_it_held_and_stops_its_pushes(host):
    host.call(message({"r": 1, "c": "subscribe"}))
    x = read(host.call(message({"r": 2, "c": "store", "o": torch.ones(2)})))[1]["ok"]
    host.end_session("bob", SID)
    assert x not in host.services["bob"].core.objects and not host.feed.active
