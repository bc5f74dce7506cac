"""Plan: a function traced once into a graph of aten ops, then run, sent, stored and searched.

    @sy.plan
    def double_abs(x):
        return 2 * x.abs()

    double_abs.build(torch.tensor([1., -2.]))   # traced on fake tensors: shapes only
    double_abs(torch.tensor([1., -2.]))         # replayed locally
    pp = double_abs.send(bob)                   # eager: bob holds the plan after this line
    pp(x_ptr)                                   # one message runs the whole plan on bob

``send`` really sends (PySyft first made it lazy because building needed real data), and it
sends every signature the plan was built for. ``@sy.plan(args_shape=[(-1, 784)])`` builds for
any batch size; ``class Net(sy.Plan)`` with a ``forward`` method is a plan whose modules are
its state, as in PySyft's Part 8.
"""
from __future__ import annotations

import hashlib
import inspect as _inspect
import weakref

import torch
import torch.nn as nn

from ..dtypes import dtype_name, parse_dtype
from ..errors import SyftError
from ..ids import new_id
from ..tensors.pointer import PointerTensor
from .graph import BATCH, PlanBuilds, PlanGraph
from .pointer import PlanPointer
from .trace import trace, trace_batched
from .view import view_graph


def _args_key(args) -> tuple:
    """How a call finds its graph without scanning: the inputs' shapes, dtypes and requires_grad."""
    return tuple((tuple(a.shape), dtype_name(a.dtype), a.requires_grad) for a in args), None


def _graph_key(graph: PlanGraph) -> tuple:
    """A build's key: shape, dtype and requires_grad of each input (and the batch sizes it serves)."""
    return (tuple((tuple(i["shape"]), i["dtype"], bool(i.get("requires_grad"))) for i in graph.inputs
                  if i["role"] == "input"), graph.batch_sizes)


def _parse_args_shape(name, args_shape, args_dtype) -> tuple[list, list]:
    shapes = [tuple(s) if isinstance(s, (tuple, list, torch.Size)) else s for s in args_shape]
    if not all(isinstance(s, tuple) and all(type(d) is int and (d >= 0 or d == BATCH) for d in s)
               for s in shapes):
        raise SyftError(f"plan {name!r}: args_shape is a list of shapes, one per argument, such as "
                        f"[(-1, 784)] (-1: a batch dimension of any size), got {args_shape!r}")
    dtypes = list(args_dtype) if args_dtype is not None else [torch.float32] * len(shapes)
    if len(dtypes) != len(shapes):
        raise SyftError("args_dtype needs one dtype per entry of args_shape")
    return shapes, [parse_dtype(d) for d in dtypes]


def _parse_requires_grad(name, requires_grad, n: int) -> list[bool]:
    if requires_grad is None:
        return [False] * n
    if isinstance(requires_grad, bool):
        return [requires_grad] * n
    grads = list(requires_grad)
    if len(grads) != n or not all(isinstance(g, bool) for g in grads):
        raise SyftError(f"plan {name!r}: requires_grad is True, False or one of them per argument "
                        f"(requires_grad=[True, False]), got {requires_grad!r}")
    return grads


class _TupleState(nn.Module):
    """PySyft's ``state=(tensor, ...)``: the tensors are the plan's state, and the function's last
    argument, ``state``, reads them (``bias, = state.read()``)."""

    def __init__(self, tensors):
        super().__init__()
        for i, t in enumerate(tensors):
            self.register_buffer(f"state_{i}", t)

    def read(self) -> tuple:
        return tuple(self._buffers.values())


def _tuple_state(fn, state):
    """(the function without its ``state`` argument, the module holding the tensors) for
    PySyft's ``state=(tensor, ...)``; the same ``state`` otherwise."""
    if not isinstance(state, (tuple, list)):
        return fn, state
    if not all(isinstance(t, torch.Tensor) and not isinstance(t, PointerTensor) for t in state):
        raise SyftError("a plan's state is an nn.Module (sy.plan(fn, state=model)) or, as in PySyft, a tuple "
                        "of local tensors read with state.read() inside the function")
    params = list(_inspect.signature(fn).parameters)
    if not params or params[-1] != "state":
        raise SyftError(f"state=(tensor, ...) is PySyft's spelling for a function whose last argument is "
                        f"`state` (bias, = state.read()); {getattr(fn, '__name__', 'the function')} takes "
                        f"({', '.join(params)}). Here: give a module, sy.plan(fn, state=model)")
    holder = _TupleState(state)

    def with_state(*args):
        return fn(*args, holder)

    with_state.__signature__ = _inspect.Signature(list(_inspect.signature(fn).parameters.values())[:-1])
    with_state.__name__ = getattr(fn, "__name__", "plan")
    return with_state, holder


