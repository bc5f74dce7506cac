"""Cancellable ops (syft_lab/workers/forked.py): an expensive op past the worker's time budget is
stopped and nothing changes; one that finishes gives exactly what running it inline gives."""
import pytest
import torch
import torch.nn.functional as F

import syft_lab as sy
from syft_lab.commands import NewObject, Ref, SameAsArg
from syft_lab.errors import RemoteError
from syft_lab.workers.core import WorkerCore
from syft_lab.workers.forked import ChildError, run_forked
from syft_lab.workers.limits import Limits

A = torch.ops.aten
N = 2048  # a 2048 x 2048 x 2048 contraction: 2**33 multiply-adds, the per-op bound, ~0.3-1 s here


def core(seconds):
    return WorkerCore("slow", Limits(max_bytes=2**33, max_op_seconds=seconds))


def test_an_op_past_the_time_budget_is_stopped_and_its_in_place_target_is_unchanged():
    w = core(0.02)  # a 2**33 contraction cannot finish in 20 ms (that is 0.8 TFLOP/s on these cores)
    target, a, b = torch.rand(N, N), torch.rand(N, N), torch.rand(N, N)
    before = target.clone()
    ids = [w.store(t) for t in (target, a, b)]
    with pytest.raises(sy.OpCancelledError, match=r"aten.addmm_.default ran past the worker's time budget "
                                                   r"of 0.02 s and was stopped: nothing was stored and no "
                                                   r"object changed") as info:
        w.run(A.addmm_.default, [Ref(i) for i in ids], None)
    assert isinstance(info.value, TimeoutError)
    assert torch.equal(w.objects[ids[0]], before) and w.objects[ids[0]] is target
    assert sorted(w.objects) == sorted(ids)
    with pytest.raises(sy.OpCancelledError, match="aten.mm.default ran past"):
        w.run(A.mm.default, [Ref(ids[1]), Ref(ids[2])], None)
    assert sorted(w.objects) == sorted(ids)  # no result stored
    small = w.run(A.add.Tensor, [Ref(ids[1]), Ref(ids[2])], None)  # a linear op runs inline, as ever
    assert torch.equal(w.objects[small.id], a + b)


def test_an_op_that_finishes_in_time_gives_what_running_it_inline_gives():
    w = core(120.0)
    x = torch.rand(1, 2, 600, 600)
    target, a, b = torch.rand(N, N), torch.rand(N, N), torch.rand(N, N).t()  # b: transposed strides
    expected_addmm = torch.addmm(target, a, b)
    ids = {name: w.store(t) for name, t in dict(x=x, target=target, a=a, b=b).items()}
    pooled = w.run(A.avg_pool2d.default, [Ref(ids["x"]), [40, 40], [1, 1]], None)  # a window op: forked
    assert type(pooled) is NewObject and torch.equal(w.objects[pooled.id], F.avg_pool2d(x, 40, 1))
    values, indices = w.run(A.max_pool2d_with_indices.default, [Ref(ids["x"]), [40, 40], [1, 1]], None)
    ev, ei = F.max_pool2d(x, 40, 1, return_indices=True)
    assert torch.equal(w.objects[values.id], ev) and torch.equal(w.objects[indices.id], ei)
    assert w.objects[indices.id].dtype == torch.int64
    product = w.run(A.mm.default, [Ref(ids["a"]), Ref(ids["b"])], None)
    assert torch.allclose(w.objects[product.id], a @ b)
    assert w.objects[product.id].stride() == (a @ b).stride()
    same = w.run(A.addmm_.default, [Ref(ids["target"]), Ref(ids["a"]), Ref(ids["b"])], None)
    assert type(same) is SameAsArg and same.index == 0 and w.objects[ids["target"]] is target  # written in place, the same tensor
    assert torch.allclose(target, expected_addmm)


def test_random_draws_in_a_fork_advance_the_generators_as_inline_draws_do():
    gen = torch.Generator().manual_seed(7)
    torch.manual_seed(3)
    drawn = run_forked(A.randn.generator, [[1000]], {"generator": gen}, 60.0, (gen,))
    then = torch.randn(3)  # the default generator: untouched by a draw from gen, in both
    torch.manual_seed(3)
    reference = torch.Generator().manual_seed(7)
    assert torch.equal(drawn, torch.randn(1000, generator=reference))
    assert torch.equal(torch.randn(5, generator=gen), torch.randn(5, generator=reference))
    assert torch.equal(then, torch.randn(3))
    torch.manual_seed(11)
    drawn = run_forked(A.rand.default, [[10]], None, 60.0)
    after = torch.rand(2)
    torch.manual_seed(11)
    assert torch.equal(drawn, torch.rand(10)) and torch.equal(after, torch.rand(2))


def test_arguments_an_op_writes_without_returning_them_are_written_back():
    x, mean, var = torch.rand(4, 3, 5) * 3, torch.zeros(3), torch.ones(3)
    em, ev = mean.clone(), var.clone()
    op = A._native_batch_norm_legit.default  # running_mean and running_var are Tensor(a!) and Tensor(b!)
    out, save_mean, save_invstd = run_forked(op, [x, None, None, mean, var, True, 0.1, 1e-5], None, 60.0)
    ref = op(x, None, None, em, ev, True, 0.1, 1e-5)
    assert torch.allclose(out, ref[0]) and torch.allclose(save_invstd, ref[2])
    assert torch.allclose(mean, em) and torch.allclose(var, ev) and not torch.equal(mean, torch.zeros(3))


def test_the_ops_own_error_in_the_fork_comes_back_as_the_ops_error():
    with pytest.raises(ChildError, match="cannot be multiplied") as info:
        run_forked(A.mm.default, [torch.ones(2, 3), torch.ones(4, 5)], None, 60.0)
    assert info.value.kind == "RuntimeError"


def test_a_core_reports_the_forked_ops_error_as_a_remote_error():
    w = core(60.0)
    i = w.store(torch.rand(1, 1, 600, 600))
    with pytest.raises(RemoteError, match="RuntimeError: divisor must be not zero") as info:  # torch's own check
        w.run(A.avg_pool2d.default, [Ref(i), [100, 100], [1, 1], [0, 0], False, True, 0], None)
    assert info.value.remote_type == "RuntimeError" and list(w.objects) == [i]


def test_ops_recording_autograd_history_and_chain_layers_run_inline():
    from syft_lab.workers.forked import forkable
    plain, leaf = torch.rand(3), torch.rand(3, requires_grad=True)
    assert forkable(A.mm.default, [plain, plain], None)
    assert not forkable(A.mm.default, [leaf, plain], None)
    with torch.no_grad():
        assert forkable(A.mm.default, [leaf, plain], None)
    assert not forkable(A.mm.default, [sy.LoggingTensor(plain), plain], None)
    # native_batch_norm writes its running statistics without saying so in its schema
    assert not forkable(A.native_batch_norm.default, [plain, None, None, plain, plain, True, 0.1, 1e-5], None)


def test_the_time_budget_is_a_positive_number_of_seconds_or_none():
    assert Limits(max_bytes=2**20, max_op_seconds=None).max_op_seconds is None
    for bad in (0, -1, float("inf"), "10"):
        with pytest.raises(ValueError, match="max_op_seconds"):
            Limits(max_bytes=2**20, max_op_seconds=bad)
