"""PySyft 0.2's tutorial flows (Parts 1-5, 7, 8, split learning, the Federated Dataset and
websockets MNIST tutorials' datasets and loaders), with exact expected values,
on VirtualWorkers, on real websocket worker processes and on Ray workers.

Each flow is written as a learner would translate it from ../shared/reference/; where a
PySyft call has another name here, the test uses ours (``bob.objects`` for ``bob._objects``,
``bob.load`` for leaving data on a worker). Every remote value is compared with the same
computation run locally.
"""
from __future__ import annotations

import copy
import gc
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn, optim
from torch.utils.data import Dataset, TensorDataset

import syft_lab as sy
from contract.kinds import ray_clients
from syft_lab.errors import SyftError

KINDS = ["virtual", "websocket", pytest.param("ray", marks=pytest.mark.ray)]


@pytest.fixture(params=KINDS)
def world3(request, spawn, token):
    """alice, bob and carol, all of one kind; their stores are empty again at the end."""
    if request.param == "virtual":
        ws = [sy.VirtualWorker("alice"), sy.VirtualWorker("bob"), sy.VirtualWorker("carol")]
    elif request.param == "ray":  # the session's actors (tests/conftest.py: ray_hosts)
        ws = ray_clients(request.getfixturevalue("ray_hosts"), "alice", "bob", "carol")
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


# --- Federated Dataset, Part 7, websockets MNIST: datasets as PySyft users build them (#27.1, #27.5) ----

class SVHNStyle(Dataset):
    """The 'Federated Dataset' tutorial's own Dataset subclass: numpy arrays made tensors,
    a transform applied per sample in __getitem__, a numpy target."""

    def __init__(self, images, labels, transform=None):
        self.data = torch.from_numpy(images)
        self.targets = labels
        self.transform = transform

    def __len__(self):
        return len(self.data)

    def __getitem__(self, idx):
        sample = self.data[idx]
        return (self.transform(sample) if self.transform else sample), self.targets[idx]


class TorchvisionStyle(Dataset):
    """As torchvision's MNIST: uint8 images in .data, int targets, a ToTensor-like transform."""

    def __init__(self, n):
        self.data = torch.arange(n * 4, dtype=torch.uint8).reshape(n, 2, 2)
        self.targets = torch.arange(n) % 3

    def __len__(self):
        return len(self.data)

    def __getitem__(self, i):
        return self.data[i].float().div(255).unsqueeze(0), int(self.targets[i])


def _epoch(loader):
    """Every batch of one epoch, fetched: [(worker id, data, target)]."""
    return [(d.location.id, d.get(), t.get()) for d, t in loader]


def test_federate_on_any_torch_dataset_sends_what_its_getitem_gives(world3):
    alice, bob, _ = world3
    x, y = torch.arange(12.).reshape(6, 2), torch.arange(6)
    fds = TensorDataset(x, y).federate((bob, alice))
    assert fds.counts == {"bob": 3, "alice": 3}
    got = _epoch(sy.FederatedDataLoader(fds, batch_size=3))
    assert [w for w, _, _ in got] == ["bob", "alice"]
    torch.testing.assert_close(torch.cat([d for _, d, _ in got]), x)

    images = np.arange(24, dtype=np.float32).reshape(6, 2, 2)
    svhn = SVHNStyle(images, np.array([0, 1, 0, 1, 0, 1]), transform=lambda s: s * 2)
    fsvhn = svhn.federate((bob, alice), name="svhn")  # the tutorial's call, a Dataset subclass
    got = _epoch(sy.FederatedDataLoader(fsvhn, batch_size=2))
    torch.testing.assert_close(torch.cat([d for _, d, _ in got]), torch.from_numpy(images) * 2)
    assert torch.cat([t for _, _, t in got]).tolist() == [0, 1, 0, 1, 0, 1]

    mnist = TorchvisionStyle(4).federate((bob, alice), name="mnist")
    local = torch.stack([TorchvisionStyle(4)[i][0] for i in range(4)])
    torch.testing.assert_close(torch.cat([d for _, d, _ in _epoch(sy.FederatedDataLoader(mnist, batch_size=4))]), local)
    for f in (fds, fsvhn, mnist):
        f.unload()


