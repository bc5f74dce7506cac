"""Fuzz every allowed op overload on a worker process under a memory limit, and write the report.

    python benchmarks/fuzz_ops.py [--cases-per-op 96] [--out benchmarks/fuzz_report.md]

For each overload in ``syft_lab.wire.allowlist.ALLOWED``, cases are built from its schema: a
baseline (every argument the first value of its type's pool), every other pool value of each
argument in turn, and a second baseline with consistent channels (an N,C,H,W input and
per-channel tensors) with its other arguments varied. The pools hold the edge arguments: empty,
0-d, 4-d, non-contiguous, overlapping (as_strided) and broadcast (expanded) views, a 2**34-element
broadcast, int64/int32/bool/uint8/float16/float64/complex tensors, index tensors holding 2**40 and
-2**40, sizes 2**40, 2**31 x 2**31, 2**62 x 2**62 (int64 overflow), negative ints and dims, NaN,
inf, ``device="meta"``, None for optionals.

The cases go out as raw ``run`` commands in batches to a worker process with a 3 GiB RLIMIT_AS
(``python -m syft_lab.worker``, one thread); after each batch the worker must answer a ping. A
batch that kills or stalls the worker is replayed case by case on a fresh worker to name the
culprit. tests/network/test_op_fuzz.py runs a bounded version (a few cases per overload) in the
suite; this script runs the long one and writes benchmarks/fuzz_report.md.
"""
from __future__ import annotations

import argparse
import collections
import resource
import secrets
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from syft_lab.commands import NewObject, Ref  # noqa: E402
from syft_lab.wire.allowlist import ALLOWED  # noqa: E402
from syft_lab.wire.format import decode, encode  # noqa: E402

MEMORY_LIMIT = 3 * 2**30  # RLIMIT_AS of the fuzzed worker: a runaway op fails there, not on this machine
BATCH = 200
CASE_TIMEOUT = 60  # seconds for one batch's replies: a stall is a finding too
CURATED_OVERLOADS = 472  # the hand-curated list this policy replaced (torch 2.13)


def limit_memory():  # runs in the worker process, before exec
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def pool_tensors() -> dict[str, torch.Tensor]:
    """Tensors stored on the worker as they are (views are made there: see POOL_VIEWS)."""
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
        "bigidx": torch.tensor([2**40]),
        "negidx": torch.tensor([-2**40]),
        "i32": torch.tensor([[1, 2], [3, 4]], dtype=torch.int32),
        "u8": torch.tensor([1, 0, 255], dtype=torch.uint8),
        "f64": torch.randn(3, 4, generator=g, dtype=torch.float64),
        "f16": torch.randn(3, 4, generator=g).half(),
        "c64": torch.randn(3, 4, generator=g, dtype=torch.complex64),
        "f33": torch.randn(3, 3, generator=g),
    }


# views made on the worker from stored pool tensors: name -> (op, source, arguments after it)
POOL_VIEWS = {
    "f34t": ("aten.t.default", "f34", []),  # non-contiguous
    "overlap": ("aten.as_strided.default", "f34", [[3, 3], [1, 1]]),  # elements shared between rows
    "bcast": ("aten.expand.default", "f1", [[3, 4]]),  # a broadcast view (stride 0)
    "bcast34": ("aten.expand.default", "f1", [[2**17, 2**17]]),  # 2**34 elements of one number
}
TENSOR_NAMES = list(pool_tensors()) + list(POOL_VIEWS)
NAN, INF = float("nan"), float("inf")
POOLS = {
    "int": [1, 0, -1, 2, 2**40, -2**40, 2**62, -2**63],
    "SymInt": [1, 0, -1, 2, 2**40, -2**40, 2**62],
    "List[int]": [[2], [], [0], [-1], [2**40], [3, 4], [2**31, 2**31], [1, 1], [-2**40, 2], [2**62, 2**62]],
    "float": [0.5, 0.0, -1.0, 1e308, NAN, INF],
    "List[float]": [[1.0], [], [NAN]],
    "bool": [False, True],
    "List[bool]": [[True, True, True], [False, False, False], [True]],
    "number": [2, 0.5, True, -1, 2**62, NAN],
    "ScalarType": [torch.float32, torch.int64, torch.bool, torch.float64, torch.complex64],
    "Layout": [torch.strided],
    "Device": [torch.device("cpu"), torch.device("meta")],
    "MemoryFormat": [torch.contiguous_format, torch.channels_last],
    "str": ["none", "mean", "sum", "tanh", "floor", "", "ij"],
    "Generator": [None],
}
POOLS["List[SymInt]"] = POOLS["List[int]"]
POOLS["Scalar"] = POOLS["number"]


