"""The plan's vocabulary and its JSON: values, nodes, shape arithmetic, and the checked decoding
of a plan document (docs/plan-format.md).

Everything a worker reads from a plan's JSON is decoded here and checked before anything runs:
every op against the allow-list, every reference, shape, dtype and constant. plans/graph.py runs
what this module decoded.
"""
from __future__ import annotations

import base64
import json
import math
import operator
import re

import torch

from ..dtypes import DTYPES, dtype_name, parse_dtype
from ..errors import SyftError
from ..wire.allowlist import resolve
from ..wire.header_budget import MAX_HEADER_ELEMENTS

FORMAT = "syft_lab.plan"
VERSION = 2
READABLE_VERSIONS = (1, 2)  # version 1: one graph at the top level of the document
MAX_NODES = 100_000  # over all graphs of a plan
MAX_GRAPHS = 64
BATCH = -1  # the batch dimension in an input's shape
_MAX_SHAPE_VALUE = 2 ** 62  # shape arithmetic stays far from bignums
_SIZE_TEXT = re.compile(r"[0-9N+\-*/() ]{1,64}")  # an op output's size that depends on N, e.g. "3*N"

_LAYOUTS = {"strided": torch.strided}
_MEMORY_FORMATS = {"contiguous_format": torch.contiguous_format, "preserve_format": torch.preserve_format,
                   "channels_last": torch.channels_last}
_DEVICES = {"cpu"}


class PlanFormatError(SyftError):
    """A plan description that is malformed or names something not allowed (nothing ran)."""


class Value:
    """A reference to a value of the plan: an input, a constant, or a node's output."""

    __slots__ = ("kind", "index")

    def __init__(self, kind: str, index: int):
        self.kind, self.index = kind, index

    def to_json(self):
        return {self.kind: self.index}

    def __repr__(self):
        return {"input": "in", "const": "c", "node": "v"}[self.kind] + str(self.index)


# --- encoding of op arguments --------------------------------------------------------------

def encode_arg(a):
    if isinstance(a, Value):
        return a.to_json()
    if a is None or isinstance(a, (bool, int, str)):
        return a
    if isinstance(a, float):
        return a if math.isfinite(a) else {"float": str(a)}
    if isinstance(a, (list, tuple)):
        return [encode_arg(b) for b in a]
    if isinstance(a, torch.dtype):
        return {"dtype": dtype_name(a)}
    if isinstance(a, torch.device):
        return {"device": a.type}
    if isinstance(a, torch.layout):
        return {"layout": str(a).removeprefix("torch.")}
    if isinstance(a, torch.memory_format):
        return {"memory_format": str(a).removeprefix("torch.")}
    raise PlanFormatError(f"a plan cannot hold an argument of type {type(a).__name__} ({a!r:.60})")


def decode_arg(a, n_inputs: int, n_consts: int, n_nodes_so_far: int):
    if a is None or isinstance(a, (bool, int, str)):
        return a
    if isinstance(a, float):
        return a
    if isinstance(a, list):
        return [decode_arg(b, n_inputs, n_consts, n_nodes_so_far) for b in a]
    if isinstance(a, dict) and len(a) == 1:
        (key, v), = a.items()
        if key in ("input", "const", "node"):
            limit = {"input": n_inputs, "const": n_consts, "node": n_nodes_so_far}[key]
            if type(v) is not int or not 0 <= v < limit:
                raise PlanFormatError(f"reference {a} points to no {key} (there are {limit} before it)")
            return Value(key, v)
        if key == "float" and v in ("inf", "-inf", "nan"):
            return float(v)
        if key == "dtype":
            if v not in DTYPES:
                raise PlanFormatError(f"unsupported dtype {v!r}")
            return DTYPES[v]
        if key == "device":
            if v not in _DEVICES:
                raise PlanFormatError(f"unsupported device {v!r}: plans run on the CPU")
            return torch.device(v)
        if key == "layout" and v in _LAYOUTS:
            return _LAYOUTS[v]
        if key == "memory_format" and v in _MEMORY_FORMATS:
            return _MEMORY_FORMATS[v]
    raise PlanFormatError(f"malformed plan argument {a!r:.80}")


