"""Small commands that arrive while their connection is idle run at once on the worker's event
loop (server.py's WorkerServer._inline); everything else goes through the handler. What a
client sees is unchanged: replies come in request order, with the right values, whatever mix
of quick ops, pings, stores and long ops is in flight on one connection."""
import pytest
import torch

import syft_lab as sy
from syft_lab.workers import gather, submit
from syft_lab.workers.websocket import WebSocketWorker

add, mm = torch.ops.aten.add.Tensor, torch.ops.aten.mm.default


@pytest.fixture
def bob(worker_procs, token):
    sy.hook()
    w = WebSocketWorker(worker_procs["bob"].url, id="bob", token=token, progress=False)
    yield w
    w.close()


def test_requests_in_flight_of_every_kind_are_answered_in_order(bob):
    x = torch.arange(6.0).reshape(2, 3)
    big = torch.randn(300, 300)
    p, q = x.send(bob), big.send(bob)
    pending = []
    for i in range(5):
        pending.append(submit(add, (p, float(i))))  # quick: on the loop
        pending.append(bob.submit_request({"c": "ping"}))
        pending.append(submit(mm, (q, q)))  # larger: on the command thread
        pending.append(bob.submit_request({"c": "store", "o": torch.full((3,), float(i))}, detach=True))
    out = gather(pending)
    for i in range(5):
        s, pong, prod, stored = out[4 * i:4 * i + 4]
        assert torch.equal(s.get(), x + i)
        assert pong == "pong"
        assert torch.allclose(prod.get(), big @ big)
        assert type(stored) is int
    assert torch.equal(p.get(), x)


def test_many_quick_ops_one_after_another_stay_in_step(bob):
    p = torch.ones(3).send(bob)
    acc = p
    for _ in range(200):
        acc = acc + p  # each result released as the next replaces it
    assert torch.equal(acc.get(), torch.full((3,), 201.0))
    assert bob.ping()
