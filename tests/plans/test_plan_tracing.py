"""Issue 23: what a plan traces (constants, random ops, inputs that require grad, shape-generic
code), what it drops (dead ops), how often it is stored; issue 27: plans a worker keeps, and
PySyft's spellings (func2plan, state=(tensor,))."""
import base64
import gc
import json

import pytest
import torch
import torch.nn as nn

import syft_lab as sy
from syft_lab.plans import PlanFormatError, TraceError

BIAS = torch.tensor([1., 2., 3.])


# --- 1. constants and tensor state ------------------------------------------------------------

def test_a_tensor_the_function_closes_over_is_a_named_constant_of_the_plan(bob):
    scale = torch.tensor([2., 4., 8.])

    @sy.plan
    def affine(x):
        return x * scale + BIAS

    affine.build(torch.zeros(3))
    assert torch.equal(affine(torch.ones(3)), torch.tensor([3., 6., 11.]))
    constants = [n for n in affine.graph["nodes"] if n["role"] == "constant"]
    assert [(c["name"], c["shape"], c["dtype"]) for c in constants] == [("scale", [3], "float32"),
                                                                        ("BIAS", [3], "float32")]
    stored = json.loads(affine.to_json())["graphs"][0]["constants"]
    assert [base64.b64decode(c["data"]) for c in stored] == [scale.numpy().tobytes(), BIAS.numpy().tobytes()]
    stores = []
    original = bob.core.store_plan
    bob.core.store_plan = lambda *a, **k: stores.append(a) or original(*a, **k)
    try:
        pp = affine.send(bob)
        results = [pp(torch.full((3,), float(k)).send(bob)).get() for k in range(3)]
    finally:
        del bob.core.store_plan
    assert len(stores) == 1 and len(bob.objects) == 1  # the constants travel inside the plan, once
    assert [r.tolist() for r in results] == [[1., 2., 3.], [3., 6., 11.], [5., 10., 19.]]


def test_a_parameter_from_outside_is_refused_with_the_spelling_that_keeps_it_trainable():
    model = nn.Linear(2, 1)

    @sy.plan
    def predict(x):
        return model(x)

    with pytest.raises(TraceError, match=r"requires grad.*frozen.*state=model"):
        predict.build(torch.zeros(2))


class Shifted(sy.Plan):  # PySyft's class plan with a tensor attribute
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(2, 3)
        self.bias = torch.tensor([10., 20., 30.])

    def forward(self, x):
        return self.fc1(x) + self.bias


def test_a_class_plans_tensor_attribute_is_state_that_travels_with_it(bob):
    net = Shifted()
    x = torch.tensor([1., -1.])
    expected = net.fc1(x) + torch.tensor([10., 20., 30.])
    net.build(x)
    assert [i["name"] for i in net._graph.inputs if i["role"] == "state"] == [
        "fc1.weight", "fc1.bias", "bias"]
    assert torch.allclose(net(x), expected)
    assert torch.allclose(net.send(bob)(x.send(bob)).get(), expected.detach())


# --- 2. random ops ------------------------------------------------------------------------------

@pytest.fixture
def seeded():
    @sy.plan(args_shape=[(1,)])
    def seeded(x):
        torch.manual_seed(1)
        return x + torch.randint(0, 20, (1,))

    return seeded


def test_a_seeded_random_op_replays_the_same_numbers_every_time(seeded, bob):
    before = torch.get_rng_state()
    torch.manual_seed(1)
    expected = float(torch.randint(0, 20, (1,)))
    torch.set_rng_state(before)
    assert [float(seeded(torch.zeros(1))) for _ in range(8)] == [expected] * 8
    assert torch.equal(torch.get_rng_state(), before)  # the plan's seed stays inside the plan
    pp = seeded.send(bob)
    assert [float(pp(torch.zeros(1).send(bob)).get()) for _ in range(8)] == [expected] * 8
    graph = json.loads(seeded.to_json())["graphs"][0]
    assert graph["nodes"][0] == {"op": "rng.manual_seed", "args": [1], "kwargs": {}, "outputs": []}


