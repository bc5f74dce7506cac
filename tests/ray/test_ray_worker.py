"""What only a RayWorker has: an actor on a node, moves and ops on another worker's object that go
actor to actor through Ray's object store, and an actor that takes nothing but wire bytes.

What makes it "used exactly like any worker" (send/get/move/copy, ops, autograd, plans, search
and load, errors, refusals, releases, shares) is the worker contract suite, run over Ray workers
too (tests/contract/, ``-m ray``); the PySyft tutorial flows run over them as well
(tests/network/test_pysyft_tutorials.py)."""
import gc

import pytest
import torch

import syft_lab as sy
from syft_lab.errors import ObjectNotFoundError, RemoteError
from syft_lab.ray import host as ray_host
from syft_lab.ray import worker as ray_worker
from syft_lab.wire.format import encode_bytes

pytestmark = pytest.mark.network  # a local Ray: processes listening on loopback


def settle(*workers):
    gc.collect()
    for w in workers:
        w.flush()


def test_a_ray_worker_is_an_actor_on_a_node(ray_pair):
    bob, _ = ray_pair
    assert bob.kind == "ray" and bob.state == "connected" and not bob.restarted
    assert bob.node == "127.0.0.1"  # a local Ray listens on loopback only
    assert bob.host and bob.pid and len(bob.node_id) > 20 and len(bob.actor_id) > 20
    assert bob.ping()
    assert sy.get_worker("bob") is bob
    assert repr(bob) == "<RayWorker 'bob' on 127.0.0.1: connected>"


def test_move_between_ray_workers_goes_actor_to_actor(ray_pair, monkeypatch):
    bob, alice = ray_pair
    settle(bob, alice)
    x = torch.randn(2**20)  # 4 MiB
    p = x.send(bob)
    received = []  # the size of every frame of every reply this process reads
    real = ray_worker.RayTransport._receive_frame

    def spy(self):
        frame = real(self)
        received.append(len(memoryview(frame)))
        return frame

    monkeypatch.setattr(ray_worker.RayTransport, "_receive_frame", spy)
    monkeypatch.setattr(bob, "_copy_out", lambda *a: pytest.fail("the move went through the client"))
    monkeypatch.setattr(bob, "_fetch", lambda *a: pytest.fail("the move went through the client"))
    q = p.move(alice)
    monkeypatch.undo()
    assert received and max(received) < 1000  # only small replies reached this process
    assert q.location is alice and q.shape == x.shape and q.dtype == x.dtype
    assert [o["id"] for o in bob.summary()] == [] and [o["id"] for o in alice.summary()] == [q.id_at_location]
    with pytest.raises(ObjectNotFoundError):
        p.get()
    assert torch.equal(q.get(), x)


def test_an_op_on_another_workers_object_goes_actor_to_actor(ray_pair, fresh_worker, kill_actor, monkeypatch):
    """submit_run_from (FedAvg's streamed sum): alice adds bob's tensor into her own, the bytes
    going actor to actor, never through this process; bob's copy stays unless it is moved; a
    source that died is named."""
    bob, alice = ray_pair
    settle(bob, alice)
    x = torch.randn(2**18)  # 1 MiB
    term, acc = x.send(bob), torch.ones(2**18).send(alice)
    received = []
    real = ray_worker.RayTransport._receive_frame

    def spy(self):
        frame = real(self)
        received.append(len(memoryview(frame)))
        return frame

    monkeypatch.setattr(ray_worker.RayTransport, "_receive_frame", spy)
    p = alice.submit_run_from(bob, term.id_at_location, "aten.add_.Tensor", [acc._ref, None], slot=1,
                              keep_source=True)
    assert p.result() is not None
    monkeypatch.undo()
    assert received and max(received) < 1000  # only small replies reached this process
    assert torch.equal(acc.clone().get(), x + 1) and len(bob.objects) == 1
    moved = alice.submit_run_from(bob, term.id_at_location, "aten.mul_.Tensor", [acc._ref, None], slot=1)
    moved.result()
    assert torch.equal(acc.clone().get(), (x + 1) * x) and len(bob.objects) == 0  # it left bob
    with pytest.raises(RemoteError, match="could not send it: ObjectNotFoundError"):
        alice.submit_run_from(bob, term.id_at_location, "aten.add_.Tensor", [acc._ref, None], slot=1).result()
    assert alice.submit_run_from(sy.VirtualWorker("dave"), 1, "aten.add_.Tensor", [acc._ref, None], slot=1) is None
    sy.get_worker("dave").close()
    carol = fresh_worker("carol_src")
    gone = torch.ones(2**18).send(carol)
    kill_actor(carol.actor)
    dead = alice.submit_run_from(carol, gone.id_at_location, "aten.add_.Tensor", [acc._ref, None], slot=1)
    after = acc.clone()  # in flight behind it: answered as usual (one request failed, not alice)
    with pytest.raises(RemoteError, match="Ray worker 'carol_src'.*its actor died") as info:
        dead.result()
    assert info.value.remote_type == "MoveSourceError" and carol.state == "dead"
    assert alice.state == "connected" and torch.equal(after.get(), (x + 1) * x)
    del term, acc, gone
    settle(bob, alice)


