"""FederatedDataLoader: every sample once per epoch, one worker per batch, cut on the worker."""
import pytest
import torch

import syft_lab as sy
from federated_data import numbered, unload


@pytest.fixture
def toy(trio):
    data, targets = numbered(11)
    fds = sy.BaseDataset(data, targets, name="toy").federate(trio)  # 4, 4, 3 samples
    yield fds
    unload(fds)


def epoch(loader):
    """(worker id, sample ids) per batch, checking that data and targets belong together."""
    out = []
    for data, target in loader:
        assert data.location is target.location
        d, t = data.get(), target.get()
        assert torch.equal(d[:, 0].long(), t) and torch.equal(d[:, 1].long(), t)
        out.append((data.location.id, t.tolist()))
    return out


def test_every_sample_once_per_epoch_and_batches_never_mix_workers(toy):
    loader = sy.FederatedDataLoader(toy, batch_size=3)
    batches = epoch(loader)
    assert batches == [("bob", [0, 1, 2]), ("bob", [3]), ("alice", [4, 5, 6]), ("alice", [7]),
                       ("carol", [8, 9, 10])]
    assert len(loader) == len(batches) == 5
    assert repr(loader) == "<FederatedDataLoader 5 batches of 3 over bob, alice, carol>"


def test_shuffling_permutes_each_workers_samples_repeatably(toy):
    def run(seed, epochs=2):
        loader = sy.FederatedDataLoader(toy, batch_size=2, shuffle=True, generator=torch.Generator().manual_seed(seed))
        return [epoch(loader) for _ in range(epochs)]

    first, second = run(0)
    for batches in (first, second):
        by_worker = {}
        for wid, ids in batches:
            by_worker.setdefault(wid, []).extend(ids)
        assert {w: sorted(ids) for w, ids in by_worker.items()} == {"bob": [0, 1, 2, 3], "alice": [4, 5, 6, 7],
                                                                     "carol": [8, 9, 10]}
        assert [wid for wid, _ in batches] == ["bob"] * 2 + ["alice"] * 2 + ["carol"] * 2
    assert first != second  # a new permutation each epoch
    assert run(0) == [first, second]  # the same seed, the same order
    assert run(1) != [first, second]
    g = torch.Generator().manual_seed(0)  # one permutation per worker, drawn in the workers' order
    expected = []
    for w, n, start in (("bob", 4, 0), ("alice", 4, 4), ("carol", 3, 8)):
        order = (torch.randperm(n, generator=g) + start).tolist()
        expected += [(w, order[i:i + 2]) for i in range(0, n, 2)]
    assert first == expected


def test_drop_last_drops_each_workers_short_batch(toy):
    loader = sy.FederatedDataLoader(toy, batch_size=3, drop_last=True)
    batches = epoch(loader)
    assert batches == [("bob", [0, 1, 2]), ("alice", [4, 5, 6]), ("carol", [8, 9, 10])]
    assert len(loader) == 3
    assert loader.num_batches("bob") == 1


def test_batches_are_cut_on_the_worker_without_fetching_data(toy, monkeypatch):
    def no_fetch(*args, **kwargs):
        raise AssertionError("the loader fetched data from a worker")

    for ds in toy:
        monkeypatch.setattr(ds.location, "_fetch", no_fetch)
        monkeypatch.setattr(ds.location, "_copy_out", no_fetch)
    shapes = [(tuple(d.shape), tuple(t.shape), d.location.id) for d, t in sy.FederatedDataLoader(toy, batch_size=4)]
    assert shapes == [((4, 2), (4,), "bob"), ((4, 2), (4,), "alice"), ((3, 2), (3,), "carol")]
    monkeypatch.undo()
    assert [len(ds.location.core.held) for ds in toy] == [2, 2, 2]  # the batches were copies


def test_one_workers_batches(toy):
    loader = sy.FederatedDataLoader(toy, batch_size=3)
    assert [t.get().tolist() for _, t in loader.batches("alice")] == [[4, 5, 6], [7]]
    with pytest.raises(sy.SyftError, match="no part of this dataset is on 'dave'"):
        list(loader.batches("dave"))


def test_bad_loader_arguments(toy):
    with pytest.raises(sy.SyftError, match="takes a sy.FederatedDataset"):
        sy.FederatedDataLoader(sy.BaseDataset(torch.zeros(2, 1), torch.zeros(2)))
    for bad in (0, -1, 2.5, "8"):
        with pytest.raises(sy.SyftError, match="batch_size is a positive int"):
            sy.FederatedDataLoader(toy, batch_size=bad)
    with pytest.raises(sy.SyftError, match="generator is a torch.Generator"):
        sy.FederatedDataLoader(toy, shuffle=True, generator=0)


def test_a_worker_closed_mid_epoch_is_named(toy, trio):
    carol = trio[2]
    batches = iter(sy.FederatedDataLoader(toy, batch_size=4))
    for _ in range(2):
        next(batches)  # bob's and alice's
    carol.close()
    with pytest.raises(sy.WorkerUnavailableError, match="worker 'carol' was closed"):
        next(batches)


def test_iter_per_worker_steps_through_every_worker_at_once(toy, trio):
    bob, alice, carol = trio
    loader = sy.FederatedDataLoader(toy, batch_size=2, iter_per_worker=True, drop_last=True)
    assert len(loader) == 2  # the most full batches of one worker (bob and alice: 2, carol: 1)
    steps = []
    for step in loader:
        steps.append({w.id: t.get().tolist() for w, (d, t) in step.items()})
        assert all(d.location is w for w, (d, _) in step.items())
    assert steps == [{"bob": [0, 1], "alice": [4, 5], "carol": [8, 9]}, {"bob": [2, 3], "alice": [6, 7]}]
    with pytest.raises(StopIteration):  # next() steps through the epoch iter() started (PySyft's way)
        next(loader)
    iter(loader)
    assert set(next(loader)) == {bob, alice, carol}
    assert "per worker" in repr(loader)


def test_loader_argument_errors_are_type_and_value_errors(toy):
    with pytest.raises(TypeError, match="batch_size is a positive int, got '8'"):
        sy.FederatedDataLoader(toy, batch_size="8")
    with pytest.raises(ValueError, match="batch_size is a positive int, got 0"):
        sy.FederatedDataLoader(toy, batch_size=0)
    with pytest.raises(KeyError, match="no part of this dataset is on 'dave'"):
        sy.FederatedDataLoader(toy).num_batches("dave")
