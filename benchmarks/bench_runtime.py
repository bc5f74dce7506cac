"""Tensor layers and in-process workers: what a chain costs over plain torch (issues 2, 3 and 16).

Each figure is a ratio of two timings taken side by side, in turns, in one process (CPU time
of the thread: the machine is shared). The floor of any chain layer is measured in the same
run: a minimal flat ``__torch_dispatch__`` wrapper that only unwraps and rewraps.
"""
from __future__ import annotations

import statistics
import sys
import textwrap

import torch

import common
from common import cpu_clock, figure, fresh_process, interleaved, interleaved_samples, paired_ratio

torch.set_num_threads(1)
_make_wrapper = torch.Tensor._make_wrapper_subclass


class FlatWrapper(torch.Tensor):
    """The floor for a chain layer: unwraps its own instances among the top-level args, runs the
    op, wraps a tensor result. No logging, no lists, no in-place care. Built the same way as
    LoggingTensor's wrappers (same strides, the op's C++ packet) so only the layer's own work
    differs."""

    __slots__ = ("child",)
    __torch_function__ = torch._C._disabled_torch_function_impl

    @staticmethod
    def __new__(cls, child):
        r = _make_wrapper(cls, child.shape, child.stride(), child.storage_offset(), None, child.dtype)
        r.child = child
        return r

    @classmethod
    def __torch_dispatch__(cls, func, types, args, kwargs=None):
        args = [a.child if isinstance(a, cls) else a for a in args]
        out = func._op(*args, **kwargs) if kwargs else func._op(*args)
        if isinstance(out, torch.Tensor):
            r = _make_wrapper(cls, out.shape, out.stride(), out.storage_offset(), None, out.dtype)
            r.child = out
            return r
        return out


# --- hook cost ----------------------------------------------------------------------------

_PLAIN_WORK = """
import json, statistics, time, torch, torch.nn as nn, torch.nn.functional as F
torch.set_num_threads(1)
a = torch.ones(1); b = torch.ones(1)
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
X, T = torch.randn(16, 32), torch.randint(0, 10, (16,))
def add():
    for _ in range(2000): a + b
def step():
    for _ in range(10):
        opt.zero_grad(); F.cross_entropy(model(X), T).backward(); opt.step()
def sample(fn):
    t = time.thread_time(); fn(); return time.thread_time() - t
add(); step()  # warm
"""


def _fresh_code(with_import: bool, reps: int) -> str:
    imp = "import syft_lab as sy; sy.hook()" if with_import else ""
    return _PLAIN_WORK + textwrap.dedent(f"""
        {imp}
        s = {{"add": [], "step": []}}
        for _ in range({reps}):
            s["add"].append(sample(add)); s["step"].append(sample(step))
        print(json.dumps({{k: statistics.median(v) for k, v in s.items()}}))
    """)


