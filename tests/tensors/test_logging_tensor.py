"""LoggingTensor: a real torch.Tensor head that logs every op, forward and backward."""
import copy
import pickle

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import syft_lab as sy
from syft_lab import events
from syft_lab.tensors import OpLog
from syft_lab.wire.format import Decoder, decode, encode, encode_bytes


def test_head_is_a_real_tensor_and_results_stay_in_the_chain():
    x = torch.tensor([[1., -2., 3.]])
    lx = sy.LoggingTensor(x)
    assert isinstance(lx, torch.Tensor) and isinstance(lx, sy.LoggingTensor)
    assert lx.shape == x.shape and lx.dtype == x.dtype
    torch.manual_seed(0)
    lin = nn.Linear(3, 2)
    y = F.relu(lin(lx)).sum()
    assert isinstance(y, sy.LoggingTensor)
    torch.manual_seed(0)
    assert torch.equal(y.child, F.relu(nn.Linear(3, 2)(x)).sum())


def test_log_records_ops_with_input_shapes_and_is_shared_by_results():
    lx = sy.LoggingTensor(torch.tensor([[1., -2., 3.]]))
    lin = nn.Linear(3, 2)
    y = F.relu(lin(lx)).sum()
    ops = [r.op for r in lx.log]
    assert ops[:2] == ["aten.addmm.default", "aten.relu.default"]
    assert "aten.sum.default" in ops
    assert y.log is lx.log
    addmm = lx.log[0]
    assert [tuple(s) for s, _ in addmm.inputs] == [(2,), (1, 3), (3, 2)]
    assert all(d == torch.float32 for _, d in addmm.inputs)
    assert addmm.to_dict()["inputs"][1] == {"shape": [1, 3], "dtype": "float32"}


def test_backward_through_the_layer_gives_torch_grads_and_logs_backward_ops():
    x = torch.tensor([[1., -2., 3.]], requires_grad=True)
    lx = sy.LoggingTensor(x.detach().clone().requires_grad_(True))
    torch.manual_seed(0)
    lin_a = nn.Linear(3, 2)
    lin_b = copy.deepcopy(lin_a)
    (F.relu(lin_a(x)) ** 2).sum().backward()
    y = (F.relu(lin_b(lx)) ** 2).sum()
    n_forward = len(lx.log)
    y.backward()
    assert len(lx.log) > n_forward
    assert "aten.threshold_backward.default" in [r.op for r in lx.log]
    assert torch.allclose(lx.grad.child, x.grad)
    assert torch.allclose(lin_b.weight.grad.child, lin_a.weight.grad)
    assert torch.allclose(lin_b.bias.grad.child, lin_a.bias.grad)


def test_training_step_with_loss_and_optimizer_equals_plain_torch():
    torch.manual_seed(0)
    X, T = torch.randn(8, 4), torch.randint(0, 3, (8,))
    plain = nn.Sequential(nn.Linear(4, 5), nn.ReLU(), nn.Linear(5, 3))
    logged = copy.deepcopy(plain)
    for model, inp in ((plain, X), (logged, sy.LoggingTensor(X))):
        opt = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
        for _ in range(3):
            opt.zero_grad()
            loss = F.cross_entropy(model(inp), T)
            loss.backward()
            opt.step()
    for p, q in zip(plain.parameters(), logged.parameters()):
        assert type(q) is nn.Parameter  # the optimizer updated the plain parameters in place
        assert torch.allclose(p, q, atol=1e-6)


def test_layers_nest_and_child_is_the_next_layer():
    x = torch.tensor([1., 2.])
    inner = sy.LoggingTensor(x)
    outer = sy.LoggingTensor(inner)
    assert outer.child is inner and inner.child is x
    out = outer * 2
    assert isinstance(out, sy.LoggingTensor) and isinstance(out.child, sy.LoggingTensor)
    assert torch.equal(out.child.child, torch.tensor([2., 4.]))
    assert [r.op for r in outer.log] == ["aten.mul.Tensor"]
    assert [r.op for r in inner.log] == ["aten.mul.Tensor"]
    assert repr(outer) == "LoggingTensor>LoggingTensor>tensor([1., 2.])"


