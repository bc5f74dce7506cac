"""PlanGraph: a traced plan as data — inputs, constants, aten op nodes, outputs.

The JSON form (docs/plan-format.md) names ops as text and references values by index; it
holds no pickle, no Python source and no GraphModule. Loading validates every op against the
worker's allow-list and every reference before anything runs. A plan document holds one
graph per input signature the plan was built for (``PlanBuilds``); a call runs the graph
whose inputs match. A dimension of -1 is the batch dimension: any size N, the same in every
input, within the graph's ``batch_sizes`` range; shape arithmetic on N is a small set of
integer ops (``SHAPE_OPS``).
"""
from __future__ import annotations

import json
import re
import time

import torch

from ..dtypes import dtype_name, parse_dtype
from ..errors import SyftError
from ..wire.allowlist import OverloadRecorder, decided_by_metadata
# (the vocabulary is re-exported: plans, workers and smpc build graphs from it)
from .encoding import (BATCH, FORMAT, MAX_GRAPHS, MAX_NODES, READABLE_VERSIONS, SEED_OP, SHAPE_OPS,  # noqa: F401
                       VERSION, Node, PlanFormatError, Value, _encode_tensor, _parse, decode_graph_body,
                       encode_arg, format_shape, is_random, manual_seed)

_Tensor = torch.Tensor

_LEARNED_SIGNATURES = 16  # per graph: the input metadata whose checks a replay remembers
_RECHECK_EVERY = 8  # a replay of learned ops rechecks the time budget at least every this many ops
_UNKEYED = object()  # (run's ``key``: not given, compute it)


class _PlanDocument:
    """A plan document's JSON text, both ways (``to_dict``/``from_dict`` say what it holds)."""

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), separators=(",", ":"))

    @classmethod
    def from_json(cls, text):
        return cls.from_dict(_parse(text))

    def copy(self):
        """An independent, validated copy (what a worker stores)."""
        return type(self).from_dict(json.loads(self.to_json()))


