"""Workers own objects; pointers stand for them. Transports share one sans-I/O core."""
from .base import BaseWorker
from .core import WorkerCore
from .virtual import LocalWorker, VirtualWorker

__all__ = ["BaseWorker", "LocalWorker", "VirtualWorker", "WorkerCore"]
