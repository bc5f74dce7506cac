"""A worker process's time budget (--max-op-seconds): an expensive op or a plan still running past
it is stopped, its client gets OpCancelledError, and no client loses or sees changed anything."""
import pytest
import torch
import torch.nn.functional as F

import syft_lab as sy
from syft_lab.workers.websocket import WebSocketWorker

pytestmark = pytest.mark.network


@pytest.fixture
def slow(spawn, token):
    """A worker with a 0.3 s budget and one thread, and two clients of it."""
    proc = spawn("slow", extra=["--max-op-seconds", "0.3", "--threads", "1"])
    a = WebSocketWorker(proc.url, id="slow", token=token, progress=False)
    b = WebSocketWorker(proc.url, id="slow", token=token, progress=False)
    yield proc, a, b
    a.close()
    b.close()


def test_an_op_past_the_budget_is_stopped_and_no_client_loses_anything(slow):
    proc, a, b = slow
    kept = torch.arange(10.).send(a)
    image = torch.rand(1, 2, 600, 600)
    x = image.send(b)
    # a 64 x 64 window over 537 x 537 places, twice: ~2.4e9 element operations, seconds on one thread
    with pytest.raises(sy.OpCancelledError, match=r"aten.avg_pool2d.default ran past the worker's time budget "
                                                   r"of 0.3 s and was stopped: nothing was stored") as info:
        F.avg_pool2d(x, 64, 1)
    assert isinstance(info.value, sy.RemoteError) and info.value.worker_id == "slow"
    assert proc.proc.poll() is None and a.ping() and b.ping()
    # 2**33 multiply-adds (the per-op cost limit) in int64, which no BLAS speeds up: ~1 s on one
    # thread (in float32 a fast core does them in 0.13 s, under the budget)
    target, m = torch.randint(0, 9, (2048, 2048)), torch.randint(0, 9, (2048, 2048))
    t, mp = target.send(b), m.send(b)
    with pytest.raises(sy.OpCancelledError, match="aten.addmm_.default ran past"):
        t.addmm_(mp, mp)
    assert torch.equal(t.get(), target)  # the in-place target is as it was
    assert torch.equal(kept.get(), torch.arange(10.)) and torch.equal(x.get(), image)
    small = torch.rand(1, 1, 40, 40)
    assert torch.equal(F.avg_pool2d(small.send(a), 4, 1).get(), F.avg_pool2d(small, 4, 1))


def test_a_plan_past_the_budget_stops_between_its_ops(slow):
    _, a, _ = slow

    @sy.plan
    def forty_products(x):
        for _ in range(40):
            x = (x @ x).tanh()  # 2**30 multiply-adds each: ~0.05 s, 2 s in all
        return x

    forty_products.build(torch.rand(1024, 1024))
    remote = forty_products.send(a)
    x = torch.rand(1024, 1024).send(a)
    with pytest.raises(sy.OpCancelledError, match=r"plan 'forty_products' ran past the worker's time budget of "
                                                   r"0.3 s and was stopped between two of its ops: nothing was stored"):
        remote(x)
    assert len(a.objects) == 2  # the plan and x; no output
    assert a.ping() and torch.equal((x.get() * 0).sum(), torch.tensor(0.))
