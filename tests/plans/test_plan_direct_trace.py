"""Issue 23.6: a plan of small state and inputs is traced without make_fx (plans/record.py), so a
fresh process's first build does not import torch._dynamo; it computes what make_fx's trace
computes, and whatever it does not trace goes to make_fx as before."""
import json
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.nn as nn

import syft_lab as sy
from syft_lab.plans import TraceError, record


def _graphs(fn, *examples, state=None, monkeypatch):
    """The graph of the direct trace and of make_fx's, for the same function and examples."""
    direct = sy.plan(fn, state=state).build(*examples).builds().latest
    with monkeypatch.context() as m:
        m.setattr(record, "REAL_ELEMENTS", -1)  # every trace through make_fx
        via_fx = sy.plan(fn, state=state).build(*examples).builds().latest
    return direct, via_fx


def _ops(graph):
    return [n.name for n in graph.nodes if n.name != "aten.detach.default"]


def _replay(graph, values):
    with torch.no_grad():
        return graph.run([v.clone() for v in values])


def _replay_state(graph, values):
    """The outputs and the state inputs after one replay (a training step writes them)."""
    copies = [v.clone() for v in values]
    with torch.no_grad():
        out = graph.run(copies)
    return out + copies


def test_a_gradient_step_traces_to_make_fxs_ops(monkeypatch):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))

    def train_step(x, y):
        loss = ((model(x) - y) ** 2).mean()
        grads = torch.autograd.grad(loss, list(model.parameters()))
        with torch.no_grad():
            for p, g in zip(model.parameters(), grads):
                p.sub_(0.01 * g)
        return loss

    x, y = torch.randn(32, 8), torch.randn(32, 1)
    direct, via_fx = _graphs(train_step, x, y, state=model, monkeypatch=monkeypatch)
    # (make_fx of torch 2.14 records two aten.alias nodes more for the no_grad update: a no-op)
    assert _ops(direct) == [op for op in _ops(via_fx) if op != "aten.alias.default"]
    values = [p.detach() for p in model.parameters()] + [x, y]
    assert all(torch.allclose(a, b) for a, b in zip(_replay_state(direct, values), _replay_state(via_fx, values)))


def test_a_training_step_with_an_optimizer_trains_as_make_fxs_trace_does(monkeypatch):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3))

    def step(x, y):
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    x, y = torch.randn(5, 4), torch.tensor([0, 2, 1, 1, 0])
    direct, via_fx = _graphs(step, x, y, state=model, monkeypatch=monkeypatch)
    values = [p.detach() for p in model.parameters()] + [x, y]
    got, expected = _replay_state(direct, values), _replay_state(via_fx, values)
    assert not torch.equal(got[1], values[0])  # the step trained the first layer's weight
    assert all(torch.allclose(a, b) for a, b in zip(got, expected))


def test_constants_tuples_and_in_place_updates_replay_as_make_fxs_trace(monkeypatch):
    scale = torch.tensor([[2., -1., 0.5]])

    def f(x):
        top, idx = x.topk(2, dim=1)  # a tuple of outputs: getitem nodes
        z = x * scale + torch.tensor(1.)  # a closed-over constant, a literal (lift_fresh_copy)
        z.add_(top.sum())
        return z, idx, torch.cat([top, top]).max(dim=0).values

    x = torch.randn(4, 3)
    direct, via_fx = _graphs(f, x, monkeypatch=monkeypatch)
    assert _ops(direct) == _ops(via_fx)
    assert [c.tolist() for c in direct.constants] == [c.tolist() for c in via_fx.constants]
    assert direct.constant_names[0] == "scale"
    for a, b, eager in zip(_replay(direct, [x]), _replay(via_fx, [x]), f(x)):
        assert torch.equal(a, b) and torch.equal(a, eager)


def test_a_seeded_random_plan_replays_its_numbers_and_leaves_the_callers_generator_alone(monkeypatch):
    def noisy(x):
        torch.manual_seed(7)
        return x + torch.rand(3) + nn.functional.dropout(torch.ones(3), 0.5)

    torch.manual_seed(0)
    expected = torch.rand(1)
    torch.manual_seed(0)
    direct, via_fx = _graphs(noisy, torch.zeros(3), monkeypatch=monkeypatch)
    assert torch.equal(torch.rand(1), expected)  # tracing drew nothing from this process's generator
    x = torch.ones(3)
    assert torch.equal(_replay(direct, [x])[0], _replay(via_fx, [x])[0])
    torch.manual_seed(7)
    assert torch.equal(_replay(direct, [x])[0], x + torch.rand(3) + nn.functional.dropout(torch.ones(3), 0.5))


def test_what_the_direct_tracer_does_not_trace_still_builds_through_make_fx(monkeypatch):
    def sample(p):
        return torch.multinomial(p, 2)  # fails on zero probabilities: traced by make_fx instead

    graph = sy.plan(sample).build(torch.ones(2, 3)).builds().latest
    assert [n.name for n in graph.nodes] == ["aten.multinomial.default"]

    calls = []
    monkeypatch.setattr(record, "REAL_ELEMENTS", 10)  # a plan with larger inputs than this: make_fx
    monkeypatch.setattr(record, "run", lambda *a, **k: calls.append(a))
    big = sy.plan(lambda x: (x * 2).sum()).build(torch.ones(4, 4))
    assert calls == [] and torch.equal(big(torch.ones(4, 4)), torch.tensor(32.))


def test_the_direct_tracer_gives_make_fxs_errors():
    @sy.plan
    def branchy(x):
        if x.sum() > 0:
            return x
        return -x

    with pytest.raises(TraceError, match=r"branches on tensor values at line \d+ .*if x.sum\(\) > 0"):
        branchy.build(torch.ones(2))

    g = torch.Generator()

    @sy.plan
    def own(x):
        return x + torch.rand(2, generator=g)

    with pytest.raises(TraceError, match=r"torch.Generator of its own"):
        own.build(torch.ones(2))

    @sy.plan
    def via_numpy(x):  # a read of the memory outside aten: refused as make_fx refuses it
        return x + float(x.numpy().sum())

    with pytest.raises(TraceError, match=r"could not be traced.*numpy"):
        via_numpy.build(torch.ones(2))

    @sy.plan
    def pair(x):
        return x, 3

    with pytest.raises(TraceError, match=r"must return tensors"):
        pair.build(torch.ones(2))


def test_a_fresh_process_builds_a_training_step_without_importing_torch_dynamo():
    code = textwrap.dedent("""
        import json, sys
        import torch, torch.nn as nn
        import syft_lab as sy
        model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))

        def train_step(x, y):
            loss = ((model(x) - y) ** 2).mean()
            grads = torch.autograd.grad(loss, list(model.parameters()))
            with torch.no_grad():
                for p, g in zip(model.parameters(), grads):
                    p.sub_(0.01 * g)
            return loss

        step = sy.plan(train_step, state=model).build(torch.ones(32, 8), torch.ones(32, 1))
        print(json.dumps({"nodes": len(step.builds().latest.nodes), "dynamo": "torch._dynamo" in sys.modules}))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["nodes"] > 20 and result["dynamo"] is False
