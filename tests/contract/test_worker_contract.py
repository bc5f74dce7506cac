"""The worker contract: what "used exactly like any worker" means, for every kind of worker
(tests/contract/kinds.py: a VirtualWorker, a worker process over websockets, a Ray worker).
Each test runs once per kind, on bob, alice and carol of that kind (``world``), and compares
every remote value with the same computation here. What only one kind has (a websocket's
handshake, Ray's placement, faults) is tested beside its transport: tests/network/, tests/ray/."""
import copy
import gc

import pytest
import torch
from torch import nn

import syft_lab as sy
from syft_lab.commands import Ref
from syft_lab.errors import ObjectNotFoundError, RemoteError, SyftError
from syft_lab.wire.allowlist import OpNotAllowedError
from syft_lab.workers.connection import ServiceConnection
from syft_lab.workers.service import Session, WorkerService

from contract.kinds import clients

REMOTE_KINDS = [k for k in ("websocket", "ray")]


def settle(*workers):
    """Collect dropped pointers and send their queued releases."""
    gc.collect()
    for w in workers:
        w.flush()


# --- send, get, move, copy ---------------------------------------------------------------------

def test_send_get_round_trip_keeps_values_dtypes_and_shapes(world):
    bob, _, _ = world
    for t in [torch.tensor([1.0, 2.0, 3.0]), torch.arange(12).reshape(3, 4), torch.tensor(True),
              torch.randn(2, 3, dtype=torch.float64), torch.randn(4).to(torch.bfloat16), torch.randn(2) + 1j,
              torch.randn(3, 4).t()]:  # non-contiguous
        p = bob.send(t)
        assert isinstance(p, sy.PointerTensor) and p.location is bob
        assert p.shape == t.shape and p.dtype == t.dtype and len(bob.objects) == 1
        back = p.get()
        assert torch.equal(back, t) and back is not t and len(bob.objects) == 0
    with pytest.raises(ObjectNotFoundError):
        p.get()  # a pointer is stale after get
    x = torch.ones(3)
    p = x.send(bob)  # x.send(bob) is bob.send(x): x is left alone
    assert torch.equal(x, torch.ones(3)) and sy.get_worker("bob") is bob
    assert torch.equal(p.get(), x)


def test_move_goes_worker_to_worker_and_copy_keeps_the_source(world):
    bob, alice, _ = world
    p = torch.arange(5.0).send(bob)
    q = p.move(alice)
    assert q.location is alice and len(bob.objects) == 0 and len(alice.objects) == 1
    with pytest.raises(ObjectNotFoundError):
        p.get()
    c = q.copy()  # a new object on the same worker
    d = copy.deepcopy(q)
    assert c.location is alice and len({q.id_at_location, c.id_at_location, d.id_at_location}) == 3
    assert torch.equal(c.get(), torch.arange(5.0)) and torch.equal(d.get(), torch.arange(5.0))
    assert torch.equal(q.get(), torch.arange(5.0))
    w = torch.tensor([1.0, 2.0], requires_grad=True).send(bob)
    (w * 3).sum().backward()
    m = w.move(alice)  # a leaf's gradient moves with it
    assert m.requires_grad and m.location is alice and torch.equal(m.grad.get(), torch.tensor([3.0, 3.0]))
    assert torch.equal(m.get(), torch.tensor([1.0, 2.0]))


def test_large_tensors_stream_both_ways_and_between_workers(world):
    bob, alice, _ = world
    x = torch.randn(3 * 2**20 + 5)  # 12 MiB: more than one 4 MiB chunk each way
    p = x.send(bob)
    assert torch.equal((p * 1).get(), x)
    assert torch.equal(p.move(alice).get(), x)


