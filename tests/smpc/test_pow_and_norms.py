"""Issue 41, item 3: pow with any public exponent (it took positive integers only), so torch.norm
with p = 1, 1.5, 2, 3, fro and inf, cosine_similarity, number ** x, and the gradients of pow(x, 1),
pow(x, 0.5) and the norm, against plain torch on 2 and 3 parties (VirtualWorkers). Bounds: the
documented ones (docs/secure-computation.md, pow), inside each approximation's domain."""
import pytest
import torch
import torch.nn.functional as F

from syft_lab.errors import SyftError

POSITIVE = torch.linspace(0.2, 4.0, 24).view(4, 6)  # reciprocal's, sqrt's and log's domains
SIGNED = torch.linspace(-1.5, 1.5, 24)[torch.randperm(24, generator=torch.Generator().manual_seed(0))].view(4, 6)


def _value(t):
    return t.get().float_precision() if t.shared else t.float_precision()


def _share(t, parties, requires_grad=False):
    ws, provider = parties
    return t.fix_precision().share(*ws, crypto_provider=provider, requires_grad=requires_grad)


def _assert_within(got, want, rel, abs_):
    err = (got - want).abs()
    limit = rel * want.abs() + abs_
    assert bool((err <= limit).all()), f"worst error {err.max().item():.4g} (bound {limit.flatten()[err.argmax()]:.4g})"


# exponent: (relative, absolute) error bound
POWERS = {2: (0.003, 0.003), 3: (0.005, 0.01), 5: (0.005, 0.05), 0: (0, 0), 1: (0, 1e-3), -1: (0.01, 2e-3),
          -2: (0.02, 4e-3), 0.5: (0.01, 2e-3), -0.5: (0.01, 3e-3), 1.5: (0.01, 3e-3), 2.5: (0.01, 0.02),
          -1.5: (0.02, 3e-3), 0.3: (0.02, 6e-3), -1.7: (0.03, 6e-3)}


@pytest.mark.parametrize("k", list(POWERS), ids=[f"x ** {k}" for k in POWERS])
def test_pow_with_a_public_exponent_is_torchs(parties, k):
    out = _share(POSITIVE, parties) ** k
    assert out.shared  # x ** 0 too: ones, shared like x
    _assert_within(_value(out), POSITIVE.double() ** k, *POWERS[k])


def test_a_number_to_a_shared_power_is_torchs(parties):
    _assert_within(_value(2.0 ** _share(SIGNED, parties)), 2.0 ** SIGNED.double(), 0.01, 5e-3)


NORMS = {
    "norm": (lambda t: torch.norm(t), (0.01, 3e-3)),
    "norm fro, dim 1": (lambda t: torch.norm(t, "fro", dim=1), (0.01, 3e-3)),
    "norm p=1": (lambda t: torch.norm(t, 1), (0, 0.013)),
    "norm p=inf": (lambda t: torch.norm(t, float("inf")), (0, 1e-3)),
    "norm p=3": (lambda t: torch.norm(t, 3), (0.03, 0.01)),
    "norm p=1.5": (lambda t: torch.norm(t, 1.5), (0.03, 0.01)),
    "vector_norm, dim 0": (lambda t: torch.linalg.vector_norm(t, 2, dim=0), (0.01, 3e-3)),
    "cosine_similarity": (lambda t: F.cosine_similarity(t, t.flip(1) + 0.5, dim=1), (0.02, 0.01)),
}


@pytest.mark.parametrize("name", list(NORMS), ids=list(NORMS))
def test_norms_are_torchs(parties, name):
    f, bound = NORMS[name]
    _assert_within(_value(f(_share(SIGNED, parties))), f(SIGNED.double()), *bound)


GRADS = {
    "pow(x, 1)": lambda t: t.pow(1).sum(),
    "pow(x, 0.5)": lambda t: (t ** 0.5).sum(),
    "pow(x, -1)": lambda t: (t ** -1).sum(),
    "norm": lambda t: torch.norm(t),
}


@pytest.mark.parametrize("name", list(GRADS), ids=list(GRADS))
def test_gradients_of_pow_and_norm_are_torchs(parties, name):
    plain = POSITIVE.clone().requires_grad_(True)
    GRADS[name](plain).backward()
    sx = _share(POSITIVE, parties, requires_grad=True)
    GRADS[name](sx).backward()
    _assert_within(_value(sx.grad), plain.grad.double(), 0.02, 5e-3)


def test_a_tensor_of_exponents_is_refused_with_what_to_use(parties):
    sx = _share(POSITIVE, parties)
    with pytest.raises(SyftError, match="one public number.*exp\\(y \\* log\\(x\\)\\)"):
        sx ** torch.tensor([1.0, 2.0, 3.0, 1.0, 2.0, 3.0])
    with pytest.raises(SyftError, match="positive number"):
        (-2.0) ** sx
