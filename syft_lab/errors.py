"""The errors syft_lab raises. Every one names what was expected or where things are.

``SyftError`` is their common base and a ``RuntimeError``, as most of torch's own errors are, so
``except RuntimeError`` catches "plan is not built" or "not supported" as it would in PyTorch.
Each subclass is also the builtin a PyTorch user catches for its situation: bad arguments are a
``TypeError``/``ValueError``, no such object or worker a ``KeyError`` (a ``LookupError``), an
unreachable worker a ``ConnectionError``, what syft_lab leaves out a ``NotImplementedError``.
"""


class SyftError(RuntimeError):
    """A misuse of syft_lab: bad input, a value that must not leave its worker, mixed locations."""


class SyftTypeError(SyftError, TypeError):
    """An argument of the wrong type (a string where a worker goes, a list where a tensor goes)."""


class SyftValueError(SyftError, ValueError):
    """An argument of the right type with a value that cannot work (a negative batch size)."""


class NotFoundError(SyftError, KeyError):
    """No such thing under that name or id (a worker, a dataset, a worker's part of a dataset)."""

    __str__ = Exception.__str__  # KeyError would quote the message


class ObjectNotFoundError(NotFoundError):
    """An object id that a worker does not hold (deleted, fetched, or moved away)."""

    def __init__(self, worker_id: str, obj_id: int):
        self.worker_id = worker_id
        self.obj_id = obj_id
        super().__init__(f"worker {worker_id!r} holds no object with id {obj_id} "
                         f"(it was fetched with .get(), moved, or deleted)")

    __str__ = Exception.__str__  # KeyError would quote the message


class UnknownWorkerError(NotFoundError):
    """A worker id that no worker of this process has (the message names the known ones)."""


class NotSupportedError(SyftError, NotImplementedError):
    """Something PySyft 0.2 had that syft_lab leaves out by design; the message names what to use."""


class RemoteError(SyftError):
    """An exception raised on a worker while it ran a command.

    Carries the remote exception's type name and message, never a remote traceback."""

    def __init__(self, worker_id: str, remote_type: str, message: str):
        self.worker_id = worker_id
        self.remote_type = remote_type
        self.remote_message = message
        super().__init__(f"on worker {worker_id!r}: {remote_type}: {message}")


class WorkerUnavailableError(SyftError, ConnectionError):
    """A worker that cannot be reached (stopped, restarted, network cut)."""


class QuotaExceededError(SyftError):
    """An op refused because its outputs would exceed the worker's memory or object limit (nothing ran)."""


class OpCancelledError(SyftError, TimeoutError):
    """An op that ran past its worker's time budget and was stopped: nothing was stored and no
    object changed (``--max-op-seconds``, docs/workers.md)."""


def left_out(pysyft_name: str, instead: str):
    """A stand-in for a PySyft 0.2 name that syft_lab leaves out: calling it raises a one-line
    NotSupportedError naming what to use instead (``docs/pysyft.md`` lists them and why)."""

    def stand_in(*args, **kwargs):
        raise NotSupportedError(f"{pysyft_name} is left out of syft_lab by design: {instead} "
                                f"(docs/pysyft.md)")

    stand_in.__name__ = stand_in.__qualname__ = pysyft_name.rsplit(".", 1)[-1]
    stand_in.__doc__ = f"Left out by design (docs/pysyft.md): {instead}"
    return stand_in
