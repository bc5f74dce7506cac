"""The op policy's class checks: shape inference first, work bounds before running, and the doc
generated from the code. Every refusal happens before the op runs (checked by what the worker
still holds and by the refusal's speed being irrelevant: nothing large is ever made)."""
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

import syft_lab as sy
from syft_lab.commands import Ref
from syft_lab.errors import QuotaExceededError, RemoteError
from syft_lab.wire import allowlist, op_cost, policy_doc
from syft_lab.wire.allowlist import OpNotAllowedError, check_call
from syft_lab.workers.core import WorkerCore

aten = torch.ops.aten


@pytest.fixture
def core():
    return WorkerCore("policy")


def stored(core, t):
    return Ref(core.store(t))


# --- work bounds (issue 29, item 4) -----------------------------------------------------------

def test_a_huge_pooling_window_over_a_broadcast_input_is_refused_before_it_runs(core):
    """avg_pool2d(ones(1,1,1,1).expand(1,1,1024,1024), 256, 1) took 41 s: (n-k+1)^2 k^2 work."""
    one = stored(core, torch.ones(1, 1, 1, 1))
    view = core.run(aten.expand.default, [one, [1, 1, 1024, 1024]], None)
    with pytest.raises(QuotaExceededError, match="window.*nothing ran"):
        core.run(aten.avg_pool2d.default, [Ref(view.id), [256, 256], [1, 1]], None)
    small = core.run(aten.avg_pool2d.default, [Ref(view.id), [2, 2], [2, 2]], None)  # the same input, a small window
    assert torch.equal(core.objects[small.id], torch.ones(1, 1, 512, 512))


def test_an_in_place_write_into_a_huge_overlapping_view_is_refused(core):
    """index_put_(as_strided(zeros(1), [1, 2**34], [0, 0]), [tensor([0])], tensor(5.)) took 10.8 s."""
    z = stored(core, torch.zeros(1))
    view = core.run(aten.as_strided.default, [z, [1, 2**34], [0, 0]], None)
    with pytest.raises(QuotaExceededError, match="aten.index_put_.default.*nothing ran"):
        core.run(aten.index_put_.default, [Ref(view.id), [stored(core, torch.tensor([0]))], stored(core, torch.tensor(5.))],
                 None)
    assert torch.equal(core.objects[z.id], torch.zeros(1))  # nothing was written


@pytest.mark.parametrize("what, call", [
    ("matmul of 4096 x 4096 broadcasts", lambda o: torch.mm(o.expand(4096, 4096), o.expand(4096, 4096))),
    ("cdist of 2**15 x 2**15 points in 16 dims", lambda o: torch.cdist(o.expand(2**15, 16), o.expand(2**15, 16))),
    ("conv2d with a 64 x 33 x 33 kernel over 160 x 160", lambda o: F.conv2d(o.expand(1, 64, 160, 160),
                                                                          o.expand(64, 64, 33, 33))),
    ("a polynomial of degree 2**40", lambda o: torch.special.laguerre_polynomial_l(o.expand(4), 2**40)),
    ("a sort over 2**33 broadcast elements", lambda o: torch.sort(o.expand(2**33))),
    ("a pointwise op over 2**34 broadcast elements", lambda o: o.expand(2**34) + 1),
    ("unfold with 512 x 512 windows", lambda o: F.unfold(o.expand(1, 1, 1024, 1024), 512)),
])
def test_super_linear_ops_are_refused_through_a_pointer_and_the_worker_serves_on(what, call):
    bob = sy.VirtualWorker("policy_bob")
    one = torch.ones(1).send(bob)
    with pytest.raises(QuotaExceededError, match="nothing ran"):
        call(one)
    assert torch.equal((one * 3).get(), torch.tensor([3.]))


def test_ordinary_work_stays_allowed():
    bob = sy.VirtualWorker("policy_ok")
    x = torch.randn(64, 3, 32, 32)
    w = torch.randn(16, 3, 3, 3)
    got = F.conv2d(x.send(bob), w.send(bob), padding=1).get()
    assert torch.allclose(got, F.conv2d(x, w, padding=1), atol=1e-5)
    a, b = torch.randn(512, 512), torch.randn(512, 512)
    assert torch.allclose((a.send(bob) @ b.send(bob)).get(), a @ b, atol=1e-3)
    assert torch.equal(torch.sort(torch.arange(10.).flip(0).send(bob)).values.get(), torch.arange(10.))


