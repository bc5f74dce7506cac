"""PySyft 0.2's tutorial flows (Parts 1-5, 8 and split learning), with exact expected values,
on VirtualWorkers and on real websocket worker processes.

Each flow is written as a learner would translate it from ../shared/reference/; where a
PySyft call has another name here, the test uses ours (``bob.objects`` for ``bob._objects``,
``bob.load`` for leaving data on a worker). Every remote value is compared with the same
computation run locally.
"""
from __future__ import annotations

import copy
import gc

import pytest
import torch
import torch.nn.functional as F
from torch import nn, optim

import syft_lab as sy
from syft_lab.errors import SyftError

KINDS = ["virtual", "websocket"]


@pytest.fixture(params=KINDS)
def world3(request, spawn, token):
    """alice, bob and carol, all of one kind; their stores are empty again at the end."""
    if request.param == "virtual":
        ws = [sy.VirtualWorker("alice"), sy.VirtualWorker("bob"), sy.VirtualWorker("carol")]
    else:
        bob, alice = request.getfixturevalue("remote")
        carol = sy.WebSocketWorker(spawn("carol").url, id="carol", token=token, progress=False)
        ws = [alice, bob, carol]
    yield ws
    gc.collect()
    leftovers = {w.id: len(w.objects) for w in ws}
    for w in ws:
        w.close()
    assert leftovers == {"alice": 0, "bob": 0, "carol": 0}, f"objects left on the workers: {leftovers}"


# --- Part 1: the basic tools ------------------------------------------------------------------

def test_part1_pointers_ops_and_autograd(world3):
    alice, bob, _ = world3
    x = torch.tensor([1, 2, 3, 4, 5])
    y = torch.tensor([1, 1, 1, 1, 1])
    x_ptr, y_ptr = x.send(bob), y.send(bob)
    z = x_ptr + x_ptr
    assert len(bob.objects) == 3
    assert x_ptr.location is bob and x_ptr.owner is sy.local_worker
    assert x_ptr.id_at_location in bob.objects
    assert torch.equal(x_ptr.get(), x) and torch.equal(y_ptr.get(), y)
    assert torch.equal(z.get(), torch.tensor([2, 4, 6, 8, 10]))
    assert len(bob.objects) == 0

    x = torch.tensor([1, 2, 3, 4, 5]).send(bob)
    y = torch.tensor([1, 1, 1, 1, 1]).send(bob)
    assert torch.equal(torch.add(x, y).get(), torch.tensor([2, 3, 4, 5, 6]))

    # the cell learners run first, verbatim: gradients arrive as real values
    x = torch.tensor([1, 2, 3, 4, 5.], requires_grad=True).send(bob)
    y = torch.tensor([1, 1, 1, 1, 1.], requires_grad=True).send(bob)
    z = (x + y).sum()
    z.backward()
    assert torch.equal(x.grad.get(), torch.ones(5))
    x = x.get()
    assert x.requires_grad and x.grad is None  # its grad was fetched above
    y = y.get()
    assert y.requires_grad and torch.equal(y.grad, torch.ones(5))  # get keeps .grad
    del z
    gc.collect()


def test_no_op_ever_carries_the_placeholder_device_to_a_worker(world3):
    _, bob, _ = world3
    w = torch.tensor([1., 2.], requires_grad=True).send(bob)
    for _ in range(2):  # the second backward accumulates into an existing grad
        (w * w).sum().backward()
    g = w.grad.get()
    assert g.device.type == "cpu" and torch.equal(g, torch.tensor([4., 8.]))
    assert torch.empty_like(w).get().device.type == "cpu"
    assert (w.new_zeros(3)).get().device.type == "cpu"
    del w
    gc.collect()


# --- Part 2 and the gradient check: a training loop on pointers equals the local loop --------

def _train_step_by_step(model, batches, steps, lr=0.1):
    """Per step: (loss, [grad of each parameter]) as local tensors."""
    opt = optim.SGD(model.parameters(), lr=lr)
    history = []
    for i in range(steps):
        for data, target in batches:
            if isinstance(data, sy.PointerTensor):
                model.send(data.location)
            opt.zero_grad()
            loss = ((model(data) - target) ** 2).sum()
            loss.backward()
            grads = [p.grad for p in model.parameters()]
            opt.step()
            if isinstance(data, sy.PointerTensor):
                model.get()
                loss = loss.get()
                grads = [p.grad for p in model.parameters()]
            history.append((loss.detach().clone(), [g.clone() for g in grads]))
    return history


