"""Property-based fuzz of every allowed op overload against a worker process (issue 37, item 6).

    nice -n 19 python benchmarks/fuzz_property.py [--cases 100000] [--seed 37] [--minutes M]

Strategies are derived from each overload's schema (``op._schema.arguments``), by argument
type: Tensor / Tensor? / Tensor[] / Tensor?[] (every dtype a worker holds, empty and 0-dim
shapes, transposed, stepped, overlapping ``as_strided`` and broadcast views, 2**31+ element
broadcasts, extreme values, the same tensor passed twice), int / SymInt / int[N] / SymInt[]
(small, negative, 2**31 and beyond), float, Scalar, bool, str, and the enum-typed arguments
(ScalarType, MemoryFormat, Layout, Device, reduction and mode codes: legal values, -1, huge
ints, dtypes a worker does not hold, the meta device). Every allowed overload is fuzzed, in-place
ones included, and the ``out=`` overloads of the same ops (refused by the policy).

Each case runs on a worker process (``python -m syft_lab.worker --max-memory 1GiB --threads 1``)
in a memory cgroup (tests/network/memory_cgroup.py; an RLIMIT_AS where none can be made). A case
of ordinary arguments runs through PointerTensors and is compared with plain torch in this
process: values, dtype, shape, in-place writes, and the output types (every tensor a pointer,
never a local tensor with the worker's data). A case with hostile arguments (an enum out of its
domain, a huge int, a huge broadcast, an ``out=`` overload) goes as a raw ``run`` command, as a
hostile client would send it, and must get an answer (a result or a clear error). After every
case: the worker is alive, its cgroup saw no OOM kill and its memory peak stayed under the
budget; an op that returns uninitialised memory (``empty*``) returns no byte that is not zero.

The long run writes benchmarks/fuzz_property_report.md and adds each failing case (its JSON:
replayable by itself) to tests/network/fuzz_regressions.json, which
tests/network/test_property_fuzz.py replays; the same test runs a short budget of this engine.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import random
import resource
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

sys.path.insert(0, str(ROOT / "benchmarks"))

from hypothesis import HealthCheck, Phase, Verbosity, given, seed as hseed, settings  # noqa: E402

from fuzz_schema import (BIG_ELEMENTS, UNINITIALISED, build, case_strategy, flatten, make_local,  # noqa: E402
                         nbytes_nonzero, op_named, same_value, tensor_plan, to_wire, unwritten_bytes)
from syft_lab.commands import NewObject, SameAsArg  # noqa: E402
from syft_lab.errors import SyftError  # noqa: E402
from syft_lab.tensors.pointer import PointerTensor  # noqa: E402
from syft_lab.wire.allowlist import ALLOWED, REFUSED  # noqa: E402
from syft_lab.workers.heap import heap_zeroes_fresh_memory, worker_environment  # noqa: E402

REPORT = ROOT / "benchmarks" / "fuzz_property_report.md"
REGRESSIONS = ROOT / "tests" / "network" / "fuzz_regressions.json"
CGROUP_LIMIT = 4 * 2**30  # the worker's memory cgroup (issue 37's attack setting)
MAX_MEMORY = 2**30  # the worker's --max-memory
MEMORY_BUDGET = 2 * MAX_MEMORY  # peak the worker may reach: its quota plus as much for workspace and replies
CLIENT_MEMORY = 8 * 2**30  # the fuzzing process's own RLIMIT_AS
REQUEST_TIMEOUT = 120.0  # seconds for one reply (the worker stops an op at 30 s): a stall is a finding


class WorkerGone(Exception):
    pass


def _limit_address_space():  # the fallback where no memory cgroup can be made: runs in the worker, before exec
    resource.setrlimit(resource.RLIMIT_AS, (CGROUP_LIMIT, CGROUP_LIMIT))


FAILURES = ("dead", "oom", "memory", "stall", "wrong", "leak", "foreign", "differs", "dropped", "client crash")


class Engine:
    """One worker process in a memory cgroup and a client to it; ``run_case`` runs one case and
    counts its outcome (``counts``); a failing case is kept in ``failures`` with its symptom."""

    def __init__(self, token_file: Path | None, token: str | None, log=print, in_process: bool = False):
        """``in_process``: a VirtualWorker instead (the lean in-process path, no memory checks)."""
        self.token_file, self.token, self.log, self.in_process = token_file, token, log, in_process
        self.cgroup = self.proc = self.client = None
        self.memory_mode = None
        self.counts: dict[str, int] = {}
        self.failures: list[dict] = []
        self.foreign_bytes = 0
        self.peak = 0
        self._oom_seen = 0
        self._since_ping = 0
        self._previous = None  # the case run before on this worker: a stall may be its op still running

    # --- the worker ---------------------------------------------------------------------------
    def start(self) -> "Engine":
        from tests.network.conftest import WorkerProcess
        from tests.network.memory_cgroup import MemoryCgroup
        from syft_lab.workers.websocket import WebSocketWorker

        if self.in_process:
            import syft_lab as sy

            self.memory_mode, self.client = "this process (a VirtualWorker)", sy.VirtualWorker("fuzz-in-process")
            return self
        if self.memory_mode is None:
            try:
                self.cgroup = MemoryCgroup(CGROUP_LIMIT)
                self.memory_mode = f"a cgroup v1 memory cgroup of {CGROUP_LIMIT // 2**30} GiB"
            except BaseException as e:  # pytest's skip: no cgroup here
                self.memory_mode = f"RLIMIT_AS {CGROUP_LIMIT // 2**30} GiB (no memory cgroup: {str(e)[:80]})"
        preexec = self.cgroup.enter() if self.cgroup else _limit_address_space
        for attempt in range(3):  # a loaded machine can miss the ready line's timeout
            try:
                self.proc = WorkerProcess("fuzz", self.token_file, extra=["--max-memory", str(MAX_MEMORY)],
                                          preexec_fn=preexec).start()
                break
            except RuntimeError:
                if attempt == 2:
                    raise
        self.client = WebSocketWorker(self.proc.url, id="fuzz", token=self.token, timeout=REQUEST_TIMEOUT,
                                      progress=False)
        self._oom_seen = self.cgroup.oom_kills() if self.cgroup else 0
        self._reset_peak()  # (the cgroup's peak is its own: a killed worker's would stay in it)
        return self

    def restart(self) -> None:
        self._drop_client()
        if self.proc is not None:
            self.proc.kill()
        self.start()

    def _drop_client(self) -> None:
        if self.client is not None and not self.in_process:
            try:
                self.client.close()
            except Exception:  # the worker died with the connection open
                pass
            self.client = None

    def close(self) -> None:
        if self.in_process and self.client is not None:
            self.client.close()  # (an in-process worker is registered: later code would list it)
            self.client = None
        self._drop_client()
        if self.proc is not None:
            self.proc.kill()
        if self.cgroup is not None:
            self.cgroup.close()

    def _dead(self) -> bool:
        return not self.in_process and self.proc.proc.poll() is not None

    def _memory_peak(self) -> int:
        if self.cgroup is not None:
            path = os.path.join(self.cgroup.path, "memory.max_usage_in_bytes")
            with open(path) as f:
                return int(f.read())
        try:
            with open(f"/proc/{self.proc.proc.pid}/status") as f:
                return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))
        except (OSError, StopIteration):
            return 0

    def _reset_peak(self) -> None:
        if self.cgroup is not None:
            with open(os.path.join(self.cgroup.path, "memory.max_usage_in_bytes"), "w") as f:
                f.write("0")

    # --- one case -----------------------------------------------------------------------------
    def run_case(self, name: str, case: dict, seed=None) -> str:
        """Run one case; returns its outcome: ok, refused (a clear error), unchecked (ran, too
        large to compare) or one of FAILURES."""
        op = op_named(name)
        try:
            if case["raw"] and self.in_process:  # a worker in this process has no quota: hostile cases go to processes
                status, detail = "skipped", "hostile arguments are for a worker process"
            elif case["raw"] or '"T"' not in json.dumps(case):  # hostile, or a factory: no pointer to call it on
                status, detail = self._raw(op, name, case)
            else:
                status, detail = self._through_pointers(op, name, case)
        except WorkerGone as e:
            status, detail = "dead", str(e)
        except Exception as e:  # the engine's own trouble (making a view, fetching): counted, shown
            status, detail = "engine", f"{type(e).__name__}: {e}"
            if type(e).__name__ == "ConnectionLost":  # (a dead worker: _after says so) a live one hung up on us
                status = "dropped"
            if self.counts.get("engine", 0) < 20:
                self.log(f"engine: {name} {json.dumps(case)[:200]}: {detail[:300]}")
        status, detail = self._after(status, detail)
        previous, self._previous = self._previous, {"op": name, "case": case}
        self.counts[status] = self.counts.get(status, 0) + 1
        self.counts["cases"] = self.counts.get("cases", 0) + 1
        if status in FAILURES:
            self.failures.append({"op": name, "case": case, "status": status, "detail": str(detail)[:400],
                                  "seed": seed, **({"case_before": previous} if status == "stall" and previous else {})})
            self.log(f"{status}: {name} {json.dumps(case)[:300]}: {str(detail)[:300]}")
        if status in ("dead", "oom", "stall"):
            self.restart()
        return status

    def _after(self, status, detail):
        """The worker's health after a case: alive, no OOM kill, its memory peak in budget."""
        if self.in_process:
            return status, detail
        if self.cgroup is not None:
            kills = self.cgroup.oom_kills()
            if kills > self._oom_seen:
                self._oom_seen = kills
                return "oom", f"the cgroup OOM-killed the worker ({detail})"
        if self.proc.proc.poll() is not None:
            return "dead", f"the worker exited with {self.proc.proc.returncode} ({detail})"
        self._since_ping += 1
        if status == "stall" or self._since_ping >= 100:
            self._since_ping = 0
            try:
                alive = self.client.ping()
            except Exception:
                alive = False
            if not alive:
                return ("stall" if self.proc.proc.poll() is None else "dead"), f"no answer to a ping ({detail})"
        peak = self._memory_peak()
        self.peak = max(self.peak, peak)
        if peak > MEMORY_BUDGET:
            self._reset_peak()
            return "memory", f"the worker's memory peaked at {peak / 2**30:.2f} GiB ({detail})"
        return status, detail

    def _pointer(self, spec):
        base, steps = tensor_plan(spec)
        p = self.client.send(base)
        for name, args in steps:
            p = getattr(p, name)(*args)
        return p

    def _build_remote(self, case):
        made = []
        try:
            args = [build(v, made, self._pointer) for v in case["args"]]
            kwargs = {k: build(v, made, self._pointer) for k, v in case["kwargs"].items()}
        except SyftError as e:
            if self._dead():
                raise WorkerGone(f"while its arguments were made: {e}") from None
            raise
        return args, kwargs, made

    def _raw(self, op, name, case):
        """A raw ``run`` command, as a hostile client sends it: any answer is fine, a tensor's data
        in it is a leak."""
        try:
            args, kwargs, made = self._build_remote(case)
        except SyftError as e:
            return "refused", f"making the arguments: {e}"
        try:
            reply = self.client._request({"c": "run", "op": name, "a": to_wire(args), "k": to_wire(kwargs)})
        except SyftError as e:
            return self._error_status(e)
        except Exception as e:  # a timeout or a lost connection: the checks after the case tell which
            return "stall", f"{type(e).__name__}: {e}"
        outs = flatten(reply)
        try:
            leaked = [o for o in outs if isinstance(o, torch.Tensor)]
            if leaked:
                return "leak", f"the reply carries a {type(leaked[0]).__name__} of shape {tuple(leaked[0].shape)}"
            if case["raw"] or sum(math.prod(o.shape) for o in outs if type(o) is NewObject) > BIG_ELEMENTS:
                return "ok", None  # answered: hostile arguments get no plain-torch run
            (expected, largs, lkw), error = self._local(op, case)
            if error is not None:
                return "wrong", f"the worker computed it; plain torch raises {type(error).__name__}: {error}"
            remote = [args[o.index] if type(o) is SameAsArg else o for o in outs]
            return self._compare(op, name, remote, flatten(expected), (args, kwargs), (largs, lkw), case)
        finally:
            for o in outs:
                if type(o) is NewObject:
                    self.client._release(o.id)

    def _error_status(self, e):
        if self._dead():
            raise WorkerGone(f"{type(e).__name__}: {e}")
        if "timed out" in str(e).lower():
            return "stall", str(e)
        return "refused", getattr(e, "remote_type", type(e).__name__)

    def _through_pointers(self, op, name, case):
        """The op on pointers, then on plain tensors made alike: results and writes compared."""
        try:
            args, kwargs, made = self._build_remote(case)
        except SyftError as e:
            return "refused", f"making the arguments: {e}"
        try:
            out = op(*args, **kwargs)
        except SyftError as e:
            return self._error_status(e)
        except Exception as e:  # raised here, before or after the worker ran it
            local_error = self._local(op, case)[1]
            if local_error is not None:
                return "refused", f"{type(e).__name__} (plain torch: {type(local_error).__name__})"
            return "differs", f"through a pointer {type(e).__name__}: {e}; plain torch computes it"
        outs = flatten(out)
        if sum(o.numel() for o in outs if isinstance(o, torch.Tensor)) > BIG_ELEMENTS:
            return "unchecked", "outputs too large to compare here"
        (expected, local_args, local_kwargs), error = self._local(op, case)
        if error is not None:
            return "wrong", f"the worker computed it; plain torch raises {type(error).__name__}: {error}"
        return self._compare(op, name, outs, flatten(expected), (args, kwargs), (local_args, local_kwargs), case)

    def _local(self, op, case):
        made = []
        try:
            args = [build(v, made, make_local) for v in case["args"]]
            kwargs = {k: build(v, made, make_local) for k, v in case["kwargs"].items()}
            return (op(*args, **kwargs), args, kwargs), None
        except Exception as e:
            return (None, None, None), e

    def _compare(self, op, name, outs, expected, remote_args, local_args, case):
        if len(outs) != len(expected):
            return "wrong", f"{len(outs)} outputs, plain torch gives {len(expected)}"
        short = name.split(".")[1]
        uninitialised = short in UNINITIALISED
        loose = uninitialised or torch.Tag.nondeterministic_seeded in op.tags
        for i, (o, e) in enumerate(zip(outs, expected)):
            if not isinstance(e, torch.Tensor):
                if isinstance(o, (torch.Tensor, NewObject)):
                    return "leak" if type(o) is torch.Tensor else "wrong", f"output {i}: a tensor, torch gives {e!r}"
                if not same_value(o, e):
                    return "wrong", f"output {i}: {o!r}, plain torch {e!r}"
                continue
            if type(o) not in (PointerTensor, NewObject):
                if isinstance(o, torch.Tensor) and o.is_meta:  # no data left the worker: a wrong type
                    return "wrong", f"output {i} is a local {type(o).__name__} on the meta device, not a pointer"
                return ("leak" if isinstance(o, torch.Tensor) else "wrong"), \
                    f"output {i} is a {type(o).__name__}, not a pointer"
            got = self.client._copy_out(o.id if type(o) is NewObject else o.id_at_location)
            problem = self._differs(got, e, loose)
            unwritten = None  # which bytes the kernel never wrote (None: all, for an empty-like op)
            if problem:
                unwritten = self._unsettled(op, case, i, e)
                if unwritten is not None:  # plain torch differs from itself: memory never written
                    uninitialised, problem = True, None
            if problem:
                return "wrong", f"output {i}: {problem}"
            if uninitialised and not self.in_process:  # (an in-process worker's memory is the notebook's own)
                # only the bytes never written count: a resize keeps what its input held
                nonzero = nbytes_nonzero(got, unwritten if unwritten is not None and unwritten.numel() == got.numel()
                                         * got.element_size() else None)
                if nonzero:
                    self.foreign_bytes += nonzero
                    return "foreign", f"output {i}: {nonzero} bytes not zero in uninitialised memory"
        return self._compare_writes(op, remote_args, local_args, loose)

    def _unsettled(self, op, case, i, first):
        """The bytes of output ``i`` on which plain torch, run again (with memory scribbled over in
        between), gives other values: memory the kernel never wrote. None when it repeats itself."""
        scribble = torch.full((1 << 16,), 0x5A, dtype=torch.uint8)
        del scribble
        (again, _, _), error = self._local(op, case)
        if error is not None or self._differs(flatten(again)[i], first, False) is None:
            return None
        mask = unwritten_bytes(first, flatten(again)[i])
        return mask if mask is not None and bool(mask.any()) else None

    def _compare_writes(self, op, remote_args, local_args, loose):
        """An argument the op writes (in place, out=) holds what plain torch's holds."""
        (rargs, rkw), (largs, lkw) = remote_args, local_args
        for i, a in enumerate(op._schema.arguments):
            if a.alias_info is None or not a.alias_info.is_write:
                continue
            r = rargs[i] if i < len(rargs) else rkw.get(a.name)
            loc = largs[i] if i < len(largs) else lkw.get(a.name)
            if type(r) is PointerTensor and isinstance(loc, torch.Tensor):
                problem = self._differs(self.client._copy_out(r.id_at_location), loc, loose)
                if problem:
                    return "wrong", f"argument {a.name} written: {problem}"
        return "ok", None

    @staticmethod
    def _differs(got, want, loose) -> str | None:
        if not isinstance(got, torch.Tensor):
            return f"fetched a {type(got).__name__}"
        if got.shape != want.shape or got.dtype != want.dtype:
            return f"{got.dtype}{list(got.shape)}, plain torch {want.dtype}{list(want.shape)}"
        if loose or not want.numel():
            return None
        try:
            torch.testing.assert_close(got, want.detach(), equal_nan=True, check_stride=False, check_device=False,
                                       check_layout=False)
        except AssertionError as e:
            return " ".join(str(e).split())[:300]
        return None


