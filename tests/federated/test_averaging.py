"""sy.federated_avg equals the hand-computed weighted average, here or on a worker."""
import pytest
import torch
from torch import nn

import syft_lab as sy
from syft_lab.errors import SyftError


def models(n=3, seed=0):
    torch.manual_seed(seed)
    return [nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2)) for _ in range(n)]


def by_hand(ms, counts):
    """sum_k (n_k / N) * theta_k, in the models' order."""
    total = float(sum(counts))
    out = {}
    for name in dict(ms[0].named_parameters()):
        acc = None
        for m, n in zip(ms, counts):
            term = dict(m.named_parameters())[name].detach() * (n / total)
            acc = term if acc is None else acc + term
        out[name] = acc
    return out


def values(m):
    return {k: v.detach().clone() for k, v in m.state_dict().items()}


def test_local_models_weighted_by_sample_counts():
    m1, m2, m3 = models()
    before = [values(m) for m in (m1, m2, m3)]
    avg = sy.federated_avg({"bob": m1, "alice": m2, "carol": m3}, {"bob": 600, "alice": 300, "carol": 100})
    expected = by_hand([m1, m2, m3], [600, 300, 100])
    got = dict(avg.named_parameters())
    assert all(torch.equal(got[k], expected[k]) for k in expected)
    assert not torch.equal(got["0.weight"], sum(dict(m.named_parameters())["0.weight"] for m in (m1, m2, m3)) / 3)
    assert all(type(p) is nn.Parameter and p.requires_grad for p in avg.parameters())
    assert all(torch.equal(b[k], values(m)[k]) for b, m in zip(before, (m1, m2, m3)) for k in b)
    avg[0].weight.data.add_(1)  # the result shares nothing with the inputs
    assert torch.equal(m1[0].weight, before[0]["0.weight"])


def test_no_weights_is_a_plain_mean_and_a_dataset_gives_its_counts(bob, alice):
    m1, m2 = models(2)
    plain = sy.federated_avg({"a": m1, "b": m2})
    assert all(torch.equal(p, by_hand([m1, m2], [1, 1])[k]) for k, p in plain.named_parameters())
    fds = sy.BaseDataset(torch.zeros(9, 3), torch.zeros(9), name="w").federate((bob, alice), indices=[range(6), range(6, 9)])
    weighted = sy.federated_avg({"bob": m1, "alice": m2}, fds)
    assert all(torch.equal(p, by_hand([m1, m2], [6, 3])[k]) for k, p in weighted.named_parameters())
    # keyed by workers that hold one dataset: weighted by its samples without being told
    implied = sy.federated_avg({"bob": m1, "alice": m2})
    assert all(torch.equal(p, by_hand([m1, m2], [6, 3])[k]) for k, p in implied.named_parameters())
    other = sy.BaseDataset(torch.zeros(4, 3), torch.zeros(4), name="v").federate((bob, alice))
    with pytest.raises(SyftError, match="cannot tell which dataset.*pass weights="):
        sy.federated_avg({"bob": m1, "alice": m2})
    other.unload()
    fds.unload()


def test_remote_models_are_averaged_on_one_worker_and_left_as_they_were(bob, alice, monkeypatch):
    m1, m2 = models(2)
    expected = by_hand([m1, m2], [30, 10])
    r1, r2 = m1.copy().send(bob), m2.copy().send(alice)

    def no_fetch(*args, **kwargs):
        raise AssertionError("a client model was fetched to the notebook")

    for w in (bob, alice):
        monkeypatch.setattr(w, "_fetch", no_fetch)
    avg = sy.federated_avg({"bob": r1, "alice": r2}, {"bob": 30, "alice": 10})
    monkeypatch.undo()
    assert avg.location is bob and all(isinstance(p, sy.PointerTensor) and p.location is bob for p in avg.parameters())
    assert all(p.location is alice for p in r2.parameters())  # alice's model is still hers
    avg.get()
    assert all(torch.equal(p, expected[k]) for k, p in avg.named_parameters())
    assert all(torch.equal(p, q) for p, q in zip(r2.get().parameters(), m2.parameters()))
    del r1, r2, avg


def test_to_names_a_trusted_aggregator(bob, alice):
    secure = sy.VirtualWorker("secure_worker")
    try:
        m1, m2 = models(2, seed=3)
        r1, r2 = m1.copy().send(bob), m2.copy().send(alice)
        avg = sy.federated_avg({"bob": r1, "alice": r2}, {"bob": 1, "alice": 3}, to=secure)
        assert avg.location is secure
        assert all(p.location is secure for p in avg.parameters())
        assert all(torch.equal(p, by_hand([m1, m2], [1, 3])[k]) for k, p in avg.get().named_parameters())
        mixed = sy.federated_avg({"bob": r1, "here": m2}, {"bob": 1, "here": 1})  # a local model joins on bob
        assert all(torch.equal(p, by_hand([m1, m2], [1, 1])[k]) for k, p in mixed.get().named_parameters())
        del r1, r2, mixed
        assert len(secure.objects) == 0
    finally:
        secure.close()


def test_buffers_floats_averaged_counters_from_the_first():
    torch.manual_seed(0)
    a, b = nn.BatchNorm1d(2), nn.BatchNorm1d(2)
    a(torch.randn(5, 2))
    for _ in range(3):
        b(torch.randn(5, 2) + 1)
    avg = sy.federated_avg({"a": a, "b": b}, {"a": 1, "b": 1})
    assert torch.equal(avg.running_mean, a.running_mean * 0.5 + b.running_mean * 0.5)
    assert avg.num_batches_tracked.item() == 1
    assert avg.num_batches_tracked is not a.num_batches_tracked


def test_bad_input_says_what_is_wrong():
    m1, m2 = models(2)
    with pytest.raises(sy.SyftError, match="non-empty dict of models"):
        sy.federated_avg({})
    with pytest.raises(sy.SyftError, match="non-empty dict of models"):
        sy.federated_avg([m1, m2])
    with pytest.raises(sy.SyftError, match="no weight \\(sample count\\) for 'alice'"):
        sy.federated_avg({"bob": m1, "alice": m2}, {"bob": 3})
    with pytest.raises(sy.SyftError, match="weights are positive numbers, got {'alice': 0}"):
        sy.federated_avg({"bob": m1, "alice": m2}, {"bob": 3, "alice": 0})
    with pytest.raises(sy.SyftError, match="model 'alice' does not have the same parameters"):
        sy.federated_avg({"bob": m1, "alice": nn.Linear(3, 2)})
    with pytest.raises(sy.SyftError, match="averages nn.Modules; 'alice' is a Tensor"):
        sy.federated_avg({"bob": m1, "alice": torch.zeros(2)})


def test_the_average_of_remote_models_trains_again(bob, alice):
    """#26.13: the fetched average requires grad, so another FedAvg (or loss.backward) trains it."""
    m1, m2, _ = models()
    avg = sy.federated_avg({"bob": m1.copy().send(bob), "alice": m2.copy().send(alice)}).get()
    assert all(type(p) is nn.Parameter and p.requires_grad for p in avg.parameters())
    x = torch.randn(6, 3, generator=torch.Generator().manual_seed(0)) * 3
    fds = sy.BaseDataset(x, torch.arange(6) % 2, name="again").federate((bob, alice))
    before = values(avg)
    sy.federated.FedAvg(avg, fds, lr=0.5, batch_size=3).round(progress=False)
    assert all(not torch.equal(v, before[k]) for k, v in values(avg).items())  # every layer learnt
    fds.unload()
