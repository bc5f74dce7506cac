"""The %syft line magic: workers, send/get/move and the views, from a cell.

    %load_ext syft_lab
    %syft help

Send, get and move go through the same named actions as the widget's buttons
(syft_lab.actions), so they are validated the same way. A mistake prints one line, changes
nothing, and raises no traceback wall.
"""
from __future__ import annotations

import shlex
import sys

import torch

from . import actions
from .actions import ActionError, check_name, object_key
from .commands import LOCAL_OWNER
from .errors import SyftError
from .hook import hook
from .ids import tensor_id
from .inspection.model import world, world_dict
from .inspection.text import chain_text
from .widget import inspect, widget_for
from .workers.local_process import start_worker
from .workers.registry import _workers, get_worker
from .workers.virtual import VirtualWorker

HELP = """\
%syft workers                       table of workers and their objects
%syft worker NAME                   create a VirtualWorker NAME (bound as a variable too)
%syft worker NAME --port PORT       start a local websocket worker process (port 0: any free one) and connect
%syft send VAR WORKER [as NAME]     send VAR to WORKER; the pointer is bound to NAME (default VAR_ptr, VAR_ptr_2 if taken)
%syft get VAR [as NAME]             fetch what the pointer VAR points to (default name: VAR without _ptr)
%syft move VAR WORKER [as NAME]     move the object VAR points to onto WORKER
%syft show VAR                      the chain view of VAR (the plan view for a plan)
%syft inspect                       the live world view
%syft help                          this text"""


class MagicUsageError(SyftError):
    """A %syft line that does not parse, or names something that does not exist."""


def _split_as(words: list[str], arity: int, usage: str):
    if len(words) == arity:
        return words, None
    if len(words) == arity + 2 and words[arity] == "as":
        return words[:arity], words[arity + 1]
    raise MagicUsageError(f"usage: %syft {usage}")


def _lookup(namespace: dict, name: str):
    if not name.isidentifier():
        raise MagicUsageError(f"{name!r} is not a variable name")
    if name not in namespace:
        raise MagicUsageError(f"no variable named {name!r} in this notebook")
    return namespace[name]


def _known_from_world(namespace: dict):
    """The same model index the views give the actions: (lane id, object id) -> entry."""
    index = {}
    for lane in world_dict(namespace)["workers"]:
        for o in lane["objects"]:
            index[(lane["id"], o["id"])] = o
    return lambda worker, obj_id: index.get((worker, obj_id))


def _target(value) -> dict:
    key = object_key(value)
    if key is None and isinstance(value, torch.Tensor):
        key = tensor_id(value)
    if key is None:
        raise MagicUsageError(f"a {type(value).__name__} is not something %syft can send, get or move")
    return {"worker": LOCAL_OWNER, "id": key}


def _act(namespace: dict, action: str, var: str, dest: str | None, name: str | None) -> str:
    value = _lookup(namespace, var)
    if dest is not None:
        get_worker(dest)  # SyftError naming the known workers
    msg = {"type": "action", "action": action, "target": _target(value)}
    if dest is not None:
        msg["worker"] = dest
    if name is not None:
        msg["name"] = name
    reply = actions.perform(msg, known=_known_from_world(namespace), namespace=namespace)
    if not reply.get("ok"):
        raise MagicUsageError(reply["error"])
    # the code line ends in a comment already when the default name was taken
    sep = "; " if reply.get("note") else "  # "
    return f"{reply['code']}{sep}{reply['name']} is {_describe(namespace[reply['name']])}"


def _check_worker_name(name: str) -> str:
    """A worker's name is bound as a variable too: the same rules as an action's names."""
    try:
        return check_name(name)
    except ActionError:
        raise MagicUsageError(f"{name!r:.40} is not a name for a worker (it is bound as a variable too): use "
                              f"letters, digits and _, no leading _, no keyword or builtin, such as bob") from None


def _describe(obj) -> str:
    try:
        return chain_text(obj)
    except Exception:
        return type(obj).__name__


def _start_worker(namespace: dict, name: str, port: int):
    worker = start_worker(name, port)
    namespace[name] = worker
    return f"{name} = {worker!r}"


def run_line(line: str, namespace: dict):
    """Run one %syft line; returns what to display (text or a widget). Raises MagicUsageError."""
    try:
        words = shlex.split(line)
    except ValueError as e:
        raise MagicUsageError(f"cannot parse the line: {e}") from None
    if not words or words[0] in ("help", "-h", "--help"):
        return HELP
    cmd, args = words[0], words[1:]
    if cmd == "workers":
        if args:
            raise MagicUsageError("usage: %syft workers")
        return repr(world(namespace))
    if cmd == "worker":
        if len(args) == 1:
            name = _check_worker_name(args[0])
            existing = _workers.get(name)
            if existing is not None:
                namespace.setdefault(name, existing)
                return f"{name} exists already: {existing!r}"
            namespace[name] = VirtualWorker(name)
            return f"{name} = sy.VirtualWorker({name!r})"
        if len(args) == 3 and args[1] == "--port":
            if not args[2].isdigit() or not 0 <= int(args[2]) < 65536:
                raise MagicUsageError(f"--port takes a port number, got {args[2]!r}")
            return _start_worker(namespace, _check_worker_name(args[0]), int(args[2]))
        raise MagicUsageError("usage: %syft worker NAME [--port PORT]")
    if cmd == "send":
        (var, dest), name = _split_as(args, 2, "send VAR WORKER [as NAME]")
        return _act(namespace, "send", var, dest, name)
    if cmd == "get":
        (var,), name = _split_as(args, 1, "get VAR [as NAME]")
        return _act(namespace, "get", var, None, name)
    if cmd == "move":
        (var, dest), name = _split_as(args, 2, "move VAR WORKER [as NAME]")
        return _act(namespace, "move", var, dest, name)
    if cmd == "show":
        if len(args) != 1:
            raise MagicUsageError("usage: %syft show VAR")
        value = _lookup(namespace, args[0])
        try:
            return widget_for(value)
        except TypeError as e:  # not something a view shows (a module, a number, ...)
            raise MagicUsageError(f"{args[0]} is a {type(value).__name__}: {e}") from None
    if cmd == "inspect":
        if args:
            raise MagicUsageError("usage: %syft inspect")
        return inspect()
    raise MagicUsageError(f"unknown command {cmd!r}; %syft help lists the commands")


def syft_magic(line: str):
    from IPython import get_ipython
    from IPython.display import display

    ip = get_ipython()
    try:
        out = run_line(line, ip.user_ns)
    except SyftError as e:  # one clear line, no traceback wall
        print(f"syft: {_one_line(e)}", file=sys.stderr)
        return None
    except Exception as e:  # a bad argument that reached deeper code: still one line
        sys.last_type, sys.last_value, sys.last_traceback = type(e), e, e.__traceback__  # for %tb
        print(f"syft: {type(e).__name__}: {_one_line(e)} (%tb shows where)", file=sys.stderr)
        return None
    if isinstance(out, str):
        print(out)
    else:
        display(out)
    return None


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split())
    return text if len(text) <= 300 else text[:297] + "..."


def load_ipython_extension(ip) -> None:
    ip.register_magic_function(syft_magic, magic_kind="line", magic_name="syft")

    hook()
