"""The ``syft-lab`` command.

    syft-lab worker --id bob [--host 127.0.0.1] [--port 8777] [--token-file F]
                    [--certfile C --keyfile K] [--max-message-size N] [--max-connections N]
                    [--max-pending-handshakes N] [--handshake-timeout S] [--allow-origin URL ...]
                    [--session-grace S] [--max-memory N] [--max-op-seconds S] [--max-objects N] [--threads N]
                    [--layers MODULE ...]

The token comes from --token-file or the SYFT_LAB_TOKEN environment variable. Without one the
worker only listens on a loopback address. Once listening it prints one line:
``syft-lab worker bob listening on ws://127.0.0.1:8777``.
"""
from __future__ import annotations

import argparse
import asyncio
import importlib
import ssl
import sys

import torch

from .errors import SyftError
from .wire.format import DEFAULT_MAX_MESSAGE_SIZE
from .workers.base import check_worker_id
from .workers.heap import ensure_zeroing_heap
from .workers.limits import DEFAULT_MAX_OBJECTS, DEFAULT_MAX_OP_SECONDS, Limits, fmt_bytes
from .workers.server import (DEFAULT_HANDSHAKE_TIMEOUT, DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_PENDING_HANDSHAKES,
                             DEFAULT_SESSION_GRACE, WorkerServer, read_token)


def _size(text: str) -> int:
    """A byte count such as 1048576, 512MiB, 512M, 2GiB, 2G or 1GB (K, M, G, T: powers of 1024)."""
    units = {"kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40, "kb": 10**3, "mb": 10**6, "gb": 10**9,
             "tb": 10**12, "b": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}
    t = text.strip().lower()
    try:
        for u, mult in units.items():
            if t.endswith(u):
                n = int(float(t[: -len(u)]) * mult)
                break
        else:
            n = int(t)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (try 512M or 2G)") from None
    if n <= 0:
        raise argparse.ArgumentTypeError(f"a size is positive, got {text!r}")
    return n


def _seconds(text: str) -> float:
    try:
        s = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not s >= 0:
        raise argparse.ArgumentTypeError(f"a duration is zero or more seconds, got {text!r}")
    return s


def worker_parser(prog="syft-lab worker") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description="Run a syft_lab worker that clients reach with "
                                "sy.WebSocketWorker(url, id=..., token=...).")
    p.add_argument("--id", required=True, help="the worker's id, e.g. bob")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1; any other "
                   "address needs a token)")
    p.add_argument("--port", type=int, default=8777, help="port (0 picks a free one; default 8777)")
    p.add_argument("--token-file", help="file holding the token (default: $SYFT_LAB_TOKEN)")
    p.add_argument("--certfile", help="TLS certificate (PEM): serve wss://")
    p.add_argument("--keyfile", help="TLS private key (PEM)")
    p.add_argument("--max-message-size", type=_size, default=DEFAULT_MAX_MESSAGE_SIZE,
                   help="largest message (header + tensors) accepted, e.g. 512MiB (default 2GiB)")
    p.add_argument("--max-connections", type=int, default=DEFAULT_MAX_CONNECTIONS,
                   help=f"concurrent connections, unfinished handshakes included (default {DEFAULT_MAX_CONNECTIONS})")
    p.add_argument("--max-pending-handshakes", type=int, default=DEFAULT_MAX_PENDING_HANDSHAKES,
                   help=f"connections still in their opening handshake; a new one drops the oldest "
                        f"(default {DEFAULT_MAX_PENDING_HANDSHAKES})")
    p.add_argument("--handshake-timeout", type=_seconds, default=DEFAULT_HANDSHAKE_TIMEOUT,
                   help=f"seconds a connection may take to finish its opening handshake "
                        f"(default {DEFAULT_HANDSHAKE_TIMEOUT:g})")
    p.add_argument("--allow-origin", action="append", default=[], metavar="URL",
                   help="accept websockets opened by web pages from this origin, e.g. "
                        "https://lab.example.org (repeatable; default: refuse every browser Origin)")
    p.add_argument("--session-grace", type=_seconds, default=DEFAULT_SESSION_GRACE,
                   help=f"seconds a client whose connection dropped may take to come back before the "
                        f"objects it stored are released (default {DEFAULT_SESSION_GRACE:g})")
    p.add_argument("--max-memory", type=_size, default=None,
                   help="bytes the stored objects and the messages in flight may take, e.g. 4G (default: "
                        "8 GiB or half of the memory this process may use, whichever is less: physical "
                        "memory, its cgroup's limit, RLIMIT_AS)")
    p.add_argument("--max-op-seconds", type=_seconds, default=DEFAULT_MAX_OP_SECONDS,
                   help=f"seconds an expensive op may run before the worker stops it; nothing is lost "
                        f"(default {DEFAULT_MAX_OP_SECONDS:g}; docs/workers.md, Time budget)")
    p.add_argument("--max-objects", type=int, default=DEFAULT_MAX_OBJECTS,
                   help=f"objects the worker may hold (default {DEFAULT_MAX_OBJECTS})")
    p.add_argument("--threads", type=int, default=None,
                   help="torch intra-op threads (default: torch's choice). Use 1 when clients or other "
                        "workers share this machine's cores: oversubscribed threads make small ops 10-50x slower")
    p.add_argument("--layers", action="append", default=[], metavar="MODULE",
                   help="import this Python module before serving, so the chain layer types it registers "
                        "(@register_layer) can be received and stored (repeatable; the operator's code, "
                        "never anything a client sends)")
    return p


