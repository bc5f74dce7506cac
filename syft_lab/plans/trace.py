"""Tracing: run a function once on fake (meta-backed) tensors and keep the aten ops it did.

No real data is needed or kept: only shapes and dtypes. Module state is reparametrised to
explicit inputs, so parameters are inputs of the graph, not data-less constants.

A batch dimension (-1 in ``args_shape``) is traced as one symbolic size N (make_fx's symbolic
tracing, only that dimension dynamic): shape arguments that depend on N become shape ops in
the graph. Whatever the trace assumed about N (its shape guards) decides the range of batch
sizes the graph serves; sizes outside it are traced again, and N = 1, which symbolic tracing
treats apart, gets its own graph when its ops differ.
"""
from __future__ import annotations

import contextlib
import operator
import re
import traceback

import sympy
import torch
import torch.fx.proxy as _fx_proxy
from torch._subclasses.fake_tensor import FakeTensorMode
import torch.fx.experimental._config as _fx_config
from torch.fx.experimental.proxy_tensor import get_proxy_mode, make_fx
from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv, StatelessSymbolicContext
from torch.nn.utils.stateless import _reparametrize_module

from ..dtypes import dtype_name
from ..errors import SyftError
from . import record
from .graph import BATCH, SHAPE_OPS, Node, PlanGraph, Value, _refs, _written_args, is_random, manual_seed

# fx targets of symbolic shape arithmetic -> their names in the plan format (graph.SHAPE_OPS)
_SHAPE_TARGETS = {
    torch.ops.aten.sym_size.int: "aten.sym_size.int",
    torch.ops.aten.sym_stride.int: "aten.sym_stride.int",
    torch.ops.aten.sym_numel.default: "aten.sym_numel.default",
    operator.add: "sym.add", operator.sub: "sym.sub", operator.mul: "sym.mul",
    operator.floordiv: "sym.floordiv", operator.mod: "sym.mod", operator.truediv: "sym.truediv",
    operator.neg: "sym.neg", torch.sym_float: "sym.float", torch.sym_max: "sym.max", torch.sym_min: "sym.min",
}
BATCH_HINT = 7  # the size N has while tracing (symbolic tracing treats 0 and 1 apart)
_PROBE = 1024  # batch sizes probed around a trace's size to find the range its guards allow
_MAX_PIECES = 4  # graphs for ranges of N, besides N = 1


class TraceError(SyftError):
    """The function cannot become a plan (e.g. it branches on tensor values)."""


def _user_line(fn, exc) -> str:
    code = getattr(fn, "__code__", None)
    for frame, lineno in reversed(list(traceback.walk_tb(exc.__traceback__))):
        if code is not None and frame.f_code.co_filename == code.co_filename:
            src = traceback.linecache.getline(code.co_filename, lineno).strip()
            return f"line {lineno} of {code.co_filename.rsplit('/', 1)[-1]} ({src})"
    return "an unknown line"


# Source lines of plan nodes: make_fx(record_stack_traces=True) keeps, per node, the frames of
# functions named ``forward`` and of registered anchors (the plan's own function); a node's
# source is the innermost of those frames outside torch and syft_lab.
_register_anchor = getattr(_fx_proxy, "_register_stack_trace_anchor", None)  # private: may go away
_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<fn>\S+)\n(?P<code>[^\n]*)')
_NOT_USER = (torch.__file__.rsplit("/", 1)[0] + "/", __file__.rsplit("/", 2)[0] + "/")  # torch, syft_lab


def node_source(stack_trace: str | None) -> dict | None:
    """``{"file": ..., "line": ..., "code": ...}`` of the user's line in an fx stack trace, or None."""
    if not stack_trace:
        return None
    for m in reversed(list(_FRAME.finditer(stack_trace))):
        if not m["file"].startswith(_NOT_USER):
            return {"file": m["file"], "line": int(m["line"]), "code": m["code"].strip()}
    return None