def _encode_tensor(t: torch.Tensor, name: str | None = None) -> dict:
    t = t.detach().contiguous().cpu()
    d = {"shape": list(t.shape), "dtype": dtype_name(t.dtype),
         "data": base64.b64encode(t.numpy().tobytes() if t.dtype != torch.bfloat16
                                  else t.view(torch.int16).numpy().tobytes()).decode("ascii")}
    if name is not None:
        d["name"] = name
    return d


_CONSTANT_KEYS = {"shape", "dtype", "data"}
_MAX_NAME = 200


def _constant_name(d) -> str | None:
    name = d.get("name") if isinstance(d, dict) else None
    if name is not None and not (isinstance(name, str) and 0 < len(name) <= _MAX_NAME):
        raise PlanFormatError(f"a plan constant's name is a string of at most {_MAX_NAME} characters")
    return name


def _decode_tensor(d) -> torch.Tensor:
    if not isinstance(d, dict) or not _CONSTANT_KEYS <= set(d) <= _CONSTANT_KEYS | {"name"}:
        raise PlanFormatError("a plan constant is {shape, dtype, data} and, optionally, its name")
    dtype = DTYPES.get(d["dtype"])
    shape = d["shape"]
    if dtype is None or not isinstance(shape, list) or not all(type(s) is int and s >= 0 for s in shape):
        raise PlanFormatError(f"bad plan constant shape/dtype {shape!r} {d['dtype']!r}")
    raw = base64.b64decode(d["data"], validate=True)
    itemsize = torch.empty(0, dtype=dtype).element_size()
    if len(raw) != math.prod(shape) * itemsize:
        raise PlanFormatError(f"plan constant of shape {shape} {d['dtype']} needs "
                              f"{math.prod(shape) * itemsize} bytes, got {len(raw)}")
    if not raw:
        return torch.empty(shape, dtype=dtype)
    return torch.frombuffer(bytearray(raw), dtype=dtype).reshape(shape).clone()


def _checked_int_op(fn):
    def op(*args):
        out = fn(*args)
        if not isinstance(out, (int, float)) or isinstance(out, bool) or abs(out) > _MAX_SHAPE_VALUE:
            raise SyftError(f"a plan's shape arithmetic gave {out!r:.40}: shapes are integers below 2**62")
        return out
    return op


def _sym_size(t, dim):
    return t.size(dim)


def _sym_stride(t, dim):
    return t.stride(dim)


def _sym_numel(t):
    return t.numel()


# Shape arithmetic on the batch size N, as symbolic tracing records it: name -> (callable,
# whether its first argument is a tensor). Every other argument is an integer or float literal
# or the result of another shape op, checked when the plan loads.
SHAPE_OPS = {
    "aten.sym_size.int": (_sym_size, True),
    "aten.sym_stride.int": (_sym_stride, True),
    "aten.sym_numel.default": (_sym_numel, True),
    "sym.add": (_checked_int_op(operator.add), False),
    "sym.sub": (_checked_int_op(operator.sub), False),
    "sym.mul": (_checked_int_op(operator.mul), False),
    "sym.floordiv": (_checked_int_op(operator.floordiv), False),
    "sym.mod": (_checked_int_op(operator.mod), False),
    "sym.truediv": (_checked_int_op(operator.truediv), False),
    "sym.neg": (_checked_int_op(operator.neg), False),
    "sym.float": (_checked_int_op(float), False),
    "sym.max": (_checked_int_op(max), False),
    "sym.min": (_checked_int_op(min), False),
}
SHAPE_OP_NAMES = {fn: name for name, (fn, _) in SHAPE_OPS.items()}


def manual_seed(seed: int) -> None:
    """``torch.manual_seed`` inside a plan, as a node: replay seeds the generator the plan draws
    from (the trace records it, plans/trace.py; ``PlanGraph.run`` keeps it to the replay)."""
    torch.default_generator.manual_seed(seed)


SEED_OP = "rng.manual_seed"
_SEED_RANGE = (-(2 ** 63), 2 ** 64)  # what torch.manual_seed accepts
_SEEDED = torch.Tag.nondeterministic_seeded


def is_random(op) -> bool:
    """An op that draws from the random generator (aten's ``nondeterministic_seeded`` tag: rand*,
    bernoulli, dropout, normal_, randperm ...) or seeds it."""
    return op is manual_seed or (type(op) is torch._ops.OpOverload and _SEEDED in op.tags)


