"""A stored plan known to take a moment (``WorkerService.quick``) runs on the websocket server's
event loop instead of its command thread: only a replay whose every op's checks and sizes follow
from its inputs' metadata, once a replay on such inputs with those checks learned took under
QUICK_SECONDS, and never a malformed message. Where it
runs changes nothing a client sees: the same values, the same refusals."""
import pytest
import torch

import syft_lab as sy
from syft_lab.errors import QuotaExceededError
from syft_lab.plans.graph import Node, PlanBuilds, PlanGraph, Value
import syft_lab.workers.fastpath as policy_module  # (the fast-path policy: its bounds)
from syft_lab.workers.connection import ServiceConnection
from syft_lab.workers.limits import Limits
from syft_lab.workers.service import QUICK_RELEASES, Session, WorkerService

aten = torch.ops.aten
MiB = 2**20


@pytest.fixture(autouse=True)
def _timing_is_not_the_point(monkeypatch):
    """A replay's time varies (a garbage collection in it): these tests take any time as quick,
    except the one about the bound itself."""
    monkeypatch.setattr(policy_module, "QUICK_SECONDS", 60.0)


def _stored(service, name, shape, nodes):
    specs = [{"name": "x", "role": "input", "shape": list(shape), "dtype": "float32"}]
    graph = PlanGraph(name, specs, [], nodes, [Value("node", len(nodes) - 1)], True)
    return service.core.store_plan(PlanBuilds(name, [graph]), [])


def _run(service, session, msg):
    reply, _ = ServiceConnection(service, session).answer(dict(msg, r=1))
    assert "err" not in reply, reply
    (out,) = reply["ok"]
    return service.core.objects[out.id]


def _adds(n, shape):
    return [Node(aten.add.Tensor, [Value("input", 0) if k == 0 else Value("node", k - 1), 1.0], {},
                 [(shape, "float32")]) for k in range(n)]



def _warmed(service, n_adds: int, size: int):
    """A stored plan of ``n_adds`` adds on a tensor of ``size``, run twice (its metadata known):
    (service, session, the input's id, the run message)."""
    session = Session()
    plan = _stored(service, "adds", (size,), _adds(n_adds, (size,)))
    x = service.core.store(torch.zeros(size))
    msg = {"c": "run_plan", "id": plan, "a": [x]}
    _run(service, session, msg), _run(service, session, msg)
    return service, session, x, msg

def test_a_stored_plan_is_quick_once_it_ran_on_inputs_of_the_same_metadata():
    service, session = WorkerService("quick"), Session()
    plan = _stored(service, "adds", (4,), _adds(3, (4,)))
    x = service.core.store(torch.zeros(4))
    msg = {"c": "run_plan", "id": plan, "a": [x]}
    assert not service.quick(msg)  # never replayed: its checks run in full, on the command thread
    for _ in range(2):  # the first replay checks every op (slow); the second reuses its verdicts
        assert torch.equal(_run(service, session, msg), torch.full((4,), 3.0))
    assert service.quick(msg)
    assert torch.equal(_run(service, session, msg), torch.full((4,), 3.0))  # the same value
    other = service.core.store(torch.zeros(4, dtype=torch.float64))
    assert not service.quick({**msg, "a": [other]})  # other metadata: not known


def test_a_plan_whose_last_replay_took_longer_than_the_bound_is_not_quick(monkeypatch):
    service, session, x, msg = _warmed(WorkerService("quick_slow"), 3, 4)
    assert service.quick(msg)
    monkeypatch.setattr(policy_module, "QUICK_SECONDS", 0.0)
    assert not service.quick(msg)


def test_a_plan_with_a_data_sized_op_is_never_quick():
    service, session = WorkerService("quick_nonzero", Limits(max_bytes=64 * MiB, max_objects=100)), Session()
    plan = _stored(service, "spread", (8,), [
        Node(aten.nonzero.default, [Value("input", 0)], {}, [((2, 1), "int64")]),
        Node(aten.repeat.default, [Value("node", 0), [4, 1]], {}, [((8, 1), "int64")]),
    ])
    x = service.core.store(torch.tensor([1.0, 1.0, 0, 0, 0, 0, 0, 0]))
    msg = {"c": "run_plan", "id": plan, "a": [x]}
    for _ in range(3):
        assert _run(service, session, msg).shape == (8, 1)
        assert not service.quick(msg)  # its cost follows the data