def test_the_work_bound_is_read_at_each_call(core, monkeypatch):
    a = stored(core, torch.ones(64, 64))
    core.run(aten.mm.default, [a, a], None)
    monkeypatch.setattr(op_cost, "MAX_OP_WORK", 64 * 64 * 63)
    with pytest.raises(QuotaExceededError, match="contraction"):
        core.run(aten.mm.default, [a, a], None)


# --- shape inference and checks by argument type -----------------------------------------------

def test_shape_inference_refuses_bad_arguments_before_a_kernel_with_separate_checks(core):
    """_fft_r2c's CPU kernel does not share its meta function: its meta run refuses first."""
    x = stored(core, torch.ones(4))
    with pytest.raises(OpNotAllowedError, match="refused before it ran, by shape inference"):
        core.run(aten._fft_r2c.default, [x, [3], 0, True], None)
    out = core.run(aten._fft_r2c.default, [x, [0], 0, True], None)
    assert torch.allclose(core.objects[out.id], torch.fft.rfft(torch.ones(4)))


def test_an_error_a_structured_kernel_checks_itself_is_the_ops_own(core):
    a = stored(core, torch.ones(2, 3))
    with pytest.raises(RemoteError) as info:
        core.run(aten.mm.default, [a, a], None)
    assert info.value.remote_type == "RuntimeError" and "cannot be multiplied" in info.value.remote_message


def test_arguments_are_checked_by_their_schema_type(core):
    x = stored(core, torch.ones(3))
    with pytest.raises(OpNotAllowedError, match="CPU only"):
        core.run(aten.ones.default, [[2]], {"device": torch.device("meta")})
    with pytest.raises(OpNotAllowedError, match="not one a worker holds"):
        core.run(aten._to_copy.default, [x], {"dtype": torch.qint8})
    with pytest.raises(OpNotAllowedError, match="unsafe=True"):
        core.run(aten._index_put_impl_.default, [x, [stored(core, torch.tensor([0]))], stored(core, torch.tensor(1.)),
                                                 False, True], None)
    assert len(core.objects) == 3 and torch.equal(core.objects[x.id], torch.ones(3))


def test_every_view_with_sizes_and_strides_stays_in_its_storage(core):
    x = stored(core, torch.arange(16.))
    for op, args in [(aten.as_strided_copy.default, [[17], [1]]), (aten.as_strided_.default, [[4], [6]]),
                     (aten.as_strided_scatter.default, None), (aten._reshape_alias_copy.default, [[32], [1]])]:
        if op is aten.as_strided_scatter.default:
            args = [x, stored(core, torch.ones(20)), [20], [1]]
            with pytest.raises(OpNotAllowedError, match="outside"):
                core.run(op, args, None)
            continue
        with pytest.raises(OpNotAllowedError, match="outside"):
            core.run(op, [x, *args], None)
    assert torch.equal(core.objects[x.id], torch.arange(16.))


def test_pool_backward_indices_are_checked_in_every_family():
    grad, x = torch.ones(1, 1, 2, 2), torch.ones(1, 1, 4, 4)
    bad = torch.full((1, 1, 2, 2), 10**6)
    with pytest.raises(OpNotAllowedError, match="outside the input plane"):
        check_call(aten.fractional_max_pool2d_backward.default, [grad, x, [2, 2], [2, 2], bad], None)
    with pytest.raises(OpNotAllowedError, match="int64"):
        check_call(aten.adaptive_max_pool2d_backward.default, [grad, x, bad.float()], None)


def test_issue_22s_families_run_through_a_pointer():
    bob = sy.VirtualWorker("policy_families")
    x = torch.randn(2, 3, 8)
    for fn in (lambda t: F.pad(t, (2, 2), mode="reflect"), lambda t: F.celu(t), lambda t: F.hardshrink(t),
               lambda t: torch.fft.rfft(t), lambda t: torch.special.i0e(t), lambda t: torch.histc(t, 5)):
        assert torch.allclose(fn(x.send(bob)).get(), fn(x), atol=1e-5)


# --- the doc is generated from the code --------------------------------------------------------

