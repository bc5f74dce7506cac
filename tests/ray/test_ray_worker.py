"""A RayWorker is used exactly like a VirtualWorker or a WebSocketWorker: pointers, ops, get and
move, chains, tags and search, plans, sy.batch, autograd, the allow-list."""
import copy
import gc

import pytest
import torch
from torch import nn

import syft_lab as sy
from syft_lab.errors import ObjectNotFoundError, RemoteError, SyftError
from syft_lab.ray import host as ray_host
from syft_lab.ray import worker as ray_worker
from syft_lab.wire.allowlist import OpNotAllowedError
from syft_lab.commands import Ref
from syft_lab.wire.format import encode_bytes
from syft_lab.workers.service import WorkerService

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


def test_send_get_round_trip(ray_pair):
    bob, _ = ray_pair
    for t in [torch.tensor([1.0, 2.0, 3.0]), torch.arange(12).reshape(3, 4), torch.tensor(True),
              torch.randn(2, 3, dtype=torch.float64), torch.randn(4).to(torch.bfloat16), torch.randn(2) + 1j,
              torch.randn(3, 4).t()]:  # non-contiguous
        p = bob.send(t)
        assert isinstance(p, sy.PointerTensor) and p.location is bob
        assert p.shape == t.shape and p.dtype == t.dtype
        back = p.get()
        assert torch.equal(back, t) and back is not t
    with pytest.raises(ObjectNotFoundError):
        p.get()  # a pointer is stale after get


def test_large_tensors_travel_as_buffers_and_keep_their_values(ray_pair):
    bob, _ = ray_pair
    x = torch.randn(3 * 2**20 + 5)  # streamed: more than one 4 MiB chunk
    p = x.send(bob)
    assert torch.equal((p * 1).get(), x)
    assert torch.equal(p.get(), x)


def test_ops_on_pointers(ray_pair):
    bob, _ = ray_pair
    a, b = torch.randn(3, 4), torch.randn(4, 2)
    pa, pb = a.send(bob), b.send(bob)
    assert torch.allclose((pa @ pb).get(), a @ b)
    assert torch.allclose((pa * 2 + 1).get(), a * 2 + 1)
    assert torch.allclose(pa.sum(dim=1, keepdim=True).get(), a.sum(dim=1, keepdim=True))
    values, idx = pa.max(dim=1)  # a tuple result
    assert torch.equal(values.get(), a.max(dim=1).values) and torch.equal(idx.get(), a.max(dim=1).indices)
    nz = (pa > 0).nonzero()  # data-dependent shape: the worker's answer
    assert nz.shape == (a > 0).nonzero().shape
    c = torch.zeros(2).send(bob)
    same = c.add_(1)  # in place: the same pointer comes back
    assert same is c and torch.equal(c.get(), torch.ones(2))
    with pytest.raises(SyftError, match="never leave"):
        pa.sum().item()


def test_remote_error_names_type_and_message(ray_pair):
    bob, _ = ray_pair
    p, q = torch.ones(2, 3).send(bob), torch.ones(5, 5).send(bob)
    with pytest.raises(RemoteError) as info:
        p @ q
    e = info.value
    assert e.worker_id == "bob" and e.remote_type == "RuntimeError"
    assert "shapes cannot be multiplied" in e.remote_message
    assert "Traceback" not in str(e) and ".py" not in str(e)
    assert bob.state == "connected" and torch.equal(p.get(), torch.ones(2, 3))


