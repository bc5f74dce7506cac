"""Runtime defects of pointers found by PyTorch's own databases (issue 22, items 3-5), each on
VirtualWorkers: what a pointer says about its remote tensor (strides), helper tensors made
inside composite ops, modules, gradients and copies. The same flows on worker processes:
tests/network/test_pointer_defects_remote.py."""
import copy
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



@pytest.mark.parametrize("layer", ["encoder_layer", "encoder", "decoder_layer", "transformer"])
def test_transformer_layers_through_pointers_equal_plain_torch(bob, layer):
    torch.manual_seed(0)
    make = {"encoder_layer": lambda: nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0),
            "encoder": lambda: nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, 0.0), 2,
                                                     enable_nested_tensor=False),
            "decoder_layer": lambda: nn.TransformerDecoderLayer(8, 2, dim_feedforward=16, dropout=0.0),
            "transformer": lambda: nn.Transformer(8, 2, 1, 1, 16, 0.0)}[layer]
    model = make()
    src, tgt = torch.randn(5, 3, 8), torch.randn(4, 3, 8)
    inputs = (src,) if layer.startswith("encoder") else (tgt, src)
    expected = model(*inputs)
    expected.sum().backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    model.send(bob)
    out = model(*[t.send(bob) for t in inputs])
    out.sum().backward()
    torch.testing.assert_close(out.get(), expected.detach(), rtol=1e-4, atol=1e-5)
    model.get()
    for p, g in zip(model.parameters(), grads):
        torch.testing.assert_close(p.grad, g, rtol=1e-4, atol=1e-5)
    del out
    gc.collect()


def test_an_in_place_op_that_changes_the_shape_updates_the_pointer(bob):
    x = torch.arange(6.).reshape(2, 3)
    p = x.send(bob)
    q = p.t_()
    assert q is p and p.shape == (3, 2) and p.stride() == (1, 3)
    torch.testing.assert_close(p.reshape(-1).get(), x.t().reshape(-1))

# --- 2. no meta tensor reaches a worker; helpers a composite op makes are made for it -----------

def test_composite_ops_that_make_helper_tensors_equal_plain_torch(bob):
    torch.manual_seed(0)
    x, y = torch.randn(3, 5), torch.randn(3, 5)
    v = torch.tensor([1., 2., 3., 4.])
    m = torch.randn(3, 3)
    cases = [(torch.cov, (x,)), (torch.corrcoef, (x,)), (torch.nn.functional.cosine_similarity, (x, y)),
             (torch.combinations, (v,)), (lambda t: torch.combinations(t, 3, with_replacement=True), (v,)),
             (lambda t: torch.linalg.matrix_power(t, 0), (m,)), (lambda t: torch.linalg.matrix_power(t, 3), (m,))]
    for fn, args in cases:
        torch.testing.assert_close(fn(*[a.send(bob) for a in args]).get(), fn(*args), rtol=1e-4, atol=1e-5)


def test_a_meta_tensor_never_reaches_a_worker(bob):
    p = torch.ones(3).send(bob)
    before = set(bob.objects)
    for meta in (torch.zeros(3, device="meta"), torch.tensor(2., device="meta")):
        with pytest.raises(sy.SyftError, match="meta device.*no data"):
            p * meta
    assert set(bob.objects) == before


def test_a_local_tensor_with_user_data_is_still_refused_inside_a_composite_op(bob):
    x = torch.randn(3, 5)
    with pytest.raises(sy.SyftError, match="mixes data on this process"):
        torch.cov(x.send(bob), fweights=torch.tensor([1, 2, 1, 1, 1]))
    with pytest.raises(sy.SyftError, match="mixes data on this process"):
        x.send(bob)[torch.tensor([0, 2])]


def test_indexing_with_lists_through_a_pointer(bob):
    x = torch.arange(12.).reshape(3, 4)
    p = x.send(bob)
    for index in ([0, 2], (slice(None), [1, 3]), [True, False, True], ([0, 1], [2, 3])):
        torch.testing.assert_close(p[index].get(), x[index])


