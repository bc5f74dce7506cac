"""Hypothesis strategies derived from an aten overload's schema, and the cases they draw made
real: as plain tensors here, or through a maker (a worker's pointers) the same way.

A case is JSON data (``case_strategy``): ``{"args": [...], "kwargs": {...}, "raw": bool}``, a
tensor ``{"T": [dtype, shape, layout, fill, seed]}`` (layouts: c contiguous, t transposed,
s stepped, o overlapping ``as_strided``, b broadcast, B a broadcast of 2**31 and more elements;
fills: n normal, i small indices, x extreme values, z zeros), ``{"A": k}`` the k-th tensor of the
case again (aliasing), enums as ``{"dtype": name}``, ``{"memory_format": name}``,
``{"layout": name}``, ``{"device": name}`` or a bare int (an out-of-range code). ``raw``: a
hostile argument was drawn (an enum out of its domain, a huge int, a huge broadcast): the case
goes to a worker as a raw command and gets no plain-torch run (plain torch may crash on it).
Used by benchmarks/fuzz_property.py (docs/op-allowlist.md, "Testing: the fuzzers").
"""
from __future__ import annotations

import math

import torch
from hypothesis import strategies as st

from syft_lab.commands import Ref
from syft_lab.dtypes import DTYPES
from syft_lab.tensors.pointer import PointerTensor

BIG_ELEMENTS = 2**22  # a tensor argument past this (a broadcast view) makes the case raw (no plain-torch run)
HUGE_INTS = [2**31 - 1, 2**31, -2**31 - 1, 2**32, 2**40, 2**62, 2**63 - 1, -2**63]
BIG_SHAPES = [[2**31 + 1], [2**16, 2**16], [3, 2**30], [2**16, 2**15 + 1], [1, 2**33]]
EXTREME_FLOATS = [0.0, -0.0, 1.0, -1.0, math.nan, math.inf, -math.inf, 1e38, 1e-45, 65504.0, -1e308, 3e38]
ENUM_INT_NAMES = {"reduction": 3, "padding_mode": 3, "interpolation_mode": 3, "mode": 3}  # int codes: legal 0..n-1
NOT_HELD_DTYPES = ["qint8", "quint8", "float8_e4m3fn", "uint16", "uint32", "bits8", "complex32"]
MEMORY_FORMATS = ["contiguous_format", "channels_last", "preserve_format", "channels_last_3d"]
STRINGS = ["none", "mean", "sum", "reflect", "replicate", "constant", "circular", "nearest", "bilinear", "tanh",
           "floor", "trunc", "ij", "xy", "reduced", "complete", "L", "U", "gelsd", "amax", "prod", "", "\x00"]
STRINGS_BY_NAME = {"norm": ["ortho", "forward", "backward"], "reduce": ["sum", "prod", "mean", "amax", "amin"],
                   "approximate": ["none", "tanh"], "rounding_mode": ["trunc", "floor"], "indexing": ["ij", "xy"],
                   "side": ["left", "right"], "UPLO": ["L", "U"], "mode": ["reduced", "complete", "r"],
                   "interpolation": ["linear", "lower", "higher", "midpoint", "nearest"], "padding": ["same", "valid"]}
UNINITIALISED = ("empty", "new_empty", "empty_like", "empty_strided", "new_empty_strided", "empty_permuted")


def dtype_named(name: str):
    return getattr(torch, name, None)


# --- strategies from the schema ------------------------------------------------------------------

class Draw:
    """One case being drawn: its tensors so far (for aliasing), its common shape, its rawness."""

    def __init__(self, draw):
        self.draw, self.tensors, self.raw = draw, 0, False
        self.shape = draw(st.lists(st.integers(0, 5), min_size=0, max_size=4))


def small_shape():
    return st.lists(st.integers(0, 5), min_size=0, max_size=4)


def draw_tensor(c: Draw, index_like=False) -> dict:
    d = c.draw
    k = d(st.integers(0, 99))
    if c.tensors and k < 12:  # the same tensor again: aliasing between arguments
        return {"A": d(st.integers(0, c.tensors - 1))}
    c.tensors += 1
    if index_like and k < 70:
        dtype = d(st.sampled_from(["int64", "int64", "int32", "bool"]))
    elif k < 45:
        dtype = "float32"
    else:
        dtype = d(st.sampled_from(list(DTYPES)))
    k_layout = d(st.integers(0, 99))
    layout = "ctsobB"[sum(k_layout >= b for b in (50, 62, 72, 82, 94))]
    if layout == "B":  # a broadcast view of 2**31 and more elements of one value
        c.raw = True
        shape = d(st.sampled_from(BIG_SHAPES))
    elif k < 50:
        shape = list(c.shape)
    elif k < 65 and c.shape:
        shape = list(c.shape[d(st.integers(0, len(c.shape) - 1)):])
    else:
        shape = d(small_shape())
    fill = d(st.sampled_from("nnnnnixz" if not index_like else "iiiinx"))
    return {"T": [dtype, shape, layout, fill, d(st.integers(0, 2**16))]}