# --- the runs ------------------------------------------------------------------------------------

def fuzzed_ops() -> list[tuple[str, bool]]:
    """(overload name, refused by the policy): every allowed overload, then the ``out=``
    overloads of the same ops (the policy refuses them; a hostile client sends them anyway)."""
    allowed = sorted(ALLOWED)
    bases = {n.rsplit(".", 1)[0] for n in allowed}
    outs = sorted(n for n in REFUSED if n.rsplit(".", 1)[0] in bases and "out" in n.rsplit(".", 1)[1])
    return [(n, False) for n in allowed] + [(n, True) for n in outs]


def op_seed(run_seed: int, name: str) -> int:
    import hashlib

    return int(hashlib.sha256(f"{run_seed}:{name}".encode()).hexdigest()[:12], 16)


def fuzz_op(engine: Engine, name: str, refused: bool, examples: int, run_seed: int, before_case=None) -> None:
    """``examples`` cases of one overload, drawn by hypothesis from its schema's strategies with
    a seed of the run's and the op's (no shrinking: a failing case is kept as drawn)."""
    op = op_named(name)

    @settings(max_examples=examples, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck), verbosity=Verbosity.quiet)
    @hseed(op_seed(run_seed, name))
    @given(case_strategy(op, refused))
    def prop(case):
        if before_case is not None:
            before_case(name, case)
        engine.run_case(name, case, seed=run_seed)

    prop()


