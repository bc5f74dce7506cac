"""The pointer defects of tests/tensors/test_pointer_defects.py on real worker processes
(websocket, the session's bob and alice): strides, helper tensors of composite ops, recurrent
modules, get while a result is alive, and copy."""
from __future__ import annotations

import copy
import gc

import torch
from torch import nn


def test_strides_of_remote_results_match_what_the_worker_holds(remote):
    bob, _ = remote
    x = torch.randn(4, 6)
    for sent in (x, x.t(), x[:, ::2]):
        p = sent.send(bob)
        q = p.t()
        assert (q.shape, q.stride()) == (sent.t().shape, sent.contiguous().t().stride())
        torch.testing.assert_close(q.reshape(-1).get(), sent.t().reshape(-1))
        torch.testing.assert_close(torch.tensordot(p, p.t(), dims=1).get(), torch.tensordot(sent, sent.t(), dims=1))
    nz = torch.tensor([[1., 0.], [0., 2.]])
    torch.testing.assert_close(nz.send(bob).nonzero().t().reshape(-1).get(), nz.nonzero().t().reshape(-1))


def test_composite_ops_that_make_helper_tensors_on_a_worker_process(remote):
    bob, _ = remote
    x, y = torch.randn(3, 5), torch.randn(3, 5)
    torch.testing.assert_close(torch.cov(x.send(bob)).get(), torch.cov(x), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(torch.nn.functional.cosine_similarity(x.send(bob), y.send(bob)).get(),
                               torch.nn.functional.cosine_similarity(x, y))
    v = torch.tensor([1., 2., 3.])
    torch.testing.assert_close(torch.combinations(v.send(bob)).get(), torch.combinations(v))
    torch.testing.assert_close(x.send(bob)[[0, 2]].get(), x[[0, 2]])


def test_recurrent_modules_and_get_while_a_result_is_alive_on_worker_processes(remote):
    bob, alice = remote
    torch.manual_seed(0)
    lstm = nn.LSTM(3, 4)
    x = torch.randn(5, 2, 3)
    expected, _ = lstm(x)
    lstm.send(bob)
    out, state = lstm(x.send(bob))
    torch.testing.assert_close(out.get(), expected.detach(), rtol=1e-4, atol=1e-5)
    del out, state
    lstm.move(alice)
    lstm.get()

    conv = nn.Conv2d(1, 2, 3)
    img = torch.randn(2, 1, 5, 5)
    plain = copy.deepcopy(conv)(img)
    conv.send(bob)
    y = conv(img.send(bob))
    conv.get()  # y's graph keeps the remote parameters; the module gets copies
    torch.testing.assert_close(conv(img), plain)
    y.sum().backward()
    c = y.copy()
    assert c.location is bob and c.id_at_location != y.id_at_location
    torch.testing.assert_close(c.get(), plain.detach())
    del y, c
    gc.collect()