def test_repr_reads_like_the_chain():
    lx = sy.LoggingTensor(torch.tensor([[1., -2., 3.]]))
    assert repr(lx) == "LoggingTensor>tensor([[ 1., -2.,  3.]])"
    assert str(lx) == repr(lx)


def test_in_place_ops_return_the_callers_object():
    lx = sy.LoggingTensor(torch.tensor([1., 2.]))
    out = lx.add_(1)
    assert out is lx
    assert torch.equal(lx.child, torch.tensor([2., 3.]))
    assert lx.log[-1].op == "aten.add_.Tensor"


def test_ops_returning_tuples_and_lists():
    lx = sy.LoggingTensor(torch.arange(6.).reshape(2, 3))
    a, b = lx.split([1, 2], dim=1)
    assert isinstance(a, sy.LoggingTensor) and b.shape == (2, 2)
    c = torch.cat([a, b], dim=1)
    assert torch.equal(c.child, lx.child)
    values, idx = lx.max(dim=1)
    assert torch.equal(idx.child, torch.tensor([2, 2]))


def test_deepcopy_keeps_the_whole_chain_and_is_independent():
    lx = sy.LoggingTensor(sy.LoggingTensor(torch.tensor([1., 2.])))
    lx * 3
    c = copy.deepcopy(lx)
    assert type(c) is sy.LoggingTensor and type(c.child) is sy.LoggingTensor
    assert [r.op for r in c.log] == [r.op for r in lx.log]
    c.add_(10)
    assert torch.equal(lx.child.child, torch.tensor([1., 2.]))
    assert len(c.log) == len(lx.log) + 1


def test_pickle_and_torch_save_round_trip_every_layer(tmp_path):
    lx = sy.LoggingTensor(sy.LoggingTensor(torch.tensor([1., -2.])))
    lx.abs()
    back = pickle.loads(pickle.dumps(lx))
    assert type(back) is sy.LoggingTensor and type(back.child) is sy.LoggingTensor
    assert torch.equal(back.child.child, lx.child.child)
    assert [r.op for r in back.log] == ["aten.abs.default"]
    path = tmp_path / "lx.pt"
    torch.save(lx, path)
    loaded = torch.load(path, weights_only=False)
    assert type(loaded.child) is sy.LoggingTensor and repr(loaded) == repr(lx)


@pytest.mark.parametrize("bad", ["abc", 42, None, [1., 2.]])
def test_layer_around_a_non_tensor_is_a_type_error(bad):
    with pytest.raises(TypeError, match="LoggingTensor wraps a torch.Tensor"):
        sy.LoggingTensor(bad)


def test_op_errors_are_the_errors_torch_raises():
    lx = sy.LoggingTensor(torch.ones(2, 3))
    with pytest.raises(RuntimeError) as logged:
        lx @ lx
    with pytest.raises(RuntimeError) as plain:
        torch.ones(2, 3) @ torch.ones(2, 3)
    assert type(logged.value) is type(plain.value)
    assert str(logged.value) == str(plain.value)


def test_hook_is_idempotent_and_unhook_removes_only_what_it_added():
    sy.hook()
    sy.hook()
    assert hasattr(torch.Tensor, "send") and hasattr(nn.Module, "send")
    sy.unhook()
    assert not hasattr(torch.Tensor, "send") and not hasattr(torch.Tensor, "tag")
    assert not hasattr(nn.Module, "send")
    assert hasattr(torch.Tensor, "add")
    sy.hook()
    assert sy.is_hooked()


