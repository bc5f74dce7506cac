"""PointerTensor (syft_lab/tensors/pointer.py) and transfers inside autograd (tensors/transfer.py),
on in-process workers. The same flows on websocket workers: tests/network/test_pysyft_tutorials.py."""
import gc

import pytest
import torch
from torch import nn

import syft_lab as sy
from syft_lab.errors import SyftError


def test_a_worker_refuses_a_meta_tensor(bob):
    with pytest.raises(SyftError, match="meta device: workers hold CPU tensors"):
        bob.send(torch.empty(3, device="meta"))
    assert len(bob.objects) == 0


def test_gradient_ops_name_the_workers_cpu_not_the_placeholder_device(bob):
    w = torch.tensor([1., -1.], requires_grad=True).send(bob)
    (w.exp() * 2).sum().backward()
    stored = bob.objects[w.grad.id_at_location]
    assert stored.device.type == "cpu"
    torch.testing.assert_close(w.grad.get(), 2 * torch.tensor([1., -1.]).exp())


def test_every_pointer_knows_the_worker_that_holds_it(bob, alice):
    p = torch.tensor([1, 2, 3]).send(bob).send(alice)   # alice holds a pointer to bob's data
    y = p + p                                            # alice runs the op: the result's pointer is hers
    on_alice = list(alice.objects.values())
    assert [o.owner.id for o in on_alice] == ["alice", "alice"]
    assert p.owner is sy.local_worker and y.owner is sy.local_worker
    moved = torch.tensor([4]).send(bob).send(alice).move(bob)  # a pointer moved to bob is bob's now
    assert bob.objects[moved.id_at_location].owner.id == "bob"
    fetched = y.get()                                    # a pointer fetched back is held here again
    assert fetched.owner is sy.local_worker
    assert torch.equal(fetched.get(), torch.tensor([2, 4, 6]))
    del p, y, moved, fetched, on_alice
    gc.collect()


def test_get_keeps_requires_grad_and_grad_of_a_leaf(bob):
    w = nn.Parameter(torch.tensor([1., 2.])).send(bob)
    (w * 5).sum().backward()
    local = w.get()
    assert local.requires_grad and local.is_leaf
    assert torch.equal(local.grad, torch.tensor([5., 5.]))
    assert len(bob.objects) == 0


def test_move_of_a_leaf_takes_its_gradient_along(bob, alice):
    w = torch.tensor([1., 2.], requires_grad=True).send(bob)
    (w * 3).sum().backward()
    m = w.move(alice)
    assert m.requires_grad and m.grad.location is alice
    assert torch.equal(m.grad.get(), torch.tensor([3., 3.]))
    assert len(bob.objects) == 0
    del w, m
    gc.collect()


def test_move_with_history_is_differentiable_and_keeps_what_autograd_saved(bob, alice):
    w = torch.tensor([1., -2., 3.], requires_grad=True).send(alice)
    h = (w * 2).relu()            # relu saves its result on alice for backward
    on_bob = h.move(bob)
    assert on_bob.grad_fn is not None and on_bob.location is bob
    (on_bob * torch.tensor(4.)).sum().backward()
    assert torch.equal(w.grad.get(), torch.tensor([8., 0., 8.]))
    del w, h, on_bob
    gc.collect()
    assert len(alice.objects) == len(bob.objects) == 0


def test_send_and_get_with_history_are_differentiable(bob):
    x = torch.tensor([1., 2.], requires_grad=True)
    p = (x * 3).send(bob)         # a result with history
    back = (p * p).get()          # and back, still in the graph
    back.sum().backward()
    assert torch.equal(x.grad, 18 * x.detach())
    del p, back
    gc.collect()
    assert len(bob.objects) == 0


def test_module_copy_and_move(bob, alice):
    model = nn.Linear(2, 1)
    twin = model.copy()
    assert twin is not model and torch.equal(twin.weight, model.weight)
    model.send(bob)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)  # built before the move: still works after
    model.move(alice)
    assert {p.location.id for p in model.parameters()} == {"alice"} and len(bob.objects) == 0
    opt.zero_grad()
    model(torch.ones(1, 2).send(alice)).sum().backward()
    opt.step()
    model.get()
    torch.testing.assert_close(model.weight, twin.weight - 0.1)
    assert len(alice.objects) == 0
