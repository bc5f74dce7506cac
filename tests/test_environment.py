"""The venv holds the versions of constraints.txt (what scripts/setup installs on a fresh
machine), and constraints.txt pins every dependency syft_lab and its tests declare."""
import importlib.metadata as metadata
import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]


def pins() -> dict[str, str]:
    lines = (ROOT / "constraints.txt").read_text().splitlines()
    found = [re.fullmatch(r"([A-Za-z0-9_.-]+)==(\S+)", line) for line in lines if line and not line.startswith("#")]
    assert all(found), [line for line, m in zip(lines, found) if not m]
    return {canonicalize_name(m[1]): m[2] for m in found}


def test_every_declared_dependency_is_pinned():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = project["dependencies"] + [r for extra in project["optional-dependencies"].values() for r in extra]
    names = {canonicalize_name(Requirement(r).name) for r in declared}
    assert names - set(pins()) == set()


def test_the_venv_has_the_pinned_versions():
    # the first distribution of a name on sys.path is the one imports use; later ones can be
    # copies vendored by setuptools (setuptools/_vendor is put on sys.path once it is imported)
    installed = {}
    for d in metadata.distributions():
        installed.setdefault(canonicalize_name(d.metadata["Name"]), d.version)
    # a local label (torch's +cpu) names the build, not the version
    wrong = {name: (pin, installed.get(name)) for name, pin in pins().items()
             if name not in installed or Version(installed[name]).public != pin}
    assert wrong == {}, "run scripts/setup (or update constraints.txt): " + repr(wrong)
