"""PyTorch's own op and module databases through pointers and LoggingTensors (issue 22).

    python benchmarks/sweep_opinfo.py [--samples 3] [--every 1] [--out benchmarks/sweep_report.md]
    python benchmarks/sweep_opinfo.py --only 'masked|nn.BatchNorm' --failures   # a subset, no report

For every OpInfo of ``op_db`` that supports float32 on CPU, its first ``--samples`` sample
inputs run three ways: plain, with every tensor sent to a VirtualWorker (the result fetched with
``.get()``), and with every tensor wrapped in a LoggingTensor (the result unwrapped). A sample
matches when the results have plain torch's structure and values (``rtol=1e-4``, NaN equal to
NaN), under the same seed. Samples where plain torch raises are not counted. ``module_db``
likewise: each module built once per sample, a deep copy sent to the worker, the forward's
outputs compared. Prints both rates and the failures grouped by cause; ``--every N`` takes
every N-th OpInfo and ModuleInfo (the suite's bounded version, tests/wire/test_op_policy_sweep.py,
uses it). Needs ``expecttest`` (the test extra), which torch.testing._internal imports.
"""
from __future__ import annotations

import argparse
import collections
import copy
import re
import sys
import time
import warnings
from pathlib import Path

import torch
from torch.utils._pytree import tree_flatten, tree_map

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import syft_lab as sy  # noqa: E402
from syft_lab.tensors.base import ChainLayer  # noqa: E402
from syft_lab.tensors.pointer import PointerTensor  # noqa: E402

DTYPE = torch.float32
RTOL, ATOL = 1e-4, 1e-5


def _unwrap(t):
    while isinstance(t, ChainLayer):
        t = t.child
    return t


def _fetch(x):
    if isinstance(x, PointerTensor):
        return x.get()
    return x


def _clone(x):
    return x.detach().clone() if isinstance(x, torch.Tensor) else copy.deepcopy(x)


# ops whose outputs are uninitialised memory: only their shape and dtype can be compared
UNINITIALISED = {"empty", "empty_like", "empty_permuted", "empty_strided", "new_empty", "new_empty_strided"}


def _as_tuples(x):
    return tuple(x) if isinstance(x, torch.Size) else x


def _equal(plain, other, values=True) -> str | None:
    """None when ``other`` has plain's structure and values, else why not."""
    p_leaves, p_spec = tree_flatten(tree_map(_as_tuples, plain))
    o_leaves, o_spec = tree_flatten(tree_map(_as_tuples, other))
    if p_spec != o_spec:
        return f"output structure differs ({o_spec} vs plain {p_spec})"[:160]
    for p, o in zip(p_leaves, o_leaves):
        if isinstance(p, torch.Tensor):
            if not isinstance(o, torch.Tensor):
                return f"a {type(o).__name__} where plain torch gives a tensor"
            o = _unwrap(o)
            if o.shape != p.shape or o.dtype != p.dtype:
                return f"shape/dtype {tuple(o.shape)} {o.dtype} vs plain {tuple(p.shape)} {p.dtype}"
            if not values:
                continue
            try:
                torch.testing.assert_close(o, p, rtol=RTOL, atol=ATOL, equal_nan=True, check_device=False,
                                           check_layout=False, check_stride=False)
            except AssertionError:
                return "values differ"
        elif p != o and not (p != p and o != o):
            return f"{o!r:.40} != plain {p!r:.40}"
    return None


_NUMBER = re.compile(r"\d+")


def cause_of(e: BaseException) -> str:
    """A failure's cause, with numbers and object ids blanked, for grouping."""
    text = str(e).strip().splitlines()[0] if str(e).strip() else ""
    text = re.sub(r"worker '[^']*'", "worker W", text)
    return f"{type(e).__name__}: {_NUMBER.sub('N', text)}"[:150]


def _seeded(fn, seed):
    torch.manual_seed(seed)
    return fn()


