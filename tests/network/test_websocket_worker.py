"""A WebSocketWorker is used exactly like a VirtualWorker, against real worker processes."""
import copy
import gc

import pytest
import torch
from torch import nn

import syft_lab as sy
from syft_lab.errors import ObjectNotFoundError, RemoteError, SyftError

pytestmark = pytest.mark.network


def settle(*workers):
    """Collect dropped pointers and send their queued releases."""
    gc.collect()
    for w in workers:
        w.flush()


def test_send_get_round_trip(remote):
    bob, _ = remote
    for t in [torch.tensor([1.0, 2.0, 3.0]), torch.arange(12).reshape(3, 4), torch.tensor(True),
              torch.randn(2, 3, dtype=torch.float64), torch.randn(4).to(torch.bfloat16), torch.randn(2) + 1j]:
        p = bob.send(t)
        assert isinstance(p, sy.PointerTensor) and p.location is bob
        assert p.shape == t.shape and p.dtype == t.dtype
        back = p.get()
        assert torch.equal(back, t) and back is not t
    with pytest.raises(ObjectNotFoundError):
        p.get()  # a pointer is stale after get


def test_x_send_leaves_x_alone_and_counts(remote):
    bob, _ = remote
    settle(bob)
    before = len(bob.objects)
    x = torch.ones(3)
    p = x.send(bob)
    assert torch.equal(x, torch.ones(3)) and len(bob.objects) == before + 1
    p.get()
    assert len(bob.objects) == before


def test_ops_on_pointers(remote):
    bob, _ = remote
    a, b = torch.randn(3, 4), torch.randn(4, 2)
    pa, pb = a.send(bob), b.send(bob)
    assert torch.allclose((pa @ pb).get(), a @ b)
    assert torch.allclose((pa * 2 + 1).get(), a * 2 + 1)
    assert torch.allclose(pa.sum(dim=1, keepdim=True).get(), a.sum(dim=1, keepdim=True))
    assert pa.to(torch.float64).get().dtype == torch.float64
    assert torch.allclose((pa + torch.tensor(2.0)).get(), a + 2)  # a 0-dim local constant joins
    values, idx = pa.max(dim=1)  # a tuple result
    assert torch.equal(values.get(), a.max(dim=1).values) and torch.equal(idx.get(), a.max(dim=1).indices)
    nz = (pa > 0).nonzero()  # data-dependent shape: the worker's answer
    assert nz.shape == (a > 0).nonzero().shape
    c = torch.zeros(2).send(bob)
    same = c.add_(1)  # in place: the same pointer comes back
    assert same is c and torch.equal(c.get(), torch.ones(2))
    with pytest.raises(SyftError, match="never leave"):
        pa.sum().item()


def test_remote_error_names_type_and_message(remote):
    bob, _ = remote
    p, q = torch.ones(2, 3).send(bob), torch.ones(5, 5).send(bob)
    with pytest.raises(RemoteError) as info:
        p @ q
    e = info.value
    assert e.worker_id == "bob" and e.remote_type == "RuntimeError"
    assert "shapes cannot be multiplied" in e.remote_message
    assert "Traceback" not in str(e) and ".py" not in str(e)


def test_move_between_two_remote_workers(remote):
    bob, alice = remote
    settle(bob, alice)
    nb, na = len(bob.objects), len(alice.objects)
    p = torch.arange(5.0).send(bob)
    q = p.move(alice)
    assert q.location is alice
    assert len(bob.objects) == nb and len(alice.objects) == na + 1
    with pytest.raises(ObjectNotFoundError):
        p.get()
    assert torch.equal(q.get(), torch.arange(5.0))


def test_move_between_virtual_and_remote(remote):
    bob, _ = remote
    carol = sy.VirtualWorker("carol")
    try:
        p = torch.arange(4.0).send(carol)
        q = p.move(bob)
        assert q.location is bob and len(carol.objects) == 0
        r = q.move(carol)
        assert r.location is carol and torch.equal(r.get(), torch.arange(4.0))
    finally:
        carol.close()


