"""Every op on shared fixed precision tensors against plaintext, on random inputs (2 and 3 parties).

Error bounds: an encoding is off by at most half a unit (5e-4 at precision 3); a product by at
most one more unit per truncation; sums add the errors of their terms.
"""
import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import syft_lab as sy
from syft_lab.smpc import runtime

UNIT = 1e-3
SETTINGS = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

values = st.floats(min_value=-50, max_value=50, allow_nan=False, width=32)


def tensors(shape):
    n = math.prod(shape)
    return st.lists(values, min_size=n, max_size=n).map(lambda v: torch.tensor(v).view(shape))


def share(x, parties, provider):
    return x.fix_precision().share(*parties, crypto_provider=provider)


def plain(s):
    return s.get().float_precision()


def encoded(x):
    """x as fixed precision sees it (rounded to 3 decimals)."""
    return torch.round(x.double() * 1000) / 1000


@SETTINGS
@given(x=tensors((2, 3)), y=tensors((2, 3)))
def test_linear_ops(parties, x, y):
    ws, provider = parties
    sx, sy_ = share(x, ws, provider), share(y, ws, provider)
    ex, ey = encoded(x), encoded(y)
    assert torch.allclose(plain(sx + sy_).double(), ex + ey, atol=1e-6 + 1e-5 * 100)
    assert torch.allclose(plain(sx - sy_).double(), ex - ey, atol=2e-3)
    assert torch.allclose(plain(-sx).double(), -ex, atol=1e-3)
    assert torch.allclose(plain(sx + y).double(), ex + ey, atol=2e-3)  # a public tensor
    assert torch.allclose(plain(sx + 2.5).double(), ex + 2.5, atol=2e-3)  # a public number
    assert torch.allclose(plain(sx * 3).double(), ex * 3, atol=2e-3)  # a public integer: exact
    assert torch.allclose(plain(sx.sum()).double(), ex.sum(), atol=1e-2)
    assert torch.allclose(plain(sx.sum(0)).double(), ex.sum(0), atol=1e-2)


@SETTINGS
@given(x=tensors((3, 2)), y=tensors((3, 2)), d=st.integers(1, 1000))
def test_products_and_division(parties, x, y, d):
    ws, provider = parties
    sx, sy_ = share(x, ws, provider), share(y, ws, provider)
    ex, ey = encoded(x), encoded(y)
    # each factor is off by <= half a unit, the truncation by <= 1 unit (2 parties) / 2 units (3)
    bound = (ex.abs() + ey.abs()) * 5e-4 + 3 * UNIT
    assert ((plain(sx * sy_).double() - ex * ey).abs() <= bound).all()
    assert ((plain(sx * y).double() - ex * ey).abs() <= bound).all()  # shared times public tensor
    assert ((plain(sx * 0.25).double() - ex * 0.25).abs() <= 2 * UNIT).all()  # 1/4: division by 4
    assert ((plain(sx / d).double() - ex / d).abs() <= 2 * UNIT).all()
    assert ((plain(sx.mean()).double() - ex.mean()).abs() <= 2 * UNIT).all()


@SETTINGS
@given(x=tensors((2, 4)), w=tensors((4, 3)))
def test_matmul(parties, x, w):
    ws, provider = parties
    sx, sw = share(x, ws, provider), share(w, ws, provider)
    ex, ew = encoded(x), encoded(w)
    bound = (ex.abs() @ ew.abs()) * 1e-3 + 5 * UNIT
    assert ((plain(sx @ sw).double() - ex @ ew).abs() <= bound).all()
    assert ((plain(sx @ w).double() - ex @ ew).abs() <= bound).all()  # public weights
    assert ((plain(x @ sw).double() - ex @ ew).abs() <= bound).all()  # public inputs