class PlanGraph(_PlanDocument):
    """What a plan computes. ``inputs`` carry a name, a role ("input" or "state"), a shape and a dtype."""

    def __init__(self, name: str, inputs: list[dict], constants: list[torch.Tensor], nodes: list[Node],
                 outputs: list, single_output: bool, batch_sizes: tuple | None = None,
                 constant_names: list | None = None):
        self.name = name
        self.inputs = inputs
        # what each constant was called where the plan's function found it ("bias"), or None
        self.constant_names = list(constant_names) if constant_names is not None else [None] * len(constants)
        # replay draws from a generator (a random op) / seeds it (torch.manual_seed in the plan)
        self.random = any(is_random(n.op) for n in nodes)
        self.seeded = any(n.op is manual_seed for n in nodes)
        # (lowest, highest or None) batch size N of the -1 dims this graph was traced for; None
        # when every input has a fixed shape
        self.batch_sizes = (batch_sizes or (1, None)) if any(BATCH in i["shape"] for i in inputs) else None
        self.constants = constants
        self.nodes = nodes
        self.outputs = outputs
        self.single_output = single_output
        self._program = None
        # input metadata -> (the worker's token, per node: (new bytes, outputs) of an op whose
        # checks passed and follow from that metadata, else None); see ``run``'s ``learn``
        self._learned: dict = {}
        # input metadata -> seconds its last replay took, for metadata whose every op's checks
        # (and so its sizes, and its cost) follow from that metadata alone: ``replay_seconds``
        self._timed: dict = {}
        # an op that changes a tensor's shape in place (t_, squeeze_) could change a constant's
        # between calls, which no input key sees: such a graph is checked op by op every time
        self._learnable = not any(n.is_op and torch.Tag.inplace_view in n.op.tags for n in nodes)
        self.mutated_inputs = sorted({a.index for n in nodes for a in _written_args(n)
                                      if isinstance(a, Value) and a.kind == "input"})

    # --- running ----------------------------------------------------------------------
    def prepare(self) -> None:
        """Compile the replay program now (once; ``run`` would on its first call). A worker does
        it before a plan's time budget starts: the first compile in a process imports torch's
        compiler stack (seconds on a loaded machine), which is no op of the plan."""
        if self._program is None:
            self._compile()

    def _compile(self):
        """Per node: the callable, an arg list template, where its references come from, and
        which node values are used for the last time there (replay frees them right after).
        Every value lives in one flat list of slots (inputs, then constants, then node
        outputs), so filling an argument is one list index."""
        n_nodes = len(self.nodes)
        base = {"input": 0, "const": len(self.inputs), "node": len(self.inputs) + len(self.constants)}

        def slot(v: Value) -> int:
            return base[v.kind] + v.index

        last_use = list(range(n_nodes))  # a value no later node reads dies where it is made
        for k, node in enumerate(self.nodes):
            for v in _refs(node):
                if v.kind == "node":
                    last_use[v.index] = k
        for o in self.outputs:
            if isinstance(o, Value) and o.kind == "node":
                last_use[o.index] = n_nodes  # outputs live on
        frees = [[] for _ in self.nodes]
        bound = {}  # node -> its OpOverload's call, where the program calls torch's binding instead
        for k, at in enumerate(last_use):
            if at < n_nodes:
                frees[at].append(k)
        program = []
        for k, node in enumerate(self.nodes):
            fills = []
            args = list(node.args)
            for i, a in enumerate(args):
                if isinstance(a, Value):
                    fills.append((i, None, slot(a)))
                elif isinstance(a, list) and any(isinstance(b, Value) for b in a):
                    for j, b in enumerate(a):
                        if isinstance(b, Value):
                            fills.append((i, j, slot(b)))
            kw_fills = [(name, slot(v)) for name, v in node.kwargs.items() if isinstance(v, Value)]
            fn = _getitem if node.op == "getitem" else node.op
            is_op = type(fn) is torch._ops.OpOverload  # not getitem, shape arithmetic or a seed
            # an op runs through its C++ overload packet: OpOverload.__call__ is a Python frame;
            # or through torch's own binding of that very overload where one is seen to be it
            call = (_binding(self, node) or fn._op) if is_op else fn
            if is_op and call is not fn._op:
                bound[k] = fn._op
            dead = [(base["node"] + d, d) for d in frees[k]]
            # (a reference inside a list argument, ``cat([a, b])``: that list is copied too; else the
            # template's own lists are passed as they are, read only, and one shallow copy will do)
            nested = any(j is not None for _, j, _ in fills)
            program.append((fn, call, is_op, args, fills, dict(node.kwargs), kw_fills, base["node"] + k, dead, nested))
        outputs = [(True, slot(o)) if isinstance(o, Value) else (False, o) for o in self.outputs]
        # (the same program with every op's own overload call: a replay under a torch function mode,
        # which must see the OpOverload as before)
        self._unbound = [(step[0], bound[k]) + step[2:] if k in bound else step for k, step in enumerate(program)]
        self._program = program, outputs
        return self._program

    def run(self, inputs: list, guard=None, check=None, generator: torch.Generator | None = None,
            learn=None, recheck=None, admit=None, key=_UNKEYED) -> list:
        """Replay the graph on real values; returns the output values in order.

        Each node's value is dropped after its last use, so a long chain holds only what is
        still needed. On a worker, ``guard(op, args, kwargs, live_bytes)`` runs before each op
        (the allow-list's argument checks and the quota, given the bytes the replay holds) and
        returns the op's estimated new bytes; ``check(op, value)`` refuses a bad result.

        ``learn`` (a stored plan's worker: a token naming its policy, e.g. its limits): the
        first replay on inputs of some metadata (shapes, strides, dtypes, storage extents) runs
        every check and notes the ops whose verdicts follow from that metadata alone
        (``decided_by_metadata``; the outputs of the others, and of what reads them, count as
        data); a later replay on inputs of the same metadata with the same token skips their
        ``guard`` and ``check`` and calls ``recheck(op, new_bytes, outputs, live_bytes)``
        instead (what changes between calls: the time budget, the memory held), if given,
        before each such op that makes new memory and at least every ``_RECHECK_EVERY`` ops
        (a view or an in-place op makes none: the memory held cannot grow there). The other
        ops are checked every time.

        ``admit(peak_bytes, outputs)`` (with ``recheck``): called once before a replay whose every
        op was learned, with the most memory the replay holds at once (the learned sizes, values
        freed after their last use) and the most tensors one op makes. It returns None (then
        ``recheck`` runs as above) or ``(deadline, clock)`` once the worker has counted that peak
        as held (its quota holds for the whole replay): then no op needs a quota recheck, and
        before each op ``clock()`` is compared with ``deadline`` (None: no time budget); past it,
        ``recheck`` is called (it raises). ``key``: ``_metadata_key(inputs)``, if the caller has it.

        Random ops draw from ``generator`` (a worker's own), or from the process's default
        generator; a plan that seeds (``torch.manual_seed`` inside it) seeds only its replay:
        the generator it drew from is as before afterwards."""
        if len(inputs) != len(self.inputs):
            raise SyftError(f"plan {self.name!r} takes {len(self.inputs)} values (state and inputs), "
                            f"got {len(inputs)}")
        if self.random and (generator is not None or self.seeded):
            return self._run_on_generator(inputs, guard, check, generator, learn, recheck, admit, key)
        return self._replay(inputs, guard, check, learn, recheck, admit, key)

    def _run_on_generator(self, inputs, guard, check, generator, learn, recheck, admit, key):
        """Replay with the default generator standing for ``generator`` (aten's random ops take
        no generator argument of their own), then put both back."""
        default = torch.default_generator
        saved = default.get_state()
        if generator is not None:
            default.set_state(generator.get_state())
        try:
            out = self._replay(inputs, guard, check, learn, recheck, admit, key)
            if generator is not None and not self.seeded:  # a seeded plan leaves the worker's stream alone
                generator.set_state(default.get_state())
            return out
        finally:
            default.set_state(saved)

    def _replay(self, inputs, guard, check, learn=None, recheck=None, admit=None, key=_UNKEYED) -> list:
        program, outputs = self._program or self._compile()
        if _function_mode():
            program = self._unbound
        slots = [*inputs, *self.constants, *([None] * len(program))]
        sizes = [0] * len(program) if guard is not None else None
        known = learning = data = deadline = clock = None
        admitted = False
        if learn is not None and guard is not None and self._learnable:
            key, known, plain, admitted = self._recall(inputs, learn, recheck, admit, key)
            if plain:  # every op's checks passed and follow from this metadata: a plain replay
                guard = check = sizes = None
            elif admitted:  # the quota is held for the whole replay (its peak); the clock runs per op
                deadline, clock = admitted
                admitted = True
            elif known is None and key is not None:  # check every op, note the verdicts to reuse
                learning, data = [None] * len(program), [False] * len(slots)
        else:
            key = None
        live = rechecked = peak = 0
        started = time.perf_counter() if key is not None else None
        grad = torch.is_grad_enabled() and not self.mutated_inputs
        with torch.set_grad_enabled(grad):
            for k, (fn, call, is_op, template, fills, kwargs, kw_fills, at, dead, nested) in enumerate(program):
                if fills:
                    args = [list(a) if type(a) is list else a for a in template] if nested else template.copy()
                    for i, j, src in fills:
                        if j is None:
                            args[i] = slots[src]
                        else:
                            args[i][j] = slots[src]
                else:
                    args = template
                if kw_fills:
                    kw = dict(kwargs)
                    for name, src in kw_fills:
                        kw[name] = slots[src]
                else:
                    kw = kwargs
                if guard is not None and is_op:
                    verdict = known[k] if known is not None else None
                    if verdict is not None:  # checked once for these inputs' metadata
                        if admitted:  # the quota is held for the whole replay: the time budget only
                            if deadline is not None and clock() > deadline:
                                recheck(fn, verdict[0], verdict[1], live)  # (it raises)
                        elif recheck is not None and (verdict[0] or k - rechecked >= _RECHECK_EVERY):
                            recheck(fn, verdict[0], verdict[1], live)
                            rechecked = k
                        sizes[k] = verdict[0]
                        live += verdict[0]
                        out = call(*args, **kw)
                    else:
                        sizes[k] = guard(fn, args, kw, live)
                        live += sizes[k]
                        if live > peak:
                            peak = live
                        out = call(*args, **kw)
                        if check is not None:
                            _check_outputs(check, fn, out)
                        if learning is not None:
                            if (not any(data[src] for _, _, src in fills) and not any(data[src] for _, src in kw_fills)
                                    and decided_by_metadata(fn, args, kw, out)):
                                learning[k] = (sizes[k], len(out) if type(out) in (list, tuple) else 1)
                            else:
                                data[at] = True
                else:
                    out = call(*args, **kw)
                    if check is not None and is_op:
                        _check_outputs(check, fn, out)
                    if learning is not None and (any(data[src] for _, _, src in fills)
                                                 or any(data[src] for _, src in kw_fills)):
                        data[at] = True  # getitem or shape arithmetic on data-made values
                slots[at] = out
                del args, kw, out
                for s, d in dead:
                    slots[s] = None
                    if sizes is not None:
                        live -= sizes[d]
        self._remember(key, learn, learning, known, program, peak, started)
        return [slots[v] if is_ref else v for is_ref, v in outputs]

    def _recall(self, inputs, learn, recheck, admit, key):
        """What an earlier replay on these inputs' metadata learned: (key, per-node verdicts or
        None, whether the replay may run plainly, what ``admit`` granted or False)."""
        if key is _UNKEYED:
            key = _metadata_key(inputs)
        entry = self._learned.get(key) if key is not None else None
        if entry is None or entry[0] is not learn:
            return key, None, False, False
        known, every = entry[1], entry[2]
        if every and recheck is None:
            return key, known, True, False  # nothing changes between calls that a recheck would see
        if every and admit is not None:
            admitted = admit(entry[3], entry[4])  # (deadline, clock), or None: op by op
            return key, known, False, admitted if admitted is not None else False
        return key, known, False, False

    def _remember(self, key, learn, learning, known, program, peak, started) -> None:
        """After a replay: the verdicts it learned (later replays on this metadata reuse them)
        and, where every op's checks follow from the metadata, how long it took."""
        if learning is not None:  # every op passed
            if len(self._learned) >= _LEARNED_SIGNATURES:
                self._learned.clear()
                self._timed.clear()
            every = all(v is not None for v, step in zip(learning, program) if step[2])
            # (the most bytes held at once and the most tensors one op makes: ``admit``'s figures)
            most = max((v[1] for v in learning if v is not None), default=0)
            self._learned[key] = (learn, learning, every, peak, most)
            if every:
                self._timed[key] = time.perf_counter() - started
            else:
                self._timed.pop(key, None)
        elif known is not None and key in self._timed:
            self._timed[key] = time.perf_counter() - started

    def replay_seconds(self, inputs: list, learn, key=_UNKEYED) -> float | None:
        """How long the last replay on inputs of this metadata took, when a replay under the
        token ``learn`` (see ``run``) found that every op's checks follow from that metadata
        alone: its ops' sizes, and so their work, are then the same on every such call. None
        otherwise (never run on such inputs, an op whose sizes or checks follow the data).
        A worker runs a plan known to take a moment without a hop to its command thread.
        ``key``: ``_metadata_key(inputs)``, if the caller has it."""
        if key is _UNKEYED:
            key = _metadata_key(inputs)
        entry = self._learned.get(key) if key is not None else None
        if entry is None or entry[0] is not learn:
            return None
        return self._timed.get(key)

    def check_inputs(self, values: list, *, roles=("input", "state")) -> None:
        """A clear error for a wrong number, shape or dtype of inputs (a -1 dim takes the batch size N)."""
        expected = [i for i in self.inputs if i["role"] in roles]
        if len(values) != len(expected):
            names = ", ".join(i["name"] for i in expected)
            raise SyftError(f"plan {self.name!r} takes {len(expected)} tensor(s) ({names}), got {len(values)}")
        batch = None
        for spec, v in zip(expected, values):
            if not isinstance(v, torch.Tensor):
                raise SyftError(f"plan {self.name!r}: input {spec['name']!r} must be a tensor, got {type(v).__name__}")
            shape, want = list(v.shape), spec["shape"]
            if (len(shape) != len(want) or dtype_name(v.dtype) != spec["dtype"]
                    or any(w != BATCH and w != s for w, s in zip(want, shape))):
                raise SyftError(f"plan {self.name!r}: input {spec['name']!r} was built for "
                                f"{spec['dtype']}{format_shape(want)}, got {dtype_name(v.dtype)}{shape}")
            for w, s in zip(want, shape):
                if w != BATCH:
                    continue
                if batch is not None and s != batch:
                    raise SyftError(f"plan {self.name!r}: the batch dimension N (-1) has one size in every input "
                                    f"of a call, got {batch} and {s} (input {spec['name']!r})")
                batch = s
        if batch is not None:
            lo, hi = self.batch_sizes or (1, None)
            if batch < lo or (hi is not None and batch > hi):
                raise SyftError(f"plan {self.name!r} was built for {self.signature()}, got batch size {batch}")

    def matches(self, values: list) -> bool:
        try:
            self.check_inputs(values)
        except SyftError:
            return False
        return True

    def grad_matches(self, values: list) -> bool:
        """Whether the inputs that require grad are those the graph was built with (the third
        part of a build's key, after shape and dtype)."""
        specs = [i for i in self.inputs if i["role"] == "input"]
        args = values[len(values) - len(specs):] if specs else []
        return all(bool(i.get("requires_grad")) == bool(getattr(v, "requires_grad", False))
                   for i, v in zip(specs, args))

    def signature(self) -> str:
        """The inputs this graph runs on, e.g. ``(x: float32[N, 4], N >= 2)``."""
        text = ", ".join(f"{i['name']}: {i['dtype']}{format_shape(i['shape'])}"
                         + (" requires_grad" if i.get("requires_grad") else "")
                         for i in self.inputs if i["role"] == "input")
        if self.batch_sizes is not None:
            lo, hi = self.batch_sizes
            text += f", N >= {lo}" if hi is None else (f", N = {lo}" if lo == hi else f", {lo} <= N <= {hi}")
        return f"({text})"

    # --- views --------------------------------------------------------------------------
    def code(self) -> str:
        names = [re.sub(r"^(?=\d)", "_", re.sub(r"\W", "_", i["name"])) for i in self.inputs]

        def fmt(a):
            if isinstance(a, Value):
                return names[a.index] if a.kind == "input" else repr(a)
            if isinstance(a, list):
                return "[" + ", ".join(fmt(b) for b in a) + "]"
            return repr(a).replace("torch.", "")

        ins = ", ".join(f"{names[i]}: {s['dtype']}{format_shape(s['shape'])}"
                        + (" (state)" if s["role"] == "state" else "")
                        + (" requires_grad" if s.get("requires_grad") else "") for i, s in enumerate(self.inputs))
        lines = [f"def {self.name}({ins}):"]
        lines += [f"    # c{i}: constant {dtype_name(c.dtype)}{list(c.shape)}" + (f", {n}" if n else "")
                  for i, (c, n) in enumerate(zip(self.constants, self.constant_names))]
        for i, n in enumerate(self.nodes):
            args = [fmt(a) for a in n.args] + [f"{k}={fmt(v)}" for k, v in n.kwargs.items()]
            shape = "; ".join(f"{d}{format_shape(s)}" for s, d in n.outputs)
            lines.append(f"    v{i} = {n.name}({', '.join(args)})" + (f"  # {shape}" if shape else ""))
        outs = ", ".join(fmt(o) for o in self.outputs)
        lines.append(f"    return {outs}")
        return "\n".join(lines)

    def graph_dict(self) -> dict:
        """Nodes and edges for the plan view: inputs, state, constants, ops, outputs."""
        nodes, edges = [], []

        def shown(shape):  # the batch dimension as the views name it
            return ["N" if d == BATCH else d for d in shape]

        for i, s in enumerate(self.inputs):
            nodes.append({"id": f"in{i}", "role": s["role"], "label": s["name"], "op": None,
                          "shape": shown(s["shape"]), "dtype": s["dtype"]})
        for i, c in enumerate(self.constants):
            name = self.constant_names[i]
            kind = f"{dtype_name(c.dtype)}{list(c.shape)}"
            nodes.append({"id": f"c{i}", "role": "constant", "label": f"{name}: const {kind}" if name else f"const {kind}",
                          "name": name, "op": None, "shape": list(c.shape), "dtype": dtype_name(c.dtype)})

        def shape_of(v: Value):
            if v.kind == "input":
                s = self.inputs[v.index]
                return shown(s["shape"]), s["dtype"]
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
    def body(self) -> dict:
        """This graph as one entry of a plan document's ``graphs``."""
        d = {"inputs": self.inputs}
        if self.batch_sizes is not None:
            d["batch_sizes"] = list(self.batch_sizes)
        d.update({
            "constants": [_encode_tensor(c, n) for c, n in zip(self.constants, self.constant_names)],
            "nodes": [{"op": n.name, "args": [encode_arg(a) for a in n.args],
                       "kwargs": {k: encode_arg(v) for k, v in n.kwargs.items()},
                       "outputs": [{"shape": list(s), "dtype": d} for s, d in n.outputs]} for n in self.nodes],
            "outputs": [encode_arg(o) for o in self.outputs],
            "single_output": self.single_output,
        })
        return d

    def to_dict(self) -> dict:
        """A plan document with this one graph."""
        return {"format": FORMAT, "version": VERSION, "name": self.name, "graphs": [self.body()]}

    @classmethod
    def from_dict(cls, d) -> "PlanGraph":
        """The one graph of a plan document (a ``sy.batch`` recording); ``PlanBuilds`` loads several."""
        builds = PlanBuilds.from_dict(d)
        if len(builds.graphs) != 1:
            raise PlanFormatError(f"expected a plan document with one graph, got {len(builds.graphs)}")
        return builds.graphs[0]

    @classmethod
    def from_body(cls, name: str, b, node_budget: int = MAX_NODES) -> "PlanGraph":
        """Validate one graph of a plan document (plans/encoding.py)."""
        return cls(name, *decode_graph_body(b, node_budget))


