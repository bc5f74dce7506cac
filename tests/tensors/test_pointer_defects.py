"""Runtime defects of pointers found by PyTorch's own databases (issue 22, items 3-5), each on
VirtualWorkers: what a pointer says about its remote tensor (strides), helper tensors made
inside composite ops, modules, gradients and copies. The same flows on worker processes:
tests/network/test_pointer_defects_remote.py."""
import gc

import pytest
import torch
from torch import nn

import syft_lab as sy


def _stored(worker, p):
    return worker.objects[p.id_at_location]


# --- 1. a pointer describes its remote tensor exactly -----------------------------------------

def test_a_pointer_has_the_strides_and_offset_of_its_remote_tensor(bob):
    x = torch.arange(24.).reshape(2, 3, 4)
    p = x.send(bob)
    for make in (lambda t: t.transpose(0, 2), lambda t: t.permute(1, 2, 0), lambda t: t[:, 1:, ::2],
                 lambda t: t.select(1, 2), lambda t: t.expand(5, 2, 3, 4), lambda t: t.t() if t.dim() == 2 else t[0].t()):
        q, plain = make(p), make(x)
        assert (q.shape, q.stride(), q.storage_offset()) == (plain.shape, plain.stride(), plain.storage_offset())
        real = _stored(bob, q)
        assert (real.stride(), real.storage_offset()) == (q.stride(), q.storage_offset())


@pytest.mark.parametrize("sent", ["contiguous", "transposed", "sliced"])
def test_composite_ops_on_non_contiguous_remote_tensors_equal_plain_torch(bob, sent):
    base = torch.randn(4, 6)
    x = {"contiguous": base, "transposed": base.t(), "sliced": base[:, ::2]}[sent]
    p = x.send(bob)
    for op in (lambda t: t.reshape(-1), lambda t: t.t().reshape(2, -1), lambda t: t.t().flatten(),
               lambda t: t.t().contiguous().view(-1), lambda t: torch.tensordot(t, t.t(), dims=1)):
        torch.testing.assert_close(op(p).get(), op(x))


def test_tensordot_and_cartesian_prod_through_pointers(bob):
    a, b = torch.randn(3, 4, 5), torch.randn(4, 3, 2)
    torch.testing.assert_close(torch.tensordot(a.send(bob), b.send(bob), dims=([1, 0], [0, 1])).get(),
                               torch.tensordot(a, b, dims=([1, 0], [0, 1])))
    u, v, w = torch.tensor([1., 2.]), torch.tensor([3., 4., 5.]), torch.tensor([6.])
    torch.testing.assert_close(torch.cartesian_prod(u.send(bob), v.send(bob), w.send(bob)).get(),
                               torch.cartesian_prod(u, v, w))


def test_a_data_dependent_result_has_the_layout_its_kernel_gives(bob):
    x = torch.tensor([[1., 0., 2.], [0., 3., 0.]])
    p = x.send(bob)
    for q, plain in ((p.nonzero(), x.nonzero()), (torch.argwhere(p), torch.argwhere(x))):
        assert (q.shape, q.stride()) == (plain.shape, plain.stride())
        torch.testing.assert_close(q.t().reshape(-1).get(), plain.t().reshape(-1))
