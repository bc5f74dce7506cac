"""Issue 23: a stored plan replayed on inputs whose every op's checks were learned takes the
quota for the whole replay at once (the most memory it holds at once, counted as held while it
runs), and checks the time budget before each op; when that peak does not fit, every op is
rechecked as before, so the refusal names the op that does not fit and nothing is stored. A
run_plan that ``quick`` said yes to reuses what quick found only for that very message."""
import types

import pytest
import torch

import syft_lab.workers.core as core_module
from syft_lab.commands import Ref
from syft_lab.errors import OpCancelledError, QuotaExceededError
from syft_lab.plans.graph import Node, PlanBuilds, PlanGraph, Value
from syft_lab.workers.connection import ServiceConnection
from syft_lab.workers.core import WorkerCore
from syft_lab.workers.limits import Limits
from syft_lab.workers.service import Session, WorkerService

aten = torch.ops.aten
MiB = 2**20


def _repeat_then_add(core):
    """x (1 MiB) -> repeat to 2 MiB -> + 1 (2 MiB more while the repeat lives): a 4 MiB peak."""
    specs = [{"name": "x", "role": "input", "shape": [MiB // 4], "dtype": "float32"}]
    nodes = [Node(aten.repeat.default, [Value("input", 0), [2]], {}, [((MiB // 2,), "float32")]),
             Node(aten.add.Tensor, [Value("node", 0), 1.0], {}, [((MiB // 2,), "float32")])]
    graph = PlanGraph("grow", specs, [], nodes, [Value("node", 1)], True)
    return core.store_plan(PlanBuilds("grow", [graph]), [])


def test_a_learned_replay_holds_its_peak_while_it_runs_and_gives_it_back():
    c = WorkerCore("peak", limits=Limits(max_bytes=64 * MiB, max_objects=100))
    plan = _repeat_then_add(c)
    x = c.store(torch.zeros(MiB // 4))
    held_during = []
    admit = c._admit_replay

    def watched(peak, outputs):
        answer = admit(peak, outputs)
        held_during.append(c.budget.reserved)
        return answer

    c._admit_replay = watched
    for _ in range(3):
        (out,) = c.run_plan(plan, [x])
        assert torch.equal(c.objects[out.id], torch.ones(MiB // 2))
        c.decref(out.id)
        assert c.budget.reserved == 0  # given back once the replay ended
    assert held_during == [4 * MiB, 4 * MiB]  # the first run learns; the later ones hold the peak


def test_a_later_call_whose_peak_does_not_fit_is_refused_at_the_op_that_does_not_fit():
    c = WorkerCore("full", limits=Limits(max_bytes=8 * MiB, max_objects=100))
    plan = _repeat_then_add(c)
    x = c.store(torch.zeros(MiB // 4))
    c.run_plan(plan, [x]), c.run_plan(plan, [x])  # 1 + 2 + 2 MiB held: the 4 MiB peak no longer fits
    held = set(c.objects)
    with pytest.raises(QuotaExceededError, match=r"aten.add.Tensor would make 2.0 MiB while the worker holds "
                                                 r"7.0 MiB"):
        c.run_plan(plan, [x])
    assert set(c.objects) == held and c.budget.reserved == 0


def test_a_learned_replay_past_the_time_budget_stops_and_gives_its_peak_back(monkeypatch):
    c = WorkerCore("timed", limits=Limits(max_bytes=64 * MiB, max_op_seconds=10.0))
    plan = _repeat_then_add(c)
    x = c.store(torch.zeros(MiB // 4))
    c.run_plan(plan, [x])
    ticks = iter([0.0] + [100.0] * 10)  # the clock passes the budget once the plan has started
    monkeypatch.setattr(core_module, "time", types.SimpleNamespace(monotonic=lambda: next(ticks)))
    held = set(c.objects)
    with pytest.raises(OpCancelledError, match=r"plan 'grow' ran past the worker's time budget of 10 s"):
        c.run_plan(plan, [x])
    assert set(c.objects) == held and c.budget.reserved == 0


def _quick_service():
    service, session = WorkerService("hinted"), Session()
    specs = [{"name": "x", "role": "input", "shape": [4], "dtype": "float32"}]
    nodes = [Node(aten.add.Tensor, [Value("input", 0), 1.0], {}, [((4,), "float32")])]
    plan = service.core.store_plan(PlanBuilds("inc", [PlanGraph("inc", specs, [], nodes, [Value("node", 0)], True)]), [])
    x = service.core.store(torch.zeros(4))
    msg = {"c": "run_plan", "id": plan, "a": [x]}
    for _ in range(2):
        ServiceConnection(service, session).answer(dict(msg))
    return service, session, x, msg


def test_a_quick_run_plan_gives_the_value_it_always_gave():
    service, session, x, msg = _quick_service()
    for _ in range(3):
        assert service.quick(msg)
        reply, _ = ServiceConnection(service, session).answer(msg)  # the very message quick saw
        assert torch.equal(service.core.objects[reply["ok"][0].id], torch.ones(4))


def test_an_input_reshaped_between_quick_and_the_run_is_seen_by_the_run():
    service, session, x, msg = _quick_service()
    assert service.quick(msg)
    conn = ServiceConnection(service, session)
    reply, _ = conn.answer({"c": "run", "op": "aten.unsqueeze_.default", "a": [Ref(x), 0], "k": None})
    assert "err" not in reply, reply
    reply, _ = conn.answer(msg)  # x is float32[1, 4] now: not what the plan was built for
    assert reply["err"]["t"] == "SyftError" and "built for" in reply["err"]["m"]
