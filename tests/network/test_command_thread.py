"""The worker's command thread computes with the worker's own torch settings (--threads): torch's
thread count is per thread under OpenMP, and a thread the server starts would otherwise start
an OpenMP team of the machine's size for every op it runs (a plan replay there took 10-25x its
CPU time). And a stored plan gives the same values whether it runs there (its first call, whose
checks it learns) or on the event loop (later calls): both are the function run eagerly."""
import torch
import torch.nn as nn

import syft_lab as sy
from syft_lab.workers.websocket import WebSocketWorker


def _threads(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("Threads:"):
                return int(line.split()[1])
    raise AssertionError("no thread count")


def test_ops_on_the_command_thread_start_no_thread_team(spawn, token):
    w = spawn("threads1")  # --threads 1
    bob = WebSocketWorker(w.url, id="threads1", token=token, progress=False)
    try:
        x = torch.randn(600, 600)
        m = x.send(bob)
        before = _threads(w.proc.pid)
        for _ in range(3):  # each mm is over the inline bound: it runs on the command thread
            r = (m @ m + m).sum()
        assert torch.allclose(r.get(), (x @ x + x).sum(), rtol=1e-4)
        assert _threads(w.proc.pid) == before
    finally:
        bob.close()


def test_a_training_step_plan_gives_eager_values_on_the_thread_and_inline(spawn, token):
    w = spawn("planvalues")
    bob = WebSocketWorker(w.url, id="planvalues", token=token, progress=False)
    try:
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
        local = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
        local.load_state_dict(model.state_dict())
        X, Y = torch.randn(16, 4), torch.randn(16, 1)

        def step_of(net):
            def train_step(x, y):
                loss = ((net(x) - y) ** 2).mean()
                grads = torch.autograd.grad(loss, list(net.parameters()))
                with torch.no_grad():
                    for p, g in zip(net.parameters(), grads):
                        p.sub_(0.1 * g)
                return loss
            return train_step

        step = sy.plan(step_of(model), state=model).build(X, Y)
        eager = step_of(local)
        x_r, y_r = X.send(bob), Y.send(bob)
        model.send(bob)
        pp = step.send(bob)
        losses = [pp(x_r, y_r).get() for _ in range(12)]  # the first on the thread, then inline
        expected = [eager(X, Y).detach() for _ in range(12)]
        assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(losses, expected))
        model.get()
        assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(model.parameters(), local.parameters()))
    finally:
        bob.close()
