"""Issue 41, items 1-2: writes through views and indices reach the base, as in torch; copies and
torch.nn.init keep a shared tensor shared or are refused; reductions along dim 0 of a 0-dim tensor
and a vector @ a matrix give torch's values. Each compared with plain torch, on 2 and 3 parties."""
import pytest
import torch

import syft_lab as sy
from syft_lab.errors import SyftError
from syft_lab.tensors.additive_sharing import AdditiveSharingTensor

sy.hook()

X = torch.tensor([[0.5, -1.25, 2.0], [3.0, 0.75, -4.5]])
V = torch.tensor([9.0, -8.5])


def _share(t, parties):
    ws, provider = parties
    return t.fix_precision().share(*ws, crypto_provider=provider)


def _value(t):
    return t.get().float_precision() if t.shared else t.float_precision()


# each write: done on a plain tensor and on its fixed precision / shared copy, in the same way
WRITES = {
    "column assignment": lambda t: t.__setitem__((slice(None), 0), V),
    "row assignment of a number": lambda t: t.__setitem__(1, 7.0),
    "element assignment": lambda t: t.__setitem__((0, 2), torch.tensor(-3.5)),
    "mul_ on a row": lambda t: t[0].mul_(2),
    "add_ through squeeze of unsqueeze": lambda t: t.unsqueeze(0).squeeze(0)[1].add_(torch.tensor([1.0, 2.0, 3.0])),
    "sub_ through view then select": lambda t: t.view(3, 2)[1].sub_(0.5),
    "zero_ through t()": lambda t: t.t()[2].zero_(),
    "fill_ of a slice of a slice": lambda t: t[:, 1:][0, 1:].fill_(6.0),
    "copy_ through select of narrow": lambda t: t.narrow(1, 1, 2).select(0, 1).copy_(torch.tensor([5.0, 4.0])),
    "mul_ on a chunk": lambda t: t.chunk(3, dim=1)[1].mul_(-1),
    "add_ on an unbound row": lambda t: t.unbind(0)[1].add_(1.0),
    "mul_ on .data": lambda t: t.data.mul_(3),
    "div_ on detach()": lambda t: t.detach().div_(2),
}


@pytest.mark.parametrize("write", list(WRITES), ids=list(WRITES))
def test_a_write_through_a_view_of_a_shared_tensor_reaches_it(parties, write):
    plain = X.clone()
    WRITES[write](plain)
    sx = _share(X, parties)
    WRITES[write](sx)
    assert isinstance(sx.child, AdditiveSharingTensor)  # still shared
    torch.testing.assert_close(_value(sx), plain, atol=2e-3, rtol=0)


@pytest.mark.parametrize("write", list(WRITES), ids=list(WRITES))
def test_a_write_through_a_view_of_a_fixed_precision_tensor_reaches_it(write):
    plain = X.clone()
    WRITES[write](plain)
    fx = X.fix_precision()
    WRITES[write](fx)
    torch.testing.assert_close(_value(fx), plain, atol=2e-3, rtol=0)


def test_the_view_written_to_has_the_new_values_too(parties):
    sx = _share(X, parties)
    row = sx[1]
    row.mul_(2)
    torch.testing.assert_close(_value(row), X[1] * 2, atol=2e-3, rtol=0)
    torch.testing.assert_close(_value(sx), torch.stack([X[0], X[1] * 2]), atol=2e-3, rtol=0)


def test_a_write_into_an_expanded_view_is_refused(parties):
    sx = _share(torch.tensor([1.0]), parties)
    with pytest.raises(SyftError, match="expanded view"):
        sx.expand(3).mul_(2)
    torch.testing.assert_close(_value(sx), torch.tensor([1.0]))


def test_a_shared_value_written_into_part_of_a_public_tensor_is_refused(parties):
    fx = X.fix_precision()
    with pytest.raises(SyftError, match="share the whole tensor first"):
        fx[0] = _share(torch.tensor([1.0, 2.0, 3.0]), parties)


