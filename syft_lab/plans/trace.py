"""Tracing: run a function once on fake (meta-backed) tensors and keep the aten ops it did.

No real data is needed or kept: only shapes and dtypes. Module state is reparametrised to
explicit inputs, so parameters are inputs of the graph, not data-less constants.
"""
from __future__ import annotations

import contextlib
import operator
import traceback

import torch
from torch.fx.experimental.proxy_tensor import make_fx

from ..dtypes import dtype_name
from ..errors import SyftError
from .graph import Node, PlanGraph, Value


class TraceError(SyftError):
    """The function cannot become a plan (e.g. it branches on tensor values)."""


def _user_line(fn, exc) -> str:
    code = getattr(fn, "__code__", None)
    for frame, lineno in reversed(list(traceback.walk_tb(exc.__traceback__))):
        if code is not None and frame.f_code.co_filename == code.co_filename:
            src = traceback.linecache.getline(code.co_filename, lineno).strip()
            return f"line {lineno} of {code.co_filename.rsplit('/', 1)[-1]} ({src})"
    return "an unknown line"


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


def trace(fn, name: str, example_args: list, arg_names: list[str], state=None) -> PlanGraph:
    state_names, state_values = _state_tensors(state)
    k = len(state_names)

    def flat_fn(*flat):
        ctx = contextlib.nullcontext()
        if k:
            from torch.nn.utils.stateless import _reparametrize_module

            ctx = _reparametrize_module(state, dict(zip(state_names, flat[:k])))
        with ctx:
            return fn(*flat[k:])

    # Fresh uninitialised stand-ins: tracing reads only their shapes, dtypes and requires_grad.
    examples = [torch.empty(t.shape, dtype=t.dtype).requires_grad_(t.requires_grad) for t in state_values]
    examples += [torch.empty(t.shape, dtype=t.dtype).requires_grad_(t.requires_grad) for t in example_args]
    try:
        gm = make_fx(flat_fn, tracing_mode="fake")(*examples)
    except SyftError:
        raise
    except Exception as e:
        if _is_data_dependent(e):
            raise TraceError(f"plan {name!r} branches on tensor values at {_user_line(fn, e)}: a plan is traced "
                             f"on shapes only. Move value-dependent Python control flow out of the plan "
                             f"(or use torch.where).") from None
        raise TraceError(f"plan {name!r} could not be traced: {type(e).__name__}: {e}") from None

    inputs = [{"name": n, "role": "state", "shape": list(t.shape), "dtype": dtype_name(t.dtype)}
              for n, t in zip(state_names, state_values)]
    inputs += [{"name": n, "role": "input", "shape": list(t.shape), "dtype": dtype_name(t.dtype)}
               for n, t in zip(arg_names, example_args)]
    return graph_from_fx(gm, name, inputs)


def _meta_outputs(val):
    if isinstance(val, torch.Tensor):
        return [(tuple(val.shape), dtype_name(val.dtype))]
    if isinstance(val, (list, tuple)):
        return [(tuple(v.shape), dtype_name(v.dtype)) for v in val if isinstance(v, torch.Tensor)]
    return []


def graph_from_fx(gm: torch.fx.GraphModule, name: str, inputs: list[dict]) -> PlanGraph:
    env: dict = {}
    constants: list[torch.Tensor] = []
    nodes: list[Node] = []
    n_inputs = 0

    def conv(a):
        if isinstance(a, torch.fx.Node):
            return env[a]
        if isinstance(a, (list, tuple)):
            return [conv(b) for b in a]
        return a

    outputs, single = [], True
    for fx_node in gm.graph.nodes:
        if fx_node.op == "placeholder":
            env[fx_node] = Value("input", n_inputs)
            n_inputs += 1
        elif fx_node.op == "get_attr":
            t = getattr(gm, fx_node.target)
            constants.append(t.detach().clone())
            env[fx_node] = Value("const", len(constants) - 1)
        elif fx_node.op == "call_function":
            target = fx_node.target
            if target is operator.getitem:
                op = "getitem"
            elif isinstance(target, torch._ops.OpOverload) and target.namespace == "aten":
                op = target
            else:
                raise TraceError(f"plan {name!r} uses {target}, which is not an aten op")
            nodes.append(Node(op, conv(list(fx_node.args)), {k: conv(v) for k, v in fx_node.kwargs.items()},
                              _meta_outputs(fx_node.meta.get("val"))))
            env[fx_node] = Value("node", len(nodes) - 1)
        elif fx_node.op == "output":
            out = fx_node.args[0]
            single = isinstance(out, torch.fx.Node)
            outs = [out] if single else list(out)
            outputs = [conv(o) for o in outs]
            if not all(isinstance(o, Value) for o in outputs):
                raise TraceError(f"plan {name!r} must return tensors")
    if n_inputs != len(inputs):
        raise TraceError(f"plan {name!r}: traced {n_inputs} inputs, expected {len(inputs)}")
    return PlanGraph(name, inputs, constants, nodes, outputs, single)