def test_random_ops_draw_at_every_replay_and_seeds_are_checked_on_load(seeded):
    @sy.plan(args_shape=[(4,)])
    def noisy(x):
        return torch.nn.functional.dropout(x, 0.5, training=True) + torch.rand(4)

    torch.manual_seed(0)
    draws = {tuple(noisy(torch.ones(4)).tolist()) for _ in range(4)}
    assert len(draws) == 4  # recorded as ops, not frozen into the plan
    doc = json.loads(seeded.to_json())
    doc["graphs"][0]["nodes"][0]["args"] = ["1"]
    with pytest.raises(PlanFormatError, match="rng.manual_seed takes one integer seed"):
        sy.Plan.from_json(json.dumps(doc))


def test_a_generator_of_its_own_is_refused_with_the_way_to_seed():
    g = torch.Generator().manual_seed(3)
    with pytest.raises(TraceError, match=r"torch.Generator of its own.*torch.manual_seed\(n\)"):
        sy.plan(lambda x: x + torch.rand(2, generator=g), name="own", args_shape=[(2,)])


# --- 3. inputs that require grad -----------------------------------------------------------------

def test_args_shape_says_which_inputs_require_grad_and_builds_are_keyed_by_it():
    @sy.plan
    def grad_of_sum(w, x):
        (g,) = torch.autograd.grad((w * x).sum(), [w])
        return g

    grad_of_sum.build(args_shape=[(3,), (3,)], requires_grad=[True, False])
    assert grad_of_sum.signatures == ["(w: float32[3] requires_grad, x: float32[3])"]
    assert torch.equal(grad_of_sum(torch.ones(3, requires_grad=True), torch.tensor([1., 2., 3.])),
                       torch.tensor([1., 2., 3.]))
    grad_of_sum.build(args_shape=[(3,), (3,)], requires_grad=[True, True])
    assert sorted(grad_of_sum.signatures) == ["(w: float32[3] requires_grad, x: float32[3] requires_grad)",
                                              "(w: float32[3] requires_grad, x: float32[3])"]
    with pytest.raises(sy.SyftError, match=r"requires_grad is True, False or one of them per argument"):
        grad_of_sum.build(args_shape=[(3,), (3,)], requires_grad=[True])


