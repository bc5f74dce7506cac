"""FedAvg rounds: equal to local SGD plus the weighted average, plans or op by op, and a
failed round leaves the global model as it was and can be run again."""
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import syft_lab as sy


def blobs(n=30, seed=0):
    g = torch.Generator().manual_seed(seed)
    y = torch.arange(n) % 3
    x = torch.randn(n, 4, generator=g) + F.one_hot(y, 4).float() * 2
    return x, y


def net(seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))


@pytest.fixture
def setup(trio, unload):
    x, y = blobs()
    fds = sy.BaseDataset(x, y, name="blobs").federate(trio, indices=[range(0, 12), range(12, 21), range(21, 30)])
    yield x, y, fds
    unload(fds)


def by_hand(model, x, y, slices, rounds, *, lr, batch_size, seed, orders=None):
    """The same training here: each client runs SGD on its shuffled batches (or on the batches
    of ``orders(round, wid)``, a permutation of its own samples), then the sample-weighted
    average becomes the global model."""
    g = torch.Generator().manual_seed(seed)
    for r in range(1, rounds + 1):
        trained = {}
        for wid, idx in slices.items():
            client = net()
            client.load_state_dict(model.state_dict())
            opt = torch.optim.SGD(client.parameters(), lr=lr)
            perm = torch.randperm(len(idx), generator=g) if orders is None else orders(r, wid)
            order = torch.tensor(idx)[perm]
            for b in order.split(batch_size):
                opt.zero_grad()
                F.cross_entropy(client(x[b]), y[b]).backward()
                opt.step()
            trained[wid] = client
        model.load_state_dict(sy.federated_avg(trained, {w: len(i) for w, i in slices.items()}).state_dict())
    return model


SLICES = {"bob": list(range(0, 12)), "alice": list(range(12, 21)), "carol": list(range(21, 30))}


@pytest.mark.parametrize("plans", [False, True], ids=["op_by_op", "plans"])
def test_rounds_equal_local_sgd_and_the_weighted_average(setup, plans):
    x, y, fds = setup
    model = net()
    fl = sy.federated.FedAvg(model, fds, lr=0.2, batch_size=5, plans=plans, seed=7)
    results = fl.run(3, evaluate=(x, y), progress=False)
    expected = by_hand(net(), x, y, SLICES, 3, lr=0.2, batch_size=5, seed=7)
    for p, q in zip(model.parameters(), expected.parameters()):
        assert torch.allclose(p, q, atol=1e-6)
    assert [r.round for r in results] == [1, 2, 3] and fl.history == results
    assert set(results[0].clients) == {"bob", "alice", "carol"}
    assert [results[0].clients[w]["samples"] for w in ("bob", "alice", "carol")] == [12, 9, 9]
    assert results[-1].global_ == sy.federated.evaluate_classifier(model, x, y)
    assert results[-1].global_["loss"] < results[0].global_["loss"]
    assert all(0 <= c["accuracy"] <= 1 and c["loss"] > 0 for r in results for c in r.clients.values())
    assert type(model[0].weight) is nn.Parameter  # the global model stayed here


@pytest.mark.parametrize("plans", [False, True], ids=["op_by_op", "plans"])
def test_a_given_sample_order_trains_on_exactly_those_batches(setup, plans):
    """order=: the batches another framework runs (each round's permutation of a client's own
    samples), not the seeded shuffles; a function that gives no permutation is refused."""
    x, y, fds = setup
    g = torch.Generator().manual_seed(11)
    table = {(r, w): torch.randperm(len(i), generator=g) for r in (1, 2) for w, i in SLICES.items()}
    seen = []

    def order(rnd, wid, epoch):
        seen.append((rnd, wid, epoch))
        return table[(rnd, wid)]

    model = net()
    sy.federated.FedAvg(model, fds, lr=0.2, batch_size=5, plans=plans, seed=7, order=order).run(2, progress=False)
    expected = by_hand(net(), x, y, SLICES, 2, lr=0.2, batch_size=5, seed=7, orders=lambda r, w: table[(r, w)])
    for p, q in zip(model.parameters(), expected.parameters()):
        assert torch.allclose(p, q, atol=1e-6)
    assert sorted(seen) == sorted((r, w, 0) for r in (1, 2) for w in SLICES)
    seeded = net()
    sy.federated.FedAvg(seeded, fds, lr=0.2, batch_size=5, plans=plans, seed=7).run(2, progress=False)
    assert not torch.allclose(seeded[0].weight, model[0].weight, atol=1e-4)  # other batches, another model
    bad = sy.federated.FedAvg(net(), fds, lr=0.2, batch_size=5, plans=plans, order=lambda r, w, e: torch.arange(5))
    with pytest.raises(sy.SyftError, match=r"order\(1, 'bob', 0\) gave \(5,\).*permutation of range\(12\)"):
        bad.round(progress=False)
    with pytest.raises(sy.SyftError, match="order is a function"):
        sy.federated.FedAvg(net(), fds, order=[0, 1])


