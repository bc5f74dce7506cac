"""syft_lab: inspect tensor chains, workers, pointers and plans from Jupyter.

    import syft_lab as sy
    sy.hook()                        # adds .send/.send_/.tag/.describe; patches no torch op
    bob = sy.VirtualWorker("bob")
    p = torch.tensor([1., 2.]).send(bob)
    sy.chain(p), sy.world()          # the inspection model every view renders
"""
from .errors import ObjectNotFoundError, RemoteError, SyftError, WorkerUnavailableError
from .hook import hook, is_hooked, unhook
from .plans import Plan, PlanPointer, batch, plan
from .inspect.model import Chain, World, chain, world
from .tensors import LoggingTensor
from .tensors.pointer import PointerTensor
from .workers import BaseWorker, LocalWorker, VirtualWorker
from .workers.registry import all_workers, get_worker

local_worker = LocalWorker("me")

__all__ = ["Plan", "PlanPointer", "batch", "plan", "BaseWorker", "Chain", "LocalWorker", "LoggingTensor", "ObjectNotFoundError",
           "PointerTensor", "RemoteError", "SyftError", "VirtualWorker", "World",
           "WorkerUnavailableError", "all_workers", "chain", "get_worker", "hook", "is_hooked",
           "local_worker", "unhook", "world"]
