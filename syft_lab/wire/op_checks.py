"""Argument checks for op families whose kernels trust their arguments (see allowlist.py).

Each check is chosen by the op's schema (argument names and types) or its family's name, so a
new overload of a family gets its family's check; ``check_for(name, op)`` returns the check of
an allowed overload, or None. The checks read the *resolved* arguments (stored tensors, not
ids) before the op runs and raise OpNotAllowedError.
"""
from __future__ import annotations

import math
import re

import torch

from ..errors import SyftError


class OpNotAllowedError(SyftError):
    """An op that is not on the allow-list, or arguments it refuses (nothing ran)."""


class _Args:
    """An op's arguments by schema name, whether given by position or keyword."""

    __slots__ = ("pos", "args", "kwargs")

    def __init__(self, pos, args, kwargs):
        self.pos, self.args, self.kwargs = pos, args, kwargs

    def __getitem__(self, key):
        i = self.pos.get(key)
        if i is not None and i < len(self.args):
            return self.args[i]
        return self.kwargs.get(key) if self.kwargs else None

    def __contains__(self, key):
        return key in self.pos


def _storage_elements(t: torch.Tensor) -> int:
    return t.untyped_storage().nbytes() // t.element_size()


def distinct_elements(t: torch.Tensor) -> torch.Tensor:
    """The view of ``t`` without its broadcast dimensions (stride 0): the same values, each
    stored element once. A check that reads values reads this: a pass over an ``expand`` to
    2**31 elements of one number, or an ``abs()`` of it (8 GiB), is what the check must prevent."""
    stride = t.stride()
    if 0 not in stride:
        return t
    return t.as_strided([1 if s == 0 else n for n, s in zip(t.shape, stride)], stride, t.storage_offset())


def value_range(t: torch.Tensor) -> tuple:
    """``(min, max)`` of a non-empty real tensor's values, without materialising a broadcast
    view or allocating a copy (aminmax reduces in place)."""
    lo, hi = torch.aminmax(distinct_elements(t))
    return lo.item(), hi.item()


def _indices_within(indices: torch.Tensor, n: int) -> bool:
    """Every index in [0, n) (an empty tensor's none)."""
    if not indices.numel():
        return True
    lo, hi = value_range(indices)
    return 0 <= lo and hi < n


def _tensor(name, v, what) -> torch.Tensor:
    if not isinstance(v, torch.Tensor):
        raise OpNotAllowedError(f"{name}: {what} must be a tensor")
    return v


def _int(v, name) -> int:
    if type(v) is not int:
        raise OpNotAllowedError(f"{name}: expected an integer, got {type(v).__name__}")
    return v


def _sizes(x, what: str, name) -> list:
    if type(x) not in (list, tuple) or not all(type(s) is int for s in x):
        raise OpNotAllowedError(f"{name}: {what} must be a list of integers")
    return list(x)


# --- views: sizes, strides and offsets ------------------------------------------------------------

def _check_view(name, elements: int, size, stride, offset) -> None:
    """A view with these sizes, strides and offset stays inside ``elements`` elements."""
    size, stride = _sizes(size, "size", name), _sizes(stride, "stride", name)
    if len(size) != len(stride):
        raise OpNotAllowedError(f"{name}: size and stride must have the same length")
    if any(s < 0 for s in size) or any(s < 0 for s in stride) or offset < 0:
        raise OpNotAllowedError(f"{name}: sizes, strides and the storage offset must not be negative")
    if 0 in size:
        return
    last = offset + sum((n - 1) * s for n, s in zip(size, stride))
    if last >= elements:
        raise OpNotAllowedError(f"{name}: a view reaching element {last} lies outside the input's storage of "
                                f"{elements} elements")


def _view_check(kind: str):
    """Ops taking ``size`` and ``stride`` lists: a view of self's storage (as_strided, _reshape_alias
    and their copies), a scatter into a copy of self (as_strided_scatter), or a factory."""
    def check(name, a: _Args):
        if kind == "factory":
            size, stride = _sizes(a["size"], "size", name), _sizes(a["stride"], "stride", name)
            if len(size) != len(stride) or any(s < 0 for s in size + stride):
                raise OpNotAllowedError(f"{name}: sizes and strides must be non-negative and of the same length")
            return
        t = _tensor(name, a["self"], "self")
        offset = a["storage_offset"]
        if kind == "scatter":  # the view is taken of a fresh, contiguous copy of self
            _check_view(name, t.numel(), a["size"], a["stride"], 0 if offset is None else _int(offset, name))
        else:
            _check_view(name, _storage_elements(t), a["size"], a["stride"],
                        t.storage_offset() if offset is None else _int(offset, name))
    return check


def _unsafe_view(name, a: _Args):
    t, size = _tensor(name, a["self"], "self"), _sizes(a["size"], "size", name)
    if size.count(-1) > 1 or any(s < -1 for s in size):
        raise OpNotAllowedError(f"{name}: bad size {size}")
    known = math.prod(s for s in size if s != -1)
    if (-1 not in size and known != t.numel()) or (-1 in size and (known == 0 or t.numel() % known)):
        raise OpNotAllowedError(f"{name}: size {size} does not hold the input's {t.numel()} elements")