def test_datasets_that_cannot_be_federated_say_why(world3):
    _, bob, _ = world3

    class Triples(Dataset):
        def __len__(self):
            return 2

        def __getitem__(self, i):
            return torch.ones(1), torch.ones(1), torch.ones(1)

    class Images(TorchvisionStyle):
        def __getitem__(self, i):
            return object(), 0  # a PIL image without ToTensor

    with pytest.raises(ValueError, match=r"\(data, target\) pairs; Triples\[0\] is a tuple of 3"):
        Triples().federate([bob])
    with pytest.raises(TypeError, match=r"Images\[0\]'s data is a object.*ToTensor"):
        Images(2).federate([bob])
    class Stream(torch.utils.data.IterableDataset):
        def __iter__(self):
            return iter([(torch.ones(1), 0)])

    with pytest.raises(TypeError, match="map-style Dataset .*a Stream has no length"):
        Stream().federate([bob])
    assert len(bob.objects) == 0


def test_part7_federated_dataset_from_search_results_trains_as_locally(world3):
    """Part 7: BaseDatasets of the pointers search finds, a FederatedDataset of them, a loader."""
    alice, bob, _ = world3
    torch.manual_seed(7)
    x, y = torch.randn(8, 3), torch.randn(8, 1)
    for w, sl in ((bob, slice(0, 5)), (alice, slice(5, 8))):
        w.load(x[sl], tags=["#boston", "#data"])
        w.load(y[sl], tags=["#boston", "#target"])
    boston_data = {w.id: w.search("#boston", "#data") for w in (bob, alice)}
    boston_target = {w.id: w.search("#boston", "#target") for w in (bob, alice)}
    datasets = [sy.BaseDataset(boston_data[w][0], boston_target[w][0]) for w in boston_data]
    dataset = sy.FederatedDataset(datasets)
    assert dataset.workers == ["bob", "alice"] and len(dataset) == 8

    model = nn.Linear(3, 1)
    twin = copy.deepcopy(model)
    optimizers = {w: optim.SGD(model.parameters(), lr=0.05) for w in dataset.workers}
    for data, target in sy.FederatedDataLoader(dataset, batch_size=4):
        model.send(data.location)
        opt = optimizers[data.location.id]
        opt.zero_grad()
        F.mse_loss(model(data), target).backward()
        opt.step()
        model.get()
    twin_opt = optim.SGD(twin.parameters(), lr=0.05)
    for sl in (slice(0, 4), slice(4, 5), slice(5, 8)):  # the same batches, here
        twin_opt.zero_grad()
        F.mse_loss(twin(x[sl]), y[sl]).backward()
        twin_opt.step()
    torch.testing.assert_close(model.weight, twin.weight)
    del datasets, dataset, boston_data, boston_target
    for w in (bob, alice):
        for p in w.search("#boston"):
            w.unload(p)


def test_base_dataset_send_gives_a_worker_part(world3):
    alice, bob, _ = world3
    ds = sy.BaseDataset(torch.arange(6.).reshape(3, 2), torch.tensor([0, 1, 2]), transform=lambda s: s + 1)
    on_bob = ds.send(bob)
    assert on_bob.location is bob and ds.location is None  # the local one is left as it was
    torch.testing.assert_close(on_bob.data.clone().get(), torch.arange(6.).reshape(3, 2) + 1)  # transformed here
    on_alice = sy.BaseDataset(torch.ones(2, 2), torch.zeros(2, dtype=torch.long)).send("alice")
    fds = sy.FederatedDataset([on_bob, on_alice])
    assert fds.counts == {"bob": 3, "alice": 2}
    assert [w for w, _, _ in _epoch(sy.FederatedDataLoader(fds, batch_size=2))] == ["bob", "bob", "alice"]
    with pytest.raises(ValueError, match="this BaseDataset is local, so ds.send\\(worker\\) it first"):
        sy.FederatedDataset([ds])
    elsewhere = torch.zeros(3).send(alice)
    with pytest.raises(ValueError, match="both here or both pointers to one worker, got a pointer to 'bob' and "
                                         "a pointer to 'alice'"):
        sy.BaseDataset(on_bob.data, elsewhere)
    del on_bob, on_alice, fds, elsewhere
    gc.collect()