class TrainStep(sy.Plan):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 1)

    def forward(self, x, y):
        opt = torch.optim.SGD(self.fc.parameters(), lr=0.1)
        opt.zero_grad()
        loss = ((self.fc(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        return loss


def test_a_training_step_with_backward_and_an_optimizer_builds_from_args_shape_alone(bob):
    step = TrainStep()
    eager = nn.Linear(3, 1)
    eager.load_state_dict(step.fc.state_dict())
    step.build(args_shape=[(4, 3), (4, 1)])
    x, y = torch.randn(4, 3), torch.randn(4, 1)
    opt = torch.optim.SGD(eager.parameters(), lr=0.1)
    losses = []
    for _ in range(3):
        opt.zero_grad()
        loss = ((eager(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        losses.append(float(loss))
    got = [float(step(x, y)) for _ in range(3)]
    assert got == pytest.approx(losses, rel=1e-5)
    assert torch.allclose(step.fc.weight, eager.weight)
    pp = step.send(bob)  # the state copy on bob trains on
    remote = [float(pp(x.send(bob), y.send(bob)).get()) for _ in range(2)]
    assert remote[0] == pytest.approx(float(((eager(x) - y) ** 2).mean()), rel=1e-5) and remote[1] < remote[0]


# --- 4. shape-generic code --------------------------------------------------------------------

def test_sizes_computed_from_the_batch_size_are_one_graph_for_every_batch_size():
    fold = sy.plan(lambda x: x.view(4, -1), name="fold", args_shape=[(-1, 8)])
    half = sy.plan(lambda x: x[: x.shape[0] // 2], name="half", args_shape=[(-1, 8)])
    assert fold.signatures == ["(x: float32[N, 8], N >= 1)"] and half.signatures == fold.signatures
    for n in (1, 3, 8, 33):
        x = torch.arange(n * 8.).reshape(n, 8)
        assert torch.equal(fold(x), x.view(4, -1))
        assert torch.equal(half(x), x[: n // 2])


def test_a_trace_that_needs_each_batch_size_names_the_dimension():
    with pytest.raises(TraceError, match=r"depends on the batch size N, the -1 at dim 1 of 'x'"):
        sy.plan(lambda x: torch.ones(int(x.shape[1])), name="count", args_shape=[(4, -1)])


# --- 5. dead ops, one copy per worker -------------------------------------------------------------

def test_ops_nothing_reads_are_pruned_but_writes_and_draws_stay():
    @sy.plan
    def f(x, y):
        unused = (x * 3).exp()  # noqa: F841
        torch.rand(2)  # a draw: later draws depend on it
        y.add_(1)  # writes an input
        return x + 1

    f.build(torch.zeros(2), torch.zeros(2))
    assert [n.name for n in f._graph.nodes] == ["aten.rand.default", "aten.add_.Tensor", "aten.add.Tensor"]
    y = torch.zeros(2)
    assert torch.equal(f(torch.ones(2), y), torch.tensor([2., 2.])) and torch.equal(y, torch.ones(2))


def test_a_plan_sent_twice_is_stored_once_and_a_changed_plan_gets_its_own_copy(bob):
    @sy.plan(args_shape=[(1,)])
    def inc(x):
        return x + 1

    first, second = inc.send(bob), inc.send(bob)
    assert first.id_at_location == second.id_at_location and len(bob.objects) == 1
    del first
    gc.collect()
    assert float(second(torch.ones(1).send(bob)).get()) == 2.  # the one copy runs for every pointer
    inc.tag("#v2")
    third = inc.send(bob)  # not the same plan any more (its tags): a copy of its own
    assert third.id_at_location != second.id_at_location and len(bob.objects) == 2


# --- issue 27: plans a worker keeps; PySyft's spellings ---------------------------------------------

def test_a_plan_sent_with_keep_stays_when_every_pointer_is_gone(bob):
    @sy.plan(args_shape=[(1,)])
    def inc(x):
        return x + 1

    inc.tag("#inc").send(bob, keep=True)
    gc.collect()
    (found,) = bob.search("#inc")
    assert float(found(torch.ones(1).send(bob)).get()) == 2.
    del found
    gc.collect()
    (found,) = bob.search("#inc")  # search pointers do not own it
    bob.unload(found)
    assert bob.search("#inc") == []


def test_func2plan_is_sy_plan_and_state_may_be_pysyfts_tuple():
    assert sy.plans.func2plan is sy.plan

    @sy.plans.func2plan(args_shape=[(1,)], state=(torch.tensor([1.]),))
    def plan_abs(x, state):
        (bias,) = state.read()
        return x.abs() + bias

    assert torch.equal(plan_abs(torch.tensor([-2.])), torch.tensor([3.]))
    assert [i["name"] for i in plan_abs._graph.inputs if i["role"] == "state"] == ["state_0"]
    with pytest.raises(sy.SyftError, match=r"last argument is `state`.*sy.plan\(fn, state=model\)"):
        sy.plan(lambda x: x, state=(torch.ones(1),))


def test_a_replay_on_a_workers_own_generator_draws_from_it_and_leaves_the_default_alone():
    @sy.plan(args_shape=[(3,)])
    def noise(x):
        return x + torch.randn(3)

    graph, before = noise._graph, torch.get_rng_state()
    mine, same = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    draws = [graph.run([torch.zeros(3)], generator=mine)[0] for _ in range(2)]
    assert torch.equal(torch.get_rng_state(), before)
    assert torch.equal(draws[0], torch.randn(3, generator=same)) and torch.equal(draws[1], torch.randn(3, generator=same))
