"""Run every benchmark and write benchmarks/results.md and results.json.

    .venv/bin/python benchmarks/run.py            # full run, a few minutes
    .venv/bin/python benchmarks/run.py --quick    # short mode (the test suite runs this)

Every benchmark module has ``run(quick) -> list[dict]`` (see common.figure); a module that
fails is reported as such in the table instead of stopping the others.
"""
from __future__ import annotations

import argparse
import datetime
import importlib
import json
import os
import platform
import sys
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

MODULES = ["bench_runtime", "bench_plans", "bench_transport", "bench_widget", "bench_federated"]


def machine() -> dict:
    import torch

    return {"python": platform.python_version(), "torch": torch.__version__,
            "cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
            "torch_threads": torch.get_num_threads(), "platform": platform.platform(),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}


def _fmt(x):
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:.3g}" if abs(x) < 1000 else f"{x:,.0f}"
    return str(x)


def table(results: list[dict]) -> str:
    rows = ["| figure | value | ratio | target | peer / floor (same run) | meets target |",
            "|---|---|---|---|---|---|"]
    for r in results:
        if "error" in r:
            rows.append(f"| {r['name']} | failed: {r['error']} | | | | |")
            continue
        sign = ">=" if r.get("higher_is_better") else "<="
        target = f"{sign} {r['target']}" if r["target"] is not None else "-"
        ok = {True: "yes", False: "**no**", None: "-"}[r["meets_target"]]
        rows.append(f"| {r['name']} | {_fmt(r['value'])} {r['unit']} | {_fmt(r['ratio'])} | {target} "
                    f"| {r['peer'] or '-'} | {ok} |")
    return "\n".join(rows)


def print_table(results):
    print(table(results))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="short mode: fewer samples, smaller sizes")
    ap.add_argument("--out", type=Path, default=HERE, help="folder for results.md and results.json")
    ap.add_argument("--only", nargs="*", help="run only these modules")
    args = ap.parse_args(argv)
    results = []
    for name in args.only or MODULES:
        if not (HERE / f"{name}.py").exists():
            continue
        try:
            mod = importlib.import_module(name)
            for r in mod.run(quick=args.quick):
                r["module"] = name
                results.append(r)
        except Exception as e:  # one broken benchmark must not hide the others
            traceback.print_exc()
            results.append({"name": name, "module": name, "error": f"{type(e).__name__}: {e}"})
    info = machine()
    args.out.mkdir(parents=True, exist_ok=True)
    stem = "results.quick" if args.quick else "results"
    (args.out / f"{stem}.json").write_text(json.dumps({"machine": info, "quick": args.quick,
                                                       "results": results}, indent=2))
    md = [f"# Benchmark results{' (quick mode)' if args.quick else ''}", "",
          f"Machine: {info['cpu']}, {info['cores']} cores, Python {info['python']}, torch {info['torch']} "
          f"({info['torch_threads']} thread(s)), {info['platform']}; run {info['date']}.", "",
          "Ratios are timings of syft_lab and its peer taken side by side, in turns, in one run.", "",
          table(results), ""]
    (args.out / f"{stem}.md").write_text("\n".join(md))
    print("\n".join(md))
    return 1 if any("error" in r for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