def run_worker(argv) -> int:
    args = worker_parser().parse_args(argv)
    try:
        check_worker_id(args.id)
        if args.threads is not None:
            if args.threads < 1:
                raise SyftError("--threads takes a positive number")
            torch.set_num_threads(args.threads)
        token = read_token(args.token_file)
        ssl_ctx = None
        if args.certfile or args.keyfile:
            if not (args.certfile and args.keyfile):
                raise SyftError("TLS needs both --certfile and --keyfile")
            ssl_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ssl_ctx.load_cert_chain(args.certfile, args.keyfile)
        for origin in args.allow_origin:
            if not origin.startswith(("http://", "https://")) or origin.count("/") != 2:
                raise SyftError(f"--allow-origin takes an origin such as https://lab.example.org "
                                f"(scheme and host, no path), got {origin!r}")
        for module in args.layers:
            try:
                importlib.import_module(module)
            except ImportError as e:
                raise SyftError(f"--layers {module}: cannot import it ({e})") from None
        limits = Limits(max_bytes=args.max_memory, max_objects=args.max_objects, max_op_seconds=args.max_op_seconds,
                        **({} if args.max_memory is None else {"source": "--max-memory"}))
        server = WorkerServer(args.id, args.host, args.port, token=token, ssl=ssl_ctx,
                              max_message_size=args.max_message_size, max_connections=args.max_connections,
                              max_pending_handshakes=args.max_pending_handshakes,
                              handshake_timeout=args.handshake_timeout, allow_origins=args.allow_origin,
                              session_grace=args.session_grace, limits=limits)
    except (SyftError, OSError, ValueError) as e:
        print(f"syft-lab worker: {e}", file=sys.stderr)
        return 2
    if not token:
        print("syft-lab worker: no token set: any local process can use this worker "
              "(set SYFT_LAB_TOKEN or --token-file)", file=sys.stderr)

    def ready(s):
        print(f"syft-lab worker {args.id}: memory budget {fmt_bytes(limits.max_bytes)} ({limits.source}), "
              f"at most {limits.max_objects} objects", file=sys.stderr, flush=True)
        print(f"syft-lab worker {args.id} listening on {s.url}", flush=True)

    try:
        asyncio.run(server.serve(ready))
    except OSError as e:
        print(f"syft-lab worker: cannot listen on {args.host}:{args.port}: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        pass
    return 0


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: syft-lab worker --id ID [--host H] [--port P] [--token-file F] ...\n\n"
              "commands:\n  worker   run a worker that clients reach over websockets")
        return 0 if argv else 2
    if argv[0] == "worker":
        ensure_zeroing_heap(["-m", "syft_lab.worker", *argv[1:]])  # (one re-execution, at most)
        return run_worker(argv[1:])
    print(f"syft-lab: unknown command {argv[0]!r} (try: syft-lab worker --help)", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
