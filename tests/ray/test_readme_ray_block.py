"""The README's Ray block runs twice in a row in one process, on the session's local Ray (the
README test, tests/notebooks/test_readme.py, runs every other block in a kernel; starting a
second Ray there would double the suite's Ray start-ups)."""
import re
from pathlib import Path

import ray
import torch

import syft_lab as sy

README = Path(__file__).resolve().parents[2] / "README.md"
BLOCK_RE = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def ray_block() -> str:
    blocks = [b for b in BLOCK_RE.findall(README.read_text()) if "sy.ray." in b]
    assert len(blocks) == 1, "one README block uses Ray"
    return blocks[0]


def test_the_readmes_ray_block_runs_twice_and_does_what_its_comments_say(ray_runtime):
    code = ray_block()
    namespace = {"sy": sy, "torch": torch}
    made = []
    try:
        for run in (1, 2):  # "Run All" twice: the names are bound again, the old workers let go
            exec(compile(code, f"README.md Ray block, run {run}", "exec"), namespace)
            bob, clients = namespace["bob"], namespace["clients"]
            made += [bob, *clients]
            assert [w.id for w in clients] == [f"client{i}" for i in range(16)]
            assert len({w.pid for w in clients}) == 2  # "in 2 actor processes"
            assert bob.state == "connected" and all(w.state == "connected" for w in clients)
            assert len(bob.objects) == 0  # p moved on (and (p * 2) was fetched): nothing stays on bob
            del namespace["p"]
    finally:
        for w in made:
            if w.state == "connected":
                w.close()
        for actor in {id(w.actor): w.actor for w in made}.values():
            ray.kill(actor)
