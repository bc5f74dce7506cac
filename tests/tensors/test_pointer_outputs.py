"""Issue 37 item 5: what an op through a pointer gives back.

- Every tensor an op on a pointer returns is a pointer: a worker's reply that carries tensors
  (``torch.frexp``'s named tuple of the worker's mantissa and exponent, on an in-process
  worker's lean path) is refused, never handed back as local tensors.
- A value computed through a pointer equals plain torch's where it depends on a tensor's lazy
  bits: an in-process worker runs its op inside the pointer's ``__torch_dispatch__``, where torch
  had excluded the Conjugate and Negative keys whose fallbacks materialise ``conj()`` and
  ``_neg_view`` before a kernel that does not read them (``torch.fft.hfftn``, by up to 15.6).
"""
import pytest
import torch

from syft_lab.commands import NewObject
from syft_lab.errors import SyftError
from syft_lab.tensors.pointer import PointerTensor, wrap_result

aten = torch.ops.aten


def _no_local_tensor(result):
    """Every tensor in ``result`` (a tensor or a sequence of them) is a pointer."""
    items = result if isinstance(result, tuple) else (result,)
    return [type(t).__name__ for t in items if isinstance(t, torch.Tensor) and not isinstance(t, PointerTensor)]


@pytest.mark.parametrize("shape", [(), (0,), (3,), (2, 0, 3)], ids=["0-dim", "empty", "1-d", "empty-3d"])
def test_a_multi_output_op_never_hands_back_the_workers_tensors(bob, shape):
    """frexp twice (the second call takes the worker's lean path with torch's own binding, whose
    result is a torch.return_types named tuple), as a function and as a method: each output is a
    pointer equal to plain torch's, or the op is refused with a SyftError; never a local tensor."""
    x = torch.randn(shape)
    p = x.send(bob)
    outcomes = []
    for call in (torch.frexp, torch.frexp, torch.Tensor.frexp, torch.Tensor.frexp):
        try:
            result = call(p)
        except SyftError as e:
            outcomes.append(str(e))
            continue
        assert _no_local_tensor(result) == [], f"{call.__name__}{shape}: a value left the worker without .get()"
        for got, want in zip(result, torch.frexp(x)):
            torch.testing.assert_close(got.get(), want)
        outcomes.append("pointers")
    assert all(o == "pointers" or "never leave the worker" in o for o in outcomes), outcomes


def test_a_reply_holding_tensors_is_refused_not_returned(bob):
    """The client's side of the rule, for any reply path: a named tuple or a list of plain tensors
    where stored results belong becomes a clear SyftError; results the worker stored become
    pointers, Python values pass through."""
    worker_values = torch.frexp(torch.randn(3))
    for reply in (worker_values, torch.ones(2), [torch.ones(2)], (NewObject(1, (2,), torch.float32), torch.ones(2))):
        with pytest.raises(SyftError, match="never leave the worker without .get"):
            wrap_result(PointerTensor, reply, bob)
    assert wrap_result(PointerTensor, [3, 4], bob) == [3, 4]
    assert wrap_result(PointerTensor, 2.5, bob) == 2.5


@pytest.mark.parametrize("norm", [None, "ortho", "forward"])
def test_hfftn_of_a_3d_float64_pointer_equals_plain_torch(bob, norm):
    x = torch.randn(5, 6, 7, dtype=torch.float64)
    torch.testing.assert_close(torch.fft.hfftn(x.send(bob), norm=norm).get(), torch.fft.hfftn(x, norm=norm))


def test_kernels_on_the_workers_conjugate_and_negative_views_see_their_values(bob):
    """The lazy bits a worker's tensor carries (``_conj``, ``_neg_view`` made there) are
    materialised before kernels that read raw memory, as in plain torch."""
    z = torch.randn(4, 6, dtype=torch.complex128).t()  # non-contiguous, as fft's own intermediates
    pz = z.send(bob)
    for make in (lambda t: aten._fft_c2r.default(aten._conj.default(t), [1], 1, 6),
                 lambda t: aten.mm.default(aten._conj.default(t), aten._conj.default(t).t()),
                 lambda t: aten.mm.default(aten._neg_view.default(t), t.t()),
                 lambda t: aten.cumsum.default(aten._neg_view.default(aten._conj.default(t)), 0)):
        torch.testing.assert_close(make(pz).get(), make(z))


@pytest.mark.parametrize("shape, n", [((0,), None), ((3,), 0), ((0,), 0)])
def test_a_composite_that_makes_its_empty_output_itself_gives_a_pointer(bob, shape, n):
    """``vander`` makes its output with ``at::empty(..., x.options())``: through a pointer that
    was a plain tensor on the placeholder meta device, handed to the user. An empty one becomes
    a pointer to an empty tensor on the worker (twice: the second call takes the learned path)."""
    x = torch.randn(shape)
    p = x.send(bob)
    for _ in range(2):
        got = torch.vander(p) if n is None else torch.vander(p, n)
        assert type(got) is PointerTensor and got.location is bob
        torch.testing.assert_close(got.get(), torch.vander(x) if n is None else torch.vander(x, n))


def test_a_composite_that_fills_its_own_output_is_refused_clearly(bob):
    p = torch.randn(3).send(bob)
    with pytest.raises(SyftError):
        torch.vander(p, 2)


def test_autocasts_decide_by_the_workers_device_not_the_placeholder(bob):
    """``_autocast_to_reduced_precision`` casts a CPU tensor when ``cpu_enabled``: through a pointer
    its composite read the placeholder meta device and returned the input uncast (float32 where
    plain torch gives int32). It runs on the worker whole."""
    x = torch.randn(3)
    p = x.send(bob)
    for call in (lambda t: aten._autocast_to_reduced_precision.default(t, False, True, torch.float64, torch.int32),
                 lambda t: t._autocast_to_reduced_precision(False, True, torch.float64, torch.bfloat16),
                 lambda t: aten._autocast_to_full_precision.default(t.to(torch.bfloat16), False, True)):
        got, want = call(p), call(x)
        assert type(got) is PointerTensor and got.dtype == want.dtype
        torch.testing.assert_close(got.get(), want)


def test_a_list_of_outputs_made_here_empty_gives_pointers(bob):
    """``unflatten_dense_tensors`` of empty tensors returned a list of local meta tensors (found by
    the property fuzzer): each becomes a pointer to an empty tensor on the worker."""
    flat, parts = torch.zeros(5, 0), [torch.zeros(5, 0), torch.zeros(0)]
    got = aten.unflatten_dense_tensors.default(flat.send(bob), [t.send(bob) for t in parts])
    want = aten.unflatten_dense_tensors.default(flat, parts)
    assert [type(g) for g in got] == [PointerTensor] * len(want)
    for g, w in zip(got, want):
        torch.testing.assert_close(g.get(), w)
