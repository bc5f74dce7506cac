"""Shared by every benchmark: interleaved timing and the result record."""
from __future__ import annotations

import statistics
import time


def interleaved(fns: dict, *, number: int, repeat: int) -> dict:
    """Median seconds per call of each function, sampled in turns so drift hits all alike."""
    samples = {k: [] for k in fns}
    for _ in range(repeat):
        for k, fn in fns.items():
            t0 = time.perf_counter()
            for _ in range(number):
                fn()
            samples[k].append((time.perf_counter() - t0) / number)
    return {k: statistics.median(v) for k, v in samples.items()}


def figure(name, value, unit, target, peer=None, ratio=None, *, higher_is_better=False, note=""):
    """One row of the results table. ``target`` is a bound on ``ratio`` (or on value if no ratio)."""
    measured = ratio if ratio is not None else value
    ok = None
    if target is not None:
        ok = measured >= target if higher_is_better else measured <= target
    return {"name": name, "value": value, "unit": unit, "target": target, "peer": peer,
            "ratio": ratio, "higher_is_better": higher_is_better, "meets_target": ok, "note": note}
