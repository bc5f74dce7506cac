"""syft_lab: inspect tensor chains, workers, pointers and plans from Jupyter.

    import syft_lab as sy
    sy.hook()                        # adds .send/.send_/.tag/.describe; patches no torch op
    bob = sy.VirtualWorker("bob")
    p = torch.tensor([1., 2.]).send(bob)
    sy.chain(p), sy.world()          # the inspection model every view renders
"""
from .errors import (NotFoundError, NotSupportedError, ObjectNotFoundError, OpCancelledError, QuotaExceededError, RemoteError, SyftError, SyftTypeError,
                     SyftValueError, UnknownWorkerError, WorkerUnavailableError, left_out)
from .hook import hook, is_hooked, unhook
from .plans import Plan, PlanPointer, batch, func2plan, plan
from .inspection.model import Chain, World, chain, world
from .inspection.explain import Explanation, explain
from .tensors import LoggingTensor
from .tensors.pointer import PointerTensor
from .workers import BaseWorker, LocalWorker, VirtualWorker
from .workers.registry import all_workers, get_worker
from .workers.websocket import WebSocketWorker

# sy.start_worker(id): a websocket worker process on this machine, connected (workers/local_process.py);
# %load_ext syft_lab: the %syft magic and sy.hook() (magics.py).
from .workers.local_process import start_worker  # noqa: E402
from .commands import LOCAL_OWNER  # noqa: E402
from .magics import load_ipython_extension  # noqa: E402

local_worker = LocalWorker(LOCAL_OWNER)

__all__ = ["Explanation", "explain", "Plan", "PlanPointer", "batch", "func2plan", "plan", "BaseWorker", "Chain", "LocalWorker", "LoggingTensor", "ObjectNotFoundError",
           "NotFoundError", "NotSupportedError", "OpCancelledError", "QuotaExceededError", "SyftTypeError", "SyftValueError", "UnknownWorkerError",
           "PointerTensor", "RemoteError", "SyftError", "VirtualWorker", "World",
           "WebSocketWorker", "WorkerUnavailableError", "all_workers", "start_worker", "load_ipython_extension", "chain", "get_worker", "hook", "is_hooked",
           "local_worker", "unhook", "world"]

# --- views (widget) ---
# sy.show(obj), sy.inspect() and the rich display of syft objects in a kernel (syft_lab/widget).
# (The inspection model lives in syft_lab.inspection, so sy.inspect names only the function.)
from .widget import inspect, show  # noqa: E402
__all__ += ["inspect", "show"]

# --- federated learning (syft_lab/federated) ---
# Datasets held by workers, a loader that batches them where they are, averaging and rounds.
from . import federated  # noqa: E402
from .federated import BaseDataset, FederatedDataLoader, FederatedDataset, federated_avg  # noqa: E402
from .federated.optimizers import Optims  # noqa: E402
__all__ += ["BaseDataset", "FederatedDataLoader", "FederatedDataset", "Optims", "federated", "federated_avg"]

# --- secure computation (syft_lab/smpc) ---
# Fixed precision and additive secret sharing over Z_2^64 with a crypto provider:
# x.fix_precision().share(alice, bob, crypto_provider=carol); sy.hook() adds the methods.
from . import smpc  # noqa: E402
from .smpc import AdditiveSharingTensor, FixedPrecisionTensor  # noqa: E402
__all__ += ["AdditiveSharingTensor", "FixedPrecisionTensor", "smpc"]

# --- workers on Ray (syft_lab/ray) ---
# sy.ray.init() (a local Ray, or address= a cluster), sy.RayWorker("bob"), sy.ray.workers(32).
# Ray itself is imported only when one of them is called (pip install "syft-lab[ray]").
from . import ray  # noqa: E402
from .ray import RayWorker  # noqa: E402
__all__ += ["RayWorker", "ray"]

# --- PySyft 0.2 names left out by design (docs/pysyft.md says why and what to use) ---
# Each is a stand-in whose call raises a one-line NotSupportedError naming our spelling.
LEFT_OUT = {
    "TorchHook": "call sy.hook() (no hook object; a worker is sy.VirtualWorker('bob'))",
    "create_sandbox": "make the workers you need (bob = sy.VirtualWorker('bob')) and leave data on them with "
                      "bob.load(x.tag('#boston'))",
    "PublicGridNetwork": "search each worker: {w.id: w.search('#boston') for w in workers}",
    "PrivateGridNetwork": "search each worker: {w.id: w.search('#boston') for w in workers}",
    "Protocol": "send one sy.plan to each worker (plan.send(bob)) and run them in order",
    "AutogradTensor": "plain torch autograd: pointers and shared tensors sit below it (requires_grad=True, "
                      "loss.backward())",
}
for _name, _instead in LEFT_OUT.items():
    globals()[_name] = left_out(f"sy.{_name}", _instead)
__all__ += list(LEFT_OUT)
