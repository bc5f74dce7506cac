"""The op allow-list: which ops a worker runs for a client, and the checks on their arguments.

PyTorch promises no memory safety for bad arguments to aten ops (its SECURITY.md): ops that
take sizes, strides, offsets or indices can read or write outside a tensor's storage, and some
internal overloads crash on ordinary arguments. So the list is curated: the op names below,
grouped by purpose, and of their overloads only those that pass every rule:

- no ``out=`` overload (an ``out=`` op resizes its output, freeing storage that another
  reply may be reading), no ``inplace_view`` op (``t_``, ``squeeze_``, ``as_strided_``: they
  rewrite a stored tensor's sizes and strides in place);
- no overload that neither takes nor returns a tensor (TorchScript helpers on ints, strings, lists);
- no overload taking a Storage, Stream, Event, Dimname, or a sparse, quantized or nested tensor;
- no ``_unsafe`` op, no ``set_``, no ``resize_``, no fft, no special polynomials (their degree
  ``n`` is unbounded: ``special_laguerre_polynomial_l(x, n=2**40)`` runs for seconds);
- ``_``-prefixed ops only where a comment says why (autograd or ``make_fx`` emits them).

``check_call(op, args, kwargs)`` then checks arguments that name sizes, strides, offsets or
indices, on the resolved values, before the op runs; ``check_result`` refuses a result that is
a meta or sparse tensor or reaches outside its own storage. docs/op-allowlist.md says what the
list leaves out and what remains a token holder's power (CPU time, memory up to the quotas).
"""
from __future__ import annotations

import math
import operator
import re

import torch

from ..errors import SyftError

aten = torch.ops.aten
_NAME = re.compile(r"^aten\.([A-Za-z_][A-Za-z0-9_]*)\.([A-Za-z_][A-Za-z0-9_]*)$")


class OpNotAllowedError(SyftError):
    """An op name that is not on the allow-list, or arguments it refuses (nothing ran)."""


# --- the list, by purpose ------------------------------------------------------------------

