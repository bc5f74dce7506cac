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
    c = torch.randint(*WORDS, (n, m), generator=g, dtype=torch.int64)
    assert torch.equal(ring.addmm(c, a, b), c + a @ b)


@pytest.mark.parametrize("fill_a,fill_b", [(-1, -1), (2**63 - 1, -2**63), (-2**63, -2**63)])
def test_matmul_is_exact_for_the_largest_limbs(fill_a, fill_b):
    """Every limb at its largest: the float64 sums are at their largest (just below 2^53)."""
    k = ring.LIMB_K
    a = torch.full((3, k), fill_a, dtype=torch.int64)
    b = torch.full((k, 2), fill_b, dtype=torch.int64)
    assert torch.equal(ring.matmul(a, b), a @ b)


def test_matmul_of_small_signed_values_is_their_integer_product():
    a = torch.tensor([[1, -2], [3, 4]], dtype=torch.int64)
    b = torch.tensor([[-5, 6], [7, -8]], dtype=torch.int64)
    assert ring.matmul(a, b).tolist() == [[-19, 22], [13, -14]]
