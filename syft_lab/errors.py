"""The errors syft_lab raises. Every one names what was expected or where things are."""


class SyftError(Exception):
    """A misuse of syft_lab: bad input, a value that must not leave its worker, mixed locations."""


class ObjectNotFoundError(SyftError, KeyError):
    """An object id that a worker does not hold (deleted, fetched, or moved away)."""

    def __init__(self, worker_id: str, obj_id: int):
        self.worker_id = worker_id
        self.obj_id = obj_id
        super().__init__(f"worker {worker_id!r} holds no object with id {obj_id} "
                         f"(it was fetched with .get(), moved, or deleted)")

    __str__ = Exception.__str__  # KeyError would quote the message


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