POINTWISE = """
    abs abs_ neg neg_ sign sign_ sgn exp exp_ exp2 expm1 log log_ log2 log10 log1p sqrt sqrt_ rsqrt rsqrt_
    sin cos tan asin acos atan sinh cosh tanh tanh_ asinh acosh atanh sigmoid sigmoid_ logit erf erfc erfinv
    floor ceil round trunc frac reciprocal reciprocal_ square lgamma digamma sinc deg2rad rad2deg
    nan_to_num clamp clamp_ clamp_min clamp_min_ clamp_max clamp_max_ clip
    add add_ sub sub_ rsub mul mul_ div div_ true_divide floor_divide remainder fmod pow pow_ float_power
    atan2 hypot maximum minimum fmax fmin copysign xlogy logaddexp lerp lerp_ addcmul addcmul_ addcdiv addcdiv_
    where bitwise_not bitwise_and bitwise_or bitwise_xor logical_not logical_and logical_or logical_xor
    isnan isinf isfinite signbit
    bitwise_left_shift bitwise_right_shift __lshift__ __rshift__
"""
# bitwise_left_shift, bitwise_right_shift (and __lshift__/__rshift__, what `x << k` reaches): the binary circuits of secret sharing (syft_lab/smpc:
# the sign bit's carry-lookahead adder). Torch defines every shift amount (0 past the width, the
# sign past it to the right); a scalar amount is checked to lie in 0..63 for a clear error.
COMPARISONS = "eq ne lt le gt ge equal isclose sort argsort topk kthvalue"
REDUCTIONS = """
    sum mean prod amax amin max min argmax argmin std var std_mean var_mean norm linalg_vector_norm
    logsumexp cumsum cumprod cummax cummin all any count_nonzero median mode nansum aminmax
"""
LINEAR_ALGEBRA = "mm bmm matmul mv dot addmm addmv addbmm baddbmm addr outer trace tril triu diag diag_embed cross"
NN_FORWARD = """
    relu relu_ gelu silu mish elu leaky_relu hardtanh hardtanh_ hardsigmoid hardswish softplus threshold
    log_sigmoid_forward glu convolution max_pool2d_with_indices avg_pool2d
    _softmax _log_softmax
    nll_loss_forward nll_loss2d_forward mse_loss l1_loss smooth_l1_loss huber_loss
    binary_cross_entropy binary_cross_entropy_with_logits
    native_batch_norm _native_batch_norm_legit _native_batch_norm_legit_no_training
    _batch_norm_with_update _batch_norm_no_update native_layer_norm native_group_norm
    native_dropout embedding constant_pad_nd upsample_nearest2d
    _adaptive_avg_pool2d
"""
# Reasons for the internal ones: _softmax, _log_softmax and _adaptive_avg_pool2d are what
# F.softmax, F.log_softmax and nn.AdaptiveAvgPool2d reach at the dispatcher (their public names
# decompose); _native_batch_norm_legit, _native_batch_norm_legit_no_training,
# _batch_norm_with_update and _batch_norm_no_update are what nn.BatchNorm reaches in training
# and in eval mode, traced or eager (each is checked: see _batch_norm).
NN_BACKWARD = """
    threshold_backward gelu_backward silu_backward mish_backward elu_backward leaky_relu_backward
    hardtanh_backward hardsigmoid_backward hardswish_backward softplus_backward sigmoid_backward
    tanh_backward log_sigmoid_backward glu_backward convolution_backward max_pool2d_with_indices_backward
    avg_pool2d_backward _softmax_backward_data _log_softmax_backward_data
    nll_loss_backward nll_loss2d_backward mse_loss_backward smooth_l1_loss_backward huber_loss_backward
    binary_cross_entropy_backward native_batch_norm_backward batch_norm_backward native_layer_norm_backward
    native_group_norm_backward native_dropout_backward embedding_dense_backward upsample_nearest2d_backward
    _adaptive_avg_pool2d_backward
    slice_backward select_backward
"""
# _softmax_backward_data, _log_softmax_backward_data, _adaptive_avg_pool2d_backward: the
# backward ops autograd emits for the forward ops above.
SHAPE_AND_VIEW = """
    view _unsafe_view _reshape_alias reshape as_strided expand permute transpose t unsqueeze squeeze
    flatten unflatten select slice narrow split split_with_sizes chunk unbind cat stack flip roll
    repeat repeat_interleave alias detach clone contiguous _to_copy view_as expand_as movedim unsafe_split unsafe_chunk
    lift_fresh lift_fresh_copy slice_scatter select_scatter diagonal diagonal_scatter
"""
# unsafe_split, unsafe_chunk: what LSTM and GRU cells split their gates with. "unsafe" there
# means autograd does not track the pieces as views; they are ordinary in-bounds slices.
# _unique2: what torch.unique reaches.
# _to_copy: what .to(dtype) and .float() reach. _reshape_alias and _unsafe_view: what reshape
# and matmul emit; both are checked (their view stays inside the input's storage).
FACTORIES = """
    empty zeros ones full arange linspace eye rand randn randint randperm scalar_tensor empty_strided
    empty_like zeros_like ones_like full_like rand_like randn_like
    new_empty new_empty_strided new_zeros new_ones new_full
    zero_ fill_ copy_ normal normal_ uniform_ bernoulli bernoulli_
"""
INDEXING = """
    index index_put index_put_ index_select gather scatter scatter_ scatter_add scatter_add_ index_add index_add_
    index_fill index_fill_ masked_fill masked_fill_ masked_select take nonzero _unique2
"""

ALLOWED_NAMES = frozenset(" ".join([POINTWISE, COMPARISONS, REDUCTIONS, LINEAR_ALGEBRA, NN_FORWARD, NN_BACKWARD,
                                    SHAPE_AND_VIEW, FACTORIES, INDEXING]).split())

_DENIED_TYPES = ("Storage", "Stream", "Event", "Dimname", "Generator ", "Generator[")
_OUT_OVERLOAD = re.compile(r"(^|_)out($|_)|grad_input")


def _overload_ok(op) -> bool:
    schema = op._schema
    if torch.Tag.inplace_view in op.tags:
        return False
    if _OUT_OVERLOAD.search(schema.overload_name):
        return False
    types = [str(a.type) for a in schema.arguments] + [str(r.type) for r in schema.returns]
    if not any("Tensor" in t for t in types):
        return False  # a TorchScript helper on ints, strings or lists (``mul.left_t`` repeats a list)
    for a in schema.arguments:
        t = str(a.type)
        if a.kwarg_only and a.alias_info is not None and a.alias_info.is_write:
            return False  # an out= argument
        if any(bad in t + " " for bad in _DENIED_TYPES):
            return False
    return True