def test_websockets_mnist_loader_iterates_per_worker(world3):
    """The websockets tutorial's get_next_batches: iter(loader), then next(loader) gives one
    batch of every worker that has one left, keyed by worker."""
    alice, bob, _ = world3
    fds = TensorDataset(torch.arange(10.).unsqueeze(1), torch.arange(10)).federate((bob, alice))  # 5 and 5
    loader = sy.FederatedDataLoader(fds, batch_size=2, iter_per_worker=True)
    assert len(loader) == 3
    batches = {w: [] for w in (fds["bob"].location, fds["alice"].location)}
    iter(loader)
    for _ in range(2):
        step = next(loader)
        assert set(step) == {bob, alice}
        for worker, (data, target) in step.items():
            assert data.location is worker
            batches[worker].append(target.get().tolist())
    last = next(loader)
    assert {w.id: t.get().tolist() for w, (_, t) in last.items()} == {"bob": [4], "alice": [9]}
    with pytest.raises(StopIteration):
        next(loader)
    assert batches == {bob: [[0, 1], [2, 3]], alice: [[5, 6], [7, 8]]}
    assert sum(1 for _ in loader) == 3  # a new epoch
    fds.unload()


# --- Part 2's Optims, .copy(), workers by id, errors that catch as PyTorch users expect (#27.2, #27.4, #27.5) ---

def test_part2_optims_gives_each_worker_its_own_adam(world3):
    alice, bob, _ = world3
    torch.manual_seed(2)
    data = torch.tensor([[0, 0], [0, 1], [1, 0], [1, 1.]])
    target = torch.tensor([[0], [0], [1], [1.]])
    model = nn.Linear(2, 1)
    twin = copy.deepcopy(model)
    datasets = [(data[:2].send(bob), target[:2].send(bob)), (data[2:].send(alice), target[2:].send(alice))]
    optims = sy.Optims(["bob", "alice"], optim=optim.Adam(params=model.parameters(), lr=0.1))
    twin_optims = {w: optim.Adam(twin.parameters(), lr=0.1) for w in ("bob", "alice")}
    for _ in range(3):
        for (d, t), (ld, lt) in zip(datasets, ((data[:2], target[:2]), (data[2:], target[2:]))):
            model.send(d.location)
            opt = optims.get_optim(d.location.id)
            opt.zero_grad()
            ((model(d) - t) ** 2).sum().backward()
            opt.step()  # Adam's moments stay on this worker, with its optimizer
            model.get()
            twin_opt = twin_optims[d.location.id]
            twin_opt.zero_grad()
            ((twin(ld) - lt) ** 2).sum().backward()
            twin_opt.step()
    torch.testing.assert_close(model.weight, twin.weight)
    torch.testing.assert_close(model.bias, twin.bias)
    assert optims.count() == 2
    with pytest.raises(KeyError, match="no optimizer for 'carol': Optims has bob, alice"):
        optims.get_optim("carol")
    del datasets, optims
    gc.collect()


def test_copy_of_a_local_tensor_is_a_copy_that_stays_here(world3):
    _, bob, _ = world3
    line = torch.tensor([[1., 2.]], requires_grad=True)
    c = line.copy()
    assert c is not line and torch.equal(c, line) and c.grad_fn is not None  # in the graph, as PySyft's
    remote = line.detach().copy().send(bob)  # the RNN tutorial's line_tensor.copy().send(worker)
    assert torch.equal(remote.get(), line.detach())


