"""Pointers to objects on VirtualWorkers: send, ops, get, move, pointer chains, autograd."""
import copy
import pickle

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import syft_lab as sy
from syft_lab.wire.op_checks import OpNotAllowedError


def test_send_returns_a_pointer_and_leaves_the_original_alone(bob):
    me = sy.local_worker
    x = torch.tensor([1., 2., 3.])
    p = x.send(bob)
    assert isinstance(p, sy.PointerTensor) and isinstance(p, torch.Tensor)
    assert p.location is bob and p.owner is me and me.id == "me"
    assert p.id_at_location in bob.objects
    assert p.shape == x.shape and p.dtype == x.dtype
    x.add_(1)  # send copies
    assert torch.equal(x, torch.tensor([2., 3., 4.]))
    assert torch.equal(bob.objects[p.id_at_location], torch.tensor([1., 2., 3.]))
    assert torch.equal(p.get(), torch.tensor([1., 2., 3.]))


def test_worker_is_the_primitive_that_sends(bob):
    p = bob.send(torch.tensor([5.]))
    assert p.location is bob and torch.equal(p.get(), torch.tensor([5.]))


def test_ops_run_on_the_worker_and_return_pointers(bob):
    x = torch.tensor([1., 2., 3.])
    p = x.send(bob)
    results = {"add": p + p, "torch.add": torch.add(p, p), "sum": p.sum(), "relu": torch.relu(p - 2),
               "matmul": p @ p, "scalar": p * 3}
    for name, r in results.items():
        assert isinstance(r, sy.PointerTensor), name
        assert r.location is bob
    expected = {"add": x + x, "torch.add": x + x, "sum": x.sum(), "relu": torch.relu(x - 2),
                "matmul": x @ x, "scalar": x * 3}
    for name, r in results.items():
        assert r.shape == expected[name].shape
        assert torch.equal(r.get(), expected[name]), name


def test_get_removes_the_object_from_the_worker(bob):
    p = torch.tensor([1., 2., 3.]).send(bob)
    q = p + p
    assert q.id_at_location in bob.objects
    assert torch.equal(q.get(), torch.tensor([2., 4., 6.]))
    assert q.id_at_location not in bob.objects
    with pytest.raises(sy.ObjectNotFoundError, match=r"worker 'bob' holds no object with id \d+"):
        q.get()


def test_move_takes_the_object_to_another_worker(bob, alice):
    p = torch.tensor([1., 2.]).send(bob)
    old_id = p.id_at_location
    m = p.move(alice)
    assert m.location is alice and m.id_at_location in alice.objects
    assert old_id not in bob.objects
    assert torch.equal(m.get(), torch.tensor([1., 2.]))
    with pytest.raises(sy.ObjectNotFoundError, match="'bob'"):
        p + 1


def test_pointer_to_a_pointer(bob, alice):
    x = torch.tensor([1., 2., 3.])
    pp = x.send(bob).send(alice)
    assert pp.location is alice
    held = alice.objects[pp.id_at_location]
    assert isinstance(held, sy.PointerTensor) and held.location is bob and held.owner is alice
    assert len(bob.objects) == 1  # the intermediate local pointer was dropped; alice's keeps it
    inner = pp.get()
    assert isinstance(inner, sy.PointerTensor) and inner.owner is sy.local_worker
    assert torch.equal(inner.get(), x)
    assert len(bob.objects) == 0 and len(alice.objects) == 0


def test_ops_on_a_pointer_to_a_pointer_run_on_the_last_worker(bob, alice):
    pp = torch.tensor([1., 2.]).send(bob).send(alice)
    r = pp * 10
    assert r.location is alice
    assert torch.equal(r.get().get(), torch.tensor([10., 20.]))


def test_send_in_place_turns_the_same_object_into_a_pointer(bob):
    z = torch.ones(2)
    same = z
    out = z.send_(bob)
    assert out is same and isinstance(z, sy.PointerTensor) and z.location is bob
    assert torch.equal(z.get(), torch.ones(2))


def test_autograd_through_pointers_leaves_grads_on_the_worker(bob):
    w = torch.tensor([1., 2.], requires_grad=True).send(bob)
    assert w.requires_grad and w.is_leaf
    (w * 3).sum().backward()
    assert isinstance(w.grad, sy.PointerTensor) and w.grad.location is bob
    assert torch.equal(w.grad.get(), torch.tensor([3., 3.]))


def test_nn_layers_losses_and_backward_accept_pointers(bob):
    torch.manual_seed(0)
    lin = nn.Linear(4, 3)
    X, T = torch.randn(5, 4), torch.tensor([0, 2, 1, 1, 0])
    F.cross_entropy(lin(X), T).backward()
    expected = lin.weight.grad.clone()
    lin.zero_grad()
    lin.send(bob)
    loss = F.cross_entropy(lin(X.send(bob)), T.send(bob))
    assert isinstance(loss, sy.PointerTensor)
    loss.backward()
    lin.get()
    assert torch.allclose(lin.weight.grad, expected, atol=1e-6)


