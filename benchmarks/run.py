"""Run every benchmark and write benchmarks/results.md and results.json.

    .venv/bin/python benchmarks/run.py            # full run, about 15 minutes on 2 cores (bench_flower ~9 of them)
    .venv/bin/python benchmarks/run.py --quick    # short mode (--smoke: the fewest samples, part of scripts/test)
    .venv/bin/python benchmarks/run.py --only bench_plans --merge   # re-run some modules, keep the others' rows

With ``--merge`` the modules run replace their rows in the existing results.json/results.md and
the other modules' rows stay, each module's commit, date and load named under the table (the
figures of one module are always from one run, side by side).

results.md names the commit it measured, and says so when the working tree had uncommitted
changes to tracked files (dirty): quote figures only from a clean run of the current commit.

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
import subprocess
import sys
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import common  # noqa: E402  (beside this script: its SMOKE switch is read by every module)

MODULES = ["bench_runtime", "bench_plans", "bench_transport", "bench_widget", "bench_federated", "bench_smpc", "bench_events", "bench_ray",
           "bench_flower"]


def is_output(path: str) -> bool:
    """A file the benchmarks write themselves (results.md, smpc_results.json, flower_results.raw.json,
    plans/results.md...): changed by an earlier run, it says nothing of the code measured."""
    return path.startswith("benchmarks/") and "results" in path.rsplit("/", 1)[-1]


def source() -> dict:
    """The commit measured and whether tracked files differed from it (a dirty tree)."""
    def git(*args):
        return subprocess.run(["git", *args], capture_output=True, text=True, cwd=str(HERE.parent)).stdout

    try:
        # porcelain lines are "XY path": the status columns may be blank, so no strip() before [3:]
        changed = [line[3:] for line in git("status", "--porcelain", "--untracked-files=no").splitlines()
                   if line and not is_output(line[3:])]
        return {"commit": git("rev-parse", "HEAD").strip() or None, "dirty": bool(changed), "changed": changed}
    except OSError:  # no git here
        return {"commit": None, "dirty": None, "changed": []}


def machine() -> dict:
    import torch

    return {"python": platform.python_version(), "torch": torch.__version__,
            "cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
            "torch_threads": torch.get_num_threads(), "platform": platform.platform(),
            "load_average": [round(x, 1) for x in os.getloadavg()],
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}


def source_line(src: dict) -> str:
    if src["commit"] is None:
        return "Source: not a git checkout."
    if not src["dirty"]:
        return f"Source: commit {src['commit']} (clean)."
    shown = ", ".join(src["changed"][:8]) + (", ..." if len(src["changed"]) > 8 else "")
    return f"Source: commit {src['commit']} **plus uncommitted changes** (dirty: {shown})."


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


def _merged(previous: dict, results: list[dict], ran: dict) -> tuple[list[dict], dict]:
    """The previous run's rows with the modules of this run replaced (in MODULES order), and
    each module's run: its source, date, load and seconds."""
    old_runs = previous.get("runs") or {name: {"source": previous["source"], "date": previous["machine"]["date"],
                                               "load_average": previous["machine"]["load_average"][0],
                                               "seconds": secs} for name, secs in previous.get("seconds", {}).items()}
    runs = {**old_runs, **ran}
    rows = [r for r in previous.get("results", []) if r.get("module") not in ran] + results
    order = {name: i for i, name in enumerate(MODULES)}
    rows.sort(key=lambda r: order.get(r.get("module"), len(order)))  # stable: a module's rows keep their order
    return rows, {name: runs[name] for name in sorted(runs, key=lambda n: order.get(n, len(order)))}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="short mode: fewer samples, smaller sizes")
    ap.add_argument("--smoke", action="store_true",
                    help="quick mode with the fewest samples: shows every benchmark runs (scripts/test); "
                         "its figures are not measurements")
    ap.add_argument("--out", type=Path, default=HERE, help="folder for results.md and results.json")
    ap.add_argument("--only", nargs="*", help="run only these modules")
    ap.add_argument("--merge", action="store_true",
                    help="with --only: keep the other modules' rows of the existing results (full mode only)")
    args = ap.parse_args(argv)
    if args.smoke:
        args.quick = common.SMOKE = True
    src = source()  # before running: the code measured is the code at start
    results, seconds = [], {}
    for name in args.only or MODULES:
        if not (HERE / f"{name}.py").exists():
            continue
        t0 = time.perf_counter()
        try:
            mod = importlib.import_module(name)
            for r in mod.run(quick=args.quick):
                r["module"] = name
                results.append(r)
        except Exception as e:  # one broken benchmark must not hide the others
            traceback.print_exc()
            results.append({"name": name, "module": name, "error": f"{type(e).__name__}: {e}"})
        seconds[name] = round(time.perf_counter() - t0, 1)
        print(f"benchmarks/run.py: {name} took {seconds[name]} s", file=sys.stderr, flush=True)
    info = machine()
    args.out.mkdir(parents=True, exist_ok=True)
    stem = "results.smoke" if args.smoke else "results.quick" if args.quick else "results"
    ran = {name: {"source": src, "date": info["date"], "load_average": info["load_average"][0],
                  "seconds": seconds[name]} for name in seconds}
    runs = ran
    if args.merge and (args.out / f"{stem}.json").is_file():
        results, runs = _merged(json.loads((args.out / f"{stem}.json").read_text()), results, ran)
    mode = " (smoke mode: the fewest samples, not measurements)" if args.smoke else " (quick mode)" if args.quick else ""
    seconds = {name: r["seconds"] for name, r in runs.items()}
    (args.out / f"{stem}.json").write_text(json.dumps({"machine": info, "source": src, "quick": args.quick,
                                                       "smoke": args.smoke, "seconds": seconds, "runs": runs,
                                                       "results": results}, indent=2))
    several = (len({r["source"]["commit"] for r in runs.values()}) > 1
               or any(r["date"] != info["date"] for r in runs.values()))
    md = [f"# Benchmark results{mode}", "",
          f"Source: several runs, one per module (listed below the table); the latest: "
          f"{source_line(src)[len('Source: '):]}" if several else source_line(src), "",
          f"Machine: {info['cpu']}, {info['cores']} cores, Python {info['python']}, torch {info['torch']} "
          f"({info['torch_threads']} thread(s)), {info['platform']}; load average at the end "
          f"{info['load_average'][0]}; run {info['date']}, {sum(seconds.values()):.0f} s.", "",
          "Ratios are timings of syft_lab and its peer or floor taken side by side, in turns, in one run "
          "(medians; CPU time of the thread for in-process figures, wall time for round trips).", "",
          table(results), ""]
    if several:
        md += ["Modules measured in different runs (each module's figures come from one run):", ""]
        md += [f"- {name}: {source_line(r['source'])[len('Source: '):]} run {r['date']}, {r['seconds']:.0f} s, "
               f"load average at its end {r['load_average']}" for name, r in runs.items()]
        md.append("")
    (args.out / f"{stem}.md").write_text("\n".join(md))
    print("\n".join(md))
    return 1 if any("error" in r for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