def _is_data_dependent(exc) -> bool:
    text = f"{type(exc).__name__} {exc}"
    return any(k in text for k in ("DataDependent", "data-dependent", "_local_scalar_dense", "GuardOnDataDependent"))


def _state_tensors(state):
    if state is None:
        return [], []
    if isinstance(state, torch.nn.Module):
        named = list(state.named_parameters()) + list(state.named_buffers())
        return [n for n, _ in named], [t for _, t in named]
    raise SyftError(f"a plan's state is an nn.Module, got {type(state).__name__}")


def _flat_fn(fn, state, state_names):
    k = len(state_names)

    def flat_fn(*flat):
        ctx = contextlib.nullcontext()
        if k:
            ctx = _reparametrize_module(state, dict(zip(state_names, flat[:k])))
        with ctx:
            return fn(*flat[k:])

    return flat_fn


_torch_manual_seed = torch.manual_seed


def _recorded_seed(seed):
    """``torch.manual_seed`` while a plan is traced: a node of the plan (replay seeds), not a
    change to this process's generator."""
    recorder = record.recording()
    mode = get_proxy_mode() if recorder is None else None
    if recorder is None and mode is None:  # not inside the trace (e.g. another thread)
        return _torch_manual_seed(seed)
    if isinstance(seed, torch.Tensor) or not isinstance(seed, int) or isinstance(seed, bool):
        raise TraceError(f"a plan seeds with a Python integer (torch.manual_seed(1)), got {type(seed).__name__}")
    if recorder is not None:
        recorder.seed(seed)
    else:
        mode.tracer.create_proxy("call_function", manual_seed, (int(seed),), {})
    return torch.default_generator


@contextlib.contextmanager
def _seeds_recorded():
    # the names user code calls; restored at once (a trace is short and single-threaded)
    torch.manual_seed = torch.random.manual_seed = _recorded_seed
    try:
        yield
    finally:
        torch.manual_seed = torch.random.manual_seed = _torch_manual_seed


def _make_fx(fn, name, flat_fn, examples, mode, batched=False):
    if _register_anchor is not None:
        _register_anchor(fn)
    try:
        # real tensors the function closes over become constants of the graph
        with _seeds_recorded():
            return make_fx(flat_fn, tracing_mode=mode, _allow_non_fake_inputs=True,
                           record_stack_traces=_register_anchor is not None)(*examples)
    except SyftError:
        raise
    except Exception as e:
        if _is_data_dependent(e):
            raise TraceError(f"plan {name!r} branches on tensor values at {_user_line(fn, e)}: a plan is traced "
                             f"on shapes only. Move value-dependent Python control flow out of the plan "
                             f"(or use torch.where).") from None
        where, text = "", str(e)
        if batched:
            where, text = " with a batch dimension N (-1)", re.sub(r"\bs\d+\b", "N", text)
        raise TraceError(f"plan {name!r} could not be traced{where}: {type(e).__name__}: {text}") from None


def _input_specs(state_names, state_values, arg_names, shapes, dtypes, requires_grad=None) -> list[dict]:
    inputs = [{"name": n, "role": "state", "shape": list(t.shape), "dtype": dtype_name(t.dtype)}
              for n, t in zip(state_names, state_values)]
    inputs += [{"name": n, "role": "input", "shape": list(s), "dtype": dtype_name(d)}
               for n, s, d in zip(arg_names, shapes, dtypes)]
    for spec, rg in zip(inputs[len(state_names):], requires_grad or ()):
        if rg:
            spec["requires_grad"] = True
    return inputs