class Node:
    __slots__ = ("op", "name", "args", "kwargs", "outputs", "source")

    def __init__(self, op, args, kwargs, outputs, source=None):
        self.op = op  # an OpOverload, a SHAPE_OPS callable, manual_seed, or the string "getitem"
        self.name = ("getitem" if op == "getitem" else SEED_OP if op is manual_seed
                     else SHAPE_OP_NAMES.get(op) or str(op))
        self.args = args
        self.kwargs = kwargs
        self.outputs = outputs  # [(shape, dtype_name)] or [] for non-tensor; -1 for a size that depends on N
        # where the traced op came from, {"file", "line", "code"}, when the trace knows (plans/trace.py);
        # kept in this process only: the plan JSON a worker receives carries no source
        self.source = source

    @property
    def is_shape_op(self) -> bool:
        return self.name in SHAPE_OPS

    @property
    def is_op(self) -> bool:
        """An aten op (not getitem, shape arithmetic or a seed)."""
        return type(self.op) is torch._ops.OpOverload

def format_shape(shape) -> str:
    """``[N, 4]`` for an input with a batch dimension (-1); ``[3*N]`` for an op output."""
    return "[" + ", ".join("N" if s == BATCH else str(s) for s in shape) + "]"


def _parse(text) -> dict:
    if isinstance(text, (bytes, bytearray)):
        text = text.decode("utf-8")
    if not isinstance(text, str):
        raise PlanFormatError(f"a plan is loaded from JSON text, got {type(text).__name__}")
    # The header budget's rule for JSON too (wire/header_budget.py): every list and map costs a
    # Python object, so a plan may open at most MAX_HEADER_ELEMENTS of them (brackets inside
    # strings count too: never fewer), counted at C speed before anything is parsed (16 MiB of
    # "[]," would otherwise build 5 million lists on the command thread).
    if len(text) > MAX_HEADER_ELEMENTS and text.count("[") + text.count("{") > MAX_HEADER_ELEMENTS:
        raise PlanFormatError(f"plan JSON opens more than {MAX_HEADER_ELEMENTS} lists and maps: nothing was loaded")
    try:
        return json.loads(text)
    except ValueError as e:
        raise PlanFormatError(f"plan JSON does not parse: {e}") from None
    except RecursionError:  # nested deeper than the parser goes: no plan is
        raise PlanFormatError("plan JSON is nested too deep: nothing was loaded") from None


def _clean_input(i) -> dict:
    if (not isinstance(i, dict) or i.get("role") not in ("input", "state")
            or not isinstance(i.get("name"), str) or not isinstance(i.get("shape"), list)
            or not all(type(s) is int and (s >= 0 or (s == BATCH and i["role"] == "input")) for s in i["shape"])):
        raise PlanFormatError(f"malformed plan input {i!r:.80}")
    parse_dtype(i.get("dtype"))
    clean = {"name": i["name"], "role": i["role"], "shape": i["shape"], "dtype": i["dtype"]}
    rg = i.get("requires_grad", False)
    if type(rg) is not bool:
        raise PlanFormatError(f"malformed plan input {i!r:.80}: requires_grad is true or false")
    if rg:
        clean["requires_grad"] = True
    return clean


def _clean_batch_sizes(raw, inputs) -> tuple | None:
    if not any(BATCH in i["shape"] for i in inputs):
        if raw is not None:
            raise PlanFormatError("malformed plan: batch_sizes belong to a graph with a batch dimension (-1)")
        return None
    if raw is None:
        return (1, None)
    if (not isinstance(raw, list) or len(raw) != 2 or type(raw[0]) is not int or raw[0] < 0
            or not (raw[1] is None or (type(raw[1]) is int and raw[1] >= raw[0]))):
        raise PlanFormatError(f"malformed plan: batch_sizes is [lowest, highest or null], got {raw!r:.60}")
    return (raw[0], raw[1])


def _check_shape_op_args(k, name, args, kwargs, takes_tensor, scalar_nodes) -> None:
    """A shape op computes on integers only: no tensor, list or string reaches operator.mul."""
    if kwargs:
        raise PlanFormatError(f"plan node {k}: {name} takes no keyword arguments")
    rest = args
    if takes_tensor:
        if not args or not isinstance(args[0], Value) or (args[0].kind == "node" and args[0].index in scalar_nodes):
            raise PlanFormatError(f"plan node {k}: {name} takes a tensor first")
        rest = args[1:]
    for a in rest:
        ok = (isinstance(a, Value) and a.kind == "node" and a.index in scalar_nodes) or (
            type(a) in (int, float) and abs(a) <= _MAX_SHAPE_VALUE)
        if not ok:
            raise PlanFormatError(f"plan node {k}: {name} computes on integers, got {a!r:.40}")