def test_tags_description_and_search(bob):
    d = torch.tensor([4., 5.]).tag("#data").describe("two numbers")
    d_ptr = d.send(bob)
    found = bob.search("#data")
    assert len(found) == 1 and found[0].id_at_location == d_ptr.id_at_location
    assert not found[0].owning
    assert bob.search("#nothing") == []
    held = bob.objects[d_ptr.id_at_location]
    assert held.tags == {"#data"} and held.description == "two numbers"
    assert torch.equal((found[0] + 1).get(), torch.tensor([5., 6.]))


def test_values_never_leave_a_worker_implicitly(bob):
    p = torch.tensor([1., 2.]).send(bob)
    s = p.sum()
    for leak in (lambda: s.item(), lambda: bool(s), lambda: float(s), lambda: p.tolist(),
                 lambda: p.numpy(), lambda: int(s), lambda: torch.equal(p, p)):
        with pytest.raises(sy.SyftError, match=r"\.get\(\)"):
            leak()
    assert "1." not in repr(p) and "bob" in repr(p)


def test_data_dependent_ops_run_remotely_with_the_real_shape(bob):
    x = torch.tensor([0., 3., 0., 5.])
    p = x.send(bob)
    nz = p.nonzero()
    assert isinstance(nz, sy.PointerTensor) and nz.shape == (2, 1)
    ms = torch.masked_select(p, p > 1)
    assert ms.shape == (2,)
    u = torch.unique(p)
    assert u.shape == (3,)
    assert torch.equal(nz.get(), x.nonzero())


def test_mixing_locations_names_both(bob, alice):
    p = torch.ones(2).send(bob)
    q = torch.ones(2).send(alice)
    with pytest.raises(sy.SyftError, match="'bob'.*'alice'|'alice'.*'bob'"):
        p + q
    with pytest.raises(sy.SyftError, match=r"local Tensor.*worker 'bob'"):
        p + torch.ones(2)
    assert torch.equal((p + torch.tensor(2.)).get(), torch.tensor([3., 3.]))  # 0-dim constants join


def test_remote_op_errors_become_remote_errors(bob):
    p = torch.ones(2, 3).send(bob)
    with pytest.raises(sy.RemoteError) as err:
        p @ p
    assert err.value.remote_type == "RuntimeError" and err.value.worker_id == "bob"
    assert "mat1 and mat2 shapes cannot be multiplied" in str(err.value)
    assert torch.equal(p.get(), torch.ones(2, 3))  # the worker still serves


def test_deepcopy_of_a_pointer_copies_on_the_worker(bob):
    p = torch.tensor([1., 2.]).send(bob)
    c = copy.deepcopy(p)
    assert c.location is bob and c.id_at_location != p.id_at_location
    assert len(bob.objects) == 2
    assert torch.equal(c.get(), p.get())


def test_pickling_a_pointer_fails_clearly(bob):
    p = torch.tensor([1.]).send(bob)
    with pytest.raises(sy.SyftError, match=r"cannot be pickled.*'bob'.*\.get\(\)"):
        pickle.dumps(p)
    with pytest.raises(sy.SyftError, match="cannot be pickled"):
        torch.save(p, "/dev/null")


def test_logging_tensor_sent_to_a_worker_keeps_logging_there(bob):
    lx = sy.LoggingTensor(torch.tensor([1., -2.]))
    p = lx.send(bob)
    held = bob.objects[p.id_at_location]
    assert isinstance(held, sy.LoggingTensor) and held is not lx
    (p.abs() * 2)
    assert [r.op for r in held.log][-2:] == ["aten.abs.default", "aten.mul.Tensor"]
    assert lx.log == []  # the local one saw nothing
    back = p.get()
    assert isinstance(back, sy.LoggingTensor)


def test_bad_arguments(bob):
    with pytest.raises(TypeError, match="bob.send expects a tensor"):
        bob.send("abc")
    with pytest.raises(sy.SyftError, match="search takes one or more tags"):
        bob.search()
    with pytest.raises(sy.SyftError, match="worker id"):
        sy.VirtualWorker("no spaces please")
    with pytest.raises(sy.SyftError, match="tags are non-empty strings"):
        torch.ones(1).tag(3)


def test_a_pointer_has_one_id_in_every_view(bob):
    p = torch.ones(2).send(bob)
    head = sy.chain(p).nodes[0]
    me = next(w for w in sy.world({"p": p})["workers"] if w["id"] == "me")
    entry = next(o for o in me["objects"] if o["names"] == ["p"])
    assert head["id"] == entry["id"] == p.id
    assert entry["shape"] == [2] and entry["dtype"] == "float32"