def test_move_between_an_in_process_worker_and_this_kind(world):
    bob, _, _ = world
    dave = sy.VirtualWorker("dave")
    try:
        p = torch.arange(4.0).send(dave)
        q = p.move(bob)
        assert q.location is bob and len(dave.objects) == 0
        r = q.move(dave)
        assert r.location is dave and len(bob.objects) == 0 and torch.equal(r.get(), torch.arange(4.0))
    finally:
        dave.close()


def test_a_pointer_to_a_pointer_is_held_only_where_the_worker_can_reach(world, kind):
    bob, alice, _ = world
    p = torch.ones(2).send(alice)
    if kind == "virtual":  # in process, bob reaches alice: it holds the pointer (PySyft's Part 3)
        pp = bob.send(p)
        assert torch.equal(pp.get().get(), torch.ones(2))
        return
    rule = (r"cannot hold a pointer to an object on worker 'alice': a worker stores a pointer only to a worker "
            r"it can itself reach.*ptr.move\(bob\)")
    with pytest.raises(SyftError, match=rule):
        bob.send(p)
    with pytest.raises(SyftError, match=rule):  # a chain over a pointer: the same rule
        bob.send(sy.LoggingTensor(p))
    assert bob.ping() and len(bob.objects) == 0  # refused, nothing kept, the connection lives on
    assert torch.equal(p.get(), torch.ones(2))


# --- ops, chains, autograd ---------------------------------------------------------------------

def test_ops_on_pointers_give_the_local_values(world):
    bob, _, _ = world
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


def test_a_logging_chain_travels_and_logs_on_the_worker(world):
    bob, _, _ = world
    r = (sy.LoggingTensor(torch.tensor([1.0, 2.0])) + 1).send(bob) * 3
    nodes = sy.chain(r).nodes
    assert [n["kind"] for n in nodes] == ["pointer", "logging", "tensor"]
    assert nodes[2]["preview"] is None  # values stay on the worker
    back = r.get()
    assert isinstance(back, sy.LoggingTensor) and back.log.ops() == ["aten.add.Tensor", "aten.mul.Tensor"]
    assert torch.equal(back.child, torch.tensor([6.0, 9.0]))


def test_autograd_through_pointers_gives_the_local_gradients(world):
    bob, _, _ = world
    torch.manual_seed(1)
    x, w = torch.randn(5, 3), torch.randn(3, 2, requires_grad=True)
    loss = (x @ w).relu().pow(2).mean()
    loss.backward()
    px, pw = x.send(bob), bob.send(w.detach(), requires_grad=True)
    ploss = (px @ pw).relu().pow(2).mean()
    ploss.backward()
    assert torch.allclose(ploss.get(), loss.detach())
    assert torch.allclose(pw.grad.get(), w.grad, atol=1e-6)


def test_a_model_trains_on_the_worker_as_locally(world):
    bob, _, _ = world
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


# --- the op paths issue 22 added last: narrow at a remote start, cov's remote weights, masked ---

def _worker_error(fn):
    """The RemoteError ``fn`` raises: its type, and its message without the worker's name."""
    with pytest.raises(RemoteError) as info:
        fn()
    return info.value.remote_type, info.value.remote_message


def test_narrow_at_a_start_the_worker_holds_is_made_there(world):
    bob, _, _ = world
    reference = sy.VirtualWorker("reference")  # what a VirtualWorker accepts and refuses, word for word
    x = torch.arange(24.).reshape(4, 6)
    p, ref = x.send(bob), x.send(reference)
    for dim, start, length in ((0, 1, 2), (1, 2, 3), (-1, 0, 6)):
        want = x.narrow(dim, torch.tensor(start), length)
        got = p.narrow(dim, torch.tensor(start).send(bob), length)
        assert (got.shape, got.stride()) == (want.shape, want.stride())
        assert torch.equal(got.get(), want)
    torch.testing.assert_close(p.narrow(1, torch.tensor(2), 3).get(), x.narrow(1, 2, 3))  # a local 0-dim start
    here = _worker_error(lambda: p.narrow(1, torch.tensor(5).send(bob), 3))  # the worker's own check
    there = _worker_error(lambda: ref.narrow(1, torch.tensor(5).send(reference), 3))
    assert here == there and here[0] == "RuntimeError"
    assert torch.equal(p.get(), x)
    reference.close()