def check_op_sample(op, sample, bob, seed) -> tuple[str | None, str | None] | None:
    """(pointer failure, logging failure) for one sample, or None when plain torch raises."""
    args = (sample.input, *sample.args)
    kwargs = sample.kwargs
    try:
        plain = _seeded(lambda: op(*tree_map(_clone, args), **tree_map(_clone, kwargs)), seed)
    except Exception:
        return None
    results = []
    for wrap, unwrap in ((lambda t: bob.send(_clone(t)), _fetch), (lambda t: sy.LoggingTensor(_clone(t)), _unwrap)):
        try:
            wrapped = tree_map(lambda t: wrap(t) if isinstance(t, torch.Tensor) else _clone(t), (args, kwargs))
            out = _seeded(lambda: op(*wrapped[0], **wrapped[1]), seed)
            results.append(_equal(plain, tree_map(unwrap, out), values=op.name not in UNINITIALISED))
        except Exception as e:
            results.append(cause_of(e))
    return results[0], results[1]


def _full_name(op) -> str:
    return f"{op.name}{'.' + op.variant_test_name if op.variant_test_name else ''}"


def _selected(name: str, only) -> bool:
    return only is None or re.search(only, name) is not None


def sweep_ops(samples: int, every: int, bob, only=None) -> dict:
    from torch.testing._internal.common_methods_invocations import op_db

    counts, failures = collections.Counter(), {"pointer": [], "logging": []}
    for k, op in enumerate(op_db):
        if k % every or not _selected(_full_name(op), only) or DTYPE not in op.supported_dtypes("cpu"):
            continue
        try:
            inputs = list(_first(op.sample_inputs("cpu", DTYPE), samples))
        except Exception:
            continue  # a sample generator this machine cannot run (not a result about pointers)
        for i, sample in enumerate(inputs):
            result = check_op_sample(op, sample, bob, seed=i)
            if result is None:
                continue
            counts["samples"] += 1
            for kind, reason in zip(("pointer", "logging"), result):
                if reason is None:
                    counts[kind] += 1
                else:
                    failures[kind].append((_full_name(op), reason))
    return {"total": counts["samples"], "pointer": counts["pointer"], "logging": counts["logging"],
            "failures": failures}


def _first(iterable, n):
    for i, x in enumerate(iterable):
        if i >= n:
            return
        yield x


def check_module_sample(info, sample, bob, seed) -> tuple[str | None, str | None] | None:
    cargs, ckwargs = sample.constructor_input.args, sample.constructor_input.kwargs
    fwd = sample.forward_input
    try:
        torch.manual_seed(seed)
        module = info.module_cls(*cargs, **ckwargs).to(dtype=DTYPE)
        far, logged = copy.deepcopy(module), copy.deepcopy(module)
        plain = _seeded(lambda: module(*tree_map(_clone, fwd.args), **tree_map(_clone, fwd.kwargs)), seed)
    except Exception:
        return None
    results = []
    try:
        far.send(bob)
        wrapped = tree_map(lambda t: bob.send(_clone(t)) if isinstance(t, torch.Tensor) else _clone(t),
                           (fwd.args, fwd.kwargs))
        out = _seeded(lambda: far(*wrapped[0], **wrapped[1]), seed)
        results.append(_equal(plain, tree_map(_fetch, out)))
    except Exception as e:
        results.append(cause_of(e))
    try:
        wrapped = tree_map(lambda t: sy.LoggingTensor(_clone(t)) if isinstance(t, torch.Tensor) else _clone(t),
                           (fwd.args, fwd.kwargs))
        out = _seeded(lambda: logged(*wrapped[0], **wrapped[1]), seed)
        results.append(_equal(plain, tree_map(_unwrap, out)))
    except Exception as e:
        results.append(cause_of(e))
    return results[0], results[1]