def decode_graph_body(b, node_budget: int = MAX_NODES) -> tuple:
    """One graph of a plan document, validated: every op, reference, shape and dtype.
    Returns ``PlanGraph``'s arguments after its name (inputs, constants, nodes, outputs,
    single_output, batch_sizes, constant_names)."""
    try:
        inputs = b["inputs"]
        raw_nodes = b["nodes"]
        raw_outputs = b["outputs"]
        single = b.get("single_output", False)
        if not isinstance(inputs, list) or not isinstance(raw_nodes, list) or not isinstance(raw_outputs, list):
            raise TypeError("inputs, nodes and outputs are lists")
        if len(raw_nodes) > node_budget:
            raise PlanFormatError(f"a plan has at most {MAX_NODES} nodes")
        clean_inputs = [_clean_input(i) for i in inputs]
        batch_sizes = _clean_batch_sizes(b.get("batch_sizes"), clean_inputs)
        raw_constants = b.get("constants", [])
        if not isinstance(raw_constants, list):
            raise TypeError("constants is a list")
        constants = [_decode_tensor(c) for c in raw_constants]
        constant_names = [_constant_name(c) for c in raw_constants]
        nodes: list[Node] = []
        scalar_nodes: set[int] = set()  # results of shape ops: integers, not tensors
        for k, rn in enumerate(raw_nodes):
            if not isinstance(rn, dict) or not isinstance(rn.get("op"), str):
                raise PlanFormatError(f"malformed plan node {k}")
            name_k = rn["op"]
            args = decode_arg(list(rn.get("args", [])), len(clean_inputs), len(constants), k)
            raw_kw = rn.get("kwargs", {})
            if not isinstance(raw_kw, dict) or not all(isinstance(x, str) and x.isidentifier() for x in raw_kw):
                raise PlanFormatError(f"malformed kwargs in plan node {k}")
            kwargs = {x: decode_arg(v, len(clean_inputs), len(constants), k) for x, v in raw_kw.items()}
            if name_k == "getitem":
                op = "getitem"
                if len(args) != 2 or not isinstance(args[0], Value) or type(args[1]) is not int:
                    raise PlanFormatError(f"plan node {k}: getitem takes a value and an index")
            elif name_k == SEED_OP:
                op = manual_seed
                if kwargs or len(args) != 1 or type(args[0]) is not int or not (
                        _SEED_RANGE[0] <= args[0] < _SEED_RANGE[1]):
                    raise PlanFormatError(f"plan node {k}: {SEED_OP} takes one integer seed")
                scalar_nodes.add(k)  # returns nothing a tensor op could read
            elif name_k in SHAPE_OPS:
                op, takes_tensor = SHAPE_OPS[name_k]
                _check_shape_op_args(k, name_k, args, kwargs, takes_tensor, scalar_nodes)
                scalar_nodes.add(k)
            else:
                op = resolve(name_k)
            outs = []
            for o in rn.get("outputs", []):
                shape = o["shape"]
                if not isinstance(shape, list) or not all(
                        (type(x) is int and x >= 0) or (type(x) is str and _SIZE_TEXT.fullmatch(x))
                        for x in shape):
                    raise PlanFormatError(f"plan node {k}: malformed output shape {shape!r:.60}")
                outs.append((tuple(shape), parse_dtype(o["dtype"]) and o["dtype"]))
            nodes.append(Node(op, args, kwargs, outs))
        outputs = decode_arg(list(raw_outputs), len(clean_inputs), len(constants), len(nodes))
        if not all(isinstance(o, Value) and not (o.kind == "node" and o.index in scalar_nodes) for o in outputs):
            raise PlanFormatError("a plan's outputs are references to tensors")
    except SyftError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise PlanFormatError(f"malformed plan: {type(e).__name__} {e}") from None
    return clean_inputs, constants, nodes, outputs, bool(single), batch_sizes, constant_names