def _build() -> dict[str, torch._ops.OpOverload]:
    ops = {}
    for base in sorted(ALLOWED_NAMES):
        packet = getattr(aten, base, None)
        if not isinstance(packet, torch._ops.OpOverloadPacket):
            continue  # not in this torch build (tests/wire/test_allowlist.py checks every name exists)
        for overload in packet.overloads():
            op = getattr(packet, overload)
            if _overload_ok(op):
                ops[str(op)] = op
    return ops


ALLOWED: dict[str, torch._ops.OpOverload] = _build()
ALLOWED_OPS = frozenset(ALLOWED.values())


def resolve(name) -> torch._ops.OpOverload:
    """The aten OpOverload named ``name`` if it is allowed; OpNotAllowedError otherwise."""
    op = ALLOWED.get(name) if type(name) is str else None
    if op is not None:
        return op
    if type(name) is not str or len(name) > 200:
        raise OpNotAllowedError(f"an op is named by a string such as 'aten.add.Tensor', got {type(name).__name__}")
    if not _NAME.match(name):
        raise OpNotAllowedError(f"op {name!r} is not allowed: only aten.<op>.<overload> names are")
    base = name.split(".")[1]
    if base in ALLOWED_NAMES:
        raise OpNotAllowedError(f"op {name!r} is not allowed: out=, in-place view and internal overloads never "
                                f"run on a worker (allowed overloads of aten.{base}: "
                                f"{', '.join(n for n in ALLOWED if n.split('.')[1] == base)})")
    raise OpNotAllowedError(f"op {name!r} is denied: it is not on the worker's curated allow-list "
                            f"(docs/op-allowlist.md lists the ops a worker runs)")


def is_allowed(name) -> bool:
    return type(name) is str and name in ALLOWED


def op_name(op) -> str:
    """The wire name of an OpOverload, e.g. 'aten.add.Tensor'."""
    return str(op)


# --- argument checks -------------------------------------------------------------------------

def _storage_elements(t: torch.Tensor) -> int:
    return t.untyped_storage().nbytes() // t.element_size()


def _sizes(x, what: str, name) -> list:
    if type(x) not in (list, tuple) or not all(type(s) is int for s in x):
        raise OpNotAllowedError(f"{name}: {what} must be a list of integers")
    return list(x)


def _check_view(name, t, size, stride, offset) -> None:
    """A view of ``t``'s storage with these sizes, strides and offset stays inside it."""
    size, stride = _sizes(size, "size", name), _sizes(stride, "stride", name)
    if len(size) != len(stride):
        raise OpNotAllowedError(f"{name}: size and stride must have the same length")
    if any(s < 0 for s in size) or any(s < 0 for s in stride) or offset < 0:
        raise OpNotAllowedError(f"{name}: sizes, strides and the storage offset must not be negative")
    if 0 in size:
        return
    last = offset + sum((n - 1) * s for n, s in zip(size, stride))
    if last >= _storage_elements(t):
        raise OpNotAllowedError(f"{name}: a view reaching element {last} lies outside the input's storage of "
                                f"{_storage_elements(t)} elements")


def _as_strided(name, args, kwargs):
    t, size, stride = _arg(args, kwargs, 0, "self"), _arg(args, kwargs, 1, "size"), _arg(args, kwargs, 2, "stride")
    offset = _arg(args, kwargs, 3, "storage_offset")
    _check_view(name, t, size, stride, t.storage_offset() if offset is None else _int(offset, name))


def _reshape_alias(name, args, kwargs):
    t = _arg(args, kwargs, 0, "self")
    _check_view(name, t, _arg(args, kwargs, 1, "size"), _arg(args, kwargs, 2, "stride"), t.storage_offset())


def _unsafe_view(name, args, kwargs):
    t, size = _arg(args, kwargs, 0, "self"), _sizes(_arg(args, kwargs, 1, "size"), "size", name)
    if size.count(-1) > 1 or any(s < -1 for s in size):
        raise OpNotAllowedError(f"{name}: bad size {size}")
    known = math.prod(s for s in size if s != -1)
    if (-1 not in size and known != t.numel()) or (-1 in size and (known == 0 or t.numel() % known)):
        raise OpNotAllowedError(f"{name}: size {size} does not hold the input's {t.numel()} elements")