def test_client_metrics_are_the_training_loss_and_accuracy(setup):
    x, y, fds = setup
    model = net()
    fl = sy.federated.FedAvg(model, fds, lr=0.0, batch_size=100, clients_per_round=None)  # lr 0: nothing moves
    r = fl.round(progress=False)
    with torch.no_grad():
        for wid, idx in SLICES.items():
            out = model(x[idx])
            assert r.clients[wid]["loss"] == pytest.approx(float(F.cross_entropy(out, y[idx])), rel=1e-6)
            assert r.clients[wid]["accuracy"] == pytest.approx(float((out.argmax(1) == y[idx]).float().mean()))


def test_clients_per_round_samples_distinct_clients_repeatably(setup):
    _, _, fds = setup
    picks = [sy.federated.FedAvg(net(), fds, clients_per_round=2, seed=s).sample_clients() for s in (0, 0, 1, 2, 3)]
    assert picks[0] == picks[1]
    assert all(len(set(p)) == 2 and set(p) <= {"bob", "alice", "carol"} for p in picks)
    assert len({tuple(p) for p in picks}) > 1
    fl = sy.federated.FedAvg(net(), fds, clients_per_round=1, lr=0.1)
    assert len(fl.round(progress=False).clients) == 1


def test_a_worker_that_goes_away_mid_round_is_named_and_the_round_can_be_retried(setup, trio):
    x, y, fds = setup
    carol = trio[2]
    model = net()
    fl = sy.federated.FedAvg(model, fds, lr=0.2, batch_size=5)
    fl.round(progress=False)
    before = {k: v.clone() for k, v in model.state_dict().items()}

    def loss_that_loses_carol(out, target):
        if out.location is carol:
            carol.close()  # carol goes away after her first batch
        return F.cross_entropy(out, target)

    fl.loss = loss_that_loses_carol
    with pytest.raises(sy.federated.FederatedRoundError,
                       match="round 2: worker 'carol' failed during local training: WorkerClosedError: "
                             "worker 'carol' was closed.*global model is unchanged") as e:
        fl.round(progress=False)
    assert e.value.worker_id == "carol" and e.value.round == 2
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert len(fl.history) == 1
    fl.loss = F.cross_entropy
    retry = fl.round(clients=["bob", "alice"], progress=False)
    assert retry.round == 2 and set(retry.clients) == {"bob", "alice"}
    assert not torch.equal(before["0.weight"], model[0].weight)
    with pytest.raises(sy.federated.FederatedRoundError, match="worker 'carol' failed during sending the model"):
        fl.round(progress=False)


def test_the_chart_gets_every_round(setup):
    x, y, fds = setup
    chart = sy.federated.RoundChart()
    sy.federated.run_rounds(net(), fds, 2, evaluate=(x, y), chart=chart, progress=False, lr=0.1)
    assert [r["round"] for r in chart.rounds] == [1, 2]
    assert set(chart.rounds[0]["clients"]) == {"bob", "alice", "carol"}
    assert set(chart.rounds[0]["global"]) == {"loss", "accuracy"}
    lines = chart.text().splitlines()
    assert lines[0].startswith("round") and len(lines) == 3 and "bob" in lines[1]


def test_bad_arguments(setup, bob):
    _, _, fds = setup
    sent = net().send(bob)
    with pytest.raises(sy.SyftError, match="trains a local nn.Module"):
        sy.federated.FedAvg(sent, fds)
    sent.get()
    with pytest.raises(sy.SyftError, match="takes a sy.FederatedDataset"):
        sy.federated.FedAvg(net(), [1])
    with pytest.raises(sy.SyftError, match="clients_per_round is between 1 and 3"):
        sy.federated.FedAvg(net(), fds, clients_per_round=4)
    with pytest.raises(sy.SyftError, match="aggregator is a worker"):
        sy.federated.FedAvg(net(), fds, aggregator="secure_worker")
    with pytest.raises(sy.SyftError, match="clients are some of bob, alice, carol"):
        sy.federated.FedAvg(net(), fds).round(clients=["dave"], progress=False)


