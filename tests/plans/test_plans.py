"""Plans: traced on fake tensors, replayed, sent eagerly, run remotely in one message."""
import json

import pytest
import torch
import torch.nn as nn

import syft_lab as sy
from syft_lab.plans import PlanBuilds, PlanFormatError, TraceError


@pytest.fixture
def double_abs():
    @sy.plan
    def double_abs(x):
        return 2 * x.abs()

    return double_abs


def test_unbuilt_plan_cannot_be_sent(double_abs, bob):
    with pytest.raises(sy.SyftError, match=r"not built.*\.build\(example\).*args_shape"):
        double_abs.send(bob)
    assert len(bob.objects) == 0


def test_build_traces_without_keeping_data_and_runs_locally(double_abs):
    example = torch.tensor([1., -2.])
    double_abs.build(example)
    assert double_abs.is_built
    assert "data" not in json.dumps(json.loads(double_abs.to_json())["graphs"][0]["constants"])
    assert torch.equal(double_abs(torch.tensor([1., -2.])), torch.tensor([2., 4.]))
    assert double_abs.code.splitlines() == [
        "def double_abs(x: float32[2]):",
        "    v0 = aten.abs.default(x)  # float32[2]",
        "    v1 = aten.mul.Tensor(v0, 2)  # float32[2]",
        "    return v1",
    ]


def test_graph_has_inputs_ops_outputs_and_shaped_edges(double_abs):
    double_abs.build(torch.tensor([1., -2.]))
    g = double_abs.graph
    roles = [n["role"] for n in g["nodes"]]
    assert roles == ["input", "op", "op", "output"]
    ops = [n["op"] for n in g["nodes"] if n["role"] == "op"]
    assert ops == ["aten.abs.default", "aten.mul.Tensor"]
    assert all(e["shape"] == [2] and e["dtype"] == "float32" for e in g["edges"])
    assert {(e["from"], e["to"]) for e in g["edges"]} == {("in0", "v0"), ("v0", "v1"), ("v1", "out0")}


def test_send_is_eager_and_one_message_runs_the_plan_remotely(double_abs, bob):
    double_abs.build(torch.tensor([1., -2.]))
    pp = double_abs.send(bob)
    assert isinstance(pp, sy.PlanPointer) and pp.location is bob
    assert pp.id_at_location in bob.objects  # bob holds it now
    torch.tensor([1., -2.]).tag("#input").send(bob)  # dropped at once: nothing holds it
    data = torch.tensor([1., -2.]).tag("#input").send(bob)
    calls = []
    original = bob.core.run_plan
    bob.core.run_plan = lambda *a: calls.append(a) or original(*a)
    ops = []
    bob.core.run = lambda *a: ops.append(a)
    try:
        result = pp(bob.search("#input")[0])
    finally:
        del bob.core.run_plan, bob.core.run
    assert len(calls) == 1 and ops == []  # the whole plan in one command, no op-by-op traffic
    assert isinstance(result, sy.PointerTensor) and result.location is bob
    assert torch.equal(result.get(), torch.tensor([2., 4.]))
    assert double_abs.sent_to == ["bob"]
    del data


def test_json_round_trip_and_loaded_plans_run(double_abs):
    double_abs.build(torch.tensor([1., -2.]))
    s = double_abs.to_json()
    loaded = sy.Plan.from_json(s)
    assert loaded.to_json() == s
    assert torch.equal(loaded(torch.tensor([3., -4.])), torch.tensor([6., 8.]))
    with pytest.raises(sy.SyftError, match="loaded from JSON"):
        loaded.build(torch.ones(3))


def test_args_shape_builds_at_decoration_and_fixes_the_signature():
    @sy.plan(args_shape=[(4, 3)])
    def forward(x):
        return x.relu().sum(0)

    assert forward.is_built and forward.graph["nodes"][0]["shape"] == [4, 3]
    assert torch.equal(forward(torch.ones(4, 3)), torch.full((3,), 4.))
    with pytest.raises(sy.SyftError, match=r"input 'x' was built for float32\[4, 3\], got float32\[2, 3\]"):
        forward(torch.ones(2, 3))


def test_builds_are_cached_per_signature_and_new_shapes_build_again(double_abs):
    double_abs.build(torch.ones(2))
    assert torch.equal(double_abs(-torch.ones(5)), torch.full((5,), 2.))
    assert len(double_abs._builds) == 2
    double_abs(torch.ones(5))
    assert len(double_abs._builds) == 2


