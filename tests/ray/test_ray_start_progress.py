"""Issue 39, item 6: the first minute with Ray. ``sy.ray.init()`` showed ``[*]`` for 108 s and
nothing else, and its raylet gave up on a loaded laptop when its dashboard agent had not
registered within Ray's default wait; a single ``sy.RayWorker("bob")`` started without a word while
``sy.ray.workers(n)`` showed a bar. Run in a process of its own: a local Ray of its own,
started and stopped there (the session's Ray of the other tests is left alone)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.ray, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = """
import os, ray, syft_lab as sy
sy.ray.init(num_cpus=1, progress=True)
@ray.remote(num_cpus=0)
def raylet_env():  # a Ray worker process inherits its raylet's environment
    return os.environ.get("RAY_agent_register_timeout_ms")
print("RAY PROCESSES", ray.get(raylet_env.remote()))
print("NOTEBOOK", os.environ.get("RAY_agent_register_timeout_ms"))
ws = sy.ray.workers(2, prefix="h4p", progress=True)
print("UP", [w.state for w in ws])
one = sy.RayWorker("h4one", progress=True)  # a single worker says what is starting too
print("ONE", one.state)
sy.ray.shutdown()
"""


def test_ray_says_what_is_starting_and_its_raylet_waits_for_its_agent(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_agent_register_timeout_ms", "RAY_ADDRESS")}
    env["PYTHONPATH"] = str(ROOT)
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=900)
    out, err = done.stdout, done.stderr
    assert done.returncode == 0, err[-3000:]
    # what a person sees while it starts, then what came up and how long it took
    assert "starting a local Ray (1 CPU): its GCS, raylet and object store" in err, err[-2000:]
    assert "a local Ray is up: 1 node, 1 CPUs, in " in err, err[-2000:]
    assert "starting 2 Ray workers (each process imports torch)" in err and "2/2" in err, err[-2000:]
    assert "2 Ray workers up in " in err, err[-2000:]
    assert "UP ['connected', 'connected']" in out, out
    assert "starting 1 Ray worker (each process imports torch)" in err and "1 Ray worker up in " in err, err[-2000:]
    assert "ONE connected" in out, out
    # Ray's processes wait 300 s for the dashboard agent; the notebook's own environment is as it was
    assert "RAY PROCESSES 300000" in out and "NOTEBOOK None" in out, out