def test_pointer_to_pointer_is_refused_clearly_for_remote_workers(remote):
    bob, alice = remote
    p = torch.ones(2).send(alice)
    rule = r"cannot hold a pointer to an object on worker 'alice': a worker stores a pointer only to a worker it can itself reach.*ptr.move\(bob\)"
    with pytest.raises(SyftError, match=rule):
        bob.send(p)
    with pytest.raises(SyftError, match=rule):  # a chain over a pointer: the same rule
        bob.send(sy.LoggingTensor(p))
    assert bob.ping() and len(bob.objects) == 0  # refused, nothing kept, the connection lives on
    # a virtual worker may hold a pointer to a remote object (the reference is counted there)
    carol = sy.VirtualWorker("carol")
    try:
        pp = carol.send(p)
        del p
        settle(alice)
        inner = pp.get()  # the pointer carol held, to alice's object
        assert torch.equal(inner.get(), torch.ones(2))
    finally:
        carol.close()


def test_logging_chain_travels_and_logs_remotely(remote):
    bob, _ = remote
    lt = sy.LoggingTensor(torch.tensor([1.0, 2.0]))
    lt2 = lt + 1
    p = lt2.send(bob)
    r = p * 3
    nodes = sy.chain(r).nodes
    assert [n["kind"] for n in nodes] == ["pointer", "logging", "tensor"]
    assert nodes[2]["preview"] is None  # values stay on the worker
    back = r.get()
    assert isinstance(back, sy.LoggingTensor)
    assert back.log.ops() == ["aten.add.Tensor", "aten.mul.Tensor"]
    assert torch.equal(back.child, torch.tensor([6.0, 9.0]))


def test_tags_and_search(remote):
    bob, _ = remote
    x = torch.tensor([1.0, 2.0]).tag("#net-data", "#net-x").describe("some network data")
    p = x.send(bob)
    found = bob.search("#net-data")
    assert len(found) == 1 and found[0].id_at_location == p.id_at_location and not found[0].owning
    assert found[0].shape == (2,) and found[0].dtype == torch.float32
    assert bob.search("#net-data", "#net-x")[0].id_at_location == p.id_at_location
    assert bob.search("network data")[0].id_at_location == p.id_at_location
    assert bob.search("#net-nothing") == []
    del found
    settle(bob)
    assert torch.equal(p.get(), x)  # dropping search results deleted nothing
    assert bob.search("#net-data") == []


def test_garbage_collection(remote):
    bob, _ = remote
    settle(bob)
    before = len(bob.objects)
    p = torch.ones(3).send(bob)
    for _ in range(50):
        p = p + 1  # every intermediate pointer is dropped
    assert len(bob.objects) <= before + 3
    settle(bob)
    assert len(bob.objects) == before + 1
    assert torch.equal(p.get(), torch.full((3,), 51.0))
    q = torch.ones(2).send(bob)
    q2 = copy.deepcopy(q)  # a copy is a new remote object
    del q, q2
    settle(bob)
    assert len(bob.objects) == before


def test_release_queued_inside_another_request_is_not_reentrant(remote):
    bob, _ = remote
    settle(bob)
    before = len(bob.objects)
    victims = [torch.ones(1).send(bob) for _ in range(5)]
    ids = [v.id_at_location for v in victims]
    ws = bob.transport.ws
    real_send = ws.send

    def send_and_collect(frame):  # a GC pass in the middle of a request
        victims.clear()
        gc.collect()
        return real_send(frame)

    ws.send = send_and_collect
    try:
        bob.ping()
    finally:
        ws.send = real_send
    assert set(ids) <= set(bob._releases)
    bob.flush()
    assert len(bob.objects) == before


def test_world_shows_remote_workers_and_state(remote):
    bob, alice = remote
    p = torch.ones(2).send(bob)
    w = sy.world()
    lanes = {lane["id"]: lane for lane in w["workers"]}
    assert lanes["bob"]["kind"] == "websocket" and lanes["bob"]["state"] == "connected"
    assert any(o["id"] == p.id_at_location for o in lanes["bob"]["objects"])
    assert "bob (websocket) [connected]" in repr(w)