def test_the_docs_tables_match_the_code():
    text = policy_doc.DOC.read_text()
    assert policy_doc.START in text and policy_doc.END in text
    assert policy_doc.rewrite(text) == text, "run: python -m syft_lab.wire.policy_doc"
    assert f"**{len(allowlist.ALLOWED)} overloads" in text


def test_the_doc_generator_runs_as_a_command():
    proc = subprocess.run([sys.executable, "-m", "syft_lab.wire.policy_doc", "--check"], capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_kernels_the_fuzzer_crashed_are_checked_or_denied():
    f = torch.ones(3)
    with pytest.raises(OpNotAllowedError, match="one length"):  # heap corruption with mismatched lists
        check_call(aten._foreach_copy.default, [[], [f, f]], None)
    x1, x2 = torch.randn(3, 4), torch.randn(5, 4)
    with pytest.raises(OpNotAllowedError, match=r"shape \[3, 5\]"):  # free(): invalid size
        check_call(aten._cdist_backward.default, [torch.empty(0), x1, x2, 0.5, torch.randn(3, 5)], None)
    d = torch.cdist(x1, x2)
    check_call(aten._cdist_backward.default, [torch.ones_like(d), x1, x2, 2.0, d], None)
    for name in allowlist.FUZZ_CRASHES:
        with pytest.raises(OpNotAllowedError, match="crashed the fuzzer"):
            allowlist.resolve(name)


def test_the_long_fuzz_runs_crashes_are_refused_and_their_ordinary_calls_pass():
    """benchmarks/fuzz_ops.py's long run (96 cases per overload) killed a worker with each of these;
    the calls training makes of the same kernels still pass."""
    f34, f3, f2345, empty = torch.randn(3, 4), torch.randn(3), torch.randn(2, 3, 4, 5), torch.empty(0)
    sgd = dict(weight_decay=0.5, momentum=0.5, lr=0.5, dampening=0.5, nesterov=False, maximize=False,
               is_first_step=False)
    refused = [
        (aten._slow_conv2d_backward.output_mask, [f2345, f3, f3, [2], [], [2], [True, True, True]], None,
         "stride must hold 1 or 2 integers, got 0"),
        (aten._slow_conv2d_backward.output_mask, [f2345, f3, f3, [2], [2], [], [True, True, True]], None,
         "padding must hold 1 or 2 integers, got 0"),
        (aten.reflection_pad1d_backward.default, [f34, f34, []], None, "padding must hold 1 or 2 integers"),
        (aten._transform_bias_rescale_qkv.default, [f2345, f3, 0], None, r"qkv must be \[B, T, 3\*D\]"),
        (aten._weight_norm_interface_backward.default, [empty, f34, f34, f34, 1], None, "grad_w must have"),
        (aten._weight_norm_interface_backward.default, [f34, f34, empty, f34, 1], None, "saved_g and saved_norms"),
        (aten._fused_sgd.default, [[torch.randn(1, 3, 8, 8)] * 2, [f34, f34], [f34, f34]], sgd,
         r"position 0 of its lists must have one shape, got \[1, 3, 8, 8\], \[3, 4\]"),
        (aten._fused_sgd.default, [[f34], [f34], [f34]], dict(sgd, grad_scale=f2345, found_inf=f3),
         "grad_scale must hold one element"),
    ]
    for op, args, kwargs, match in refused:
        with pytest.raises(OpNotAllowedError, match=match):
            check_call(op, args, kwargs)
    # what autograd and torch.optim pass the same kernels
    x = torch.randn(1, 2, 6)
    check_call(aten.reflection_pad1d_backward.default, [torch.randn(1, 2, 8), x, [1, 1]], None)
    v, g = torch.randn(4, 3), torch.randn(4, 1)
    norms = v.norm(dim=1, keepdim=True)
    check_call(aten._weight_norm_interface_backward.default, [torch.randn(4, 3), v, g, norms, 0], None)
    check_call(aten._transform_bias_rescale_qkv.default, [torch.randn(2, 5, 12), torch.randn(12), 2], None)
    params, grads = [f34, torch.randn(5)], [torch.randn(3, 4), torch.randn(5)]
    check_call(aten._fused_adam_.default, [params, grads, [torch.zeros(3, 4), torch.zeros(5)],
                                           [torch.zeros(3, 4), torch.zeros(5)], [], [torch.tensor(1.0)] * 2],
               dict(lr=0.1, beta1=0.9, beta2=0.99, weight_decay=0.0, eps=1e-8, amsgrad=False, maximize=False))


def test_weight_norm_interface_takes_contiguous_v_and_g_only():
    """The seed-45 fuzz: its CPU kernel reads v and g as contiguous memory, and a stepped or
    overlapping v gave wrong norms with another allocation's bytes in them. torch._weight_norm,
    the public op nn.utils.weight_norm uses, makes them contiguous first: it still runs."""
    stepped, g = torch.randn(10, 1, 5, 5)[::2], torch.randn(5, 1, 1, 1)
    for args, key in (([stepped, g], "v"), ([stepped.contiguous(), torch.randn(10, 1, 1, 1)[::2]], "g"),
                      ([torch.randn(13).as_strided([5, 1, 5, 5], [1, 1, 1, 1])] * 2, "v")):
        with pytest.raises(OpNotAllowedError, match=f"{key} must be contiguous"):
            check_call(aten._weight_norm_interface.default, args, None)
    check_call(aten._weight_norm_interface.default, [stepped.contiguous(), g], None)
    bob = sy.VirtualWorker("wn_bob")
    try:
        p = stepped.send(bob)
        w = torch._weight_norm(p, g.send(bob), 0).get()
        assert torch.allclose(w, torch._weight_norm(stepped, g, 0))
    finally:
        bob.close()


def test_cummin_and_cummax_helpers_take_outputs_as_their_public_op_makes_them():
    """The seed-45 fuzz: _cummin_helper with dim -3 wrote outside its outputs and glibc aborted on
    the corrupted heap (the public cummin wraps its dim before it calls the helper); seed 46:
    _cummax_helper with indices of another shape killed the worker the same way."""
    x = torch.randn(3, 4, 5)
    values, indices = torch.empty_like(x), torch.empty_like(x, dtype=torch.long)
    for op in (aten._cummin_helper.default, aten._cummax_helper.default):
        for dim in (-1, -3, 3):
            with pytest.raises(OpNotAllowedError, match=r"dim must be in \[0, 3\)"):
                check_call(op, [x, values, indices, dim], None)
        for bad in ([x, values, torch.empty(3, 4, dtype=torch.long), 0],  # seed 46: indices of another shape
                    [x, values, indices.int(), 0], [x, values.double(), indices, 0]):
            with pytest.raises(OpNotAllowedError, match="values and indices must have self's shape"):
                check_call(op, bad, None)
        check_call(op, [x, values, indices, 1], None)
    bob = sy.VirtualWorker("cm_bob")
    try:
        got = torch.cummin(x.send(bob), -1)
        assert torch.equal(got.values.get(), torch.cummin(x, -1).values)
    finally:
        bob.close()


def test_an_argument_a_kernel_writes_besides_self_has_a_place_per_element():
    """The seed-47 fuzz: rrelu_with_noise wrote its noise, an overlapping view (9 stored elements
    for 25), as if each element had a place of its own, past its storage; glibc aborted. Every
    argument a kernel writes besides self and out= gets the rule; a transposed one is fine."""
    x = torch.randn(5, 5)
    overlapping = torch.randn(9).as_strided([5, 5], [1, 1])
    for noise in (overlapping, torch.ones(1).expand(5, 5)):
        for op in (aten.rrelu_with_noise.default, aten.rrelu_with_noise_.default):
            with pytest.raises(OpNotAllowedError, match="noise is written by the kernel"):
                check_call(op, [x, noise, 0.1, 0.3, True], None)
    values, indices = torch.randn(9).as_strided([5, 5], [1, 1]), torch.zeros(5, 5, dtype=torch.long)
    with pytest.raises(OpNotAllowedError, match="values is written by the kernel"):
        check_call(aten._cummax_helper.default, [x, values, indices, 0], None)
    check_call(aten.rrelu_with_noise.default, [x, torch.empty(5, 5).t(), 0.1, 0.3, True], None)
    bob = sy.VirtualWorker("rrelu_bob")
    try:
        torch.manual_seed(0)
        got = F.rrelu(x.send(bob), training=True).get()
        assert got.shape == x.shape and torch.equal(got[x >= 0], x[x >= 0])
    finally:
        bob.close()
