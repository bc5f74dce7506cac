"""sy.batch(worker): eager pointer code, recorded and sent as one plan when the block ends.

Inside the block, ops on the worker's pointers are not sent: each is recorded, and its result
is a pointer whose shape comes from running the op on meta tensors (memoised). At the end
of the block the recording goes to the worker as one graph; afterwards the results are
ordinary pointers.
"""
from __future__ import annotations

import contextlib

import torch

from ..commands import NewObject, Ref, SameAsArg
from ..dtypes import dtype_name, parse_dtype
from ..errors import SyftError
from ..ids import new_id
from .graph import Node, PlanGraph, Value

_meta_cache: dict = {}


def _hashable(a):
    if isinstance(a, list):
        return tuple(_hashable(b) for b in a)
    return a


class BatchRecorder:
    def __init__(self, worker):
        self.worker = worker
        self.inputs: list[dict] = []
        self.input_ids: list[int] = []
        self._input_index: dict[int, int] = {}
        self.constants: list[torch.Tensor] = []
        self.nodes: list[Node] = []
        self.pending: dict[int, tuple] = {}  # pending object id -> (Value, shape, dtype)
        self.dropped: set[int] = set()

    # --- recording ------------------------------------------------------------------------
    def _value(self, a):
        """(graph value, meta tensor) for one op argument."""
        if isinstance(a, Ref):
            hit = self.pending.get(a.id)
            if hit is not None:
                v, shape, dtype = hit
                return v, ("t", shape, dtype)
            if a.id not in self._input_index:
                shape, dtype = getattr(a, "shape", None), getattr(a, "dtype", None)
                if shape is None:
                    raise SyftError("sy.batch needs the shape of every input pointer")
                self._input_index[a.id] = len(self.inputs)
                self.input_ids.append(a.id)
                self.inputs.append({"name": f"in{len(self.inputs)}", "role": "input",
                                    "shape": list(shape), "dtype": dtype_name(dtype)})
            j = self._input_index[a.id]
            spec = self.inputs[j]
            return Value("input", j), ("t", tuple(spec["shape"]), spec["dtype"])
        if isinstance(a, torch.Tensor):  # a 0-dim local constant
            self.constants.append(a.detach().clone())
            return Value("const", len(self.constants) - 1), ("c", tuple(a.shape), dtype_name(a.dtype), a.item())
        if type(a) in (list, tuple):
            pairs = [self._value(b) for b in a]
            return [p[0] for p in pairs], ("l", tuple(p[1] for p in pairs))
        return a, ("v", _hashable(a))

    def record(self, func, args, kwargs):
        vals, sig = [], []
        for a in args:
            v, s = self._value(a)
            vals.append(v)
            sig.append(s)
        kw_vals, kw_sig = {}, []
        for k, a in (kwargs or {}).items():
            v, s = self._value(a)
            kw_vals[k] = v
            kw_sig.append((k, s))
        out_meta = self._infer(func, tuple(sig), tuple(kw_sig), args, kwargs)
        outputs = [(tuple(s), d) for kind, s, d in out_meta if kind == "new"]
        self.nodes.append(Node(func, vals, kw_vals, outputs))
        k = len(self.nodes) - 1
        results = []
        for pos, (kind, shape, dtype) in enumerate(out_meta):
            if kind == "same":
                results.append(SameAsArg(shape))
                continue
            v = Value("node", k)
            if len(out_meta) > 1:
                self.nodes.append(Node("getitem", [Value("node", k), pos], {}, [(tuple(shape), dtype)]))
                v = Value("node", len(self.nodes) - 1)
            obj_id = new_id()
            self.pending[obj_id] = (v, tuple(shape), dtype)
            results.append(NewObject(obj_id, torch.Size(shape), parse_dtype(dtype)))
        return results[0] if len(out_meta) == 1 and not isinstance(out_meta, tuple) else tuple(results)

    def _infer(self, func, sig, kw_sig, args, kwargs):
        key = (func, sig, kw_sig)
        hit = _meta_cache.get(key)
        if hit is not None:
            return hit

        def meta(s):
            if s[0] == "t":
                return torch.empty(s[1], dtype=parse_dtype(s[2]), device="meta")
            if s[0] == "c":
                return torch.tensor(s[3], dtype=parse_dtype(s[2]))
            if s[0] == "l":
                return [meta(b) for b in s[1]]
            return list(s[1]) if isinstance(s[1], tuple) else s[1]

        margs = [meta(s) for s in sig]
        mkw = {k: meta(s) for k, s in kw_sig}
        try:
            out = func(*margs, **mkw)
        except Exception as e:
            raise SyftError(f"{func} cannot run inside sy.batch ({type(e).__name__}: {e}); ops whose output "
                            f"shape depends on values must run outside the block") from None
        outs = out if isinstance(out, (tuple, list)) else [out]
        desc = []
        for o in outs:
            same = next((i for i, m in enumerate(margs) if o is m), None)
            if same is not None:
                desc.append(("same", same, None))
            elif isinstance(o, torch.Tensor):
                desc.append(("new", tuple(o.shape), dtype_name(o.dtype)))
            else:
                raise SyftError(f"{func} returns a {type(o).__name__}, which sy.batch cannot record")
        result = tuple(desc) if isinstance(out, (tuple, list)) else [desc[0]]
        _meta_cache[key] = result
        return result

    # --- ending ---------------------------------------------------------------------------
    def flush(self):
        if not self.pending:
            if self.nodes:  # only in-place ops on existing objects
                graph = PlanGraph("batch", self.inputs, self.constants, self.nodes, [], False)
                self.worker._run_graph(graph, self.input_ids, [])
            return
        ids = list(self.pending)
        graph = PlanGraph("batch", self.inputs, self.constants, self.nodes,
                          [self.pending[i][0] for i in ids], False)
        self.worker._run_graph(graph, self.input_ids, ids)
        for i in self.dropped:  # results the user dropped inside the block
            self.worker._release(i)


@contextlib.contextmanager
def batch(worker):
    """Record pointer ops on ``worker`` inside the block and send them as one plan at its end."""
    if getattr(worker, "_batch", None) is not None:
        raise SyftError(f"sy.batch({worker.id}) is already open")
    rec = BatchRecorder(worker)
    worker._batch = rec
    try:
        yield rec
    finally:
        worker._batch = None
    rec.flush()