class Slot:
    """A pool tensor in a case, bound to the ids of each batch's freshly stored copy."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __repr__(self):
        return self.name


SLOTS = {n: Slot(n) for n in TENSOR_NAMES}
TENSOR_POOL = [SLOTS[n] for n in ("f34", "f0d", "empty", "f2345", "i64", "bool", "f1", "f1x3x8x8", "f3", "f34t",
                                  "overlap", "bcast", "bigidx", "negidx", "i32", "u8", "f64", "f16", "c64", "f33",
                                  "bcast34")]


def pool_for(type_str: str) -> list:
    optional = type_str.startswith("Optional[")
    inner = type_str[len("Optional["):-1] if optional else type_str
    t = SLOTS
    if inner == "Tensor":
        values = list(TENSOR_POOL)
    elif inner == "List[Tensor]":
        values = [[t["f34"], t["f34"]], [], [t["f34"], t["i64"]], [t["f0d"]], [t["f1x3x8x8"], t["f1x3x8x8"]],
                  [t["bcast"], t["f34t"]], [t["bigidx"]]]
    elif inner == "List[Optional[Tensor]]":
        values = [[t["i64"]], [None, t["i64"]], [t["bool"]], [], [t["f34"]], [t["bigidx"]], [t["negidx"]],
                  [t["i64"], t["i64"]]]
    else:
        values = list(POOLS.get(inner, [None]))
    return ([None] + values) if optional else values


def cases_for(op, limit: int) -> list[tuple[list, dict]]:
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
    if len(cases) <= limit:
        return cases
    step = len(cases) / limit  # evenly over the variations, the first baseline always
    return [cases[int(k * step)] for k in range(limit)]


def all_cases(limit: int) -> list[tuple[str, list, dict]]:
    return [(name, args, kwargs) for name, op in sorted(ALLOWED.items()) for args, kwargs in cases_for(op, limit)]


def random_cases(op, count: int, rng) -> list[tuple[list, dict]]:
    """``count`` cases of one overload with 2 or 3 arguments varied at once (the schedule above
    varies one at a time: kernels that check each argument alone but not their combination show
    up here), from the plain or the channel baseline, drawn with ``rng`` (reproducible by seed)."""
    schema_args = op._schema.arguments
    pools = [pool_for(str(a.real_type)) for a in schema_args]
    if len(schema_args) < 2:
        return []
    tensor_args = [i for i, a in enumerate(schema_args) if "Tensor" in str(a.real_type)
                   and "List" not in str(a.real_type)]
    channel = {i: SLOTS["f2345" if k == 0 else "f3"] for k, i in enumerate(tensor_args)}
    out = []
    for _ in range(count):
        values = dict(channel) if channel and rng.random() < 0.5 else {}
        for i in rng.sample(range(len(pools)), min(len(pools), rng.choice((2, 3)))):
            if pools[i]:
                values[i] = rng.choice(pools[i])
        args, kwargs = [], {}
        for i, a in enumerate(schema_args):
            if i in values:
                v = values[i]
            elif not a.has_default_value():
                p = pools[i]
                v = p[1] if (p and p[0] is None and len(p) > 1) else (p[0] if p else None)
            else:
                continue
            if a.kwarg_only or len(args) != i:
                kwargs[a.name] = v
            else:
                args.append(v)
        out.append((args, kwargs))
    return out


def all_random_cases(count: int, seed: int) -> list[tuple[str, list, dict]]:
    import random

    rng = random.Random(seed)
    return [(name, args, kwargs) for name, op in sorted(ALLOWED.items()) for args, kwargs in random_cases(op, count, rng)]


def bind(value, refs: dict):
    """A case's value with its slots bound to this batch's stored tensors."""
    if type(value) is Slot:
        return refs[value.name]
    if type(value) is list:
        return [bind(v, refs) for v in value]
    if type(value) is dict:
        return {k: bind(v, refs) for k, v in value.items()}
    return value


class Fuzzer:
    """Raw commands to one worker process (``proc``: a tests/network/conftest.py WorkerProcess)."""

    def __init__(self, proc, token):
        self.proc, self.token = proc, token
        self.ws = None
        self.rid = 0
        self.to_release: list[int] = []
        self.stats = collections.Counter()
        self.refusals = collections.Counter()  # error type -> cases

    def connect(self):
        from websockets.sync.client import connect

        self.ws = connect(self.proc.url, additional_headers={"Authorization": f"Bearer {self.token}"},
                          compression=None, max_size=None, open_timeout=30, legacy=True)

    def restart(self):
        self.close()
        for attempt in range(3):  # a loaded machine can miss the ready line's timeout
            try:
                self.proc.restart()
                break
            except RuntimeError:
                if attempt == 2:
                    raise
        self.to_release = []
        self.connect()

    def close(self):
        if self.ws is not None:
            try:
                self.ws.close()
            except Exception:  # the worker died with the connection open
                pass
            self.ws = None

    def request(self, header: dict):
        self.rid += 1
        header["r"] = self.rid
        self.ws.send(encode(header).frames[0])
        return decode(self.ws.recv(timeout=CASE_TIMEOUT))

    def store_pool(self) -> dict:
        refs = {name: Ref(self.request({"c": "store", "o": t})["ok"]) for name, t in pool_tensors().items()}
        for name, (op, source, rest) in POOL_VIEWS.items():
            out = self.request({"c": "run", "op": op, "a": [refs[source], *rest], "k": None})["ok"]
            refs[name] = Ref(out.id)
        return refs

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
                kind = reply["err"].get("t", "?") if isinstance(reply["err"], dict) else "?"
                self.stats["refused" if kind in ("OpNotAllowedError", "QuotaExceededError") else "failed"] += 1
                self.refusals[kind] += 1
                continue
            self.stats["ran"] += 1
            out = reply.get("ok")
            for o in (out if isinstance(out, (list, tuple)) else [out]):
                if type(o) is NewObject:
                    self.to_release.append(o.id)

    def alive(self) -> bool:
        try:
            return self.proc.proc.poll() is None and self.request({"c": "ping"}).get("ok") == "pong"
        except Exception:
            return False

    def run_cases(self, cases) -> bool:
        """One batch on fresh pool tensors (in-place cases wrote to the last ones); True if the worker lives."""
        try:
            refs = self.store_pool()
            self.run_batch([(name, bind(args, refs), bind(kwargs, refs)) for name, args, kwargs in cases])
            self.to_release += [r.id for r in refs.values()]
            return self.alive()
        except Exception:  # the connection died with the worker, or a reply never came
            return False

    def bisect(self, batch) -> list:
        """Replay a fatal batch one case at a time on fresh workers: the cases that kill or stall it."""
        found = []
        self.restart()
        for case in batch:
            if not self.run_cases([case]):
                found.append(case)
                self.restart()
        return found


def fuzz(proc, token, cases, progress=None) -> dict:
    """Run ``cases`` on the worker process; the summary and the crashing cases."""
    started = time.monotonic()
    fuzzer = Fuzzer(proc, token)
    fuzzer.connect()
    crashes, batches = [], 0
    try:
        for start in range(0, len(cases), BATCH):
            batch = cases[start:start + BATCH]
            batches += 1
            if not fuzzer.run_cases(batch):
                found = fuzzer.bisect(batch)
                crashes += found
                for case in found:
                    print("crash:", describe(case), flush=True)
            if progress:
                progress(start + len(batch), len(cases), len(crashes))
    finally:
        fuzzer.close()
    return {"overloads": len({c[0] for c in cases}), "cases": len(cases), "batches": batches,
            "ran": fuzzer.stats["ran"], "refused": fuzzer.stats["refused"], "failed": fuzzer.stats["failed"],
            "by_type": dict(fuzzer.refusals.most_common()), "crashes": crashes,
            "seconds": time.monotonic() - started}


def describe(case) -> str:
    name, args, kwargs = case
    return f"{name}{tuple(args)}{' ' + str(kwargs) if kwargs else ''}"[:300]


def report(summary: dict, limit: int, random_cases: int = 0, seed: int = 0) -> str:
    lines = [
        "# Op fuzz report",
        "",
        "Written by `python benchmarks/fuzz_ops.py` (docs/op-allowlist.md, \"Testing: the fuzzer\"): every allowed",
        f"overload, up to {limit} cases each"
        + (f" plus {random_cases} varying 2 or 3 arguments at once (seed {seed})" if random_cases else "")
        + ", as raw `run` commands to a worker process under a "
        f"{MEMORY_LIMIT // 2**30} GiB RLIMIT_AS, pinged after every batch of {BATCH}.",
        "",
        "| | |",
        "|---|---|",
        f"| torch | {torch.__version__} |",
        f"| allowed overloads (all tried) | {summary['overloads']} (the curated list had {CURATED_OVERLOADS}) |",
        f"| cases | {summary['cases']} in {summary['batches']} batches |",
        f"| ran | {summary['ran']} |",
        f"| refused cleanly by the policy (OpNotAllowedError, QuotaExceededError) | {summary['refused']} |",
        f"| failed cleanly with the op's own error | {summary['failed']} |",
        f"| crashed or stalled the worker | {len(summary['crashes'])} |",
        f"| time | {summary['seconds']:.0f} s |",
        "",
        "Errors by type: " + ", ".join(f"{k} {v}" for k, v in summary["by_type"].items()) + ".",
        "",
    ]
    if summary["crashes"]:
        lines += ["## Crashes", ""] + [f"- `{describe(c)}`" for c in summary["crashes"]] + [""]
    return "\n".join(lines)


def main(argv=None) -> int:
    from tests.network.conftest import WorkerProcess

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases-per-op", type=int, default=96)
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "fuzz_report.md"))
    parser.add_argument("--only", default=None, help="a substring of the op names to fuzz")
    parser.add_argument("--random-cases", type=int, default=0,
                        help="per overload, this many more cases varying 2 or 3 arguments at once")
    parser.add_argument("--seed", type=int, default=0, help="the random cases' seed")
    options = parser.parse_args(argv)
    cases = all_cases(options.cases_per_op)
    if options.random_cases:
        cases += all_random_cases(options.random_cases, options.seed)
    if options.only:
        cases = [c for c in cases if options.only in c[0]]
    token = secrets.token_urlsafe(24)
    with tempfile.TemporaryDirectory() as tmp:
        token_file = Path(tmp) / "token"
        token_file.write_text(token + "\n")
        token_file.chmod(0o600)
        proc = WorkerProcess("fuzz", token_file, preexec_fn=limit_memory)
        for attempt in range(3):  # a loaded machine can miss the ready line's timeout
            try:
                proc.start()
                break
            except RuntimeError:
                if attempt == 2:
                    raise
        try:
            summary = fuzz(proc, token, cases,
                           progress=lambda done, total, bad: print(f"{done}/{total} cases, {bad} crashes",
                                                                   flush=True))
        finally:
            proc.kill()
    text = report(summary, options.cases_per_op, options.random_cases, options.seed)
    if not options.only:
        Path(options.out).write_text(text)
    print(text)
    return 1 if summary["crashes"] else 0


if __name__ == "__main__":
    sys.exit(main())