def test_a_trusted_aggregator_gives_the_same_model_and_keeps_nothing(setup):
    x, y, fds = setup
    secure = sy.VirtualWorker("secure_worker")
    try:
        default, trusted = net(), net()
        sy.federated.FedAvg(default, fds, lr=0.2, batch_size=5).run(2, progress=False)
        sy.federated.FedAvg(trusted, fds, lr=0.2, batch_size=5, aggregator=secure).run(2, progress=False)
        assert all(torch.equal(p, q) for p, q in zip(default.parameters(), trusted.parameters()))
        assert len(secure.objects) == 0  # the clients' copies and the average left with the round
    finally:
        secure.close()


def test_views_name_each_clients_model_by_the_path_a_person_writes(setup):
    """#26.4: fl.clients['bob'].model.0.weight, not an anonymous pointer."""
    _, _, fds = setup
    fl = sy.federated.FedAvg(net(), fds, lr=0.1, batch_size=5)
    fl.round(progress=False)
    lanes = {lane["id"]: lane for lane in sy.world({"fl": fl})["workers"]}
    held = sorted(h for o in lanes["me"]["objects"] if o["kind"] == "pointer" for h in o.get("held_in", []))
    names = [n for n, _ in net().named_parameters()]
    assert {f"fl.clients[{w!r}].model.{n}" for w in ("bob", "alice", "carol") for n in names} <= set(held), held
    assert "fl.fds['bob'].data" in held
    assert fl.clients["bob"].model[0].weight.location.id == "bob"


@pytest.mark.parametrize("plans", [False, True], ids=["op_by_op", "plans"])
def test_the_chart_shows_each_client_as_it_finishes(setup, plans):
    x, y, fds = setup
    chart = sy.federated.RoundChart()
    seen = []
    chart.observe(lambda change: seen.append(change["new"]), names="running")
    fl = sy.federated.FedAvg(net(), fds, lr=0.1, batch_size=5, plans=plans)
    result = fl.round(evaluate=(x, y), chart=chart, progress=False)
    updates = [s for s in seen if s]  # add() clears it when the round ends
    assert [list(u["clients"]) for u in updates] == [["bob"], ["bob", "alice"], ["bob", "alice", "carol"]]
    assert all(u["round"] == 1 for u in updates)
    assert updates[-1]["clients"] == result.clients
    assert chart.rounds[-1]["round"] == 1 and chart.running == {}


def test_clients_in_flight_when_one_goes_away_name_it_and_change_nothing(setup, trio):
    x, y, fds = setup
    carol = trio[2]
    model = net()
    fl = sy.federated.FedAvg(model, fds, lr=0.2, batch_size=5, plans=True)
    fl.round(progress=False)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    chart = sy.federated.RoundChart()
    # when bob's results are in, carol's plans were sent but not read: she goes away mid-round
    chart.observe(lambda change: carol.close() if "bob" in change["new"].get("clients", {}) else None,
                  names="running")
    with pytest.raises(sy.federated.FederatedRoundError,
                       match="round 2: worker 'carol' failed during local training.*global model is unchanged") as e:
        fl.round(chart=chart, progress=False)
    assert e.value.worker_id == "carol"
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert len(fl.history) == 1
    retry = fl.round(clients=["bob", "alice"], progress=False)
    assert retry.round == 2 and set(retry.clients) == {"bob", "alice"}


def test_clients_in_flight_give_the_sequential_round_with_the_same_seed(setup):
    """plans=True (each client's local round one plan, every client in flight) against op by op
    (one client after another, each op waiting for its reply): the same sampled clients, batches,
    metrics and global model, round after round."""
    x, y, fds = setup
    runs = {}
    for plans in (True, False):
        model = net()
        fl = sy.federated.FedAvg(model, fds, lr=0.2, batch_size=4, clients_per_round=2, plans=plans, seed=3)
        runs[plans] = (model, fl.run(3, progress=False))
    (flight, rf), (seq, rs) = runs[True], runs[False]
    assert [list(r.clients) for r in rf] == [list(r.clients) for r in rs]
    assert len({tuple(r.clients) for r in rf}) > 1  # the sampling changed between rounds
    for a, b in zip(rf, rs):
        for wid in a.clients:
            assert a.clients[wid]["samples"] == b.clients[wid]["samples"]
            assert a.clients[wid]["loss"] == pytest.approx(b.clients[wid]["loss"], rel=1e-5)
            assert a.clients[wid]["accuracy"] == b.clients[wid]["accuracy"]
    for p, q in zip(flight.parameters(), seq.parameters()):
        assert torch.allclose(p, q, atol=1e-6)
    assert not torch.allclose(flight[0].weight, net()[0].weight, atol=1e-3)  # it trained