def test_an_rnn_on_pointers_makes_its_zero_state_on_the_worker(bob):
    torch.manual_seed(0)
    for make in (lambda: nn.LSTM(3, 4, num_layers=2), lambda: nn.GRU(3, 4), lambda: nn.RNN(3, 4, bidirectional=True)):
        model = make()
        x = torch.randn(5, 2, 3)
        out, _ = model(x)
        out.sum().backward()
        grads = [p.grad.clone() for p in model.parameters()]
        model.zero_grad()
        model.send(bob)
        remote_out, state = model(x.send(bob))
        remote_out.sum().backward()
        torch.testing.assert_close(remote_out.get(), out.detach(), rtol=1e-4, atol=1e-5)
        model.get()
        for p, g in zip(model.parameters(), grads):
            torch.testing.assert_close(p.grad, g, rtol=1e-4, atol=1e-5)
        del remote_out, state
        gc.collect()


# --- 3. modules -------------------------------------------------------------------------------

def test_recurrent_modules_send_move_copy_and_get(bob, alice):
    for make in (lambda: nn.LSTM(3, 3), lambda: nn.GRU(3, 3), lambda: nn.RNN(3, 3)):
        model = make()
        plain = [p.detach().clone() for p in model.parameters()]
        opt = torch.optim.SGD(model.parameters(), lr=0.1)  # built before the send: still works after
        model.send(bob)
        assert {p.location.id for p in model.parameters()} == {"bob"}
        twin = model.copy()
        model.move(alice)
        assert {p.location.id for p in model.parameters()} == {"alice"}
        opt.zero_grad()
        model(torch.ones(2, 1, 3).send(alice))[0].sum().backward()
        opt.step()
        model.get()
        assert all(not isinstance(p, sy.PointerTensor) for p in model.parameters())
        assert any(not torch.equal(p, q) for p, q in zip(model.parameters(), plain))  # the step ran
        for p, q in zip(twin.get().parameters(), plain):
            torch.testing.assert_close(p, q)
    gc.collect()


@pytest.mark.parametrize("kind", ["conv", "batchnorm"])
def test_get_of_a_module_while_a_forward_result_is_alive(bob, kind):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 2, 3)) if kind == "conv" else nn.Sequential(nn.BatchNorm1d(3))
    x = torch.randn(4, 1, 5, 5) if kind == "conv" else torch.randn(4, 3)
    expected = copy_of(model)(x)
    model.send(bob)
    y = model(x.send(bob))        # autograd saved the weight pointers for y's backward
    model.get()                   # copies the parameters here; y's graph keeps the remote ones
    assert all(type(p) is nn.Parameter for p in model.parameters())
    torch.testing.assert_close(model(x), expected)
    y.sum().backward()            # the old pointers still serve y's backward
    torch.testing.assert_close(y.get(), expected.detach())
    del y
    gc.collect()


def copy_of(model):
    return copy.deepcopy(model)


# --- 4. copy ----------------------------------------------------------------------------------

def test_copy_of_a_pointer_is_a_new_object_on_the_same_worker(bob):
    x = torch.tensor([1., 2., 3.], requires_grad=True)
    p = x.send(bob)
    c = p.copy()
    assert c.location is bob and c.id_at_location != p.id_at_location and c.requires_grad and c.is_leaf
    with torch.no_grad():
        c.mul_(10)
    torch.testing.assert_close(p.get(), x.detach())
    torch.testing.assert_close(c.get(), 10 * x.detach())
    h = (torch.tensor([1., 2.], requires_grad=True).send(bob) * 3)
    hc = h.copy()                 # a result with history: its copy stays in the graph
    hc.sum().backward()
    assert hc.grad_fn is not None
    del h, hc
    gc.collect()


def test_gaussian_nll_loss_checks_its_variance_on_the_worker(bob):
    torch.manual_seed(0)
    x, target, var = torch.randn(4, 3), torch.randn(4, 3), torch.rand(4, 3) + 0.1
    loss = nn.GaussianNLLLoss()
    torch.testing.assert_close(loss(x.send(bob), target.send(bob), var.send(bob)).get(), loss(x, target, var))
    with pytest.raises(ValueError, match="var has negative entry"):
        loss(x.send(bob), target.send(bob), (-var).send(bob))
    with pytest.raises(sy.SyftError, match=r"bool\(\) would bring a value"):
        bool((var.send(bob) < 0).any())  # anywhere else, a value still never leaves implicitly