def test_part2_federated_training_matches_local_training_step_by_step(world3):
    alice, bob, _ = world3
    torch.manual_seed(0)
    data = torch.tensor([[0, 0], [0, 1], [1, 0], [1, 1.]])
    target = torch.tensor([[0], [0], [1], [1.]])
    model = nn.Linear(2, 1)
    twin = copy.deepcopy(model)
    local = _train_step_by_step(twin, [(data[:2], target[:2]), (data[2:], target[2:])], steps=5)
    remote = _train_step_by_step(model, [(data[:2].send(bob), target[:2].send(bob)),
                                         (data[2:].send(alice), target[2:].send(alice))], steps=5)
    assert len(remote) == len(local) == 10
    for (l_loss, l_grads), (r_loss, r_grads) in zip(local, remote):
        torch.testing.assert_close(r_loss, l_loss)
        for a, b in zip(r_grads, l_grads):
            assert a.device.type == "cpu"
            torch.testing.assert_close(a, b)
    for p, q in zip(model.parameters(), twin.parameters()):
        torch.testing.assert_close(p, q)
    assert local[-1][0] < local[0][0]  # it learns
    gc.collect()


def test_part2_data_with_history_sent_keeps_its_gradient(world3):
    """PySyft's Part 2 slices ``data`` (requires_grad) before sending: the slice has history,
    and backward through the pointer reaches ``data`` here."""
    _, bob, _ = world3
    data = torch.tensor([[0, 0], [0, 1], [1, 0], [1, 1.]], requires_grad=True)
    p = data[0:2].send(bob)
    assert p.grad_fn is not None
    (p * 3).sum().backward()
    torch.testing.assert_close(data.grad, torch.tensor([[3., 3.], [3., 3.], [0., 0.], [0., 0.]]))
    del p
    gc.collect()


# --- Part 3: pointers to pointers, move --------------------------------------------------------

def test_part3_pointer_to_pointer_and_move_on_virtual_workers():
    bob, alice = sy.VirtualWorker("bob"), sy.VirtualWorker("alice")
    try:
        x = torch.tensor([1, 2, 3, 4])
        x_ptr = x.send(bob)
        pointer_to_x_ptr = x_ptr.send(alice)
        assert len(bob.objects) == 1 and len(alice.objects) == 1
        x_ptr = pointer_to_x_ptr.get()
        assert len(alice.objects) == 0 and torch.equal(x_ptr.get(), x)
        assert len(bob.objects) == 0

        p2p2x = torch.tensor([1, 2, 3, 4, 5]).send(bob).send(alice)
        y = p2p2x + p2p2x
        assert len(bob.objects) == 2 and len(alice.objects) == 2
        # the pointer that the op made on alice is held by alice, not by this process
        stored = [o for o in alice.objects.values() if o is not p2p2x]
        assert {o.owner.id for o in alice.objects.values()} == {"alice"}
        world = sy.world({})
        me_lane = next(w for w in world["workers"] if w["id"] == "me")
        assert {o["location"] for o in me_lane["objects"] if o["kind"] == "pointer"} == {"alice"}
        alice_lane = next(w for w in world["workers"] if w["id"] == "alice")
        assert [o["location"] for o in alice_lane["objects"]] == ["bob", "bob"]
        del stored
        assert torch.equal(y.get().get(), torch.tensor([2, 4, 6, 8, 10]))
        assert torch.equal(p2p2x.get().get(), torch.tensor([1, 2, 3, 4, 5]))
        assert len(bob.objects) == 0 and len(alice.objects) == 0

        x = torch.tensor([1, 2, 3, 4, 5]).send(bob)
        x = x.move(alice)
        assert len(bob.objects) == 0 and len(alice.objects) == 1
        assert torch.equal(x.get(), torch.tensor([1, 2, 3, 4, 5]))
    finally:
        bob.close()
        alice.close()


def test_part3_move_between_remote_workers_and_a_pointer_to_a_pointer_is_refused_clearly(remote):
    bob, alice = remote
    x = torch.tensor([1, 2, 3, 4, 5]).send(bob)
    x = x.move(alice)
    assert len(bob.objects) == 0 and len(alice.objects) == 1
    with pytest.raises(SyftError, match=r"cannot hold a pointer.*move"):
        x.send(bob)
    assert torch.equal(x.get(), torch.tensor([1, 2, 3, 4, 5]))


# --- Part 4: a trusted aggregator ----------------------------------------------------------------

