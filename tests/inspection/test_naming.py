"""Everything in the world is named as a person would name it (issue 26.4-26.6): a module's
parameters by their qualified names, a share by the secret it is part of wherever that secret
is held (a dict, a list, a module, an optimizer), a plan's state by its plan; a share offers no
action alone."""
import pytest
import torch
from torch import nn

import syft_lab as sy
from syft_lab.widget import svg


@pytest.fixture
def carol():
    w = sy.VirtualWorker("carol")
    yield w
    w.close()


def lanes_of(world):
    return {lane["id"]: lane for lane in world["workers"]}


def shares_on(lanes, *workers):
    return [o for w in workers for o in lanes[w]["objects"] if o["kind"] == "tensor"]


def test_a_shared_tensor_in_a_container_keeps_its_share_marks(workers, carol):
    bob, alice = workers
    sx = torch.tensor([1.5, -2.0]).fix_precision().share(bob, alice, crypto_provider=carol)
    d = {"data": [sx]}
    lanes = lanes_of(sy.world({"d": d}))
    stored = shares_on(lanes, "bob", "alice")
    assert len(stored) == 2
    assert {o["group"] for o in stored} == {sx.child.group}
    assert sorted(o["share"]["index"] for o in stored) == [0, 1]
    assert all(o["actions"] == [] and o["secret"] == "d['data'][0]" for o in stored)
    ptrs = [o for o in lanes["me"]["objects"] if o["kind"] == "pointer"]
    assert len(ptrs) == 2 and all(o["actions"] == [] and o["secret"] == "d['data'][0]" for o in ptrs)
    del d, sx


def test_the_shares_of_a_shared_module_are_shares_whatever_holds_it(workers, carol):
    bob, alice = workers
    cnn = nn.Sequential(nn.Linear(2, 2))
    cnn.fix_precision().share(bob, alice, crypto_provider=carol)
    opt = torch.optim.SGD(cnn.parameters(), lr=0.1)
    for ns, secret in (({"cnn": cnn}, {"cnn.0.weight", "cnn.0.bias"}),
                       ({"opt": opt}, {"opt.param_groups[0]['params'][0]", "opt.param_groups[0]['params'][1]"}),
                       ({"models": [cnn]}, {"models[0].0.weight", "models[0].0.bias"})):
        lanes = lanes_of(sy.world(ns))
        stored = shares_on(lanes, "bob", "alice")
        assert len(stored) == 4  # weight and bias, one share on each party
        assert all(o["actions"] == [] and o["share"]["of"] == 2 for o in stored), stored
        assert {o["secret"] for o in stored} == secret
    cnn.float_precision()


def test_a_plans_state_on_a_worker_says_whose_it_is(bob):
    model = nn.Linear(3, 1)

    def train_step(x):
        return model(x).sum()

    step = sy.plan(train_step, state=model, args_shape=[(-1, 3)])
    step.build(torch.ones(2, 3))
    pp = step.send(bob)
    lanes = lanes_of(sy.world({"step": step, "pp": pp}))
    (plan,) = [o for o in lanes["bob"]["objects"] if o["kind"] == "plan"]
    state = [o for o in lanes["bob"]["objects"] if o["kind"] != "plan"]
    assert len(state) == 2  # the weight and the bias, copied with the plan
    assert all(o["state_of"] == "train_step" and o["state_of_id"] == plan["id"] for o in state)
    assert sorted(plan["state_ids"]) == sorted(o["id"] for o in state)
    del pp


class Holder:
    """An object saying what it holds, as syft's datasets do (``_inspection_items``)."""

    def __init__(self, parts):
        self.parts = parts

    def _inspection_items(self):
        return ((f"[{k!r}].data", v) for k, v in self.parts.items())


def test_an_object_names_what_it_holds_by_the_paths_a_person_writes(bob):
    p = torch.ones(2).send(bob)
    lanes = lanes_of(sy.world({"fds": Holder({"bob": p})}))
    (row,) = [o for o in lanes["me"]["objects"] if o["kind"] == "pointer"]
    assert row["held_in"] == ["fds['bob'].data"]


def test_a_shared_value_is_held_by_nobody_in_every_view(workers, carol):
    bob, alice = workers
    sx = torch.tensor([1.5, -2.0]).fix_precision().share(bob, alice, crypto_provider=carol)
    root = sy.chain(sx).root
    assert root["distributed"] == ["bob", "alice"]  # the head: its value is on no worker
    assert root["children"][0]["distributed"] == ["bob", "alice"]
    assert all("distributed" not in c for c in root["children"][0]["children"])  # a share is on its worker
    assert "distributed" not in sy.chain(torch.ones(1).send(bob)).root  # a pointer's value is on bob
    (row,) = [o for o in lanes_of(sy.world({"sx": sx}))["me"]["objects"] if o["names"] == ["sx"]]
    assert row["distributed"] == ["bob", "alice"]
    picture = svg.chain_svg(root, "sx")
    assert picture.count("held by nobody") == 2  # the fixed precision and the shared box; the share pointers are on me
