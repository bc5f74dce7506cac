"""PlanGraph: a traced plan as data — inputs, constants, aten op nodes, outputs.

The JSON form (docs/plan-format.md) names ops as text and references values by index; it
holds no pickle, no Python source and no GraphModule. Loading validates every op against the
worker's allow-list and every reference before anything runs.
"""
from __future__ import annotations

import base64
import re
import json
import math

import torch

from ..dtypes import DTYPES, dtype_name, parse_dtype
from ..errors import SyftError

FORMAT = "syft_lab.plan"
VERSION = 1
MAX_NODES = 100_000

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


def _encode_tensor(t: torch.Tensor) -> dict:
    t = t.detach().contiguous().cpu()
    return {"shape": list(t.shape), "dtype": dtype_name(t.dtype),
            "data": base64.b64encode(t.numpy().tobytes() if t.dtype != torch.bfloat16
                                     else t.view(torch.int16).numpy().tobytes()).decode("ascii")}


def _decode_tensor(d) -> torch.Tensor:
    if not isinstance(d, dict) or set(d) != {"shape", "dtype", "data"}:
        raise PlanFormatError("a plan constant is {shape, dtype, data}")
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


class Node:
    __slots__ = ("op", "name", "args", "kwargs", "outputs")

    def __init__(self, op, args, kwargs, outputs):
        self.op = op  # an OpOverload, or the string "getitem"
        self.name = "getitem" if op == "getitem" else str(op)
        self.args = args
        self.kwargs = kwargs
        self.outputs = outputs  # [(shape, dtype_name)] or [] for non-tensor