def test_batch_norm_with_a_cumulative_average_through_pointers(bob):
    torch.manual_seed(0)
    model = nn.BatchNorm1d(3, momentum=None)  # averages by 1 / float(num_batches_tracked)
    twin = copy.deepcopy(model)
    xs = [torch.randn(4, 3) for _ in range(3)]
    expected = [twin(x) for x in xs]
    model.send(bob)
    for x, e in zip(xs, expected):
        torch.testing.assert_close(model(x.send(bob)).get(), e.detach())
    model.get()
    torch.testing.assert_close(model.running_mean, twin.running_mean)
    with pytest.raises(sy.SyftError, match=r"float\(\) would bring a value"):
        float(torch.tensor(3).send(bob))


def test_pinverse_and_matrix_rank_make_their_tolerances_for_the_op(bob):
    torch.manual_seed(0)
    a = torch.randn(4, 3)
    h = a @ a.t()
    torch.testing.assert_close(torch.pinverse(a.send(bob)).get(), torch.pinverse(a), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(torch.linalg.matrix_rank(h.send(bob), hermitian=True).get(),
                               torch.linalg.matrix_rank(h, hermitian=True))


@pytest.mark.parametrize("make", [lambda: nn.LazyConv2d(4, 3), lambda: nn.LazyLinear(5),
                                  lambda: nn.LazyConvTranspose1d(2, 3)], ids=["conv2d", "linear", "convT1d"])
def test_a_lazy_module_sends_its_parameters_at_its_first_forward(bob, make):
    torch.manual_seed(0)
    model = make()
    twin = copy.deepcopy(model)
    x = torch.randn(2, 3, 6, 6) if isinstance(model, nn.LazyConv2d) else torch.randn(2, 3, 6)
    torch.manual_seed(1)
    expected = twin(x)
    model.send(bob)
    torch.manual_seed(1)  # the initial values are drawn here, at the first forward, as plain torch does
    out = model(x.send(bob))
    assert all(isinstance(t, sy.PointerTensor) for t in model.parameters())
    torch.testing.assert_close(out.get(), expected.detach())
    torch.testing.assert_close(model.get().weight, twin.weight)


def test_a_lazy_module_fetched_before_its_first_forward_stays_here(bob):
    model = nn.LazyLinear(2).send(bob)
    model.get()
    out = model(torch.ones(1, 3))
    assert not isinstance(model.weight, sy.PointerTensor) and out.shape == (1, 2)


# --- helpers made inside torch's Python-level composites (PointerTensor.__torch_function__) ---

def _ops_run_on(worker):
    """The ops ``worker`` is asked to run, recorded while the returned list lives."""
    seen = []
    run = worker._run

    def recording(func, args, kwargs):
        seen.append(str(func))
        return run(func, args, kwargs)

    worker._run = recording
    return seen


def test_python_level_composites_make_their_random_helpers_on_the_worker(bob):
    F = torch.nn.functional
    x = torch.randn(2, 3, 8, 8)
    v = torch.randn(1, 2, 6, 6, 6)
    a = torch.randn(6, 4)
    cases = [(lambda t: F.fractional_max_pool2d(t, 2, output_size=(4, 4)), x),
             (lambda t: F.fractional_max_pool2d(t, 3, output_ratio=(0.5, 0.5), return_indices=True), x),
             (lambda t: F.fractional_max_pool3d(t, 2, output_size=3), v),
             (lambda t: torch.svd_lowrank(t, q=2), a), (lambda t: torch.pca_lowrank(t, q=2), a)]
    for fn, arg in cases:
        torch.manual_seed(3)
        expected = fn(arg)
        seen = _ops_run_on(bob)
        torch.manual_seed(3)  # a VirtualWorker draws from this process's generator, as plain torch does
        got = fn(arg.send(bob))
        del bob._run
        assert any(op in seen for op in ("aten.rand.default", "aten.randn.default")), seen
        for g, e in zip(got if isinstance(got, tuple) else (got,), expected if isinstance(expected, tuple) else (expected,)):
            torch.testing.assert_close(g.get(), e, rtol=1e-4, atol=1e-5)


def test_multihead_attention_with_zero_attention_through_pointers(bob):
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(4, 2, add_zero_attn=True, add_bias_kv=True)
    twin = copy.deepcopy(mha)
    q, k = torch.randn(3, 1, 4), torch.randn(5, 1, 4)
    expected = twin(q, k, k)
    mha.send(bob)
    out, weights = mha(q.send(bob), k.send(bob), k.send(bob))
    torch.testing.assert_close(out.get(), expected[0].detach(), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(weights.get(), expected[1].detach(), rtol=1e-4, atol=1e-5)


def test_masked_reductions_and_logdet_through_pointers(bob):
    torch.manual_seed(0)
    x = torch.randn(3, 4)
    mask = torch.rand(3, 4) > 0.4
    for fn in (torch.masked.sum, torch.masked.amax, torch.masked.amin, torch.masked.prod, torch.masked.logsumexp,
               torch.masked.argmax):
        torch.testing.assert_close(fn(x.send(bob), 1, mask=mask.send(bob)).get(), fn(x, 1, mask=mask))
    torch.testing.assert_close(torch.masked.cumsum(x.send(bob), 0, mask=mask.send(bob)).get(),
                               torch.masked.cumsum(x, 0, mask=mask))
    m = torch.randn(3, 3)
    m = m @ m.t() + torch.eye(3)
    torch.testing.assert_close(torch.logdet(m.send(bob)).get(), torch.logdet(m))
    # the mask is the user's data: a local one still meets the clear refusal
    with pytest.raises(sy.SyftError, match="mixes data on this process"):
        torch.masked.sum(x.send(bob), 1, mask=mask)
    # a pointer's device is still its meta placeholder everywhere else
    assert x.send(bob).device.type == "meta"


def test_ctc_loss_with_length_lists_makes_its_lengths_for_the_op(bob):
    torch.manual_seed(0)
    log_probs = torch.randn(6, 2, 5).log_softmax(2)
    targets = torch.randint(1, 5, (2, 3))
    loss = nn.CTCLoss()
    expected = loss(log_probs, targets, [6, 5], [3, 2])
    got = loss(log_probs.send(bob), targets.send(bob), [6, 5], [3, 2])
    torch.testing.assert_close(got.get(), expected)


def test_a_helper_copied_to_the_meta_device_never_reaches_a_worker(bob):
    from syft_lab.tensors.pointer import _local_constant

    helper = torch.zeros(3, device="meta")
    helper._syft_helper = True  # even marked as made by a composite: it has no data
    with pytest.raises(sy.SyftError, match="meta device.*no data"):
        _local_constant(helper, "aten.mul.Tensor")


def test_indexing_through_tensors_own_getitem_and_setting_with_lists(bob):
    x = torch.arange(60.).reshape(3, 4, 5)
    p = x.send(bob)
    # torch.Tensor.__getitem__ called as a function (what OpInfo's __getitem__ does)
    for index in ([1, 2], ([0, 2], slice(None), [1, 3])):
        torch.testing.assert_close(torch.Tensor.__getitem__(p, index).get(), x[index])
    for index, value in (([0, 2], 2.0), ((slice(None), [1, 3]), 7), ((1, 2), -1.5), ([True, False, True], True)):
        p[index] = value
        x[index] = value
    torch.testing.assert_close(p.get(), x)


# --- the last OpInfo failures (issue 22): masked mean/var/std, narrow at a remote start, cov's remote weights ---

@pytest.mark.parametrize("fn", [torch.masked.mean, torch.masked.var, torch.masked.std])
def test_masked_mean_var_std_count_their_elements_for_the_op(bob, fn):
    torch.manual_seed(0)
    x = torch.randn(3, 4)
    mask = torch.rand(3, 4) > 0.4
    for args, kwargs in (((1,), {}), ((), {}), ((0,), {"keepdim": True}), ((1,), {"mask": mask})):
        kw = {**kwargs, "mask": kwargs["mask"].send(bob)} if "mask" in kwargs else kwargs
        torch.testing.assert_close(fn(x.send(bob), *args, **kw).get(), fn(x, *args, **kwargs), equal_nan=True)
    # the count is made from the input's shape; a mask is the user's data: a local one is still refused
    with pytest.raises(sy.SyftError, match="mixes data on this process"):
        fn(x.send(bob), 1, mask=mask)
    # outside these reductions a local tensor still meets the refusal, in a division too
    with pytest.raises(sy.SyftError, match="mixes data on this process"):
        torch.divide(x.send(bob), torch.ones(3, 4))


def test_narrow_at_a_start_held_by_the_worker_is_made_there(bob):
    x = torch.arange(24.).reshape(4, 6)
    p = x.send(bob)
    for dim, start, length in ((0, 1, 2), (1, 2, 3), (-1, 0, 6)):
        want = x.narrow(dim, torch.tensor(start), length)
        got = p.narrow(dim, torch.tensor(start).send(bob), length)
        assert (got.shape, got.stride()) == (want.shape, want.stride())
        assert torch.equal(_stored(bob, got), want)  # a view of the stored tensor, made on the worker
        assert _stored(bob, got).untyped_storage().data_ptr() == _stored(bob, p).untyped_storage().data_ptr()
        torch.testing.assert_close(got.get(), want)
    torch.testing.assert_close(p.narrow(1, torch.tensor(2), 3).get(), x.narrow(1, 2, 3))  # a local start, as before
    with pytest.raises(sy.RemoteError):  # the worker's own check of the start
        p.narrow(1, torch.tensor(5).send(bob), 3)


def test_cov_with_weights_held_by_the_worker_runs_there(bob):
    torch.manual_seed(0)
    obs = torch.randn(3, 5)
    fw, aw = torch.tensor([1, 2, 1, 3, 1]), torch.rand(5)
    p = obs.send(bob)
    torch.testing.assert_close(torch.cov(p, fweights=fw.send(bob)).get(), torch.cov(obs, fweights=fw))
    torch.testing.assert_close(torch.cov(p, aweights=aw.send(bob)).get(), torch.cov(obs, aweights=aw))
    torch.testing.assert_close(torch.cov(p, correction=0, fweights=fw.send(bob), aweights=aw.send(bob)).get(),
                               torch.cov(obs, correction=0, fweights=fw, aweights=aw))
    with pytest.raises(sy.RemoteError, match="fweights cannot be negative"):  # torch's own check, on the worker
        torch.cov(p, fweights=torch.tensor([1, -2, 1, 3, 1]).send(bob))


def test_the_rest_of_the_defect_list_through_pointers(bob):
    """Issue 22's list, the entries no test above names: quantile, scaled_dot_product_attention,
    tensor_split at split points the worker holds, linalg.tensorsolve, feature_alpha_dropout."""
    torch.manual_seed(0)
    x = torch.randn(4, 5)
    q = torch.tensor([0.25, 0.5, 0.9])
    torch.testing.assert_close(torch.quantile(x.send(bob), q.send(bob), dim=1).get(), torch.quantile(x, q, dim=1))
    torch.testing.assert_close(torch.quantile(x.send(bob), 0.3).get(), torch.quantile(x, 0.3))
    qkv = [torch.randn(2, 3, 4) for _ in range(3)]
    F = torch.nn.functional
    torch.testing.assert_close(F.scaled_dot_product_attention(*[t.send(bob) for t in qkv], is_causal=True).get(),
                               F.scaled_dot_product_attention(*qkv, is_causal=True))
    points = torch.tensor([1, 3])
    for got, want in zip(torch.tensor_split(x.send(bob), points.send(bob), dim=1), torch.tensor_split(x, points, dim=1)):
        assert torch.equal(got.get(), want)
    a = torch.randn(6, 2, 3) + 3 * torch.eye(6).reshape(6, 2, 3)
    b = torch.randn(6)
    torch.testing.assert_close(torch.linalg.tensorsolve(a.send(bob), b.send(bob)).get(), torch.linalg.tensorsolve(a, b),
                               rtol=1e-4, atol=1e-5)
    v = torch.randn(4, 8, 4, 4)  # 32 channels: all of them dropped, 1 in 2**32
    out = F.feature_alpha_dropout(v.send(bob), 0.5, training=True).get().flatten(2)
    assert out.shape == (4, 8, 16)
    # each channel is dropped (a constant) or kept (one scale and shift of its input, the same for all)
    centred, v_centred = out - out.mean(-1, keepdim=True), (v - v.mean((-1, -2), keepdim=True)).flatten(2)
    dropped = centred.abs().amax(-1) < 1e-5
    scales = (centred / v_centred)[~dropped]
    torch.testing.assert_close(scales, torch.full_like(scales, scales[0, 0].item()), rtol=1e-3, atol=1e-4)