# --- normalisation: per-channel tensors and the statistics a mode reads --------------------------

_NORM_ARGS = ("weight", "bias", "running_mean", "running_var", "save_mean", "save_invstd", "save_var")


def _batch_norm(name, a: _Args):
    """Per-channel tensors must be 1-d with one entry per channel (else the kernel reads past
    them), and the statistics the mode reads must be given (the kernels read them unchecked)."""
    backward = "grad_out" in a or "grad_output" in a
    x = a["input"] if "input" in a else a["self"]
    if not isinstance(x, torch.Tensor) or x.dim() < 2:
        raise OpNotAllowedError(f"{name}: the input must be a tensor of at least 2 dimensions (N, C, ...)")
    channels = x.shape[1]
    if backward:
        g = a["grad_out"] if "grad_out" in a else a["grad_output"]
        if not isinstance(g, torch.Tensor) or g.shape != x.shape:
            raise OpNotAllowedError(f"{name}: grad_out must have the input's shape {list(x.shape)}")
    given = {}
    for key in _NORM_ARGS:
        if key in a:
            v = given[key] = a[key]
            if v is not None and (not isinstance(v, torch.Tensor) or v.dim() != 1 or v.shape[0] != channels):
                raise OpNotAllowedError(f"{name}: {key} must be None or a 1-d tensor of {channels} "
                                        f"(the input's channels)")
    flag = next((k for k in ("training", "train", "update") if k in a), None)
    training = bool(a[flag]) if flag is not None else "no_update" not in name
    if backward:
        needed = ("save_mean", "save_invstd" if "save_invstd" in a else "save_var") if training \
            else ("running_mean", "running_var")
    elif name.endswith(".no_stats"):
        if not training:
            raise OpNotAllowedError(f"{name}: runs in training mode only (training=True): it has no running "
                                    f"statistics to evaluate with")
        needed = ()
    else:
        needed = () if training else ("running_mean", "running_var")
    missing = [n for n in needed if n in a and given.get(n) is None]
    if missing:
        raise OpNotAllowedError(f"{name}: {' and '.join(missing)} must be given "
                                f"({'training' if training else 'evaluation'} mode needs them)")


def _group_norm(name, a: _Args):
    """N, C and HxW are given apart from the input: they must describe it."""
    x = _tensor(name, a["input"], "input")
    n, c, hxw, group = (_int(a[k], name) for k in ("N", "C", "HxW", "group"))
    if min(n, c, hxw) < 0 or group <= 0 or n * c * hxw != x.numel() or (x.dim() >= 2 and x.shape[1] != c) \
            or c % group:
        raise OpNotAllowedError(f"{name}: N, C, HxW must describe the input {list(x.shape)} (N*C*HxW elements, "
                                f"C its channels), and group must be positive and divide C")
    weight = a["weight"]
    if weight is not None and (not isinstance(weight, torch.Tensor) or weight.numel() != c):
        raise OpNotAllowedError(f"{name}: weight must be None or hold C={c} elements")
    if "bias" in a and a["bias"] is not None and (not isinstance(a["bias"], torch.Tensor) or a["bias"].numel() != c):
        raise OpNotAllowedError(f"{name}: bias must be None or hold C={c} elements")
    if "grad_out" in a:
        grad, mean, rstd = (_tensor(name, a[k], k) for k in ("grad_out", "mean", "rstd"))
        if grad.shape != x.shape or mean.numel() != n * group or rstd.numel() != n * group:
            raise OpNotAllowedError(f"{name}: grad_out must have the input's shape, mean and rstd N*group elements")


def _layer_norm_backward(name, a: _Args):
    grad, x = _tensor(name, a["grad_out"], "grad_out"), _tensor(name, a["input"], "input")
    mean, rstd = _tensor(name, a["mean"], "mean"), _tensor(name, a["rstd"], "rstd")
    shape = _sizes(a["normalized_shape"], "normalized_shape", name)
    if not shape or len(shape) > x.dim() or list(x.shape[x.dim() - len(shape):]) != shape or grad.shape != x.shape:
        raise OpNotAllowedError(f"{name}: normalized_shape must be the input's trailing sizes, grad_out its shape")
    rows = math.prod(x.shape[:x.dim() - len(shape)])
    if mean.numel() != rows or rstd.numel() != rows:
        raise OpNotAllowedError(f"{name}: mean and rstd must hold one value per normalized row ({rows})")
    for key in ("weight", "bias"):
        v = a[key]
        if v is not None and (not isinstance(v, torch.Tensor) or list(v.shape) != shape):
            raise OpNotAllowedError(f"{name}: {key} must be None or of shape {shape}")


