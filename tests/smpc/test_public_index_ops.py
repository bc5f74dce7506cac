"""Issue 41, item 3: ops with a public index or condition (gather, take, scatter, scatter_add,
index_add, index_copy, index_put, put, where, and the gradients of index_select, gather and take),
cumsum, trace, clamp/hardtanh/relu6 (and their gradients) and neg_ on shared tensors, each against
plain torch on 2 and 3 parties (VirtualWorkers), and on fixed precision tensors that are not shared."""
import pytest
import torch
import torch.nn.functional as F

from syft_lab.errors import SyftError
from syft_lab.tensors.additive_sharing import AdditiveSharingTensor

X = torch.tensor([[0.5, -1.25, 2.0, 3.5], [3.0, 0.75, -4.5, -0.25], [1.5, -2.0, 0.125, 6.0]])
SRC = torch.tensor([[9.0, -8.5, 1.25, 2.0], [-3.0, 4.5, 0.5, -7.0]])
IDX = torch.tensor([[2, 0, 1, 2], [0, 2, 0, 1]])  # scatter/gather along dim 0, no position written twice
ROWS = torch.tensor([2, 0])

OPS = {
    "gather": lambda x, s: x.gather(0, IDX),
    "take": lambda x, s: x.take(torch.tensor([11, 0, 5, 5])),
    "scatter (src)": lambda x, s: x.scatter(0, IDX[:, :3], s),
    "scatter (value)": lambda x, s: x.scatter(1, torch.tensor([[3], [0], [1]]), 2.5),
    "scatter_add": lambda x, s: x.scatter_add(0, torch.tensor([[2, 2, 1, 2], [2, 0, 0, 2]]), s),
    "index_add": lambda x, s: x.index_add(0, torch.tensor([2, 2]), s, alpha=2),
    "index_copy": lambda x, s: x.index_copy(0, ROWS, s),
    "index_put": lambda x, s: x.index_put((torch.tensor([0, 2]), torch.tensor([1, 3])), s[0, :2]),
    "index_put accumulate": lambda x, s: x.index_put((torch.tensor([0, 0]), torch.tensor([1, 1])), s[1, :2],
                                                     accumulate=True),
    "put": lambda x, s: x.put(torch.tensor([1, 7]), s[0, 1:3]),
    "setitem with an index tensor": lambda x, s: _setitem(x, (ROWS, slice(None)), s),
    "scatter_ in place": lambda x, s: x.clone().scatter_(0, IDX, s),
    "index_add_ in place": lambda x, s: x.clone().index_add_(1, torch.tensor([3, 1]), s.t()[:3]),
    "where, public condition": lambda x, s: torch.where(X > 1.0, x, -x),
    "where, a number": lambda x, s: torch.where(X < 0, x, 0.5),
    "cumsum": lambda x, s: x.cumsum(1),
    "cumsum dim 0": lambda x, s: torch.cumsum(x, 0),
    "trace": lambda x, s: x.trace(),
    "diagonal": lambda x, s: x.diagonal(1),
    "clamp": lambda x, s: x.clamp(-1.0, 2.25),
    "clamp min": lambda x, s: x.clamp(min=0.5),
    "clamp max": lambda x, s: torch.clamp(x, max=-0.25),
    "hardtanh": lambda x, s: F.hardtanh(x),
    "relu6": lambda x, s: F.relu6(x),
    "neg_": lambda x, s: x.clone().neg_(),
    "pad with a public value": lambda x, s: F.pad(x, (1, 2, 0, 1), value=-1.5),
}


def _setitem(x, key, value):
    x = x.clone()
    x[key] = value
    return x


def _value(t):
    return t.get().float_precision() if t.shared else t.float_precision()


@pytest.mark.parametrize("op", list(OPS), ids=list(OPS))
def test_ops_with_a_public_index_on_shared_tensors_are_torchs(parties, op):
    ws, provider = parties
    expected = OPS[op](X, SRC)
    sx = X.fix_precision().share(*ws, crypto_provider=provider)
    ss = SRC.fix_precision().share(*ws, crypto_provider=provider)
    out = OPS[op](sx, ss)
    assert isinstance(out.child, AdditiveSharingTensor)
    assert tuple(out.shape) == tuple(expected.shape)
    torch.testing.assert_close(_value(out), expected, atol=2e-3, rtol=0)


