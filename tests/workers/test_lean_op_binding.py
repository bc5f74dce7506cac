"""Issue 22: a VirtualWorker's tiny pointwise op runs through torch's own binding of the same
overload (``torch.add`` for ``aten.add.Tensor``) where that is seen to be the same op, and
``p + q`` calls the pointer's ``__torch_function__`` itself: what a user sees is what plain
torch gives (values, dtypes, errors), and a torch function mode still sees every call."""
import pytest
import torch
from torch.overrides import TorchFunctionMode

from syft_lab.errors import RemoteError
from syft_lab.wire import allowlist

aten = torch.ops.aten


@pytest.mark.parametrize("name", ["+", "-", "*"])
def test_operators_on_pointers_give_plain_torch_values(bob, name):
    a, b = torch.tensor([1.5, -2.0, 3.0]), torch.tensor([0.5, 4.0, -1.0])
    pa, pb = a.send(bob), b.send(bob)
    ops = {"+": lambda x, y: x + y, "-": lambda x, y: x - y, "*": lambda x, y: x * y}
    fn = ops[name]
    for _ in range(3):  # the first call learns the direct path, the next ones take it
        assert torch.equal(fn(pa, pb).get(), fn(a, b))
        assert torch.equal(fn(pa, 2).get(), fn(a, 2))
        assert torch.equal(fn(pa, 2.5).get(), fn(a, 2.5))
    # int with float: torch's type promotion, on the worker too
    i = torch.tensor([1, 2, 3])
    r = (i.send(bob) + pa).get()
    assert r.dtype == torch.float32 and torch.equal(r, i + a)


def test_a_shape_mismatch_is_the_error_plain_torch_gives(bob):
    a, b = torch.ones(3), torch.ones(4)
    with pytest.raises(RuntimeError) as plain:
        a + b
    pa, pb = a.send(bob), b.send(bob)
    for _ in range(2):
        with pytest.raises(RemoteError) as remote:
            pa + pb
        assert "The size of tensor a (3) must match the size of tensor b (4)" in str(remote.value)
        assert "The size of tensor a (3) must match the size of tensor b (4)" in str(plain.value)


def test_the_binding_is_used_only_where_it_is_the_same_overload(monkeypatch):
    t = torch.ones(2)
    plan = allowlist._plan(aten.add.Tensor)
    # what earlier tests' calls learned is forgotten: this test sees the first learning
    monkeypatch.setattr(plan, "calls", {})
    assert allowlist.fast_call(plan, [t, t]) is torch._C._VariableFunctions.add
    # no torch function of that name (an in-place op is a method): the overload's own call
    inplace = allowlist._plan(aten.add_.Tensor)
    monkeypatch.setattr(inplace, "calls", {})
    assert allowlist.fast_call(inplace, [t, t]) == aten.add_.Tensor._op


def test_a_torch_function_mode_still_sees_pointer_operators(bob):
    seen = []

    class Watch(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            seen.append(func)
            return func(*args, **(kwargs or {}))

    p = torch.tensor([1.0, 2.0]).send(bob)
    p + p  # learned
    with Watch():
        q = p + p
        r = p * 3
    assert torch.Tensor.add in seen and torch.Tensor.mul in seen
    assert torch.equal(q.get(), torch.tensor([2.0, 4.0])) and torch.equal(r.get(), torch.tensor([3.0, 6.0]))


def test_pointer_operators_with_subclass_torch_function_disabled(bob):
    p = torch.tensor([1.0, 2.0]).send(bob)
    with torch._C.DisableTorchFunctionSubclass():
        q = p + p  # torch's operator: the dispatcher's path, as before
    assert torch.equal(q.get(), torch.tensor([2.0, 4.0]))


def test_a_pointer_plus_a_local_tensor_is_still_refused(bob):
    p = torch.ones(2).send(bob)
    with pytest.raises(Exception, match="mixes data"):
        p + torch.ones(2)
