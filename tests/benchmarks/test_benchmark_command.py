"""The benchmark command runs (smoke mode: every benchmark with the fewest samples) and writes its
table: figures, targets, peers, machine.

Outside the main test run (marker "benchmark"): scripts/test runs it as a step of its own."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 900  # seconds for the whole smoke run (pytest-timeout's limit for this test too)

pytestmark = [pytest.mark.benchmark, pytest.mark.slow, pytest.mark.timeout(TIMEOUT + 60)]


def test_smoke_benchmark_writes_results_with_every_figure(tmp_path):
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "run.py"), "--smoke", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=TIMEOUT, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads((tmp_path / "results.smoke.json").read_text())
    assert data["smoke"] is True and data["quick"] is True and data["machine"]["torch"].startswith("2.13.0")
    names = [r["name"] for r in data["results"]]
    for expected in ("LoggingTensor 1-element add",
                     "pointer op round trip (1 element, VirtualWorker, through the worker service)",
                     "send + get of 1000x1000 (VirtualWorker)",
                     "training step: op-by-op pointers vs one plan message (VirtualWorker)",
                     "websocket pointer op round trip (1-element add)",
                     "shared 100x100 matmul in process (VirtualWorkers) vs a plain float32 matmul",
                     "RayWorker pointer op (1-element add) vs a bare actor call doing the same op"):
        assert expected in names
    # every module's figures are there: secure computation over worker processes, and the event path
    assert any(n.startswith("a ping round trip to a party") for n in names)
    assert any(n.startswith("one object's change, event-driven") for n in names)
    for r in data["results"]:
        assert "error" not in r, r
        assert isinstance(r["value"], (int, float)) and r["value"] == r["value"]  # a number, not NaN
    md = (tmp_path / "results.smoke.md").read_text()
    assert md.startswith("# Benchmark results (smoke mode") and "| figure |" in md
    assert f"{os.cpu_count()} cores" in md and data["machine"]["cores"] == os.cpu_count()
