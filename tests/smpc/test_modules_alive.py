"""A module's fix_precision, share and float_precision while a forward result is alive: its
tensors are replaced in the module's slots (the live result can still backward), as get and
send do; with nothing alive they are swapped in place (an optimizer built before keeps them)."""
import torch
import torch.nn as nn

import syft_lab as sy


def test_fix_precision_share_and_back_while_a_forward_result_is_alive():
    sy.hook()
    alice, bob, carol = (sy.VirtualWorker(f"alive_{n}") for n in ("alice", "bob", "carol"))
    try:
        torch.manual_seed(0)
        model = nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2))
        x = torch.randn(2, 1, 5, 5)
        out = model(x)  # alive: autograd saved the conv weight and the batch norm's parameters
        expected = [t.detach().clone() for t in model.parameters()]
        model.fix_precision().share(alice, bob, crypto_provider=carol)
        assert all(type(t).__name__ == "FixedPrecisionTensor" and t.shared for t in model.parameters())
        out.sum().backward()  # the live result still backwards through the original weights
        model.get().float_precision()
        for got, want in zip(model.parameters(), expected):
            assert torch.allclose(got, want, atol=2e-3)
        weight = model[0].weight
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        model.fix_precision()  # nothing alive now: swapped in place, the optimizer's parameter is the same object
        assert model[0].weight is weight and opt.param_groups[0]["params"][0] is weight
    finally:
        for w in (alice, bob, carol):
            w.close()


def test_pysyft_keywords_left_out_say_what_to_use():
    import pytest
    sy.hook()
    alice, bob = sy.VirtualWorker("kw_alice"), sy.VirtualWorker("kw_bob")
    try:
        x = torch.tensor([1.5])
        with pytest.raises(NotImplementedError, match=r"share\(protocol=...\) is PySyft 0.2's.*FSS.*docs/pysyft.md"):
            x.fix_precision().share(alice, bob, protocol="fss")
        with pytest.raises(sy.SyftError, match=r"fix_precision\(dtype=...\).*32-bit rings are left out"):
            x.fix_precision(dtype="int")
        with pytest.raises(NotImplementedError, match=r"field="):
            nn.Linear(1, 1).fix_precision(field=2**32)
        with pytest.raises(TypeError, match="unexpected keyword argument 'colour'"):
            x.fix_precision(colour=1)
    finally:
        alice.close(); bob.close()
