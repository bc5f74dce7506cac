"""What the plan view is given beyond the data flow (syft_lab/plans/view.py): scalar constants,
op arguments, in-place writes, forward/backward/update regions; and the workers that hold a
plan now (sent_to), not the ones it left."""
import gc

import torch
import torch.nn as nn

import syft_lab as sy


def _graph(plan):
    return sy.chain(plan).nodes[0]["graph"]


def test_a_scalar_operand_is_a_constant_node_with_an_edge_into_its_op():
    @sy.plan
    def double(x):
        return 2 * x.sum(dim=0)

    double.build(torch.ones(2, 3))
    g = _graph(double)
    (scalar,) = [n for n in g["nodes"] if n.get("scalar")]
    assert (scalar["role"], scalar["label"], scalar["arg"], scalar["dtype"]) == ("constant", "2", "other", "int")
    mul = next(n for n in g["nodes"] if n["op"] == "aten.mul.Tensor")
    assert {"from": scalar["id"], "to": mul["id"], "shape": None, "dtype": "int"} in g["edges"]
    assert scalar["id"] in mul["inputs"]
    total = next(n for n in g["nodes"] if n["op"] == "aten.sum.dim_IntList")
    assert total["args"] == ["dim=[0]"]  # a dim is an argument, not a constant
    assert g["regions"] == [] and mul["region"] is None  # no backward: no regions
    # the plan's own graph (what travels) is unchanged: no scalar nodes there
    assert not any(n.get("scalar") for n in double.graph["nodes"])


def _training_step():
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))

    def train_step(X, Y):
        loss = ((model(X) - Y) ** 2).mean()
        grads = torch.autograd.grad(loss, list(model.parameters()))
        with torch.no_grad():
            for p, g in zip(model.parameters(), grads):
                p.sub_(0.1 * g)
        return loss

    return model, sy.plan(train_step, state=model).build(torch.ones(5, 3), torch.ones(5, 1))


def test_a_training_step_has_forward_backward_and_update_regions():
    model, step = _training_step()
    g = _graph(step)
    assert g["regions"] == ["forward", "backward", "update"]
    ops = [n for n in g["nodes"] if n["role"] == "op"]
    by_id = {n["id"]: n for n in g["nodes"]}
    updates = [n for n in ops if n["inplace"]]
    state = [n["id"] for n in g["nodes"] if n["role"] == "state"]
    assert sorted(w for n in updates for w in n["writes"]) == sorted(state)  # one sub_ per parameter
    assert {n["region"] for n in updates} == {"update"} and all(n["op"] == "aten.sub_.Tensor" for n in updates)
    # the learning rate's scaling belongs to the update, its 0.1 is a constant
    scales = {by_id[i]["id"] for n in updates for i in n["inputs"] if by_id[i]["role"] == "op"}
    assert scales and all(by_id[s]["region"] == "update" and by_id[s]["op"] == "aten.mul.Tensor" for s in scales)
    assert all(any(by_id[i].get("label") == "0.1" for i in by_id[s]["inputs"]) for s in scales)
    # the loss is forward; the grad seed and the *_backward ops are backward; order follows the step
    regions = [n["region"] for n in ops]
    assert regions[0] == "forward" and regions[-1] == "update"
    seed = next(n for n in ops if n["op"] == "aten.ones_like.default")
    assert seed["region"] == "backward"
    assert all(n["region"] == "backward" for n in ops if n["op"].endswith("_backward.default"))
    assert all(n["region"] == "forward" for n in ops[:ops.index(seed)])
    # consumers mirror the edges
    for n in ops:
        assert sorted(n["consumers"]) == sorted(e["to"] for e in g["edges"] if e["from"] == n["id"])


def test_sent_to_lists_only_workers_that_hold_the_plan_now(bob, alice):
    _, step = _training_step()
    at_bob = step.send(bob)
    at_alice = step.send(alice)
    node = sy.chain(step).nodes[0]
    assert (node["sent_to"], node["left"]) == (["bob", "alice"], [])
    back = at_bob.get()  # the plan came back from bob
    node = sy.chain(step).nodes[0]
    assert (node["sent_to"], node["left"]) == (["alice"], ["bob"])
    assert isinstance(back, sy.Plan) and step.sent_to == ["bob", "alice"]  # the history stays
    del at_alice  # alice releases it when its pointer goes
    gc.collect()
    node = sy.chain(step).nodes[0]
    assert (node["sent_to"], node["left"]) == ([], ["bob", "alice"])
    assert step.held_by() == [] and not any(getattr(o, "kind", None) == "plan" for o in alice.objects.values())


def test_a_plan_of_several_signatures_carries_each_graph_for_the_view(bob):
    @sy.plan
    def double(x):
        return 2 * x

    double.build(torch.ones(3))
    double.build(torch.ones(2, 2, dtype=torch.int64))
    node = sy.chain(double).nodes[0]
    assert [g["signature"] for g in node["graphs"]] == node["signatures"] == ["(x: float32[3])", "(x: int64[2, 2])"]
    assert node["graphs"][node["shown"]]["graph"] == node["graph"]  # the last build is the one shown
    assert node["graphs"][0]["graph"]["nodes"][0]["shape"] == [3]
    # what a worker holds describes every signature too
    ptr = double.send(bob)
    remote = sy.chain(ptr).nodes[-1]
    assert remote["kind"] == "plan" and len(remote["graphs"]) == 2
    one = sy.plan(lambda x: x.abs(), name="one").build(torch.ones(2))
    assert "graphs" not in sy.chain(one).nodes[0]  # a single signature: its graph is `graph`
