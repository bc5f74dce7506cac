"""Workers on Ray: ``sy.ray.init()``, ``sy.RayWorker("bob")``, ``sy.ray.workers(32)``.

Ray is an optional dependency (``pip install "syft-lab[ray]"``); importing this package does
not import it. See docs/workers.md for when to use Ray workers and Ray's trust model.
"""
from .pool import workers
from .runtime import RayRuntime, init, is_initialized, shutdown
from .worker import RayWorker

__all__ = ["RayRuntime", "RayWorker", "init", "is_initialized", "shutdown", "workers"]
