"""class Net(sy.Plan), as in PySyft's Part 8: forward is the function, its modules are the state."""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import syft_lab as sy


class Net(sy.Plan):
    def __init__(self):
        super(Net, self).__init__()
        self.fc1 = nn.Linear(2, 3)
        self.fc2 = nn.Linear(3, 2)

    def forward(self, x):
        x = F.relu(self.fc1(x))
        x = self.fc2(x)
        return F.log_softmax(x, dim=0)


@pytest.fixture
def net():
    torch.manual_seed(0)
    return Net()


@pytest.fixture(params=["virtual", "websocket"])
def worker(request, bob):
    if request.param == "virtual":
        return bob
    return request.getfixturevalue("remote")[0]


def test_build_describes_a_class_plan_truthfully(net):
    assert repr(net) == "<Plan Net (class Net): not built>"
    built = net.build(torch.tensor([1., 2.]))  # was: SyftError "loaded from JSON"
    assert built is net and net.is_built
    assert repr(net) == ("<Plan Net (class Net): built for (x: float32[2]); 10 ops; "
                         "state fc1.weight, fc1.bias, fc2.weight, fc2.bias>")
    node = sy.chain(net).nodes[0]
    assert node["origin"] == "class Net" and node["signatures"] == ["(x: float32[2])"]
    assert [(i["name"], i["role"]) for i in node["inputs"]] == [
        ("fc1.weight", "state"), ("fc1.bias", "state"), ("fc2.weight", "state"), ("fc2.bias", "state"),
        ("x", "input")]


def test_parameters_are_the_state_and_the_plan_follows_them(net):
    assert list(net.parameters()) == [net.fc1.weight, net.fc1.bias, net.fc2.weight, net.fc2.bias]
    net.build(torch.tensor([1., 2.]))
    x = torch.tensor([-1., 2.])
    torch.testing.assert_close(net(x), net.forward(x))
    with torch.no_grad():
        net.fc2.bias.add_(torch.tensor([0., 3.]))  # the plan reads the module's current values
    torch.testing.assert_close(net(x), net.forward(x))


def test_part_8_net_sent_and_called_with_a_pointer_equals_forward(net, worker):
    net.build(torch.tensor([1., 2.]))
    pointer_to_net = net.send(worker)
    for data in (torch.tensor([-1., 2.]), torch.tensor([1., -2.])):
        pointer_to_result = pointer_to_net(data.send(worker))
        torch.testing.assert_close(pointer_to_result.get(), net.forward(data).detach())


def test_one_class_plan_sent_to_two_workers(net, bob, alice):
    net.build(torch.tensor([1., 2.]))
    x = torch.tensor([-1., 2.])
    results = [net.send(w)(x.send(w)).get() for w in (bob, alice)]
    for r in results:
        torch.testing.assert_close(r, net.forward(x).detach())
    assert net.sent_to == ["bob", "alice"]


def test_a_class_plan_with_a_batch_dimension(net, worker):
    net.build(args_shape=[(-1, 2)])  # log_softmax over dim 0: over the batch
    pp = net.send(worker)
    for n in (1, 3, 17):
        x = torch.randn(n, 2)
        torch.testing.assert_close(net(x), net.forward(x))
        torch.testing.assert_close(pp(x.send(worker)).get(), net.forward(x).detach())


def test_only_a_plan_from_json_or_a_worker_says_it_has_no_function(net, bob):
    net.build(torch.tensor([1., 2.]))
    loaded = sy.Plan.from_json(net.to_json())
    with pytest.raises(sy.SyftError, match=r"plan 'Net' was loaded from JSON: it holds only its traced graphs"):
        loaded.build(torch.ones(2))
    fetched = net.send(bob).get()
    assert repr(fetched).startswith("<Plan Net (fetched from worker bob): built for (x: float32[2])")
    with pytest.raises(sy.SyftError, match="was fetched from worker bob"):
        fetched.build(torch.ones(2))


def test_a_plan_needs_a_function_or_a_forward():
    with pytest.raises(TypeError, match=r"sy.plan\(fn\).*forward\(self, ...\)"):
        sy.Plan()
