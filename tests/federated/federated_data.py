"""Data helpers of the federated tests, imported by name (``from federated_data import numbered``):
a module of its own, since ``from conftest import`` finds whichever conftest was imported first."""
import pytest
import torch

import syft_lab as sy


def numbered(n: int, features: int = 2):
    """Sample i has data [i, i, ...] and target i: a batch tells which samples it holds."""
    ids = torch.arange(n)
    return ids.float().unsqueeze(1).repeat(1, features), ids


def peek(ptr) -> torch.Tensor:
    """A copy of a remote tensor's value; the object stays where it is."""
    return ptr.clone().get()


def unload(fds) -> None:
    """``fds.unload()`` at a fixture's end: a part on a worker the test closed stays there (a
    closed worker takes no request), and the error names it; every other part goes."""
    closed = [w for w in fds.workers if fds[w].location.state == "closed"]
    if not closed:
        fds.unload()
        return
    with pytest.raises(sy.SyftError, match="unloaded from its other workers") as e:
        fds.unload()
    assert all(f"the part on {w!r} stays (worker {w!r} was closed" in str(e.value) for w in closed)
