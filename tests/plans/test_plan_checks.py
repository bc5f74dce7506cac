"""A stored plan's ops are checked in full on its first run for some input metadata; later runs
check only what can change between calls. These tests hold the refusals to what a first run
would say: values a check reads, the memory held, the time budget, a smaller storage."""
import types

import pytest
import torch

import syft_lab.workers.core as core_module
from syft_lab.errors import OpCancelledError, QuotaExceededError, SyftError
from syft_lab.plans.graph import Node, PlanBuilds, PlanGraph, Value
from syft_lab.workers.core import WorkerCore
from syft_lab.workers.limits import Limits

aten = torch.ops.aten
MiB = 2**20


def stored(core, name, inputs, nodes):
    """Store a one-graph plan of ``nodes`` on ``core``: inputs are (name, shape, dtype)."""
    specs = [{"name": n, "role": "input", "shape": list(s), "dtype": d} for n, s, d in inputs]
    graph = PlanGraph(name, specs, [], nodes, [Value("node", len(nodes) - 1)], True)
    return core.store_plan(PlanBuilds(name, [graph]), [])


def test_a_cost_bound_that_reads_a_tensor_argument_is_checked_on_every_call():
    c = WorkerCore("bob")
    plan = stored(c, "poly", [("x", (1000,), "float32"), ("n", (), "float32")],
                  [Node(aten.special_chebyshev_polynomial_t.default, [Value("input", 0), Value("input", 1)], {},
                        [((1000,), "float32")])])
    x = c.store(torch.linspace(-1, 1, 1000))
    for _ in range(2):
        (out,) = c.run_plan(plan, [x, c.store(torch.tensor(2.0))])
        assert torch.allclose(c.objects[out.id], 2 * c.objects[x] ** 2 - 1)
    huge = c.store(torch.tensor(2.0**40))
    held = set(c.objects)
    with pytest.raises(QuotaExceededError, match=r"special_chebyshev_polynomial_t.* \(degree\), more than the per-op"):
        c.run_plan(plan, [x, huge])
    assert set(c.objects) == held


def test_a_later_call_is_refused_when_what_the_worker_holds_leaves_no_room():
    c = WorkerCore("limited", limits=Limits(max_bytes=5 * MiB, max_objects=100))
    plan = stored(c, "twice", [("x", (MiB // 4,), "float32")],
                  [Node(aten.repeat.default, [Value("input", 0), [2]], {}, [((MiB // 2,), "float32")])])
    x = c.store(torch.ones(MiB // 4))  # 1 MiB; each call stores 2 MiB more
    (first,) = c.run_plan(plan, [x])
    c.run_plan(plan, [x])
    held = set(c.objects)
    with pytest.raises(QuotaExceededError, match=r"aten.repeat.default would make 2.0 MiB while the worker holds "
                                                 r"5.0 MiB"):
        c.run_plan(plan, [x])
    assert set(c.objects) == held
    c.decref(first.id)  # room again: the same call runs
    (again,) = c.run_plan(plan, [x])
    assert torch.equal(c.objects[again.id], torch.ones(MiB // 2))


def test_a_later_call_past_the_time_budget_stops_between_two_ops(monkeypatch):
    c = WorkerCore("timed", limits=Limits(max_bytes=64 * MiB, max_op_seconds=10.0))
    nodes = [Node(aten.add.Tensor, [Value("input", 0) if k == 0 else Value("node", k - 1), 1.0], {},
                  [((4,), "float32")]) for k in range(3)]
    plan = stored(c, "three_adds", [("x", (4,), "float32")], nodes)
    x = c.store(torch.zeros(4))
    (out,) = c.run_plan(plan, [x])
    assert torch.equal(c.objects[out.id], torch.full((4,), 3.0))
    ticks = iter([0.0] + [100.0] * 10)  # the clock passes the budget after the plan starts
    monkeypatch.setattr(core_module, "time", types.SimpleNamespace(monotonic=lambda: next(ticks)))
    held = set(c.objects)
    with pytest.raises(OpCancelledError, match=r"plan 'three_adds' ran past the worker's time budget of 10 s"):
        c.run_plan(plan, [x])
    assert set(c.objects) == held


def test_a_plans_first_compile_is_not_charged_to_its_time_budget(monkeypatch):
    """The first compile in a process imports torch's compiler stack: 13 s once on a loaded
    2-core machine, which stopped a 3-op plan as "past its time budget of 10 s"."""
    c = WorkerCore("timed", limits=Limits(max_bytes=64 * MiB, max_op_seconds=10.0))
    nodes = [Node(aten.add.Tensor, [Value("input", 0) if k == 0 else Value("node", k - 1), 1.0], {},
                  [((4,), "float32")]) for k in range(3)]
    plan = stored(c, "three_adds", [("x", (4,), "float32")], nodes)
    x = c.store(torch.zeros(4))
    now = [0.0]
    monkeypatch.setattr(core_module, "time", types.SimpleNamespace(monotonic=lambda: now[0]))
    compile_graph = PlanGraph._compile

    def slow_compile(graph):
        now[0] += 100.0  # longer than the budget
        return compile_graph(graph)

    monkeypatch.setattr(PlanGraph, "_compile", slow_compile)
    (out,) = c.run_plan(plan, [x])
    assert torch.equal(c.objects[out.id], torch.full((4,), 3.0)) and now[0] == 100.0


def test_an_input_of_the_same_shape_on_a_smaller_storage_is_checked_again():
    c = WorkerCore("bob")
    plan = stored(c, "peek", [("x", (4,), "float32")],
                  [Node(aten.as_strided.default, [Value("input", 0), [8], [1], 0], {}, [((8,), "float32")])])
    wide = c.store(torch.arange(8.0)[:4])  # a view of 8 elements: reading all 8 stays inside its storage
    for _ in range(2):
        (out,) = c.run_plan(plan, [wide])
        assert torch.equal(c.objects[out.id], torch.arange(8.0))
    narrow = c.store(torch.arange(4.0))
    with pytest.raises(SyftError, match="outside the input's storage"):
        c.run_plan(plan, [narrow])


def test_ops_after_a_data_sized_op_are_checked_on_every_call():
    """nonzero's output size follows the data: what reads it is checked again on each call."""
    c = WorkerCore("limited", limits=Limits(max_bytes=8 * MiB, max_objects=100))
    n = 1024
    plan = stored(c, "spread", [("x", (n,), "float32")], [
        Node(aten.nonzero.default, [Value("input", 0)], {}, [((2, 1), "int64")]),
        Node(aten.repeat.default, [Value("node", 0), [4096, 1]], {}, [((8192, 1), "int64")]),
    ])
    few = c.store(torch.zeros(n).index_fill_(0, torch.tensor([0, 1]), 1.0))
    for _ in range(2):
        (out,) = c.run_plan(plan, [few])
        assert c.objects[out.id].shape == (8192, 1)
        c.decref(out.id)
    many = c.store(torch.ones(n))  # 1024 int64 indices repeated 4096 times: 32 MiB
    held = set(c.objects)
    with pytest.raises(QuotaExceededError, match="aten.repeat.default"):
        c.run_plan(plan, [many])
    assert set(c.objects) == held