def test_hook_patches_no_torch_op():
    before = {name: getattr(torch, name) for name in ("add", "matmul", "relu")}
    tensor_before = dict(vars(torch.Tensor))
    sy.unhook()
    sy.hook()
    assert all(getattr(torch, n) is f for n, f in before.items())
    added = set(vars(torch.Tensor)) - set(tensor_before)
    changed = {k for k in tensor_before if vars(torch.Tensor).get(k) is not tensor_before[k]}
    assert added == set() and changed == set()  # hook() was already applied by the fixture
    assert torch._C._len_torch_function_stack() == 0  # no global mode
    assert torch._C._len_torch_dispatch_stack() == 0


# --- strides, storage offsets, layouts ---------------------------------------------------------

def _meta(t):
    return t.shape, t.stride(), t.storage_offset(), t.dtype, t.layout, t.device


def test_layer_mirrors_strides_and_storage_offset_of_a_non_contiguous_child():
    x = torch.arange(12.).reshape(3, 4)
    for child in (x.t(), x[1:, 2:], x[:, ::2], x.expand(2, 3, 4)):
        lx = sy.LoggingTensor(child)
        assert _meta(lx) == _meta(child)
        assert lx.is_contiguous() == child.is_contiguous()
    lx = sy.LoggingTensor(x)
    for view in (lx.t(), lx[1:, 1:], lx.transpose(0, 1)[1:], lx.unfold(1, 2, 2)):
        assert isinstance(view, sy.LoggingTensor) and _meta(view) == _meta(view.child)
    assert lx[1:, 1:].storage_offset() == 5


def test_reshape_of_a_transposed_layer_copies_as_plain_torch_does():
    x = torch.arange(12.).reshape(3, 4)
    lt = sy.LoggingTensor(x).t()
    assert torch.equal(lt.reshape(-1).child, x.t().reshape(-1))
    assert "aten.clone.default" in lt.log.ops()  # reshape of a non-contiguous tensor copies
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        lt.view(-1)  # the same error as plain torch's x.t().view(-1)
    assert torch.equal(lt.contiguous().view(-1).child, x.t().contiguous().view(-1))


def test_in_place_ops_that_change_shape_update_the_layer():
    lx = sy.LoggingTensor(torch.arange(6.).reshape(2, 3))
    assert lx.t_() is lx and _meta(lx) == _meta(lx.child) and lx.shape == (3, 2)
    lx.unsqueeze_(0)
    assert lx.shape == (1, 3, 2) and _meta(lx) == _meta(lx.child)
    ly = sy.LoggingTensor(torch.ones(2))
    ly.resize_(2, 5)
    assert ly.shape == (2, 5) and _meta(ly) == _meta(ly.child)
    assert lx.log.ops() == ["aten.t_.default", "aten.unsqueeze_.default"]


def test_sparse_child_keeps_its_layout():
    s = torch.tensor([[0., 1.], [2., 0.]]).to_sparse()
    ls = sy.LoggingTensor(s)
    assert ls.layout == torch.sparse_coo
    out = ls + ls
    assert isinstance(out, sy.LoggingTensor) and out.layout == torch.sparse_coo
    assert torch.equal(out.to_dense().child, torch.tensor([[0., 2.], [4., 0.]]))


# --- nn modules on LoggingTensor inputs equal plain torch --------------------------------------

def _grads(module, inputs):
    return [t.grad for t in inputs] + [p.grad for p in module.parameters()]


def _unwrapped(t):
    return t.child if isinstance(t, sy.LoggingTensor) else t


