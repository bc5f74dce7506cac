"""The websocket worker server: one WorkerCore behind an authenticated asyncio websockets server.

    syft-lab worker --id bob --host 127.0.0.1 --port 8777     # see syft_lab/cli.py

Layers, each small:
- ``WorkerService`` handles decoded commands on the core (sans-I/O: a dict in, a dict out);
- ``WorkerServer`` moves bytes: it authenticates the opening HTTP handshake (a bearer token,
  compared in constant time) before any message is read, feeds each connection's messages
  through its own wire Decoder and sends replies in chunks.

A malformed message closes only the connection that sent it; a command that fails gets an
error reply naming the exception type and message (never a traceback). Objects are stored
only once a message is complete, so a client that disconnects mid-transfer leaves nothing.
"""
from __future__ import annotations

import asyncio
import hmac
import ipaddress
import os
import re
import secrets
import signal
import sys
from http import HTTPStatus

from ..errors import ObjectNotFoundError, RemoteError, SyftError
from ..wire import allowlist
from ..wire.format import (DEFAULT_MAX_MESSAGE_SIZE, WIRE_VERSION, WS_MAX_SIZE, Decoder, PointerSpec,
                           WireError, encode)
from .core import WorkerCore
from .limits import Limits

DEFAULT_MAX_CONNECTIONS = 64
CLOSE_POLICY = 1008  # websocket close code for a peer that broke the protocol
CLOSE_TOO_BIG = 1009
MAX_MESSAGE_TEXT = 2000

_PATH = re.compile(r"(?:[A-Za-z]:)?(?:[\\/][\w.\-+~]+){2,}")


def scrub(message: str) -> str:
    """An error message fit to leave the worker: no file paths, bounded length."""
    return _PATH.sub("<path>", str(message))[:MAX_MESSAGE_TEXT]


def error_reply(rid, e: BaseException) -> dict:
    if isinstance(e, ObjectNotFoundError):
        err = {"t": "ObjectNotFoundError", "m": scrub(e), "id": e.obj_id}
    elif isinstance(e, RemoteError):
        err = {"t": e.remote_type, "m": scrub(e.remote_message)}
    else:
        err = {"t": type(e).__name__, "m": scrub(e)}
    return {"r": rid, "err": err}


def _int(msg, key):
    v = msg.get(key)
    if type(v) is not int:
        raise SyftError(f"field {key!r} must be an integer")
    return v


def _str(msg, key):
    v = msg.get(key)
    if type(v) is not str:
        raise SyftError(f"field {key!r} must be a string")
    return v


def _ids(msg, key):
    v = msg.get(key)
    if type(v) is not list or not all(type(i) is int for i in v):
        raise SyftError(f"field {key!r} must be a list of object ids")
    return v


class _ThenRun:
    """A command result plus what to do once it has been sent."""

    __slots__ = ("result", "after")

    def __init__(self, result, after):
        self.result, self.after = result, after