def _softmax_backward(name, a: _Args):
    """The kernel reads ``output`` with ``grad_output``'s sizes."""
    grad, out = _tensor(name, a["grad_output"], "grad_output"), _tensor(name, a["output"], "output")
    if grad.shape != out.shape:
        raise OpNotAllowedError(f"{name}: grad_output {list(grad.shape)} and output {list(out.shape)} must have "
                                f"the same shape")


def _dist_backward(name, a: _Args):
    """cdist/pdist backward read grad and the forward result with the sizes the inputs imply."""
    if "x1" in a:
        x1, x2 = _tensor(name, a["x1"], "x1"), _tensor(name, a["x2"], "x2")
        grad, result = _tensor(name, a["grad"], "grad"), _tensor(name, a["cdist"], "cdist")
        if x1.dim() < 2 or x2.dim() < 2 or x1.shape[-1] != x2.shape[-1] or x1.shape[:-2] != x2.shape[:-2]:
            raise OpNotAllowedError(f"{name}: x1 and x2 must be [..., P, M] and [..., R, M]")
        shape = (*x1.shape[:-1], x2.shape[-2])
    else:
        x = _tensor(name, a["self"], "self")
        grad, result = _tensor(name, a["grad"], "grad"), _tensor(name, a["pdist"], "pdist")
        if x.dim() != 2:
            raise OpNotAllowedError(f"{name}: self must be 2-d")
        shape = (x.shape[0] * (x.shape[0] - 1) // 2,)
    if tuple(grad.shape) != shape or tuple(result.shape) != shape:
        raise OpNotAllowedError(f"{name}: grad and the forward result must have shape {list(shape)}")


def _fused_optimizer(name, a: _Args):
    """Fused optimizer steps walk their tensor lists together, element by element, unchecked (a
    param and its grad of different shapes killed a worker): one length, the i-th of one shape."""
    lists = {k: a[k] for k in a.pos if type(a[k]) in (list, tuple) and a[k] and isinstance(a[k][0], torch.Tensor)}
    lengths = {len(v) for v in lists.values()}
    if len(lengths) > 1:
        raise OpNotAllowedError(f"{name}: its tensor lists must have one length, got "
                                f"{', '.join(f'{k}: {len(v)}' for k, v in lists.items())}")
    for t in lists.pop("state_steps", ()):  # a step count per param
        if _tensor(name, t, "each step").numel() != 1:
            raise OpNotAllowedError(f"{name}: each of state_steps must hold one element")
    for i, tensors in enumerate(zip(*lists.values())):
        shapes = {tuple(_tensor(name, t, "each list element").shape) for t in tensors}
        if len(shapes) > 1:
            raise OpNotAllowedError(f"{name}: the tensors at position {i} of its lists must have one shape, got "
                                    f"{', '.join(str(list(s)) for s in shapes)}")
    for key in ("grad_scale", "found_inf"):
        v = a[key] if key in a else None
        if v is not None and _tensor(name, v, key).numel() != 1:
            raise OpNotAllowedError(f"{name}: {key} must hold one element")


def _weight_norm_backward(name, a: _Args):
    """weight_norm's backward reads saved_g and saved_norms with the sizes saved_v implies."""
    grad, v = _tensor(name, a["grad_w"], "grad_w"), _tensor(name, a["saved_v"], "saved_v")
    g, norms = _tensor(name, a["saved_g"], "saved_g"), _tensor(name, a["saved_norms"], "saved_norms")
    dim = _int(a["dim"], name)
    if v.dim() == 0 or not -v.dim() <= dim < v.dim():
        raise OpNotAllowedError(f"{name}: dim must index a dimension of saved_v")
    dim %= v.dim()
    shape = tuple(v.shape[d] if d == dim else 1 for d in range(v.dim()))
    if grad.shape != v.shape or tuple(g.shape) != shape or tuple(norms.shape) != shape:
        raise OpNotAllowedError(f"{name}: grad_w must have saved_v's shape {list(v.shape)}, saved_g and "
                                f"saved_norms the shape {list(shape)}")


def _contiguous_weight_norm(name, a: _Args):
    """_weight_norm_interface's CPU kernel reads v and g as contiguous memory (its public wrapper,
    _weight_norm, makes them so): a stepped or overlapping v read bytes outside its elements, and
    returned them (the seed-45 fuzz: wrong norms and another allocation's bytes in the result)."""
    for key in ("v", "g"):
        if not _tensor(name, a[key], key).is_contiguous():
            raise OpNotAllowedError(f"{name}: {key} must be contiguous (its kernel reads it as contiguous memory; "
                                    f"torch._weight_norm, the public op, makes it so)")


def _cum_helper_outputs(name, a: _Args):
    """cummin's and cummax's helpers write into the values and indices their public op made:
    of self's shape, values of self's dtype, indices int64, and a dim already wrapped. Anything
    else made the kernel write outside them (the seed-45 and seed-46 fuzz: a negative dim, then
    indices of another shape; glibc aborted on the corrupted heap). torch.cummin/cummax make them."""
    x, dim = _tensor(name, a["self"], "self"), _int(a["dim"], name)
    values, indices = _tensor(name, a["values"], "values"), _tensor(name, a["indices"], "indices")
    if not 0 <= dim < max(x.dim(), 1):
        raise OpNotAllowedError(f"{name}: dim must be in [0, {max(x.dim(), 1)}) (this internal helper takes a "
                                f"wrapped dim; torch.cummin and torch.cummax take a negative one)")
    if values.shape != x.shape or indices.shape != x.shape or values.dtype != x.dtype or indices.dtype != torch.int64:
        raise OpNotAllowedError(f"{name}: values and indices must have self's shape {list(x.shape)}, values self's "
                                f"dtype and indices int64 (this internal helper writes into them as made by "
                                f"torch.cummin and torch.cummax, which take any)")


def _transform_bias_rescale_qkv(name, a: _Args):
    """Multi-head attention's fast-path internal splits qkv [B, T, 3*D] into num_heads heads unchecked."""
    qkv, bias = _tensor(name, a["qkv"], "qkv"), _tensor(name, a["qkv_bias"], "qkv_bias")
    heads = _int(a["num_heads"], name)
    if (qkv.dim() != 3 or bias.dim() != 1 or bias.shape[0] != qkv.shape[2] or heads < 1
            or qkv.shape[2] % (3 * heads)):
        raise OpNotAllowedError(f"{name}: qkv must be [B, T, 3*D], qkv_bias [3*D] and num_heads divide D")


# --- index tensors that kernels use unchecked ------------------------------------------------------

def _pool_backward(dims: int):
    """max-pool backward writes grad_input[index] unchecked: every index must lie in its input plane."""
    def check(name, a: _Args):
        grad, x, indices = a["grad_output"], a["self"], a["indices"]
        if not all(isinstance(v, torch.Tensor) for v in (grad, x, indices)) or x.dim() not in (dims + 1, dims + 2):
            raise OpNotAllowedError(f"{name}: takes tensors grad_output, self ({dims + 1}-d or {dims + 2}-d) and "
                                    f"indices")
        if indices.dtype != torch.int64 or indices.shape != grad.shape or grad.shape[:-dims] != x.shape[:-dims]:
            raise OpNotAllowedError(f"{name}: indices must be int64 with grad_output's shape, and grad_output must "
                                    f"match self in all but the last {dims} dimensions")
        plane = math.prod(x.shape[-dims:])
        if not _indices_within(indices, plane):
            raise OpNotAllowedError(f"{name}: an index lies outside the input plane of {plane} elements")
    return check


def _embedding_backward(name, a: _Args):
    """Embedding backward kernels add into grad_weight[index] unchecked."""
    indices, n = a["indices"], _int(a["num_weights"], name)
    if not isinstance(indices, torch.Tensor) or indices.is_floating_point() or indices.is_complex():
        raise OpNotAllowedError(f"{name}: indices must be an integer tensor")
    if n < 0 or not _indices_within(indices, n):
        raise OpNotAllowedError(f"{name}: every index must lie in [0, num_weights={n})")


def _shift(name, a: _Args):
    amount = a["other"]
    if isinstance(amount, torch.Tensor):
        if amount.dtype.is_floating_point or amount.dtype.is_complex:
            raise OpNotAllowedError(f"{name}: a shift amount is an integer")
        return
    if type(amount) is not int or not 0 <= amount < 64:
        raise OpNotAllowedError(f"{name}: a shift amount is an integer in 0..63, got {amount!r:.40}")


_SCALE_ARGS = ("scales", "scales_h", "scales_w", "scales_d", "scale_factors")


def _positive_scales(name, a: _Args):
    """An upsampling kernel maps each output index to a source index by its scale factors: a
    zero, negative or non-finite one reads outside its input (the property fuzzer: a lanczos
    upsample with scale -1 read memory it was never given)."""
    for key in _SCALE_ARGS:
        if key not in a:
            continue
        v = a[key]
        for s in (v if type(v) in (list, tuple) else [v]):
            if s is not None and not (isinstance(s, (int, float)) and 0 < s < float("inf")):
                raise OpNotAllowedError(f"{name}: a scale factor is a positive finite number, got {key}={v!r:.40}")


def _random_range(name, a: _Args):
    """random_ on a floating tensor draws integers in [from, to): torch warns (an error to come)
    when from or to - 1 lies outside the dtype's exact integers, ±2**digits, and a float32 from of
    2**63 - 1 (cast to the float 2**63, past int64) passed its range check and hung the kernel for
    good (the seed-41 long run: a worker stalled). Integral dtypes get torch's own bounds check."""
    x = a["self"]
    if not isinstance(x, torch.Tensor) or not x.dtype.is_floating_point:
        return
    bound = 2 ** (round(-math.log2(torch.finfo(x.dtype).eps)) + 1)  # (float32: 2**24)
    for key, shift in (("from", 0), ("to", 1)):
        v = a[key] if key in a else None
        if v is not None and not (type(v) is int and -bound <= v - shift <= bound):
            raise OpNotAllowedError(f"{name}: {key}={v!r:.40} is outside the integers a {x.dtype} holds exactly "
                                    f"(from and to - 1 within ±2**{bound.bit_length() - 1})")


def _finite_matrix(name, a: _Args):
    """LAPACK's general eigensolver (geev, behind linalg_eigvals and _linalg_eigvals) segfaults on an
    inf or NaN entry (the seed-42 long run: two worker deaths); linalg_eig checks for them first,
    its eigenvalues-only paths do not. The same check, before the kernel: every entry finite."""
    x = a["self"]
    if not isinstance(x, torch.Tensor) or not x.numel() or not (x.dtype.is_floating_point or x.dtype.is_complex):
        return
    v = distinct_elements(x)  # (each stored value once, reduced in place: no copy of a broadcast)
    if v.is_complex():
        v = torch.view_as_real(v.resolve_conj())
    lo, hi = value_range(v)
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise OpNotAllowedError(f"{name}: input tensor should not contain infs or NaNs (as torch.linalg.eig says)")


def _negatable_power(name, a: _Args):
    """matrix_power(x, n) takes a negative n as the inverse's power -n: -(-2**63) overflows to itself,
    and the kernel never returns (the seed-43 long run: a stall). n is above int64's minimum."""
    n = a["n"]
    if type(n) is int and n <= -2**63:
        raise OpNotAllowedError(f"{name}: n={n} has no negation in int64 (the inverse's power -n overflows)")


# --- int arguments that name a C++ enum -------------------------------------------------------------
# Their schema type is a plain int, so only their names tell (torch casts any int to the enum:
# a grid sampler's mode 9 or an fft's normalization 9 runs silently on garbage, other kernels
# assert or read out of bounds). (pattern on the base name, argument, legal values, what they mean)
INT_ENUMS = (
    (r"", "reduction", (0, 1, 2), "0 none, 1 mean, 2 sum: at::Reduction"),
    (r"grid_sampler", "interpolation_mode", (0, 1, 2), "0 bilinear, 1 nearest, 2 bicubic"),
    (r"grid_sampler", "padding_mode", (0, 1, 2), "0 zeros, 1 border, 2 reflection"),
    (r"^_fft_", "normalization", (0, 1, 2), "0 none, 1 by sqrt(n), 2 by n"),
    (r"embedding_bag", "mode", (0, 1, 2), "0 sum, 1 mean, 2 max"),
    (r"^_pad_enum$", "mode", (0, 1, 2, 3), "0 constant, 1 reflect, 2 replicate, 3 circular"),
    (r"^hash_tensor$", "mode", (0,), "0 xor_sum"),
    (r"", "mask_type", (0, 1, 2), "0 an L x L mask, 1 a B x L padding mask, 2 a generic one"),
    (r"cdist", "compute_mode", (0, 1, 2), "0 by the sizes, 1 always by matmul, 2 never by matmul"),
    (r"^_batch_norm_impl_index", "impl_index", (0,), "0 the native kernel; 1 and 2 are other backends'"),
)
_INT_ENUM_RES = [(re.compile(p), arg, (frozenset(legal), f"{', '.join(map(str, legal))} ({what})"))
                 for p, arg, legal, what in INT_ENUMS]
# names an int argument naming an enum is likely to have: every such argument of an allowed
# overload must be in INT_ENUMS (tests/wire/test_enum_args.py keeps a new torch honest)
ENUM_LIKE_NAME = re.compile(r"(^|_)(mode|reduction|normalization|type|format|layout|kind|impl_index)$")


def int_enums(op) -> dict:
    """``{argument name: (legal values, their meaning)}`` of an overload's int enum arguments."""
    base = op._schema.name.split("::")[-1]
    out = {}
    for a in op._schema.arguments:
        if str(a.real_type) not in ("int", "Optional[int]"):
            continue
        for pattern, arg, legal in _INT_ENUM_RES:
            if arg == a.name and pattern.search(base):
                out[a.name] = legal
                break
    return out


# (pattern on the base name, check, what it guards): the families of checks, in the order tried
FAMILIES = (
    (r"batch_norm", _batch_norm, "per-channel tensors of the input's channels; the statistics the mode reads"),
    (r"^native_group_norm", _group_norm, "N, C, HxW and group describe the input; weight, mean, rstd sized"),
    (r"^native_layer_norm_backward$", _layer_norm_backward, "normalized_shape, mean and rstd describe the input"),
    (r"^_(log_)?softmax_backward_data$", _softmax_backward, "grad_output and output of one shape"),
    (r"^(max_pool2d_with_indices|fractional_max_pool2d|adaptive_max_pool2d)_backward$", _pool_backward(2),
     "int64 indices of grad's shape, each inside its input plane"),
    (r"^(max_pool3d_with_indices|fractional_max_pool3d|adaptive_max_pool3d)_backward$", _pool_backward(3),
     "int64 indices of grad's shape, each inside its input volume"),
    (r"^(embedding_dense_backward|_embedding_bag_dense_backward|_embedding_bag_backward"
     r"|_embedding_bag_sparse_backward|embedding_backward)$", _embedding_backward,
     "every index in [0, num_weights)"),
    (r"^(bitwise_left_shift|bitwise_right_shift|__lshift__|__rshift__|__ilshift__|__irshift__"
     r"|bitwise_left_shift_|bitwise_right_shift_)$", _shift, "an integer shift amount, a scalar one in 0..63"),
    (r"^_(c|p)dist_backward$", _dist_backward, "grad and the forward result of the shape the inputs imply"),
    (r"^_unsafe_view$", _unsafe_view, "the new size holds exactly the input's elements"),
    (r"^_fused_(sgd|adam|adamw|adagrad)_?$", _fused_optimizer,
     "tensor lists of one length, the i-th tensors of one shape (a step count: one element); grad_scale and "
     "found_inf one element"),
    (r"^_cum(min|max)_helper$", _cum_helper_outputs, "values and indices of self's shape (values of its dtype, "
                                                     "indices int64) and dim in [0, self.dim()): the helper writes into "
                                                     "what its public op made (anything else: writes outside them)"),
    (r"^_weight_norm_interface$", _contiguous_weight_norm, "v and g contiguous (its kernel reads them as contiguous "
                                                           "memory: a stepped v returned bytes outside its elements)"),
    (r"^_weight_norm_interface_backward$", _weight_norm_backward,
     "grad_w of saved_v's shape, saved_g and saved_norms of the shape dim implies"),
    (r"^_transform_bias_rescale_qkv$", _transform_bias_rescale_qkv, "qkv [B, T, 3*D], its bias [3*D], heads divide D"),
    (r"^(_?linalg_eigvals|linalg_eig)$", _finite_matrix, "every entry finite (LAPACK's geev segfaulted on inf and "
                                                          "NaN, which linalg_eig refuses and eigvals did not)"),
    (r"^(linalg_)?matrix_power$", _negatable_power, "n above int64's minimum (a negative n is the inverse's power "
                                                     "-n: -(-2**63) overflowed and hung the kernel)"),
    (r"^random_?$", _random_range, "on a floating self, from and to - 1 within ±2**digits (a float32 from of "
                                   "2**63 - 1 hung the kernel)"),
    (r"^_?upsample_", _positive_scales, "scale factors positive and finite (a negative one read outside the input)"),
)
_FAMILY_RES = [(re.compile(p), check, what) for p, check, what in FAMILIES]
FOREACH_RULE = "every tensor and scalar list of one length"
FIXED_LIST_RULE = ("internals (`_*`) and backward kernels (`*_backward`), which trust the lists autograd gives "
                   "them: an `int[N]` argument (N > 1) holds 1 or N integers (an empty one read past its end); a "
                   "pooling kernel's `stride` may be empty (its default: the kernel size)")


def trusts_fixed_lists(base: str) -> bool:
    return base.startswith("_") or base.endswith("_backward")


def _fixed_lengths(sized, empty_ok=()):
    """``sized``: (argument name, N) of the schema's int[N] arguments; ``empty_ok``: the names an
    empty list means a default for (a pooling kernel's stride: its kernel size)."""
    def check(name, a: _Args):
        for key, n in sized:
            v = a[key]
            if type(v) in (list, tuple) and len(v) not in (1, n) and not (v == [] and key in empty_ok):
                raise OpNotAllowedError(f"{name}: {key} must hold 1 or {n} integers, got {len(v)}")
    return check
VIEW_RULE = "ops taking `size` and `stride` lists: non-negative, and the view's last element " \
            "(offset + sum((size-1)*stride)) inside the input's storage (factories: non-negative, same length)"


def _view_kind(base: str, names: set) -> str | None:
    if not {"size", "stride"} <= names:
        return None
    if "self" not in names or "empty" in base or base.startswith("new_"):
        return "factory"
    return "scatter" if base.endswith("_scatter") else "view"


def _same_lengths(list_args):
    """_foreach_* ops: their tensor (and scalar) lists pair up element by element."""
    def check(name, a: _Args):
        lengths = {key: len(a[key]) for key in list_args if type(a[key]) in (list, tuple)}
        if len(set(lengths.values())) > 1:
            raise OpNotAllowedError(f"{name}: its lists must have one length, got "
                                    f"{', '.join(f'{k}: {n}' for k, n in lengths.items())}")
    return check


# --- internal overloads on empty tensors ------------------------------------------------------

# Internal overloads (`_name`, not `__dunder__`) are what public wrappers call after checking
# their arguments; called directly with an empty tensor some divide by a zero size or index its
# first element (_weight_norm_interface: SIGFPE, flash attention for CPU: SIGFPE, _cummin_helper:
# SIGSEGV, all on a 0-element input). The class rule: an internal overload whose CPU kernel does
# not run its meta function's checks first (allowlist._meta_source 'separate') refuses any empty
# tensor argument, except those that compute nothing per element (conversions, views, metadata).
EMPTY_SAFE_INTERNALS = re.compile(
    r"^_(to_copy|to_cpu|conj|conj_copy|conj_physical|neg_view|neg_view_copy|reshape_alias_copy|reshape_copy"
    r"|reshape_from_tensor|unsafe_view|shape_as_tensor|version|has_compatible_shallow_copy_type"
    r"|has_same_storage_numel|is_zerotensor|is_all_true|is_any_true|cast_[A-Za-z]+|fft_c2c|fft_r2c|fft_c2r"
    r"|local_scalar_dense|dim_arange|linalg_check_errors|unique|unique2)$")  # (_unique*: torch.unique's)
EMPTY_INPUT_RULE = ("internal overloads (`_*`) whose CPU kernel does not run the meta checks first: no empty "
                    "tensor argument, except conversions, views, metadata queries and unique (their public wrappers "
                    "check sizes an internal call skips; several divide by a zero size)")


def refuses_empty_inputs(base: str) -> bool:
    """Whether internal overload ``base`` (whose meta checks are separate) gets the empty-input rule."""
    return base.startswith("_") and not base.startswith("__") and not base.startswith("_foreach_") \
        and not EMPTY_SAFE_INTERNALS.search(base)


def _empty_tensor_names(args, kwargs):
    for i, v in enumerate(list(args) + list(kwargs.values() if kwargs else ())):
        for t in (v if type(v) in (list, tuple) else (v,)):
            if isinstance(t, torch.Tensor) and t.numel() == 0:
                yield i


def with_empty_refusal(check):
    """``check`` (or None) followed by the empty-input rule."""
    def run(op_name, args, kwargs):
        if check is not None:
            check(op_name, args, kwargs)
        if next(_empty_tensor_names(args, kwargs), None) is not None:
            raise OpNotAllowedError(f"{op_name}: an internal overload refuses empty tensors (its public "
                                    f"wrapper checks their sizes; call that instead)")
    return run


# --- ops returning a list whose length follows from an int -----------------------------------

# split_copy(x expanded to 2**31 elements, 4) makes 2**29 tensors: each costs a Python object and
# a meta tensor in shape inference, so the list's length is bounded before anything runs
# (above limits.DEFAULT_MAX_OBJECTS, so a worker's own object quota, with its clearer words, refuses
# first where it can; this bound keeps the meta run's tensors of the op itself to ~0.3 GB)
MAX_LIST_OUTPUTS = 2**18
LIST_OUTPUT_RULE = f"split, chunk, unbind and tensor_split families: at most {MAX_LIST_OUTPUTS} outputs"
_LIST_OUTPUT_OPS = re.compile(r"^(unsafe_)?(split|split_copy|chunk|unbind|unbind_copy|tensor_split|[hvd]split)$")


def _list_output_count(base: str, a: _Args) -> int:
    x = a["self"]
    if not isinstance(x, torch.Tensor):
        return 0
    default_dim = {"hsplit": 1 if x.dim() > 1 else 0, "dsplit": 2}.get(base.removeprefix("unsafe_"), 0)
    dim = a["dim"] if "dim" in a and type(a["dim"]) is int else default_dim
    size = x.shape[dim] if x.dim() and -x.dim() <= dim < x.dim() else 1
    for key in ("split_size", "chunks", "sections"):
        if key in a and type(a[key]) is int:
            v = a[key]
            if key == "split_size":
                return -(-size // v) if v > 0 else 0
            return v if key == "sections" or size == 0 else min(v, size)  # (chunks of an empty dim: chunks)
    for key in ("indices", "split_sizes", "tensor_indices_or_sections"):
        if key in a and type(a[key]) in (list, tuple):
            return len(a[key]) + (key != "split_sizes")
    return size if base.startswith("unbind") else 0


def _list_outputs(name, a: _Args):
    n = _list_output_count(name.split(".")[1], a)
    if n > MAX_LIST_OUTPUTS:
        raise OpNotAllowedError(f"{name} would return {n} tensors, more than the {MAX_LIST_OUTPUTS} a worker "
                                f"makes in one op: nothing ran. Split into larger pieces")


# --- in-place internals and their result type ---------------------------------------------------

# add_ refuses a result type its self cannot hold; the internal _add_relu_ casts a wider one into
# self but returns a new tensor of the wider dtype (plain torch: float64 from a float32 self), while
# its schema, meta run and every pointer say it returns self. The class rule: an in-place internal
# overload (`_*_`, its self written and returned) takes operands (tensors and scalars it does not
# write) whose promotion with self is self's dtype.
INPLACE_RESULT_RULE = ("in-place internals (`_*_`) returning their self: operands promote to self's dtype (one "
                       "returned a new tensor of a wider dtype instead of self)")


def _returns_written_self(op) -> bool:
    schema = op._schema
    args, returns = schema.arguments, schema.returns
    return bool(args) and args[0].name == "self" and str(args[0].type) == "Tensor" \
        and args[0].alias_info is not None and args[0].alias_info.is_write and len(returns) == 1 \
        and returns[0].alias_info is not None and returns[0].alias_info.is_write


def _promotes_to_self(operands):
    def check(name, a: _Args):
        x = a["self"]
        if not isinstance(x, torch.Tensor):
            return
        for key in operands:
            v = a[key]
            if isinstance(v, (torch.Tensor, int, float, complex, bool)) and torch.result_type(x, v) != x.dtype:
                raise OpNotAllowedError(f"{name}: {key} promotes {x.dtype} to {torch.result_type(x, v)}, which "
                                        f"self cannot hold (in place, use the public op: add_, ...)")
    return check


# --- arguments a kernel writes into, besides self -------------------------------------------

# An op that writes into an argument other than self and its out= forms (rrelu_with_noise's noise,
# the cummin/cummax helpers' values and indices, batch norm's running statistics, the AMP scaler's
# found_inf and growth_tracker) gets that tensor from its public op, freshly made: its kernel writes
# it as if each element had a place of its own. A self-overlapping one (a view whose elements share
# memory) made rrelu_with_noise write past its storage (the seed-47 fuzz: glibc aborted). The class
# rule: such an argument's elements are distinct places in memory. (torch's TensorIterator refuses
# overlapping outputs of the ops it runs itself; these kernels do not go through it.)
WRITTEN_ARGUMENT_RULE = ("arguments a kernel writes into besides self and out= (noise, values, indices, running "
                         "statistics, found_inf, ...): no two elements share memory")


def distinct_places(t: torch.Tensor) -> bool:
    """Whether every element of ``t`` has a memory place of its own: with its dimensions sorted by
    stride, each stride passes the extent of the ones before it (sufficient; a tensor that fails
    it may still be free of overlap, but only an as_strided view gets there)."""
    extent = 1
    for size, stride in sorted(((n, s) for n, s in zip(t.shape, t.stride()) if n > 1), key=lambda d: d[1]):
        if stride < extent:
            return False
        extent += (size - 1) * stride
    return True


def written_arguments(op) -> list:
    """The arguments ``op``'s kernel writes into besides self and its out= tensors."""
    return [a.name for a in op._schema.arguments if a.alias_info is not None and a.alias_info.is_write
            and a.name != "self" and not a.kwarg_only and not a.name.startswith("out")]


def _written_arguments(names: list):
    def check(name, a: _Args):
        for key in names:
            v = a[key] if key in a else None
            for t in (v if type(v) in (list, tuple) else (v,)):  # (the fused optimizers write tensor lists)
                if isinstance(t, torch.Tensor) and t.numel() > 1 and not distinct_places(t):
                    raise OpNotAllowedError(f"{name}: {key} is written by the kernel and must not be a view whose "
                                            f"elements share memory (an expand or an overlapping as_strided): pass a "
                                            f"fresh tensor")
    return check


def check_for(name: str, op):
    """The argument check of an allowed overload, or None."""
    base = name.split(".")[1]
    names = [a.name for a in op._schema.arguments]
    pos = {n: i for i, n in enumerate(names)}
    checks = []
    if base.startswith("_foreach_"):
        checks.append(_same_lengths([a.name for a in op._schema.arguments if str(a.real_type).startswith("List[")
                                     and ("Tensor" in str(a.real_type) or "number" in str(a.real_type))]))
    if trusts_fixed_lists(base):
        sized = [(a.name, a.N) for a in op._schema.arguments if a.N is not None and a.N > 1
                 and str(a.real_type).startswith("List[") and ("int" in str(a.real_type) or "SymInt" in str(a.real_type))]
        if sized:
            checks.append(_fixed_lengths(sized, ("stride",) if "pool" in base else ()))
    if _LIST_OUTPUT_OPS.search(base):
        checks.append(_list_outputs)
    if base.startswith("_") and not base.startswith("__") and base.endswith("_") and _returns_written_self(op):
        operands = [a.name for a in op._schema.arguments[1:] if a.alias_info is None
                    and str(a.real_type) in ("Tensor", "number")]
        if operands:
            checks.append(_promotes_to_self(operands))
    written = written_arguments(op)
    if written:
        checks.append(_written_arguments(written))
    kind = _view_kind(base, set(names))
    if kind is not None:
        checks.append(_view_check(kind))
    for pattern, check, _ in _FAMILY_RES:
        if pattern.search(base):
            checks.append(check)
            break
    if not checks:
        return None

    def run(op_name, args, kwargs):
        a = _Args(pos, args, kwargs)
        for check in checks:
            try:
                check(op_name, a)
            except OpNotAllowedError:
                raise
            except (TypeError, IndexError, AttributeError, ValueError, RuntimeError, OverflowError) as e:
                raise OpNotAllowedError(f"{op_name}: arguments of the wrong kind ({type(e).__name__}: "
                                        f"{str(e)[:200]})") from None
    return run
