"""Cancellable ops: an expensive op runs in a forked copy of the worker, which is killed if it
runs past the worker's time budget (docs/workers.md, "Time budget").

Why a fork: a running aten kernel cannot be interrupted, and a thread cannot be killed. A fork
sees every stored tensor (copy-on-write, nothing is copied to start it) and its writes land in
its own pages. So killing it loses nothing: the store, every other client's objects and the
op's in-place target are exactly as they were. When the op finishes in time, the child sends
back what it made and what it wrote in place (raw bytes over a pipe, never pickles), and the
worker stores or copies them in as if it had run the op itself.

Only ops whose cost grows faster than their sizes (windows, contractions, polynomial degrees,
data-dependent work: ``wire/op_cost``'s families) and whose estimated work reaches ``FORK_WORK``
take this road: a fork of a worker holding gigabytes costs ~15-20 ms, and sending a result back
~2 s per GiB. Every other op runs inline: a linear op's cost is its size, which the per-op cost
bound (``wire/op_cost.MAX_OP_WORK``, ~10 s) holds under the default budget; so does an op that
records autograd history, since a fork cannot hand back a graph.
"""
from __future__ import annotations

import json
import math
import os
import select
import signal
import struct
import time

import torch

from ..errors import OpCancelledError, SyftError

# About 0.3 s of scalar element work (op_cost measured ~1e9 window elements/s): ops below it run inline.
FORK_WORK = 2**28

_PLAIN = (torch.Tensor, torch.nn.Parameter)
# ops that write an argument their schema does not mark as written (``Tensor?`` running stats)
_UNDECLARED_WRITES = frozenset({torch.ops.aten.native_batch_norm.default, torch.ops.aten.batch_norm.default,
                                torch.ops.aten._batch_norm_impl_index.default})
_LEN = struct.Struct("<Q")
_CHUNK = 1 << 20


def forkable(op, args, kwargs) -> bool:
    """Plain tensors only (a chain layer keeps Python state a fork cannot send back), no autograd
    history to record, and every argument the op writes given by position."""
    if any(i >= len(args) for i in _mutated_args(op)) and kwargs or op in _UNDECLARED_WRITES:
        return False
    grad = torch.is_grad_enabled()
    for a in _tensors_in(args, kwargs):
        if type(a) not in _PLAIN or (grad and a.requires_grad) or a.layout is not torch.strided:
            return False
    return True


def _tensors_in(args, kwargs):
    for a in list(args) + (list(kwargs.values()) if kwargs else []):
        if isinstance(a, torch.Tensor):
            yield a
        elif type(a) in (list, tuple):
            yield from (b for b in a if isinstance(b, torch.Tensor))


def _mutated_args(op) -> list[int]:
    """Positions of the schema's arguments the op writes (``Tensor(a!)``)."""
    return [i for i, arg in enumerate(op._schema.arguments)
            if arg.alias_info is not None and arg.alias_info.is_write]


def run_forked(op, args: list, kwargs: dict | None, budget_s: float, generators=()):
    """``op(*args, **kwargs)`` in a forked child, stopped after ``budget_s`` seconds
    (OpCancelledError; nothing changed). Returns what the op returns; its in-place writes and the
    ``generators``' (and the default generator's) advance are applied here."""
    gens = [torch.default_generator, *generators]
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: run, report, exit without running any of the parent's cleanup
        os.close(read_fd)
        code = 0
        try:
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            # the parent's OpenMP pool is not in the fork (its threads are not), and a parallel
            # region would wait on them forever: one thread, which runs inline
            torch.set_num_threads(1)
            _child(op, args, kwargs, gens, write_fd)
        except BaseException as e:  # the op's own error travels back as text
            code = 1
            try:
                _send_json(write_fd, {"error": [type(e).__name__, str(e)[:2000]]})
            except BaseException:
                code = 2
        os._exit(code)
    os.close(write_fd)
    deadline = time.monotonic() + budget_s
    try:
        reader = _Reader(read_fd, deadline)
        header = json.loads(reader.read(_LEN.unpack(reader.read(_LEN.size))[0]))
        if "error" in header:
            kind, message = header["error"]
            raise ChildError(kind, message)
        tensors = [_read_tensor(reader, spec) for spec in header["tensors"]]
    except _Overdue:
        os.kill(pid, signal.SIGKILL)
        raise OpCancelledError(
            f"{op} ran past the worker's time budget of {budget_s:g} s and was stopped: nothing was "
            f"stored and no object changed. Work in smaller pieces, or start the worker with a larger "
            f"--max-op-seconds") from None
    finally:
        os.close(read_fd)
        _reap(pid)
    for gen, state in zip(gens, tensors):
        gen.set_state(state)
    for k, (i, j) in enumerate(header["written"], start=len(gens)):  # in-place writes, into the caller's tensors
        target = args[i] if j is None else args[i][j]
        with torch.no_grad():
            target.copy_(tensors[k])
    return _rebuild(header["out"], args, tensors)


