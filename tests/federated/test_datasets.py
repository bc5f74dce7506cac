"""BaseDataset.federate and FederatedDataset: data held by workers, found again by tags."""
import gc

import pytest
import torch

import syft_lab as sy
from federated_data import numbered, peek


def test_federate_leaves_consecutive_slices_held_by_each_worker(trio):
    bob, alice, carol = trio
    data, targets = numbered(10)
    fds = sy.BaseDataset(data, targets, name="toy").federate(trio)
    assert fds.workers == ["bob", "alice", "carol"]
    assert len(fds) == 10 and fds.counts == {"bob": 4, "alice": 3, "carol": 3}
    assert fds.name == "toy"
    assert torch.equal(peek(fds["bob"].data), data[:4]) and torch.equal(peek(fds["carol"].targets), targets[7:])
    assert fds["alice"].location is alice and fds["alice"].sample_shape == (2,)
    assert not fds["bob"].data.owning  # the worker holds it, not the pointer
    assert repr(fds) == "<FederatedDataset 'toy': 10 samples on bob (4), alice (3), carol (3)>"
    for w in trio:
        assert set(w.core.held) == set(w.core.objects)  # only the two held parts, nothing else
        assert len(w.core.held) == 2
    fds.unload()
    assert all(len(w.objects) == 0 for w in trio)


def test_datasets_survive_their_pointers_and_are_found_again(trio):
    bob, alice, carol = trio
    data, targets = numbered(9)
    sy.BaseDataset(data, targets, name="digits").federate(trio)  # every pointer dropped at once
    gc.collect()
    assert [len(w.objects) for w in trio] == [2, 2, 2]
    found, = bob.search("#digits", "#data")  # PySyft's way
    assert found.tags == {"#dataset", "#digits", "#data"}
    assert found.description == "data of dataset 'digits': 3 of 9 samples"
    assert list(bob.datasets) == ["digits"] and len(bob.datasets["digits"]) == 3
    fds = sy.FederatedDataset.from_workers(trio, "digits")
    assert fds.counts == {"bob": 3, "alice": 3, "carol": 3}
    assert torch.equal(peek(fds["alice"].data), data[3:6]) and torch.equal(peek(fds["alice"].targets), targets[3:6])
    del fds, found
    gc.collect()
    assert [len(w.objects) for w in trio] == [2, 2, 2]
    sy.FederatedDataset.from_workers(trio, "digits").unload()
    assert bob.datasets == {}


def test_world_entries_say_which_dataset_a_held_tensor_is_part_of(bob):
    fds = sy.BaseDataset(torch.zeros(5, 8, 8), torch.zeros(5, dtype=torch.long), name="digits").federate([bob])
    entries = {e["dataset"]["part"]: e for e in bob.summary() if "dataset" in e}
    assert entries["data"]["dataset"] == {"name": "digits", "part": "data", "samples": 5, "sample_shape": [8, 8]}
    assert entries["targets"]["dataset"] == {"name": "digits", "part": "targets", "samples": 5, "sample_shape": []}
    assert entries["data"]["held"] is True
    lane = next(lane for lane in sy.world({})["workers"] if lane["id"] == "bob")
    assert sorted(o["dataset"]["part"] for o in lane["objects"]) == ["data", "targets"]
    fds.unload()


def test_a_plain_tagged_tensor_is_no_dataset(bob):
    p = bob.load(torch.zeros(3), tags=["#dataset", "#a", "#b", "#data"])  # two names: not the convention
    q = bob.load(torch.zeros(3), tags=["#digits", "#data"])
    assert all("dataset" not in e for e in bob.summary())
    assert bob.datasets == {}
    bob.unload(p)
    bob.unload(q)


def test_transform_runs_once_before_the_data_leaves(bob, alice):
    calls = []

    def double(x):
        calls.append(1)
        return x * 2

    ds = sy.BaseDataset(torch.arange(4.).unsqueeze(1), torch.arange(4), transform=double)
    assert torch.equal(ds[1][0], torch.tensor([2.])) and ds[1][1] == 1 and len(ds) == 4
    calls.clear()
    fds = ds.federate((bob, alice), name="doubled")
    assert len(calls) == 4
    assert torch.equal(peek(fds["alice"].data), torch.tensor([[4.], [6.]]))
    fds.unload()


def test_indices_give_a_non_iid_split(trio):
    data, _ = numbered(12)
    labels = torch.tensor([0, 1, 2, 3] * 3)
    split = sy.federated.split_by_label(labels, 3)
    fds = sy.BaseDataset(data, labels, name="skewed").federate(trio, indices=split)
    seen = {w: sorted(set(peek(fds[w].targets).tolist())) for w in fds.workers}
    assert seen == {"bob": [0, 1], "alice": [1, 2], "carol": [2, 3]}  # sorted by label, then cut
    assert fds.counts == {"bob": 4, "alice": 4, "carol": 4}
    fds.unload()


@pytest.mark.parametrize("workers_arg, message", [
    ((), "at least one worker"),
    (None, "at least one worker"),
    ([42], "is a worker .* or its id, got int"),
    (["nobody"], r"no worker named 'nobody' \(known workers: .*bob"),
])
def test_federate_refuses_bad_worker_lists(workers_arg, message, bob):
    with pytest.raises(sy.SyftError, match=message):
        sy.BaseDataset(torch.zeros(3, 1), torch.zeros(3)).federate(workers_arg)
    assert len(bob.objects) == 0