def _tensor_names(fn) -> dict:
    """id -> name of the tensors ``fn`` can reach by name: its closure, the globals it names, a
    bound method's attributes (what a constant of its plan is called in the view)."""
    code = getattr(fn, "__code__", None)
    found = {}
    if code is None:
        return found
    for name, cell in zip(code.co_freevars, getattr(fn, "__closure__", None) or ()):
        try:
            found.setdefault(id(cell.cell_contents), name)
        except ValueError:  # an empty cell
            pass
    glob = getattr(fn, "__globals__", {})
    for name in code.co_names:
        if name in glob:
            found.setdefault(id(glob[name]), name)
    owner = getattr(fn, "__self__", None)
    for name, value in getattr(owner, "__dict__", {}).items():
        if isinstance(value, torch.Tensor):
            found.setdefault(id(value), f"self.{name}")
    return found


def trace(fn, name: str, example_args: list, arg_names: list[str], state=None) -> PlanGraph:
    state_names, state_values = _state_tensors(state)
    inputs = _input_specs(state_names, state_values, arg_names, [t.shape for t in example_args],
                          [t.dtype for t in example_args], [t.requires_grad for t in example_args])
    if sum(t.numel() for t in state_values) + sum(t.numel() for t in example_args) <= record.REAL_ELEMENTS:
        try:  # without make_fx, so a first build does not import torch._dynamo (plans/record.py)
            return _trace_direct(fn, name, state, state_names, state_values, example_args, inputs)
        except record.Unsupported:
            pass
    # Fresh uninitialised stand-ins: tracing reads only their shapes, dtypes and requires_grad.
    examples = [torch.empty(t.shape, dtype=t.dtype).requires_grad_(t.requires_grad) for t in state_values]
    examples += [torch.empty(t.shape, dtype=t.dtype).requires_grad_(t.requires_grad) for t in example_args]
    gm = _make_fx(fn, name, _flat_fn(fn, state, state_names), examples, "fake")
    return graph_from_fx(gm, name, inputs, _tensor_names(fn))


def _trace_direct(fn, name, state, state_names, state_values, example_args, inputs) -> PlanGraph:
    """The graph of ``fn`` recorded by plans/record.py on zero tensors shaped like the inputs
    (never their values); raises record.Unsupported for what only make_fx traces, and for any
    failure of the function (make_fx then traces it and words the error as it always has)."""
    examples = [torch.zeros(t.shape, dtype=t.dtype).requires_grad_(t.requires_grad)
                for t in [*state_values, *example_args]]
    try:
        with _seeds_recorded():
            rec, out = record.run(_flat_fn(fn, state, state_names), examples, anchor=fn)
    except (SyftError, record.Unsupported):
        raise
    except record.OwnGenerator:
        raise TraceError(_own_generator(name)) from None
    except record.DataDependent as e:
        raise TraceError(f"plan {name!r} branches on tensor values at {_user_line(fn, e)}: a plan is traced "
                         f"on shapes only. Move value-dependent Python control flow out of the plan "
                         f"(or use torch.where).") from None
    except Exception:
        raise record.Unsupported("the function failed on the direct tracer") from None
    single = isinstance(out, torch.Tensor)
    outs = [out] if single else list(out) if isinstance(out, (list, tuple)) else None
    if outs is None or not all(isinstance(o, torch.Tensor) for o in outs):
        raise TraceError(f"plan {name!r} must return tensors")
    outputs = [rec.output(o) for o in outs]
    names = _tensor_names(fn)
    labels = []
    for t in rec.originals:
        label = names.get(id(t))
        if t.requires_grad:
            raise TraceError(_frozen_parameter(name, label, t))
        labels.append(label)
    nodes, constants, constant_names, outputs = _pruned(rec.nodes, rec.constants, labels, outputs)
    return PlanGraph(name, inputs, constants, nodes, outputs, single, constant_names=constant_names)


def _own_generator(name) -> str:
    return (f"plan {name!r} draws from a torch.Generator of its own: a plan's random ops draw from "
            f"the generator of the worker that runs it; seed it inside the plan with "
            f"torch.manual_seed(n) for the same numbers on every run")


