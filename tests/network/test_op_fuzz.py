"""Every allowed overload, run with edge arguments built from its schema, on a worker process
under a memory limit: the worker must survive every case (an error reply is fine).

The cases are deterministic: for each overload, one baseline case (every required argument
takes the first value of its type's pool), then one case per other pool value of each argument
(empty, 0-dim, huge sizes such as 2**40, negative ints and dims, mismatched shapes, wrong
dtypes, None for optionals). They go out as raw ``run`` commands in batches; after each batch
the worker must still answer a ping. A batch that kills the worker is replayed case by case on
a fresh worker to name the culprit.
"""
from __future__ import annotations

import math
import resource
import time

import pytest
import torch

from syft_lab.wire.allowlist import ALLOWED
from syft_lab.wire.format import decode, encode
from syft_lab.workers.core import NewObject, Ref

pytestmark = pytest.mark.network

MEMORY_LIMIT = 3 * 2**30  # RLIMIT_AS of the fuzzed worker: a runaway op fails there, not on this machine
BATCH = 200
MAX_CASES_PER_OP = 64
CASE_TIMEOUT = 30  # seconds for one batch's replies: a stall is a finding too


def limit_memory():  # runs in the worker process, before exec
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def pool_tensors() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return {
        "f34": torch.randn(3, 4, generator=g),
        "f0d": torch.tensor(1.5),
        "empty": torch.empty(0),
        "f2345": torch.randn(2, 3, 4, 5, generator=g),
        "i64": torch.tensor([0, 1, 2]),
        "bool": torch.tensor([[True, False], [False, True]]),
        "f1": torch.randn(1, generator=g),
        "f1x3x8x8": torch.randn(1, 3, 8, 8, generator=g),
        "f3": torch.randn(3, generator=g),  # one value per channel of f2345 and f1x3x8x8
    }


TENSOR_NAMES = list(pool_tensors())
NAN, INF = float("nan"), float("inf")
POOLS = {
    "int": [1, 0, -1, 2, 2**40, -2**40],
    "List[int]": [[2], [], [0], [-1], [2**40], [3, 4], [2**31, 2**31], [1, 1], [-2**40, 2]],
    "float": [0.5, 0.0, -1.0, 1e308, NAN, INF],
    "List[float]": [[1.0], [], [NAN]],
    "bool": [False, True],
    "List[bool]": [[True, True, True], [False, False, False], [True]],
    "number": [2, 0.5, True, -1, 2**62, NAN],
    "ScalarType": [torch.float32, torch.int64, torch.bool, torch.float64],
    "Layout": [torch.strided],
    "Device": [torch.device("cpu"), torch.device("meta")],
    "MemoryFormat": [torch.contiguous_format, torch.channels_last],
    "str": ["none", "mean", "sum", "tanh", "floor", ""],
    "Generator": [None],
}