def test_a_model_with_integer_state_trains_with_plans_too(setup):
    """BatchNorm's batch counter is not averaged (the first client's): such a model trains one
    plan message per batch instead of a whole local round, with the same result."""
    x, y, fds = setup

    def bn_net():
        torch.manual_seed(0)
        return nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 3))

    models = {}
    for plans in (True, False):
        models[plans] = bn_net()
        sy.federated.FedAvg(models[plans], fds, lr=0.2, batch_size=3, plans=plans, seed=1).run(2, progress=False)
    for (k, a), b in zip(models[True].state_dict().items(), models[False].state_dict().values()):
        assert torch.allclose(a.float(), b.float(), atol=1e-5), k
    assert models[True][1].num_batches_tracked.item() == 8  # the first client's (bob: 4 batches a round)


# --- a client that left: named before anything is sent, never trained on nor averaged in ---------

def records(*workers) -> dict:
    """How many records each worker's ledger holds: what was sent to it and what left it."""
    return {w.id: len(w.ledger()) for w in workers}


@pytest.mark.parametrize("plans", [False, True], ids=["op_by_op", "plans"])
def test_a_closed_client_is_named_before_anything_is_sent_and_the_round_goes_on_without_it(setup, trio, plans):
    """#39.1: a hospital that leaves (``county.close()``) is refused by name when the round is run
    again: nothing reaches any worker, the global model is unchanged; the round goes on without it."""
    x, y, fds = setup
    bob, alice, carol = trio
    model = net()
    fl = sy.federated.FedAvg(model, fds, lr=0.2, batch_size=5, plans=plans)
    fl.round(progress=False)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    held = sorted(carol.objects)  # what carol holds: its data, its copy of the model
    carol.close()
    seen = records(bob, alice)
    with pytest.raises(sy.federated.FederatedRoundError) as e:
        fl.round(progress=False)
    assert records(bob, alice) == seen and sorted(carol.objects) == held  # nothing sent, nothing trained
    assert str(e.value) == ("round 2: worker 'carol' failed during sending the model: WorkerClosedError: worker "
                            "'carol' was closed; make a new worker to reconnect. The global model is unchanged: run "
                            "the round again (fl.round()), leaving 'carol' out (fl.round(clients=[...]))")
    assert e.value.worker_id == "carol"
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items()) and len(fl.history) == 1
    on = fl.round(clients=["bob", "alice"], progress=False)
    assert on.round == 2 and set(on.clients) == {"bob", "alice"} and sorted(carol.objects) == held
    assert not torch.equal(before["0.weight"], model[0].weight)


def test_a_closed_aggregator_is_named_before_any_client_trains(setup):
    _, _, fds = setup
    secure = sy.VirtualWorker("secure_worker")
    fl = sy.federated.FedAvg(net(), fds, lr=0.2, batch_size=5, aggregator=secure)
    secure.close()
    seen = records(*(fds[w].location for w in fds.workers))
    with pytest.raises(sy.federated.FederatedRoundError) as e:
        fl.round(progress=False)
    assert records(*(fds[w].location for w in fds.workers)) == seen  # no client trained for nothing
    assert str(e.value).startswith("round 1: worker 'secure_worker' failed during averaging: WorkerClosedError: "
                                   "worker 'secure_worker' was closed")


def test_federated_avg_names_a_model_on_a_closed_worker_instead_of_averaging_it(trio):
    bob, alice, carol = trio
    models = {w.id: net(seed=i).send(w) for i, w in enumerate(trio)}
    carol.close()
    with pytest.raises(sy.SyftError, match=r"^model 'carol' cannot be averaged: worker 'carol' was closed; make a "
                                           r"new worker to reconnect\. Leave it out of the models$"):
        sy.federated_avg(models, {"bob": 1, "alice": 1, "carol": 1})
    del models["carol"]
    avg = sy.federated_avg(models, {"bob": 1, "alice": 1}).get()
    expected = sy.federated_avg({"bob": net(seed=0), "alice": net(seed=1)}, {"bob": 1, "alice": 1})
    assert all(torch.allclose(p, q) for p, q in zip(avg.parameters(), expected.parameters()))
