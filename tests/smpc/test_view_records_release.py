"""Issue 41: a view's record of its base (tensors/fixed_precision_views.py) never keeps a deleted
shared tensor's shares on the parties. The records once held their bases strongly: after
``sx.exp().get()`` on a tensor that requires a gradient, autograd saved a detach of exp's output
(a view recording that output), the output's graph reached ``sx``, and C++ held the loop, so
``del sx`` (and gc.collect()) left one share of it on every party; the live pointers then showed
in later tests' world views. Counted on the workers' stores, 2 and 3 parties (VirtualWorkers)."""
import copy
import gc

import pytest
import torch

X = torch.tensor([[0.5, -1.5, 2.0, 0.0], [0.0, 3.25, -0.75, 0.5]])


def _objects_on(workers):
    gc.collect()
    return {w.id: len(w.core.objects) for w in workers}


def _nothing_on(workers):
    return {w.id: 0 for w in workers}


OPS = {
    "exp": lambda sx: sx.exp().get(),
    "sigmoid": lambda sx: sx.sigmoid().get(),
    "tanh": lambda sx: sx.tanh().get(),
    "exp then backward": lambda sx: sx.exp().sum().backward(),
}


@pytest.mark.parametrize("op", list(OPS), ids=list(OPS))
def test_a_deleted_shared_tensor_leaves_nothing_after_an_approximation(parties, op):
    ws, provider = parties
    sx = X.fix_precision().share(*ws, crypto_provider=provider, requires_grad=True)
    OPS[op](sx)
    del sx
    assert _objects_on(ws + [provider]) == _nothing_on(ws + [provider])


VIEW_WRITES = {
    "row mul_": lambda sx: sx[0].mul_(2),
    "column assignment": lambda sx: sx.__setitem__((slice(None), 1), torch.tensor([1.0, 2.0])),
    "add_ through t() then select": lambda sx: sx.t()[2].add_(1.0),
    "div_ through detach": lambda sx: sx.detach().div_(2),
}


@pytest.mark.parametrize("write", list(VIEW_WRITES), ids=list(VIEW_WRITES))
def test_a_deleted_shared_tensor_leaves_nothing_after_a_write_through_a_view(parties, write):
    ws, provider = parties
    sx = X.fix_precision().share(*ws, crypto_provider=provider)
    VIEW_WRITES[write](sx)
    del sx
    assert _objects_on(ws + [provider]) == _nothing_on(ws + [provider])


def test_a_view_outliving_its_base_is_released_with_it(parties):
    """As in torch, a live view keeps its base (torch's own view tracking, row._base); once the
    view goes too, nothing of either stays on the parties."""
    ws, provider = parties
    sx = X.fix_precision().share(*ws, crypto_provider=provider)
    row = sx.t()[1]
    row.mul_(2)
    del sx
    torch.testing.assert_close(row.copy().get().float_precision(), X[:, 1] * 2, atol=2e-3, rtol=0)
    del row
    assert _objects_on(ws + [provider]) == _nothing_on(ws + [provider])


def test_a_deep_copy_of_a_view_owns_its_values():
    """As in torch: a deep copy of a view (a detach here, what a deep-copied parameter is) does not
    write into the tensor the view was taken of (the record is not copied: it holds no base)."""
    fx = X.fix_precision()
    view = fx.detach()
    copied = copy.deepcopy(view)
    copied.mul_(2)
    torch.testing.assert_close(fx.float_precision(), X, atol=2e-3, rtol=0)
    torch.testing.assert_close(copied.float_precision(), X * 2, atol=2e-3, rtol=0)
    view.mul_(3)  # the view itself still writes through
    torch.testing.assert_close(fx.float_precision(), X * 3, atol=2e-3, rtol=0)