@pytest.mark.parametrize("make, n_inputs", [
    (lambda: nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0), 1),
    (lambda: nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True, norm_first=True), 1),
    (lambda: nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0), 2),
    (lambda: nn.Transformer(8, 2, 1, 1, 16, dropout=0.0), 2),
], ids=["encoder", "encoder-batch-first-norm-first", "decoder", "transformer"])
def test_transformer_layers_forward_and_backward_equal_plain_torch(make, n_inputs):
    torch.manual_seed(0)
    plain = make()
    logged = copy.deepcopy(plain)
    xs = [torch.randn(5, 3, 8, requires_grad=True) for _ in range(n_inputs)]
    log = OpLog()
    lxs = [sy.LoggingTensor(x.detach().clone().requires_grad_(True), log) for x in xs]
    out = plain(*xs)
    lout = logged(*lxs)
    assert isinstance(lout, sy.LoggingTensor)
    torch.testing.assert_close(lout.child, out)
    g = torch.randn_like(out)
    out.backward(g)
    lout.backward(sy.LoggingTensor(g, lout.log))  # backward ops join the same log
    for got, want in zip(_grads(logged, lxs), _grads(plain, xs)):
        assert isinstance(got, sy.LoggingTensor)
        torch.testing.assert_close(got.child, want)
    ops = log.ops()
    assert "aten.native_layer_norm.default" in ops and "aten.native_layer_norm_backward.default" in ops


def test_multihead_attention_with_a_mask_equals_plain_torch():
    torch.manual_seed(0)
    plain = nn.MultiheadAttention(8, 2)
    logged = copy.deepcopy(plain)
    q, k = torch.randn(4, 2, 8), torch.randn(6, 2, 8)
    mask = torch.rand(4, 6) > 0.7
    out, weights = plain(q, k, k, attn_mask=mask)
    lq, lk = sy.LoggingTensor(q), sy.LoggingTensor(k)
    lout, lweights = logged(lq, lk, lk, attn_mask=mask)
    assert isinstance(lout, sy.LoggingTensor) and isinstance(lweights, sy.LoggingTensor)
    torch.testing.assert_close(lout.child, out)
    torch.testing.assert_close(lweights.child, weights)


@pytest.mark.parametrize("make, step_op", [
    (lambda: nn.RNN(4, 3, num_layers=2), "aten.tanh.default"),
    (lambda: nn.RNN(4, 3, nonlinearity="relu", bidirectional=True), "aten.relu.default"),
    (lambda: nn.LSTM(4, 3, num_layers=2), "aten.mkldnn_rnn_layer.default"),  # one fused op per layer
    (lambda: nn.LSTM(4, 3, proj_size=2, batch_first=True), "aten.sigmoid_.default"),
    (lambda: nn.GRU(4, 3, bidirectional=True), "aten.sigmoid_.default"),
], ids=["rnn", "rnn-relu-bidirectional", "lstm", "lstm-proj", "gru"])
def test_recurrent_outputs_and_hidden_states_are_logged_and_equal_plain_torch(make, step_op):
    torch.manual_seed(0)
    plain = make()
    logged = copy.deepcopy(plain)
    x = torch.randn(5, 2, 4)
    out, hidden = plain(x)
    lx = sy.LoggingTensor(x)
    lout, lhidden = logged(lx)
    hidden, lhidden = (hidden, lhidden) if isinstance(hidden, tuple) else ((hidden,), (lhidden,))
    for got, want in zip((lout, *lhidden), (out, *hidden)):
        assert isinstance(got, sy.LoggingTensor)
        assert got.log is lx.log
        torch.testing.assert_close(got.child, want)
    assert step_op in lx.log.ops()  # the steps that make the state are logged too


@pytest.mark.parametrize("cell", [nn.RNNCell, nn.GRUCell, nn.LSTMCell])
def test_recurrent_cells_without_a_state_give_logged_results(cell):
    torch.manual_seed(0)
    plain = cell(4, 3)
    logged = copy.deepcopy(plain)
    x = torch.randn(2, 4)
    want = plain(x)
    got = logged(sy.LoggingTensor(x))
    want, got = (want, got) if isinstance(want, tuple) else ((want,), (got,))
    for g, w in zip(got, want):
        assert isinstance(g, sy.LoggingTensor)
        torch.testing.assert_close(g.child, w)