def test_the_allow_list_refuses_a_forbidden_op_with_the_same_error_as_elsewhere(ray_pair):
    bob, _ = ray_pair
    carol = sy.VirtualWorker("carol")
    try:
        with pytest.raises(OpNotAllowedError) as local:
            torch.ops.aten.resize_(torch.ones(3).send(carol), [100])
    finally:
        carol.close()
    p = torch.ones(3).send(bob)
    with pytest.raises(OpNotAllowedError) as remote:  # caught as in process: the same class
        torch.ops.aten.resize_(p, [100])
    e = remote.value
    assert isinstance(e, RemoteError) and e.worker_id == "bob" and e.remote_type == "OpNotAllowedError"
    assert "aten.resize_.default" in e.remote_message and "aten.resize_.default" in str(local.value)
    # word for word what a websocket worker answers: the same service refuses it
    service = WorkerService("ws")
    x = service.handle({"r": 1, "c": "store", "o": torch.ones(3)})[0]["ok"]
    err = service.handle({"r": 2, "c": "run", "op": "aten.resize_.default", "a": [Ref(x), [100]], "k": None})[0]["err"]
    assert (e.remote_type, e.remote_message) == (err["t"], err["m"])
    for name in ("os.system", "builtins.eval", "aten.from_file.default"):  # bypassing the client's checks
        with pytest.raises(RemoteError) as info:
            bob._request({"c": "run", "op": name, "a": ["touch /tmp/syft-lab-ray-x"], "k": None})
        assert info.value.remote_type == "OpNotAllowedError"
    assert torch.equal(p.get(), torch.ones(3))


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


def test_move_keeps_requires_grad_and_a_copy_keeps_the_source(ray_pair):
    bob, alice = ray_pair
    w = torch.tensor([1.0, 2.0], requires_grad=True).send(bob)
    (w * 3).sum().backward()
    m = w.move(alice)  # a leaf's gradient moves with it
    assert m.requires_grad and m.location is alice
    assert torch.equal(m.grad.get(), torch.tensor([3.0, 3.0]))
    assert torch.equal(m.get(), torch.tensor([1.0, 2.0]))
    settle(bob, alice)


def test_move_between_virtual_and_ray_workers(ray_pair):
    bob, _ = ray_pair
    carol = sy.VirtualWorker("carol")
    try:
        p = torch.arange(4.0).send(carol)
        q = p.move(bob)
        assert q.location is bob and len(carol.objects) == 0
        r = q.move(carol)
        assert r.location is carol and torch.equal(r.get(), torch.arange(4.0))
    finally:
        carol.close()


def test_pointer_to_pointer_is_refused_clearly(ray_pair):
    bob, alice = ray_pair
    p = torch.ones(2).send(alice)
    with pytest.raises(SyftError, match=r"cannot hold a pointer to .*ptr\.move\(bob\)"):
        bob.send(p)


def test_logging_chain_travels_and_logs_remotely(ray_pair):
    bob, _ = ray_pair
    lt = sy.LoggingTensor(torch.tensor([1.0, 2.0])) + 1
    r = lt.send(bob) * 3
    nodes = sy.chain(r).nodes
    assert [n["kind"] for n in nodes] == ["pointer", "logging", "tensor"]
    assert nodes[2]["preview"] is None  # values stay on the worker
    back = r.get()
    assert isinstance(back, sy.LoggingTensor) and back.log.ops() == ["aten.add.Tensor", "aten.mul.Tensor"]
    assert torch.equal(back.child, torch.tensor([6.0, 9.0]))


def test_tags_search_load_and_unload(ray_pair):
    bob, _ = ray_pair
    x = torch.tensor([1.0, 2.0]).tag("#ray-data", "#ray-x").describe("some data on ray")
    p = x.send(bob)
    found = bob.search("#ray-data")
    assert len(found) == 1 and found[0].id_at_location == p.id_at_location and not found[0].owning
    assert found[0].tags == {"#ray-data", "#ray-x"} and found[0].description == "some data on ray"
    assert bob.search("#ray-nothing") == []
    del found
    settle(bob)
    assert torch.equal(p.get(), x)  # dropping search results deleted nothing
    held = bob.load(torch.arange(3.0), tags=("#ray-held",), description="held by bob")
    del held
    settle(bob)
    (again,) = bob.search("#ray-held")  # held data outlives every pointer
    assert torch.equal((again + 0).get(), torch.arange(3.0))
    bob.unload(again)
    assert bob.search("#ray-held") == []


def test_garbage_collection(ray_pair):
    bob, _ = ray_pair
    settle(bob)
    p = torch.ones(3).send(bob)
    for _ in range(30):
        p = p + 1  # every intermediate pointer is dropped; releases travel with the next call
    settle(bob)
    assert len(bob.objects) == 1
    assert torch.equal(p.get(), torch.full((3,), 31.0))
    q = torch.ones(2).send(bob)
    q2 = copy.deepcopy(q)  # a copy is a new remote object
    assert q2.id_at_location != q.id_at_location
    del q, q2
    settle(bob)
    assert len(bob.objects) == 0


