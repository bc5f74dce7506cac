"""WorkerService on its own: message dicts in, replies out; sessions; the store rule."""
import pytest
import torch

import syft_lab as sy
from syft_lab.commands import NewObject, Ref
from syft_lab.errors import SyftError
from syft_lab.tensors.base import ChainLayer
from syft_lab.tensors.pointer import PointerSpec
from syft_lab.wire.format import Decoder, encode_bytes
from syft_lab.workers.connection import ServiceConnection
from syft_lab.workers.service import Session, WorkerService, reaches_nobody
from syft_lab.workers.virtual import reachable_in_process


@pytest.fixture
def service():
    return WorkerService("svc")


@pytest.fixture
def conn(service):
    """A client session's connection to the service: the one door every message comes in by."""
    return ServiceConnection(service, Session())


def ok(service, msg, session=None):
    """The result of ``msg`` (a session of its own unless given), which must not fail."""
    reply, _ = ServiceConnection(service, Session() if session is None else session).answer(msg)
    assert "err" not in reply, reply
    return reply["ok"]


def test_every_failure_is_an_error_reply_naming_type_and_message(service, conn):
    assert conn.answer({"r": 7, "c": "nope"})[0] == {
        "r": 7, "err": {"t": "SyftError", "m": conn.answer({"c": "nope"})[0]["err"]["m"]}}
    assert "unknown command 'nope'" in conn.answer({"c": "nope"})[0]["err"]["m"]
    assert conn.answer({"r": 1, "c": "fetch", "id": "x"})[0]["err"]["m"] == "field 'id' must be an integer"
    missing = conn.answer({"r": 2, "c": "fetch", "id": 99})[0]["err"]
    assert missing["t"] == "ObjectNotFoundError" and missing["id"] == 99
    refused = conn.answer({"r": 3, "c": "run", "op": "aten.set_.source_Tensor", "a": [], "k": None})[0]["err"]
    assert refused["t"] == "OpNotAllowedError"
    assert ok(service, {"c": "ping"}) == "pong"  # the service lives on


def test_call_raises_what_the_command_raised(service):
    with pytest.raises(SyftError, match="unknown command"):
        service.call({"c": "nope"}, Session())


def test_run_claims_its_results_for_the_session_that_ran_it(service):
    mine, other = Session(), Session()
    x = ok(service, {"c": "store", "o": torch.ones(2)}, mine)
    out = ok(service, {"c": "run", "op": "aten.add.Tensor", "a": [Ref(x), Ref(x)], "k": None}, mine)
    assert type(out) is NewObject and mine.refs == {x: 1, out.id: 1} and other.refs == {}
    ok(service, {"c": "release", "ids": [out.id]}, other)  # not other's reference: ignored
    assert out.id in service.core.objects
    ok(service, {"c": "ping", "rel": [out.id]}, mine)  # releases travel with any request
    assert out.id not in service.core.objects and mine.refs == {x: 1}


def test_ending_a_session_releases_what_it_holds_and_only_that(service):
    a, b = Session(), Session()
    x = ok(service, {"c": "store", "o": torch.ones(1)}, a)
    ok(service, {"c": "incref", "id": x}, b)
    y = ok(service, {"c": "store", "o": torch.zeros(1)}, a)
    held = ok(service, {"c": "load", "o": torch.ones(3), "tags": ["#d"]}, a)
    service.end_session(a)
    assert set(service.core.objects) == {x, held}  # b still holds x; held data belongs to no session
    assert y not in service.core.objects
    service.end_session(b)
    assert set(service.core.objects) == {held}


def test_merging_sessions_adds_their_references(service):
    a, b = Session(), Session()
    x = ok(service, {"c": "store", "o": torch.ones(1)}, a)
    ok(service, {"c": "incref", "id": x}, b)
    service.merge_session(a, b)
    assert b.refs == {x: 2} and a.refs == {} and a.ended
    service.end_session(b)
    assert x not in service.core.objects


def test_a_get_leaves_the_store_and_goes_back_if_its_reply_fails(service):
    s = Session()
    x = ok(service, {"c": "store", "o": torch.arange(3.0)}, s)
    reply, then = ServiceConnection(service, s).answer({"c": "fetch", "id": x, "keep": False})
    assert torch.equal(reply["ok"], torch.arange(3.0)) and x not in service.core.objects
    then.failed()  # the reply could not be delivered
    assert x in service.core.objects and s.refs == {x: 1}


def test_a_worker_process_stores_no_pointer(service, conn):
    spec = PointerSpec("alice", None, 5, [2], torch.float32)
    err = conn.answer({"c": "store", "o": spec})[0]["err"]
    assert err["t"] == "SyftError"
    assert ("cannot hold a pointer to an object on worker 'alice': a worker stores a pointer only to a "
            "worker it can itself reach" in err["m"]) and "ptr.move(svc)" in err["m"]
    assert service.reach is reaches_nobody and not service.core.objects


def test_an_in_process_worker_stores_pointers_to_workers_it_reaches(workers):
    bob, alice = workers
    p = torch.ones(2).send(bob)
    service = WorkerService("carol", unlimited=True, reach=reachable_in_process)
    s = Session()
    kept = ok(service, {"c": "store", "o": sy.PointerTensor(bob, p.id_at_location, p.shape, p.dtype, owning=False)}, s)
    assert service.core.lookup(kept).holder_id == "carol"
    bob.close()  # a closed worker can be reached no more
    pointer = sy.PointerTensor(bob, p.id_at_location, p.shape, p.dtype, owning=False)
    err = ServiceConnection(service, s).answer({"c": "store", "o": pointer})[0]["err"]
    assert "cannot hold a pointer to an object on worker 'bob'" in err["m"]
    service.end_session(s)