def test_plain_initial_state_that_requires_grad_still_gets_its_gradient():
    torch.manual_seed(0)
    plain = nn.RNN(4, 3)
    logged = copy.deepcopy(plain)
    x = torch.randn(5, 2, 4)
    h0 = torch.randn(1, 2, 3, requires_grad=True)
    h0_for_logged = h0.detach().clone().requires_grad_(True)
    plain(x, h0)[0].sum().backward()
    lout, _ = logged(sy.LoggingTensor(x), h0_for_logged)
    assert isinstance(lout, sy.LoggingTensor)
    lout.sum().backward()
    torch.testing.assert_close(_unwrapped(h0_for_logged.grad), h0.grad)


def test_recurrent_ops_on_plain_tensors_are_untouched():
    torch.manual_seed(0)
    rnn = nn.LSTM(4, 3)
    out, (h, c) = rnn(torch.randn(5, 2, 4))
    assert type(out) is torch.Tensor and type(h) is torch.Tensor and type(c) is torch.Tensor


def test_the_log_tells_backward_ops_from_forward_ops_and_keeps_it_across_the_wire():
    x = sy.LoggingTensor(torch.tensor([1., 2.], requires_grad=True))
    (x * x).sum().backward()
    phases = [(r.op, r.backward) for r in x.log]
    assert phases[:2] == [("aten.mul.Tensor", False), ("aten.sum.default", False)]
    assert ("aten.mul.Tensor", True) in phases and all(b for _, b in phases[phases.index(("aten.expand.default", True)):])
    assert x.log[0].to_dict()["backward"] is False
    enc = encode({"o": sy.LoggingTensor(torch.ones(1), x.log)})
    dec = Decoder()
    msg = None
    for frame in enc.frames:
        msg = dec.feed(frame)
    assert [(r.op, r.backward) for r in msg["o"].log] == phases


def test_each_record_names_the_notebook_cell_that_ran_it_and_keeps_it_across_the_wire_and_pickle():
    x = sy.LoggingTensor(torch.tensor([1., 2.]))
    try:
        events.set_current_cell(7)
        y = x + 1
        events.set_current_cell(8)
        y.relu()
    finally:
        events.set_current_cell(None)
    x.neg()
    assert [(r.op, r.cell) for r in x.log] == [("aten.add.Tensor", 7), ("aten.relu.default", 8),
                                               ("aten.neg.default", None)]
    assert x.log[0].to_dict() == {"op": "aten.add.Tensor", "backward": False, "cell": 7,
                                  "inputs": [{"shape": [2], "dtype": "float32"}]}
    back = decode(encode_bytes({"o": x}))["o"]
    assert [r.cell for r in back.log] == [7, 8, None]
    assert [r.cell for r in pickle.loads(pickle.dumps(x)).log] == [7, 8, None]


@pytest.mark.parametrize("bad", [-1, "3", 2.0])
def test_a_cell_number_is_a_non_negative_int(bad):
    with pytest.raises(ValueError, match="a cell number is a non-negative int"):
        events.set_current_cell(bad)
    assert events.current_cell.number is None


def test_an_op_on_a_conjugate_view_inside_the_layer_reads_it_as_torch_does():
    """hfftn conjugates lazily, then runs _fft_c2r on that view inside the layer's dispatch,
    where torch does not resolve it: the result was off by up to 4.4 (issue 37)."""
    from syft_lab.tensors.logging import LoggingTensor

    x = torch.randn(5, 6, 7, dtype=torch.float64)
    got = torch.fft.hfftn(LoggingTensor(x), norm="ortho")
    assert torch.allclose(got.child, torch.fft.hfftn(x, norm="ortho"))
    z = torch.randn(3, 4, dtype=torch.complex128)
    assert torch.equal(torch.mul(LoggingTensor(z).conj(), 2).child, z.conj() * 2)