def _strided_factory(first: int):
    def check(name, args, kwargs):
        size, stride = _arg(args, kwargs, first, "size"), _arg(args, kwargs, first + 1, "stride")
        size, stride = _sizes(size, "size", name), _sizes(stride, "stride", name)
        if len(size) != len(stride) or any(s < 0 for s in size + stride):
            raise OpNotAllowedError(f"{name}: sizes and strides must be non-negative and of the same length")
    return check


_NORM_ARGS = ("weight", "bias", "running_mean", "running_var", "save_mean", "save_invstd", "save_var")


def _batch_norm(name, args, kwargs):
    """Per-channel tensors must be 1-d with one entry per channel (else the kernel reads past them)."""
    schema_args = _SCHEMA_ARGS[name]
    backward = schema_args[0] == "grad_out"
    x = _arg(args, kwargs, 1 if backward else 0, schema_args[1 if backward else 0])
    if not isinstance(x, torch.Tensor) or x.dim() < 2:
        raise OpNotAllowedError(f"{name}: the input must be a tensor of at least 2 dimensions (N, C, ...)")
    channels = x.shape[1]
    if backward:
        g = _arg(args, kwargs, 0, "grad_out")
        if not isinstance(g, torch.Tensor) or g.shape != x.shape:
            raise OpNotAllowedError(f"{name}: grad_out must have the input's shape {list(x.shape)}")
    given = {}
    for i, arg_name in enumerate(schema_args):
        if arg_name in _NORM_ARGS:
            v = given[arg_name] = _arg(args, kwargs, i, arg_name)
            if v is not None and (not isinstance(v, torch.Tensor) or v.dim() != 1 or v.shape[0] != channels):
                raise OpNotAllowedError(f"{name}: {arg_name} must be None or a 1-d tensor of {channels} "
                                        f"(the input's channels)")
    # The kernels read the statistics their mode needs without checking that they were given.
    flag = next((i for i, n in enumerate(schema_args) if n in ("training", "train", "update")), None)
    training = bool(_arg(args, kwargs, flag, schema_args[flag])) if flag is not None else "no_update" not in name
    if backward:
        save = ("save_mean", "save_invstd" if "save_invstd" in schema_args else "save_var")
        needed = save if training else ("running_mean", "running_var")
    elif name.endswith(".no_stats"):
        if not training:
            raise OpNotAllowedError(f"{name}: runs in training mode only (training=True): it has no running "
                                    f"statistics to evaluate with")
        needed = ()
    else:
        needed = () if training else ("running_mean", "running_var")
    missing = [n for n in needed if given.get(n) is None]
    if missing:
        raise OpNotAllowedError(f"{name}: {' and '.join(missing)} must be given "
                                f"({'training' if training else 'evaluation'} mode needs them)")


def _max_pool_backward(name, args, kwargs):
    """The kernel writes grad_input[index] unchecked: every index must lie in its input plane."""
    grad, x, indices = _arg(args, kwargs, 0, "grad_output"), _arg(args, kwargs, 1, "self"), _arg(args, kwargs, 7, "indices")
    if not all(isinstance(v, torch.Tensor) for v in (grad, x, indices)) or x.dim() not in (3, 4):
        raise OpNotAllowedError(f"{name}: takes tensors grad_output, self (3-d or 4-d) and indices")
    if indices.dtype != torch.int64 or indices.shape != grad.shape or grad.shape[:-2] != x.shape[:-2]:
        raise OpNotAllowedError(f"{name}: indices must be int64 with grad_output's shape, and grad_output must "
                                f"match self in all but the last two dimensions")
    plane = x.shape[-1] * x.shape[-2]
    if indices.numel() and (int(indices.min()) < 0 or int(indices.max()) >= plane):
        raise OpNotAllowedError(f"{name}: an index lies outside the input plane of {plane} elements")


def _embedding_backward(name, args, kwargs):
    indices, n = _arg(args, kwargs, 1, "indices"), _int(_arg(args, kwargs, 2, "num_weights"), name)
    if not isinstance(indices, torch.Tensor) or indices.is_floating_point() or indices.is_complex():
        raise OpNotAllowedError(f"{name}: indices must be an integer tensor")
    if n < 0 or (indices.numel() and (int(indices.min()) < 0 or int(indices.max()) >= n)):
        raise OpNotAllowedError(f"{name}: every index must lie in [0, num_weights={n})")


def _tensors(name, *ts) -> None:
    if not all(isinstance(t, torch.Tensor) for t in ts):
        raise OpNotAllowedError(f"{name}: expected tensors")