class Slot:
    """A pool tensor in a case, bound to the ids of each batch's freshly stored copy."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __repr__(self):
        return self.name


SLOTS = {n: Slot(n) for n in TENSOR_NAMES}


def pool_for(type_str: str) -> list:
    optional = type_str.startswith("Optional[")
    inner = type_str[len("Optional["):-1] if optional else type_str
    t = SLOTS
    if inner == "Tensor":
        values = list(SLOTS.values())
    elif inner == "List[Tensor]":
        values = [[t["f34"], t["f34"]], [], [t["f34"], t["i64"]], [t["f0d"]], [t["f1x3x8x8"], t["f1x3x8x8"]]]
    elif inner == "List[Optional[Tensor]]":
        values = [[t["i64"]], [None, t["i64"]], [t["bool"]], [], [t["f34"]]]
    else:
        values = list(POOLS.get(inner, [None]))
    return ([None] + values) if optional else values


def cases_for(op) -> list[tuple[list, dict]]:
    """(args, kwargs) lists for one overload: a baseline, then one argument varied at a time."""
    schema_args = op._schema.arguments
    pools = [pool_for(str(a.real_type)) for a in schema_args]
    required = [not a.has_default_value() for a in schema_args]
    baseline = [p[1] if (p and p[0] is None and len(p) > 1) else (p[0] if p else None) for p in pools]

    def build(values: dict[int, object]):
        args, kwargs = [], {}
        for i, a in enumerate(schema_args):
            if i in values:
                v = values[i]
            elif required[i]:
                v = baseline[i]
            else:
                continue
            if a.kwarg_only:
                kwargs[a.name] = v
            elif len(args) == i:
                args.append(v)
            else:  # an earlier optional was left out: name this one
                kwargs[a.name] = v
        return args, kwargs

    cases = [build({})]
    for i, pool in enumerate(pools):
        for v in pool:
            if required[i] and v is baseline[i]:
                continue
            cases.append(build({i: v}))
    # A second baseline with consistent channels (an N,C,H,W input, then per-channel tensors),
    # its non-tensor arguments varied: kernels that trust their mode flags show up here.
    tensor_args = [i for i, a in enumerate(schema_args) if "Tensor" in str(a.real_type)
                   and "List" not in str(a.real_type)]
    if tensor_args:
        channel = {i: SLOTS["f2345" if k == 0 else "f3"] for k, i in enumerate(tensor_args)}
        cases.append(build(channel))
        for i, pool in enumerate(pools):
            if i not in channel:
                for v in pool:
                    cases.append(build({**channel, i: v}))
        cases += [build({**channel, i: None}) for i in tensor_args if pools[i][0] is None]
    return cases[:MAX_CASES_PER_OP]


class Fuzzer:
    def __init__(self, proc, token):
        self.proc, self.token = proc, token
        self.ws = None
        self.rid = 0
        self.to_release: list[int] = []
        self.stats = {"cases": 0, "ok": 0, "error": 0}

    def connect(self):
        from websockets.sync.client import connect

        self.ws = connect(self.proc.url, additional_headers={"Authorization": f"Bearer {self.token}"},
                          compression=None, max_size=None, open_timeout=30, legacy=True)

    def restart(self):
        self.close()
        self.proc.restart()
        self.to_release = []
        self.connect()

    def close(self):
        if self.ws is not None:
            self.ws.close()
            self.ws = None

    def request(self, header: dict):
        self.rid += 1
        header["r"] = self.rid
        self.ws.send(encode(header).frames[0])
        return decode(self.ws.recv(timeout=CASE_TIMEOUT))

    def store_pool(self) -> dict:
        return {name: Ref(self.request({"c": "store", "o": t})["ok"]) for name, t in pool_tensors().items()}

    def run_batch(self, batch: list[tuple[str, list, dict]]) -> None:
        """Send every case, then read every reply (raises on a dead worker or a stall)."""
        for name, args, kwargs in batch:
            self.rid += 1
            header = {"c": "run", "op": name, "a": args, "k": kwargs, "r": self.rid}
            if self.to_release:
                header["rel"], self.to_release = self.to_release, []
            self.ws.send(encode(header).frames[0])
        for _ in batch:
            reply = decode(self.ws.recv(timeout=CASE_TIMEOUT))
            self.stats["cases"] += 1
            if "err" in reply:
                self.stats["error"] += 1
                continue
            self.stats["ok"] += 1
            out = reply.get("ok")
            for o in (out if isinstance(out, (list, tuple)) else [out]):
                if type(o) is NewObject:
                    self.to_release.append(o.id)

    def alive(self) -> bool:
        try:
            return self.proc.proc.poll() is None and self.request({"c": "ping"}).get("ok") == "pong"
        except Exception:
            return False


def all_cases() -> list[tuple[str, list, dict]]:
    return [(name, args, kwargs) for name, op in sorted(ALLOWED.items()) for args, kwargs in cases_for(op)]


def bind(value, refs: dict):
    """A case's value with its slots bound to this batch's stored tensors."""
    if type(value) is Slot:
        return refs[value.name]
    if type(value) is list:
        return [bind(v, refs) for v in value]
    if type(value) is dict:
        return {k: bind(v, refs) for k, v in value.items()}
    return value


def run_cases(fuzz: Fuzzer, cases) -> bool:
    """One batch on fresh pool tensors (in-place cases wrote to the last ones); True if the worker lives."""
    try:
        refs = fuzz.store_pool()
        fuzz.run_batch([(name, bind(args, refs), bind(kwargs, refs)) for name, args, kwargs in cases])
        fuzz.to_release += [r.id for r in refs.values()]
        return fuzz.alive()
    except Exception:  # the connection died with the worker, or a reply never came
        return False


def bisect(fuzz: Fuzzer, batch) -> list:
    """Replay a fatal batch one case at a time on fresh workers: the cases that kill or stall it."""
    found = []
    fuzz.restart()
    for case in batch:
        if not run_cases(fuzz, [case]):
            found.append(case)
            fuzz.restart()
    return found


def test_every_allowed_op_survives_edge_arguments(spawn, token, record_property):
    started = time.monotonic()
    fuzz = Fuzzer(spawn("fuzz", preexec_fn=limit_memory), token)
    fuzz.connect()
    cases = all_cases()
    crashes, batches = [], 0
    try:
        for start in range(0, len(cases), BATCH):
            batch = cases[start:start + BATCH]
            batches += 1
            if not run_cases(fuzz, batch):
                crashes += bisect(fuzz, batch)
    finally:
        fuzz.close()
    summary = (f"op fuzz: {len(ALLOWED)} allowed overloads, {len(cases)} cases in {batches} batches: "
               f"{fuzz.stats['ok']} ran, {fuzz.stats['error']} refused or failed cleanly, {len(crashes)} crashed "
               f"or stalled the worker ({time.monotonic() - started:.0f} s)")
    print(summary)
    record_property("allowed_overloads", len(ALLOWED))
    record_property("fuzz_cases", len(cases))
    assert len(cases) > 5 * len(ALLOWED)  # every overload got its baseline and variations
    assert not crashes, f"{summary}: " + "; ".join(f"{n}{tuple(a)} {k}" for n, a, k in crashes[:20])
