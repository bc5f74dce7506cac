"""ptr.fix_precision() and ptr.share(...): data on a worker is encoded and secret-shared where it
lives (PySyft 0.2's Parts 10 and 11 bis); the values never come to this process."""
import pytest
import torch

import syft_lab as sy

sy.hook()


def _record_fetches(worker, monkeypatch):
    """The ids of every object this process fetches or copies out of ``worker``."""
    seen = []
    for name in ("_fetch", "_copy_out"):
        original = getattr(worker, name)

        def recording(obj_id, original=original):
            seen.append(obj_id)
            return original(obj_id)

        monkeypatch.setattr(worker, name, recording)
    return seen


def test_fix_precision_and_share_on_the_owner(parties, monkeypatch):
    ws, provider = parties
    owner = ws[-1]
    x = torch.tensor([[0.5, -1.25, 3.0], [2.0, -0.001, 7.5]])
    ptr = x.send(owner)
    fetched = _record_fetches(owner, monkeypatch)
    fp = ptr.fix_precision()
    assert fp.on_worker and fp.child.location is owner
    sx = fp.share(*ws, crypto_provider=provider)
    assert [s.location for s in sx.child.shares] == list(ws)
    own_share = sx.child.shares[-1].id_at_location
    # only the other parties' shares (uniform words) and one "does it fit" bool left the owner
    assert ptr.id_at_location not in fetched and fp.child.id_at_location not in fetched
    assert own_share not in fetched
    assert len(fetched) == len(ws) - 1 + 1
    monkeypatch.undo()
    assert torch.allclose((sx * 2 + 1).get().float_precision(), x * 2 + 1)
    assert torch.allclose((sx * sx).get().float_precision(), x * x, atol=2e-3)
    assert torch.equal(ptr.get(), x)  # the original stays where it was


def test_int64_pointer_shares_and_pysyft_spellings(parties2):
    alice, bob, carol = parties2
    ptr = torch.tensor([1, -2, 3]).send(alice)
    s = ptr.share(alice, bob, crypto_provider=carol)
    assert torch.equal(s.get(), torch.tensor([1, -2, 3]))
    p2 = torch.tensor([0.25, 4.0]).send(bob)
    fp = p2.fix_precision(precision_fractional=4)
    assert fp.precision == 4
    assert torch.allclose(fp.get().float_precision(), torch.tensor([0.25, 4.0]))  # .get(): the encoding comes here
    del p2


def test_what_stays_unsupported_is_a_clear_error(parties2):
    alice, bob, carol = parties2
    ptr = torch.tensor([1.5, -2.0]).send(alice)
    with pytest.raises(sy.SyftError, match=r"ptr.fix_precision\(\) first"):
        ptr.share(alice, bob, crypto_provider=carol)
    fp = ptr.fix_precision()
    with pytest.raises(sy.SyftError, match="parties 'alice' is one of"):
        fp.share(bob, carol)  # every share would pass through this process
    with pytest.raises(sy.SyftError, match="encoded on a worker"):
        fp + fp
    with pytest.raises(sy.SyftError, match=r"encoded on 'alice': bring it here with .get\(\)"):
        fp.float_precision()
    with pytest.raises(sy.SyftError, match="does not fit fixed precision"):
        torch.tensor([1e17]).send(alice).fix_precision()
    with pytest.raises(sy.SyftError, match="does not fit fixed precision"):
        torch.tensor([float("nan")]).send(alice).fix_precision()
    del ptr, fp
