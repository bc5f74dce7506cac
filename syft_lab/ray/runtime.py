"""Starting or joining Ray: ``sy.ray.init()``.

Ray is an optional dependency (``pip install "syft-lab[ray]"``): it is imported here, lazily,
the first time a Ray function is called, so ``import syft_lab`` never needs it.
"""
from __future__ import annotations

import importlib
import logging
import os
import sys
from dataclasses import dataclass, field

from ..errors import SyftError
from ..workers.registry import all_workers

LOCAL_OBJECT_STORE = 2 * 2**30  # a local Ray's shared-memory object store (Ray's default: 30% of RAM)


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


def _nodes(ray) -> list:
    return [{"node": n.get("NodeManagerAddress"), "host": n.get("NodeManagerHostname"),
             "cpus": n.get("Resources", {}).get("CPU", 0)} for n in ray.nodes() if n.get("Alive")]


def init(address: str | None = None, *, num_cpus: int | None = None, object_store_memory: int | None = None,
         namespace: str | None = None, runtime_env: dict | None = None, quiet: bool = True, **ray_kwargs):
    """Start a local Ray, or join a cluster; returns a RayRuntime. Calling it again is a no-op.

    - ``sy.ray.init()``: a local Ray on this machine, bound to 127.0.0.1 only (Ray has no
      authentication: whoever reaches its ports can run code in it), no dashboard,
      ``num_cpus`` = the machine's cores (Ray workers ask for a fraction of one each), an object
      store of 2 GiB (``object_store_memory``).
    - ``sy.ray.init(address="ray://head:10001")``: Ray's client to a remote cluster;
      ``address="auto"`` or ``"head:6379"`` from a machine of the cluster. ``RAY_ADDRESS`` in the
      environment counts as ``address``. The cluster's nodes need syft_lab installed (the same
      version; ``runtime_env={"pip": [...]}`` can install it per job).
    - ``quiet``: Ray's own log lines (workers' output, start-up warnings) stay out of the notebook.
    Other keyword arguments go to ``ray.init``.
    """
    global _runtime
    ray = require_ray()
    if ray.is_initialized():
        if _runtime is None:  # the user started Ray themselves: use it as it is
            _runtime = RayRuntime(_address(ray), local=False, nodes=_nodes(ray))
        return _runtime
    address = address or os.environ.get("RAY_ADDRESS") or None
    kwargs = dict(namespace=namespace, runtime_env=runtime_env, **ray_kwargs)
    if quiet:
        kwargs.setdefault("log_to_driver", False)
        kwargs.setdefault("logging_level", logging.ERROR)
    if address:
        ray.init(address=address, **kwargs)
        _runtime = RayRuntime(_address(ray), local=False, nodes=_nodes(ray))
        return _runtime
    kwargs.setdefault("include_dashboard", False)
    kwargs.setdefault("_node_ip_address", "127.0.0.1")
    # Ray turns "127.0.0.1" into the machine's routable address unless it thinks clusters are
    # off (as on macOS); for a local Ray, every process of it listens on loopback only.
    constants = importlib.import_module("ray._private.ray_constants")
    before = getattr(constants, "ENABLE_RAY_CLUSTER", None)
    if kwargs["_node_ip_address"] == "127.0.0.1" and before is not None:
        constants.ENABLE_RAY_CLUSTER = False
    try:
        ray.init(address="local", num_cpus=num_cpus if num_cpus is not None else (os.cpu_count() or 1),
                 object_store_memory=object_store_memory or LOCAL_OBJECT_STORE, **kwargs)
    finally:
        if before is not None:
            constants.ENABLE_RAY_CLUSTER = before
    _runtime = RayRuntime(_address(ray), local=True, nodes=_nodes(ray))
    return _runtime


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