def hook_cost(quick: bool) -> list[dict]:
    """Plain ops with and without syft_lab, two ways: (1) fresh processes, in turns, one that
    imports syft_lab and calls sy.hook() and one that does not (an import cannot be undone);
    (2) in one process after the import, samples with the hook on and off in turns."""
    pairs, reps = (1, 2) if common.SMOKE else (2, 15) if quick else (5, 31)
    fresh = {"with": [], "without": []}
    for i in range(pairs):
        for kind in (("with", "without") if i % 2 == 0 else ("without", "with")):
            fresh[kind].append(fresh_process(_fresh_code(kind == "with", reps)))
    f_ratio = {k: statistics.median(r[k] for r in fresh["with"]) / statistics.median(r[k] for r in fresh["without"])
               for k in ("add", "step")}

    inproc = fresh_process(_PLAIN_WORK + textwrap.dedent(f"""
        import syft_lab as sy
        s = {{"on": {{"add": [], "step": []}}, "off": {{"add": [], "step": []}}}}
        for i in range({2 * reps}):
            for state in (("on", "off") if i % 2 == 0 else ("off", "on")):
                sy.hook() if state == "on" else sy.unhook()
                add(); step()  # changing torch.Tensor's class resets Python's attribute caches: warm again
                s[state]["add"].append(sample(add)); s[state]["step"].append(sample(step))
        print(json.dumps({{k: statistics.median(s["on"][k]) / statistics.median(s["off"][k]) for k in ("add", "step")}}))
    """))
    n = f"{pairs} fresh processes each, in turns"
    return [
        figure("plain 1-element add, fresh process with import + sy.hook() vs without", f_ratio["add"], "x", 1.02,
               peer=f"the same add in a process without syft_lab ({n})", ratio=f_ratio["add"]),
        figure("plain small MLP train step, fresh process with import + sy.hook() vs without", f_ratio["step"], "x",
               1.02, peer=f"the same step in a process without syft_lab ({n})", ratio=f_ratio["step"]),
        figure("plain 1-element add, sy.hook() on vs off (one process, samples in turns)", inproc["add"], "x", 1.02,
               peer="the same add with sy.unhook()", ratio=inproc["add"]),
        figure("plain small MLP train step, sy.hook() on vs off (one process, samples in turns)", inproc["step"], "x",
               1.02, peer="the same step with sy.unhook()", ratio=inproc["step"]),
    ]


# --- chain layers ---------------------------------------------------------------------------

def logging_cost(quick: bool) -> list[dict]:
    import syft_lab as sy

    number, repeat = (200, 41) if quick else (500, 101)
    a = torch.ones(1)
    fa = FlatWrapper(torch.ones(1))
    la = sy.LoggingTensor(torch.ones(1))

    def add_logged():
        la + la
        if len(la.log) > 10000:
            del la.log[:]

    t = interleaved({"plain": lambda: a + a, "floor": lambda: fa + fa, "logging": add_logged},
                    number=number, repeat=repeat, clock=cpu_clock)
    big = torch.ones(1000, 1000)
    fbig = FlatWrapper(torch.ones(1000, 1000))
    lbig = sy.LoggingTensor(torch.ones(1000, 1000))
    sb = interleaved_samples({"plain": lambda: big + big, "floor": lambda: fbig + fbig,
                              "logging": lambda: lbig + lbig}, number=5 if quick else 10, repeat=repeat, clock=cpu_clock)
    tb = {k: statistics.median(v) for k, v in sb.items()}
    rb, rb_floor = paired_ratio(sb, "logging", "plain"), paired_ratio(sb, "floor", "plain")
    return [
        figure("LoggingTensor 1-element add", t["logging"] * 1e6, "us", 1.15,
               peer=f"ratio to the minimal flat dispatch wrapper (the floor), same run: {t['floor'] * 1e6:.2f} us ({t['floor'] / t['plain']:.1f}x plain); "
                    f"plain add {t['plain'] * 1e6:.2f} us; LoggingTensor {t['logging'] / t['plain']:.1f}x plain",
               ratio=t["logging"] / t["floor"]),
        figure("LoggingTensor 1000x1000 add", tb["logging"] * 1e6, "us", 1.05,
               peer=f"ratio to plain add {tb['plain'] * 1e6:.0f} us (median of ratios within a round); the flat "
                    f"wrapper floor {tb['floor'] * 1e6:.0f} us ({rb_floor:.3f}x plain)",
               ratio=rb),
    ]