def test_a_quick_plan_is_refused_as_any_run_when_the_worker_is_full():
    service, session, x, msg = _warmed(WorkerService("quick_full", Limits(max_bytes=8 * MiB, max_objects=100)), 2, 2**18)  # 1 MiB per node
    assert service.quick(msg)
    filler = [service.core.store(torch.zeros(2**18)) for _ in range(4)]  # what the worker holds now
    reply, _ = ServiceConnection(service, session).answer(dict(msg, r=2))
    assert reply["err"]["t"] == "QuotaExceededError"
    assert filler


@pytest.mark.parametrize("msg", [
    {"c": "run_plan"}, {"c": "run_plan", "id": "7", "a": []}, {"c": "run_plan", "id": 10**30, "a": [1]},
    {"c": "run_plan", "id": 1, "a": 5}, {"c": "run_plan", "id": 1, "a": [[1]]}, {"c": "run_plan", "id": 1, "a": [], "s": 3},
    {"c": "ping"}, {"c": ["run_plan"]},
])
def test_quick_answers_no_for_anything_else_without_raising(msg):
    service = WorkerService("quick_bad")
    _stored(service, "adds", (4,), _adds(1, (4,)))
    assert service.quick(msg) is False


def test_a_wrong_number_of_inputs_is_not_quick_and_is_refused_as_before():
    service, session, x, msg = _warmed(WorkerService("quick_arity"), 1, 4)
    assert service.quick(msg)
    assert not service.quick({**msg, "a": [x, x]})
    reply, _ = ServiceConnection(service, session).answer({**msg, "a": [x, x], "r": 3})
    assert "takes 1 tensor" in reply["err"]["m"]


def test_many_releases_go_to_the_command_thread():
    service, session, x, msg = _warmed(WorkerService("quick_rel"), 1, 4)
    assert service.quick({**msg, "rel": list(range(QUICK_RELEASES))})
    assert not service.quick({**msg, "rel": list(range(QUICK_RELEASES + 1))})


def test_a_training_step_over_a_worker_process_matches_the_same_steps_run_here():
    """The step's replays run on the server's event loop after the first: its parameters and
    losses are those of the same step run eagerly, call after call."""
    sy.hook()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    local = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    local.load_state_dict(model.state_dict())
    X, Y = torch.randn(32, 8), torch.randn(32, 1)

    def train_step(m):
        def step(x, y):
            loss = ((m(x) - y) ** 2).mean()
            grads = torch.autograd.grad(loss, list(m.parameters()))
            with torch.no_grad():
                for p, g in zip(m.parameters(), grads):
                    p.sub_(0.01 * g)
            return loss
        return step

    plan = sy.plan(train_step(model), state=model).build(X, Y)
    eager = train_step(local)
    remote = sy.start_worker("quick_steps")
    try:
        x, y = X.send(remote), Y.send(remote)
        model.send(remote)
        pp = plan.send(remote)
        for _ in range(6):
            loss = pp(x, y).get()
            assert torch.allclose(loss, eager(X, Y).detach(), atol=1e-6)
        model.get()
        for p, q in zip(model.parameters(), local.parameters()):
            assert torch.allclose(p, q, atol=1e-6)
    finally:
        remote.close()


