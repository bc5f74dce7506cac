"""benchmarks/run.py --merge: the modules re-run replace their rows, the others' rows stay, and
each module's run (commit, date, load) is named under the table."""
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import run  # noqa: E402  (benchmarks/ is not a package)


def _row(name, module, value):
    return {"name": name, "module": module, "value": value, "unit": "us", "ratio": None, "target": None,
            "peer": None, "meets_target": None}


def test_merged_rows_replace_only_the_modules_run_and_keep_module_order():
    previous = {"source": {"commit": "a" * 40, "dirty": False, "changed": []},
                "machine": {"date": "2026-12-01T00:00:00+00:00", "load_average": [1.5, 1, 1]},
                "seconds": {"bench_runtime": 10, "bench_plans": 20, "bench_flower": 30},
                "results": [_row("op", "bench_runtime", 1), _row("plan old", "bench_plans", 2),
                            _row("plan old 2", "bench_plans", 3), _row("flower", "bench_flower", 4)]}
    ran = {"bench_plans": {"source": {"commit": "b" * 40, "dirty": False, "changed": []},
                           "date": "2026-12-03T00:00:00+00:00", "load_average": 0.2, "seconds": 21}}
    rows, runs = run._merged(previous, [_row("plan new", "bench_plans", 5)], ran)
    assert [r["name"] for r in rows] == ["op", "plan new", "flower"]
    assert list(runs) == ["bench_runtime", "bench_plans", "bench_flower"]
    assert runs["bench_runtime"]["source"]["commit"] == "a" * 40 and runs["bench_runtime"]["load_average"] == 1.5
    assert runs["bench_plans"] == ran["bench_plans"]


def test_merge_writes_each_modules_run_under_the_table(tmp_path):
    first = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "run.py"), "--out", str(tmp_path),
                            "--only", "no_such_module"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert first.returncode == 0, first.stderr
    data = json.loads((tmp_path / "results.json").read_text())
    data["results"] = [_row("kept figure", "bench_flower", 7.5)]
    data["runs"] = {"bench_flower": {"source": {"commit": "c" * 40, "dirty": False, "changed": []},
                                     "date": "2026-11-30T00:00:00+00:00", "load_average": 3.0, "seconds": 99}}
    (tmp_path / "results.json").write_text(json.dumps(data))
    again = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "run.py"), "--out", str(tmp_path),
                            "--only", "no_such_module", "--merge"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert again.returncode == 0, again.stderr
    md = (tmp_path / "results.md").read_text()
    assert "| kept figure | 7.5 us |" in md
    assert "Source: several runs, one per module" in md
    assert f"- bench_flower: commit {'c' * 40} (clean). run 2026-11-30T00:00:00+00:00, 99 s, load average at its end 3.0" in md