class PlanBuilds(_PlanDocument):
    """Every graph a plan was built for, one per input signature: what is sent and stored.

    A call runs the first graph whose inputs match (fixed shapes before batch-generic ones)."""

    def __init__(self, name: str, graphs: list[PlanGraph]):
        self.name = name
        fixed = [g for g in graphs if g.batch_sizes is None]
        self.graphs = fixed + sorted((g for g in graphs if g.batch_sizes is not None), key=lambda g: g.batch_sizes[0])
        # (shape, dtype) of each input -> the graph that matched them: a call then skips the
        # per-input checks (the graphs never change; a plan built again makes new PlanBuilds)
        self._found: dict[tuple, PlanGraph] = {}

    @property
    def latest(self) -> PlanGraph:
        return self.graphs[-1]

    def find(self, values: list, strict: bool = False, key=None) -> PlanGraph | None:
        """The graph for these inputs: by shape and dtype, preferring one built with the same
        inputs requiring grad (``strict``: only such a one). ``key``: the inputs'
        ``_metadata_key`` if the caller has it (it holds their shapes, dtypes and requires_grad)."""
        if key is not None:
            key = (key, strict, "metadata")
        else:
            try:
                key = (tuple([(v.shape, v.dtype, v.requires_grad) for v in values]), strict)
            except AttributeError:  # not all tensors: check_inputs says what is wrong
                key = None
        graph = self._found.get(key)
        if graph is None:
            fits = [g for g in self.graphs if g.matches(values)]
            graph = next((g for g in fits if g.grad_matches(values)), None)
            if graph is None and not strict and fits:
                graph = fits[0]  # its ops are explicit: they replay whatever requires grad
            if graph is not None and key is not None and len(self._found) < 256:
                self._found[key] = graph
        return graph

    def select(self, values: list, key=None) -> PlanGraph:
        """The graph for these inputs, or an error that names the signatures there are
        (``key``: as ``find``'s)."""
        graph = self.find(values, key=key)
        if graph is not None:
            return graph
        if len(self.graphs) == 1:
            self.graphs[0].check_inputs(values)  # its precise error: arity, shape or dtype
        state = [i for i in self.graphs[0].inputs if i["role"] == "state"]
        given = values[len(state):] if len(values) >= len(state) else values
        got = ", ".join(f"{dtype_name(v.dtype)}{list(v.shape)}" if isinstance(v, torch.Tensor)
                        else type(v).__name__ for v in given)
        raise SyftError(f"plan {self.name!r} was built for {' or '.join(self.signatures())}; got ({got}). "
                        f"Build it for these inputs (plan.build(...)) and send it again")

    def signatures(self) -> list[str]:
        return [g.signature() for g in self.graphs]

    def to_dict(self) -> dict:
        return {"format": FORMAT, "version": VERSION, "name": self.name, "graphs": [g.body() for g in self.graphs]}

    @classmethod
    def from_dict(cls, d) -> "PlanBuilds":
        if not isinstance(d, dict) or d.get("format") != FORMAT:
            raise PlanFormatError(f"not a syft_lab plan (format must be {FORMAT!r})")
        if d.get("version") not in READABLE_VERSIONS:
            raise PlanFormatError(f"plan format version {d.get('version')!r} is not supported "
                                  f"(this reads {', '.join(map(str, READABLE_VERSIONS))})")
        name = d.get("name")
        if not isinstance(name, str):
            raise PlanFormatError("malformed plan: its name is a string")
        bodies = [d] if d["version"] == 1 else d.get("graphs")
        if not isinstance(bodies, list) or not 1 <= len(bodies) <= MAX_GRAPHS:
            raise PlanFormatError(f"malformed plan: 'graphs' is a list of 1 to {MAX_GRAPHS} graphs")
        graphs, budget = [], MAX_NODES
        for b in bodies:
            if not isinstance(b, dict):
                raise PlanFormatError("malformed plan: a graph is an object")
            g = PlanGraph.from_body(name, b, budget)
            budget -= len(g.nodes)
            graphs.append(g)
        state = [[i for i in g.inputs if i["role"] == "state"] for g in graphs]
        if any(s != state[0] for s in state):
            raise PlanFormatError("malformed plan: every graph of a plan has the same state inputs")
        return cls(name, graphs)


