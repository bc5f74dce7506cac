"""A repeated pointer op takes the direct path (syft_lab/tensors/pointer.py: the op goes to the
worker from __torch_function__, without torch's dispatcher). What a user sees must be what the
dispatcher gives: values, autograd, dispatch modes, the worker's checks and errors, its record."""
import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import syft_lab as sy
from syft_lab.errors import QuotaExceededError, RemoteError, SyftError

aten = torch.ops.aten


def test_repeated_ops_give_plain_values_and_each_is_recorded_by_the_worker(bob):
    x, y = torch.tensor([[1., -2.], [3., 4.]]), torch.tensor([[0.5, 2.], [-1., 3.]])
    p, q = x.send(bob), y.send(bob)
    before = len(bob.ledger())
    for _ in range(3):
        assert torch.equal((p + q).get(), x + y)
        assert torch.equal((p * q).get(), x * y)
        assert torch.equal(p.pow(2).get(), x.pow(2))
        assert torch.equal(p.abs().pow(2.5).get(), x.abs().pow(2.5))  # another scalar type: its own entry
        assert torch.equal((p.int() + 2).get(), x.int() + 2)  # an int tensor and an int scalar
        assert torch.equal(p.sum().get(), x.sum())
        r = p.t()  # a view: the dispatcher's, every time (its wrapper's strides follow the worker's)
        assert r.stride() == x.t().stride() and torch.equal(r.get(), x.t())
    ops = [rec["op"] for rec in bob.ledger()[before:] if rec["kind"] == "op"]
    assert ops.count("add") == 6 and ops.count("mul") == 3 and ops.count("pow") == 6  # (p.int() + 2 adds too)
    assert len(bob.objects) == 2  # every result released again


def test_a_pointer_that_comes_to_require_grad_gets_its_gradient(bob):
    x = torch.tensor([1., 2., 3.])
    p = x.send(bob)
    for _ in range(3):
        (p * p).get()
    p.requires_grad_()
    y = p * p  # the same call as above, now through autograd
    assert y.requires_grad and y.grad_fn is not None
    y.sum().backward()
    torch.testing.assert_close(p.grad.get(), 2 * x)
    p.grad = None
    for _ in range(2):
        h = p * 2  # a result that requires grad (autograd set it) joins the next op's graph too
        (h * h).sum().backward()
    torch.testing.assert_close(p.grad.get(), 2 * (8 * x))


def test_a_dispatch_mode_sees_a_repeated_op(bob):
    class Seen(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.ops.append((func, [type(a).__name__ for a in args]))
            return func(*args, **(kwargs or {}))

    p = torch.tensor([1., 2.]).send(bob)
    for _ in range(3):
        (p + p).get()
    with Seen() as seen:
        r = p + p
    assert seen.ops == [(aten.add.Tensor, ["PointerTensor", "PointerTensor"])]  # the pointer's op, not the worker's
    assert torch.equal(r.get(), torch.tensor([2., 4.]))


def test_errors_on_repeated_calls_are_the_dispatchers(bob, alice):
    p, q = torch.ones(2, 3).send(bob), torch.ones(5, 5).send(bob)
    a = torch.ones(2, 3).send(alice)
    for _ in range(3):
        assert torch.equal((p + p).get(), torch.full((2, 3), 2.))
        with pytest.raises(RemoteError, match="must match the size"):  # the worker's own check
            p + q
        with pytest.raises(SyftError, match="mixes data on worker 'bob' with data on worker 'alice'"):
            p + a
        with pytest.raises(SyftError, match="mixes data on this process"):
            p + torch.ones(2, 3)
    assert len(bob.objects) == 2 and len(alice.objects) == 1


def test_the_workers_checks_apply_to_a_repeated_op(bob):
    small = torch.tensor([1, 2, 2]).send(bob)
    for _ in range(3):
        assert torch.equal(torch.bincount(small).get(), torch.tensor([0, 1, 2]))
    # the same call on a tensor of the same sizes: its work bound reads its largest value
    big = torch.tensor([1, 2, 2**40]).send(bob)
    with pytest.raises(QuotaExceededError, match="nothing ran"):
        torch.bincount(big)
    one = torch.ones(1, 1).send(bob)
    wide = one.expand(2**20, 2**20)  # a view of one number: it costs nothing until computed on
    for _ in range(2):
        with pytest.raises(QuotaExceededError, match="per-op limit"):
            wide + wide
    assert len(bob.objects) == 4  # small, big, one and its view: nothing else was stored
    del wide
    assert len(bob.objects) == 3