def test_dirac_init_of_a_shared_weight_is_torchs(parties):
    w = torch.empty(4, 2, 3)
    torch.nn.init.dirac_(w, groups=2)
    sw = _share(torch.ones(4, 2, 3), parties)
    torch.nn.init.dirac_(sw, groups=2)
    assert isinstance(sw.child, AdditiveSharingTensor)
    torch.testing.assert_close(_value(sw), w)


def test_copying_a_shared_or_fixed_precision_value_into_a_plain_tensor_is_refused(parties):
    plain = torch.zeros(2, 3)
    with pytest.raises(SyftError, match="plain.copy_"):
        plain.copy_(_share(X, parties))
    with pytest.raises(SyftError, match="plain.copy_"):
        plain.copy_(X.fix_precision())
    assert not plain.any()


def test_loading_a_shared_state_dict_into_a_plain_model_is_refused(parties):
    ws, provider = parties
    shared_model = torch.nn.Linear(3, 2).fix_precision().share(*ws, crypto_provider=provider)
    plain_model = torch.nn.Linear(3, 2)
    before = plain_model.weight.detach().clone()
    with pytest.raises(RuntimeError, match="refused.*get\\(\\).float_precision\\(\\)"):  # torch wraps the SyftError
        plain_model.load_state_dict(shared_model.state_dict())
    torch.testing.assert_close(plain_model.weight.detach(), before)


INITS = {
    "normal_": lambda t: torch.nn.init.normal_(t, mean=0.5, std=2.0),
    "uniform_": lambda t: torch.nn.init.uniform_(t, -3.0, 3.0),
    "trunc_normal_": lambda t: torch.nn.init.trunc_normal_(t, std=1.5, a=-1.0, b=1.0),
    "constant_": lambda t: torch.nn.init.constant_(t, -2.25),
    "zeros_": torch.nn.init.zeros_,
    "ones_": torch.nn.init.ones_,
}


@pytest.mark.parametrize("shape", [(), (2, 3)], ids=["0-dim", "2-D"])
@pytest.mark.parametrize("init", list(INITS), ids=list(INITS))
def test_init_keeps_a_shared_tensor_shared_with_torchs_values(parties, init, shape):
    torch.manual_seed(5)
    expected = INITS[init](torch.empty(shape))
    sx = _share(torch.full(shape, 0.25), parties)
    torch.manual_seed(5)
    INITS[init](sx)
    assert isinstance(sx.child, AdditiveSharingTensor) and tuple(sx.shape) == shape
    doubled = sx * 2  # the next op works on it (a 0-dim copy broke the encoding before)
    torch.testing.assert_close(_value(doubled), expected * 2, atol=3e-3, rtol=0)


def test_a_0_dim_copy_keeps_the_encoding():
    fx = torch.tensor(1.0).fix_precision()
    fx.copy_(torch.tensor(2.5))
    torch.testing.assert_close((fx * 2).float_precision(), torch.tensor(5.0))


REDUCTIONS = {
    "mean(0)": lambda t: t.mean(0),
    "mean(-1, keepdim)": lambda t: t.mean(-1, keepdim=True),
    "max(0) values": lambda t: t.max(0)[0],
    "min(0) values": lambda t: t.min(0).values,
    "max(0) index": lambda t: t.max(0)[1],
    "argmax(0)": lambda t: t.argmax(0),
    "argmin(dim=0)": lambda t: t.argmin(dim=0),
}


@pytest.mark.parametrize("reduction", list(REDUCTIONS), ids=list(REDUCTIONS))
def test_reductions_along_dim_0_of_a_0_dim_shared_tensor_are_torchs(parties, reduction):
    x = torch.tensor(-1.75)
    expected = REDUCTIONS[reduction](x)
    out = REDUCTIONS[reduction](_share(x, parties))
    assert tuple(out.shape) == tuple(expected.shape)
    torch.testing.assert_close(_value(out), expected.float(), atol=2e-3, rtol=0)


