"""Starting or joining Ray: ``sy.ray.init()``.

Ray is an optional dependency (``pip install "syft-lab[ray]"``): it is imported here, lazily,
the first time a Ray function is called, so ``import syft_lab`` never needs it.
"""
from __future__ import annotations

import importlib
import logging
import os
import sys
import stat
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from .. import progress as progress_bars
from ..errors import SyftError
from ..workers.heap import worker_environment
from ..workers.registry import all_workers

START_ATTEMPTS = 4  # a local Ray's start, tried again when it timed out (a loaded machine)
LOCAL_OBJECT_STORE = 2 * 2**30  # a local Ray's shared-memory object store (Ray's default: 30% of RAM)
# How long a local Ray's raylet waits for its dashboard agent (a Python process) to register:
# Ray's default gave up on a loaded laptop (the raylet exits, ray.init fails); a local Ray's
# processes get this in their environment unless the user set it.
AGENT_REGISTER_TIMEOUT_MS = 300_000
TICK = 0.5  # seconds between two redraws of a start-up bar (its elapsed time)


def require_ray():
    """The ``ray`` module, or a SyftError that says how to install it."""
    try:
        return importlib.import_module("ray")
    except ImportError:
        raise SyftError('Ray workers need Ray: pip install "syft-lab[ray]" (it pins the Ray version '
                        'syft_lab is tested with)') from None


@dataclass
class RayRuntime:
    """What ``sy.ray.init()`` started or joined."""

    address: str  # the cluster's address ("127.0.0.1:port" for a local Ray)
    local: bool  # started by this process (and stopped by sy.ray.shutdown())
    nodes: list = field(default_factory=list)  # [{"node": ip, "host": name, "cpus": n}, ...]

    def __repr__(self):
        where = "local Ray" if self.local else "Ray cluster"
        cpus = sum(n["cpus"] for n in self.nodes)
        return f"<{where} at {self.address}: {len(self.nodes)} node(s), {cpus:g} CPU(s)>"


_runtime: RayRuntime | None = None


def ray_token_files() -> list[Path]:
    """The files Ray reads its cluster token from: ~/.ray/auth_token (where a new local Ray
    writes one) and ``RAY_AUTH_TOKEN_PATH`` when set."""
    paths = [Path.home() / ".ray" / "auth_token"]
    custom = os.environ.get("RAY_AUTH_TOKEN_PATH")
    if custom:
        paths.append(Path(custom))
    return paths


def protect_ray_token() -> None:
    """Ray's token lets its holder join the cluster as a driver and run code in every actor (a
    RayWorker's store and secrets included): keep it this user's own. The folder of the token
    Ray writes is made 0700 before Ray starts (Ray writes the file with the process's umask,
    usually 0644), and every token file of ours is made 0600 after."""
    default = ray_token_files()[0]
    try:
        default.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        if stat.S_IMODE(default.parent.stat().st_mode) & 0o077:
            os.chmod(default.parent, 0o700)  # ~/.ray holds Ray's own files only
    except OSError:  # no writable home: Ray says so itself if it needs to write a token there
        pass
    for path in ray_token_files():
        try:
            st = path.stat()
        except FileNotFoundError:
            continue
        if st.st_uid == os.getuid() and stat.S_IMODE(st.st_mode) & 0o077:
            os.chmod(path, 0o600)


def _nodes(ray) -> list:
    return [{"node": n.get("NodeManagerAddress"), "host": n.get("NodeManagerHostname"),
             "cpus": n.get("Resources", {}).get("CPU", 0)} for n in ray.nodes() if n.get("Alive")]


