import gc
"""PySyft's toy federated learning, on two in-process workers, equals local training."""
import torch
import torch.nn as nn

import syft_lab as sy


def make_data():
    g = torch.Generator().manual_seed(0)
    X = torch.randn(40, 3, generator=g)
    Y = X @ torch.tensor([[1.], [-2.], [0.5]]) + 0.3
    return X, Y


def train(slices, *, remote: bool, epochs: int = 6):
    torch.manual_seed(1)
    model = nn.Linear(3, 1)
    params_before = list(model.parameters())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)  # built before any send
    losses = []
    for _ in range(epochs):
        for worker, (x, y) in slices:
            if remote:
                model.send(worker)
                assert isinstance(model.weight, sy.PointerTensor) and model.weight.location is worker
            opt.zero_grad()
            loss = ((model(x) - y) ** 2).mean()
            loss.backward()
            opt.step()
            if remote:
                model.get()
                loss = loss.get()
            losses.append(loss.item())
    assert [id(p) for p in model.parameters()] == [id(p) for p in params_before]
    return model, losses


def test_federated_training_equals_local_training(bob, alice):
    X, Y = make_data()
    local_model, local_losses = train([(None, (X[:20], Y[:20])), (None, (X[20:], Y[20:]))], remote=False)
    slices = [(bob, (X[:20].send(bob), Y[:20].send(bob))), (alice, (X[20:].send(alice), Y[20:].send(alice)))]
    fed_model, fed_losses = train(slices, remote=True)
    assert fed_losses[-1] < fed_losses[0] / 5  # the loss falls
    assert fed_losses == local_losses
    for p, q in zip(local_model.parameters(), fed_model.parameters()):
        assert type(q) is nn.Parameter and torch.equal(p, q)
    del slices
    assert len(bob.objects) == 0 and len(alice.objects) == 0


def test_module_send_twice_is_refused_clearly(bob):
    m = nn.Linear(2, 1)
    m.send(bob)
    try:
        m.send(bob)
    except sy.SyftError as e:
        assert "module.get()" in str(e)
    else:
        raise AssertionError("second send should fail")
    m.get()


def test_module_get_with_a_live_graph_copies_and_the_graph_still_backwards(bob):
    m = nn.Sequential(nn.Linear(3, 2), nn.BatchNorm1d(2))
    m.send(bob)
    out = m(torch.randn(4, 3).send(bob))
    m.get()  # a forward result is alive: the module's tensors are copied back, not swapped
    assert type(m[0].weight) is nn.Parameter and type(m[1].running_mean) is torch.Tensor
    assert m[1].num_batches_tracked.item() == 1  # the buffer update made on bob came back
    out.sum().backward()  # the remote graph is intact
    del out
    gc.collect()
    assert len(bob.objects) == 0
