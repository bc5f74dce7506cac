"""Ops beyond products and comparisons on shared fixed precision tensors (issue 30), 2 and 3
parties against plaintext; autograd through them; PySyft's keyword spellings."""
import math

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import syft_lab as sy
from syft_lab.errors import ObjectNotFoundError

sy.hook()
UNIT = 1e-3
SETTINGS = settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
values = st.floats(min_value=-40, max_value=40, allow_nan=False, width=32)


def tensors(shape):
    n = math.prod(shape)
    return st.lists(values, min_size=n, max_size=n).map(lambda v: torch.round(torch.tensor(v).view(shape) * 1000) / 1000)


def share(x, parties, provider, **kw):
    return x.fix_precision().share(*parties, crypto_provider=provider, **kw)


def plain(s):
    return s.get().float_precision()


def test_each_gradient_owns_its_shares(parties):
    """(a + b).backward(): autograd copies one gradient into both leaves; each has its own shares."""
    ws, provider = parties
    a = share(torch.tensor([1.0, 2.0]), ws, provider, requires_grad=True)
    b = share(torch.tensor([3.0, -4.0]), ws, provider, requires_grad=True)
    (a + b).backward(share(torch.tensor([0.5, -1.0]), ws, provider))
    assert a.grad.child is not b.grad.child
    assert not {id(p) for p in a.grad.child.shares} & {id(p) for p in b.grad.child.shares}
    assert torch.allclose(plain(a.grad), torch.tensor([0.5, -1.0]))
    assert torch.allclose(plain(b.grad), torch.tensor([0.5, -1.0]))  # not ObjectNotFoundError
    del a, b


def test_refresh_keeps_autograd(parties):
    ws, provider = parties
    x = torch.tensor([1.5, -2.0, 0.25])
    sw = share(x, ws, provider, requires_grad=True)
    loss = (sw * sw).sum().refresh()
    assert loss.grad_fn is not None
    loss.backward()
    assert torch.allclose(plain(sw.grad), 2 * x, atol=3 * UNIT)
    assert torch.allclose(plain(loss), (x * x).sum(), atol=3 * UNIT)
    del sw, loss


def test_division_by_a_public_fixed_precision_tensor_is_exact(parties):
    ws, provider = parties
    x = torch.tensor([9.0, -6.0, 4.5, 1.0])
    sx = share(x, ws, provider)
    got = plain(sx / torch.tensor([3.0]).fix_precision())
    assert torch.allclose(got, x / 3, atol=1.01 * UNIT)
    assert got[0].item() == pytest.approx(3.0, abs=1e-3) and got[0].item() != pytest.approx(2.997, abs=1e-4)
    assert torch.allclose((x.fix_precision() / torch.tensor([3.0]).fix_precision()).float_precision(),
                          x / 3, atol=0.51 * UNIT)
    del sx


@given(x=tensors((2, 5)), y=tensors((2, 5)))
@SETTINGS
def test_equal_and_not_equal(parties, x, y):
    ws, provider = parties
    y = torch.where(torch.arange(10).view(2, 5) % 3 == 0, x, y)  # some equal pairs
    sx, sy_ = share(x, ws, provider), share(y, ws, provider)
    assert torch.equal(plain(sx == sy_), (x == y).float())
    assert torch.equal(plain(sx != sy_), (x != y).float())
    assert torch.equal(plain(sx == x[0, 0].item()), (x == x[0, 0]).float())
    del sx, sy_


@given(x=tensors((3, 4)))
@SETTINGS
def test_abs_and_sign(parties, x):
    ws, provider = parties
    x[0, 0] = 0.0
    sx = share(x, ws, provider)
    assert torch.allclose(plain(sx.abs()), x.abs(), atol=UNIT)
    assert torch.equal(plain(sx.sign()), x.sign())
    assert torch.equal(plain(torch.sign(sx)), x.sign())
    del sx


@given(x=tensors((3, 5)))
@SETTINGS
def test_min_and_argmin(parties, x):
    ws, provider = parties
    sx = share(x, ws, provider)
    assert torch.allclose(plain(sx.min()), x.min(), atol=UNIT)
    v, i = sx.min(dim=1)
    assert torch.allclose(plain(v), x.min(1).values, atol=UNIT)
    assert torch.equal(plain(i).long(), x.argmin(1))
    assert torch.equal(plain(sx.argmin(dim=0)).long(), x.argmin(0))
    assert torch.allclose(plain(torch.amin(sx, 1)), x.amin(1), atol=UNIT)
    del sx, v, i


def test_chunk_unbind_roll(parties):
    ws, provider = parties
    x = torch.arange(12.0).view(3, 4) - 5.5
    sx = share(x, ws, provider)
    for got, want in zip(torch.chunk(sx, 2, 1), torch.chunk(x, 2, 1)):
        assert torch.allclose(plain(got), want)
    for got, want in zip(sx.split([1, 2], 0), x.split([1, 2], 0)):
        assert torch.allclose(plain(got), want)
    for got, want in zip(sx.unbind(1), x.unbind(1)):
        assert torch.allclose(plain(got), want)
    assert torch.allclose(plain(sx.roll(1, 0)), x.roll(1, 0))
    assert torch.allclose(plain(sx.roll((1, -3), (0, 1))), x.roll((1, -3), (0, 1)))
    assert torch.allclose(plain(sx.roll(5)), x.roll(5))
    del sx