class ChildError(Exception):
    """The op raised in the child: re-raised by the caller as the op's own error."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


class _Overdue(Exception):
    pass


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass


def _child(op, args, kwargs, gens, fd) -> None:
    out = op(*args, **kwargs) if kwargs else op(*args)
    sent: list[torch.Tensor] = [g.get_state() for g in gens]
    written = []
    for i in _mutated_args(op):
        if i < len(args):
            a = args[i]
            if isinstance(a, torch.Tensor):
                written.append([i, None]); sent.append(a)
            elif type(a) in (list, tuple):
                for j, b in enumerate(a):
                    written.append([i, j]); sent.append(b)
    header = {"written": written, "out": _describe(out, args, sent)}
    header["tensors"] = [_spec(t) for t in sent]
    _send_json(fd, header)
    for t in sent:
        _send_tensor(fd, t)


def _describe(out, args, sent):
    """What the op returned, as JSON: {"arg": i} for an input returned (in place), {"t": k} for
    the k-th tensor sent, {"v": x} for a number, {"seq": [...]} for a tuple or list."""
    if isinstance(out, torch.Tensor):
        for i, a in enumerate(args):
            if out is a:
                return {"arg": i}
        if type(out) is not torch.Tensor or out.layout is not torch.strided:
            raise SyftError(f"a forked op returned a {type(out).__name__} ({out.layout})")
        sent.append(out)
        return {"t": len(sent) - 1, "rg": out.requires_grad}
    if type(out) in (list, tuple):
        return {"seq": [_describe(o, args, sent) for o in out], "tuple": type(out) is tuple}
    if out is None or type(out) in (bool, int, float):
        return {"v": out}
    if type(out) is complex:
        return {"c": [out.real, out.imag]}
    raise SyftError(f"a forked op returned a {type(out).__name__}")


def _rebuild(desc, args, tensors):
    if "arg" in desc:
        return args[desc["arg"]]
    if "t" in desc:
        t = tensors[desc["t"]]
        return t.requires_grad_(True) if desc["rg"] else t
    if "seq" in desc:
        items = [_rebuild(d, args, tensors) for d in desc["seq"]]
        return tuple(items) if desc["tuple"] else items
    if "c" in desc:
        return complex(*desc["c"])
    return desc["v"]


def _spec(t: torch.Tensor) -> dict:
    dense = _flat_span(t) is not None
    return {"dtype": str(t.dtype).removeprefix("torch."), "shape": list(t.shape),
            "stride": list(t.stride()) if dense else None}


def _flat_span(t: torch.Tensor):
    """The 1-D view of the memory ``t`` covers, if it covers exactly numel elements (dense)."""
    if t.is_contiguous():
        return t.reshape(-1)
    if torch._prims_common.is_non_overlapping_and_dense(t) and all(s > 0 for s in t.stride()):
        return t.as_strided((t.numel(),), (1,), t.storage_offset())
    return None


def _send_json(fd, obj) -> None:
    data = json.dumps(obj).encode()
    _write_all(fd, _LEN.pack(len(data)) + data)


def _send_tensor(fd, t: torch.Tensor) -> None:
    if t.numel() == 0:
        return
    flat = _flat_span(t)
    if flat is None:
        flat = t.contiguous().reshape(-1)
    _write_all(fd, memoryview(flat.detach().view(torch.uint8).numpy()))


def _write_all(fd, data) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view[:_CHUNK])
        view = view[n:]


class _Reader:
    """Reads from the child's pipe until the deadline (then _Overdue)."""

    def __init__(self, fd: int, deadline: float):
        self.fd, self.deadline = fd, deadline

    def readinto(self, view: memoryview) -> None:
        while view:
            left = self.deadline - time.monotonic()
            if left <= 0 or not select.select([self.fd], [], [], left)[0]:
                raise _Overdue
            n = os.readv(self.fd, [view[:_CHUNK]])
            if n == 0:
                raise SyftError("a forked op's process ended before it reported (it was killed, or ran out "
                                "of memory): nothing was stored")
            view = view[n:]

    def read(self, n: int) -> bytes:
        buf = bytearray(n)
        self.readinto(memoryview(buf))
        return bytes(buf)


def _read_tensor(reader: _Reader, spec: dict) -> torch.Tensor:
    dtype = getattr(torch, spec["dtype"])
    shape = spec["shape"]
    stride = spec["stride"]
    if stride is None:  # sent contiguous
        stride = torch.empty(shape, device="meta").stride() if shape else []
    numel = math.prod(shape)
    if numel == 0:
        return torch.empty_strided(shape, stride, dtype=dtype)
    raw = torch.empty(numel * dtype.itemsize, dtype=torch.uint8)
    reader.readinto(memoryview(raw.numpy()))
    return raw.view(dtype).as_strided(shape, stride, 0)