def _frozen_parameter(name, label, t) -> str:
    return (f"plan {name!r} uses {label or 'a tensor'} ({dtype_name(t.dtype)}{list(t.shape)}), "
            f"which requires grad, from outside: it would be frozen into the plan as a "
            f"constant. Give its module as the plan's state (sy.plan(fn, state=model)) or "
            f"pass it as an argument")


def trace_batched(fn, name: str, shapes: list, dtypes: list, arg_names: list[str], state=None,
                  requires_grad=None) -> list[PlanGraph]:
    """Graphs that together serve every batch size N >= 1 of the -1 dims of ``shapes``."""
    grads = list(requires_grad) if requires_grad is not None else [False] * len(shapes)
    graphs: list[PlanGraph] = []
    covered: list[tuple] = []  # (lo, hi or None) ranges of N that graphs serve
    hint, floor = BATCH_HINT, 2
    while True:
        graph, (lo, hi) = _trace_symbolic(fn, name, shapes, dtypes, grads, arg_names, state, hint, floor)
        graph.batch_sizes = (lo, hi)
        graphs.append(graph)
        covered.append((lo, hi))
        hint = floor = _first_uncovered(covered)
        if hint is None:
            break
        if len(graphs) == _MAX_PIECES:  # e.g. int(x.shape[0]): every size would need its own graph
            raise TraceError(f"plan {name!r} cannot serve every batch size: its trace depends on the batch "
                             f"size N, {_batch_dims(arg_names, shapes)} (it served "
                             f"{', '.join(_range_text(c) for c in covered)} in {_MAX_PIECES} traces). Give a "
                             f"fixed size instead of -1 in args_shape")
    # N = 1: symbolic tracing assumed N >= 2; keep its own graph when it traces differently.
    ones = [tuple(1 if s == BATCH else s for s in shape) for shape in shapes]
    examples = [torch.empty(s, dtype=d).requires_grad_(g) for s, d, g in zip(ones, dtypes, grads)]
    try:
        single = trace(fn, name, examples, arg_names, state)
    except TraceError:
        return graphs  # the graphs serve N >= 2 (their batch_sizes say so)
    smallest = next(g for g in graphs if g.batch_sizes[0] == 2)  # the ranges cover N >= 2
    if _replays_as(smallest, single, ones, dtypes, state):
        smallest.batch_sizes = (1, smallest.batch_sizes[1])
    else:
        graphs.insert(0, single)
    return graphs


def _batch_dims(arg_names, shapes) -> str:
    """Where the batch dimension is, e.g. "dim 0 of x and y"."""
    where = [f"dim {s.index(BATCH)} of {n!r}" for n, s in zip(arg_names, shapes) if BATCH in s]
    return "the -1 at " + ", ".join(where)


def _first_uncovered(covered) -> int | None:
    n = 2
    for lo, hi in sorted(covered):
        if lo > n:
            return n
        if hi is None:
            return None
        n = max(n, hi + 1)
    return n


def _range_text(r) -> str:
    lo, hi = r
    return f"N >= {lo}" if hi is None else (f"N = {lo}" if lo == hi else f"{lo} <= N <= {hi}")


def _trace_symbolic(fn, name, shapes, dtypes, grads, arg_names, state, hint, floor):
    """One graph traced with N symbolic (size ``hint`` while tracing) and the range of N, from
    ``floor`` up, that its guards allow.

    First with size-oblivious reasoning on N (what torch's export does): an op that only
    computes with N (``x.view(4, -1)``, ``x[: N // 2]``) then adds no guard on it; code that
    cannot be traced so is traced again with ordinary guards."""
    if floor == 2 and hint == BATCH_HINT:
        try:
            with _fx_config.patch(backed_size_oblivious=True):
                return _trace_symbolic_once(fn, name, shapes, dtypes, grads, arg_names, state, hint, floor)
        except TraceError:
            pass
    return _trace_symbolic_once(fn, name, shapes, dtypes, grads, arg_names, state, hint, floor)