def test_cov_with_weights_the_worker_holds_runs_there(world):
    bob, _, _ = world
    reference = sy.VirtualWorker("reference")
    torch.manual_seed(0)
    obs = torch.randn(3, 5)
    fw, aw = torch.tensor([1, 2, 1, 3, 1]), torch.rand(5)
    p = obs.send(bob)
    torch.testing.assert_close(torch.cov(p, fweights=fw.send(bob)).get(), torch.cov(obs, fweights=fw))
    torch.testing.assert_close(torch.cov(p, aweights=aw.send(bob)).get(), torch.cov(obs, aweights=aw))
    torch.testing.assert_close(torch.cov(p, correction=0, fweights=fw.send(bob), aweights=aw.send(bob)).get(),
                               torch.cov(obs, correction=0, fweights=fw, aweights=aw))
    negative = torch.tensor([1, -2, 1, 3, 1])
    here = _worker_error(lambda: torch.cov(p, fweights=negative.send(bob)))  # torch's own check, on the worker
    there = _worker_error(lambda: torch.cov(obs.send(reference), fweights=negative.send(reference)))
    assert here == there and "fweights cannot be negative" in here[1]
    with pytest.raises(SyftError, match="mixes data on this process"):  # a local weight is the user's data
        torch.cov(p, fweights=fw)
    reference.close()


@pytest.mark.parametrize("fn", [torch.masked.mean, torch.masked.var, torch.masked.std, torch.masked.sum])
def test_masked_reductions_count_their_elements_on_the_worker(world, fn):
    bob, _, _ = world
    torch.manual_seed(0)
    x = torch.randn(3, 4)
    mask = torch.rand(3, 4) > 0.4
    for args, kwargs in (((1,), {}), ((), {}), ((0,), {"keepdim": True}), ((1,), {"mask": mask})):
        kw = {**kwargs, "mask": kwargs["mask"].send(bob)} if "mask" in kwargs else kwargs
        torch.testing.assert_close(fn(x.send(bob), *args, **kw).get(), fn(x, *args, **kwargs), equal_nan=True)
    with pytest.raises(SyftError, match="mixes data on this process"):  # a local mask is the user's data
        fn(x.send(bob), 1, mask=mask)


# --- plans and sy.batch ------------------------------------------------------------------------

def test_plans_are_sent_run_searched_and_fetched(world):
    bob, _, _ = world

    @sy.plan
    def double_abs(x):
        return 2 * x.abs()

    double_abs.build(torch.tensor([1.0, -2.0])).tag("#contract-step")
    pp = double_abs.send(bob)
    assert isinstance(pp, sy.PlanPointer) and pp.id_at_location in bob.objects
    assert [n["kind"] for n in sy.chain(pp).nodes] == ["pointer", "plan"]
    assert torch.equal(pp(torch.tensor([3.0, -4.0]).send(bob)).get(), torch.tensor([6.0, 8.0]))
    (found,) = bob.search("#contract-step")
    assert isinstance(found, sy.PlanPointer) and found.id_at_location == pp.id_at_location
    back = pp.get()
    assert isinstance(back, sy.Plan) and back.tags == {"#contract-step"}
    assert torch.equal(back(torch.tensor([-1.0, 2.0])), torch.tensor([2.0, 4.0]))
    assert pp.id_at_location not in bob.objects


def test_a_training_plan_with_state_on_two_workers_equals_local(world):
    bob, alice, _ = world
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
            for _ in range(3):
                for i in range(2):
                    losses.append(step(X[i * 20:(i + 1) * 20], Y[i * 20:(i + 1) * 20]).item())
            return model, losses
        data = [(w, X[i * 20:(i + 1) * 20].send(w), Y[i * 20:(i + 1) * 20].send(w)) for i, w in enumerate(workers)]
        pointers = {w: step.send(w) for w in workers}
        for _ in range(3):
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