def _softmax_backward(name, args, kwargs):
    """The kernel reads ``output`` with ``grad_output``'s sizes."""
    grad, out = _arg(args, kwargs, 0, "grad_output"), _arg(args, kwargs, 1, "output")
    _tensors(name, grad, out)
    if grad.shape != out.shape:
        raise OpNotAllowedError(f"{name}: grad_output {list(grad.shape)} and output {list(out.shape)} must have "
                                f"the same shape")


def _group_norm(name, args, kwargs):
    """N, C and HxW are given apart from the input: they must describe it."""
    backward = name.startswith("aten.native_group_norm_backward")
    x = _arg(args, kwargs, 1 if backward else 0, "input")
    first = 5 if backward else 3
    n, c, hxw = (_int(_arg(args, kwargs, first + i, key), name) for i, key in enumerate(("N", "C", "HxW")))
    group = _int(_arg(args, kwargs, first + 3, "group"), name)
    _tensors(name, x)
    if min(n, c, hxw) < 0 or group <= 0 or n * c * hxw != x.numel() or (x.dim() >= 2 and x.shape[1] != c):
        raise OpNotAllowedError(f"{name}: N, C, HxW must describe the input {list(x.shape)} (N*C*HxW elements, "
                                f"C its channels), and group must be positive")
    weight = _arg(args, kwargs, 4 if backward else 1, "weight")
    if weight is not None and (not isinstance(weight, torch.Tensor) or weight.numel() != c):
        raise OpNotAllowedError(f"{name}: weight must be None or hold C={c} elements")
    if backward:
        grad, mean, rstd = _arg(args, kwargs, 0, "grad_out"), _arg(args, kwargs, 2, "mean"), _arg(args, kwargs, 3, "rstd")
        _tensors(name, grad, mean, rstd)
        if grad.shape != x.shape or mean.numel() != n * group or rstd.numel() != n * group:
            raise OpNotAllowedError(f"{name}: grad_out must have the input's shape, mean and rstd N*group elements")


def _layer_norm_backward(name, args, kwargs):
    grad, x, shape = _arg(args, kwargs, 0, "grad_out"), _arg(args, kwargs, 1, "input"), _arg(args, kwargs, 2, "normalized_shape")
    mean, rstd = _arg(args, kwargs, 3, "mean"), _arg(args, kwargs, 4, "rstd")
    _tensors(name, grad, x, mean, rstd)
    shape = _sizes(shape, "normalized_shape", name)
    if not shape or len(shape) > x.dim() or list(x.shape[x.dim() - len(shape):]) != shape or grad.shape != x.shape:
        raise OpNotAllowedError(f"{name}: normalized_shape must be the input's trailing sizes, grad_out its shape")
    rows = math.prod(x.shape[:x.dim() - len(shape)])
    if mean.numel() != rows or rstd.numel() != rows:
        raise OpNotAllowedError(f"{name}: mean and rstd must hold one value per normalized row ({rows})")
    for i, key in ((5, "weight"), (6, "bias")):
        v = _arg(args, kwargs, i, key)
        if v is not None and (not isinstance(v, torch.Tensor) or list(v.shape) != shape):
            raise OpNotAllowedError(f"{name}: {key} must be None or of shape {shape}")


def _int(v, name) -> int:
    if type(v) is not int:
        raise OpNotAllowedError(f"{name}: expected an integer, got {type(v).__name__}")
    return v


def _arg(args, kwargs, i, key):
    if i < len(args):
        return args[i]
    return kwargs.get(key) if kwargs else None


def _checks_for(prefix: str, check) -> dict:
    return {n: check for n in ALLOWED if n.startswith(prefix + ".")}


def _shift(name, args, kwargs):
    amount = _arg(args, kwargs, 1, "other")
    if isinstance(amount, torch.Tensor):
        if amount.dtype.is_floating_point or amount.dtype.is_complex:
            raise OpNotAllowedError(f"{name}: a shift amount is an integer")
        return
    if type(amount) is not int or not 0 <= amount < 64:
        raise OpNotAllowedError(f"{name}: a shift amount is an integer in 0..63, got {amount!r:.40}")


