"""Shared by every benchmark: interleaved timing, fresh-process timing and the result record."""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# CPU time of this thread: the machine is shared, and time spent descheduled is not the code's.
# For figures that wait on another process (round trips), wall time is the right clock.
cpu_clock = time.thread_time
wall_clock = time.perf_counter


# Smoke mode (run.py --smoke, what scripts/test runs): every figure computed once over the fewest
# samples, to show the benchmarks still run; its numbers are not measurements.
SMOKE = False


def interleaved_samples(fns: dict, *, number: int, repeat: int, clock=wall_clock) -> dict:
    """Seconds per call of each function in each round, sampled in turns (ABC, CBA, ABC, ...)
    so that drift and the order within a round hit all alike."""
    if SMOKE:
        number, repeat = max(1, number // 10), min(repeat, 3)
    samples = {k: [] for k in fns}
    items = list(fns.items())
    for i in range(repeat):
        for k, fn in (items if i % 2 == 0 else items[::-1]):
            t0 = clock()
            for _ in range(number):
                fn()
            samples[k].append((clock() - t0) / number)
    return samples


def interleaved(fns: dict, *, number: int, repeat: int, clock=wall_clock) -> dict:
    """Median seconds per call of each function, sampled in turns (see interleaved_samples)."""
    samples = interleaved_samples(fns, number=number, repeat=repeat, clock=clock)
    return {k: statistics.median(v) for k, v in samples.items()}


def paired_ratio(samples: dict, a: str, b: str) -> float:
    """Median over rounds of a's time / b's time in the same round: a memory-bound figure on a
    shared machine swings with other processes' traffic, which a round's neighbours share."""
    return statistics.median(x / y for x, y in zip(samples[a], samples[b]))


def fresh_process(code: str, timeout: float = 300) -> dict:
    """Run ``code`` in a new interpreter (the repo on its path); it prints one JSON line last."""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout,
                         cwd=str(ROOT), env=dict(os.environ, PYTHONPATH=str(ROOT)))
    if out.returncode != 0:
        raise RuntimeError(f"benchmark subprocess failed: {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def figure(name, value, unit, target, peer=None, ratio=None, *, higher_is_better=False, note=""):
    """One row of the results table. ``target`` is a bound on ``ratio`` (or on value if no ratio)."""
    measured = ratio if ratio is not None else value
    ok = None
    if target is not None:
        ok = measured >= target if higher_is_better else measured <= target
    return {"name": name, "value": value, "unit": unit, "target": target, "peer": peer,
            "ratio": ratio, "higher_is_better": higher_is_better, "meets_target": ok, "note": note}


def stop_ray_workers(workers) -> None:
    """Close Ray workers and kill their actors (several workers may share one actor)."""
    import ray

    actors = {w.actor_id: w.actor for w in workers}
    for w in workers:
        w.close()
    for a in actors.values():
        ray.kill(a)
