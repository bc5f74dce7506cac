"""The benchmark command runs (smoke mode: every benchmark with the fewest samples) and writes its
table: figures, targets, peers, machine.

In two parts, so the main run's two processes take them side by side: the Ray benchmark (with
the other tests that start a local Ray: tests/conftest.py) and every other module."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 900  # seconds for one part's smoke run (pytest-timeout's limit for this test too)
sys.path.insert(0, str(ROOT / "benchmarks"))
from run import MODULES  # noqa: E402  (benchmarks/ is not a package)

pytestmark = [pytest.mark.benchmark, pytest.mark.slow, pytest.mark.timeout(TIMEOUT + 60)]

# Part -> the figures each part must have written (a sample per module).
PARTS = {
    "bench_ray": ["RayWorker pointer op (1-element add) vs a bare actor call doing the same op"],
    "others": ["LoggingTensor 1-element add",
               "pointer op round trip (1 element, VirtualWorker, through the worker service)",
               "send + get of 1000x1000 (VirtualWorker)",
               "training step: op-by-op pointers vs one plan message (VirtualWorker)",
               "websocket pointer op round trip (1-element add)",
               "shared 100x100 matmul in process (VirtualWorkers) vs a plain float32 matmul",
               # smoke mode of bench_flower: VirtualWorkers only (no Ray, no flwr)
               "one FedAvg round of the digits MLP on 2 VirtualWorkers (Flower's setup)"],
}


@pytest.mark.parametrize("part", sorted(PARTS))
def test_smoke_benchmark_writes_results_with_every_figure(part, tmp_path):
    modules = [part] if part in MODULES else [m for m in MODULES if m not in PARTS]
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "run.py"), "--smoke", "--out", str(tmp_path),
                           "--only", *modules], capture_output=True, text=True, timeout=TIMEOUT, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads((tmp_path / "results.smoke.json").read_text())
    assert data["smoke"] is True and data["quick"] is True and data["machine"]["torch"].startswith("2.13.0")
    assert sorted(data["seconds"]) == sorted(modules)  # every module of the part ran
    names = [r["name"] for r in data["results"]]
    for expected in PARTS[part]:
        assert expected in names
    if part == "others":  # secure computation over worker processes, and the event path
        assert any(n.startswith("a ping round trip to a party") for n in names)
        assert any(n.startswith("one object's change, event-driven") for n in names)
    assert {r["module"] for r in data["results"]} == set(modules)  # each module gave figures
    for r in data["results"]:
        assert "error" not in r, r
        assert isinstance(r["value"], (int, float)) and r["value"] == r["value"]  # a number, not NaN
    md = (tmp_path / "results.smoke.md").read_text()
    assert md.startswith("# Benchmark results (smoke mode") and "| figure |" in md
    assert f"{os.cpu_count()} cores" in md and data["machine"]["cores"] == os.cpu_count()