def test_value_dependent_branch_is_a_trace_error_naming_the_line():
    @sy.plan
    def branchy(x):
        if x.sum() > 0:  # the offending line
            return x
        return -x

    with pytest.raises(TraceError, match=r"branches on tensor values at line \d+ .*if x.sum\(\) > 0"):
        branchy.build(torch.ones(2))


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d["graphs"][0]["nodes"][0].update(op="builtins.eval"), "not allowed"),
    (lambda d: d["graphs"][0]["nodes"][0].update(op="aten.from_file.default"), "denied"),
    (lambda d: d["graphs"][0]["nodes"][1].update(args=[{"node": 7}, 2]), "points to no node"),
    (lambda d: d["graphs"][0]["nodes"][0].update(args=[{"input": 3}]), "points to no input"),
    (lambda d: d.update(version=99), "version 99"),
    (lambda d: d.update(format="pickle"), "not a syft_lab plan"),
    (lambda d: d["graphs"][0]["nodes"][0].update(args=[{"__reduce__": "os.system"}]), "malformed plan argument"),
    (lambda d: d["graphs"][0].pop("nodes"), "malformed plan"),
    (lambda d: d.pop("graphs"), "malformed plan"),
    (lambda d: d.update(graphs=[]), "1 to 64 graphs"),
    (lambda d: d["graphs"][0]["inputs"][0].update(dtype="object"), "unsupported dtype"),
    (lambda d: d["graphs"][0]["inputs"][0].update(shape=[-2]), "malformed plan input"),
    (lambda d: d["graphs"][0].update(batch_sizes=[1, None]), "batch_sizes belong to a graph with a batch"),
    # shape arithmetic computes on integers only: no tensor or list reaches operator.mul
    (lambda d: d["graphs"][0]["nodes"].insert(0, {"op": "sym.mul", "args": [[0], 10 ** 9]}),
     "computes on integers"),
    (lambda d: d["graphs"][0]["nodes"].insert(0, {"op": "sym.mul", "args": [{"input": 0}, 3]}),
     "computes on integers"),
    (lambda d: d["graphs"][0]["nodes"].insert(0, {"op": "aten.sym_size.int", "args": [3, 0]}),
     "takes a tensor first"),
])
def test_bad_plan_json_is_rejected_at_load(double_abs, bob, mutate, message):
    double_abs.build(torch.ones(2))
    d = json.loads(double_abs.to_json())
    mutate(d)
    with pytest.raises(sy.SyftError, match=message):
        sy.Plan.from_json(json.dumps(d))
    before = dict(bob.objects)
    with pytest.raises(sy.SyftError, match=message):
        bob.core.store_plan(PlanBuilds.from_json(json.dumps(d)), [])
    assert bob.objects == before


def test_malformed_json_text():
    with pytest.raises(PlanFormatError, match="does not parse"):
        sy.Plan.from_json("{not json")
    with pytest.raises(PlanFormatError, match="from JSON text"):
        sy.Plan.from_json(42)


def test_plan_pointer_checks_arity_shapes_and_location(double_abs, bob, alice):
    double_abs.build(torch.ones(2))
    pp = double_abs.send(bob)
    with pytest.raises(sy.SyftError, match=r"takes 1 tensor\(s\) \(x\), got 2"):
        pp(torch.ones(2).send(bob), torch.ones(2).send(bob))
    with pytest.raises(sy.SyftError, match=r"built for float32\[2\], got float32\[3\]"):
        pp(torch.ones(3).send(bob))
    with pytest.raises(sy.SyftError, match="on worker 'alice'"):
        pp(torch.ones(2).send(alice))
    with pytest.raises(sy.SyftError, match="send its inputs there first"):
        pp(torch.ones(2))
    with pytest.raises(sy.SyftError, match=r"send it first: pp = double_abs.send\(bob\)"):
        double_abs(torch.ones(2).send(bob))


