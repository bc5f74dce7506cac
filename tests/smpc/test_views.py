"""The tree of a shared tensor, as the inspection model and the text repr give it."""
import torch

import syft_lab as sy


def test_chain_of_a_shared_fixed_precision_tensor_is_a_tree(parties2):
    alice, bob, carol = parties2
    x = torch.tensor([0.1, -0.2, 0.3])
    fx = x.fix_precision()
    assert repr(fx).startswith("FixedPrecisionTensor")
    assert "[ 100, -200,  300]" in repr(fx)  # a local encoding may be shown: it is not secret here
    sx = fx.share(alice, bob, crypto_provider=carol)
    root = sy.chain(sx).to_dict()["root"]
    assert root["kind"] == "fixed_precision" and root["precision"] == 3 and root["base"] == 10
    assert root["dtype"] == "float32"
    [shared] = root["children"]
    assert shared["kind"] == "shared" and shared["type"] == "AdditiveSharingTensor"
    assert shared["parties"] == ["alice", "bob"] and shared["crypto_provider"] == "carol"
    assert {"label": "crypto provider", "value": "carol"} in shared["annotations"]
    assert "a share alone reveals nothing" in " ".join(shared["display"]["lines"])
    assert not any("crypto provider" in line for line in shared["display"]["lines"])  # said once: the annotation
    assert root["actions"] == ["get", "float_precision"]  # reconstruct, decode
    shares = shared["children"]
    assert [c["kind"] for c in shares] == ["pointer", "pointer"]
    assert [c["location"] for c in shares] == ["alice", "bob"]
    assert {c["group"] for c in shares} == {shared["group"]}
    assert [c["share"] for c in shares] == [{"index": 0, "of": 2}, {"index": 1, "of": 2}]
    for c in shares:
        [leaf] = c["children"]
        assert leaf["kind"] == "tensor" and leaf["owner"] == c["location"] and leaf["preview"] is None
    text = repr(sx)
    assert text.startswith("FixedPrecisionTensor")
    assert "AdditiveSharingTensor" in text and "crypto provider: carol" in text
    assert "-> alice:" in text and "-> bob:" in text


def test_results_of_ops_are_trees_with_their_own_group(parties2):
    alice, bob, carol = parties2
    sx = torch.tensor([1.0, 2.0]).fix_precision().share(alice, bob, crypto_provider=carol)
    y = sx * sx
    g1 = sy.chain(sx).to_dict()["root"]["children"][0]["group"]
    g2 = sy.chain(y).to_dict()["root"]["children"][0]["group"]
    assert g1 != g2
    world = sy.world({"sx": sx, "y": y}).to_dict()
    lanes = {w["id"]: w for w in world["workers"]}
    assert len(lanes["alice"]["objects"]) == 2 and len(lanes["bob"]["objects"]) == 2
    assert lanes["carol"]["objects"] == []  # the provider keeps nothing between ops
