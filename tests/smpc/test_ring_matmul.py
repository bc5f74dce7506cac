"""The ring's product on float64 BLAS (syft_lab/smpc/ring.py ``matmul``): exactly torch's int64 matmul
modulo 2^64, at the limit of the inner dimension where its float64 sums stay exact and past it."""
import pytest
import torch

from syft_lab.smpc import ring

WORDS = (-2**63, 2**63 - 1)


@pytest.mark.parametrize("n,k,m", [(1, 1, 1), (100, 100, 100), (7, ring.LIMB_K, 3), (4, ring.LIMB_K + 1, 2),
                                   (32, 10, 10)])
def test_matmul_is_the_int64_product_mod_2_64(n, k, m):
    g = torch.Generator().manual_seed(n * 1000 + k)
    a = torch.randint(*WORDS, (n, k), generator=g, dtype=torch.int64)
    b = torch.randint(*WORDS, (k, m), generator=g, dtype=torch.int64)
    assert torch.equal(ring.matmul(a, b), a @ b)
    if k <= ring.LIMB_K:
        assert torch.equal(ring.limb_matmul(a, b), a @ b)
    c = torch.randint(*WORDS, (n, m), generator=g, dtype=torch.int64)
    assert torch.equal(ring.addmm(c, a, b), c + a @ b)


@pytest.mark.parametrize("fill_a,fill_b", [(-1, -1), (2**63 - 1, -2**63), (-2**63, -2**63)])
def test_matmul_is_exact_for_the_largest_limbs(fill_a, fill_b):
    """Every limb at its largest: the float64 sums are at their largest (just below 2^53)."""
    k = ring.LIMB_K
    a = torch.full((3, k), fill_a, dtype=torch.int64)
    b = torch.full((k, 2), fill_b, dtype=torch.int64)
    assert torch.equal(ring.limb_matmul(a, b), a @ b)
    assert torch.equal(ring.matmul_sum([(a[:, :100], b[:100]), (a[:, 100:], b[100:])]), a @ b)


def test_matmul_of_small_signed_values_is_their_integer_product():
    a = torch.tensor([[1, -2], [3, 4]], dtype=torch.int64)
    b = torch.tensor([[-5, 6], [7, -8]], dtype=torch.int64)
    assert ring.matmul(a, b).tolist() == [[-19, 22], [13, -14]]


@pytest.mark.parametrize("k", [1, 100, 255, 256])
def test_limbs_are_exact_on_random_full_range_words_up_to_the_largest_inner_dimension(k):
    """The float64 limb path itself (not the dispatch), wrap-around mod 2^64 included, at k = LIMB_K."""
    assert ring.LIMB_K == 256
    g = torch.Generator().manual_seed(k)
    for _ in range(3):
        a = torch.randint(*WORDS, (40, k), generator=g, dtype=torch.int64)
        b = torch.randint(*WORDS, (k, 30), generator=g, dtype=torch.int64)
        assert torch.equal(ring.limb_matmul(a, b), a @ b)


def test_limbs_refuse_an_inner_dimension_past_the_exact_limit():
    a = torch.zeros((2, ring.LIMB_K + 1), dtype=torch.int64)
    with pytest.raises(ValueError, match="inner dimension"):
        ring.limb_matmul(a, a.T.contiguous())


def test_batched_products_and_sums_of_products_are_the_int64_ones():
    g = torch.Generator().manual_seed(7)
    A = torch.randint(*WORDS, (3, 20, 60), generator=g, dtype=torch.int64)
    B = torch.randint(*WORDS, (3, 60, 9), generator=g, dtype=torch.int64)
    A2 = torch.randint(*WORDS, (3, 20, 196), generator=g, dtype=torch.int64)
    B2 = torch.randint(*WORDS, (3, 196, 9), generator=g, dtype=torch.int64)
    assert torch.equal(ring.limb_matmul(A, B), torch.bmm(A, B))
    assert torch.equal(ring.matmul_sum([(A, B), (A2, B2)]), torch.bmm(A, B) + torch.bmm(A2, B2))  # K = 256
    a, b = A2[0], B2[0]
    e = torch.randint(*WORDS, (20, 100), generator=g, dtype=torch.int64)
    f = torch.randint(*WORDS, (100, 9), generator=g, dtype=torch.int64)
    assert torch.equal(ring.matmul_sum([(a, b), (e, f)]), a @ b + e @ f)  # K = 296: the int64 kernel


