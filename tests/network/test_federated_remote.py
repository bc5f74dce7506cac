"""The federated learning kit on real worker processes (python -m syft_lab.worker on loopback):
datasets held by the workers outlive the client, loader values, rounds equal to the same rounds
on VirtualWorkers, and a worker process killed mid-round."""
from __future__ import annotations

import gc

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import syft_lab as sy

pytestmark = pytest.mark.network


def numbered(n):
    ids = torch.arange(n)
    return ids.float().unsqueeze(1).repeat(1, 4), ids % 3


def net():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))


@pytest.fixture
def trio(remote, spawn, token):
    bob, alice = remote
    carol_proc = spawn("carol")
    carol = sy.WebSocketWorker(carol_proc.url, id="carol", token=token, progress=False)
    yield bob, alice, carol, carol_proc
    carol.close()
    # the session's bob and alice serve other tests too: nothing a test loaded stays there
    for w in (bob, alice):
        with sy.WebSocketWorker(w.url, id=w.id, token=token, progress=False) as again:
            for ds in again.datasets.values():
                ds.unload()


def test_datasets_held_by_worker_processes_outlive_the_client(trio, token):
    bob, alice, carol, _ = trio
    data, targets = numbered(10)
    sy.BaseDataset(data, targets, name="numbers").federate((bob, alice, carol))
    urls = {w.id: w.url for w in (bob, alice, carol)}
    for w in (bob, alice, carol):
        w.close()  # the client's session ends: what it sent is released, what the workers hold stays
    again = [sy.WebSocketWorker(urls[i], id=i, token=token, progress=False) for i in ("bob", "alice", "carol")]
    try:
        fds = sy.FederatedDataset.from_workers(again, "numbers")
        assert fds.counts == {"bob": 4, "alice": 3, "carol": 3}
        entries = [e for e in again[1].summary() if "dataset" in e]
        assert sorted((e["dataset"]["part"], e["dataset"]["samples"], e["held"]) for e in entries) == [
            ("data", 3, True), ("targets", 3, True)]
        found, = again[2].search("#numbers", "#target")
        assert found.description == "targets of dataset 'numbers': 3 of 10 samples"
        seen = []
        for x, y in sy.FederatedDataLoader(fds, batch_size=3, shuffle=True, generator=torch.Generator().manual_seed(0)):
            xs, ys = x.get(), y.get()
            assert torch.equal(ys, xs[:, 0].long() % 3)
            seen += [(x.location.id, int(i)) for i in xs[:, 0]]
        assert sorted(seen, key=lambda s: s[1]) == [("bob", i) for i in range(4)] + [("alice", i) for i in range(4, 7)] + [
            ("carol", i) for i in range(7, 10)]
        fds.unload()
        assert all(w.datasets == {} for w in again)
    finally:
        for w in again:
            w.close()


@pytest.mark.parametrize("plans", [False, True], ids=["op_by_op", "plans"])
def test_rounds_on_worker_processes_equal_rounds_on_virtual_workers(trio, plans):
    bob, alice, carol, _ = trio
    g = torch.Generator().manual_seed(1)
    x = torch.randn(24, 4, generator=g)
    y = torch.arange(24) % 3
    ds = sy.BaseDataset(x, y, name="blobs")

    def train(workers):
        fds = ds.federate(workers)
        model = net()
        fl = sy.federated.FedAvg(model, fds, lr=0.3, batch_size=5, plans=plans, seed=3)
        results = fl.run(2, evaluate=(x, y), progress=False)
        del fl
        fds.unload()
        return model, results

    virtual = [sy.VirtualWorker(i) for i in ("v_bob", "v_alice", "v_carol")]
    try:
        local_model, local_results = train(virtual)
    finally:
        for w in virtual:
            w.close()
    model, results = train((bob, alice, carol))
    for p, q in zip(model.parameters(), local_model.parameters()):
        assert torch.allclose(p, q, atol=1e-6)
    assert results[-1].global_["loss"] == pytest.approx(local_results[-1].global_["loss"], abs=1e-6)
    assert [sorted(r.clients) for r in results] == [["alice", "bob", "carol"]] * 2
    gc.collect()
    for w in (bob, alice, carol):
        w.flush()
    assert all(len(w.objects) == 0 for w in (bob, alice, carol))


def test_a_worker_process_killed_mid_round_is_named_and_the_round_can_be_retried(trio):
    bob, alice, carol, carol_proc = trio
    x, y = numbered(18)
    fds = sy.BaseDataset(x / 18, y, name="kill").federate((bob, alice, carol))
    model = net()
    fl = sy.federated.FedAvg(model, fds, lr=0.2, batch_size=4)
    before = {k: v.clone() for k, v in model.state_dict().items()}

    def loss_that_kills_carol(out, target):
        if out.location is carol:
            carol_proc.kill()
        return F.cross_entropy(out, target)

    fl.loss = loss_that_kills_carol
    with pytest.raises(sy.federated.FederatedRoundError,
                       match="round 1: worker 'carol' failed during local training: WorkerUnavailableError: "
                             "worker 'carol' at .* is unavailable.*global model is unchanged"):
        fl.round(progress=False)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    fl.loss = F.cross_entropy
    retry = fl.round(clients=["bob", "alice"], progress=False)
    assert retry.round == 1 and set(retry.clients) == {"bob", "alice"}
    assert not torch.equal(model[0].weight, before["0.weight"])


def test_clients_in_flight_when_a_worker_process_is_killed_name_it_and_change_nothing(trio):
    bob, alice, carol, carol_proc = trio
    x, y = numbered(18)
    fds = sy.BaseDataset(x / 18, y, name="kill_in_flight").federate((bob, alice, carol))
    model = net()
    fl = sy.federated.FedAvg(model, fds, lr=0.2, batch_size=4, plans=True)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    chart = sy.federated.RoundChart()
    # bob's results are in while carol's plans are sent and unread: her process dies mid-round
    chart.observe(lambda change: carol_proc.kill() if "bob" in change["new"].get("clients", {}) else None,
                  names="running")
    with pytest.raises(sy.federated.FederatedRoundError,
                       match="round 1: worker 'carol' failed during local training: .*"
                             "worker 'carol' at .* is unavailable.*global model is unchanged") as e:
        fl.round(chart=chart, progress=False)
    assert isinstance(e.value.cause, sy.WorkerUnavailableError)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    retry = fl.round(clients=["bob", "alice"], progress=False)
    assert retry.round == 1 and set(retry.clients) == {"bob", "alice"}
    assert not torch.equal(model[0].weight, before["0.weight"])


def test_a_worker_process_that_dies_after_its_replies_arrived_is_named_and_changes_nothing(trio):
    """Its plan's replies were read, then it died: asking it for its metrics finds it gone."""
    bob, alice, carol, carol_proc = trio
    x, y = numbered(18)
    fds = sy.BaseDataset(x / 18, y, name="dies_after_replies").federate((bob, alice, carol))
    model = net()
    fl = sy.federated.FedAvg(model, fds, lr=0.2, batch_size=4, plans=True)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    ask = carol.submit_request

    def dies_first(msg, *args, **kwargs):
        if msg.get("c") == "fetch":
            carol_proc.kill()
        return ask(msg, *args, **kwargs)

    carol.submit_request = dies_first
    with pytest.raises(sy.federated.FederatedRoundError,
                       match="round 1: worker 'carol' failed during local training: .*global model is unchanged"):
        fl.round(progress=False)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    retry = fl.round(clients=["bob", "alice"], progress=False)
    assert retry.round == 1 and set(retry.clients) == {"bob", "alice"}