def test_a_worker_named_by_its_id_and_an_unknown_id_named_with_the_known_ones(world3):
    alice, bob, _ = world3
    model = nn.Linear(2, 2).send("alice")  # the RNN tutorial's spelling
    assert model.weight.location is alice
    model.move("bob")
    assert model.weight.location is bob
    p = torch.ones(2).send("bob")
    assert p.location is bob and torch.equal(p.get(), torch.ones(2))
    with pytest.raises(KeyError, match=r"no worker named 'dave' \(known workers: alice, bob, carol"):
        model.send("dave")
    with pytest.raises(TypeError, match="is a worker .* or its id, got int"):
        torch.ones(1).send(3)
    model.get()


def test_errors_catch_as_a_pytorch_user_expects(world3):
    _, bob, _ = world3

    @sy.plan
    def not_built(x):
        return x + 1

    try:  # Part 8's own cell
        not_built.send(bob)
        raise AssertionError("an unbuilt plan was sent")
    except RuntimeError as e:
        assert "is not built" in str(e) and isinstance(e, sy.SyftError)
    p = torch.ones(2).send(bob)
    with pytest.raises(RuntimeError):  # a value that must not leave its worker
        p.item()
    with pytest.raises(TypeError):
        sy.FederatedDataLoader([p])
    with pytest.raises(ValueError):
        sy.BaseDataset(torch.ones(3, 1), torch.ones(2))
    gone = p.id_at_location
    p.get()
    with pytest.raises(LookupError):
        bob.describe(gone)
    for cls in (sy.SyftTypeError, sy.SyftValueError, sy.NotFoundError, sy.NotSupportedError,
                sy.ObjectNotFoundError, sy.WorkerUnavailableError, sy.RemoteError):
        assert issubclass(cls, sy.SyftError) and issubclass(cls, RuntimeError)


# --- what syft_lab leaves out by design (#27.7) ---------------------------------------------------

def test_each_name_left_out_gives_one_line_naming_what_to_use_and_the_docs_list_it():
    docs = (Path(__file__).resolve().parents[2] / "docs" / "pysyft.md").read_text()
    for name, instead in sy.LEFT_OUT.items():
        with pytest.raises(NotImplementedError) as e:
            getattr(sy, name)(globals())
        message = str(e.value)
        assert isinstance(e.value, sy.SyftError) and "\n" not in message
        assert message.startswith(f"sy.{name} is left out of syft_lab by design: ") and instead in message
        assert f"`sy.{name}`" in docs, f"docs/pysyft.md does not list sy.{name}"
    for other in ("FSS", "AutogradTensor", "32-bit", "grid"):
        assert other in docs


# --- re-running a cell against worker processes, which outlive the cell (#24.1) -----------------

def test_rerunning_a_federate_cell_replaces_this_kernels_parts_on_worker_processes(remote, worker_procs, token, capsys):
    bob, alice = remote
    x, y = torch.arange(8.).unsqueeze(1), torch.arange(8)
    for run in range(2):  # the same cell, run twice
        fds = sy.BaseDataset(x * (run + 1), y, name="rerun").federate((bob, alice))
    assert "syft: replaced dataset 'rerun' on bob, alice" in capsys.readouterr().out
    assert len(bob.objects) == 2 and len(alice.objects) == 2
    torch.testing.assert_close(fds["bob"].data.clone().get(), x[:4] * 2)

    # another client (its own connection, its own process's federate) loaded 'theirs' on bob
    other = sy.WebSocketWorker(worker_procs["bob"].url, id="bob", token=token, progress=False)
    try:
        other.load(torch.zeros(2, 1), tags=["#dataset", "#theirs", "#data"])
        other.load(torch.zeros(2), tags=["#dataset", "#theirs", "#target"])
    finally:
        other.close()
    bob = sy.WebSocketWorker(worker_procs["bob"].url, id="bob", token=token, progress=False)
    try:
        with pytest.raises(sy.SyftError, match="holds a dataset 'theirs' that this kernel did not federate"):
            sy.BaseDataset(x, y, name="theirs").federate((alice, bob))
        assert len(alice.objects) == 2  # only 'rerun': nothing was added
        sy.FederatedDataset.from_workers([bob], "theirs").unload()
        sy.FederatedDataset.from_workers((bob, alice), "rerun").unload()
        assert len(bob.objects) == 0 and len(alice.objects) == 0
    finally:
        bob.close()