def test_batch_sends_one_graph(world, monkeypatch):
    bob, _, _ = world
    x, w = torch.randn(2, 3), torch.randn(3, 4)
    px, pw = x.send(bob), w.send(bob)
    sent = []  # the command of every request to bob
    real = bob._request

    def spy(header, **kw):
        sent.append(header["c"])
        return real(header, **kw)

    monkeypatch.setattr(bob, "_request", spy)
    with sy.batch(bob):
        h = (px @ pw).relu()
        out = h.sum()
        assert out.shape == () and sy.chain(out).nodes[1]["kind"] == "pending"
    monkeypatch.undo()
    assert sent == ["run_graph"]
    assert torch.allclose(out.get(), (x @ w).relu().sum(), atol=1e-6)
    assert torch.allclose(h.get(), (x @ w).relu())


# --- search, load, releases ----------------------------------------------------------------------

def test_tags_search_load_and_unload(world):
    bob, _, _ = world
    x = torch.tensor([1.0, 2.0]).tag("#contract-data", "#contract-x").describe("some contract data")
    p = x.send(bob)
    found = bob.search("#contract-data")
    assert len(found) == 1 and found[0].id_at_location == p.id_at_location and not found[0].owning
    assert found[0].tags == {"#contract-data", "#contract-x"} and found[0].description == "some contract data"
    assert found[0].shape == (2,) and found[0].dtype == torch.float32
    assert bob.search("#contract-data", "#contract-x")[0].id_at_location == p.id_at_location
    assert bob.search(["#contract-data", "#contract-x"])[0].id_at_location == p.id_at_location  # PySyft's list
    assert bob.search("contract data")[0].id_at_location == p.id_at_location
    assert bob.search("#contract-nothing") == []
    del found
    settle(bob)
    assert torch.equal(p.get(), x)  # dropping search results deleted nothing
    assert bob.search("#contract-data") == []
    held = bob.load(torch.arange(3.0), tags=("#contract-held",), description="held by bob")
    del held
    settle(bob)
    (again,) = bob.search("#contract-held")  # held data outlives every pointer
    assert torch.equal((again + 0).get(), torch.arange(3.0)) and again.description == "held by bob"
    bob.unload(again)
    assert bob.search("#contract-held") == [] and len(bob.objects) == 0
    with pytest.raises(SyftError, match="unload takes a pointer"):
        bob.unload(torch.ones(1))


def test_dropped_pointers_release_their_objects(world):
    bob, _, _ = world
    p = torch.ones(3).send(bob)
    for _ in range(30):
        p = p + 1  # every intermediate pointer is dropped; releases travel with the next call
    settle(bob)
    assert len(bob.objects) == 1
    assert torch.equal(p.get(), torch.full((3,), 31.0))
    q = torch.ones(2).send(bob)
    q2 = copy.deepcopy(q)  # a copy is a new remote object
    assert q2.id_at_location != q.id_at_location and len(bob.objects) == 2
    del q, q2
    settle(bob)
    assert len(bob.objects) == 0


@pytest.mark.parametrize("kind", [k for k in __import__("contract.kinds").kinds.KINDS if k.values[0] != "virtual"],
                         indirect=True)
def test_closing_a_client_releases_what_its_session_stored(world, kind, request):
    bob, _, _ = world
    (other,) = clients(request, kind, ("bob",))  # a second client of the same worker: its own session
    kept = torch.ones(2).send(other)
    assert len(bob.objects) == 1
    other.close()
    assert len(bob.objects) == 0 and other.state == "closed"
    with pytest.raises(SyftError, match="was closed"):
        kept.get()
    del kept
    sy.workers.registry.register(bob)  # the second client had taken bob's place in the registry


