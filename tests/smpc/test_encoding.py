"""What fixed precision cannot represent is a SyftError before anything is shared (issue 29, 6).

The ring holds encodings |round(x * scale)| < 2^63; a product of two encodings needs
|x * y| < 2^63 / scale^2 before its truncation, a product with an integer k needs
|x * k| < 2^63 / scale. Public (unshared) operands are checked; shared ones cannot be.
"""
import pytest
import torch

import syft_lab as sy
from syft_lab.tensors.fixed_precision import MAX_SCALE, product_bound

sy.hook()


@pytest.mark.parametrize("value", [-2**63, 2**63 - 1, -(2**63 - 1) // 1000 - 1, (2**63 - 1) // 1000 + 1])
def test_integers_beyond_the_ring_are_refused(value):
    with pytest.raises(sy.SyftError, match="does not fit fixed precision"):
        torch.tensor([value]).fix_precision()


def test_the_largest_integers_encode_exactly():
    bound = (2**63 - 1) // 1000
    fx = torch.tensor([bound, -bound, 0]).fix_precision()
    assert fx.child.tolist() == [bound * 1000, -bound * 1000, 0]


@pytest.mark.parametrize("value", [9.3e15, -9.3e15, 9.2233720368547758e15, float(2**63)])
def test_floats_beyond_the_ring_are_refused(value):
    with pytest.raises(sy.SyftError, match="does not fit fixed precision"):
        torch.tensor([value], dtype=torch.float64).fix_precision()


def test_a_float_just_inside_encodes():
    x = torch.tensor([9.2e15, -9.2e15], dtype=torch.float64)
    assert torch.equal(x.fix_precision().child, torch.tensor([9_200_000_000_000_000_000, -9_200_000_000_000_000_000]))


@pytest.mark.parametrize("base,precision", [(2, 30), (10, 8), (2, 24), (3, 20), (10, 70)])
def test_precisions_whose_products_cannot_fit_are_refused(base, precision):
    with pytest.raises(sy.SyftError, match="too large"):
        torch.tensor([9.0]).fix_precision(base=base, precision=precision)


@pytest.mark.parametrize("base,precision", [(2, 23), (10, 7), (10, 3), (2, 16)])
def test_the_largest_precisions_multiply_correctly(base, precision, parties2):
    alice, bob, carol = parties2
    assert base ** precision <= MAX_SCALE
    x = torch.tensor([9.0, -3.5, 100.0])
    fx = x.fix_precision(base=base, precision=precision)
    assert torch.allclose((fx * fx).float_precision(), x * x, rtol=1e-6)
    # shared: small values, as 2-party truncation wraps with probability |x * y| * scale^2 / 2^63
    small = torch.tensor([1.5, -0.5])
    sx = small.fix_precision(base=base, precision=precision).share(alice, bob, crypto_provider=carol)
    got = (sx * sx).get().float_precision()
    assert torch.allclose(got, small * small, atol=4.0 / base ** precision + 1e-6)
    del sx


def test_public_products_that_overflow_are_refused():
    big = torch.tensor([6e15], dtype=torch.float64).fix_precision()
    with pytest.raises(sy.SyftError, match="overflows the 64-bit ring"):
        big * 2
    with pytest.raises(sy.SyftError, match="overflows the 64-bit ring"):
        big * torch.tensor([2])
    x = torch.tensor([1e7]).fix_precision()
    assert product_bound(1000) == pytest.approx(9.223e12, rel=1e-3)
    with pytest.raises(sy.SyftError, match=r"2\^63 / scale\^2 = 9.223e\+12"):
        x * x
    m = torch.full((2, 2), 3e6).fix_precision()
    with pytest.raises(sy.SyftError, match="overflows"):
        m @ m  # each product fits, the sum of two does not
    ok = torch.full((2, 2), 2e6).fix_precision()
    assert torch.allclose((ok @ ok).float_precision(), torch.full((2, 2), 8e12), rtol=1e-6)
    assert (big * 1).float_precision().double().item() == pytest.approx(6e15)


def test_errors_come_before_anything_is_shared(parties2):
    alice, bob, carol = parties2
    for bad in (lambda: torch.tensor([-2**63]).fix_precision().share(alice, bob, crypto_provider=carol),
                lambda: torch.tensor([9.0]).fix_precision(base=2, precision=30).share(alice, bob,
                                                                                    crypto_provider=carol)):
        with pytest.raises(sy.SyftError):
            bad()
        assert alice.objects == {} and bob.objects == {}


def test_public_sums_that_overflow_are_refused():
    """A sum of public encodings must stay within |x + y| < 2^63 / scale (9.22e15 at scale 1000)."""
    big = torch.tensor([6e15], dtype=torch.float64).fix_precision()
    for bad in (lambda: big + big, lambda: big - (-big), lambda: -big - big, lambda: big + 4e15,
                lambda: torch.tensor([6e15, 6e15], dtype=torch.float64).fix_precision().sum()):
        with pytest.raises(sy.SyftError, match=r"overflows the 64-bit ring.*\|x \+ y\| < 9.223e\+15"):
            bad()
    fits = torch.tensor([4.6e15, 4.6e15], dtype=torch.float64).fix_precision()
    assert fits.sum().float_precision().double().item() == pytest.approx(9.2e15)
    assert (fits[0] + fits[1]).float_precision().double().item() == pytest.approx(9.2e15)


def test_shared_sums_are_not_checked_but_public_addends_are(parties2):
    """A shared operand cannot be checked (it would need the secret); an addend that alone cannot be
    encoded still is."""
    alice, bob, carol = parties2
    sx = torch.tensor([1.0]).fix_precision().share(alice, bob, crypto_provider=carol)
    with pytest.raises(sy.SyftError, match="does not fit fixed precision"):
        sx + torch.tensor([1e16], dtype=torch.float64)
    assert torch.allclose((sx + 2.5).get().float_precision(), torch.tensor([3.5]))
    del sx