_OWN_ATTRIBUTES = {"fn", "name", "origin", "state", "id", "fixed", "sent_to", "tags", "description"}


def module_tensors(module: nn.Module) -> list:
    """``list(module.parameters()) + list(module.buffers())``, in their order and with their
    de-duplication, read from the modules' own dicts: every call of a sent plan reads its
    state's pointers, and torch's generators cost ~15-30 us a call on a small model."""
    modules, seen = [], set()

    def walk(m):
        if id(m) in seen:
            return
        seen.add(id(m))
        modules.append(m)
        for child in m._modules.values():
            if child is not None:
                walk(child)

    walk(module)
    if type(module).parameters is not nn.Module.parameters or type(module).buffers is not nn.Module.buffers:
        return list(module.parameters()) + list(module.buffers())  # a module that lists its own
    out = []
    for attr in ("_parameters", "_buffers"):
        memo = set()
        for m in modules:
            for v in getattr(m, attr).values():
                if v is not None and id(v) not in memo:
                    memo.add(id(v))
                    out.append(v)
    return out


class Plan:
    """A traced function, or a subclass with ``forward`` whose modules are its state (PySyft's
    ``class Net(sy.Plan)``). It keeps one graph per input signature it was built for; all of
    them travel with ``send``. ``graph``, ``code`` describe the latest build."""

    kind = "plan"

    def __init__(self, fn=None, *, name: str | None = None, state: torch.nn.Module | None = None,
                 args_shape=None, args_dtype=None, requires_grad=None, graphs: PlanBuilds | None = None,
                 origin: str | None = None):
        self._holder = None  # a subclass's modules, parameters and tensors (its state), set in __setattr__
        if fn is None and graphs is None:
            if getattr(type(self), "forward", None) is None:
                raise TypeError("sy.Plan wraps a function (sy.plan(fn)), or is subclassed with a "
                                "forward(self, ...) method whose modules are its state")
            if state is not None:
                raise SyftError(f"a {type(self).__name__} plan's state is the modules it sets in __init__")
            self._holder = state = nn.Module()
            fn = self.forward
            origin = f"class {type(self).__name__}"
        elif fn is not None and not callable(fn):
            raise TypeError(f"sy.plan wraps a function, got {type(fn).__name__}")
        elif fn is not None:
            fn, state = _tuple_state(fn, state)
        if name is None:
            name = (type(self).__name__ if self._holder is not None
                    else getattr(fn, "__name__", None) or (graphs.name if graphs else "plan"))
        self.fn = fn
        self.name = name
        self.origin = origin or (f"function {self.name}" if fn is not None else "loaded from JSON")
        self.state = state
        self.id = new_id()
        self.fixed = graphs is not None  # a plan without a function runs the graphs it has
        self._builds: dict[tuple, PlanGraph] = {}
        self._graph: PlanGraph | None = None
        self._all: PlanBuilds | None = None  # the PlanBuilds of _builds, made on demand
        self.sent_to: list[str] = []  # every worker it was sent to, in order
        self._copies: list[tuple[str, weakref.ref]] = []  # (worker id, its pointer's RemoteRef)
        self.tags: set[str] = set()
        self.description: str | None = None
        if fn is not None:
            self._arg_names = list(_inspect.signature(fn).parameters)
        else:
            self._arg_names = [i["name"] for i in graphs.latest.inputs if i["role"] == "input"]
            for g in graphs.graphs:
                self._builds[_graph_key(g)] = g
            self._graph = graphs.latest
        if args_shape is not None:
            self.build(args_shape=args_shape, args_dtype=args_dtype, requires_grad=requires_grad)
            self.fixed = True
        elif requires_grad is not None:
            raise SyftError(f"plan {self.name!r}: requires_grad= goes with args_shape= (example tensors "
                            f"say it themselves)")

    # --- a subclass's modules and tensors are its state --------------------------------------
    def __setattr__(self, name, value):
        holder = self.__dict__.get("_holder")
        if holder is not None and name not in _OWN_ATTRIBUTES:
            if isinstance(value, (nn.Module, nn.Parameter)):
                setattr(holder, name, value)
                return
            if isinstance(value, torch.Tensor) and not isinstance(value, PointerTensor) and not name.startswith("_"):
                holder.register_buffer(name, value)  # a tensor attribute (self.bias = ...) is state too
                return
        object.__setattr__(self, name, value)

    def __getattr__(self, name):  # only for names not found the usual way: a subclass's modules
        holder = self.__dict__.get("_holder")
        if holder is not None and not name.startswith("__"):
            try:
                return getattr(holder, name)
            except AttributeError:
                pass
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def parameters(self):
        """The parameters of the plan's state (for an optimizer), as ``nn.Module.parameters``."""
        return iter(()) if self.state is None else self.state.parameters()

    # --- building -----------------------------------------------------------------------
    def build(self, *example_args, args_shape=None, args_dtype=None, requires_grad=None) -> "Plan":
        """Trace the function for inputs shaped like ``example_args`` (their values are not used;
        their ``requires_grad`` is), or for ``args_shape`` (-1: a batch dimension of any size)
        with ``requires_grad`` (one bool per argument, or one for all) saying which require grad."""
        if self.fn is None:
            raise SyftError(f"plan {self.name!r} was {self.origin}: it holds only its traced graphs, "
                            f"with no function to trace again")
        n = len(self._arg_names)
        if args_shape is not None:
            if example_args:
                raise SyftError(f"plan {self.name!r}.build takes example tensors or args_shape=, not both")
            shapes, dtypes = _parse_args_shape(self.name, args_shape, args_dtype)
            if len(shapes) != n:
                raise SyftError(f"plan {self.name!r} takes {n} argument(s) ({', '.join(self._arg_names)}), "
                                f"args_shape has {len(shapes)}")
            grads = _parse_requires_grad(self.name, requires_grad, n)
            if any(g and not d.is_floating_point for g, d in zip(grads, dtypes)):
                raise SyftError(f"plan {self.name!r}: only floating-point inputs can require grad")
            if any(BATCH in s for s in shapes):
                graphs = trace_batched(self.fn, self.name, shapes, dtypes, self._arg_names, self.state, grads)
            else:
                examples = [torch.empty(s, dtype=d).requires_grad_(g) for s, d, g in zip(shapes, dtypes, grads)]
                graphs = [trace(self.fn, self.name, examples, self._arg_names, self.state)]
        else:
            if requires_grad is not None:
                raise SyftError(f"plan {self.name!r}.build: requires_grad= goes with args_shape= (example "
                                f"tensors say it themselves: torch.ones(3, requires_grad=True))")
            if not example_args or not all(isinstance(a, torch.Tensor) for a in example_args):
                raise SyftError(f"plan {self.name!r}.build takes example tensors, one per argument")
            if len(example_args) != n:
                raise SyftError(f"plan {self.name!r} takes {n} argument(s) "
                                f"({', '.join(self._arg_names)}), got {len(example_args)} example(s)")
            graphs = [trace(self.fn, self.name, list(example_args), self._arg_names, self.state)]
        for g in graphs:
            self._builds[_graph_key(g)] = g  # building a signature again replaces its graph
        self._graph = graphs[-1]
        self._all = None
        return self

    @property
    def is_built(self) -> bool:
        return self._graph is not None

    def _require_graph(self) -> PlanGraph:
        if self._graph is None:
            raise SyftError(f"plan {self.name!r} is not built: call .build(example) with example tensors "
                            f"or give args_shape=[...] to sy.plan")
        return self._graph

    def builds(self) -> PlanBuilds:
        """Every graph the plan was built for: what ``to_json`` writes and ``send`` sends."""
        self._require_graph()
        if self._all is None:
            self._all = PlanBuilds(self.name, list(self._builds.values()))
        return self._all

    @property
    def signatures(self) -> list[str]:
        """The input signatures the plan was built for, e.g. ``['(x: float32[N, 4], N >= 1)']``."""
        return self.builds().signatures() if self._graph is not None else []

    def _graph_for(self, args) -> PlanGraph:
        graph = self._builds.get(_args_key(args))
        if graph is not None:
            return graph
        values = self._state_values() + list(args)
        if self._graph is not None:
            builds = self.builds()
            # a graph for these shapes and dtypes: built with the same inputs requiring grad if there
            # is one, else another (its backward ops, if any, are explicit: they replay all the same)
            graph = builds.find(values)
            if graph is not None:
                return graph
            if self.fixed or self.fn is None:
                builds.select(values)  # raises: names the signatures the plan has
        self.build(*args)
        return self._builds[_args_key(args)]

    def _state_values(self) -> list:
        if self.state is None:
            return []
        return module_tensors(self.state)

    # --- running --------------------------------------------------------------------------
    def __call__(self, *args):
        if any(isinstance(a, PointerTensor) for a in args):
            loc = next(a for a in args if isinstance(a, PointerTensor)).location
            raise SyftError(f"plan {self.name!r} runs locally on local tensors; to run it where the data is, "
                            f"send it first: pp = {self.name}.send({loc.id}); pp(...)")
        if not all(isinstance(a, torch.Tensor) for a in args):
            raise SyftError(f"plan {self.name!r} takes tensors, got "
                            f"{', '.join(type(a).__name__ for a in args)}")
        graph = self._graph_for(args)
        values = self._state_values() + list(args)
        graph.check_inputs(values)
        out = graph.run(values)
        return out[0] if graph.single_output else tuple(out)

    # --- describing -------------------------------------------------------------------------
    @property
    def graph(self) -> dict:
        """Nodes (op, inputs, output shape and dtype) and edges, for the plan view."""
        return self._require_graph().graph_dict()

    @property
    def code(self) -> str:
        """Readable text of the traced ops."""
        return self._require_graph().code()

    def to_json(self) -> str:
        """The plan document: one graph per signature it was built for (docs/plan-format.md)."""
        return self.builds().to_json()

    @classmethod
    def from_json(cls, text) -> "Plan":
        """Load a plan; every op is checked against the allow-list before anything can run."""
        return Plan(graphs=PlanBuilds.from_json(text), origin="loaded from JSON")

    def tag(self, *tags) -> "Plan":
        for t in tags:
            if not isinstance(t, str) or not t:
                raise SyftError(f"tags are non-empty strings such as '#step', got {t!r}")
        self.tags |= set(tags)
        return self

    def describe(self, description: str) -> "Plan":
        self.description = description
        return self

    def held_by(self) -> list[str]:
        """The workers that hold a copy sent from this plan now: the copy's pointer is alive and
        the plan did not come back (``get``) or get released there."""
        held = []
        for worker_id, ref in self._copies:
            r = ref()
            if r is not None and not r.released and worker_id not in held:
                held.append(worker_id)
        return held

    def _inspection_nodes(self, owner: str, with_values: bool) -> list[dict]:
        held = self.held_by()
        return [plan_node(self.id, self.name, self._graph, owner, sorted(self.tags), self.description,
                          sent_to=held, signatures=self.signatures, origin=self.origin,
                          left=[w for w in self.sent_to if w not in held],
                          builds=self.builds() if self._graph is not None else None)]

    def _object_meta(self) -> dict:
        return {"kind": "plan", "type": "Plan", "name": self.name, "tags": sorted(self.tags),
                "description": self.description, "n_nodes": len(self._graph.nodes) if self._graph else 0,
                "signatures": self.signatures}

    def __repr__(self):
        parts = [f"<Plan {self.name} ({self.origin})"]
        if self._graph is None:
            parts.append("not built")
        else:
            parts.append(f"built for {' or '.join(self.signatures)}")
            parts.append(f"{len(self._graph.nodes)} ops")
        state = [i["name"] for i in self._graph.inputs if i["role"] == "state"] if self._graph else []
        if state:
            parts.append(f"state {', '.join(state)}")
        if self.sent_to:
            parts.append(f"sent to {', '.join(self.sent_to)}")
        return ": ".join(parts[:2]) + "".join(f"; {p}" for p in parts[2:]) + ">"

    # --- sending ------------------------------------------------------------------------------
    def send(self, worker, *, keep: bool = False):
        """Send the built plan, every signature of it (and copies of its state), to ``worker`` in one
        message; returns a PlanPointer.

        ``keep=True``: the worker keeps the plan when every pointer to it is gone, as data left
        with ``worker.load`` (``bob.search("#inc")`` finds it later). Sending the same plan (same
        graphs, state, tags) to a worker that still holds it stores nothing new: the new pointer
        runs the copy there."""
        if keep:
            return self._send_to(worker, keep=True)
        return worker.send(self)

    def _content_key(self, builds: PlanBuilds, state: list) -> str:
        """What makes two sends the same plan: its document, its state's values, tags, description."""
        h = hashlib.sha256(builds.to_json().encode())
        for t in state:
            if isinstance(t, PointerTensor):
                h.update(f"ptr:{t.location.id}:{t.id_at_location}".encode())
            else:
                t = t.detach().contiguous().cpu()
                h.update(f"{dtype_name(t.dtype)}{list(t.shape)}".encode())
                h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")  # 0-dim too
        h.update(repr((sorted(self.tags), self.description)).encode())
        return h.hexdigest()

    def _send_to(self, worker, keep: bool = False):
        builds = self.builds()
        state = self._state_values()
        key = self._content_key(builds, state)
        same = _live_copy(worker, key)
        if same is not None:  # the worker holds this very plan: one more pointer to it
            worker._incref(same.id)
            obj_id = same.id
        else:
            obj_id = worker._store_plan(builds, state, sorted(self.tags), self.description)
        if keep:  # held by the worker itself, as loaded data is: it stays until unloaded, beyond this session
            worker._hold(obj_id)
        if worker.id not in self.sent_to:
            self.sent_to.append(worker.id)
        pointer = PlanPointer(worker, obj_id, self._object_meta(), plan=self)
        self._copies = [(w, r) for w, r in self._copies if r() is not None] + [(worker.id, weakref.ref(pointer._ref))]
        _SENT.setdefault(worker, {}).setdefault(key, []).append(weakref.ref(pointer._ref))
        return pointer

    def __reduce_ex__(self, protocol):
        raise SyftError("a Plan is saved with plan.to_json() and loaded with sy.Plan.from_json(text)")