class StartProgress:
    """What is starting, and for how long, while a person watches (progress.py's rule): one
    bar whose text says the phase ("starting a local Ray: its GCS, raylet and object store"),
    redrawn every TICK seconds so the elapsed time moves while Ray's call blocks."""

    def __init__(self, desc: str, total=None, *, show: bool | None = None, unit: str = "step"):
        self.bar = progress_bars.bar(total, show=show, desc=desc, unit=unit, leave=True,
                                     bar_format="{desc} [{elapsed}]" if total is None else None)
        self.shown = not isinstance(self.bar, progress_bars._Quiet)
        self._stop = threading.Event()
        self._thread = None
        if self.shown:
            self._thread = threading.Thread(target=self._tick, name="syft-lab start progress", daemon=True)
            self._thread.start()

    def _tick(self):
        while not self._stop.wait(TICK):
            try:
                self.bar.refresh()
            except Exception:  # a bar that went away (its output closed): nothing to redraw
                return

    def say(self, desc: str) -> None:
        if self.shown:
            self.bar.set_description_str(desc, refresh=True)

    def update(self, n: int = 1) -> None:
        self.bar.update(n)

    def close(self, desc: str | None = None) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
        if desc is not None:
            self.say(desc)
        self.bar.close()


def ray_process_environment() -> dict:
    """What a local Ray's processes (its raylet, its agents, the actors it starts) get in their
    environment: the tunables that make a worker's heap hand out zeros (workers/heap.py), and
    a raylet that waits long enough for its dashboard agent on a loaded machine."""
    env = {"GLIBC_TUNABLES": worker_environment()["GLIBC_TUNABLES"]}
    mine = os.environ.get("RAY_agent_register_timeout_ms")
    if mine is None or not mine.isdigit() or int(mine) < AGENT_REGISTER_TIMEOUT_MS:
        env["RAY_agent_register_timeout_ms"] = str(AGENT_REGISTER_TIMEOUT_MS)
    return env


def init(address: str | None = None, *, num_cpus: int | None = None, object_store_memory: int | None = None,
         namespace: str | None = None, runtime_env: dict | None = None, quiet: bool = True,
         progress: bool | None = None, **ray_kwargs):
    """Start a local Ray, or join a cluster; returns a RayRuntime. Calling it again is a no-op.

    - ``sy.ray.init()``: a local Ray on this machine, bound to 127.0.0.1 only (whoever holds
      Ray's token, ``~/.ray/auth_token``, kept 0600 in a 0700 folder, can run code in it), no dashboard,
      ``num_cpus`` = the machine's cores (Ray workers ask for a fraction of one each), an object
      store of 2 GiB (``object_store_memory``).
    - ``sy.ray.init(address="ray://head:10001")``: Ray's client to a remote cluster;
      ``address="auto"`` or ``"head:6379"`` from a machine of the cluster. ``RAY_ADDRESS`` in the
      environment counts as ``address``. The cluster's nodes need syft_lab installed (the same
      version; ``runtime_env={"pip": [...]}`` can install it per job).
    - ``quiet``: Ray's own log lines (workers' output, start-up warnings) stay out of the notebook.
    - ``progress``: a line saying what is starting and for how long (a local Ray takes seconds
      to minutes on a loaded machine): None where a person watches (a notebook, a terminal),
      True always, False never.
    Other keyword arguments go to ``ray.init``.
    """
    global _runtime
    ray = require_ray()
    if ray.is_initialized():
        if _runtime is None:  # the user started Ray themselves: use it as it is
            _runtime = RayRuntime(_address(ray), local=False, nodes=_nodes(ray))
        # a re-run cell says so, where the first run's line said Ray came up
        StartProgress("", show=progress).close(_ready_text(_runtime).replace(" is up:", " is already up:"))
        return _runtime
    protect_ray_token()
    try:
        return _init(ray, address, num_cpus, object_store_memory, namespace, runtime_env, quiet, ray_kwargs,
                     progress)
    finally:
        protect_ray_token()  # the token a new local Ray wrote: 0600


