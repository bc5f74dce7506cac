"""Issue 39, item 5: ``cnn[0].weight.get()`` on a shared model reconstructs that parameter and
its shares leave their parties; the model's next inference failed with a 40-line
ObjectNotFoundError that named neither the parameter nor why. Using a shared value after its
``.get()`` now says which value it is, that it was reconstructed, and what to do instead."""
import pytest
import torch
from torch import nn

import syft_lab as sy
from syft_lab.errors import ObjectNotFoundError


@pytest.fixture
def parties():
    ws = [sy.VirtualWorker(f"h4p_{n}") for n in ("alice", "bob", "carol")]
    yield ws
    for w in ws:
        w.close()


def test_a_model_whose_parameter_was_reconstructed_names_it_and_says_why(parties):
    alice, bob, carol = parties
    torch.manual_seed(0)
    plain = nn.Sequential(nn.Linear(3, 2))
    weight = plain[0].weight.detach().clone()
    cnn = plain.fix_precision().share(alice, bob, crypto_provider=carol)
    got = cnn[0].weight.get()  # PySyft's get: the shares leave alice and bob
    assert torch.allclose(got.float_precision(), weight, atol=2e-3)
    sx = torch.tensor([[0.5, -1.0, 2.0]]).fix_precision().share(alice, bob, crypto_provider=carol)
    with pytest.raises(sy.SyftError) as e:
        cnn(sx)
    assert not isinstance(e.value, ObjectNotFoundError)
    assert str(e.value) == (
        "cnn[0].weight was reconstructed with .get(): its shares left h4p_alice and h4p_bob, so it cannot take part "
        "in a computation any more (cnn cannot run). To look at a parameter, reconstruct a copy: "
        "cnn[0].weight.detach().clone().get(); to use the model again, share it again")
    del cnn, sx, got


def test_a_shared_value_used_after_its_get_says_so(parties):
    alice, bob, carol = parties
    sx = torch.tensor([1.0, 2.0]).fix_precision().share(alice, bob, crypto_provider=carol)
    value = sx.get().float_precision()
    with pytest.raises(sy.SyftError) as e:
        sx + sx
    assert not isinstance(e.value, ObjectNotFoundError)
    assert str(e.value) == ("sx was reconstructed with .get(): its shares left h4p_alice and h4p_bob, so it cannot "
                            "take part in a computation any more: compute with the value .get() returned")
    assert value.tolist() == [1.0, 2.0]
    del sx
