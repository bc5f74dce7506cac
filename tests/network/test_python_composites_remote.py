"""Helpers made inside torch's Python-level composites, lazy modules and list indexing on real
worker processes (websocket, the session's bob): the same flows as tests/tensors/
test_pointer_defects.py on a VirtualWorker. A worker process draws from its own generator, so
random helpers are checked by what they must give, not against this process's draw."""
from __future__ import annotations

import copy

import torch
from torch import nn


def test_python_level_composites_on_a_worker_process(remote):
    bob, _ = remote
    F = nn.functional
    x = torch.randn(1, 2, 8, 8)
    out = F.fractional_max_pool2d(x.send(bob), 2, output_size=(4, 4)).get()
    assert out.shape == (1, 2, 4, 4) and torch.isin(out, x).all()  # each output is a max of its window
    a = torch.randn(6, 4)
    u, s, v = (t.get() for t in torch.svd_lowrank(a.send(bob), q=4))
    torch.testing.assert_close(u @ torch.diag(s) @ v.t(), a, rtol=1e-3, atol=1e-3)  # q = rank: exact
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(4, 2, add_zero_attn=True)
    twin = copy.deepcopy(mha)
    q = torch.randn(3, 1, 4)
    mha.send(bob)
    torch.testing.assert_close(mha(q.send(bob), q.send(bob), q.send(bob))[0].get(), twin(q, q, q)[0].detach(),
                               rtol=1e-4, atol=1e-5)


def test_masked_reductions_logdet_lazy_modules_and_indexing_on_a_worker_process(remote):
    bob, _ = remote
    torch.manual_seed(0)
    x = torch.randn(3, 4)
    mask = torch.rand(3, 4) > 0.4
    torch.testing.assert_close(torch.masked.amax(x.send(bob), 1, mask=mask.send(bob)).get(),
                               torch.masked.amax(x, 1, mask=mask))
    m = x[:, :3].t() @ x[:, :3] + torch.eye(3)
    torch.testing.assert_close(torch.logdet(m.send(bob)).get(), torch.logdet(m))
    model = nn.LazyLinear(2)
    twin = copy.deepcopy(model)
    torch.manual_seed(1)
    expected = twin(x)
    model.send(bob)
    torch.manual_seed(1)
    torch.testing.assert_close(model(x.send(bob)).get(), expected.detach())
    p = x.send(bob)
    p[[0, 2]] = 5.0
    y = x.clone()
    y[[0, 2]] = 5.0
    torch.testing.assert_close(torch.Tensor.__getitem__(p, [0, 2]).get(), y[[0, 2]])