_PLAIN = (torch.Tensor, torch.nn.Parameter)


# --- torch's own binding of a node's op ------------------------------------------------------
# ``op._op`` converts its arguments by the schema and calls the kernel boxed: ~0.5 us a call more
# than torch's own binding of the same overload (``torch.mm``: the Python argument parser, the
# unboxed call), on every node of every replay. A node whose arguments are its tensor values and
# fixed constants (no keywords, no value inside a list) calls the binding of its op's name if,
# run once on meta tensors of the node's shapes under a dispatch mode that records, that binding
# reaches exactly this overload with exactly these arguments (the tensors themselves, the constants
# equal and of their type) and nothing else: the same kernel, autograd and errors.

_VF = torch._C._VariableFunctions
_BUILTIN = type(_VF.add)
_function_mode = torch._C._is_torch_function_mode_enabled
_dispatch_modes = torch._C._len_torch_dispatch_stack


def _meta_value(graph, v: Value):
    if v.kind == "const":
        t = graph.constants[v.index]
        return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="meta") \
            if type(t) is torch.Tensor else None
    if v.kind == "input":
        spec = graph.inputs[v.index]
        shape, dtype = spec["shape"], spec["dtype"]
    else:
        outs = graph.nodes[v.index].outputs
        if len(outs) != 1 or graph.nodes[v.index].op == "getitem" or not graph.nodes[v.index].is_op:
            return None
        shape, dtype = outs[0]
    if not all(type(n) is int and n >= 0 for n in shape):
        return None  # a batch-generic size
    try:
        return torch.empty(shape, dtype=parse_dtype(dtype), device="meta")
    except Exception:
        return None