def test_extrema_along_dim_0_of_a_0_dim_shared_integer_are_torchs(parties):
    ws, provider = parties
    x = torch.tensor(-7)
    values, idx = x.share(*ws, crypto_provider=provider).max(0)
    assert values.get().item() == -7 and idx.get().item() == 0
    assert x.share(*ws, crypto_provider=provider).argmin(0).get().item() == 0


@pytest.mark.parametrize("shapes", [((3,), (3, 2)), ((3,), (2, 3, 4)), ((2, 3), (3,))],
                         ids=["vector @ matrix", "vector @ batch", "matrix @ vector"])
def test_vector_matrix_products_are_torchs(parties, shapes):
    torch.manual_seed(0)
    a, b = torch.randn(shapes[0]), torch.randn(shapes[1])
    out = _share(a, parties) @ _share(b, parties)
    torch.testing.assert_close(_value(out), a @ b, atol=1e-2, rtol=0)
    public_right = _share(a, parties) @ b
    torch.testing.assert_close(_value(public_right), a @ b, atol=1e-2, rtol=0)


def test_vector_matrix_product_of_shared_integers(parties):
    ws, provider = parties
    v, m = torch.tensor([1, -2, 3]), torch.tensor([[1, 2], [3, 4], [5, 6]])
    out = v.share(*ws, crypto_provider=provider) @ m
    assert torch.equal(out.get(), v @ m)


def test_writes_and_vector_matrix_on_worker_processes(remote_parties):
    alice, bob, carol = remote_parties
    sx = X.fix_precision().share(alice, bob, crypto_provider=carol)
    sx[:, 0] = V
    sx[1].mul_(2)
    plain = X.clone()
    plain[:, 0] = V
    plain[1].mul_(2)
    v = torch.tensor([1.0, -2.0])
    out = v.fix_precision().share(alice, bob, crypto_provider=carol) @ sx
    torch.testing.assert_close(out.get().float_precision(), v @ plain, atol=1e-2, rtol=0)
    torch.testing.assert_close(sx.get().float_precision(), plain, atol=2e-3, rtol=0)


def test_a_plain_state_dict_loaded_into_a_shared_model_stays_shared(parties):
    ws, provider = parties
    torch.manual_seed(1)
    plain_model = torch.nn.Linear(3, 2)
    shared_model = torch.nn.Linear(3, 2).fix_precision().share(*ws, crypto_provider=provider)
    shared_model.load_state_dict(plain_model.state_dict())
    for name, p in shared_model.named_parameters():
        assert isinstance(p.child, AdditiveSharingTensor)
        torch.testing.assert_close(_value(p.detach()), getattr(plain_model, name).detach(), atol=1e-3, rtol=0)


def test_gradients_accumulate_and_step_as_torchs(parties):
    """Gradients autograd keeps are detaches of views (expand for a sum): accumulating into them and
    the optimizer's in-place steps give torch's values, not a write into backward's intermediates."""
    x0 = torch.tensor([1.0, 2.0, 3.0])
    plain = x0.clone().requires_grad_(True)
    sx = _share(x0, parties).requires_grad_(True)
    for t in (plain, sx):
        t.sum().backward()
        (t * t).sum().backward()
        opt = torch.optim.SGD([t], lr=0.1, momentum=0.9)
        opt.step()
        opt.step()
    torch.testing.assert_close(_value(sx.grad), plain.grad, atol=2e-3, rtol=0)
    torch.testing.assert_close(_value(sx.detach()), plain.detach(), atol=5e-3, rtol=0)


def test_writes_into_shared_integers_are_refused_not_ignored(parties):
    ws, provider = parties
    s = torch.tensor([1, 2, 3]).share(*ws, crypto_provider=provider)
    with pytest.raises(SyftError, match="copy_"):
        s[0] = 5
    with pytest.raises(SyftError, match="mul_"):
        s[0].mul_(2)
    assert torch.equal(s.get(), torch.tensor([1, 2, 3]))