# worker -> content key -> the RemoteRefs of pointers sent to its copy (plan.send stores a plan
# once per worker while one of them is alive)
_SENT: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _live_copy(worker, key: str):
    refs = _SENT.get(worker, {}).get(key)
    if not refs:
        return None
    alive = [r for r in refs if r() is not None and not r().released]
    refs[:] = alive
    return alive[0]() if alive else None


MAX_VIEW_NODES = 5000  # over the graphs of every signature that a plan node carries for the view


def plan_node(obj_id, name, graph: PlanGraph | None, owner, tags, description, sent_to=(), signatures=(),
              origin=None, left=(), builds: PlanBuilds | None = None) -> dict:
    """The inspection-model node of a plan: its latest graph (with scalar constants, in-place
    writes and regions, plans/view.py), its signatures, inputs and outputs, what it was made
    from, the workers that hold a copy now (``sent_to``) and those it was sent to that do not
    any more (``left``: it came back, or its pointer was dropped)."""
    node = {"kind": "plan", "type": "Plan", "id": obj_id, "owner": owner, "name": name, "tags": tags,
            "description": description, "built": graph is not None, "sent_to": list(sent_to),
            "left": list(left), "signatures": list(signatures), "origin": origin}
    if graph is not None:
        shown = view_graph(graph)
        node.update(graph=shown, code=graph.code(), n_nodes=len(graph.nodes),
                    inputs=graph.inputs, n_outputs=len(graph.outputs))
        # every signature's graph, in the order of `signatures`, when there are several (and
        # they are not too many to send): the view lets one pick; `shown` is `graph`'s index
        others = builds.graphs if builds is not None else []
        if len(others) > 1 and sum(len(g.nodes) for g in others) <= MAX_VIEW_NODES:
            node["graphs"] = [{"signature": g.signature(), "graph": shown if g is graph else view_graph(g),
                               "code": g.code(), "n_nodes": len(g.nodes)} for g in others]
            node["shown"] = next((i for i, g in enumerate(others) if g is graph), len(others) - 1)
    return node