def test_broadcasting(parties):
    ws, provider = parties
    x, row = torch.tensor([[1.5, -2.0, 0.25], [3.0, 0.0, -1.0]]), torch.tensor([0.5, -1.0, 2.0])
    sx, srow = share(x, ws, provider), share(row, ws, provider)
    assert torch.allclose(plain(sx + srow), x + row, atol=1e-3)
    assert torch.allclose(plain(sx * srow), x * row, atol=2e-3)
    assert torch.allclose(plain(srow + x), x + row, atol=1e-3)  # a public operand of the larger shape
    assert torch.allclose(plain(sx - row), x - row, atol=1e-3)
    assert torch.allclose(plain(2.0 - sx), 2.0 - x, atol=1e-3)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(x=tensors((5,)), y=tensors((5,)))
def test_comparisons_and_relu(parties, x, y):
    ws, provider = parties
    x = torch.cat([x, torch.tensor([0.0, -0.001, 0.001])])
    y = torch.cat([y, torch.tensor([0.0, 0.0, 0.0])])
    sx, sy_ = share(x, ws, provider), share(y, ws, provider)
    ex, ey = encoded(x), encoded(y)
    assert torch.equal(plain(sx > sy_), (ex > ey).float())
    assert torch.equal(plain(sx < sy_), (ex < ey).float())
    assert torch.equal(plain(sx >= sy_), (ex >= ey).float())
    assert torch.equal(plain(sx <= sy_), (ex <= ey).float())
    assert torch.equal(plain(sx > 0), (ex > 0).float())
    assert torch.equal(plain(sx < y), (ex < ey).float())  # against a public tensor
    assert torch.allclose(plain(sx.relu()).double(), ex.clamp(min=0), atol=1e-6)
    assert torch.allclose(plain(F.relu(sx)).double(), ex.clamp(min=0), atol=1e-6)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(x=tensors((3, 4)))
def test_max_and_argmax(parties, x):
    ws, provider = parties
    x[0, 2] = x[0, 1]  # a tie: the lowest index wins, as torch's
    sx = share(x, ws, provider)
    ex = encoded(x)
    assert torch.allclose(plain(sx.max()).double(), ex.max(), atol=1e-6)
    values, idx = sx.max(1)
    assert torch.allclose(plain(values).double(), ex.max(1).values, atol=1e-6)
    assert torch.equal(plain(idx).long(), ex.argmax(1))
    assert torch.equal(plain(sx.argmax(dim=1)).long(), ex.argmax(1))
    assert plain(sx.argmax()).item() == ex.argmax().item()


def test_conv2d(parties2):
    alice, bob, carol = parties2
    torch.manual_seed(0)
    img, k, b = torch.randn(2, 2, 6, 6), torch.randn(3, 2, 3, 3), torch.randn(3)
    s_img, s_k = share(img, (alice, bob), carol), share(k, (alice, bob), carol)
    want = F.conv2d(img, k, b, padding=1)
    got = plain(F.conv2d(s_img, s_k, b.fix_precision(), padding=1))
    assert (got - want).abs().max() < 0.05
    got = plain(F.conv2d(s_img, k, stride=2))  # public kernel
    assert (got - F.conv2d(img, k, stride=2)).abs().max() < 0.05


def test_negative_numbers_and_precision_boundaries(parties2):
    alice, bob, carol = parties2
    # a product carries scale 10^6; two-party truncation fails with probability |x * y| * 10^6 / 2^63
    # (docs/secure-computation.md): 3e3 * 3e3 -> 1e-6
    x = torch.tensor([-1e3, 3e3, -0.0005, 0.0005, -1234.5678], dtype=torch.float64)
    sx = x.fix_precision().share(alice, bob, crypto_provider=carol)
    assert torch.allclose(plain(sx * sx).double()[:2], encoded(x)[:2] ** 2, rtol=1e-6)
    assert plain(sx * 2)[0].item() == -2e3
    assert torch.allclose(plain(sx).double(), encoded(x), atol=1e-3)
    with pytest.raises(sy.SyftError, match="does not fit fixed precision"):
        torch.tensor([1e16]).fix_precision()
    with pytest.raises(sy.SyftError, match="NaN"):
        torch.tensor([float("nan")]).fix_precision()
    # the largest encodable magnitude at precision 3: 2^63 / 1000
    edge = torch.tensor([9.2e15], dtype=torch.float64)
    assert plain(edge.fix_precision().share(alice, bob, crypto_provider=carol)).double().item() == pytest.approx(9.2e15)


