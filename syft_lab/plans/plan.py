"""Plan: a function traced once into a graph of aten ops, then run, sent, stored and searched.

    @sy.plan
    def double_abs(x):
        return 2 * x.abs()

    double_abs.build(torch.tensor([1., -2.]))   # traced on fake tensors: shapes only
    double_abs(torch.tensor([1., -2.]))         # replayed locally
    pp = double_abs.send(bob)                   # eager: bob holds the plan after this line
    pp(x_ptr)                                   # one message runs the whole plan on bob

``send`` really sends (PySyft first made it lazy because building needed real data).
"""
from __future__ import annotations

import inspect as _inspect

import torch

from ..dtypes import dtype_name, parse_dtype
from ..errors import SyftError
from ..ids import new_id
from .graph import PlanGraph
from .trace import trace


def _signature(args) -> tuple:
    return tuple((tuple(a.shape), a.dtype, bool(a.requires_grad)) for a in args)


class Plan:
    """A traced function. ``graph``, ``code`` and ``to_json()`` describe the latest build."""

    kind = "plan"

    def __init__(self, fn=None, *, name: str | None = None, state: torch.nn.Module | None = None,
                 args_shape=None, args_dtype=None, graph: PlanGraph | None = None):
        if fn is not None and not callable(fn):
            raise TypeError(f"sy.plan wraps a function, got {type(fn).__name__}")
        self.fn = fn
        self.name = name or getattr(fn, "__name__", None) or (graph.name if graph else "plan")
        self.state = state
        self.id = new_id()
        self.fixed = False
        self._builds: dict[tuple, PlanGraph] = {}
        self._graph: PlanGraph | None = graph
        self.sent_to: list[str] = []
        self.tags: set[str] = set()
        self.description: str | None = None
        if fn is not None:
            params = list(_inspect.signature(fn).parameters)
            self._arg_names = params
        else:
            self._arg_names = [i["name"] for i in graph.inputs if i["role"] == "input"] if graph else []
        if graph is not None:
            self.fixed = True
        if args_shape is not None:
            dtypes = args_dtype or [torch.float32] * len(args_shape)
            if len(dtypes) != len(args_shape):
                raise SyftError("args_dtype needs one dtype per entry of args_shape")
            examples = [torch.empty(tuple(s), dtype=parse_dtype(d)) for s, d in zip(args_shape, dtypes)]
            self.build(*examples)
            self.fixed = True

    # --- building -----------------------------------------------------------------------
    def build(self, *example_args) -> "Plan":
        """Trace the function for inputs shaped like ``example_args`` (their values are not used)."""
        if self.fn is None:
            raise SyftError(f"plan {self.name!r} was loaded from JSON: it has no function to trace again")
        if not example_args or not all(isinstance(a, torch.Tensor) for a in example_args):
            raise SyftError(f"plan {self.name!r}.build takes example tensors, one per argument")
        if len(example_args) != len(self._arg_names):
            raise SyftError(f"plan {self.name!r} takes {len(self._arg_names)} argument(s) "
                            f"({', '.join(self._arg_names)}), got {len(example_args)} example(s)")
        graph = trace(self.fn, self.name, list(example_args), self._arg_names, self.state)
        self._builds[_signature(example_args)] = graph
        self._graph = graph
        return self

    @property
    def is_built(self) -> bool:
        return self._graph is not None

    def _require_graph(self) -> PlanGraph:
        if self._graph is None:
            raise SyftError(f"plan {self.name!r} is not built: call .build(example) with example tensors "
                            f"or give args_shape=[...] to sy.plan")
        return self._graph

    def _graph_for(self, args) -> PlanGraph:
        sig = _signature(args)
        graph = self._builds.get(sig)
        if graph is not None:
            return graph
        if self._graph is not None and self.fixed:
            self._graph.check_inputs(self._state_values() + list(args))  # raises a clear error
            return self._graph
        self.build(*args)
        return self._builds[sig]

    def _state_values(self) -> list:
        if self.state is None:
            return []
        return list(self.state.parameters()) + list(self.state.buffers())

    # --- running --------------------------------------------------------------------------
    def __call__(self, *args):
        from ..tensors.pointer import PointerTensor

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
        return self._require_graph().to_json()

    @classmethod
    def from_json(cls, text) -> "Plan":
        """Load a plan; every op is checked against the allow-list before anything can run."""
        return cls(graph=PlanGraph.from_json(text))

    def tag(self, *tags) -> "Plan":
        for t in tags:
            if not isinstance(t, str) or not t:
                raise SyftError(f"tags are non-empty strings such as '#step', got {t!r}")
        self.tags |= set(tags)
        return self

    def describe(self, description: str) -> "Plan":
        self.description = description
        return self

    def _inspection_nodes(self, owner: str, with_values: bool) -> list[dict]:
        return [plan_node(self.id, self.name, self._graph, owner, sorted(self.tags), self.description,
                          sent_to=list(self.sent_to))]

    def _object_meta(self) -> dict:
        return {"kind": "plan", "type": "Plan", "name": self.name, "tags": sorted(self.tags),
                "description": self.description, "n_nodes": len(self._graph.nodes) if self._graph else 0}

    def __repr__(self):
        state = f"{len(self._graph.nodes)} ops" if self._graph else "not built"
        sent = f", sent to {', '.join(self.sent_to)}" if self.sent_to else ""
        return f"<Plan {self.name}: {state}{sent}>"

    # --- sending ------------------------------------------------------------------------------
    def send(self, worker):
        """Send the built plan (and copies of its state) to ``worker`` in one message; returns a PlanPointer."""
        return worker.send(self)

    def _send_to(self, worker):
        from .pointer import PlanPointer

        graph = self._require_graph()
        state = [t for t in self._state_values()]
        obj_id = worker._store_plan(graph, state, sorted(self.tags), self.description)
        if worker.id not in self.sent_to:
            self.sent_to.append(worker.id)
        return PlanPointer(worker, obj_id, self._object_meta(), plan=self)

    def __reduce_ex__(self, protocol):
        raise SyftError("a Plan is saved with plan.to_json() and loaded with sy.Plan.from_json(text)")


