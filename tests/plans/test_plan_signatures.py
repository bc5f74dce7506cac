"""A sent plan keeps every signature it was built for; -1 in args_shape is a batch dimension of any size."""
import json

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import syft_lab as sy
from syft_lab.plans import TraceError


@pytest.fixture(params=["virtual", "websocket"])
def worker(request, bob):
    """bob as a VirtualWorker, or as a real worker process reached over websockets."""
    if request.param == "virtual":
        return bob
    return request.getfixturevalue("remote")[0]


def scale_and_sum(x):
    return (x * 3).sum(0) + 1


def test_a_sent_plan_runs_every_signature_it_was_built_for(worker):
    plan = sy.plan(scale_and_sum)
    examples = [torch.tensor([1., -2.]), torch.arange(6.).reshape(3, 2), torch.tensor([4, 5, 6])]
    for x in examples:
        plan.build(x)
    pp = plan.send(worker)
    for x in examples:  # the first two were not the last build: they failed remotely before
        assert torch.equal(pp(x.send(worker)).get(), scale_and_sum(x))
    assert plan.signatures == ["(x: float32[2])", "(x: float32[3, 2])", "(x: int64[3])"]
    assert len(json.loads(plan.to_json())["graphs"]) == 3


def test_a_call_with_a_signature_the_plan_was_not_built_for_names_those_it_has(worker):
    plan = sy.plan(scale_and_sum)
    plan.build(torch.ones(2))
    plan.build(torch.ones(3, dtype=torch.int64))
    pp = plan.send(worker)
    x = torch.ones(4).send(worker)
    with pytest.raises(sy.SyftError, match=r"plan 'scale_and_sum' was built for \(x: float32\[2\]\) or "
                                           r"\(x: int64\[3\]\); got \(float32\[4\]\)\. Build it for these inputs"):
        pp(x)
    assert torch.equal(pp(torch.ones(2).send(worker)).get(), torch.tensor(7.))  # and it still works


def test_plan_json_carries_every_signature_and_a_loaded_plan_runs_each():
    plan = sy.plan(scale_and_sum)
    plan.build(torch.ones(2))
    plan.build(torch.ones(2, 2))
    text = plan.to_json()
    doc = json.loads(text)
    assert (doc["format"], doc["version"], doc["name"]) == ("syft_lab.plan", 2, "scale_and_sum")
    loaded = sy.Plan.from_json(text)
    assert loaded.to_json() == text
    assert torch.equal(loaded(torch.tensor([1., 2.])), torch.tensor(10.))
    assert torch.equal(loaded(torch.ones(2, 2)), torch.tensor([7., 7.]))
    with pytest.raises(sy.SyftError, match=r"was built for \(x: float32\[2\]\) or \(x: float32\[2, 2\]\)"):
        loaded(torch.ones(3))


def test_a_version_1_document_still_loads():
    v1 = {"format": "syft_lab.plan", "version": 1, "name": "neg",
          "inputs": [{"name": "x", "role": "input", "shape": [2], "dtype": "float32"}], "constants": [],
          "nodes": [{"op": "aten.neg.default", "args": [{"input": 0}], "kwargs": {},
                     "outputs": [{"shape": [2], "dtype": "float32"}]}],
          "outputs": [{"node": 0}], "single_output": True}
    assert torch.equal(sy.Plan.from_json(json.dumps(v1))(torch.tensor([1., -2.])), torch.tensor([-1., 2.]))


# --- -1: a batch dimension of any size ----------------------------------------------------

def make_classifier():
    torch.manual_seed(0)
    model = nn.Linear(4, 3)

    def classify(x):
        h = model(x).view(x.shape[0], -1)  # a shape argument that holds the batch size
        return F.log_softmax(h, dim=1).flatten()

    return model, classify


def test_args_shape_with_minus_one_builds_one_graph_for_every_batch_size():
    model, classify = make_classifier()
    plan = sy.plan(classify, state=model, args_shape=[(-1, 4)])
    assert plan.signatures == ["(x: float32[N, 4], N >= 1)"]
    assert "x: float32[N, 4]" in plan.code and "aten.sym_size.int(x, 0)" in plan.code
    view = {n["id"]: n for n in plan.graph["nodes"]}
    assert view["in2"]["shape"] == ["N", 4] and view["out0"]["shape"] == ["3*N"]  # the plan view's sizes
    for n in (1, 3, 17):
        x = torch.randn(n, 4)
        torch.testing.assert_close(plan(x), classify(x))
    assert len(plan._builds) == 1  # no new build per batch size


def test_a_batch_generic_plan_runs_remotely_for_any_batch_size(worker):
    model, classify = make_classifier()
    plan = sy.plan(classify, state=model, args_shape=[(-1, 4)])
    pp = plan.send(worker)
    for n in (1, 3, 17):
        x = torch.randn(n, 4)
        torch.testing.assert_close(pp(x.send(worker)).get(), classify(x).detach())
    with pytest.raises(sy.SyftError, match=r"input 'x' was built for float32\[N, 4\], got float32\[3, 5\]"):
        pp(torch.ones(3, 5).send(worker))


def test_the_batch_dimension_has_one_size_in_every_input_and_at_least_one():
    @sy.plan(args_shape=[(-1, 2), (-1, 2)])
    def add(x, y):
        return x + y

    with pytest.raises(sy.SyftError, match=r"batch dimension N \(-1\) has one size in every input of a call, "
                                           r"got 3 and 4"):
        add(torch.ones(3, 2), torch.ones(4, 2))
    with pytest.raises(sy.SyftError, match=r"built for \(x: float32\[N, 2\], y: float32\[N, 2\], N >= 1\), "
                                           r"got batch size 0"):
        add(torch.ones(0, 2), torch.ones(0, 2))
    assert torch.equal(add(torch.ones(5, 2), torch.ones(5, 2)), torch.full((5, 2), 2.))