def pointer_cost(quick: bool) -> list[dict]:
    """A pointer op on a VirtualWorker takes the service's lean in-process path (issue 22:
    FastPaths.lean_ops (workers/fastpath.py): the allow-list and argument checks, session, ledger, the core
    runs it; no message dict). Beside it, the core alone (what an in-process op cost before the
    service was in its path), and the worker's part of the op both ways: the lean path, and a
    ``run`` message through the in-process transport (the command path every worker takes)."""
    import syft_lab as sy
    from syft_lab.commands import held_by

    bob = sy.VirtualWorker("bench_bob")
    number, repeat = (200, 41) if quick else (500, 101)
    a = torch.ones(1)
    fa = FlatWrapper(torch.ones(1))
    p = bob.send(torch.ones(1))
    core, ref, add = bob.core, p._ref, torch.ops.aten.add.Tensor

    def core_only():  # the op and its release, straight on the core (no client, no service)
        with held_by("bench_bob"):
            r = core.run(add, [ref, ref], None)
        core.decref(r.id)

    session = bob.transport.session

    def worker_lean():  # the worker's part of a pointer op: the lean in-process path, and the release
        bob._release(bob._run(add, [ref, ref], None).id)

    def worker_message():  # the same as a run message through the in-process transport and service.call
        r = bob.transport.exchange({"c": "run", "op": add, "a": [ref, ref], "k": None})
        bob.service.release_one(session, r.id)

    from syft_lab.workers import core as core_module

    checks = core_module.check_call, core_module.check_result

    def _nothing(*args):
        return None

    def with_checks():  # the pointer op again, beside the same op with the worker's op checks off
        core_module.check_call, core_module.check_result = checks
        p + p

    def without_checks():  # (as bench_op_policy.py: the allow-list's check_call and check_result)
        core_module.check_call = core_module.check_result = _nothing
        p + p

    try:
        t = interleaved({"plain": lambda: a + a, "floor": lambda: fa + fa, "pointer": lambda: p + p,
                         "core": core_only, "lean": worker_lean, "message": worker_message,
                         "checks_on": with_checks, "checks_off": without_checks},
                        number=number, repeat=repeat, clock=cpu_clock)
    finally:
        core_module.check_call, core_module.check_result = checks
    big = torch.ones(1000, 1000)

    def clone_twice():
        big.clone()
        big.clone()

    def send_get():
        bob.send(big).get()

    tb = interleaved({"clone2": clone_twice, "send_get": send_get}, number=3 if quick else 10,
                     repeat=5 if quick else 15, clock=cpu_clock)
    bob.close()
    return [
        figure("pointer op round trip (1 element, VirtualWorker, through the worker service)", t["pointer"] * 1e6,
               "us", 10.0,
               peer=f"ratio to plain add {t['plain'] * 1e6:.2f} us; the flat wrapper floor {t['floor'] / t['plain']:.1f}x "
                    f"plain; the op on the core alone (no client, no service, no pointer) {t['core'] * 1e6:.2f} us; "
                    f"the worker's part (op and release, no pointer): lean in-process path {t['lean'] * 1e6:.2f} us, "
                    f"as a run message through the transport {t['message'] * 1e6:.2f} us",
               ratio=t["pointer"] / t["plain"]),
        figure("pointer op: the worker's op checks per op, side by side (checks on vs off, VirtualWorker)",
               (t["checks_on"] - t["checks_off"]) * 1e6, "us", None,
               peer=f"the pointer op with the checks {t['checks_on'] * 1e6:.2f} us ({t['checks_on'] / t['plain']:.1f}x "
                    f"plain), without them {t['checks_off'] * 1e6:.2f} us ({t['checks_off'] / t['plain']:.1f}x plain): "
                    f"check_call and check_result swapped for a no-op in turns, as bench_op_policy.py does",
               ratio=t["checks_on"] / t["checks_off"]),
        figure("send + get of 1000x1000 (VirtualWorker)", tb["send_get"] * 1e3, "ms", 3.0,
               peer=f"t.clone() twice {tb['clone2'] * 1e3:.2f} ms", ratio=tb["send_get"] / tb["clone2"]),
    ]


def run(quick: bool = False) -> list[dict]:
    return hook_cost(quick) + logging_cost(quick) + pointer_cost(quick)


if __name__ == "__main__":
    from run import print_table

    print_table(run("--quick" in sys.argv))