@pytest.mark.parametrize("faster", ["limbs", "int64"])
def test_either_path_the_dispatch_takes_gives_the_same_product(monkeypatch, faster):
    """ring.matmul runs each product on the path measured faster here (and now and then the other):
    whichever it takes, the value is the same, so the choice is never seen."""
    monkeypatch.setattr(ring, "_cost", {"limbs": 1.0 if faster == "limbs" else 2.0,
                                        "int64": 1.0 if faster == "int64" else 2.0})
    monkeypatch.setattr(ring, "_calls", [0])
    assert ring.prefer_limbs() is (faster == "limbs")
    g = torch.Generator().manual_seed(3)
    a = torch.randint(*WORDS, (100, 100), generator=g, dtype=torch.int64)
    b = torch.randint(*WORDS, (100, 100), generator=g, dtype=torch.int64)
    want = a @ b
    for _ in range(ring.EXPLORE + 2):  # one of them on the other path
        assert torch.equal(ring.matmul(a, b), want)
        assert torch.equal(ring.matmul_sum([(a, b), (b, a)]), want + b @ a)
    assert ring._cost["limbs"] is not None and ring._cost["int64"] is not None


def test_a_shared_matmul_gives_the_product_whichever_kernel_is_faster(monkeypatch):
    """What a user sees: a 2-party shared 100x100 matmul is x @ w within the documented error
    (one unit of 10^-3 per truncation plus the encoding's rounding), on either kernel."""
    import syft_lab as sy

    sy.hook()
    alice, bob, carol = (sy.VirtualWorker(f"ring_mm_{i}") for i in range(3))
    try:
        g = torch.Generator().manual_seed(11)
        x, w = torch.rand((100, 100), generator=g) * 2 - 1, torch.rand((100, 100), generator=g) * 2 - 1
        sx = x.fix_precision().share(alice, bob, crypto_provider=carol)
        sw = w.fix_precision().share(alice, bob, crypto_provider=carol)
        want = (x * 1000).round() @ (w * 1000).round() / 1e6
        for faster in ("limbs", "int64"):
            monkeypatch.setattr(ring, "_cost", {"limbs": 1.0 if faster == "limbs" else 2.0,
                                                "int64": 1.0 if faster == "int64" else 2.0})
            got = (sx @ sw).get().float_precision()
            assert (got - want).abs().max() <= 2e-3
    finally:
        for v in (alice, bob, carol):
            v.close()


def test_a_product_past_the_scratch_size_is_exact_and_not_kept(monkeypatch):
    monkeypatch.setattr(ring, "SCRATCH_MAX", 100)
    monkeypatch.setattr(ring._scratch, "bufs", {}, raising=False)
    g = torch.Generator().manual_seed(5)
    a = torch.randint(*WORDS, (30, 40), generator=g, dtype=torch.int64)
    b = torch.randint(*WORDS, (40, 20), generator=g, dtype=torch.int64)
    assert torch.equal(ring.limb_matmul(a, b), a @ b)
    assert ring._scratch.bufs == {}  # nothing kept past SCRATCH_MAX
    small = torch.ones((2, 3), dtype=torch.int64)
    assert torch.equal(ring.limb_matmul(small, small.T.contiguous()), small @ small.T)
    assert len(ring._scratch.bufs) == 4  # int64 and float64 limbs of each operand, kept for the next