def replay(token_file: Path, out: Path) -> int:
    """Every case of the regression file on a worker process and (unless hostile) in process;
    their outcomes, case by case, to ``out`` as JSON (written after each case: a crash leaves what
    ran). Run in a process whose heap zeroes what it hands out, as a worker's does
    (workers/heap.py; ``worker_environment``): plain torch's reference run then reads the zeros a
    worker's kernel reads where it reads memory nobody wrote, so their results are comparable bit
    for bit, and a non-zero byte from the worker is another client's, not the fuzzer's own heap."""
    torch.set_num_threads(1)  # as the worker: reductions in the same order, the same bits
    cases = json.loads(REGRESSIONS.read_text())
    quiet = lambda text: None  # noqa: E731  (the outcomes carry the details)
    engine = Engine(token_file, token_file.read_text().strip(), log=quiet).start()
    local = Engine(None, None, log=quiet, in_process=True).start()
    results = []
    try:
        for entry in cases:
            outcomes = []
            for where, eng in (("a worker process", engine), ("in process", local)):
                if entry["case"]["raw"] and eng is local:
                    continue
                before = len(eng.failures)
                status = eng.run_case(entry["op"], entry["case"])
                detail = eng.failures[before]["detail"] if len(eng.failures) > before else None
                outcomes.append({"where": where, "status": status, "detail": detail})
            results.append(outcomes)
            out.write_text(json.dumps({"heap_zeroes": heap_zeroes_fresh_memory(), "outcomes": results}))
    finally:
        engine.close()
        local.close()
    return 0


