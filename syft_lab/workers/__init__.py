"""Workers own objects; pointers stand for them. One client protocol, one service, any transport.

``gather`` / ``submit``: several requests in flight at once (ops on the shares of a secret held
by several workers run at the same time; see protocol.py)."""
from .base import BaseWorker
from .core import WorkerCore
from .protocol import Pending, Transport, WorkerClient, gather, submit
from .virtual import LocalWorker, VirtualWorker

__all__ = ["BaseWorker", "LocalWorker", "Pending", "Transport", "VirtualWorker", "WorkerClient", "WorkerCore",
           "gather", "submit"]