def _binding(graph, node):
    if node.kwargs or _dispatch_modes() or _function_mode():
        return None
    fn = getattr(_VF, node.op._schema.name.split("::")[-1], None)
    if fn is None or type(fn) is not _BUILTIN:
        return None
    margs = []
    for a in node.args:
        if isinstance(a, Value):
            m = _meta_value(graph, a)
            if m is None:
                return None
            margs.append(m)
        elif type(a) in (list, tuple) and any(isinstance(b, Value) for b in a):
            return None
        elif isinstance(a, torch.Tensor):
            return None
        else:
            margs.append(a)
    rec = OverloadRecorder()
    try:
        with rec:
            fn(*margs)
    except Exception:
        return None
    if len(rec.seen) != 1:
        return None
    func, seen, seen_kwargs = rec.seen[0]
    if func is not node.op or seen_kwargs or len(seen) != len(margs):
        return None
    for x, m in zip(seen, margs):
        if isinstance(m, torch.Tensor):
            if x is not m:
                return None
        elif not (type(x) is type(m) and x == m) and not (type(m) in (list, tuple) and list(x) == list(m)):
            return None
    return fn


def _metadata_key(values: list) -> tuple | None:
    """What decides every op's shapes, strides, dtypes and storage extents in a replay on
    ``values`` (with the graph's constants, and given no op reads data to make them): each
    input's, and whether autograd records. None when an input is not a plain tensor."""
    key = [torch.is_grad_enabled()]
    for v in values:
        if type(v) not in _PLAIN:
            return None
        key.append((v.shape, v.stride(), v.storage_offset(), v.dtype, v.untyped_storage().nbytes(),
                    v.requires_grad, v.is_conj(), v.is_neg()))
    return tuple(key)


def _written_args(node: Node) -> list:
    """The arguments an op writes to (in-place and out= ops), from its schema."""
    if not node.is_op:
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


def _check_outputs(check, fn, out) -> None:
    """``check(fn, t)`` on every tensor an op returned (one, or a tuple or list of them)."""
    if type(out) is _Tensor:
        check(fn, out)
        return
    for o in (out if type(out) in (list, tuple) else (out,)):
        if isinstance(o, _Tensor):
            check(fn, o)