def plan(total_cases: int, seed: int) -> list[tuple[str, bool, int]]:
    """Every fuzzed overload with its number of cases (2 for a refused out= overload), in an
    order shuffled by the seed (a run cut short has sampled every kind of op)."""
    ops = fuzzed_ops()
    refused = sum(1 for _, r in ops if r)
    per_op = max(1, math.ceil((total_cases - 2 * refused) / max(1, len(ops) - refused)))
    order = [(n, r, 2 if r else per_op) for n, r in ops]
    random.Random(seed).shuffle(order)
    return order


def child(options) -> int:
    """One worker and this process's client, fuzzing the plan from ``--start``; a case in flight is
    written first to ``inflight.json`` (the supervisor reports it if this process dies)."""
    work = Path(options.workdir)
    # this process's own bound: a plain-torch run that would take the machine fails here instead
    resource.setrlimit(resource.RLIMIT_AS, (CLIENT_MEMORY, CLIENT_MEMORY))
    torch.set_num_threads(1)  # as the worker: reductions in the same order, the same bits
    order = plan(options.cases, options.seed)[options.shard::options.shards]
    deadline = time.monotonic() + options.minutes * 60 if options.minutes else None
    engine = Engine(Path(options.token_file), Path(options.token_file).read_text().strip(),
                    log=lambda text: print(text, flush=True)).start()
    counts_file = work / f"counts-{options.shard}-{options.start}.json"
    inflight = work / f"inflight-{options.shard}.json"

    def note(name, case):
        inflight.write_text(json.dumps({"op": name, "case": case, "index": position}))

    def save():
        counts_file.write_text(json.dumps({"counts": engine.counts, "foreign_bytes": engine.foreign_bytes,
                                           "peak": engine.peak, "memory_mode": engine.memory_mode,
                                           "next": position}))

    try:
        for position in range(options.start, len(order)):
            if deadline is not None and time.monotonic() > deadline:
                break
            name, refused, examples = order[position]
            before = len(engine.failures)
            fuzz_op(engine, name, refused, examples, options.seed, before_case=note)
            with open(work / f"failures-{options.shard}.jsonl", "a") as f:
                for failure in engine.failures[before:]:
                    f.write(json.dumps(failure) + "\n")
            save()
        else:
            position = len(order)
        save()
    finally:
        engine.close()
    return 0


