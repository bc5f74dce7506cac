"""Plans (issues 5 and 16): one plan message vs the same step op by op and vs the step run
eagerly, replay cost over the same aten ops called directly, and the first build in a fresh
process. Peers and floors are measured side by side in one run."""
from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import torch

import common
from common import cpu_clock, figure, fresh_process, interleaved

torch.set_num_threads(1)
HERE = Path(__file__).resolve().parent

# The training step of every figure here (also run as code in fresh processes).
STEP_SOURCE = """
import torch, torch.nn as nn
torch.set_num_threads(1)
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
"""


def _step():
    ns: dict = {}
    exec(STEP_SOURCE, ns)
    return ns["model"], ns["X"], ns["Y"], ns["train_step"]


def first_build(quick: bool) -> list[dict]:
    """The first plan of a fresh process (after ``import syft_lab``): traced by plans/record.py,
    which imports nothing more, beside the same build through torch's make_fx (the tracer for
    batch-generic and large plans), which imports torch._dynamo on its first use."""
    code = STEP_SOURCE + textwrap.dedent("""
        import json, time, sys
        import syft_lab as sy
        from syft_lab.plans import record
        if MAKE_FX:
            record.REAL_ELEMENTS = -1  # every trace through make_fx
        t0 = time.perf_counter()
        sy.plan(train_step, state=model).build(X, Y)
        first = time.perf_counter() - t0
        dynamo = "torch._dynamo" in sys.modules
        t0 = time.perf_counter()
        sy.plan(train_step, state=model).build(X, Y)
        print(json.dumps({"first": first, "second": time.perf_counter() - t0, "dynamo": dynamo}))
    """)
    runs = {False: [], True: []}
    # smoke: the build only (the make_fx process, which imports torch._dynamo, is most of its time)
    tracers = (False,) if common.SMOKE else (False, True)
    for i in range(1 if quick else 3):
        for fx in (tracers if i % 2 == 0 else tracers[::-1]):
            runs[fx].append(fresh_process(f"MAKE_FX = {fx}\n" + code))
    med = lambda rs, k: sorted(r[k] for r in rs)[len(rs) // 2] if rs else float("nan")  # noqa: E731
    first, fx_first = med(runs[False], "first"), med(runs[True], "first")
    imported = "imports" if any(r["dynamo"] for r in runs[False]) else "does not import"
    return [figure("first plan build in a fresh process", first * 1e3, "ms", 300.0,
                   peer=f"the build {imported} torch._dynamo; a second build {med(runs[False], 'second') * 1e3:.0f} ms; "
                        + (f"the same first build through torch's make_fx (batch-generic plans' tracer, which "
                           f"imports torch._dynamo) {fx_first * 1e3:.0f} ms, its second {med(runs[True], 'second') * 1e3:.0f} ms "
                           if runs[True] else "make_fx's build not run (smoke mode) ")
                        + f"({len(runs[False])} process(es) each, in turns)")]


def _direct_aten(model, train_step, X, Y):
    """The step's aten ops called directly (torch's own fx code for the trace), no replay loop."""
    from torch.fx.experimental.proxy_tensor import make_fx

    from syft_lab.plans.trace import _flat_fn, _state_tensors

    names, values = _state_tensors(model)
    flat = _flat_fn(train_step, model, names)
    examples = [torch.empty(t.shape, dtype=t.dtype).requires_grad_(t.requires_grad) for t in values + [X, Y]]
    return make_fx(flat, tracing_mode="fake")(*examples)


def in_process(quick: bool) -> list[dict]:
    import syft_lab as sy
    from syft_lab.wire.allowlist import check_result

    sy.hook()
    model, X, Y, train_step = _step()
    step = sy.plan(train_step, state=model).build(X, Y)
    bob = sy.VirtualWorker("bench_plans_bob")
    _, _, _, step_eager = _step()  # the eager step trains a model of its own
    x_ptr, y_ptr = X.send(bob), Y.send(bob)
    model.send(bob)
    pp = step.send(bob)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def op_by_op():
        opt.zero_grad()
        loss = ((model(x_ptr) - y_ptr) ** 2).mean()
        loss.backward()
        opt.step()

    repeat = 11 if quick else 41
    pp(x_ptr, y_ptr), op_by_op()  # warm
    t = interleaved({"eager": lambda: step_eager(X, Y), "plan": lambda: pp(x_ptr, y_ptr), "op_by_op": op_by_op},
                    number=5 if quick else 10, repeat=repeat, clock=cpu_clock)
    model.get()

    # replay vs the same aten ops called directly, both without autograd (the graph holds the
    # backward ops already; the step writes its parameters, so replay runs it under no_grad)
    graph = step._graph
    n = len(graph.nodes)
    values = [p.detach().clone() for p in model.parameters()] + [X, Y]
    gm = _direct_aten(model, train_step, X, Y)
    core = bob.core

    def direct():
        with torch.no_grad():
            gm(*values)

    def replay():
        with torch.no_grad():
            graph.run(values)

    token = object()  # a stored plan's policy token: its checks learned once for these inputs' metadata

    def replay_checked():  # as a worker replays a stored plan (after its first run on this metadata)
        with torch.no_grad():
            graph.run(values, guard=core._guard_node, check=check_result, learn=token)

    def replay_full():  # every node through the allow-list's checks (a plan's first run, a sy.batch)
        with torch.no_grad():
            graph.run(values, guard=core._guard_node, check=check_result)

    replay_checked()
    tr = interleaved({"direct": direct, "replay": replay, "checked": replay_checked, "full": replay_full},
                     number=10 if quick else 40, repeat=repeat, clock=cpu_clock)
    bob.close()
    per_node = (tr["replay"] - tr["direct"]) / n * 1e6
    per_node_checked = (tr["checked"] - tr["direct"]) / n * 1e6
    per_node_full = (tr["full"] - tr["direct"]) / n * 1e6
    return [
        figure("training step as one plan on a VirtualWorker vs the same step run eagerly", t["plan"] * 1e6, "us",
               1.15, peer=f"eager step (local tensors, autograd) {t['eager'] * 1e6:.0f} us; replay alone "
                          f"{tr['replay'] * 1e6:.0f} us, with the checks as a stored plan replays them "
                          f"{tr['checked'] * 1e6:.0f} us (every node through the allow-list: "
                          f"{tr['full'] * 1e6:.0f} us)",
               ratio=t["plan"] / t["eager"]),
        figure("training step: op-by-op pointers vs one plan message (VirtualWorker)",
               t["op_by_op"] / t["plan"], "x faster", 15.0, higher_is_better=True,
               peer=f"op by op {t['op_by_op'] * 1e3:.2f} ms, plan {t['plan'] * 1e3:.3f} ms",
               ratio=t["op_by_op"] / t["plan"]),
        figure(f"plan replay overhead per node ({n} nodes) over the same aten ops called directly", per_node,
               "us/node", 3.0, peer=f"direct (torch's fx code, no_grad) {tr['direct'] * 1e6:.0f} us, replay "
                                    f"{tr['replay'] * 1e6:.0f} us; with a stored plan's checks "
                                    f"{per_node_checked:.2f} us/node (every node through the allow-list: "
                                    f"{per_node_full:.2f} us/node)"),
    ]


def server_side(quick: bool) -> list[dict]:
    """What a worker process does for one plan call, without its transport: ``quick`` and the
    answer (``ServiceConnection.answer``) to the run_plan message on a WorkerService with the
    default quotas (the learned checks: the quota once for the replay's peak, the time budget per
    op), and the release of its result, beside the bare replay of the same graph on the same
    stored tensors (no_grad, no checks) and the eager step, in turns (issue 23: the server's part
    of a plan round trip)."""
    import syft_lab as sy
    from syft_lab.workers.protocol import WorkerClient
    from syft_lab.workers.connection import ServiceConnection
    from syft_lab.workers.service import WorkerService
    from syft_lab.workers.virtual import InProcessTransport

    sy.hook()
    model, X, Y, train_step = _step()
    step = sy.plan(train_step, state=model).build(X, Y)
    _, _, _, step_eager = _step()
    service = WorkerService("bench_plans_server_side")
    client = WorkerClient("bench_plans_server_side", InProcessTransport(service))
    x, y = X.send(client), Y.send(client)
    model.send(client)
    pp = step.send(client)
    msg = {"c": "run_plan", "id": pp._ref.id, "a": [x._ref.id, y._ref.id], "s": [r.id for r in pp._state_refs()]}
    session = client.transport.session
    door = ServiceConnection(service, session)
    core = service.core
    values = [core.objects[i] for i in msg["s"] + msg["a"]]
    graph = core.objects[pp._ref.id].builds.select(values)
    quick_seen = []

    def served():
        m = dict(msg)
        quick_seen.append(service.quick(m))
        reply, _ = door.answer(m)
        for r in reply["ok"]:
            service.release_one(session, r.id)

    def replay():
        with torch.no_grad():
            graph.run(values)

    for _ in range(3):
        served()
    t = interleaved({"served": served, "replay": replay, "eager": lambda: step_eager(X, Y)},
                    number=10 if quick else 40, repeat=11 if quick else 41, clock=cpu_clock)
    del x, y, pp
    return [figure("plan call on a worker service with quotas (quick + handle + release, no transport) vs its bare replay",
                   t["served"] * 1e6, "us", None,
                   peer=f"bare replay (no checks, no_grad) {t['replay'] * 1e6:.0f} us; the service's part outside it "
                        f"{(t['served'] - t['replay']) * 1e6:.0f} us; eager step {t['eager'] * 1e6:.0f} us; quick said "
                        f"{'yes' if all(quick_seen[3:]) else 'no'}",
                   ratio=t["served"] / t["replay"])]


def over_websocket(quick: bool) -> list[dict]:
    """A plan call on a worker process vs one bare websockets echo plus the step's eager compute."""
    import subprocess

    import syft_lab as sy
    from websockets.sync.client import connect

    import bench_transport as bt

    model, X, Y, train_step = _step()
    step = sy.plan(train_step, state=model).build(X, Y)
    _, _, _, step_eager = _step()
    bare, port = bt._start([sys.executable, str(HERE / "bench_transport.py"), "--bare-server"])
    remote = sy.start_worker("bench_plans_remote")
    try:
        ws = connect(f"ws://127.0.0.1:{port}", compression=None, legacy=True)
        x_r, y_r = X.send(remote), Y.send(remote)
        model.send(remote)
        pp_r = step.send(remote)
        opt_r = torch.optim.SGD(model.parameters(), lr=0.01)
        msg = b"E" + b"x" * 200  # about a plan call's request and reply

        def op_by_op():
            opt_r.zero_grad()
            loss = ((model(x_r) - y_r) ** 2).mean()
            loss.backward()
            opt_r.step()
            del loss
            # the step's temporaries are released now: queued, their releases would ride on the
            # next request, the plan call timed after it, and their cost would count as the plan's
            remote.flush()

        fns = {"plan": lambda: pp_r(x_r, y_r), "echo": lambda: (ws.send(msg), ws.recv()),
               "eager": lambda: step_eager(X, Y)}
        for fn in fns.values():  # warm: the worker's first plan run loads torch's meta machinery
            fn()
        t = interleaved(fns, number=10 if quick else 20, repeat=11 if quick else 41)
        t_ops = interleaved({"op_by_op": op_by_op, "plan": fns["plan"]}, number=2 if quick else 5,
                            repeat=3 if quick else 9)
        model.get()
        ws.close()
    finally:
        remote.close()
        bare.kill()
        try:
            bare.wait(5)
        except subprocess.TimeoutExpired:
            pass
    floor = t["echo"] + t["eager"]
    return [
        figure("training step as one plan over a websocket worker vs one echo round trip + the eager step",
               t["plan"] * 1e6, "us", 1.3, peer=f"bare websockets echo {t['echo'] * 1e6:.0f} us + eager step "
                                               f"{t['eager'] * 1e6:.0f} us = {floor * 1e6:.0f} us",
               ratio=t["plan"] / floor),
        figure("training step: op-by-op pointers vs one plan message (websocket worker, loopback)",
               t_ops["op_by_op"] / t_ops["plan"], "x faster", 20.0, higher_is_better=True,
               peer=f"op by op {t_ops['op_by_op'] * 1e3:.1f} ms, plan {t_ops['plan'] * 1e3:.2f} ms",
               ratio=t_ops["op_by_op"] / t_ops["plan"]),
    ]


def run(quick: bool = False) -> list[dict]:
    return in_process(quick) + server_side(quick) + over_websocket(quick) + first_build(quick)


if __name__ == "__main__":
    from run import print_table

    print_table(run("--quick" in sys.argv))