class WorkerService:
    """Commands on one WorkerCore, decoded message in, reply message out (no I/O)."""

    def __init__(self, worker_id: str, limits=None):
        self.core = WorkerCore(worker_id, limits=Limits() if limits is None else limits)  # quotas: limits.py
        self.instance = secrets.token_hex(8)  # changes on every start: clients detect restarts
        self.max_message_size = DEFAULT_MAX_MESSAGE_SIZE
        self._commands = {
            "hello": self._hello, "ping": self._ping, "store": self._store, "run": self._run,
            "fetch": self._fetch, "delete": self._delete, "incref": self._incref, "release": self._release,
            "search": self._search, "describe": self._describe, "summary": self._summary,
            "store_plan": self._store_plan, "run_plan": self._run_plan, "run_graph": self._run_graph,
        }

    def handle(self, msg: dict):
        """Returns ``(reply, after)``: ``after`` (or None) runs once the reply has been sent."""
        rid = msg.get("r", 0)
        try:
            rel = msg.get("rel")
            if rel is not None:
                self._release({"ids": rel})
            cmd = msg.get("c")
            handler = self._commands.get(cmd) if type(cmd) is str else None
            if handler is None:
                raise SyftError(f"unknown command {str(cmd)[:40]!r}; known: {', '.join(self._commands)}")
            result = handler(msg)
            after = None
            if type(result) is _ThenRun:
                result, after = result.result, result.after
            return {"r": rid, "ok": result}, after
        except Exception as e:  # every failure becomes a reply: the connection lives on
            return error_reply(rid, e), None

    # --- commands ------------------------------------------------------------------------
    def _hello(self, msg):
        return {"worker": self.core.id, "v": WIRE_VERSION, "instance": self.instance,
                "max_message_size": self.max_message_size}

    def _ping(self, msg):
        return "pong"

    def _store(self, msg):
        obj = msg.get("o")
        if isinstance(obj, PointerSpec):
            raise SyftError(f"worker {self.core.id!r} cannot hold a pointer: pointers to pointers across "
                            f"remote workers are not supported. Move the data instead (ptr.move(worker)).")
        from ..tensors.logging import LoggingTensor
        import torch

        if type(obj) is not torch.Tensor and not isinstance(obj, LoggingTensor):
            raise SyftError("store takes a tensor or a LoggingTensor chain")
        return self.core.store(obj)

    def _run(self, msg):
        op = allowlist.resolve(msg.get("op"))
        args, kwargs = msg.get("a"), msg.get("k")
        if type(args) is not list or (kwargs is not None and type(kwargs) is not dict):
            raise SyftError("run takes a list of arguments and a map of keyword arguments")
        return self.core.run(op, args, kwargs)

    def _fetch(self, msg):
        obj_id = _int(msg, "id")
        obj = self.core.lookup(obj_id)
        out = obj
        if getattr(obj, "kind", None) == "plan":  # a stored plan travels as its JSON graph
            out = {"plan": obj.builds.to_json(), "tags": sorted(obj.tags), "description": obj.description}
        if msg.get("keep"):
            return out
        # The object leaves the store only once the reply has gone out: a connection lost
        # mid-transfer leaves it where it was.
        return _ThenRun(out, lambda: self.core.objects.get(obj_id) is obj and self.core.fetch(obj_id))

    def _delete(self, msg):
        self.core.fetch(_int(msg, "id"))

    def _incref(self, msg):
        self.core.incref(_int(msg, "id"))

    def _release(self, msg):
        ids = msg.get("ids")
        if type(ids) is not list:
            raise SyftError("release takes a list of ids")
        for i in ids:
            if type(i) is int:
                self.core.decref(i)

    # plans travel as their JSON graph (docs/plan-format.md), validated here before anything runs
    def _store_plan(self, msg):
        import torch

        from ..plans.graph import PlanBuilds

        builds = PlanBuilds.from_json(_str(msg, "g"))  # every graph of the plan, one per signature
        state = msg.get("s") or []
        tags = msg.get("tags") or []
        description = msg.get("d")
        if type(state) is not list or not all(type(t) is torch.Tensor for t in state):
            raise SyftError("a plan's state is a list of tensors")
        if type(tags) is not list or not all(type(t) is str for t in tags):
            raise SyftError("a plan's tags are strings")
        if description is not None and type(description) is not str:
            raise SyftError("a plan's description is a string")
        return self.core.store_plan(builds, state, tags, description)

    def _run_plan(self, msg):
        args, state = _ids(msg, "a"), msg.get("s")
        return self.core.run_plan(_int(msg, "id"), args, None if state is None else _ids(msg, "s"))

    def _run_graph(self, msg):
        from ..plans.graph import PlanGraph

        return self.core.run_graph(PlanGraph.from_json(_str(msg, "g")), _ids(msg, "i"), _ids(msg, "o"))

    def _search(self, msg):
        from ..inspection.model import object_meta

        q = msg.get("q")
        if type(q) is not list or not q or not all(type(t) is str for t in q):
            raise SyftError("search takes a list of tags")
        return [[i, object_meta(self.core.objects[i])] for i in self.core.search(tuple(q))]

    def _describe(self, msg):
        return self.core.describe(_int(msg, "id"))

    def _summary(self, msg):
        return self.core.summary()


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class WorkerServer:
    """Serves one WorkerService over websockets. ``await serve()`` runs until ``stop()``."""

    def __init__(self, worker_id: str, host: str = "127.0.0.1", port: int = 8777, *, token: str | None = None,
                 ssl=None, max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
                 max_connections: int = DEFAULT_MAX_CONNECTIONS, log=None):
        if not is_loopback(host) and not token:
            raise SyftError(f"refusing to listen on {host} without a token: anyone who can reach it could use "
                            f"the worker. Set SYFT_LAB_TOKEN or --token-file, or bind 127.0.0.1.")
        self.service = WorkerService(worker_id)
        self.service.max_message_size = max_message_size
        self.host, self.port = host, port
        self._token = token.encode() if token else None
        self.ssl = ssl
        self.max_message_size = max_message_size
        self.max_connections = max_connections
        self.connections: set = set()
        self._stop: asyncio.Event | None = None
        self._log = log or (lambda line: print(line, file=sys.stderr, flush=True))

    @property
    def url(self) -> str:
        return f"{'wss' if self.ssl else 'ws'}://{self.host}:{self.port}"

    # --- the opening handshake ---------------------------------------------------------
    def _process_request(self, connection, request):
        if self._token is not None:
            got = request.headers.get("Authorization", "").encode("utf-8", "replace")
            if not hmac.compare_digest(got, b"Bearer " + self._token):
                self._log(f"syft-lab worker {self.service.core.id}: refused a connection with a missing "
                          f"or wrong token")
                return connection.respond(HTTPStatus.UNAUTHORIZED, "missing or wrong token\n")
        if len(self.connections) >= self.max_connections:
            return connection.respond(HTTPStatus.SERVICE_UNAVAILABLE,
                                      f"worker has {self.max_connections} connections already\n")
        return None

    # --- one connection ----------------------------------------------------------------
    async def _handler(self, ws):
        from websockets.exceptions import ConnectionClosed

        self.connections.add(ws)
        decoder = Decoder(self.max_message_size)
        try:
            async for data in ws:
                try:
                    msg = decoder.feed(data)
                except WireError as e:
                    await self._send(ws, error_reply(0, e))
                    await ws.close(CLOSE_POLICY, "malformed message")
                    return
                if msg is None:
                    continue  # streamed buffers still arriving
                reply, after = self.service.handle(msg)
                try:
                    await self._send(ws, reply)
                except WireError as e:  # the reply itself cannot travel (too large, odd dtype)
                    await self._send(ws, error_reply(reply.get("r", 0), e))
                    continue
                if after is not None:
                    after()
        except ConnectionClosed:
            pass
        finally:
            self.connections.discard(ws)
            del decoder  # a half-received message goes with it: nothing partial is stored

    async def _send(self, ws, header):
        encoded = encode(header, max_message_size=self.max_message_size)
        for frame in encoded.frames:
            await ws.send(frame)

    # --- running -----------------------------------------------------------------------
    async def serve(self, ready=None) -> None:
        from websockets.asyncio.server import serve

        self._stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                loop.add_signal_handler(sig, self._stop.set)
            except (NotImplementedError, RuntimeError, ValueError):
                pass
        async with serve(self._handler, self.host, self.port, compression=None, max_size=WS_MAX_SIZE,
                         max_queue=8, process_request=self._process_request, ssl=self.ssl,
                         server_header=None, ping_interval=20, ping_timeout=60) as server:
            self.port = server.sockets[0].getsockname()[1]
            if ready is not None:
                ready(self)
            await self._stop.wait()

    def stop(self) -> None:
        if self._stop is not None:
            self._stop.set()


def read_token(token_file: str | None) -> str | None:
    """The token from --token-file, else from SYFT_LAB_TOKEN, else None."""
    if token_file:
        with open(token_file, encoding="utf-8") as f:
            token = f.read().strip()
        if not token:
            raise SyftError(f"token file {token_file} is empty")
        return token
    return os.environ.get("SYFT_LAB_TOKEN") or None