def supervise(options) -> dict:
    """Run ``--shards`` children side by side (each its own worker, every n-th op of the plan)
    until the plan is done or the time is up; a child that dies (a case killed the fuzzer's own
    process) is restarted after the op of its case in flight, which is reported."""
    import threading

    work = Path(options.workdir)
    work.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    order = plan(options.cases, options.seed)
    crashes, done = [], [0] * options.shards

    def shard(k: int) -> None:
        start, ops = 0, len(order[k::options.shards])
        while start < ops:
            remaining = options.minutes - (time.monotonic() - started) / 60 if options.minutes else 0
            if options.minutes and remaining <= 0:
                break
            cmd = [sys.executable, __file__, "--child", "--start", str(start), "--cases", str(options.cases),
                   "--seed", str(options.seed), "--workdir", str(work), "--token-file", options.token_file,
                   "--minutes", str(remaining), "--shard", str(k), "--shards", str(options.shards)]
            rc = subprocess.call(cmd, cwd=str(ROOT), env=worker_environment())  # (its heap zeroes: replay())
            state_file = work / f"counts-{k}-{start}.json"
            state = json.loads(state_file.read_text()) if state_file.exists() else {"next": start}
            if rc == 0:
                start = max(state["next"], start)
                break
            flight_file = work / f"inflight-{k}.json"
            flight = json.loads(flight_file.read_text()) if flight_file.exists() else {}
            crashes.append({"op": flight.get("op"), "case": flight.get("case"), "status": "client crash",
                            "detail": f"the fuzzer's own process ended with {rc}", "seed": options.seed})
            start = max(flight.get("index", start), start) + 1
        done[k] = start

    threads = [threading.Thread(target=shard, args=(k,)) for k in range(options.shards)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {"seconds": time.monotonic() - started, "crashes": crashes, "planned": sum(n for *_, n in order),
            "ops_done": sum(done), "ops": len(order)}


# --- the report and the regression cases ---------------------------------------------------------

def write_report(options, runs: list[dict], works: list[Path]) -> dict:
    """The report of one run, or of several side by side (``--merge``): their counts summed."""
    run = {"seconds": max(r["seconds"] for r in runs), "crashes": [c for r in runs for c in r["crashes"]],
           "planned": sum(r["planned"] for r in runs), "ops_done": sum(r["ops_done"] for r in runs),
           "ops": sum(r["ops"] for r in runs)}
    command = "; ".join(f"`{r['command']}` (code {r.get('commit', '?')})" for r in runs)
    counts, foreign, peak, mode = {}, 0, 0, "?"
    for f in (f for work in works for f in work.glob("counts-*.json")):
        state = json.loads(f.read_text())
        for k, v in state["counts"].items():
            counts[k] = counts.get(k, 0) + v
        foreign, peak, mode = foreign + state["foreign_bytes"], max(peak, state["peak"]), state["memory_mode"]
    failures = [json.loads(line) for work in works for f in sorted(work.glob("failures-*.jsonl"))
                for line in f.read_text().splitlines()]
    failures += run["crashes"]
    n = {k: counts.get(k, 0) for k in ("cases", "ok", "refused", "unchecked", *FAILURES)}
    n["client crash"] = len(run["crashes"])
    lines = ["# Property-based op fuzz report", "",
             "Written by `benchmarks/fuzz_property.py` (issue 37, item 6; docs/op-allowlist.md, \"Testing: the "
             "fuzzers\"): cases drawn by hypothesis from each overload's schema, run on a worker process "
             f"(`--max-memory {MAX_MEMORY // 2**30}GiB --threads 1`) in {mode}.", "",
             f"Command: {command}", "", "| | |", "|---|---|",
             f"| torch / hypothesis | {torch.__version__} / {__import__('hypothesis').__version__} |",
             f"| seeds | {', '.join(str(r.get('seed') or _seed_of(r['command'])) for r in runs)} |",
             f"| overloads fuzzed | {run['ops_done']} of {run['ops']} planned (allowed ones and their out= forms) |",
             f"| cases run | {n['cases']} (planned {run['planned']} in {len(runs)} run(s)) |",
             f"| equal to plain torch (values, dtype, shape, writes; every output a pointer) or a hostile case answered "
             f"| {n['ok']} |",
             f"| refused with a clear error (SyftError / the op's own error, the worker alive) | {n['refused']} |",
             f"| ran, outputs too large to compare here | {n['unchecked']} |",
             f"| worker deaths | {n['dead']} |", f"| OOM kills (cgroup) | {n['oom']} |",
             f"| memory peak past {MEMORY_BUDGET // 2**30} GiB | {n['memory']} (highest peak {peak / 2**30:.2f} GiB) |",
             f"| stalls (no reply in {REQUEST_TIMEOUT:.0f} s) | {n['stall']} |",
             f"| wrong results | {n['wrong']} |", f"| worker values returned as local tensors | {n['leak']} |",
             f"| foreign bytes (non-zero bytes from uninitialised-memory ops) | {foreign} in {n['foreign']} cases |",
             f"| a pointer raises where plain torch computes | {n['differs']} |",
             f"| connections a live worker dropped (a reply it could not send) | {n['dropped']} |",
             f"| fuzzer process crashes (client side) | {n['client crash']} |",
             f"| time | {run['seconds'] / 60:.0f} min |", ""]
    if failures:
        lines += ["## Failures (each replayed by tests/network/test_property_fuzz.py from "
                  "tests/network/fuzz_regressions.json)", "", "| status | op | case | symptom |", "|---|---|---|---|"]
        for f in failures[:200]:
            case = json.dumps(f["case"]).replace("|", "\\|")[:200]
            before = f.get("case_before")
            symptom = (f"the case before it on its worker: `{before['op']}` "
                       f"`{json.dumps(before['case']).replace('|', '/')[:150]}`; " if before else "") + str(f["detail"])
            lines.append(f"| {f['status']} | `{f['op']}` | `{case}` | {symptom.replace('|', '/')[:400]} |")
    REPORT.write_text("\n".join(lines) + "\n")
    return {"counts": n, "failures": failures}


def _seed_of(command: str) -> str:
    import re

    found = re.search(r"--seed (\d+)", command)
    return found.group(1) if found else "37"


def add_regressions(failures: list[dict], per_kind: int = 3) -> int:
    """Each failing case (at most ``per_kind`` per op and symptom) into the regression file."""
    known = json.loads(REGRESSIONS.read_text()) if REGRESSIONS.exists() else []
    seen = {(r["op"], json.dumps(r["case"], sort_keys=True)) for r in known}
    kinds: dict = {}
    added = 0
    for f in failures:
        if f.get("op") is None or f.get("case") is None:
            continue
        key = (f["op"], f["status"])
        if (f["op"], json.dumps(f["case"], sort_keys=True)) in seen or kinds.get(key, 0) >= per_kind:
            continue
        kinds[key] = kinds.get(key, 0) + 1
        known.append({"op": f["op"], "case": f["case"], "found": f["status"], "symptom": f["detail"][:300],
                      "seed": f.get("seed"), **({"case_before": f["case_before"]} if f.get("case_before") else {})})
        added += 1
    REGRESSIONS.write_text(json.dumps(known, indent=1) + "\n")
    return added


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=100_000, help="cases in all (planned per overload)")
    parser.add_argument("--seed", type=int, default=37)
    parser.add_argument("--minutes", type=float, default=0, help="stop after this long (0: run the whole plan)")
    parser.add_argument("--workdir", default=None, help="where the run keeps its state (default: a new temp dir)")
    parser.add_argument("--shards", type=int, default=1, help="worker processes fuzzing side by side")
    parser.add_argument("--shard", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--report-only", action="store_true", help="rewrite the report from --workdir's run")
    parser.add_argument("--merge", action="append", default=[], help="another run's workdir, reported with it")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--start", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--token-file", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--replay", default=None, help=argparse.SUPPRESS)  # (test_property_fuzz.py's)
    options = parser.parse_args(argv)
    if options.child:
        return child(options)
    if options.replay:
        return replay(Path(options.token_file), Path(options.replay))
    options.workdir = options.workdir or tempfile.mkdtemp(prefix="fuzz-property-")
    token_file = Path(options.workdir) / "token"
    Path(options.workdir).mkdir(parents=True, exist_ok=True)
    if options.report_only:
        token_file = Path(os.devnull)
    else:
        token_file.write_text(secrets.token_urlsafe(24) + "\n")
        token_file.chmod(0o600)
    options.token_file = str(token_file)
    command = "nice -n 19 python benchmarks/fuzz_property.py " + " ".join(argv if argv is not None else sys.argv[1:])
    run_file = Path(options.workdir) / "run.json"
    if options.report_only:
        run = json.loads(run_file.read_text())
    else:
        commit = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=str(ROOT), capture_output=True,
                                text=True).stdout.strip()
        run_file.write_text(json.dumps({"command": command, "commit": commit, "seconds": 0, "crashes": [],
                                        "planned": options.cases, "ops_done": 0, "ops": len(fuzzed_ops())}))
        run = supervise(options)
        run.update(command=command, commit=commit, seed=options.seed)
        run_file.write_text(json.dumps(run))
    works = [Path(options.workdir)] + [Path(d) for d in options.merge]
    runs = [run] + [json.loads((d / "run.json").read_text()) for d in works[1:]]
    summary = write_report(options, runs, works)
    added = add_regressions(summary["failures"])
    print(REPORT.read_text(), f"\n{added} new regression cases in {REGRESSIONS}", flush=True)
    return 1 if any(summary["counts"][k] for k in FAILURES) else 0


if __name__ == "__main__":
    sys.exit(main())
