"""Issue 39, item 5: actions that cannot break a lesson."""
import pytest
import torch
from torch import nn

import syft_lab as sy
from syft_lab.widget import ChainWidget, WorldWidget


def act(widget, action, worker, obj_id, **extra):
    return widget.handle_message({"type": "action", "req": 1, "action": action,
                                  "target": {"worker": worker, "id": obj_id}, **extra})


@pytest.fixture
def parties():
    ws = [sy.VirtualWorker(f"h4r_{n}") for n in ("alice", "bob", "carol")]
    yield ws
    for w in ws:
        w.close()


def test_reconstruct_on_a_parameter_of_a_shared_model_reconstructs_a_copy(parties):
    """Reconstruct on one parameter of a shared model fetched its shares and quietly broke the
    model (the next inference failed with an ObjectNotFoundError): the action reconstructs a copy,
    says so in its code line, and the model keeps working."""
    alice, bob, carol = parties
    torch.manual_seed(0)
    plain = nn.Sequential(nn.Linear(3, 2))
    x = torch.tensor([[0.5, -1.0, 2.0]])
    expected, weight_before = plain(x).detach(), plain[0].weight.detach().clone()
    cnn = plain.fix_precision().share(alice, bob, crypto_provider=carol)
    ns = {"cnn": cnn}
    weight = cnn[0].weight
    view = ChainWidget(weight, namespace=ns)  # sy.show(cnn[0].weight)
    root = view.chains[0]["root"]
    assert "get" in root["actions"]
    reply = act(view, "get", "me", root["id"])
    assert reply["ok"], reply
    assert reply["code"].startswith("cnn_0_weight = cnn[0].weight.detach().clone().get()"), reply["code"]
    assert "a copy: cnn keeps its own" in reply["code"]
    assert torch.allclose(ns["cnn_0_weight"].float_precision(), weight_before, atol=2e-3)
    sx = x.fix_precision().share(alice, bob, crypto_provider=carol)
    out = cnn(sx).get().float_precision()  # the model still runs on its shares
    assert torch.allclose(out, expected, atol=1e-2)
    view.close()
    del view, weight, cnn, sx
    ns.clear()