def draw_int(c: Draw, name: str):
    d = c.draw
    k = d(st.integers(0, 99))
    if name in ENUM_INT_NAMES:
        if k < 85:
            return d(st.integers(0, ENUM_INT_NAMES[name] - 1))
        c.raw = True
        return d(st.sampled_from([-1, ENUM_INT_NAMES[name], 2**31, -2**63, 2**62]))
    if k < 8:
        c.raw = True
        return d(st.sampled_from(HUGE_INTS))
    if "dim" in name:
        return d(st.integers(-4, 4))
    return d(st.integers(-3, 8))


def draw_int_list(c: Draw, name: str, n):
    d = c.draw
    k = d(st.integers(0, 99))
    size = n if (n and k < 80) else d(st.integers(0, 4))
    values = [draw_int(c, name) for _ in range(size)]
    if k >= 95:  # a list of huge sizes (its product overflows int64)
        c.raw = True
        values = d(st.lists(st.sampled_from(HUGE_INTS), min_size=1, max_size=3))
    return values


def draw_float(c: Draw):
    d = c.draw
    k = d(st.integers(0, 99))
    if k < 60:
        return d(st.sampled_from([0.0, 0.5, 1.0, -1.0, 2.0, 1e-3, 0.25, 3.5]))
    if k < 85:
        return d(st.floats(-1e6, 1e6, allow_nan=False))
    value = d(st.sampled_from(EXTREME_FLOATS + [1e308]))
    c.raw = c.raw or abs(value) >= 1e300
    return value


def draw_scalar(c: Draw):
    kind = c.draw(st.integers(0, 9))
    if kind < 4:
        return c.draw(st.integers(-3, 8))
    if kind < 8:
        return draw_float(c)
    if kind == 8:
        return c.draw(st.booleans())
    c.raw = True
    return c.draw(st.sampled_from([2**62, -2**63, 2**40, 1e308, -1e308, math.inf]))


def draw_enum(c: Draw, kind: str):
    """ScalarType, MemoryFormat, Layout, Device: legal values mostly; -1, huge ints and values a
    worker must refuse (dtypes it does not hold, sparse layouts, the meta device) otherwise."""
    d = c.draw
    k = d(st.integers(0, 99))
    if k >= 85:
        c.raw = True
        if kind == "ScalarType" and k < 92:
            return {"dtype": d(st.sampled_from(NOT_HELD_DTYPES))}
        if kind == "Device" and k < 92:
            return {"device": "meta"}
        if kind == "Layout" and k < 92:
            return {"layout": "sparse_coo"}
        return d(st.sampled_from([-1, 2**31, 99, -2**63]))
    if kind == "ScalarType":
        return {"dtype": d(st.sampled_from(list(DTYPES)))}
    if kind == "MemoryFormat":
        return {"memory_format": d(st.sampled_from(MEMORY_FORMATS))}
    if kind == "Layout":
        return {"layout": "strided"}
    return {"device": "cpu"}


def draw_value(c: Draw, type_str: str, name: str, n):
    d = c.draw
    if type_str.startswith("Optional["):
        inner = type_str[len("Optional["):-1]
        return None if d(st.integers(0, 3)) == 0 else draw_value(c, inner, name, n)
    if type_str == "Tensor":
        return draw_tensor(c, index_like="ind" in name)
    if type_str in ("List[Tensor]", "List[Optional[Tensor]]"):
        optional = "Optional" in type_str
        size = d(st.integers(0, 3))
        return [None if optional and d(st.integers(0, 3)) == 0 else draw_tensor(c, index_like=optional)
                for _ in range(size)]
    if type_str in ("int", "SymInt"):
        return draw_int(c, name)
    if type_str in ("List[int]", "List[SymInt]"):
        return draw_int_list(c, name, n)
    if type_str == "float":
        return draw_float(c)
    if type_str == "List[float]":
        return [draw_float(c) for _ in range(n or d(st.integers(0, 3)))]
    if type_str == "number":
        return draw_scalar(c)
    if type_str == "List[number]":
        return [draw_scalar(c) for _ in range(d(st.integers(0, 3)))]
    if type_str == "bool":
        return d(st.booleans())
    if type_str == "List[bool]":
        return d(st.lists(st.booleans(), min_size=n or 0, max_size=n or 4))
    if type_str == "str":
        legal = STRINGS_BY_NAME.get(name)
        return d(st.sampled_from(legal if legal and d(st.integers(0, 9)) < 8 else STRINGS))
    if type_str in ("ScalarType", "MemoryFormat", "Layout", "Device"):
        return draw_enum(c, type_str)
    return None  # Generator (None is its only value a worker takes) and anything unknown


def case_strategy(op, refused=False):
    """Cases of ``op``: {"args": [...], "kwargs": {...}, "raw": bool}, JSON data."""
    schema_args = op._schema.arguments

    @st.composite
    def case(draw):
        c = Draw(draw)
        args, kwargs = [], {}
        for i, a in enumerate(schema_args):
            if a.has_default_value() and draw(st.integers(0, 2)) == 0:
                continue  # left to its default
            value = draw_value(c, str(a.real_type), a.name, a.N)
            if a.kwarg_only or len(args) != i:  # (an earlier optional left out: named from here on)
                kwargs[a.name] = value
            else:
                args.append(value)
        return {"args": args, "kwargs": kwargs, "raw": c.raw or refused}

    return case()