def plan_node(obj_id, name, graph: PlanGraph | None, owner, tags, description, sent_to=()) -> dict:
    """The inspection-model node of a plan: its graph, inputs and outputs, and where it went."""
    node = {"kind": "plan", "type": "Plan", "id": obj_id, "owner": owner, "name": name, "tags": tags,
            "description": description, "built": graph is not None, "sent_to": list(sent_to)}
    if graph is not None:
        node.update(graph=graph.graph_dict(), code=graph.code(), n_nodes=len(graph.nodes),
                    inputs=graph.inputs, n_outputs=len(graph.outputs))
    return node


class StoredPlan:
    """What a worker holds for a sent plan: a validated graph and the ids of its state copies."""

    kind = "plan"

    def __init__(self, graph: PlanGraph, state_ids: list[int], tags=(), description=None):
        self.graph = graph
        self.state_ids = state_ids
        self.tags = set(tags)
        self.description = description

    def _object_meta(self) -> dict:
        return {"kind": "plan", "type": "Plan", "name": self.graph.name, "tags": sorted(self.tags),
                "description": self.description, "n_nodes": len(self.graph.nodes)}

    def _inspection_nodes(self, owner: str, with_values: bool) -> list[dict]:
        return [plan_node(0, self.graph.name, self.graph, owner, sorted(self.tags), self.description)]

    def _on_delete(self, core) -> None:
        for i in self.state_ids:
            core.decref(i)


def plan(fn=None, *, name=None, state=None, args_shape=None, args_dtype=None):
    """Decorator: ``@sy.plan`` or ``@sy.plan(args_shape=[(4, 3)], state=model)``."""
    if fn is None:
        return lambda f: Plan(f, name=name, state=state, args_shape=args_shape, args_dtype=args_dtype)
    return Plan(fn, name=name, state=state, args_shape=args_shape, args_dtype=args_dtype)