@pytest.mark.parametrize("op", list(OPS), ids=list(OPS))
def test_ops_with_a_public_index_on_fixed_precision_tensors_are_torchs(op):
    expected = OPS[op](X, SRC)
    out = OPS[op](X.fix_precision(), SRC.fix_precision())
    torch.testing.assert_close(_value(out), expected, atol=2e-3, rtol=0)


def test_a_public_value_written_into_a_shared_tensor_by_index(parties):
    ws, provider = parties
    sx = X.fix_precision().share(*ws, crypto_provider=provider)
    out = sx.index_put((torch.tensor([1]), torch.tensor([2])), torch.tensor([7.5]))
    expected = X.index_put((torch.tensor([1]), torch.tensor([2])), torch.tensor([7.5]))
    torch.testing.assert_close(_value(out), expected, atol=2e-3, rtol=0)
    shared_src = SRC.fix_precision().share(*ws, crypto_provider=provider)
    into_public = X.fix_precision().scatter_add(0, IDX, shared_src)  # a public tensor plus shared values: shared
    assert into_public.shared
    torch.testing.assert_close(_value(into_public), X.scatter_add(0, IDX, SRC), atol=2e-3, rtol=0)


GRADS = {
    "index_select": lambda x: (x.index_select(0, torch.tensor([2, 0, 2])) * torch.arange(12.0).view(3, 4)).sum(),
    "gather": lambda x: (x.gather(1, torch.tensor([[3, 3], [0, 1], [2, 0]])) * 1.5).sum(),
    "take": lambda x: x.take(torch.tensor([1, 1, 10])).sum(),
    "where": lambda x: (torch.where(X > 0, x, x * 3.0)).sum(),
    "cumsum": lambda x: (x.cumsum(1) * torch.arange(4.0)).sum(),
    "trace": lambda x: x[:, :3].trace(),
    "clamp": lambda x: (x.clamp(-1.0, 2.25) * torch.arange(12.0).view(3, 4)).sum(),
    "hardtanh": lambda x: (F.hardtanh(x, -2.0, 1.0) * 2).sum(),
    "relu6": lambda x: F.relu6(x).sum(),
    "pad with a public value": lambda x: (F.pad(x, (1, 1), value=2.0) * torch.arange(18.0).view(3, 6)).sum(),
}


@pytest.mark.parametrize("op", list(GRADS), ids=list(GRADS))
def test_gradients_of_public_index_ops_are_torchs(parties, op):
    ws, provider = parties
    plain = X.clone().requires_grad_(True)
    GRADS[op](plain).backward()
    sx = X.fix_precision().share(*ws, crypto_provider=provider, requires_grad=True)
    GRADS[op](sx).backward()
    # a linear op's gradient does not depend on x: public, as the gradient of a sum; clamp's does: shared
    assert sx.grad.shared == (op in ("clamp", "hardtanh", "relu6"))
    torch.testing.assert_close(_value(sx.grad), plain.grad, atol=3e-3, rtol=0)


def test_a_shared_index_is_refused_with_what_to_use(parties):
    ws, provider = parties
    sx = X.fix_precision().share(*ws, crypto_provider=provider)
    shared_index = torch.tensor([[1, 0, 2, 0]]).fix_precision().share(*ws, crypto_provider=provider)
    with pytest.raises(SyftError, match="public index.*one-hot"):
        sx.gather(0, shared_index)


def test_a_repeated_index_in_a_non_accumulating_write_is_refused(parties):
    ws, provider = parties
    sx = X.fix_precision().share(*ws, crypto_provider=provider)
    with pytest.raises(SyftError, match="repeated index.*accumulat"):
        sx.index_copy(0, torch.tensor([1, 1]), SRC)


def test_writes_by_a_public_index_reach_the_base_through_a_view(parties):
    ws, provider = parties
    plain = X.clone()
    plain[1].index_add_(0, torch.tensor([0, 3]), torch.tensor([1.0, -2.0]))
    plain.t()[2].clamp_(max=0.0)
    sx = X.fix_precision().share(*ws, crypto_provider=provider)
    sx[1].index_add_(0, torch.tensor([0, 3]), torch.tensor([1.0, -2.0]))
    sx.t()[2].clamp_(max=0.0)
    torch.testing.assert_close(_value(sx), plain, atol=2e-3, rtol=0)