def _trace_symbolic_once(fn, name, shapes, dtypes, grads, arg_names, state, hint, floor):
    state_names, state_values = _state_tensors(state)
    shape_env = ShapeEnv()
    mode = FakeTensorMode(shape_env=shape_env)

    def fake(shape, dtype, requires_grad):
        # DUCK: every -1 dim, traced with the same size, becomes the same symbol N
        dims = [DimDynamic.DUCK if s == BATCH else DimDynamic.STATIC for s in shape]
        t = torch.empty([hint if s == BATCH else s for s in shape], dtype=dtype)
        return mode.from_tensor(t, symbolic_context=StatelessSymbolicContext(dynamic_sizes=dims)
                                ).requires_grad_(requires_grad)

    examples = [fake(t.shape, t.dtype, t.requires_grad) for t in state_values]
    args = [fake(s, d, g) for s, d, g in zip(shapes, dtypes, grads)]
    symbols = {d.node.expr for a in args for d in a.shape if isinstance(d, torch.SymInt)}
    if len(symbols) != 1:
        raise TraceError(f"plan {name!r}: the batch dimensions (-1) were not traced as one size N")
    (n,) = symbols
    gm = _make_fx(fn, name, _flat_fn(fn, state, state_names), examples + args, "symbolic", batched=True)
    guards = [(g.expr, g.sloc) for g in shape_env.guards if n in g.expr.free_symbols]
    as_text = {n: sympy.Symbol("N")}  # error messages name the batch size N, as the views do

    def broken(value: int):
        """The first guard that batch size ``value`` breaks (as text), or None."""
        for expr, sloc in guards:
            truth = expr.xreplace({n: sympy.Integer(value)})
            if truth not in (sympy.true, sympy.false):
                raise TraceError(f"plan {name!r}: its trace assumed {expr.xreplace(as_text)} about the batch "
                                 f"size, which plans cannot check. Give a fixed size instead of -1 in args_shape")
            if truth is sympy.false:
                return f"{expr.xreplace(as_text)} at {sloc}"
        return None

    solved = _solved_range(guards, n, hint, floor)
    if solved is not None:
        lo, hi = solved
    else:  # a guard sympy cannot solve (e.g. on N % 4): probe sizes around the trace's, never open-ended
        lo = hint
        while lo > floor and broken(lo - 1) is None:
            lo -= 1
        hi = hint
        while hi < hint + _PROBE and broken(hi + 1) is None:
            hi += 1
    inputs = _input_specs(state_names, state_values, arg_names, shapes, dtypes, grads)
    return graph_from_fx(gm, name, inputs, _tensor_names(fn)), (lo, hi)


def _solved_range(guards, n, hint: int, floor: int) -> tuple | None:
    """The integer range of N around ``hint`` (from ``floor`` up) where every guard holds, solved
    exactly by sympy; None when a guard is beyond what it solves."""
    valid = sympy.Interval(floor, sympy.oo)
    for expr, _ in guards:
        try:
            part = sympy.solveset(expr, n, sympy.S.Reals)
        except (NotImplementedError, ValueError, TypeError):
            return None
        if not isinstance(part, (sympy.Interval, sympy.Union, sympy.FiniteSet)):
            return None
        valid = valid.intersect(part)
    for piece in valid.args if isinstance(valid, sympy.Union) else [valid]:
        if isinstance(piece, sympy.FiniteSet) and sympy.Integer(hint) in piece:
            return hint, hint
        if isinstance(piece, sympy.Interval) and piece.contains(hint) is sympy.true:
            start, end = piece.start, piece.end
            lo = int(start) + 1 if piece.left_open and start.is_integer else int(sympy.ceiling(start))
            if end is sympy.oo:
                return lo, None
            return lo, int(end) - 1 if piece.right_open and end.is_integer else int(sympy.floor(end))
    return None


