"""Many Ray workers at once (100, packed 25 to an actor process to keep the test's memory and
start-up small): separate stores, the world view with 100 Ray lanes, and a federated round that
runs unchanged on 32 of them and gives the same model as on 32 VirtualWorkers."""
import pytest
import ray
import torch
from torch import nn

import syft_lab as sy
import syft_lab.ray as sy_ray
from syft_lab.errors import WorkerUnavailableError

pytestmark = pytest.mark.network  # a local Ray: processes listening on loopback

N = 100
PER_ACTOR = 25
FED = 32  # clients of the federated round


@pytest.fixture(scope="module")
def clients(ray_runtime):
    workers = sy_ray.workers(N, prefix="client", per_actor=PER_ACTOR)
    yield workers
    actors = {w.actor_id: w.actor for w in workers}
    for w in workers:
        w.close()
    for a in actors.values():
        ray.kill(a)


def test_workers_are_named_and_placed(clients):
    assert [w.id for w in clients] == [f"client{i}" for i in range(N)]
    assert all(w.kind == "ray" and w.state == "connected" and w.node == "127.0.0.1" for w in clients)
    assert len({w.actor_id for w in clients}) == N // PER_ACTOR  # 25 workers to a process
    assert len({w.pid for w in clients}) == N // PER_ACTOR
    assert all(sy.get_worker(w.id) is w for w in clients)


def test_each_worker_has_its_own_store(clients):
    ptrs = [torch.full((2,), float(i)).send(w) for i, w in enumerate(clients)]
    assert [len(w.objects) for w in clients] == [1] * N  # packed workers still keep separate stores
    assert [(p * 2).get().tolist() for p in ptrs] == [[2.0 * i] * 2 for i in range(N)]
    m = ptrs[0].move(clients[N - 1])  # between two actor processes
    n = ptrs[1].move(clients[2])  # within one
    assert torch.equal(m.get(), torch.zeros(2)) and torch.equal(n.get(), torch.ones(2))
    del ptrs, m, n
    for w in clients:
        w.flush()
    assert sum(len(w.objects) for w in clients) == 0


def test_the_world_lists_every_ray_worker_with_its_node(clients):
    lanes = {lane["id"]: lane for lane in sy.world({})["workers"]}
    assert {f"client{i}" for i in range(N)} <= set(lanes)
    assert all(lanes[f"client{i}"]["kind"] == "ray" and lanes[f"client{i}"]["state"] == "connected"
               and lanes[f"client{i}"]["node"] == "127.0.0.1" for i in range(N))


def fedavg_round(workers, plans=False, chart=None):
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(FED * 12, 8, generator=g), torch.randint(0, 3, (FED * 12,), generator=g)
    fds = sy.BaseDataset(x, y, name="ray_many").federate(workers)
    try:
        model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))
        fl = sy.federated.FedAvg(model, fds, lr=0.1, batch_size=6, plans=plans)
        result = fl.round(evaluate=(x, y), chart=chart, progress=False)
        return model, result
    finally:
        fds.unload()


def test_a_federated_round_runs_unchanged_on_ray_workers(clients):
    virtual = [sy.VirtualWorker(f"v{i}") for i in range(FED)]
    try:
        local_model, local_result = fedavg_round(virtual)
    finally:
        for w in virtual:
            w.close()
    ray_model, ray_result = fedavg_round(clients[:FED])
    assert set(ray_result.clients) == {w.id for w in clients[:FED]}
    for a, b in zip(local_model.parameters(), ray_model.parameters()):
        assert torch.allclose(a, b, atol=1e-6)
    assert ray_result.global_["loss"] == pytest.approx(local_result.global_["loss"], rel=1e-5)
    for w in clients:
        w.flush()
    assert sum(len(w.objects) for w in clients) == 0  # the round left nothing behind


def test_clients_in_flight_on_ray_give_the_sequential_round_and_chart_each_client(clients):
    """plans=True on 32 Ray workers (every client's local round in flight, the sum streamed
    actor to actor to the first client's worker) against op by op on VirtualWorkers (one client
    after another): the same model; the chart got each client as it finished, in order."""
    virtual = [sy.VirtualWorker(f"v{i}") for i in range(FED)]
    try:
        local_model, local_result = fedavg_round(virtual)
    finally:
        for w in virtual:
            w.close()
    chart = sy.federated.RoundChart()
    seen = []
    chart.observe(lambda change: seen.append(list(change["new"].get("clients", {}))), names="running")
    ray_model, ray_result = fedavg_round(clients[:FED], plans=True, chart=chart)
    ids = [w.id for w in clients[:FED]]
    assert [s for s in seen if s] == [ids[:k] for k in range(1, FED + 1)]
    for a, b in zip(local_model.parameters(), ray_model.parameters()):
        assert torch.allclose(a, b, atol=1e-6)
    for i, wid in enumerate(ids):
        assert ray_result.clients[wid]["loss"] == pytest.approx(local_result.clients[f"v{i}"]["loss"], rel=1e-5)
    for w in clients:
        w.flush()
    assert sum(len(w.objects) for w in clients) == 0  # the round left nothing behind


def test_the_world_of_a_16_worker_fedavg_round_changes_while_the_cell_runs(clients, monkeypatch):
    """Issue 25's bound: on 16 Ray workers (packed in one actor process) the world view gets
    patches while the round's cell runs, each a new revision, touching the lanes of the workers
    the round stores models and batches on: pushed events, not a re-read after the cell."""
    from syft_lab.widget import WorldWidget, live

    workers = clients[:16]
    view = WorldWidget(namespace={})  # its first read asks each remote worker to push its events
    assert all(w.follows_events for w in workers)
    view._views.add("v1")
    view._seen = True
    sent = []
    view.send = lambda msg, buffers=None: sent.append((msg, live.scheduler.in_cell))
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(16 * 12, 8, generator=g), torch.randint(0, 3, (16 * 12,), generator=g)
    fds = sy.BaseDataset(x, y, name="ray_many_live").federate(workers)
    monkeypatch.setattr(live, "FLUSH_INTERVAL", 0.0)  # every event may refresh (no clock in the test)
    try:
        model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))
        fl = sy.federated.FedAvg(model, fds, lr=0.1, batch_size=6)
        live.scheduler.loop, live.scheduler.in_cell = None, True  # the round's cell runs
        live.scheduler.last_flush, live.scheduler.cost = 0.0, 0.0
        rev = view._feed.rev
        result = fl.round(progress=False)
        during = [m for m, in_cell in sent if m.get("type") == "world_patch" and in_cell]
    finally:
        live.scheduler.in_cell = False
        view.close()
        fds.unload()
    assert set(result.clients) == {w.id for w in workers}
    assert len(during) >= 2 and [p["base"] for p in during] == list(range(rev, rev + len(during)))
    lanes = {op[1] for p in during for op in p["ops"]}
    assert len(lanes & {w.id for w in workers}) >= 8, lanes  # most clients' lanes changed mid-round
    for w in clients:
        w.flush()


def test_killing_a_shared_actor_makes_each_of_its_workers_say_so(ray_runtime, kill_actor):
    pair = sy_ray.workers(2, prefix="twin", per_actor=2)
    p, q = torch.ones(1).send(pair[0]), torch.ones(1).send(pair[1])
    kill_actor(pair[0].actor)
    with pytest.raises(WorkerUnavailableError, match="Ray worker 'twin0'"):
        p.get()
    assert pair[0].state == "dead" and pair[1].state == "dead"  # the process hosted both
    with pytest.raises(WorkerUnavailableError, match="Ray worker 'twin1'"):
        q.get()
    for w in pair:
        w.close()