def test_autograd_through_remote_pointers(remote):
    bob, _ = remote
    torch.manual_seed(1)
    x, w = torch.randn(5, 3), torch.randn(3, 2, requires_grad=True)
    loss = (x @ w).relu().pow(2).mean()
    loss.backward()
    px = x.send(bob)
    pw = bob.send(w.detach(), requires_grad=True)
    ploss = (px @ pw).relu().pow(2).mean()
    ploss.backward()
    assert torch.allclose(ploss.get(), loss.detach())
    assert torch.allclose(pw.grad.get(), w.grad, atol=1e-6)


def _data(seed, n=32):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 4, generator=g)
    y = (x.sum(dim=1) > 0).long()
    return x, y


def _model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))


def _train(model, batches, rounds=3, steps=4):
    """Federated averaging: each round trains a copy on each owner's batch, then averages."""
    for _ in range(rounds):
        states = []
        for where, (x, y) in batches:
            m = copy.deepcopy(model)
            if where is not None:
                m.send(where)
            opt = torch.optim.SGD(m.parameters(), lr=0.1)
            for _ in range(steps):
                opt.zero_grad()
                loss = nn.functional.cross_entropy(m(x), y)
                loss.backward()
                opt.step()
            if where is not None:
                m.get()
            states.append(m.state_dict())
        avg = {k: sum(s[k] for s in states) / len(states) for k in states[0]}
        model.load_state_dict(avg)
    return model


def test_federated_learning_with_two_workers_equals_local(remote):
    bob, alice = remote
    (xb, yb), (xa, ya) = _data(1), _data(2)
    local = _train(_model(), [(None, (xb, yb)), (None, (xa, ya))])
    settle(bob, alice)
    nb, na = len(bob.objects), len(alice.objects)
    fed = _train(_model(), [(bob, (xb.send(bob), yb.send(bob))), (alice, (xa.send(alice), ya.send(alice)))])
    for (k, a), (_, b) in zip(local.state_dict().items(), fed.state_dict().items()):
        assert torch.allclose(a, b, atol=1e-5), k
    settle(bob, alice)
    assert len(bob.objects) == nb and len(alice.objects) == na  # nothing leaked


def test_large_tensor_streams(remote):
    bob, alice = remote
    t = torch.randn(5 * 2**20)  # 20 MiB: 5 chunks each way
    p = t.send(bob)
    q = p.move(alice)
    assert torch.equal(q.get(), t)


def test_worker_id_must_match(worker_procs, token):
    from syft_lab.workers.websocket import WebSocketWorker

    with pytest.raises(SyftError, match="not 'carol'"):
        WebSocketWorker(worker_procs["bob"].url, id="carol", token=token)
    w = WebSocketWorker(worker_procs["bob"].url, token=token)  # the id comes from the worker
    assert w.id == "bob"
    w.close()
    assert w.state == "closed"


# --- plans and sy.batch on remote workers ---------------------------------------------------

def test_plans_are_sent_run_searched_and_fetched_remotely(remote):
    bob, _ = remote

    @sy.plan
    def double_abs(x):
        return 2 * x.abs()

    double_abs.build(torch.tensor([1.0, -2.0])).tag("#net-step")
    pp = double_abs.send(bob)
    assert isinstance(pp, sy.PlanPointer) and pp.id_at_location in bob.objects
    x = torch.tensor([3.0, -4.0]).send(bob)
    assert torch.equal(pp(x).get(), torch.tensor([6.0, 8.0]))
    found = bob.search("#net-step")
    assert len(found) == 1 and isinstance(found[0], sy.PlanPointer)
    assert [n["kind"] for n in sy.chain(pp).nodes] == ["pointer", "plan"]
    back = pp.get()
    assert isinstance(back, sy.Plan) and back.tags == {"#net-step"}
    assert torch.equal(back(torch.tensor([-1.0, 2.0])), torch.tensor([2.0, 4.0]))
    assert pp.id_at_location not in bob.objects