def test_plans_are_objects_tagged_searched_fetched_and_shown(double_abs, bob):
    double_abs.build(torch.ones(2)).tag("#step").describe("doubles abs")
    pp = double_abs.send(bob)
    found = bob.search("#step")
    assert len(found) == 1 and isinstance(found[0], sy.PlanPointer)
    assert torch.equal(found[0](torch.tensor([-1., 1.]).send(bob)).get(), torch.tensor([2., 2.]))
    lanes = {w["id"]: w for w in sy.world({"double_abs": double_abs, "pp": pp})["workers"]}
    plan_entry = next(o for o in lanes["bob"]["objects"] if o["kind"] == "plan")
    assert plan_entry["name"] == "double_abs" and plan_entry["tags"] == ["#step"]
    assert any(o["kind"] == "plan" and o["names"] == ["double_abs"] for o in lanes["me"]["objects"])
    node = sy.chain(double_abs).nodes[0]
    assert node["kind"] == "plan" and node["sent_to"] == ["bob"] and node["graph"]["nodes"]
    remote = sy.chain(pp).nodes
    assert [n["kind"] for n in remote] == ["pointer", "plan"] and remote[1]["owner"] == "bob"
    back = pp.get()
    assert isinstance(back, sy.Plan) and back.tags == {"#step"}
    assert pp.id_at_location not in bob.objects


def test_dropping_a_plan_pointer_deletes_the_plan_and_its_state(bob):
    model = nn.Linear(2, 1)
    step = sy.plan(lambda x: model(x), name="fwd", state=model).build(torch.ones(3, 2))
    pp = step.send(bob)
    assert len(bob.objects) == 3  # the plan, weight and bias copies
    del pp
    assert len(bob.objects) == 0


def make_data():
    g = torch.Generator().manual_seed(0)
    X = torch.randn(40, 3, generator=g)
    return X, X @ torch.tensor([[1.], [-2.], [0.5]]) + 0.3


def federated(mode, workers):
    X, Y = make_data()
    torch.manual_seed(1)
    model = nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def train_step(x, y):
        loss = ((model(x) - y) ** 2).mean()
        grads = torch.autograd.grad(loss, list(model.parameters()))
        with torch.no_grad():
            for p, g in zip(model.parameters(), grads):
                p.sub_(0.1 * g)
        return loss

    step = sy.plan(train_step, state=model).build(X[:20], Y[:20])
    assert 10 <= len(step._graph.nodes) <= 40
    slices = [(w, X[i * 20:(i + 1) * 20].send(w), Y[i * 20:(i + 1) * 20].send(w)) for i, w in enumerate(workers)]
    pointers = {w: step.send(w) for w in workers}
    losses = []
    for _ in range(5):
        for w, x, y in slices:
            model.send(w)
            if mode == "plan":
                loss = pointers[w](x, y)  # one message for forward, grad and update
            else:
                opt.zero_grad()
                loss = ((model(x) - y) ** 2).mean()
                loss.backward()
                opt.step()
            model.get()
            losses.append(loss.get().item())
    return model, losses


def test_training_step_plan_gives_the_same_weights_as_eager_federated_learning(bob, alice):
    eager_model, eager_losses = federated("eager", [bob, alice])
    plan_model, plan_losses = federated("plan", [bob, alice])
    assert plan_losses[-1] < plan_losses[0] / 3
    assert plan_losses == pytest.approx(eager_losses, rel=1e-5)
    for p, q in zip(eager_model.parameters(), plan_model.parameters()):
        assert torch.allclose(p, q, atol=1e-6)


def test_state_plan_runs_locally_on_the_module_and_updates_it():
    model = nn.Linear(2, 1)
    with torch.no_grad():
        model.weight.fill_(1.)
        model.bias.fill_(0.)

    def step(x):
        loss = model(x).sum()
        (gw, gb) = torch.autograd.grad(loss, [model.weight, model.bias])
        with torch.no_grad():
            model.weight.sub_(gw)
            model.bias.sub_(gb)
        return loss

    p = sy.plan(step, state=model).build(torch.ones(1, 2))
    loss = p(torch.tensor([[1., 2.]]))
    assert loss.item() == 3.
    assert torch.equal(model.weight.detach(), torch.tensor([[0., -1.]]))
    assert type(model.weight) is nn.Parameter