@given(x=tensors((3, 6)))
@SETTINGS
def test_var(parties, x):
    ws, provider = parties
    sx = share(x, ws, provider)
    # mean: 1 unit; each squared deviation: |d| * 1e-3 + 1e-3; divided by n - 1
    tol = 2 * (x - x.mean()).abs().max().item() * UNIT + 5 * UNIT
    assert torch.allclose(plain(sx.var()), x.double().var().float(), atol=tol)
    assert torch.allclose(plain(sx.var(1)), x.double().var(1).float(), atol=tol)
    assert torch.allclose(plain(sx.var(0, unbiased=False, keepdim=True)),
                          x.double().var(0, unbiased=False, keepdim=True).float(), atol=tol)
    # std = sqrt(var), sqrt's domain [0.05, 150] (docs): values in [-10, 10]; sqrt's 1% on var's error
    small = torch.round(x * 250) / 1000
    want = small.double().std(1).float()
    got = plain(share(small, ws, provider).std(1))
    assert torch.allclose(got, want, atol=0.01 * want.max().item() + 0.05)
    del sx


def test_gradients_through_the_new_ops(parties):
    ws, provider = parties
    x = torch.tensor([[1.5, -2.0, 0.5], [-0.25, 3.0, -1.0]])
    sx = share(x, ws, provider, requires_grad=True)
    loss = sx.abs().sum() + sx.roll(1, 1)[:, 0].sum() + torch.chunk(sx, 3, 1)[2].sum() * 2
    loss.backward()
    xx = x.clone().requires_grad_(True)
    (xx.abs().sum() + xx.roll(1, 1)[:, 0].sum() + torch.chunk(xx, 3, 1)[2].sum() * 2).backward()
    assert torch.allclose(plain(sx.grad), xx.grad, atol=UNIT)
    del sx, loss


def test_pysyft_spellings_and_copy(parties):
    ws, provider = parties
    x = torch.tensor([1.25, -2.5])
    fx = x.fix_precision(precision_fractional=4)
    assert fx.precision == 4 and fx.child.tolist() == [12500, -25000]
    sx = fx.share(*ws, crypto_provider=provider, requires_grad=True)
    assert sx.requires_grad and sx.is_leaf
    c = sx.copy()
    assert c.shared and c.child.shares[0] is not sx.child.shares[0]
    assert torch.allclose(plain(c), x)
    assert torch.allclose(plain(sx), x)  # the original's shares are still there
    local = x.fix_precision().copy()
    assert torch.equal(local.child, torch.tensor([1250, -2500]))
    with pytest.raises(sy.SyftError, match="not both"):
        x.fix_precision(precision=3, precision_fractional=3)
    del sx, c


def test_max_and_argmax_along_a_long_dim(parties):
    """No 256-element limit: a tournament along the dim (ties: the first index, as torch)."""
    ws, provider = parties
    torch.manual_seed(11)
    x = torch.round(torch.randn(2, 300) * 5000) / 1000
    x[1, 10] = x[1, 200] = x[1].max() + 1  # a tie: the first wins
    sx = share(x, ws, provider)
    v, i = sx.max(dim=1)
    assert torch.allclose(plain(v), x.max(1).values, atol=UNIT)
    assert torch.equal(plain(i).long(), x.argmax(1))
    assert torch.equal(plain(sx.argmin(dim=1)).long(), x.argmin(1))
    assert torch.equal(plain(sx.t().argmax(dim=0, keepdim=True)).long(), x.t().argmax(0, keepdim=True))
    del sx, v, i


def test_optimizer_fix_precision_pysyft_spelling(parties):
    """PySyft's ``optim.SGD(...).fix_precision()``: the same optimizer back; a momentum buffer it holds
    already (from plaintext steps) is encoded and shared like its parameter; steps then follow the
    plaintext twin. Parameters not fixed, or at another precision, are a clear error."""
    ws, provider = parties
    torch.manual_seed(0)
    model, twin = torch.nn.Linear(3, 2), torch.nn.Linear(3, 2)
    twin.load_state_dict(model.state_dict())
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    twin_opt = torch.optim.SGD(twin.parameters(), lr=0.1, momentum=0.9)
    x = torch.tensor([[1.0, -2.0, 0.5], [0.25, 1.5, -1.0]])
    y = torch.tensor([[0.5, -1.0], [2.0, 0.0]])
    with pytest.raises(sy.SyftError, match=r"call model.fix_precision\(\) first"):
        opt.fix_precision()
    for o, m in ((opt, model), (twin_opt, twin)):  # one plaintext step: a float momentum buffer in the state
        o.zero_grad()
        torch.nn.functional.mse_loss(m(x), y).backward()
        o.step()
    model.fix_precision().share(*ws, crypto_provider=provider)
    with pytest.raises(sy.SyftError, match="precision 3, not base 10 precision 4"):
        opt.fix_precision(precision_fractional=4)
    assert opt.fix_precision(precision_fractional=3) is opt
    buf = opt.state[model.weight]["momentum_buffer"]
    assert isinstance(buf, sy.FixedPrecisionTensor) and buf.shared
    assert buf.child.parties == list(ws)
    sx, sy_ = share(x, ws, provider), share(y, ws, provider)
    for _ in range(3):
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(sx), sy_).backward()
        opt.step()
        twin_opt.zero_grad()
        torch.nn.functional.mse_loss(twin(x), y).backward()
        twin_opt.step()
    del buf, sx, sy_
    opt.state.clear()  # the shared momentum buffers: their shares leave the workers
    model.get().float_precision()
    assert torch.allclose(model.weight, twin.weight, atol=1e-2)
    assert torch.allclose(model.bias, twin.bias, atol=1e-2)


