"""Plans (issue 5): one plan message vs the same step op by op, replay cost, tracing cost."""
from __future__ import annotations

import sys
import time

import torch
import torch.nn as nn

from common import figure, interleaved

torch.set_num_threads(1)


def _setup(sy, worker):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
    X, Y = torch.randn(32, 8), torch.randn(32, 1)

    def train_step(x, y):
        loss = ((model(x) - y) ** 2).mean()
        grads = torch.autograd.grad(loss, list(model.parameters()))
        with torch.no_grad():
            for p, g in zip(model.parameters(), grads):
                p.sub_(0.01 * g)
        return loss

    t0 = time.perf_counter()
    step = sy.plan(train_step, state=model).build(X, Y)
    trace_s = time.perf_counter() - t0
    return model, X, Y, train_step, step, trace_s


def run(quick: bool = False) -> list[dict]:
    import syft_lab as sy

    sy.hook()
    bob = sy.VirtualWorker("bench_plans_bob")
    model, X, Y, train_step, step, trace_s = _setup(sy, bob)
    # a second trace, warm: what building another plan costs once torch's tracer is loaded
    t0 = time.perf_counter()
    sy.plan(train_step, state=model).build(X, Y)
    trace_warm = time.perf_counter() - t0
    x_ptr, y_ptr = X.send(bob), Y.send(bob)
    model.send(bob)
    pp = step.send(bob)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def eager_pointer_step():
        opt.zero_grad()
        loss = ((model(x_ptr) - y_ptr) ** 2).mean()
        loss.backward()
        opt.step()

    def plan_step():
        pp(x_ptr, y_ptr)

    repeat = 5 if quick else 15
    t = interleaved({"eager": eager_pointer_step, "plan": plan_step}, number=5 if quick else 30, repeat=repeat)
    model.get()

    # replay overhead per node, in process, against the same function run eagerly
    graph = step._graph
    n = len(graph.nodes)
    state = list(model.parameters())
    values = state + [X, Y]

    def eager_local():
        with torch.no_grad():
            # the traced graph already holds the backward ops; eager must run autograd for them
            pass
        train_step(X, Y)

    def replay():
        graph.run(values)

    tr = interleaved({"eager": eager_local, "replay": replay}, number=20 if quick else 200, repeat=repeat)
    per_node_us = (tr["replay"] - tr["eager"]) / n * 1e6
    bob.close()

    # the same comparison against a worker process over websockets on loopback
    remote = sy.start_worker("bench_plans_remote")
    try:
        x_r, y_r = X.send(remote), Y.send(remote)
        model.send(remote)
        pp_r = step.send(remote)
        opt_r = torch.optim.SGD(model.parameters(), lr=0.01)

        def eager_remote():
            opt_r.zero_grad()
            loss = ((model(x_r) - y_r) ** 2).mean()
            loss.backward()
            opt_r.step()

        tw = interleaved({"eager": eager_remote, "plan": lambda: pp_r(x_r, y_r)},
                         number=2 if quick else 10, repeat=3 if quick else 7)
        model.get()
    finally:
        remote.close()
    return [
        figure("training step: op-by-op pointers vs one plan message (websocket worker, loopback)",
               tw["eager"] / tw["plan"], "x faster", 20.0, higher_is_better=True,
               peer=f"op by op {tw['eager'] * 1e3:.1f} ms, plan {tw['plan'] * 1e3:.2f} ms",
               ratio=tw["eager"] / tw["plan"]),
        figure("training step: op-by-op pointers vs one plan message (VirtualWorker)",
               t["eager"] / t["plan"], "x faster", 15.0, higher_is_better=True,
               peer=f"op by op {t['eager'] * 1e3:.2f} ms, plan {t['plan'] * 1e3:.3f} ms",
               ratio=t["eager"] / t["plan"]),
        figure(f"plan replay overhead per node ({n} nodes) over eager torch", per_node_us, "us/node", 3.0,
               peer=f"eager step {tr['eager'] * 1e6:.0f} us, replay {tr['replay'] * 1e6:.0f} us"),
        figure("tracing the training step (first plan in the process)", trace_s * 1e3, "ms", 50.0,
               peer=f"a second build: {trace_warm * 1e3:.1f} ms"),
    ]


if __name__ == "__main__":
    from run import print_table

    print_table(run("--quick" in sys.argv))