def test_part4_trusted_aggregator_averages_models_like_local_averaging(world3):
    alice, bob, secure_worker = world3
    torch.manual_seed(1)
    data = torch.tensor([[0, 0], [0, 1], [1, 0], [1, 1.]])
    target = torch.tensor([[0], [0], [1], [1.]])
    bobs_data, bobs_target = data[0:2].send(bob), target[0:2].send(bob)
    alices_data, alices_target = data[2:].send(alice), target[2:].send(alice)
    model = nn.Linear(2, 1)
    expected = copy.deepcopy(model)

    def local_round(m):
        bm, am = copy.deepcopy(m), copy.deepcopy(m)
        for mm, (d, t) in ((bm, (data[:2], target[:2])), (am, (data[2:], target[2:]))):
            opt = optim.SGD(mm.parameters(), lr=0.1)
            for _ in range(5):
                opt.zero_grad()
                ((mm(d) - t) ** 2).sum().backward()
                opt.step()
        with torch.no_grad():
            m.weight.set_((am.weight.data + bm.weight.data) / 2)
            m.bias.set_((am.bias.data + bm.bias.data) / 2)

    for _ in range(3):
        bobs_model = model.copy().send(bob)
        alices_model = model.copy().send(alice)
        bobs_opt = optim.SGD(params=bobs_model.parameters(), lr=0.1)
        alices_opt = optim.SGD(params=alices_model.parameters(), lr=0.1)
        for _ in range(5):
            for m, opt, d, t in ((bobs_model, bobs_opt, bobs_data, bobs_target),
                                 (alices_model, alices_opt, alices_data, alices_target)):
                opt.zero_grad()
                loss = ((m(d) - t) ** 2).sum()
                loss.backward()
                opt.step()
                loss.get()
        alices_model.move(secure_worker)
        bobs_model.move(secure_worker)
        assert alices_model.weight.location is secure_worker and len(bob.objects) == 2  # bob: data only
        with torch.no_grad():
            model.weight.set_(((alices_model.weight.data + bobs_model.weight.data) / 2).get())
            model.bias.set_(((alices_model.bias.data + bobs_model.bias.data) / 2).get())
        local_round(expected)
        torch.testing.assert_close(model.weight, expected.weight)
        torch.testing.assert_close(model.bias, expected.bias)
        del bobs_model, alices_model, bobs_opt, alices_opt
        gc.collect()
    del bobs_data, bobs_target, alices_data, alices_target
    gc.collect()


# --- Part 5: data that lives on a worker, found by tags ------------------------------------------

def test_part5_tags_search_and_describe_on_worker_held_data(world3):
    alice, bob, _ = world3
    x = torch.tensor([1, 2, 3, 4, 5]).tag("#radio", "#hospital1").describe("The input datapoints to the hospital1 dataset.")
    y = torch.tensor([5, 4, 3, 2, 1]).tag("#radio", "#hospital2").describe("The input datapoints to the hospital2 dataset.")
    z = torch.tensor([1, 2, 3, 4, 5]).tag("#fun", "#mnist").describe("The images in the MNIST training dataset.")
    for t in (x, y, z):
        bob.load(t)  # no pointer kept: the data stays on bob all the same
    bob.load(torch.tensor([[1., 2.]]), tags=["#boston", "#housing", "#data"], description="Boston housing")
    gc.collect()
    assert len(bob.objects) == 4

    results = bob.search("#radio")
    assert len(results) == 2 and all(not r.owning for r in results)
    assert sorted(r.description for r in results) == ["The input datapoints to the hospital1 dataset.",
                                                       "The input datapoints to the hospital2 dataset."]
    assert sorted(torch.stack([r * 1 for r in results]).get().sum(0).tolist()) == [6] * 5
    boston = bob.search("#boston", "#housing")
    assert len(boston) == 1 and boston[0].tags == {"#boston", "#housing", "#data"}
    assert bob.search("#boston", "#nothing") == []
    del results
    gc.collect()
    assert len(bob.objects) == 4  # dropping search results deletes nothing

    entries = {e["description"]: e for e in bob.summary()}
    assert entries["Boston housing"]["held"] is True
    assert "(held by the worker)" in repr(sy.world({}))
    for r in bob.search("#radio") + bob.search("#mnist") + boston:
        bob.unload(r)
    assert len(bob.objects) == 0
    with pytest.raises(SyftError, match="unload takes a pointer"):
        bob.unload(torch.ones(1))


# --- Part 8: plans -------------------------------------------------------------------------------