def test_batch_records_eager_code_and_sends_one_plan(bob):
    x = torch.randn(2, 3)
    w = torch.randn(3, 4)
    x_ptr, w_ptr = x.send(bob), w.send(bob)
    graphs = []
    original = bob.core.run_graph
    bob.core.run_graph = lambda *a: graphs.append(a) or original(*a)
    ops = []
    original_run = bob.core.run
    bob.core.run = lambda *a: ops.append(a) or original_run(*a)
    try:
        with sy.batch(bob):
            h = (x_ptr @ w_ptr).relu()
            out = h.sum()
            assert isinstance(out, sy.PointerTensor) and out.shape == () and h.shape == (2, 4)
            assert out.id_at_location not in bob.objects  # nothing ran yet
    finally:
        del bob.core.run_graph, bob.core.run
    assert len(graphs) == 1 and ops == []
    assert torch.allclose(out.get(), (x @ w).relu().sum())
    assert torch.allclose(h.get(), (x @ w).relu())
    del x_ptr, w_ptr
    assert len(bob.objects) == 0


def test_batch_with_data_dependent_op_fails_clearly(bob):
    p = torch.tensor([0., 1.]).send(bob)
    with pytest.raises(sy.SyftError, match="cannot run inside sy.batch"):
        with sy.batch(bob):
            p.nonzero()
    assert torch.equal(p.nonzero().get(), torch.tensor([[1]]))  # and works again outside


def test_pickling_plans_names_the_json_way(double_abs):
    import pickle

    double_abs.build(torch.ones(1))
    with pytest.raises(sy.SyftError, match=r"to_json\(\)"):
        pickle.dumps(double_abs)


def test_classifier_step_with_multi_output_ops_equals_eager():
    import torch.nn.functional as F

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 2))
    twin = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 2))
    twin.load_state_dict(model.state_dict())
    X, Y = torch.randn(16, 2), torch.randint(0, 2, (16,))

    def train_step(x, y):
        loss = F.cross_entropy(model(x), y)  # nll_loss_forward returns a tuple: getitem nodes
        grads = torch.autograd.grad(loss, list(model.parameters()))
        with torch.no_grad():
            for p, g in zip(model.parameters(), grads):
                p.sub_(0.5 * g)
        return loss

    step = sy.plan(train_step, state=model).build(X, Y)
    assert "getitem" in step.code and "_0_weight: float32[8, 2] (state)" in step.code
    assert step._graph.mutated_inputs == [0, 1, 2, 3]
    opt = torch.optim.SGD(twin.parameters(), lr=0.5)
    for _ in range(3):
        loss = step(X, Y)
        opt.zero_grad()
        eager = F.cross_entropy(twin(X), Y)
        eager.backward()
        opt.step()
        assert torch.allclose(loss, eager)
    for p, q in zip(model.parameters(), twin.parameters()):
        assert torch.allclose(p, q, atol=1e-6)


def test_plan_nodes_name_the_source_line_they_came_from_and_keep_it_out_of_the_json():
    from syft_lab.plans.view import view_graph

    lin = nn.Linear(3, 2)

    @sy.plan(state=lin)
    def head(x):
        y = x * 2
        return lin(y).relu()

    head.build(torch.ones(4, 3))
    graph = head.builds().latest
    here = __file__
    by_op = {n.name: n.source for n in graph.nodes}
    assert by_op["aten.mul.Tensor"] == {"file": here, "line": by_op["aten.mul.Tensor"]["line"], "code": "y = x * 2"}
    assert by_op["aten.addmm.default"]["code"] == by_op["aten.relu.default"]["code"] == "return lin(y).relu()"
    assert by_op["aten.relu.default"]["line"] == by_op["aten.mul.Tensor"]["line"] + 1
    ops = [n for n in view_graph(graph)["nodes"] if n.get("role") == "op"]
    assert ops and all(n["source"]["file"] == here for n in ops)  # what the plan view shows
    assert "source" not in head.to_json() and here not in head.to_json()  # a worker never sees user code


def test_plan_json_built_to_exhaust_the_worker_is_refused_before_it_is_parsed():
    import tracemalloc

    flood = "[" + "[]," * (2**20 + 10) + "[]]"  # a million empty lists (each a Python object)
    tracemalloc.start()
    try:
        with pytest.raises(PlanFormatError, match="opens more than 1048576 lists and maps"):
            PlanBuilds.from_json(flood)
        assert tracemalloc.get_traced_memory()[1] < 2**20  # refused before a list was made
    finally:
        tracemalloc.stop()
    with pytest.raises(PlanFormatError, match="nested too deep"):
        PlanBuilds.from_json("[" * 100_000 + "]" * 100_000)