def _replays_as(generic: PlanGraph, concrete: PlanGraph, shapes, dtypes, state) -> bool:
    """Whether ``generic``, replayed on meta tensors shaped like ``concrete``'s inputs, issues the
    same tensor ops with the same arguments (its shape ops evaluated) as ``concrete`` does."""
    _, state_values = _state_tensors(state)
    inputs = [torch.empty(t.shape, dtype=t.dtype, device="meta") for t in state_values]
    inputs += [torch.empty(s, dtype=d, device="meta") for s, d in zip(shapes, dtypes)]
    env = {"input": inputs, "const": [c.to("meta") for c in generic.constants], "node": []}

    def resolve(a):
        if isinstance(a, Value):
            return env[a.kind][a.index]
        return [resolve(b) for b in a] if isinstance(a, list) else a

    def same(g, c):  # a tensor of the generic replay stands where the concrete graph has a reference
        if isinstance(c, Value):
            return isinstance(g, torch.Tensor) or (isinstance(g, (list, tuple)) and c.kind == "node")
        if isinstance(c, list):
            return isinstance(g, list) and len(g) == len(c) and all(same(x, y) for x, y in zip(g, c))
        return not isinstance(g, torch.Tensor) and type(g) is type(c) and g == c

    ops = iter(concrete.nodes)
    try:
        for node in generic.nodes:
            args, kwargs = resolve(node.args), {k: resolve(v) for k, v in node.kwargs.items()}
            fn = (lambda seq, i: seq[i]) if node.op == "getitem" else node.op
            if not node.is_shape_op:
                other = next(ops, None)
                if (other is None or other.name != node.name or len(other.args) != len(args)
                        or not all(same(g, c) for g, c in zip(args, other.args))
                        or other.kwargs.keys() != kwargs.keys()
                        or not all(same(kwargs[k], other.kwargs[k]) for k in kwargs)):
                    return False
            env["node"].append(fn(*args, **kwargs))
    except Exception:  # an op the meta replay cannot run: treat the sizes apart
        return False
    return next(ops, None) is None


def _shape(t) -> tuple:
    # a size that depends on the batch size is described by its expression, e.g. "3*N"
    return tuple(s if type(s) is int else re.sub(r"\bs\d+\b", "N", str(s)) for s in t.shape)


def _meta_outputs(val):
    if isinstance(val, torch.Tensor):
        return [(_shape(val), dtype_name(val.dtype))]
    if isinstance(val, (list, tuple)):
        return [(_shape(v), dtype_name(v.dtype)) for v in val if isinstance(v, torch.Tensor)]
    return []


