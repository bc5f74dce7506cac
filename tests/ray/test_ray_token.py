"""Ray's cluster token (~/.ray/auth_token) stays this user's own: 0600 in a 0700 folder.

Whoever reads it joins the local Ray as a driver and runs code in every actor (a RayWorker's
store and secrets included), so a token another local user can read hands them the workers."""
import os
import stat
from pathlib import Path

import pytest

import syft_lab.ray as sy_ray
from syft_lab.ray.runtime import protect_ray_token

pytestmark = pytest.mark.network  # a local Ray: processes listening on loopback


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_token_written_world_readable_is_made_private(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    custom = tmp_path / "elsewhere" / "token"
    custom.parent.mkdir()
    custom.write_text("t2")
    os.chmod(custom, 0o644)
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(custom))
    folder = tmp_path / ".ray"
    folder.mkdir(mode=0o755)
    os.chmod(folder, 0o755)
    (folder / "auth_token").write_text("t1")
    os.chmod(folder / "auth_token", 0o644)  # as Ray writes it under the usual umask 022
    protect_ray_token()
    assert _mode(folder) == 0o700 and _mode(folder / "auth_token") == 0o600 and _mode(custom) == 0o600
    assert (folder / "auth_token").read_text() == "t1"  # the token itself is Ray's, untouched


def test_before_ray_writes_a_token_its_folder_is_private_already(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("RAY_AUTH_TOKEN_PATH", raising=False)
    protect_ray_token()  # what sy.ray.init() does before ray.init
    assert _mode(tmp_path / ".ray") == 0o700 and not (tmp_path / ".ray" / "auth_token").exists()


def test_the_token_of_the_running_local_ray_is_private(ray_runtime):
    token = Path.home() / ".ray" / "auth_token"
    assert ray_runtime.local and token.exists()
    assert _mode(token) == 0o600 and _mode(token.parent) == 0o700
    assert sy_ray.init() is ray_runtime  # calling init again changes nothing