def test_part8_a_plan_built_once_runs_on_a_worker_in_one_message(world3):
    _, bob, _ = world3

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(2, 3)
            self.fc2 = nn.Linear(3, 2)

        def forward(self, x):
            return F.log_softmax(self.fc2(F.relu(self.fc1(x))), dim=0)

    torch.manual_seed(2)
    net = Net()

    @sy.plan
    def plan_double_abs(x):
        return 2 * x.abs()

    plan_double_abs.build(torch.tensor([1., -2.]))
    pp = plan_double_abs.send(bob)
    assert torch.equal(pp(torch.tensor([1., -2.]).send(bob)).get(), torch.tensor([2., 4.]))

    @sy.plan(state=net)
    def net_plan(x):
        return net(x)

    net_plan.build(torch.tensor([1., 2.]))
    x = torch.tensor([-1., 2.])
    remote = net_plan.send(bob)
    torch.testing.assert_close(remote(x.send(bob)).get(), net(x))
    del pp, remote
    gc.collect()


# --- split learning: three segments on three workers -------------------------------------------

def _segments(seed=3):
    torch.manual_seed(seed)
    return [nn.Sequential(nn.Linear(6, 5), nn.ReLU()), nn.Sequential(nn.Linear(5, 4), nn.ReLU()),
            nn.Sequential(nn.Linear(4, 3), nn.LogSoftmax(dim=1))]


def test_split_learning_backward_reaches_every_segment_with_local_gradients(world3):
    locations = world3  # segment 1 on alice, 2 on bob, 3 (and the labels) on carol
    segments, twins = _segments(), _segments()
    opts = [optim.SGD(s.parameters(), lr=0.05) for s in segments]
    twin_opts = [optim.SGD(s.parameters(), lr=0.05) for s in twins]
    for s, w in zip(segments, locations):
        s.send(w)
    torch.manual_seed(4)
    for step in range(3):
        images, labels = torch.randn(8, 6), torch.randint(0, 3, (8,))
        # the same step run locally
        for o in twin_opts:
            o.zero_grad()
        local_loss = F.nll_loss(twins[2](twins[1](twins[0](images))), labels)
        local_loss.backward()
        # split: each activation moves to the next segment's worker; backward goes all the way
        for o in opts:
            o.zero_grad()
        a = segments[0](images.send(locations[0]))
        for seg, w in zip(segments[1:], locations[1:]):
            a = seg(a.move(w))
        loss = F.nll_loss(a, labels.send(locations[2]))
        loss.backward()
        for seg, twin, w in zip(segments, twins, locations):
            for p, q in zip(seg.parameters(), twin.parameters()):
                assert p.grad is not None and p.grad.location is w, f"segment on {w.id} got no gradient"
                torch.testing.assert_close(p.grad.clone().get(), q.grad)
        for o in opts + twin_opts:
            o.step()
        torch.testing.assert_close(loss.get(), local_loss)
        del a, loss
        gc.collect()
    for seg, twin in zip(segments, twins):
        seg.get()
        for p, q in zip(seg.parameters(), twin.parameters()):
            torch.testing.assert_close(p, q)
    del opts
    gc.collect()


def test_split_learning_the_pysyft_way_detach_move_and_backward_with_a_gradient(world3):
    """SplitNN tutorial 2's own loop: detach the activation, move it, and feed the gradient of
    each segment's input back by hand."""
    locations = world3
    segments, twins = _segments(5), _segments(5)
    for s, w in zip(segments, locations):
        s.send(w)
    images, labels = torch.randn(4, 6), torch.randint(0, 3, (4,))
    F.nll_loss(twins[2](twins[1](twins[0](images))), labels).backward()

    inputs, outputs = [images.send(locations[0])], []
    outputs.append(segments[0](inputs[0]))
    for i in range(1, 3):
        inp = outputs[i - 1].detach().requires_grad_()
        inp = inp.move(locations[i]).requires_grad_()
        inputs.append(inp)
        outputs.append(segments[i](inp))
    F.nll_loss(outputs[-1], labels.send(locations[2])).backward()
    for i in range(1, -1, -1):
        grad_in = inputs[i + 1].grad.clone().move(outputs[i].location)
        outputs[i].backward(grad_in)
    for seg, twin in zip(segments, twins):
        for p, q in zip(seg.parameters(), twin.parameters()):
            torch.testing.assert_close(p.grad.clone().get(), q.grad)
    del inputs, outputs, grad_in, inp
    for seg in segments:
        seg.get()
    gc.collect()


def test_copy_of_a_sent_module_lives_on_the_same_worker(world3):
    _, bob, _ = world3
    model = nn.Linear(2, 1).send(bob)
    twin = model.copy()
    assert twin.location is bob and twin.weight.location is bob
    assert twin.weight.id_at_location != model.weight.id_at_location
    torch.testing.assert_close(twin.weight.clone().get(), model.weight.clone().get())
    del model, twin
    gc.collect()
