"""Composite aten overloads called by name on pointers run on the worker whole (issue 37; the
property fuzzer's cases: tensors/whole_ops.py), and in-place internals keep their result type.

Before: autograd's key ran the op's CompositeImplicitAutograd decomposition in the client, on the
pointer's meta placeholder: mish_backward gave float64 where plain torch gives float32,
_pad_packed_sequence raised on the placeholder's device, _saturate_weight_to_fp16 read the
placeholder's missing data, and hostile enum codes reached torch in the client unchecked.
"""
import pytest
import torch

import syft_lab as sy
from syft_lab.errors import SyftError
from syft_lab.wire.allowlist import OpNotAllowedError, check_call

from .test_hostile_args import in_child

aten = torch.ops.aten


@pytest.fixture
def worker():
    w = sy.VirtualWorker("composites-whole")
    yield w
    w.close()


def test_a_composite_plain_torch_runs_on_its_cpu_kernel_is_refused_not_computed_otherwise(worker):
    grad, x = torch.randn(5, 1, dtype=torch.float64), torch.tensor(0.5)
    assert aten.mish_backward.default(grad, x).dtype == torch.float32  # plain torch's CPU kernel
    with pytest.raises(OpNotAllowedError, match="mish_backward"):  # before: a float64 pointer
        aten.mish_backward.default(worker.send(grad), worker.send(x))


def test_a_composite_that_reads_its_input_is_the_workers_clear_refusal(worker):
    with pytest.raises(SyftError, match="_saturate_weight_to_fp16"):  # before: "data is not allocated"
        aten._saturate_weight_to_fp16.default(worker.send(torch.randn(2, 3)))


def test_a_composite_that_needs_its_inputs_on_the_cpu_runs_on_the_worker_and_equals_plain_torch(worker):
    data, lengths = torch.arange(5.0), torch.tensor([3, 1, 1])
    want, want_lengths = aten._pad_packed_sequence.default(data, lengths, True, 1.0, 6)
    got, got_lengths = aten._pad_packed_sequence.default(worker.send(data), worker.send(lengths), True, 1.0, 6)
    assert type(got) is sy.PointerTensor and type(got_lengths) is sy.PointerTensor
    assert torch.equal(got.get(), want) and torch.equal(got_lengths.get(), want_lengths)


def test_a_composite_still_decomposes_where_autograd_records_it(worker):
    a = torch.randn(2, 3)
    b = worker.send(torch.randn(3, 2)).requires_grad_()
    out = aten.matmul.default(worker.send(a), b)
    assert out.grad_fn is not None  # the decomposition's ops, recorded: backward reaches b
    out.sum().backward()
    assert torch.allclose(b.grad.get(), a.sum(0, keepdim=True).t().expand(3, 2))
    plain = aten.matmul.default(worker.send(a), worker.send(torch.ones(3, 2)))
    assert plain.grad_fn is None and torch.allclose(plain.get(), a @ torch.ones(3, 2))


def _bn_backward_with_impl_index(impl_index, requires_grad):
    w = sy.VirtualWorker("composites-bn")
    try:
        x, g = w.send(torch.randn(2, 3, 4)), w.send(torch.randn(2, 3, 4))
        stats = [w.send(torch.ones(3)) for _ in range(5)]
        if requires_grad:
            x.requires_grad_()
        try:
            aten._batch_norm_impl_index_backward.default(impl_index, x, g, *stats, True, 1e-5, [True, True, True],
                                                         w.send(torch.zeros(0)))
        except SyftError as e:
            return f"{type(e).__name__}: {e}"
        except Exception as e:
            return f"torch's own {type(e).__name__}: {str(e)[:200]}"
        return "ran"
    finally:
        w.close()


@pytest.mark.parametrize("requires_grad", [False, True])
def test_a_hostile_enum_code_is_refused_in_the_client_before_a_decomposition_sees_it(requires_grad):
    outcome = in_child(lambda: _bn_backward_with_impl_index(-3, requires_grad))  # (a crash ends the child only)
    assert outcome.startswith("OpNotAllowedError") and "impl_index=-3" in outcome, outcome


def test_an_in_place_internal_refuses_an_operand_that_widens_its_result_type():
    self_, wider = torch.tensor([1.0, -2.0]), torch.tensor([0.5, 0.5], dtype=torch.float64)
    assert aten._add_relu_.Tensor(self_.clone(), wider).dtype == torch.float64  # plain torch: not self
    with pytest.raises(OpNotAllowedError, match="promotes torch.float32 to torch.float64"):
        check_call(aten._add_relu_.Tensor, [self_, wider], {})
    check_call(aten._add_relu_.Tensor, [self_, torch.tensor([1, 2])], {})  # an int other: float32 still
    check_call(aten._add_relu_.Scalar, [self_, 2.5], {})


def test_an_in_place_internal_through_a_pointer_is_refused_where_plain_torch_returns_another_tensor(worker):
    p = worker.send(torch.tensor([1.0, -2.0]))
    with pytest.raises(OpNotAllowedError):  # before: p itself, float32, where plain torch gives float64
        aten._add_relu_.Tensor(p, worker.send(torch.tensor([0.5, 0.5], dtype=torch.float64)))
    same = aten._add_relu_.Tensor(p, worker.send(torch.tensor([0.5, 0.5])))
    assert same is p and torch.equal(p.get(), torch.tensor([1.5, 0.0]))


def test_a_mutating_composite_stays_the_dispatchers_so_autograd_sees_a_saved_tensor_change(worker):
    w, x = worker.send(torch.ones(3)).requires_grad_(), worker.send(torch.randn(3))
    y = (w * x).sum()  # x saved for backward
    aten.absolute_.default(x)  # an in-place composite: decomposed, its abs_ bumps x's version
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()