class StoredPlan:
    """What a worker holds for a sent plan: its validated graphs and the ids of its state copies."""

    kind = "plan"

    def __init__(self, builds: PlanBuilds, state_ids: list[int], tags=(), description=None):
        self.builds = builds
        self.state_ids = state_ids
        self.tags = set(tags)
        self.description = description

    def _object_meta(self) -> dict:
        return {"kind": "plan", "type": "Plan", "name": self.builds.name, "tags": sorted(self.tags),
                "description": self.description, "n_nodes": len(self.builds.latest.nodes),
                "signatures": self.builds.signatures()}

    def _inspection_nodes(self, owner: str, with_values: bool) -> list[dict]:
        return [plan_node(0, self.builds.name, self.builds.latest, owner, sorted(self.tags), self.description,
                          signatures=self.builds.signatures(), origin="sent to this worker", builds=self.builds)]

    def to_plan(self, origin: str) -> "Plan":
        """A local Plan of these graphs (a plan fetched back from its worker)."""
        p = Plan(graphs=self.builds, origin=origin)
        p.tags, p.description = set(self.tags), self.description
        return p

    def _on_delete(self, core) -> None:
        for i in self.state_ids:
            core.decref(i)


def plan(fn=None, *, name=None, state=None, args_shape=None, args_dtype=None, requires_grad=None):
    """Decorator: ``@sy.plan`` or ``@sy.plan(args_shape=[(-1, 3)], state=model)`` (-1: any batch
    size; ``requires_grad=[True, False]``: which arguments require grad)."""
    def make(f):
        return Plan(f, name=name, state=state, args_shape=args_shape, args_dtype=args_dtype,
                    requires_grad=requires_grad)

    return make if fn is None else make(fn)


func2plan = plan  # PySyft 0.2's name: @sy.func2plan(args_shape=[(1,)]) is @sy.plan(args_shape=[(1,)])
