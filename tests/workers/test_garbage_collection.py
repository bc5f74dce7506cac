"""Remote objects are reference counted: the last owning pointer to go deletes the object."""
import gc

import torch

import syft_lab as sy


def test_dropping_the_last_pointer_deletes_the_object(bob):
    p = torch.ones(3).send(bob)
    obj_id = p.id_at_location
    q = p  # another name, same pointer
    del p
    assert obj_id in bob.objects
    del q
    assert obj_id not in bob.objects


def test_op_results_are_released_too(bob):
    p = torch.ones(3).send(bob)
    for _ in range(10):
        (p * 2 + 1).sum()
    assert list(bob.objects) == [p.id_at_location]


def test_sending_the_same_tensor_twice_gives_independent_objects(bob):
    x = torch.tensor([1., 2.])
    a, b = x.send(bob), x.send(bob)
    assert a.id_at_location != b.id_at_location and len(bob.objects) == 2
    del a
    assert torch.equal(b.get(), x)
    assert len(bob.objects) == 0


def test_get_and_move_do_not_double_delete(bob, alice):
    keep = torch.zeros(1).send(bob)
    p = torch.ones(2).send(bob)
    value = p.get()
    del p
    m = torch.ones(2).send(bob).move(alice)
    gc.collect()
    assert list(bob.objects) == [keep.id_at_location]
    assert len(alice.objects) == 1 and torch.equal(value, torch.ones(2))
    del m
    assert len(alice.objects) == 0


def test_search_pointers_do_not_delete_what_someone_else_sent(bob):
    owner = torch.tensor([1.]).tag("#x").send(bob)
    for _ in range(3):
        found = bob.search("#x")
        del found
    assert owner.id_at_location in bob.objects
    del owner
    assert len(bob.objects) == 0


def test_a_pointer_held_by_a_worker_keeps_its_target_alive(bob, alice):
    pp = torch.ones(1).send(bob).send(alice)
    assert len(bob.objects) == 1
    del pp  # alice drops its pointer, which drops bob's object
    assert len(alice.objects) == 0 and len(bob.objects) == 0


def test_autograd_graph_keeps_what_backward_needs_and_nothing_after(bob):
    w = torch.tensor([1., 2.], requires_grad=True).send(bob)
    loss = (w * w).exp().sum()
    assert len(bob.objects) == 3  # w, exp's saved output, loss
    loss.backward()
    del loss
    grad = w.grad
    assert set(bob.objects) == {w.id_at_location, grad.id_at_location}


def test_ten_thousand_sends_ops_and_drops_leave_every_store_as_it_was(bob, alice):
    base = torch.tensor([1., 2.]).send(bob)
    start = (len(bob.objects), len(alice.objects))
    for i in range(10_000):
        p = torch.tensor([float(i)]).send(bob if i % 2 else alice)
        q = (p + 1) * p
        if i % 3 == 0:
            q.get()
        elif i % 3 == 1:
            q.move(bob if i % 2 == 0 else alice)
    del p, q
    gc.collect()
    assert (len(bob.objects), len(alice.objects)) == start
    assert len(sy.world()["workers"]) >= 3
    del base