def test_max_min_and_their_indices_along_a_dim_of_int64_shares(parties):
    """x.share(...) of an int64 tensor (no fixed precision): max/min(dim) and argmax/argmin, short
    dims (all pairs) and one of 300 (a tournament), ties to the first index as torch."""
    ws, provider = parties
    g = torch.Generator().manual_seed(4)
    x = torch.randint(-50, 50, (3, 7), generator=g)
    x[0, 2] = x[0, 5] = 60  # a tie
    s = x.share(*ws, crypto_provider=provider)
    for dim in (0, 1):
        v, i = s.max(dim=dim)
        assert torch.equal(v.get(), x.max(dim).values) and torch.equal(i.get(), x.max(dim).indices)
        v, i = s.min(dim, keepdim=True)
        assert torch.equal(v.get(), x.min(dim, keepdim=True).values)
        assert torch.equal(i.get(), x.min(dim, keepdim=True).indices)
        assert torch.equal(s.argmax(dim=dim).get(), x.argmax(dim))
        assert torch.equal(s.argmin(dim=dim).get(), x.argmin(dim))
    assert torch.equal(s.argmax().get(), x.argmax())
    long = torch.randint(-10**6, 10**6, (300,), generator=g)
    sl = long.share(*ws, crypto_provider=provider)
    v, i = sl.max(dim=0)
    assert v.get().item() == long.max().item() and i.get().item() == long.argmax().item()
    assert sl.argmin(dim=0).get().item() == long.argmin().item()
    del s, sl, v, i


def test_gradients_of_max_and_min(parties):
    """max/min over every element (a tie shares the gradient evenly, as torch: a division by the shared
    count) and along a dim (the gradient goes to the first index among equal values: a one-hot of the
    shared index by the equality circuit), on shared and on plain fixed precision tensors."""
    ws, provider = parties
    x = torch.tensor([[0.5, 3.0, -2.0, 3.0], [1.25, -0.5, 1.25, -4.0]])  # ties: 3.0 twice, 1.25 twice
    ops = {"max": lambda t: t.max() * 2, "min": lambda t: t.min() * 3, "max(dim 1)": lambda t: t.max(1)[0],
           "min(dim 0)": lambda t: t.min(0)[0], "amax-like": lambda t: t.max(1, keepdim=True)[0] * t}
    for name, op in ops.items():
        xx = x.clone().requires_grad_(True)
        op(xx).sum().backward()
        sx = share(x, ws, provider, requires_grad=True)
        op(sx).sum().backward()
        assert torch.allclose(plain(sx.grad), xx.grad, atol=1e-2 if name in ("max", "min") else 2 * UNIT), name
        fx = x.fix_precision().requires_grad_(True)
        op(fx).sum().backward()
        assert torch.allclose(fx.grad.float_precision(), xx.grad, atol=UNIT), name
        del sx


def test_gradient_of_std_and_masked_fill_by_a_shared_mask(parties):
    """std's gradient (torch's formula masks where std == 0: a masked_fill by a comparison on shares),
    within sqrt's error (1% + 2·10^-3, on variances in its domain [0.05, 150]); masked_fill itself by
    a shared and by a public mask."""
    ws, provider = parties
    x = torch.tensor([[0.5, 1.5, -1.0, 2.0], [3.0, -2.5, 0.25, 1.0]])
    xx = x.clone().requires_grad_(True)
    xx.std(1).sum().backward()
    sx = share(x, ws, provider, requires_grad=True)
    sx.std(1).sum().backward()
    assert torch.allclose(plain(sx.grad), xx.grad, rtol=0.02, atol=5 * UNIT)
    s = share(x, ws, provider)
    assert torch.equal(plain(s.masked_fill(s > 0.75, 0.5)), x.masked_fill(x > 0.75, 0.5))
    assert torch.equal(plain(s.masked_fill(x < 0, -2.0)), x.masked_fill(x < 0, -2.0))
    assert torch.equal(x.fix_precision().masked_fill(x < 0, 3.0).float_precision(), x.masked_fill(x < 0, 3.0))
    del sx, s