# --- cases made real: local tensors and pointers ------------------------------------------------

def tensor_values(dtype, n: int, fill: str, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    if fill == "z" or n == 0:
        return torch.zeros(n, dtype=dtype)
    if dtype is torch.bool:
        return torch.randint(0, 2, (n,), generator=g).bool()
    if fill == "i":
        return torch.randint(0, 4, (n,), generator=g).to(dtype)
    if dtype.is_floating_point or dtype.is_complex:
        if fill == "x":
            pool = torch.tensor(EXTREME_FLOATS, dtype=torch.float64)
            return pool[torch.randint(0, len(pool), (n,), generator=g)].to(dtype)
        return (torch.randn(n, generator=g, dtype=torch.complex128 if dtype.is_complex else torch.float64) * 3).to(dtype)
    info = torch.iinfo(dtype)
    if fill == "x":
        pool = torch.tensor([0, 1, -1 if info.min < 0 else 2, info.max, info.min], dtype=torch.int64)
        return pool[torch.randint(0, len(pool), (n,), generator=g)].to(dtype)
    return torch.randint(0 if info.min == 0 else -5, 10, (n,), generator=g).to(dtype)


def tensor_plan(spec):
    """The contiguous tensor a tensor spec starts from, and the view steps that make it."""
    dtype_name, shape, layout, fill, seed = spec
    shape = list(shape)
    d = len(shape)
    if layout == "t" and d >= 2:
        base_shape, steps = shape[:-2] + [shape[-1], shape[-2]], [("transpose", (-1, -2))]
    elif layout == "s" and d >= 1:
        base_shape, steps = [2 * shape[0]] + shape[1:], [("__getitem__", (slice(None, None, 2),))]
    elif layout == "o" and d >= 2 and all(shape):  # rows sharing elements (stride 1 in every dim)
        base_shape, steps = [sum(s - 1 for s in shape) + 1], [("as_strided", (shape, [1] * d))]
    elif layout in ("b", "B") and d >= 1:
        base_shape, steps = ([1] + shape[1:]) if layout == "b" else [1] * d, [("expand", (shape,))]
    else:
        base_shape, steps = shape, []
    # (a tensor of its own, as the worker's copy of a sent base is: a reshape of the flat values is
    # a view, on which plain torch refused detach_ where the worker's fresh tensor takes it)
    base = tensor_values(dtype_named(dtype_name), math.prod(base_shape), fill, seed).reshape(base_shape).clone()
    return base, steps


def make_local(spec) -> torch.Tensor:
    t, steps = tensor_plan(spec)
    for name, args in steps:
        t = getattr(t, name)(*args)
    return t


def build(value, made: list, make):
    """A case's JSON value as the op's argument: tensors by ``make`` (in order, kept in ``made``
    for the aliases that name them), enums as torch's objects."""
    if type(value) is list:
        return [build(v, made, make) for v in value]
    if type(value) is not dict:
        return value
    if "T" in value:
        made.append(make(value["T"]))
        return made[-1]
    if "A" in value:
        return made[value["A"]]
    if "dtype" in value:
        return dtype_named(value["dtype"]) or -1  # (a dtype this torch lacks: an out-of-range code)
    if "memory_format" in value:
        return getattr(torch, value["memory_format"])
    if "layout" in value:
        return getattr(torch, value["layout"])
    return torch.device(value["device"])


def flatten(out) -> list:
    if isinstance(out, (tuple, list)) and not isinstance(out, torch.Size):
        return [x for o in out for x in flatten(o)]
    return [out]


def to_wire(value):
    if type(value) is PointerTensor:
        return Ref(value.id_at_location)
    if type(value) is list:
        return [to_wire(v) for v in value]
    return value


def op_named(name: str):
    _, op_name, overload = name.split(".")
    return getattr(getattr(torch.ops.aten, op_name), overload)


def _bytes(t: torch.Tensor) -> torch.Tensor:
    return t.detach().reshape(-1).contiguous().view(torch.uint8)


def nbytes_nonzero(t: torch.Tensor, unwritten: torch.Tensor | None = None) -> int:
    """Bytes of ``t`` that are not zero, of those ``unwritten`` marks (a byte mask; None: all)."""
    if not t.numel():
        return 0
    flat = _bytes(t)
    return int(((flat != 0) if unwritten is None else (flat != 0) & unwritten).sum())


def unwritten_bytes(first: torch.Tensor, again: torch.Tensor) -> torch.Tensor | None:
    """The bytes two runs of plain torch disagree on: memory the kernel never wrote (None when
    the outputs cannot be compared byte for byte)."""
    if first.shape != again.shape or first.dtype != again.dtype or not first.numel():
        return None
    return _bytes(first) != _bytes(again)


def same_value(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return type(a) is type(b) and a == b