CHECKS = {
    **_checks_for("aten.bitwise_left_shift", _shift),
    **_checks_for("aten.bitwise_right_shift", _shift),
    **_checks_for("aten.__lshift__", _shift),
    **_checks_for("aten.__rshift__", _shift),
    **_checks_for("aten.as_strided", _as_strided),
    **_checks_for("aten._reshape_alias", _reshape_alias),
    **_checks_for("aten._unsafe_view", _unsafe_view),
    **_checks_for("aten.empty_strided", _strided_factory(0)),
    **_checks_for("aten.new_empty_strided", _strided_factory(1)),
    **_checks_for("aten.max_pool2d_with_indices_backward", _max_pool_backward),
    **_checks_for("aten.embedding_dense_backward", _embedding_backward),
    **_checks_for("aten._softmax_backward_data", _softmax_backward),
    **_checks_for("aten._log_softmax_backward_data", _softmax_backward),
    **_checks_for("aten.native_group_norm", _group_norm),
    **_checks_for("aten.native_group_norm_backward", _group_norm),
    **_checks_for("aten.native_layer_norm_backward", _layer_norm_backward),
    **{n: c for base in ("native_batch_norm", "_native_batch_norm_legit", "_native_batch_norm_legit_no_training",
                         "_batch_norm_with_update", "_batch_norm_no_update", "native_batch_norm_backward",
                         "batch_norm_backward")
       for n, c in _checks_for("aten." + base, _batch_norm).items()},
}
_SCHEMA_ARGS = {n: [a.name for a in ALLOWED[n]._schema.arguments] for n in CHECKS}
# Keyed by id(op): OpOverload hashes in Python (0.2 us a lookup), an id in a set of ints does not,
# and this runs on every in-process pointer op. The ops live as long as ALLOWED holds them.
_ALLOWED_IDS = frozenset(id(op) for op in ALLOWED_OPS)
_CHECK_BY_ID = {id(ALLOWED[n]): c for n, c in CHECKS.items()}
_LAYOUT_IDS = frozenset(id(op) for op in ALLOWED_OPS if any(a.name == "layout" for a in op._schema.arguments))
# ops returning a view of an input (not an in-place result): their results are bounds-checked
_VIEW_IDS = frozenset(id(op) for op in ALLOWED_OPS
                      if any(r.alias_info is not None and not r.alias_info.is_write for r in op._schema.returns))


def check_call(op, args, kwargs) -> None:
    """Refuse (OpNotAllowedError) an op off the list, or arguments that would reach outside a
    tensor's storage. ``args``/``kwargs`` are the resolved values the op is about to run on."""
    key = id(op)
    if key not in _ALLOWED_IDS:
        raise OpNotAllowedError(f"op {op} is not on the worker's allow-list")
    check = _CHECK_BY_ID.get(key)
    if check is not None:
        check(str(op), args, kwargs)
    if kwargs and key in _LAYOUT_IDS and kwargs.get("layout") not in (None, torch.strided):
        raise OpNotAllowedError(f"{op}: only strided (dense) tensors are made on a worker")


_Tensor, _Parameter, _strided = torch.Tensor, torch.nn.Parameter, torch.strided  # read on every result


def _in_bounds(t: torch.Tensor) -> bool:
    numel = t.numel()
    if numel == 0:
        return True
    stride, offset = t.stride(), t.storage_offset()
    if offset < 0 or (stride and min(stride) < 0):  # (min's default= keyword costs 0.25 us)
        return False
    if t.is_contiguous():  # its elements fill offset .. offset + numel - 1
        last = offset + numel - 1
    else:  # offset + sum((n - 1) * s), in C: this runs on every view a plan replays
        last = offset + sum(map(operator.mul, t.shape, stride)) - sum(stride)
    return (last + 1) * t.element_size() <= t.untyped_storage().nbytes()


def check_result(op, t) -> None:
    """Refuse a result that no worker should hold: a meta or sparse tensor, or a view that
    reaches outside its storage (a backstop behind the argument checks; only view ops share
    another tensor's storage, the others allocate their own). A chain layer is judged by its
    innermost tensor; a pointer (meta by design) holds no data here."""
    while type(t) is not _Tensor and type(t) is not _Parameter:
        t = getattr(t, "__dict__", {}).get("child")
        if t is None:
            return
    if t.is_meta:
        raise OpNotAllowedError(f"{op} made a meta tensor: a worker holds data only (use device='cpu')")
    if t.layout is not _strided:
        raise OpNotAllowedError(f"{op} made a {t.layout} tensor: a worker holds dense tensors only")
    if id(op) in _VIEW_IDS and not _in_bounds(t):
        raise OpNotAllowedError(f"{op} made a view outside its storage: refused")