def test_more_workers_than_samples_is_refused_naming_them(trio):
    with pytest.raises(sy.SyftError, match=r"2 sample\(s\) cannot be split across 3 workers \(bob, alice, carol\)"):
        sy.BaseDataset(torch.zeros(2, 1), torch.zeros(2)).federate(trio)
    assert all(len(w.objects) == 0 for w in trio)


def test_bad_datasets_and_names_are_refused(bob, alice):
    with pytest.raises(sy.SyftError, match="one entry per sample: 3 samples of data, 2 targets"):
        sy.BaseDataset(torch.zeros(3, 1), torch.zeros(2))
    with pytest.raises(sy.SyftError, match="takes two tensors"):
        sy.BaseDataset([1, 2], torch.zeros(2))
    ds = sy.BaseDataset(torch.zeros(4, 1), torch.zeros(4))
    for bad in ("data", "dataset", "has space", ""):
        with pytest.raises(sy.SyftError, match="a dataset name is a short word"):
            ds.federate((bob, alice), name=bad)
    with pytest.raises(sy.SyftError, match="one sample to two workers"):
        ds.federate((bob, alice), indices=[[0, 1], [1, 2]])
    with pytest.raises(sy.SyftError, match="gives no sample to alice"):
        ds.federate((bob, alice), indices=[[0, 1], []])
    with pytest.raises(sy.SyftError, match="each worker may appear once"):
        ds.federate((bob, bob))
    assert len(bob.objects) == 0 and len(alice.objects) == 0


def test_federating_a_name_again_from_this_kernel_replaces_its_own_parts(bob, alice, capsys):
    """A re-run cell (or Run All): the same name federated again replaces what this kernel loaded."""
    first = sy.BaseDataset(torch.zeros(4, 1), torch.zeros(4), name="twice").federate((bob, alice))
    assert capsys.readouterr().out == ""
    data, targets = numbered(6)
    again = sy.BaseDataset(data, targets, name="twice").federate((bob, alice))
    assert capsys.readouterr().out == "syft: replaced dataset 'twice' on bob, alice (federated before from this kernel)\n"
    assert len(bob.objects) == 2 and len(alice.objects) == 2  # the new parts only
    assert torch.equal(peek(again["alice"].data), data[3:])
    assert torch.equal(peek(sy.FederatedDataset.from_workers((bob, alice), "twice")["bob"].targets), targets[:3])
    with pytest.raises(sy.ObjectNotFoundError):
        peek(first["bob"].data)  # the earlier parts are gone, their pointers say so
    sy.BaseDataset(data, targets, name="twice").federate([bob])  # a narrower re-run: bob's part only
    assert len(bob.objects) == 2 and len(alice.objects) == 2  # alice keeps the earlier run's part
    sy.FederatedDataset.from_workers((bob, alice), "twice").unload()


def test_a_name_someone_else_loaded_is_refused_and_nothing_is_added(bob, alice):
    # another client loaded a dataset 'twice' on bob (what its federate sends: two loads with the tags)
    for part, tag in (("data", "#data"), ("targets", "#target")):
        bob.load(torch.zeros(2, 1) if part == "data" else torch.zeros(2), tags=["#dataset", "#twice", tag])
    ds = sy.BaseDataset(torch.zeros(4, 1), torch.zeros(4), name="twice")
    with pytest.raises(sy.SyftError, match="worker 'bob' holds a dataset 'twice' that this kernel did not "
                                           "federate.*from_workers"):
        ds.federate((alice, bob))
    assert len(bob.objects) == 2 and len(alice.objects) == 0
    mine = ds.federate((alice,))
    with pytest.raises(sy.SyftError, match="did not federate"):  # a mix: mine on alice, theirs on bob
        ds.federate((alice, bob))
    assert len(alice.objects) == 2 and torch.equal(peek(mine["alice"].data), torch.zeros(4, 1))
    mine.unload()
    sy.FederatedDataset.from_workers([bob], "twice").unload()


def test_a_closed_worker_is_named_and_a_failed_federate_leaves_nothing(trio, monkeypatch):
    bob, alice, carol = trio
    ds = sy.BaseDataset(torch.zeros(6, 1), torch.zeros(6))
    carol.close()
    with pytest.raises(sy.WorkerUnavailableError, match="worker 'carol' was closed"):
        ds.federate(trio)
    assert len(bob.objects) == 0

    def refuse(*args, **kwargs):
        raise sy.SyftError("alice's disk is full")

    monkeypatch.setattr(alice, "_load", refuse)
    with pytest.raises(sy.SyftError, match="disk is full"):
        ds.federate((bob, alice))
    assert len(bob.objects) == 0  # bob's slice was unloaded again


def test_from_workers_names_what_is_missing(bob, alice):
    fds = sy.BaseDataset(torch.zeros(4, 1), torch.zeros(4), name="here").federate([bob])
    with pytest.raises(sy.SyftError, match="worker 'alice' holds no dataset 'here' \\(it holds: none\\)"):
        sy.FederatedDataset.from_workers((bob, alice), "here")
    with pytest.raises(sy.SyftError, match="no part of this dataset is on 'alice'; workers: bob"):
        fds["alice"]
    fds.unload()


def test_the_world_view_names_a_federated_datasets_pointers_as_a_person_writes_them(bob, alice):
    fds = sy.BaseDataset(torch.arange(8.).reshape(4, 2), torch.arange(4)).federate((bob, alice), name="named")
    me = next(lane for lane in sy.world({"fds": fds})["workers"] if lane["id"] == "me")
    held_in = sorted(n for o in me["objects"] if o["kind"] == "pointer" for n in o.get("held_in", []))
    assert held_in == ["fds['alice'].data", "fds['alice'].targets", "fds['bob'].data", "fds['bob'].targets"]
    fds.unload()
