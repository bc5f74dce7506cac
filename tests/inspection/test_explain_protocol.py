"""sy.explain reads a shared value through the layer protocol (#25 item 1): any layer whose
``child_fields`` tell its children which share they are is explained, its crypto provider from
``world_fields``; no layer class is named. ``ToyShares`` is defined only here."""
import pytest
import torch

import syft_lab as sy
from syft_lab.errors import SyftError
from syft_lab.inspection.explain import explain_dict
from syft_lab.tensors.base import ChainLayer, make_layer


class ToyShares(ChainLayer):
    kind = "toy_shares"

    @staticmethod
    def __new__(cls, parts, provider=None):
        r = make_layer(cls, parts[0].shape, parts[0].dtype, torch.device("cpu"))
        r.parts, r.provider = list(parts), provider
        return r

    def __init__(self, *args, **kwargs):
        pass

    @classmethod
    def __torch_dispatch__(cls, func, types, args, kwargs=None):
        raise NotImplementedError("a toy: only inspected")

    def layer_children(self):
        return list(self.parts)

    def child_fields(self, i):
        return {"group": 77, "share": {"index": i, "of": len(self.parts)}}

    def world_fields(self):
        return {"group": 77, "distributed": [p.location.id for p in self.parts],
                **({"crypto_provider": self.provider} if self.provider else {})}


def test_a_layer_that_tells_its_children_their_share_is_explained(workers):
    bob, alice = workers
    toy = ToyShares([torch.zeros(2).send(bob), torch.zeros(2).send(alice)], provider="dan")
    ex = explain_dict(toy, "t")
    assert [(p["worker"], p["share"], p["of"], p["sent"]) for p in ex["parties"]] == [
        ("bob", 1, 2, False), ("alice", 2, 2, False)]
    assert [p["id_at_location"] for p in ex["parties"]] == [c.id_at_location for c in toy.parts]
    assert ex["crypto_provider"] == "dan" and ex["decode"] is None and not ex["reconstructed"]
    assert ex["lines"][1] == "t = (share 1 (on bob) + share 2 (on alice)) mod 2^64"
    # a share fetched back: it says so
    toy.parts[0].get()
    assert [p["sent"] for p in explain_dict(toy, "t")["parties"]] == [True, False]
    del toy


def test_a_layer_that_tells_no_share_has_nothing_to_explain():
    with pytest.raises(SyftError, match="got a LoggingTensor: nothing to reconstruct"):
        explain_dict(sy.LoggingTensor(torch.ones(2)))