def test_pysyft_part_8_args_shape_with_a_fixed_and_a_batch_argument():
    @sy.plan(args_shape=[(1, 2), (-1, 2)])
    def plan_sum_abs(x, y):
        return torch.abs(x + y)

    assert plan_sum_abs.is_built
    y = torch.tensor([[1., -5.], [-3., 2.], [0., 0.]])
    assert torch.equal(plan_sum_abs(torch.tensor([[1., 2.]]), y), torch.tensor([[2., 3.], [2., 4.], [1., 2.]]))


def test_a_batch_generic_training_step_equals_eager_step_by_step(bob):
    torch.manual_seed(1)
    model, twin = nn.Linear(3, 1), nn.Linear(3, 1)
    twin.load_state_dict(model.state_dict())

    def train_step(x, y):
        loss = ((model(x) - y) ** 2).mean()
        grads = torch.autograd.grad(loss, list(model.parameters()))
        with torch.no_grad():
            for p, g in zip(model.parameters(), grads):
                p.sub_(0.1 * g)
        return loss

    step = sy.plan(train_step, state=model, args_shape=[(-1, 3), (-1, 1)])
    opt = torch.optim.SGD(twin.parameters(), lr=0.1)
    for n in (1, 3, 17):
        x, y = torch.randn(n, 3), torch.randn(n, 1)
        loss = step(x, y)
        opt.zero_grad()
        eager = ((twin(x) - y) ** 2).mean()
        eager.backward()
        opt.step()
        torch.testing.assert_close(loss, eager.detach())
        for p, q in zip(model.parameters(), twin.parameters()):
            torch.testing.assert_close(p.detach(), q.detach())


def test_code_that_depends_on_the_batch_size_gets_a_graph_per_range():
    def flip_small(x):
        return x if x.shape[0] > 3 else -x

    plan = sy.plan(flip_small, args_shape=[(-1, 2)])
    assert plan.signatures == ["(x: float32[N, 2], 1 <= N <= 3)", "(x: float32[N, 2], N >= 4)"]
    for n in range(1, 7):
        x = torch.randn(n, 2)
        assert torch.equal(plan(x), flip_small(x))


@pytest.mark.parametrize("fn", [
    lambda x: x * (2 if x.shape[0] == 1 else 3),  # a literal that differs
    lambda x: x.view(x.shape[0] if x.shape[0] > 1 else 2, -1),  # a size that the generic graph computes otherwise
], ids=["literal", "size"])
def test_batch_size_one_gets_its_own_graph_when_the_code_treats_it_apart(fn):
    plan = sy.plan(fn, name="f", args_shape=[(-1, 2)])  # symbolic tracing alone assumes N >= 2
    assert plan.signatures == ["(x: float32[1, 2])", "(x: float32[N, 2], N >= 2)"]
    for n in (1, 2, 5):
        x = torch.randn(n, 2)
        assert torch.equal(plan(x), fn(x))


def test_a_convolution_plan_serves_every_batch_size(bob):
    torch.manual_seed(0)
    conv = nn.Conv2d(1, 2, 3)

    def features(x):
        return F.max_pool2d(conv(x), 2).flatten(1)

    plan = sy.plan(features, state=conv, args_shape=[(-1, 1, 8, 8)])
    assert plan.signatures[-1] == "(x: float32[N, 1, 8, 8], N >= 16)"  # the layout choice of a conv at 16
    pp = plan.send(bob)
    for n in (1, 3, 16, 17):
        x = torch.randn(n, 1, 8, 8)
        torch.testing.assert_close(plan(x), features(x))
        torch.testing.assert_close(pp(x.send(bob)).get(), features(x).detach())


def test_a_plan_that_needs_one_exact_batch_size_fails_at_build_time():
    with pytest.raises(TraceError, match=r"plan 'count' cannot serve every batch size: its trace depends on the "
                                         r"batch size N, the -1 at dim 0 of 'x' \(it served N = 7, N = 2, N = 3, N = 4 in 4 "
                                         r"traces\)\. "
                                         r"Give a fixed size instead of -1 in args_shape"):
        sy.plan(lambda x: torch.ones(int(x.shape[0])), name="count", args_shape=[(-1, 4)])
    with pytest.raises(TraceError, match=r"plan 'square' could not be traced with a batch dimension N \(-1\): "
                                         r"RuntimeError: shape '\[4, 4\]' is invalid for input of size 4\*N"):
        sy.plan(lambda x: x.view(4, 4), name="square", args_shape=[(-1, 4)])
    with pytest.raises(sy.SyftError, match=r"args_shape is a list of shapes.*\(-1, 784\)"):
        sy.plan(lambda x: x, name="bad", args_shape=[(-2, 4)])


def test_a_batch_generic_plan_document_holds_shape_ops_and_loads(bob):
    model, classify = make_classifier()
    plan = sy.plan(classify, state=model, args_shape=[(-1, 4)])
    graph = json.loads(plan.to_json())["graphs"][0]
    assert graph["inputs"][-1] == {"name": "x", "role": "input", "shape": [-1, 4], "dtype": "float32"}
    assert graph["batch_sizes"] == [1, None]
    assert {"aten.sym_size.int", "sym.mul"} <= {n["op"] for n in graph["nodes"]}
    loaded = sy.Plan.from_json(plan.to_json())  # no module: the state is given with the call
    assert loaded.signatures == plan.signatures
    x = torch.randn(5, 4)
    torch.testing.assert_close(loaded(model.weight, model.bias, x), classify(x))