def _init(ray, address, num_cpus, object_store_memory, namespace, runtime_env, quiet, ray_kwargs, progress=None):
    global _runtime
    address = address or os.environ.get("RAY_ADDRESS") or None
    kwargs = dict(namespace=namespace, runtime_env=runtime_env, **ray_kwargs)
    if quiet:
        kwargs.setdefault("log_to_driver", False)
        kwargs.setdefault("logging_level", logging.ERROR)
    t0 = time.monotonic()
    if address:
        bar = StartProgress(f"joining the Ray cluster at {address}", show=progress)
        try:
            ray.init(address=address, **kwargs)
        finally:
            _runtime = RayRuntime(_address(ray), local=False, nodes=_nodes(ray)) if ray.is_initialized() else None
            bar.close(_ready_text(_runtime, t0) if _runtime else None)
        return _runtime
    kwargs.setdefault("include_dashboard", False)
    kwargs.setdefault("_node_ip_address", "127.0.0.1")
    # Ray turns "127.0.0.1" into the machine's routable address unless it thinks clusters are
    # off (as on macOS); for a local Ray, every process of it listens on loopback only.
    constants = importlib.import_module("ray._private.ray_constants")
    before = getattr(constants, "ENABLE_RAY_CLUSTER", None)
    if kwargs["_node_ip_address"] == "127.0.0.1" and before is not None:
        constants.ENABLE_RAY_CLUSTER = False
    # the local Ray's processes (its raylet, and the actors it starts) inherit this process's
    # environment, set for the start and restored after (ray_process_environment)
    saved = {k: os.environ.get(k) for k in ray_process_environment()}
    os.environ.update(ray_process_environment())
    cpus = num_cpus if num_cpus is not None else (os.cpu_count() or 1)
    what = f"starting a local Ray ({cpus} CPU{'s' if cpus != 1 else ''}): its GCS, raylet and object store"
    bar = StartProgress(what, show=progress)
    try:
        for attempt in range(1, START_ATTEMPTS + 1):
            try:
                ray.init(address="local", num_cpus=cpus,
                         object_store_memory=object_store_memory or LOCAL_OBJECT_STORE, **kwargs)
                break
            except Exception as e:
                # Ray waits a fixed 30 s for its raylet, and its raylet a fixed 15 s for its metrics
                # agent (a Python process): on a loaded machine either can pass. Again, a few times
                if attempt == START_ATTEMPTS or "timed out during startup" not in str(e):
                    raise
                ray.shutdown()
                bar.say(f"{what}: attempt {attempt + 1} of {START_ATTEMPTS} (the last one timed out: a loaded machine)")
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        if before is not None:
            constants.ENABLE_RAY_CLUSTER = before
        _runtime = RayRuntime(_address(ray), local=True, nodes=_nodes(ray)) if ray.is_initialized() else None
        bar.close(_ready_text(_runtime, t0) if _runtime else None)
    return _runtime


def _ready_text(runtime: "RayRuntime", t0: float | None = None) -> str:
    cpus = sum(n["cpus"] for n in runtime.nodes)
    where = "a local Ray" if runtime.local else "the Ray cluster"
    took = "" if t0 is None else f", in {time.monotonic() - t0:.1f} s"
    return f"{where} is up: {len(runtime.nodes)} node{'s' if len(runtime.nodes) != 1 else ''}, {cpus:g} CPUs{took}"


def _address(ray) -> str:
    try:
        return ray.get_runtime_context().gcs_address
    except Exception:
        return "?"


def is_initialized() -> bool:
    """Whether this process is connected to Ray (never imports Ray: not imported, not running)."""
    ray = sys.modules.get("ray")
    return ray is not None and ray.is_initialized()


def ensure_initialized():
    """Ray for a RayWorker: the running one, else a local one (``init()``)."""
    ray = require_ray()
    if not ray.is_initialized():
        init()
    return ray


def shutdown() -> None:
    """Close every RayWorker of this process and disconnect from Ray (a local Ray stops)."""
    global _runtime
    for w in all_workers():
        if w.kind == "ray":
            w.close()
    if is_initialized():
        sys.modules["ray"].shutdown()
    _runtime = None