class PlanGraph:
    """What a plan computes. ``inputs`` carry a name, a role ("input" or "state"), a shape and a dtype."""

    def __init__(self, name: str, inputs: list[dict], constants: list[torch.Tensor], nodes: list[Node],
                 outputs: list, single_output: bool):
        self.name = name
        self.inputs = inputs
        self.constants = constants
        self.nodes = nodes
        self.outputs = outputs
        self.single_output = single_output
        self._program = None
        self.mutated_inputs = sorted({a.index for n in nodes for a in _written_args(n)
                                      if isinstance(a, Value) and a.kind == "input"})

    # --- running ----------------------------------------------------------------------
    def _compile(self):
        """Per node: the callable, an arg list template, where its references go, and which
        node values are used for the last time there (replay frees them right after)."""
        program = []
        last_use = list(range(len(self.nodes)))  # a value no later node reads dies where it is made
        for k, node in enumerate(self.nodes):
            for v in _refs(node):
                if v.kind == "node":
                    last_use[v.index] = k
        for o in self.outputs:
            if isinstance(o, Value) and o.kind == "node":
                last_use[o.index] = len(self.nodes)  # outputs live on
        frees = [[] for _ in self.nodes]
        for k, at in enumerate(last_use):
            if at < len(self.nodes):
                frees[at].append(k)
        for k, node in enumerate(self.nodes):
            fills = []
            args = list(node.args)
            for i, a in enumerate(args):
                if isinstance(a, Value):
                    fills.append((i, None, a))
                elif isinstance(a, list) and any(isinstance(b, Value) for b in a):
                    for j, b in enumerate(a):
                        if isinstance(b, Value):
                            fills.append((i, j, b))
            kw_fills = [(name, v) for name, v in node.kwargs.items() if isinstance(v, Value)]
            fn = _getitem if node.op == "getitem" else node.op
            program.append((fn, args, fills, dict(node.kwargs), kw_fills, frees[k]))
        self._program = program
        return program

    def run(self, inputs: list, guard=None, check=None) -> list:
        """Replay the graph on real values; returns the output values in order.

        Each node's value is dropped after its last use, so a long chain holds only what is
        still needed. On a worker, ``guard(op, args, kwargs, live_bytes)`` runs before each op
        (the allow-list's argument checks and the quota, given the bytes the replay holds) and
        returns the op's estimated new bytes; ``check(op, value)`` refuses a bad result."""
        program = self._program or self._compile()
        env = {"input": inputs, "const": self.constants, "node": [None] * len(program)}
        nodes_out = env["node"]
        sizes = [0] * len(program) if guard is not None else None
        live = 0
        grad = torch.is_grad_enabled() and not self.mutated_inputs
        with torch.set_grad_enabled(grad):
            for k, (fn, template, fills, kwargs, kw_fills, frees) in enumerate(program):
                if fills:
                    args = [list(a) if type(a) is list else a for a in template]
                    for i, j, v in fills:
                        val = env[v.kind][v.index]
                        if j is None:
                            args[i] = val
                        else:
                            args[i][j] = val
                else:
                    args = template
                if kw_fills:
                    kw = dict(kwargs)
                    for name, v in kw_fills:
                        kw[name] = env[v.kind][v.index]
                else:
                    kw = kwargs
                is_op = type(fn) is torch._ops.OpOverload  # not getitem or shape arithmetic
                if guard is not None and is_op:
                    sizes[k] = guard(fn, args, kw, live)
                    live += sizes[k]
                out = fn(*args, **kw)
                if check is not None and is_op:
                    for o in (out if type(out) in (list, tuple) else (out,)):
                        if isinstance(o, torch.Tensor):
                            check(fn, o)
                nodes_out[k] = out
                del args, kw, out
                for dead in frees:
                    nodes_out[dead] = None
                    if sizes is not None:
                        live -= sizes[dead]
        return [env[o.kind][o.index] if isinstance(o, Value) else o for o in self.outputs]

    def check_inputs(self, values: list, *, roles=("input", "state")) -> None:
        """A clear error for a wrong number, shape or dtype of inputs."""
        expected = [i for i in self.inputs if i["role"] in roles]
        if len(values) != len(expected):
            names = ", ".join(i["name"] for i in expected)
            raise SyftError(f"plan {self.name!r} takes {len(expected)} tensor(s) ({names}), got {len(values)}")
        for spec, v in zip(expected, values):
            if not isinstance(v, torch.Tensor):
                raise SyftError(f"plan {self.name!r}: input {spec['name']!r} must be a tensor, got {type(v).__name__}")
            if list(v.shape) != spec["shape"] or dtype_name(v.dtype) != spec["dtype"]:
                raise SyftError(f"plan {self.name!r}: input {spec['name']!r} was built for "
                                f"{spec['dtype']}{spec['shape']}, got {dtype_name(v.dtype)}{list(v.shape)}")

    # --- views --------------------------------------------------------------------------
    def code(self) -> str:
        names = [re.sub(r"^(?=\d)", "_", re.sub(r"\W", "_", i["name"])) for i in self.inputs]

        def fmt(a):
            if isinstance(a, Value):
                return names[a.index] if a.kind == "input" else repr(a)
            if isinstance(a, list):
                return "[" + ", ".join(fmt(b) for b in a) + "]"
            return repr(a).replace("torch.", "")

        ins = ", ".join(f"{names[i]}: {s['dtype']}{s['shape']}" + (" (state)" if s["role"] == "state" else "")
                        for i, s in enumerate(self.inputs))
        lines = [f"def {self.name}({ins}):"]
        for i, n in enumerate(self.nodes):
            args = [fmt(a) for a in n.args] + [f"{k}={fmt(v)}" for k, v in n.kwargs.items()]
            shape = "; ".join(f"{d}{list(s)}" for s, d in n.outputs)
            lines.append(f"    v{i} = {n.name}({', '.join(args)})" + (f"  # {shape}" if shape else ""))
        outs = ", ".join(fmt(o) for o in self.outputs)
        lines.append(f"    return {outs}")
        return "\n".join(lines)

    def graph_dict(self) -> dict:
        """Nodes and edges for the plan view: inputs, state, constants, ops, outputs."""
        nodes, edges = [], []
        for i, s in enumerate(self.inputs):
            nodes.append({"id": f"in{i}", "role": s["role"], "label": s["name"], "op": None,
                          "shape": s["shape"], "dtype": s["dtype"]})
        for i, c in enumerate(self.constants):
            nodes.append({"id": f"c{i}", "role": "constant", "label": f"const {dtype_name(c.dtype)}{list(c.shape)}",
                          "op": None, "shape": list(c.shape), "dtype": dtype_name(c.dtype)})

        def shape_of(v: Value):
            if v.kind == "input":
                s = self.inputs[v.index]
                return s["shape"], s["dtype"]
            if v.kind == "const":
                c = self.constants[v.index]
                return list(c.shape), dtype_name(c.dtype)
            outs = self.nodes[v.index].outputs
            return (list(outs[0][0]), outs[0][1]) if outs else (None, None)

        for i, n in enumerate(self.nodes):
            shape, dtype = (list(n.outputs[0][0]), n.outputs[0][1]) if len(n.outputs) == 1 else (None, None)
            nodes.append({"id": f"v{i}", "role": "op", "label": n.name.removeprefix("aten.").removesuffix(".default"),
                          "op": n.name, "shape": shape, "dtype": dtype, "inputs": []})
            refs = [a for a in n.args if isinstance(a, Value)]
            refs += [b for a in n.args if isinstance(a, list) for b in a if isinstance(b, Value)]
            refs += [v for v in n.kwargs.values() if isinstance(v, Value)]
            for r in refs:
                s, d = shape_of(r)
                edges.append({"from": repr(r), "to": f"v{i}", "shape": s, "dtype": d})
                nodes[-1]["inputs"].append(repr(r))
        for k, o in enumerate(self.outputs):
            if isinstance(o, Value):
                s, d = shape_of(o)
                nodes.append({"id": f"out{k}", "role": "output", "label": f"output {k}", "op": None,
                              "shape": s, "dtype": d})
                edges.append({"from": repr(o), "to": f"out{k}", "shape": s, "dtype": d})
        return {"nodes": nodes, "edges": edges}

    # --- JSON ---------------------------------------------------------------------------
    def to_dict(self) -> dict:
        return {
            "format": FORMAT, "version": VERSION, "name": self.name,
            "inputs": self.inputs,
            "constants": [_encode_tensor(c) for c in self.constants],
            "nodes": [{"op": n.name, "args": [encode_arg(a) for a in n.args],
                       "kwargs": {k: encode_arg(v) for k, v in n.kwargs.items()},
                       "outputs": [{"shape": list(s), "dtype": d} for s, d in n.outputs]} for n in self.nodes],
            "outputs": [encode_arg(o) for o in self.outputs],
            "single_output": self.single_output,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), separators=(",", ":"))

    @classmethod
    def from_json(cls, text) -> "PlanGraph":
        if isinstance(text, (bytes, bytearray)):
            text = text.decode("utf-8")
        if not isinstance(text, str):
            raise PlanFormatError(f"a plan is loaded from JSON text, got {type(text).__name__}")
        try:
            d = json.loads(text)
        except ValueError as e:
            raise PlanFormatError(f"plan JSON does not parse: {e}") from None
        return cls.from_dict(d)

    @classmethod
    def from_dict(cls, d) -> "PlanGraph":
        from ..wire.allowlist import resolve

        if not isinstance(d, dict) or d.get("format") != FORMAT:
            raise PlanFormatError(f"not a syft_lab plan (format must be {FORMAT!r})")
        if d.get("version") != VERSION:
            raise PlanFormatError(f"plan format version {d.get('version')!r} is not supported (this is {VERSION})")
        try:
            name = d["name"]
            inputs = d["inputs"]
            raw_nodes = d["nodes"]
            raw_outputs = d["outputs"]
            single = d.get("single_output", False)
            if not isinstance(name, str) or not isinstance(inputs, list) or not isinstance(raw_nodes, list):
                raise TypeError
            if len(raw_nodes) > MAX_NODES:
                raise PlanFormatError(f"a plan has at most {MAX_NODES} nodes")
            clean_inputs = []
            for i in inputs:
                if (not isinstance(i, dict) or i.get("role") not in ("input", "state")
                        or not isinstance(i.get("name"), str) or not isinstance(i.get("shape"), list)
                        or not all(type(s) is int and s >= 0 for s in i["shape"])):
                    raise PlanFormatError(f"malformed plan input {i!r:.80}")
                parse_dtype(i.get("dtype"))
                clean_inputs.append({"name": i["name"], "role": i["role"], "shape": i["shape"], "dtype": i["dtype"]})
            constants = [_decode_tensor(c) for c in d.get("constants", [])]
            nodes = []
            for k, rn in enumerate(raw_nodes):
                if not isinstance(rn, dict) or not isinstance(rn.get("op"), str):
                    raise PlanFormatError(f"malformed plan node {k}")
                op = "getitem" if rn["op"] == "getitem" else resolve(rn["op"])
                args = decode_arg(list(rn.get("args", [])), len(clean_inputs), len(constants), k)
                raw_kw = rn.get("kwargs", {})
                if not isinstance(raw_kw, dict) or not all(isinstance(x, str) and x.isidentifier() for x in raw_kw):
                    raise PlanFormatError(f"malformed kwargs in plan node {k}")
                kwargs = {x: decode_arg(v, len(clean_inputs), len(constants), k) for x, v in raw_kw.items()}
                if op == "getitem" and (len(args) != 2 or not isinstance(args[0], Value) or type(args[1]) is not int):
                    raise PlanFormatError(f"plan node {k}: getitem takes a value and an index")
                outs = []
                for o in rn.get("outputs", []):
                    outs.append((tuple(o["shape"]), parse_dtype(o["dtype"]) and o["dtype"]))
                nodes.append(Node(op, args, kwargs, outs))
            outputs = decode_arg(list(raw_outputs), len(clean_inputs), len(constants), len(nodes))
        except SyftError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise PlanFormatError(f"malformed plan: {type(e).__name__} {e}") from None
        return cls(name, clean_inputs, constants, nodes, outputs, bool(single))

    def copy(self) -> "PlanGraph":
        """An independent, validated copy (what a worker stores)."""
        return PlanGraph.from_dict(json.loads(self.to_json()))


def _written_args(node: Node) -> list:
    """The arguments an op writes to (in-place and out= ops), from its schema."""
    if node.op == "getitem":
        return []
    written = []
    for i, arg in enumerate(node.op._schema.arguments):
        if arg.alias_info is not None and arg.alias_info.is_write:
            if i < len(node.args):
                written.append(node.args[i])
            elif arg.name in node.kwargs:
                written.append(node.kwargs[arg.name])
    return written


def _refs(node: Node):
    """The values a node reads."""
    for a in list(node.args) + list(node.kwargs.values()):
        if isinstance(a, Value):
            yield a
        elif isinstance(a, list):
            yield from (b for b in a if isinstance(b, Value))


def _getitem(seq, i):
    return seq[i]
