"""The ``syft-lab`` command.

    syft-lab worker --id bob [--host 127.0.0.1] [--port 8777] [--token-file F]
                    [--certfile C --keyfile K] [--max-message-size N] [--max-connections N]

The token comes from --token-file or the SYFT_LAB_TOKEN environment variable. Without one the
worker only listens on a loopback address. Once listening it prints one line:
``syft-lab worker bob listening on ws://127.0.0.1:8777``.
"""
from __future__ import annotations

import argparse
import sys


def _size(text: str) -> int:
    """A byte count such as 1048576, 512MiB, 2GiB or 1GB."""
    units = {"kib": 2**10, "mib": 2**20, "gib": 2**30, "kb": 10**3, "mb": 10**6, "gb": 10**9, "b": 1}
    t = text.strip().lower()
    for u, mult in units.items():
        if t.endswith(u):
            return int(float(t[: -len(u)]) * mult)
    return int(t)


def worker_parser(prog="syft-lab worker") -> argparse.ArgumentParser:
    from .wire.format import DEFAULT_MAX_MESSAGE_SIZE
    from .workers.server import DEFAULT_MAX_CONNECTIONS

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
                   help=f"concurrent client connections (default {DEFAULT_MAX_CONNECTIONS})")
    p.add_argument("--threads", type=int, default=None,
                   help="torch intra-op threads (default: torch's choice). Use 1 when clients or other "
                        "workers share this machine's cores: oversubscribed threads make small ops 10-50x slower")
    return p


def run_worker(argv) -> int:
    import asyncio

    from .errors import SyftError
    from .workers.base import check_worker_id
    from .workers.server import WorkerServer, read_token

    args = worker_parser().parse_args(argv)
    try:
        check_worker_id(args.id)
        if args.threads is not None:
            if args.threads < 1:
                raise SyftError("--threads takes a positive number")
            import torch

            torch.set_num_threads(args.threads)
        token = read_token(args.token_file)
        ssl_ctx = None
        if args.certfile or args.keyfile:
            if not (args.certfile and args.keyfile):
                raise SyftError("TLS needs both --certfile and --keyfile")
            import ssl

            ssl_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ssl_ctx.load_cert_chain(args.certfile, args.keyfile)
        server = WorkerServer(args.id, args.host, args.port, token=token, ssl=ssl_ctx,
                              max_message_size=args.max_message_size, max_connections=args.max_connections)
    except (SyftError, OSError) as e:
        print(f"syft-lab worker: {e}", file=sys.stderr)
        return 2
    if not token:
        print("syft-lab worker: no token set: any local process can use this worker "
              "(set SYFT_LAB_TOKEN or --token-file)", file=sys.stderr)

    def ready(s):
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
        return run_worker(argv[1:])
    print(f"syft-lab: unknown command {argv[0]!r} (try: syft-lab worker --help)", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