def sweep_modules(samples: int, every: int, bob, only=None) -> dict:
    from torch.testing._internal.common_modules import module_db

    counts, failures = collections.Counter(), {"pointer": [], "logging": []}
    for k, info in enumerate(module_db):
        if k % every or not _selected(info.name, only) or DTYPE not in info.supported_dtypes("cpu"):
            continue
        try:
            inputs = list(_first(info.module_inputs_func(info, device="cpu", dtype=DTYPE, requires_grad=False,
                                                         training=True), samples))
        except Exception:
            continue
        for i, sample in enumerate(inputs):
            result = check_module_sample(info, sample, bob, seed=i)
            if result is None:
                continue
            counts["samples"] += 1
            for kind, reason in zip(("pointer", "logging"), result):
                if reason is None:
                    counts[kind] += 1
                else:
                    failures[kind].append((info.name, reason))
    return {"total": counts["samples"], "pointer": counts["pointer"], "logging": counts["logging"],
            "failures": failures}


def run(samples=3, every=1, only=None) -> dict:
    """Both sweeps; ``only``: a regular expression an op's or module's name must contain."""
    sy.hook()
    bob = sy.VirtualWorker("sweep_bob")
    warnings.filterwarnings("ignore")
    started = time.monotonic()
    with torch.random.fork_rng():
        ops = sweep_ops(samples, every, bob, only)
        modules = sweep_modules(samples, every, bob, only)
    return {"ops": ops, "modules": modules, "seconds": time.monotonic() - started}


def by_cause(failures) -> list[tuple[str, int, list[str]]]:
    groups = collections.defaultdict(list)
    for name, reason in failures:
        groups[reason].append(name)
    return sorted(((cause, len(names), sorted(set(names))) for cause, names in groups.items()),
                  key=lambda g: -g[1])


def report(result: dict, samples: int, every: int) -> str:
    lines = ["# OpInfo and module_db through pointers and LoggingTensors", "",
             f"Written by `python benchmarks/sweep_opinfo.py --samples {samples} --every {every}` "
             f"(torch {torch.__version__}, float32, CPU, a VirtualWorker; `.get()` compared with rtol {RTOL}).", "",
             "| database | samples | pointer | LoggingTensor |", "|---|---|---|---|"]
    for key, title in (("ops", "OpInfo (op_db)"), ("modules", "nn module_db")):
        r = result[key]
        total = max(r["total"], 1)
        lines.append(f"| {title} | {r['total']} | {r['pointer']} ({r['pointer'] / total:.1%}) | "
                     f"{r['logging']} ({r['logging'] / total:.1%}) |")
    lines += ["", f"Sweep time: {result['seconds']:.0f} s.", ""]
    for key, title in (("ops", "OpInfo"), ("modules", "module_db")):
        for kind in ("pointer", "logging"):
            groups = by_cause(result[key]["failures"][kind])
            if not groups:
                continue
            lines += [f"## {title} failures through {'pointers' if kind == 'pointer' else 'LoggingTensor'}, by cause",
                      "", "| samples | cause | ops |", "|---|---|---|"]
            for cause, n, names in groups:
                shown = ", ".join(names[:12]) + (f" (+{len(names) - 12})" if len(names) > 12 else "")
                lines.append(f"| {n} | {cause.replace('|', '/')} | {shown} |")
            lines.append("")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=3)
    parser.add_argument("--every", type=int, default=1)
    parser.add_argument("--out", default=None,
                        help="where the report goes (default: benchmarks/sweep_report.md for a full run, "
                             "none with --only)")
    parser.add_argument("--only", default=None, metavar="REGEX",
                        help="only the ops and modules whose name matches (re.search), e.g. 'masked|nn.LazyConv'; "
                             "for iterating on failures")
    parser.add_argument("--failures", action="store_true", help="print each failing sample's name and cause")
    options = parser.parse_args(argv)
    result = run(options.samples, options.every, options.only)
    text = report(result, options.samples, options.every)
    out = options.out or (None if options.only else str(ROOT / "benchmarks" / "sweep_report.md"))
    if out:
        Path(out).write_text(text)
    print(text)
    if options.failures:
        for key in ("ops", "modules"):
            for kind in ("pointer", "logging"):
                for name, why in result[key]["failures"][kind]:
                    print(f"{kind:8} {name}: {why}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