# --- errors and refusals -----------------------------------------------------------------------

def test_an_error_on_the_worker_names_its_type_and_message_and_loses_nothing(world):
    bob, _, _ = world
    p, q = torch.ones(2, 3).send(bob), torch.ones(5, 5).send(bob)
    with pytest.raises(RemoteError) as info:
        p @ q
    e = info.value
    assert isinstance(e, RuntimeError)  # caught as PyTorch users catch it
    assert e.worker_id == "bob" and e.remote_type == "RuntimeError"
    assert "shapes cannot be multiplied" in e.remote_message
    assert "Traceback" not in str(e) and ".py" not in str(e)
    assert torch.equal(p.get(), torch.ones(2, 3)) and len(bob.objects) == 1


def test_the_allow_list_refuses_a_forbidden_op_with_the_same_words_everywhere(world):
    bob, _, _ = world
    p = torch.ones(3).send(bob)
    with pytest.raises(OpNotAllowedError) as info:  # the same class on every kind
        torch.ops.aten.resize_(p, [100])
    # word for word what the service answers: every kind runs the same service
    door = ServiceConnection(WorkerService("reference"), Session())
    x = door.answer({"r": 1, "c": "store", "o": torch.ones(3)})[0]["ok"]
    err = door.answer({"r": 2, "c": "run", "op": "aten.resize_.default", "a": [Ref(x), [100]], "k": None})[0]["err"]
    assert err["t"] == "OpNotAllowedError" and err["m"] in str(info.value)
    for name in ("os.system", "builtins.eval", "aten.from_file.default"):  # bypassing the client's checks
        with pytest.raises(OpNotAllowedError):
            bob._request({"c": "run", "op": name, "a": ["touch /tmp/syft-lab-contract-x"], "k": None})
    assert torch.equal(p.get(), torch.ones(3))


# --- what the views show -----------------------------------------------------------------------

def test_the_world_shows_each_worker_with_its_kind_and_objects(world):
    bob, alice, _ = world
    p = torch.ones(2).send(bob)
    lanes = {lane["id"]: lane for lane in sy.world({"p": p})["workers"]}
    assert lanes["bob"]["kind"] == bob.kind and lanes["bob"]["state"] == bob.state
    assert [o["id"] for o in lanes["bob"]["objects"]] == [p.id_at_location]
    (mine,) = [o for o in lanes["me"]["objects"] if o.get("location") == "bob"]
    assert mine["names"] == ["p"] and mine["id_at_location"] == p.id_at_location
    assert lanes["alice"]["objects"] == [] and lanes["alice"]["kind"] == alice.kind
    assert f"bob ({bob.kind})" in repr(sy.world({}))


# --- shares: secret sharing with parties and a crypto provider of this kind ----------------------

def test_secret_shared_values_compute_as_locally_and_each_party_holds_one_share(world):
    bob, alice, carol = world
    x, y = torch.tensor([[1.5, -2.0], [0.25, 3.0]]), torch.tensor([[-1.0, 0.5], [2.0, -0.75]])
    sx = x.fix_precision().share(bob, alice, crypto_provider=carol)
    sy_ = y.fix_precision().share(bob, alice, crypto_provider=carol)
    assert len(bob.objects) == len(alice.objects) == 2  # one share of each value on each party
    assert torch.allclose((sx + sy_).get().float_precision(), x + y)
    assert torch.allclose((sx * sy_).get().float_precision(), x * y, atol=1e-3)  # Beaver, carol's triple
    assert torch.allclose((sx @ sy_).get().float_precision(), x @ y, atol=1e-3)
    assert torch.allclose(sx.relu().get().float_precision(), x.relu(), atol=1e-3)  # the sign-bit circuit
    assert torch.equal((sx > sy_).get().float_precision(), (x > y).float())
