"""A Ray worker sends its per-object events with its replies (host.py, feed.py): the world view
of a FedAvg round on Ray workers changes while the round's cell runs, object by object, on the
workers' lanes; and the replies' memory budget is freed once they went out."""
import gc

import pytest
import torch
from torch import nn

import syft_lab as sy
from syft_lab.widget import WorldWidget, live

pytestmark = pytest.mark.network  # a local Ray: processes listening on loopback


@pytest.fixture(autouse=True)
def idle_scheduler():
    live.scheduler.loop, live.scheduler.in_cell = None, False
    yield
    live.scheduler.in_cell = False


def test_the_world_of_a_fedavg_round_on_ray_changes_while_the_cell_runs(ray_pair, monkeypatch):
    bob, alice = ray_pair
    ns = {}
    view = WorldWidget(namespace=ns)
    view._views.add("v1")
    view._seen = True
    sent = []
    view.send = lambda msg, buffers=None: sent.append((msg, live.scheduler.in_cell))
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(48, 8, generator=g), torch.randint(0, 3, (48,), generator=g)
    fds = sy.BaseDataset(x, y, name="ray_events").federate([bob, alice])
    try:
        assert bob.follows_events and alice.follows_events
        model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))
        fl = sy.federated.FedAvg(model, fds, lr=0.1, batch_size=6)
        live.scheduler.in_cell = True  # the round's cell runs
        live.scheduler.last_flush, live.scheduler.cost = 0.0, 0.0
        monkeypatch.setattr(live, "FLUSH_INTERVAL", 0.0)  # every event may refresh (no clock in the test)
        revs = [view._feed.rev]
        result = fl.round(progress=False)
        during = [m for m, in_cell in sent if m.get("type") == "world_patch" and in_cell]
        live.scheduler.in_cell = False
        assert set(result.clients) == {"bob", "alice"}
        # patches reached the view before the round returned, each a new revision, with
        # changes on both workers' lanes (the models and batches the round stores there)
        assert len(during) >= 2 and [p["base"] for p in during] == list(range(revs[0], revs[0] + len(during)))
        lanes = {op[1] for p in during for op in p["ops"]}
        assert {"bob", "alice"} <= lanes
    finally:
        view.close()
        fds.unload()
        gc.collect()


def test_gets_and_copies_give_their_memory_back(fresh_worker):
    carol = fresh_worker("carol_budget", max_bytes=8 * 2**20)
    one_mib = torch.ones(2**18)
    for _ in range(20):  # 20 MiB in and out of a worker with 8 MiB: each get frees its bytes
        assert torch.equal(one_mib.send(carol).get(), one_mib)
    assert carol.objects == {}