def test_closing_a_client_releases_what_it_stored(ray_pair, ray_hosts):
    bob, _ = ray_pair
    other = ray_worker.RayWorker("bob", _host=ray_hosts["bob"])  # a second client of bob's actor
    kept = torch.ones(2).send(other)
    assert len(bob.objects) == 1
    other.close()
    assert len(bob.objects) == 0 and other.state == "closed"
    with pytest.raises(SyftError, match="was closed"):
        kept.get()
    del kept
    sy.workers.registry.register(bob)  # the second client had taken bob's place in the registry


def test_plans_are_sent_run_searched_and_fetched(ray_pair):
    bob, _ = ray_pair

    @sy.plan
    def double_abs(x):
        return 2 * x.abs()

    double_abs.build(torch.tensor([1.0, -2.0])).tag("#ray-step")
    pp = double_abs.send(bob)
    assert isinstance(pp, sy.PlanPointer) and pp.id_at_location in bob.objects
    x = torch.tensor([3.0, -4.0]).send(bob)
    assert torch.equal(pp(x).get(), torch.tensor([6.0, 8.0]))
    found = bob.search("#ray-step")
    assert len(found) == 1 and isinstance(found[0], sy.PlanPointer)
    back = pp.get()
    assert isinstance(back, sy.Plan) and back.tags == {"#ray-step"}
    assert torch.equal(back(torch.tensor([-1.0, 2.0])), torch.tensor([2.0, 4.0]))
    assert pp.id_at_location not in bob.objects
    del found
    settle(bob)


def test_batch_sends_one_graph(ray_pair, monkeypatch):
    bob, _ = ray_pair
    x, w = torch.randn(2, 3), torch.randn(3, 4)
    px, pw = x.send(bob), w.send(bob)
    sent = []  # one actor call per request
    real = bob.transport.send

    def spy(msg, **kw):
        sent.append(msg["c"])
        return real(msg, **kw)

    monkeypatch.setattr(bob.transport, "send", spy)
    with sy.batch(bob):
        h = (px @ pw).relu()
        out = h.sum()
        assert out.shape == () and sy.chain(out).nodes[1]["kind"] == "pending"
    monkeypatch.undo()
    assert sent == ["run_graph"]
    assert torch.allclose(out.get(), (x @ w).relu().sum(), atol=1e-6)
    assert torch.allclose(h.get(), (x @ w).relu())


def test_a_model_trains_on_a_ray_worker_as_locally(ray_pair):
    bob, _ = ray_pair
    torch.manual_seed(0)
    x, y = torch.randn(16, 3), torch.randn(16, 1)
    local, remote = nn.Linear(3, 1), nn.Linear(3, 1)
    remote.load_state_dict(local.state_dict())
    remote.send(bob)
    px, py = x.send(bob), y.send(bob)
    for model, (xx, yy) in ((local, (x, y)), (remote, (px, py))):
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(3):
            opt.zero_grad()
            ((model(xx) - yy) ** 2).mean().backward()
            opt.step()
    remote.get()
    for a, b in zip(local.parameters(), remote.parameters()):
        assert torch.allclose(a, b, atol=1e-6)
    del px, py, opt
    settle(bob)


def test_the_world_shows_ray_workers(ray_pair):
    bob, alice = ray_pair
    p = torch.ones(2).send(bob)
    lanes = {lane["id"]: lane for lane in sy.world({"p": p})["workers"]}
    assert lanes["bob"]["kind"] == "ray" and lanes["bob"]["state"] == "connected"
    assert lanes["bob"]["node"] == "127.0.0.1"  # where Ray placed it (the views group lanes by node)
    assert [o["id"] for o in lanes["bob"]["objects"]] == [p.id_at_location]
    (mine,) = [o for o in lanes["me"]["objects"] if o.get("location") == "bob"]
    assert mine["names"] == ["p"] and mine["id_at_location"] == p.id_at_location
    assert lanes["alice"]["objects"] == [] and lanes["alice"]["kind"] == "ray"
    assert "bob (ray) [connected]" in repr(sy.world({}))


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
    assert bob.ping() and bob.state == "connected"