def test_integers_share_without_fixed_precision(parties2):
    alice, bob, carol = parties2
    x = torch.tensor([3, -4, 5])
    sx = x.share(alice, bob, crypto_provider=carol)
    assert torch.equal((sx + sx).get(), x * 2)
    assert torch.equal((sx * sx).get(), x * x)
    assert torch.equal((sx * 7).get(), x * 7)
    assert torch.equal((sx > 0).get(), (x > 0).long())
    assert torch.equal(sx.relu().get(), x.relu())


def test_refresh_gives_new_shares_of_the_same_secret(parties2):
    alice, bob, carol = parties2
    x = torch.tensor([0.5, -1.25])
    sx = x.fix_precision().share(alice, bob, crypto_provider=carol)
    workers = (alice, bob)
    old = [w.core.objects[p.id_at_location].clone() for w, p in zip(workers, sx.child.shares)]
    fresh = sx.refresh()
    new = [w.core.objects[p.id_at_location] for w, p in zip(workers, fresh.child.shares)]
    assert not any(torch.equal(o, n) for o, n in zip(old, new))
    assert torch.equal(plain(fresh), x)
    assert torch.equal(plain(sx), x)  # the old shares still hold it too


def test_rounds_per_op_in_process(parties2):
    alice, bob, carol = parties2
    a = torch.randn(4).fix_precision().share(alice, bob, crypto_provider=carol)
    runtime.reset_stats()
    a + a
    assert runtime.stats["messages"] == 0  # in process: no message


def test_pooled_triples_are_used_once_and_stay_exact_across_a_refill(parties2):
    """The offline phase: triples come from a pool refilled with POOL_MAX at a time; every product,
    before and after a refill, is right, and no triple is handed out twice."""
    from syft_lab.smpc import provider

    alice, bob, carol = parties2
    provider.clear_pool()
    x, y = torch.tensor([1.5, -2.25, 3.0]), torch.tensor([0.5, 4.0, -1.0])
    sx, sy_ = share(x, (alice, bob), carol), share(y, (alice, bob), carol)
    runtime.reset_stats()
    for _ in range(provider.POOL_MAX + 2):  # crosses one refill
        assert torch.allclose((sx * sy_).get().float_precision(), x * y, atol=3 * UNIT)
    seen = set()
    for _ in range(provider.POOL_MAX + 2):
        dealer, item = provider.pooled_triple(carol, [alice, bob], torch.ops.aten.mul.Tensor, (3,), (3,))
        a0 = dealer.local(item, 0)[0]
        key = tuple(a0.tolist())
        assert key not in seen
        seen.add(key)
        a, b, c = (ring_sum(dealer, item, k) for k in range(3))
        assert torch.equal(a * b, c)  # a valid triple: c = a * b in the ring
    dealer, item = provider.pooled_triple(carol, [alice, bob], torch.ops.aten.mm.default, (2, 3), (3, 4))
    a, b, c = (ring_sum(dealer, item, k) for k in range(3))
    assert torch.equal(a @ b, c)  # the batched dealer (bmm) makes valid matmul triples
    dealer, item = provider.pooled_triple(carol, [alice, bob], provider.SQUARE, (3,), (3,))
    a, b, c = (ring_sum(dealer, item, k) for k in range(3))
    assert torch.equal(a, b) and torch.equal(a * a, c)  # a square pair: (a, a, a^2)
    provider.clear_pool()


def ring_sum(dealer, item, k):
    return dealer.local(item, 0)[k] + dealer.local(item, 1)[k]