def test_messages_to_the_actor_are_wire_bytes_only(ray_pair):
    """Whatever reaches the actor is decoded by the wire format: a pickled-looking object, a
    dict or garbage gets an error reply, and the worker lives on."""
    import ray

    bob, _ = ray_pair
    for message in (b"garbage", {"c": "run", "op": "os.system"}, [b"SY", "x"], 42):
        reply = ray_host.unpack(ray.get(bob.actor.call.remote(message)), 2**20)
        assert reply["err"]["t"] == "WireError"
    for route, error in (({"@w": "mallory", "@s": bob.session}, "hosts bob, not 'mallory'"),
                         ({"@w": "bob", "@s": "short"}, "a session id is")):
        message = encode_bytes({"c": "ping", "r": 1, **route})
        reply = ray_host.unpack(ray.get(bob.actor.call.remote(message)), 2**20)
        assert reply["err"]["t"] == "SyftError" and error in reply["err"]["m"]
    source = ray.put(ray_host._error(0, ValueError("x")))  # not a fetch's reply: refused, nothing runs
    for msg in ({"c": "run", "op": "aten.add_.Tensor", "a": [1, 2], "k": None, "@m": 1},
                {"c": "run", "op": "aten.add_.Tensor", "a": [1, None], "k": None, "@m": 5},
                {"c": "store", "@m": 0}):
        message = encode_bytes({"r": 1, "@w": "bob", "@s": bob.session, **msg})
        reply = ray_host.unpack(ray.get(bob.actor.receive.remote(message, source)), 2**20)
        assert reply["err"]["t"] == "SyftError" and "receive takes" in reply["err"]["m"]
    assert bob.ping() and bob.state == "connected"


def double_and_sum(x):
    return x * 2, x.sum()


def test_several_commands_in_one_actor_call(ray_pair, monkeypatch):
    """submit_calls (a FedAvg client's round: its inputs, the plan run, the fetches of the plan's
    outputs) is one actor call: the commands run in order as if sent one by one; a fetch names a
    plan output by its index (@o); a reply handed elsewhere goes into alice's sum actor to actor;
    a plan run that fails makes its fetches fail, nothing is left behind, and bob answers on."""
    bob, alice = ray_pair
    settle(bob, alice)
    plan = sy.plan(double_and_sum)
    plan.build(torch.ones(3))
    pp = plan.send(bob)
    x, acc = torch.tensor([1.0, 2.0, 3.0]).send(bob), torch.ones(3).send(alice)
    before = len(bob.objects)
    calls = []
    real = ray_worker.RayTransport.send_calls
    monkeypatch.setattr(ray_worker.RayTransport, "send_calls",
                        lambda self, msgs, elsewhere: calls.append(len(msgs)) or real(self, msgs, elsewhere))
    pending, (term,) = bob.submit_calls([
        {"c": "run", "op": "aten.add_.Tensor", "a": [x._ref, 1.0], "k": None},
        {"c": "run_plan", "id": pp._ref.id, "a": [x.id_at_location]},
        {"c": "fetch", "@o": 1, "keep": False},
        {"c": "fetch", "@o": 0, "keep": False},
    ], elsewhere=1)
    add = alice.submit_run_from(bob, None, "aten.add_.Tensor", [acc._ref, None], slot=1, ref=term)
    results = sy.workers.gather(pending)
    assert add.result() is not None and calls == [4]
    assert torch.equal(results[2], torch.tensor(9.0))  # (x + 1).sum(), x + 1 = [2, 3, 4]
    assert torch.equal(acc.clone().get(), torch.tensor([5.0, 7.0, 9.0]))  # 1 + 2 * (x + 1)
    assert len(bob.objects) == before  # the plan's outputs left with their fetches
    pending, (term,) = bob.submit_calls([
        {"c": "run_plan", "id": pp._ref.id, "a": [acc.id_at_location]},  # not bob's: the run fails
        {"c": "fetch", "@o": 0, "keep": False},
        {"c": "fetch", "@o": 1, "keep": False},
    ], elsewhere=1)
    add = alice.submit_run_from(bob, None, "aten.add_.Tensor", [acc._ref, None], slot=1, ref=term)
    with pytest.raises(ObjectNotFoundError):
        pending[0].result()
    with pytest.raises(RemoteError, match="the plan run before this fetch failed"):
        pending[1].result()
    with pytest.raises(RemoteError, match="could not send it: SyftError: the plan run before this fetch failed"):
        add.result()
    assert torch.equal(acc.clone().get(), torch.tensor([5.0, 7.0, 9.0]))  # unchanged
    assert len(bob.objects) == before and bob.ping()
    assert torch.equal(x.clone().get(), torch.tensor([2.0, 3.0, 4.0]))
    del x, acc, pp, term
    settle(bob, alice)
