"""How much work an op costs, bounded from shapes and arguments before it runs.

A worker runs one client's command at a time, so an op that runs for minutes stalls every other
client. The work of an op is estimated in element operations from its inputs' and outputs'
sizes (the outputs from the meta run) and, for families whose cost grows faster than their
sizes, from the arguments that make it grow: a pooling window, a convolution's kernel, a
contraction's inner dimension, a matrix's order, a sort's log factor, a polynomial's degree,
the index tensors of an in-place write. An op over ``MAX_OP_WORK`` is refused
(QuotaExceededError, in allowlist.check_call) before it runs.

Every op pays at least its largest tensor's logical size: a broadcast view (``expand``) has few
bytes but many elements, and an in-place op on one (``index_put_`` into a 2**34-element
``as_strided`` view of one number) touches them all.
"""
from __future__ import annotations

import math
import re

import torch

from ..errors import QuotaExceededError
from .op_checks import _Args, distinct_elements, value_range

# About 10 s of scalar element work on one core (avg_pool2d measured ~1e9 window elements/s),
# well under a second for BLAS contractions: a 2048 x 2048 x 2048 matmul (2**33) is allowed.
MAX_OP_WORK = 2**33


class Family:
    """A cost formula for ops whose work grows faster than their sizes."""

    __slots__ = ("name", "work", "data_sized", "pos", "what")

    def __init__(self, name, work, what, data_sized=False, pos=None):
        self.name, self.work, self.what, self.data_sized, self.pos = name, work, what, data_sized, pos

    def bound(self, pos):
        return Family(self.name, self.work, self.what, self.data_sized, pos)


def _tensors(values):
    for v in values:
        if isinstance(v, torch.Tensor):
            yield v
        elif type(v) in (list, tuple):
            for w in v:
                if isinstance(w, torch.Tensor):
                    yield w


# what one output tensor costs beyond its elements (a TensorImpl, a Python object, a stored
# entry), in element operations: 2**29 empty outputs of a split are not free
OUTPUT_OVERHEAD = 1024


def _largest(args, kwargs, out_numels) -> int:
    """The linear term: the largest tensor among the arguments and outputs (logical elements)."""
    n = max((t.numel() for t in _tensors(list(args) + (list(kwargs.values()) if kwargs else []))), default=0)
    if out_numels:
        n = max(n, sum(out_numels))
    return n


def _spatial(name: str, default: int) -> int:
    m = re.search(r"([123])d", name)
    return int(m.group(1)) if m else default


def _window(name, a, base):
    ks = a["kernel_size"]
    ks = [abs(int(k)) for k in ks] if type(ks) in (list, tuple) else [abs(int(ks or 1))]
    d = _spatial(name, len(ks))
    window = ks[0] ** d if len(ks) == 1 else math.prod(ks)
    return base * max(window, 1)


def _adaptive(name, a, base):
    return base * 2 ** _spatial(name, 2)


def _conv(name, a, base):
    w = a["weight"]
    if not isinstance(w, torch.Tensor) or w.dim() == 0:
        return base
    per = w.numel() // max(w.shape[2] if name.startswith("aten.conv_tbc") and w.dim() > 2 else w.shape[0], 1)
    return base * max(per, 1)


# contraction ops: (left operand, right operand, which dim of the right one is the free one)
_CONTRACTIONS = {
    "mm": ("self", "mat2", -1), "bmm": ("self", "mat2", -1), "_int_mm": ("self", "mat2", -1),
    "addmm": ("mat1", "mat2", -1), "addmm_": ("mat1", "mat2", -1), "_addmm_activation": ("mat1", "mat2", -1),
    "addmv": ("mat", "vec", -1), "addmv_": ("mat", "vec", -1), "mv": ("self", "vec", -1),
    "baddbmm": ("batch1", "batch2", -1), "baddbmm_": ("batch1", "batch2", -1),
    "addbmm": ("batch1", "batch2", -1), "addbmm_": ("batch1", "batch2", -1),
    "dot": ("self", "tensor", -1), "vdot": ("self", "other", -1), "linear": ("input", "weight", -2),
    "_cdist_forward": ("x1", "x2", -2), "_cdist_backward": ("x1", "x2", -2), "_euclidean_dist": ("x1", "x2", -2),
    "_pdist_forward": ("self", "self", -2), "_pdist_backward": ("self", "self", -2),
    "_compute_linear_combination": ("coefficients", "input", -1), "matmul": ("self", "other", -1),
    "cdist": ("x1", "x2", -2), "pdist": ("input", "input", -2), "inner": ("self", "other", -1),
    "chain_matmul": None, "tensordot": ("self", "other", -1),
}