def graph_from_fx(gm: torch.fx.GraphModule, name: str, inputs: list[dict], names: dict | None = None) -> PlanGraph:
    """The plan graph of a trace: ``names`` (id -> name) names the tensors it closed over."""
    env: dict = {}
    constants: list[torch.Tensor] = []
    constant_names: list = []
    nodes: list[Node] = []
    n_inputs = 0

    def conv(a):
        if isinstance(a, torch.fx.Node):
            return env[a]
        if isinstance(a, (list, tuple)):
            return [conv(b) for b in a]
        if isinstance(a, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            raise TraceError(f"plan {name!r} uses the batch size in a way plans cannot record ({a})")
        if isinstance(a, torch.Generator):
            raise TraceError(own_generator)
        return a

    own_generator = _own_generator(name)

    outputs, single = [], True
    for fx_node in gm.graph.nodes:
        if fx_node.op == "placeholder":
            env[fx_node] = Value("input", n_inputs)
            n_inputs += 1
        elif fx_node.op == "get_attr":
            t = getattr(gm, fx_node.target)
            if isinstance(t, torch.Generator):
                raise TraceError(own_generator)
            label = (names or {}).get(id(t))
            if t.requires_grad:  # a parameter of a module the plan was not given as its state
                raise TraceError(_frozen_parameter(name, label, t))
            constants.append(t.detach().clone())
            constant_names.append(label)
            env[fx_node] = Value("const", len(constants) - 1)
        elif fx_node.op == "call_function":
            target = fx_node.target
            if isinstance(target, torch._ops.OpOverload) and target.namespace == "profiler":
                continue  # record_function markers (an optimizer's step): nothing to replay
            if target is operator.getitem:
                op = "getitem"
            elif target in _SHAPE_TARGETS:
                op = SHAPE_OPS[_SHAPE_TARGETS[target]][0]
            elif target is manual_seed:
                op = manual_seed
            elif isinstance(target, torch._ops.OpOverload) and target.namespace == "aten":
                op = target
            else:
                raise TraceError(f"plan {name!r} uses {target}, which is not an aten op")
            nodes.append(Node(op, conv(list(fx_node.args)), {k: conv(v) for k, v in fx_node.kwargs.items()},
                              _meta_outputs(fx_node.meta.get("val")), node_source(fx_node.meta.get("stack_trace"))))
            env[fx_node] = Value("node", len(nodes) - 1)
        elif fx_node.op == "output":
            out = fx_node.args[0]
            single = isinstance(out, torch.fx.Node)
            outs = [out] if single else list(out)
            outputs = [conv(o) for o in outs]
            if not all(isinstance(o, Value) and not (o.kind == "node" and nodes[o.index].is_shape_op)
                       for o in outputs):
                raise TraceError(f"plan {name!r} must return tensors")
    if n_inputs != len(inputs):
        raise TraceError(f"plan {name!r}: traced {n_inputs} inputs, expected {len(inputs)}")
    nodes, constants, constant_names, outputs = _pruned(nodes, constants, constant_names, outputs)
    return PlanGraph(name, inputs, constants, nodes, outputs, single, constant_names=constant_names)


def _has_effect(node: Node) -> bool:
    """A node kept whether or not its value is read: it writes an argument (an in-place update
    of the state), or it draws from or seeds the generator (dropping it would change what the
    random ops after it draw)."""
    return is_random(node.op) or bool(_written_args(node))


def _pruned(nodes, constants, constant_names, outputs):
    """The graph without the ops nothing reads (a trace keeps, e.g., the ``detach`` autograd
    saves for backward when no backward runs): what outputs need, and what has an effect."""
    live = [False] * len(nodes)
    for o in outputs:
        if isinstance(o, Value) and o.kind == "node":
            live[o.index] = True
    for k in range(len(nodes) - 1, -1, -1):  # a node reads only nodes before it
        if live[k] or _has_effect(nodes[k]):
            live[k] = True
            for v in _refs(nodes[k]):
                if v.kind == "node":
                    live[v.index] = True
    used_consts = {v.index for k, n in enumerate(nodes) if live[k] for v in _refs(n) if v.kind == "const"}
    used_consts |= {o.index for o in outputs if isinstance(o, Value) and o.kind == "const"}
    if all(live) and len(used_consts) == len(constants):
        return nodes, constants, constant_names, outputs
    node_at, const_at = {}, {}
    for k, alive in enumerate(live):
        if alive:
            node_at[k] = len(node_at)
    for i in range(len(constants)):
        if i in used_consts:
            const_at[i] = len(const_at)

    def renumber(a):
        if isinstance(a, Value):
            if a.kind == "node":
                return Value("node", node_at[a.index])
            if a.kind == "const":
                return Value("const", const_at[a.index])
            return a
        return [renumber(b) for b in a] if isinstance(a, list) else a

    kept = []
    for k, n in enumerate(nodes):
        if live[k]:
            n.args = [renumber(a) for a in n.args]
            n.kwargs = {key: renumber(v) for key, v in n.kwargs.items()}
            kept.append(n)
    return (kept, [constants[i] for i in sorted(const_at)], [constant_names[i] for i in sorted(const_at)],
            [renumber(o) for o in outputs])