def test_every_pointer_to_a_fetched_object_becomes_stale(bob, alice):
    p = torch.ones(2).tag("#t").send(bob)
    other = bob.search("#t")[0]
    p.get()
    assert sy.chain(other).nodes[0]["state"] == "gone"
    with pytest.raises(sy.ObjectNotFoundError, match="'bob'"):
        other.get()
    q = torch.ones(2).tag("#u").send(bob)
    seen = bob.search("#u")[0]
    q.move(alice)
    assert sy.chain(seen).nodes[0]["state"] == "gone"


def test_pointer_to_a_closed_worker_says_so():
    carol = sy.VirtualWorker("carol")
    p = torch.ones(1).send(carol)
    assert sy.chain(p).nodes[0]["state"] == "ok"
    carol.close()
    assert sy.chain(p).nodes[0]["state"] == "closed"
    assert "(closed)" in repr(p)


def test_a_worker_stores_a_pointer_only_to_a_worker_it_can_reach(bob, alice):
    p = torch.ones(2).send(bob)
    kept = alice.send(p)  # in process: alice reaches bob
    assert alice.objects[kept.id_at_location].location is bob
    del kept
    carol = sy.VirtualWorker("carol")
    q = torch.ones(1).send(carol)
    carol.close()  # closed: it takes no request (not even the copy's reference), and no worker reaches it
    with pytest.raises(sy.SyftError, match="^worker 'carol' was closed; make a new worker to reconnect$"):
        alice.send(q)
    assert len(alice.objects) == 0


def test_the_allow_list_holds_in_process(bob):
    p = torch.ones(2).send(bob)
    with pytest.raises(OpNotAllowedError, match="denied by the worker's op policy: storage manipulation"):
        bob._run(torch.ops.aten.set_.source_Tensor, [p._ref, p._ref], None)
    assert torch.equal(p.get(), torch.ones(2))


def test_a_worker_is_an_identity_not_a_value(bob):
    assert copy.copy(bob) is bob and copy.deepcopy(bob) is bob
    model = nn.Linear(2, 1).send(bob)
    twin = copy.deepcopy(model)
    assert twin.location is bob and twin.weight.location is bob
    assert twin.weight.id_at_location != model.weight.id_at_location  # a copy made on bob
    assert torch.equal(twin.weight.get(), model.weight.get())


def test_submit_and_gather_work_on_in_process_workers(bob, alice):
    a, b = torch.ones(2).send(bob), torch.ones(2).send(alice)
    pending = sy.workers.submit(torch.ops.aten.mul.Tensor, (a, 3.0)), sy.workers.submit(torch.ops.aten.neg.default, (b,))
    assert all(p.done for p in pending)  # in process each ran at once
    x, y = sy.workers.gather(pending)
    assert x.location is bob and y.location is alice
    assert torch.equal(x.get(), torch.full((2,), 3.0)) and torch.equal(y.get(), -torch.ones(2))


def test_send_keeps_a_leafs_grad_as_to_does(bob):
    x = torch.tensor([1., 2.], requires_grad=True)
    (x * 3).sum().backward()
    p = x.send(bob)
    assert torch.equal(p.grad.get(), torch.tensor([3., 3.]))
    assert torch.equal(x.grad, torch.tensor([3., 3.]))  # the original is left alone


def test_pysyft_spellings_virtual_worker_data_and_move_requires_grad():
    x = torch.tensor([1., 2.]).tag("#x")
    dan = sy.VirtualWorker("dan_with_data", data=(x,))
    try:
        (found,) = dan.search("#x")
        assert torch.equal(found.copy().get(), x)
        moved = torch.tensor([3.]).send(dan).move(dan, requires_grad=True)
        assert moved.requires_grad
        with pytest.raises(TypeError, match="True or False"):
            moved.move(dan, requires_grad="yes")
    finally:
        dan.close()


def test_pysyft_discovery_search_by_a_list_of_tags_and_tags_in_the_repr(bob, alice):
    x = torch.tensor([1., 2.]).tag("#a", "#b").describe("two numbers")
    assert repr(x) == "tensor([1., 2.])\n\tTags: #a #b\n\tDescription: two numbers"
    assert repr(torch.tensor([1., 2.])) == "tensor([1., 2.])"  # untagged tensors print as torch prints
    bob.load(x)
    (found,) = bob.search(["#a", "#b"])
    assert bob.search(["#a", "#nope"]) == []
    assert repr(found).endswith("\n\tTags: #a #b\n\tDescription: two numbers")
    # one id per object everywhere: the pointer alice holds is known by the same id in the chain
    pp = torch.ones(1).send(bob).send(alice)
    inner = sy.chain(pp).root["children"][0]
    assert inner["owner"] == "alice" and inner["id"] in alice.objects
    assert sy.chain(pp).root["id_at_location"] == inner["id"]