class _Unstorable(ChainLayer):
    kind = "unstorable_test"
    remote_storable = False
    remote_storable_reason = "its pieces live on several workers"

    @staticmethod
    def __new__(cls, child):
        r = torch.Tensor._make_wrapper_subclass(cls, child.shape, dtype=child.dtype)
        r.child = child
        return r

    def __init__(self, child):
        pass

    @classmethod
    def __torch_dispatch__(cls, func, types, args, kwargs=None):
        raise NotImplementedError


def test_layers_that_are_not_remote_storable_are_refused(service, conn):
    err = conn.answer({"c": "store", "o": _Unstorable(torch.ones(2))})[0]["err"]
    assert err["m"] == "a _Unstorable cannot be stored on a worker as one object: its pieces live on several workers"
    assert "tensor" in conn.answer({"c": "store", "o": [1, 2]})[0]["err"]["m"]


def test_whole_messages_in_and_out(service):
    s = Session()
    door = ServiceConnection(service, s)
    out = Decoder().feed(door.respond_whole(encode_bytes({"r": 4, "c": "store", "o": torch.ones(3)})))
    assert out["r"] == 4 and out["ok"] in service.core.objects
    bad = Decoder().feed(door.respond_whole(b"not a message"))
    assert bad["r"] == 0 and bad["err"]["t"] == "WireError"


def test_summary_pages_are_bounded(service, conn):
    for _ in range(3):
        ok(service, {"c": "store", "o": torch.ones(1)})
    page = ok(service, {"c": "summary", "offset": 1, "limit": 1})
    assert page["total"] == 3 and len(page["objects"]) == 1
    assert "summary takes offset" in conn.answer({"c": "summary", "limit": 10**6})[0]["err"]["m"]


def _two_outputs():
    from syft_lab.plans.graph import Node, PlanGraph, Value

    aten = torch.ops.aten
    nodes = [Node(aten.mul.Tensor, [Value("input", 0), 2.0], {}, [((2,), "float32")]),
             Node(aten.neg.default, [Value("input", 0)], {}, [((2,), "float32")])]
    return PlanGraph("two", [{"name": "x", "role": "input", "shape": [2], "dtype": "float32"}], [], nodes,
                     [Value("node", 0), Value("node", 1)], False)


def test_run_graph_returns_the_values_it_is_asked_for_and_stores_the_rest(service):
    s = Session()
    x = ok(service, {"c": "store", "o": torch.tensor([1.0, 2.0])}, s)
    g = _two_outputs().to_json()
    kept, opened = ok(service, {"c": "run_graph", "g": g, "i": [x], "o": [101, 102], "ret": [102]}, s)
    assert type(kept) is NewObject and kept.id == 101 and s.refs == {x: 1, 101: 1}
    assert torch.equal(opened, torch.tensor([-1.0, -2.0])) and 102 not in service.core.objects
    err = ServiceConnection(service, s).answer({"c": "run_graph", "g": g, "i": [x], "o": [103, 104], "ret": [5]})[0]["err"]
    assert "a subset of 'o'" in err["m"] and 103 not in service.core.objects


def test_run_graph_ret_in_process_hands_out_copies(bob):
    x = torch.tensor([1.0, 2.0]).send(bob)
    kept, opened = bob._request({"c": "run_graph", "g": _two_outputs().to_json(), "i": [x.id_at_location],
                                 "o": [201, 202], "ret": [201]})
    assert torch.equal(kept, torch.tensor([2.0, 4.0])) and type(opened) is NewObject
    assert 201 not in bob.objects and 202 in bob.objects
    bob._release(202)
    assert 202 not in bob.objects


def test_respond_whole_answers_refused_content_by_request_id_and_counts_the_budget():
    import msgpack

    from syft_lab.wire.format import EXT_TENSOR, decode, encode
    from syft_lab.workers.limits import Limits

    service = WorkerService("blob", Limits(max_bytes=2**20))
    s = Session()
    sixty_five = encode({"c": "store", "r": 3, "o": torch.ones([1] * 64)}).frames[0]
    header = msgpack.packb({"c": "store", "r": 3, "o": msgpack.ExtType(EXT_TENSOR, msgpack.packb(
        [0, "float32", [1] * 65, False, None, None]))})
    bad = bytes(sixty_five[:4]) + len(header).to_bytes(4, "big") + bytes(sixty_five[8:20]) + header + b"\x00" * 4
    door = ServiceConnection(service, s)
    r = decode(door.respond_whole(bad))
    assert r["r"] == 3 and r["err"]["t"] == "WireError" and "at most 64 sizes" in r["err"]["m"]
    big = encode({"c": "store", "r": 4, "o": torch.zeros(2**18 + 1)}, chunk_size=2**62).frames[0]
    r = decode(door.respond_whole(bytes(big)))
    assert r["r"] == 4 and r["err"]["t"] == "QuotaExceededError" and "before anything was allocated" in r["err"]["m"]
    ok = decode(door.respond_whole(encode_bytes({"c": "store", "r": 5, "o": torch.zeros(1000)})))
    assert ok["r"] == 5 and service.core.budget.reserved == 0 and service.core.ledger.bytes == 4000
    got = decode(door.respond_whole(encode_bytes({"c": "fetch", "r": 6, "id": ok["ok"], "keep": True})))
    assert torch.equal(got["ok"], torch.zeros(1000)) and service.core.budget.reserved == 0  # its copy went out