def test_quick_plans_keep_the_quota_error_type_over_a_worker_process(tmp_path):
    """A refusal on the event loop is the same typed error as on the command thread: a plan
    run past the worker's object limit is a QuotaExceededError, another shape a SyftError
    naming the build, and the worker goes on."""
    import subprocess
    import sys

    from syft_lab.errors import SyftError
    from syft_lab.workers.websocket import WebSocketWorker

    sy.hook()
    token_file = tmp_path / "token"
    token_file.write_text("quick-quota-token")
    proc = subprocess.Popen([sys.executable, "-m", "syft_lab.worker", "--id", "quick_quota", "--port", "0",
                             "--threads", "1", "--max-objects", "3", "--token-file", str(token_file)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    remote = None
    try:
        line = proc.stdout.readline()
        assert "listening on" in line, line
        remote = WebSocketWorker(line.split("listening on")[1].strip(), id="quick_quota",
                                 token="quick-quota-token", progress=False)
        plan = sy.plan(lambda x: x * 2 + 1).build(torch.zeros(4))
        pp = plan.send(remote)
        x = torch.ones(4).send(remote)
        for _ in range(3):  # replays learned: the next runs are quick (on the event loop)
            assert torch.equal(pp(x).get(), torch.full((4,), 3.0))
        held = pp(x)  # the plan, x and this result: the worker's 3 objects
        with pytest.raises(QuotaExceededError, match="objects"):
            pp(x)
        assert torch.equal(held.get(), torch.full((4,), 3.0))
        five = torch.ones(5).send(remote)
        with pytest.raises(SyftError, match="built for float32\\[4\\], got float32\\[5\\]"):
            pp(five)  # another shape: refused before it runs
        del five
        assert torch.equal(pp(x).get(), torch.full((4,), 3.0))  # the worker goes on
    finally:
        if remote is not None:
            remote.close()
        proc.kill()
        proc.wait(10)


# --- issue 28.4: a pointer op bounded by its sizes runs on the event loop too ------------------

def _server_with(*tensors):
    from syft_lab.workers.server import WorkerServer

    server = WorkerServer("quick_ops")
    ids = [server.service.core.store(t) for t in tensors]
    return server, ids


def _run_msg(op, *args, **extra):
    from syft_lab.commands import Ref
    from syft_lab.wire.allowlist import op_name

    return {"c": "run", "op": op_name(op), "a": [Ref(a) if type(a) is int else a for a in args], "k": None, **extra}


def test_a_small_op_on_stored_tensors_is_quick_and_gives_the_same_value():
    server, (x,) = _server_with(torch.arange(4.))
    msg = _run_msg(aten.add.Tensor, x, x)
    assert server.quick_command(msg)
    assert server.quick_command(_run_msg(aten.mul.Tensor, x, 2.0, rel=[12345]))
    reply, _ = ServiceConnection(server.service, Session()).answer(dict(msg, r=1))
    assert torch.equal(server.service.core.objects[reply["ok"].id], torch.arange(4.) * 2)


def test_an_op_over_the_size_or_work_bounds_is_not_quick():
    from syft_lab.workers import server as server_module

    big, square = torch.zeros(server_module.QUICK_BYTES // 4 + 1), torch.zeros(256, 256)
    server, (b, s, one) = _server_with(big, square, torch.ones(1))
    assert not server.quick_command(_run_msg(aten.neg.default, b))  # reads more than QUICK_BYTES
    assert server.quick_command(_run_msg(aten.neg.default, s))
    assert not server.quick_command(_run_msg(aten.mm.default, s, s))  # 256**3 element operations
    assert not server.quick_command(_run_msg(aten.repeat.default, one, [2**19]))  # makes 2 MiB from 4 bytes


def test_what_the_thread_must_answer_is_never_quick():
    server, (x,) = _server_with(torch.ones(3))
    assert not server.quick_command(_run_msg(aten.add.Tensor, x, 999_999))  # an unknown id: the thread says so
    assert not server.quick_command({**_run_msg(aten.add.Tensor, x, x), "op": "aten.no_such_op.default"})
    assert not server.quick_command(_run_msg(aten.add.Tensor, x, x, rel=list(range(QUICK_RELEASES + 1))))
    assert not server.quick_command({"c": "run", "op": 3, "a": "x"})  # malformed: the thread's run says why
    assert not server.quick_command({"c": "fetch", "id": x})


def test_a_plan_that_updates_a_sent_models_parameters_in_place_is_quick_once_learned():
    """model.send(worker) stores Parameters: an in-place update of one returns the Parameter,
    whose checks follow from its metadata as a plain tensor's do."""
    service, session = WorkerService("quick_params"), Session()
    specs = [{"name": "w", "role": "state", "shape": [3], "dtype": "float32"},
             {"name": "x", "role": "input", "shape": [3], "dtype": "float32"}]
    nodes = [Node(aten.mul.Tensor, [Value("input", 1), 0.5], {}, [((3,), "float32")]),
             Node(aten.sub_.Tensor, [Value("input", 0), Value("node", 0)], {}, [((3,), "float32")]),
             Node(aten.sum.default, [Value("input", 0)], {}, [((), "float32")])]
    graph = PlanGraph("step", specs, [], nodes, [Value("node", 2)], True)
    plan = service.core.store_plan(PlanBuilds("step", [graph]), [torch.zeros(3)])
    w = service.core.store(torch.nn.Parameter(torch.ones(3)))
    x = service.core.store(torch.full((3,), 2.0))
    msg = {"c": "run_plan", "id": plan, "a": [x], "s": [w]}
    with torch.no_grad():
        assert _run(service, session, msg).item() == 0.0
        assert _run(service, session, msg).item() == -3.0
        assert service.quick(msg)
        assert _run(service, session, msg).item() == -6.0