def test_training_plan_with_state_on_two_remote_workers_equals_local(remote):
    bob, alice = remote
    g = torch.Generator().manual_seed(0)
    X = torch.randn(40, 3, generator=g)
    Y = X @ torch.tensor([[1.0], [-2.0], [0.5]]) + 0.3

    def run(workers):
        torch.manual_seed(1)
        model = nn.Linear(3, 1)

        def train_step(x, y):
            loss = ((model(x) - y) ** 2).mean()
            grads = torch.autograd.grad(loss, list(model.parameters()))
            with torch.no_grad():
                for p, gr in zip(model.parameters(), grads):
                    p.sub_(0.1 * gr)
            return loss

        step = sy.plan(train_step, state=model).build(X[:20], Y[:20])
        losses = []
        if workers is None:
            for _ in range(5):
                for i in range(2):
                    losses.append(step(X[i * 20:(i + 1) * 20], Y[i * 20:(i + 1) * 20]).item())
            return model, losses
        data = [(w, X[i * 20:(i + 1) * 20].send(w), Y[i * 20:(i + 1) * 20].send(w)) for i, w in enumerate(workers)]
        pointers = {w: step.send(w) for w in workers}
        for _ in range(5):
            for w, x, y in data:
                model.send(w)
                loss = pointers[w](x, y)  # one message: forward, grad and update on the worker
                model.get()
                losses.append(loss.get().item())
        return model, losses

    local_model, local_losses = run(None)
    remote_model, remote_losses = run([bob, alice])
    assert remote_losses == pytest.approx(local_losses, rel=1e-5)
    for p, q in zip(local_model.parameters(), remote_model.parameters()):
        assert torch.allclose(p, q, atol=1e-6)


def test_batch_sends_one_graph_to_a_remote_worker(remote):
    bob, _ = remote
    x, w = torch.randn(2, 3), torch.randn(3, 4)
    px, pw = x.send(bob), w.send(bob)
    sent = []
    real = bob._request

    def spy(header, **kw):
        sent.append(header["c"])
        return real(header, **kw)

    bob._request = spy
    try:
        with sy.batch(bob):
            h = (px @ pw).relu()
            out = h.sum()
            assert out.shape == () and sy.chain(out).nodes[1]["kind"] == "pending"
    finally:
        del bob._request
    assert sent == ["run_graph"]
    assert torch.allclose(out.get(), (x @ w).relu().sum(), atol=1e-6)
    assert torch.allclose(h.get(), (x @ w).relu())


def test_requests_to_two_worker_processes_are_in_flight_together(remote):
    bob, alice = remote
    aten = torch.ops.aten
    a, b = torch.arange(4.0).send(bob), torch.arange(4.0).send(alice)
    pending = [sy.workers.submit(aten.mul.Tensor, (a, 2.0)), sy.workers.submit(aten.mul.Tensor, (b, 3.0)),
               sy.workers.submit(aten.view.default, (a, [3]))]  # this one fails on bob
    assert not any(p.done for p in pending)  # all three sent, no reply read yet
    with pytest.raises(sy.RemoteError, match="RuntimeError"):
        sy.workers.gather(pending)
    x, y = pending[0].result(), pending[1].result()
    assert x.location is bob and y.location is alice
    assert torch.equal(x.get(), torch.arange(4.0) * 2) and torch.equal(y.get(), torch.arange(4.0) * 3)
    assert bob.ping() and alice.ping()  # nothing left unread on either connection


def test_a_kept_plan_outlives_its_session_as_loaded_data_does(worker_procs, token):
    from syft_lab.workers.websocket import WebSocketWorker

    @sy.plan(args_shape=[(1,)])
    def add_two(x):
        return x + 2

    first = WebSocketWorker(worker_procs["bob"].url, id="bob", token=token, progress=False)
    add_two.tag("#add_two_kept").send(first, keep=True)
    first.close()  # the session ends: a plan only its pointers owned would be released here
    second = WebSocketWorker(worker_procs["bob"].url, id="bob", token=token, progress=False)
    try:
        (found,) = second.search("#add_two_kept")
        assert float(found(torch.ones(1).send(second)).get()) == 3.
        second.unload(found)
        assert second.search("#add_two_kept") == []
        loaded = second.load(add_two.tag("#add_two_loaded"))  # bob.load(plan): the same choice
        assert float(loaded(torch.ones(1).send(second)).get()) == 3.
        second.unload(loaded)
        with pytest.raises(ObjectNotFoundError, match="holds no object with id 123456789"):
            second._hold(123456789)  # a client keeps only what its session holds
    finally:
        second.close()