def _einsum(name, a, base):
    """einsum: the product of every index letter's size (each output element sums over the rest)."""
    equation, operands = a["equation"], a["tensors"]
    if type(equation) is not str or type(operands) not in (list, tuple):
        return base
    sizes, batch = {}, 1
    for term, t in zip(equation.split("->")[0].split(","), operands):
        term = term.strip()
        if not isinstance(t, torch.Tensor):
            return base
        letters = term.replace("...", "")
        ellipsis_dims = t.dim() - len(letters)
        if "..." in term and ellipsis_dims > 0:
            at = term.index("...")
            batch = max(batch, math.prod(t.shape[at:at + ellipsis_dims]))
        dims = [d for d in range(t.dim()) if not ("..." in term and term.index("...") <= d
                                                    < term.index("...") + ellipsis_dims)]
        for letter, d in zip(letters, dims):
            sizes[letter] = max(sizes.get(letter, 1), t.shape[d])
    return max(base, batch * math.prod(sizes.values()))


def _tensordot(name, a, base):
    x, y, dims = a["self"], a["other"], a["dims_self"]
    if not isinstance(x, torch.Tensor) or not isinstance(y, torch.Tensor) or type(dims) not in (list, tuple):
        return base
    contracted = math.prod(x.shape[d] for d in dims)
    return max(base, x.numel() * (y.numel() // max(contracted, 1)))


def _recurrent(name, a, tensors):
    """RNN, LSTM, GRU (and cells): every step multiplies each row by every weight."""
    if not tensors or tensors[0].dim() == 0:
        return 0
    x = tensors[0]
    rows = x.numel() // max(x.shape[-1], 1)
    return rows * sum(t.numel() for t in tensors[1:] if t.dim() == 2)


def _ctc(name, a, base):
    log_probs, targets = a["log_probs"], a["targets"]
    if not isinstance(log_probs, torch.Tensor) or not isinstance(targets, torch.Tensor) or log_probs.dim() < 2:
        return base
    longest = targets.shape[-1] if targets.dim() > 1 else targets.numel()
    return max(base, (log_probs.numel() // max(log_probs.shape[-1], 1)) * (2 * longest + 1))


def _embedding_bag(name, a, base):
    w, indices = a["weight"], a["indices"]
    if not isinstance(w, torch.Tensor) or not isinstance(indices, torch.Tensor) or w.dim() < 2:
        return base
    return max(base, indices.numel() * w.shape[-1])


def _multilabel(name, a, base):
    x = a["self"]
    return base * (x.shape[-1] if isinstance(x, torch.Tensor) and x.dim() else 1)


def _contraction(name, a, base, out_total):
    spec = _CONTRACTIONS[name.split(".")[1]]
    if spec is None:  # chain_matmul: as linear algebra
        return base
    left, right, free = spec
    x, y = a[left], a[right]
    if not isinstance(x, torch.Tensor) or not isinstance(y, torch.Tensor):
        return base
    inner = x.shape[-1] if x.dim() else 1
    other = y.shape[free] if y.dim() >= -free else 1
    return max(base, out_total * inner, x.numel() * other)


def _linalg(name, a, base, tensors):
    work = base
    for t in tensors:
        if t.dim() >= 2:
            work = max(work, t.numel() * max(t.shape[-1], t.shape[-2]))
    if "matrix_exp" in name:  # a Pade step and up to ~1100 squarings (the norm sets how many)
        work *= 1100
    elif "matrix_power" in name:  # up to 2 products per bit of n
        work *= 128
    return work


def _sorting(name, a, base):
    return base * max(math.ceil(math.log2(base + 1)), 1)


def _attention(name, a, tensors):
    q, k = (tensors + [None, None])[:2]
    if q is None or k is None or q.dim() < 2:
        return 0
    rows = q.numel() // max(q.shape[-1], 1)
    work = 2 * q.numel() * (k.shape[-2] if k.dim() >= 2 else 1)
    return work + sum(rows * t.numel() for t in tensors[2:] if t.dim() == 2)


def _degree(name, a, base):
    n = a["n"] if "n" in a else a["p"]
    if isinstance(n, torch.Tensor):  # (its values read without materialising a broadcast view)
        if n.numel() == 0 or n.is_complex():
            return base
        lo, hi = value_range(n.detach())
        n = max(abs(lo), abs(hi))
    try:
        n = abs(float(n))
    except (TypeError, ValueError, OverflowError):
        return base
    if n != n:
        return base
    return base * max(n, 1.0)


def _index_put(name, a, base):
    """index_put(_): each broadcast index position writes one slice of self."""
    x, indices = a["self"], a["indices"]
    if not isinstance(x, torch.Tensor) or type(indices) not in (list, tuple):
        return base
    shapes, indexed = [], []
    dim = 0
    for t in indices:
        if t is None:
            dim += 1
            continue
        if not isinstance(t, torch.Tensor):
            return base
        span = t.dim() if t.dtype in (torch.bool, torch.uint8) else 1
        shapes.append(torch.Size([t.numel()]) if span > 1 else t.shape)
        indexed.extend(range(dim, dim + span))
        dim += span
    try:
        positions = math.prod(torch.broadcast_shapes(*shapes)) if shapes else 1
    except RuntimeError:
        return base
    covered = math.prod(x.shape[d] for d in indexed if d < x.dim())
    return max(base, positions * (x.numel() // max(covered, 1)))


def _index_along(name, a, base):
    """index_fill/copy/add/reduce: each index writes one slice of self along dim."""
    x, index, dim = a["self"], a["index"], a["dim"]
    if not isinstance(x, torch.Tensor) or not isinstance(index, torch.Tensor) or type(dim) is not int or x.dim() == 0:
        return base
    return max(base, index.numel() * (x.numel() // max(x.shape[dim % x.dim()], 1)))


def _bincount(name, a, base):
    x, minlength = a["self"], a["minlength"] or 0
    top = int(value_range(x)[1]) + 1 if isinstance(x, torch.Tensor) and x.numel() and not x.is_floating_point() \
        else 0
    return max(base, top, int(minlength))


def _repeats(name, a, base):
    r = a["repeats"]
    if isinstance(r, torch.Tensor) and r.numel() and not r.is_floating_point() and not r.is_complex():
        stored = distinct_elements(r)  # (a broadcast view repeats each stored element numel/stored times)
        return max(base, int(stored.sum()) * (r.numel() // stored.numel()))
    return base


LINEAR = Family("linear", None, "the largest tensor among arguments and outputs")
FAMILIES = (
    (r"^_?(avg|max|lp|fractional_max)_pool|^im2col|^col2im|_with_indices|^_?max_unpool",
     "kernel_size", Family("window", _window, "largest tensor × the window's elements (kernel_size^d)")),
    (r"adaptive_(avg|max)_pool", None, Family("adaptive window", _adaptive, "largest tensor × 2^d")),
    (r"conv(?!ert)|^bilinear$", "weight", Family("convolution", _conv, "largest activation × weight elements per "
                                                                     "output channel")),
    (r"^einsum$", None, Family("einsum", _einsum, "the product of every index letter's size")),
    (r"^tensordot$", "dims_self", Family("tensordot", _tensordot, "left elements × the right's free elements")),
    (r"^(lstm|gru|rnn_tanh|rnn_relu)(_cell)?$", None,
     Family("recurrent", None, "rows of the input × every weight matrix's elements")),
    (r"ctc_loss", "log_probs", Family("ctc", _ctc, "time steps × batch × (2 × the longest target + 1)")),
    (r"embedding_bag", "indices", Family("embedding bag", _embedding_bag, "indices × the embedding size")),
    (r"^multilabel_margin_loss", None, Family("pairwise loss", _multilabel, "largest tensor × classes")),
    (r"^(" + "|".join(re.escape(k) for k in _CONTRACTIONS) + r")$", None,
     Family("contraction", None, "outputs × the inner dimension (m·k·n), or the left operand × the right's free "
                                 "dimension")),
    (r"^_?linalg_|^cholesky|^geqrf$|^ormqr$|^orgqr$|^triangular_solve$|^lu_unpack$|^_lu_with_info$|^inverse$"
     r"|^logdet$|^det$|^matrix_exp|^_cholesky_solve_helper$|^lu_solve$|^linalg|^(svd|qr|slogdet|pinverse|lu"
     r"|chain_matmul|matrix_power|nuclear_norm|lstsq|_svd_helper|svd_lowrank|pca_lowrank|cholesky_inverse)$", None,
     Family("linear algebra", None, "each matrix's elements × its larger order (n^3 for n × n), ×1100 for "
                                    "matrix_exp's squarings")),
    (r"^(sort|argsort|topk|kthvalue|median|nanmedian|mode|msort|_unique2|unique_dim|unique_consecutive"
     r"|unique_dim_consecutive|searchsorted|bucketize|isin|histc|histogram|_histogramdd.*|_fft_.*|nanquantile"
     r"|quantile|unique|_unique|fft_.*|stft|istft|histogramdd|argwhere)$", None, Family("sorting and fft", _sorting, "largest tensor × log2 of it")),
    (r"attention|^_transformer_encoder_layer_fwd$|^_native_multi_head_attention$", None,
     Family("attention", None, "2 × queries × keys (+ rows × each projection's weights)")),
    # (special_multigammaln: torch.special's alias of mvlgamma, a composite calling it)
    (r"^special_.*polynomial|^mvlgamma|^special_multigammaln", None,
     Family("degree", _degree, "largest tensor × the degree n (or p)")),
    (r"^_?index_put(_impl)?_?$", None, Family("indexed write", _index_put, "broadcast index positions × the slice each "
                                                                 "writes")),
    (r"^index_(fill|copy|add|reduce)_?$", None, Family("indexed write along dim", _index_along,
                                                       "index elements × the slice of self along dim")),
    (r"^bincount$", None, Family("data-sized", _bincount, "its largest input value (read first)", True)),
    (r"^repeat_interleave$", "repeats", Family("data-sized", _repeats, "the sum of its repeats (read first)", True)),
)
_FAMILY_RES = [(re.compile(p), needs, fam) for p, needs, fam in FAMILIES]


def family_of(name: str, op) -> Family:
    base = name.split(".")[1]
    names = [a.name for a in op._schema.arguments]
    for pattern, needs, family in _FAMILY_RES:
        if pattern.search(base) and (needs is None or needs in names):
            return family.bound({n: i for i, n in enumerate(names)})
    return LINEAR


def op_work(family: Family, name: str, op, args, kwargs, out_numels) -> float:
    """The estimated element operations of one call (see the module's docstring), with the
    overhead of every output past the first (a list-returning op's pieces)."""
    extra = OUTPUT_OVERHEAD * (len(out_numels) - 1) if out_numels else 0
    return _op_work(family, name, op, args, kwargs, out_numels) + extra


def _op_work(family: Family, name: str, op, args, kwargs, out_numels) -> float:
    base = _largest(args, kwargs, out_numels)
    if family is LINEAR:
        return base
    a = _Args(family.pos, args, kwargs)
    try:
        fam = family.name
        if fam == "contraction":
            return _contraction(name, a, base, sum(out_numels) if out_numels else 0)
        if fam in ("linear algebra", "attention", "recurrent"):
            tensors = list(_tensors(list(args) + (list(kwargs.values()) if kwargs else [])))
            if fam == "attention":
                return max(base, _attention(name, a, tensors))
            if fam == "recurrent":
                return max(base, _recurrent(name, a, tensors))
            return _linalg(name, a, base, tensors)
        return family.work(name, a, base)
    except (TypeError, ValueError, IndexError, AttributeError, OverflowError, RuntimeError):
        return base  # arguments of the wrong kind: the op refuses them itself


def check_pointwise(name: str, args) -> None:
    """The pointwise ops' bound: their output's broadcast size (the product of the inputs'
    sizes bounds it; only past the limit is the broadcast shape computed)."""
    product = 1
    for a in args:
        if isinstance(a, torch.Tensor):
            product *= a.numel()
    if product <= MAX_OP_WORK:
        return
    shapes = [a.shape for a in args if isinstance(a, torch.Tensor)]
    try:
        work = max([math.prod(torch.broadcast_shapes(*shapes))] + [math.prod(s) for s in shapes])
    except RuntimeError:
        return  # not broadcastable: the op refuses it itself
    if work > MAX_OP_WORK:
        raise QuotaExceededError(
            f"{name} would compute {work:.3g} elements, more than the per-op limit of {MAX_OP_WORK:.3g} on a "
            f"worker (a broadcast view counts every element it shows): nothing ran. Compute on the tensor "
            f"before expanding it, or work in smaller pieces")
