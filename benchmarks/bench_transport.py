"""Transport benchmark: a WebSocketWorker against bare websockets (and torch.distributed.rpc).

    .venv/bin/python benchmarks/bench_transport.py [--quick]

Figures, each measured against its peer in the same run on loopback:
- one small op (1-element add on pointers) round trip vs a bare websockets echo of a message of
  the same size (websockets' sync client, an asyncio server in another process, no compression);
  torch.distributed.rpc ``rpc_sync(torch.add)`` of the same op as the peer to beat (its callee with
  the worker's thread settings), all sampled in turns in one client process. A WebSocketWorker
  reads its socket in the calling thread (websocket.py's ``_LeanConnection``), where websockets'
  sync client hands each message over from a reader thread; so the same echo over that
  connection is measured too, and the op against it (the op's cost over its own transport);
- sending a 256 MiB tensor and getting it back vs a bare websockets transfer of the same bytes
  (4 MiB messages each way), and the peak memory each process adds during the transfer;
- the same op on two worker processes at once (``syft_lab.workers.submit`` + ``gather``: both
  requests in flight) vs one after the other, and vs one op on one worker (secret sharing's case).
"""
from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))

from common import figure, interleaved  # noqa: E402

CHUNK = 4 * 2**20


# --- the bare peer: an asyncio websockets server in its own process ---------------------------

async def _bare_handler(ws):
    store = None
    async for m in ws:
        kind = m[:1]
        if kind == b"E":  # echo
            await ws.send(m)
        elif kind == b"P":  # put: the bytes follow in chunks, kept in one preallocated buffer
            n = int.from_bytes(m[1:9], "big")
            store = bytearray(n)
            view, off = memoryview(store), 0
            while off < n:
                c = await ws.recv()
                view[off:off + len(c)] = c
                off += len(c)
            await ws.send(b"ok")
        elif kind == b"G":  # get: send the buffer back in chunks
            view = memoryview(store)
            for off in range(0, len(store), CHUNK):
                await ws.send(view[off:off + CHUNK])
            store = None


async def _bare_main():
    from websockets.asyncio.server import serve

    async with serve(_bare_handler, "127.0.0.1", 0, compression=None, max_size=2 * CHUNK, max_queue=8) as s:
        print(s.sockets[0].getsockname()[1], flush=True)
        await asyncio.Future()


def _start(cmd, env=None):
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=str(ROOT),
                         env=dict(os.environ, PYTHONPATH=str(ROOT), **(env or {})))
    line = p.stdout.readline()
    if not line:
        p.kill()
        raise RuntimeError(f"{cmd} did not start")
    return p, line.strip()


# --- memory ------------------------------------------------------------------------------

def _reset_peak(pid="self"):
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as f:
            f.write("5")  # resets the peak RSS (VmHWM) to the current RSS
        return True
    except OSError:
        return False


def _mem(pid="self", field="VmHWM") -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


# --- torch.distributed.rpc peer ------------------------------------------------------------
# With the worker's thread settings: one torch thread, one thread running requests.
RPC_THREADS = 1


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rpc_init(rank: int, port: int):
    import torch
    import torch.distributed.rpc as rpc

    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    opts = rpc.TensorPipeRpcBackendOptions(init_method=f"tcp://127.0.0.1:{port}", num_worker_threads=RPC_THREADS)
    rpc.init_rpc(f"w{rank}", rank=rank, world_size=2, rpc_backend_options=opts)
    return rpc


def _rpc_peer(port: int):
    _rpc_init(1, port).shutdown()  # serves rank 0's calls until rank 0 shuts down too


def _small_op_client(address, token, echo_port, rpc_port, n, repeat):
    """Rank 0 of the rpc pair and a syft_lab client at once: the op, a bare echo of the same
    size, a protocol-only ping and rpc_sync(torch.add), sampled in turns. Prints JSON."""
    import json

    import torch
    from websockets.sync.client import connect

    import syft_lab as sy
    from syft_lab.wire.allowlist import op_name
    from syft_lab.wire.format import encode
    from syft_lab.commands import NewObject, Ref
    from syft_lab.workers.websocket import WebSocketWorker

    torch.set_num_threads(1)
    sy.hook()
    rpc = _rpc_init(0, rpc_port) if rpc_port else None
    bob = WebSocketWorker(address, id="benchbob", token=token, progress=False)
    ws = connect(f"ws://127.0.0.1:{echo_port}", compression=None, max_size=2 * CHUNK, max_queue=8, legacy=True)
    p = torch.ones(1).send(bob)
    request = encode({"c": "run", "r": 1, "op": op_name(torch.ops.aten.add.Tensor),
                      "a": [Ref(p.id_at_location), Ref(p.id_at_location)], "k": None, "rel": [2**52]}).frames[0]
    reply = encode({"r": 1, "ok": NewObject(2**52, [1], torch.float32)}).frames[0]
    msg = b"E" + b"x" * (max(len(request), len(reply)) - 1)
    a = torch.ones(1)
    # a ping carrying releases is served on the command thread: the hop's cost, next to the plain ping
    from syft_lab.workers.websocket import _LeanConnection

    lean = _LeanConnection(f"ws://127.0.0.1:{echo_port}", None, 2 * CHUNK, 10.0)
    fns = {"op": lambda: p + p, "echo": lambda: (ws.send(msg), ws.recv()), "ping": bob.ping,
           "ping_thread": lambda: bob._request({"c": "ping", "rel": []}),
           "echo_lean": lambda: (lean.send(msg), lean.recv())}
    if rpc is not None:
        fns["rpc"] = lambda: rpc.rpc_sync("w1", torch.add, args=(a, a))
    for fn in fns.values():  # warm: first calls set up caches on both sides
        for _ in range(20):
            fn()
    t = interleaved(fns, number=n, repeat=repeat)
    t["msg_bytes"] = len(msg)
    t["load"] = os.getloadavg()
    bob.close()
    ws.close()
    lean.close()
    if rpc is not None:
        rpc.shutdown()
    print(json.dumps(t), flush=True)


def small_op(address, token, echo_port, n, repeat, with_rpc: bool) -> dict:
    """Run the small-op client (and its rpc peer) in processes of their own."""
    import json

    env = dict(os.environ, PYTHONPATH=str(ROOT))
    rpc_port = _free_port() if with_rpc else 0
    peer = None
    if with_rpc:
        peer = subprocess.Popen([sys.executable, __file__, "--rpc-peer", str(rpc_port)], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, env=env)
    try:
        out = subprocess.run([sys.executable, __file__, "--small-op-client", address, token, str(echo_port),
                              str(rpc_port), str(n), str(repeat)], capture_output=True, text=True, env=env,
                             timeout=300)
        if out.returncode != 0:
            raise RuntimeError(f"the small-op client failed: {out.stderr[-2000:]}")
        return json.loads(out.stdout.strip().splitlines()[-1])
    finally:
        if peer is not None:
            try:
                peer.wait(20)
            except subprocess.TimeoutExpired:
                peer.kill()


# --- the benchmark -------------------------------------------------------------------------

def run(quick: bool = False) -> list[dict]:
    import secrets

    import torch
    from websockets.sync.client import connect

    import syft_lab as sy
    from syft_lab.workers.websocket import WebSocketWorker

    sy.hook()
    token = secrets.token_urlsafe(16)
    results = []
    worker, line = _start([sys.executable, "-m", "syft_lab.worker", "--id", "benchbob", "--port", "0", "--threads", "1"],
                          env={"SYFT_LAB_TOKEN": token})
    bare, port = _start([sys.executable, __file__, "--bare-server"])
    try:
        # 1. one small op round trip, side by side with its peers (in a client process of its own)
        n, repeat = (100, 9) if quick else (200, 31)
        t = small_op(line.split("listening on ")[1], token, port, n, repeat, with_rpc=not quick)
        peer = f"bare websockets echo of {t['msg_bytes']} B (websockets' sync client): {t['echo'] * 1e6:.0f} us"
        if "rpc" in t:
            peer += f"; torch rpc_sync(torch.add): {t['rpc'] * 1e6:.0f} us"
        results.append(figure("websocket pointer op round trip (1-element add)", t["op"] * 1e6, "us", 1.3,
                              peer=peer, ratio=t["op"] / t["echo"]))
        results.append(figure("websocket pointer op vs the same echo over the worker's own client connection",
                              t["op"] * 1e6, "us", None,
                              peer=f"echo of {t['msg_bytes']} B read in the calling thread (websocket.py's "
                                   f"_LeanConnection): {t['echo_lean'] * 1e6:.0f} us; websockets' sync client "
                                   f"{t['echo'] * 1e6:.0f} us; load average {t['load'][0]:.1f}",
                              ratio=t["op"] / t["echo_lean"]))
        results.append(figure("websocket worker ping (protocol only, no pointer)", t["ping"] * 1e6, "us", None,
                              peer=f"bare websockets echo: {t['echo'] * 1e6:.0f} us", ratio=t["ping"] / t["echo"]))
        results.append(figure("websocket worker ping served on the command thread (the thread hop)",
                              t["ping_thread"] * 1e6, "us", None,
                              peer=f"the same ping on the event loop: {t['ping'] * 1e6:.0f} us (hop "
                                   f"{(t['ping_thread'] - t['ping']) * 1e6:.0f} us); the op: "
                                   f"{(t['op'] - t['ping_thread']) * 1e6:.0f} us more", ratio=t["ping_thread"] / t["echo"]))
        if "rpc" in t:
            results.append(figure("websocket pointer op vs torch.distributed.rpc rpc_sync", t["op"] * 1e6, "us",
                                  1.0, peer=f"rpc_sync {t['rpc'] * 1e6:.0f} us (TensorPipe, loopback, "
                                            f"{RPC_THREADS} worker thread, 1 torch thread; samples in turns)",
                                  ratio=t["op"] / t["rpc"]))

        bob = WebSocketWorker(line.split("listening on ")[1], id="benchbob", token=token, progress=False)
        ws = connect(f"ws://127.0.0.1:{port}", compression=None, max_size=2 * CHUNK, max_queue=8, legacy=True)

        # 2. send + get of a large tensor
        size = (64 if quick else 256) * 2**20
        reps = 1 if quick else 3
        base_client = _mem("self", "VmRSS")
        x = torch.randn(size // 4)
        best, best_bare = float("inf"), float("inf")
        peak_worker = peak_client = peak_bare = 0
        for _ in range(reps):
            _reset_peak()
            _reset_peak(worker.pid)
            base_worker = _mem(worker.pid, "VmRSS")
            t0 = time.perf_counter()
            q = x.send(bob)
            y = q.get()
            best = min(best, time.perf_counter() - t0)
            assert torch.equal(x, y)
            peak_worker = max(peak_worker, _mem(worker.pid) - base_worker)
            peak_client = max(peak_client, _mem("self") - base_client)
            del y, q

            _reset_peak(bare.pid)
            base_bare = _mem(bare.pid, "VmRSS")
            data = memoryview(x.view(torch.uint8).reshape(-1).numpy()) if _has_numpy() else bytes(x.untyped_storage())
            t0 = time.perf_counter()
            ws.send(b"P" + size.to_bytes(8, "big"))
            for off in range(0, size, CHUNK):
                ws.send(data[off:off + CHUNK])
            assert ws.recv() == b"ok"
            ws.send(b"G")
            back = bytearray(size)
            view, off = memoryview(back), 0
            while off < size:
                c = ws.recv()
                view[off:off + len(c)] = c
                off += len(c)
            best_bare = min(best_bare, time.perf_counter() - t0)
            peak_bare = max(peak_bare, _mem(bare.pid) - base_bare)
            del back, view, data
        mib = size / 2**20
        thr, thr_bare = 2 * mib / best, 2 * mib / best_bare
        results.append(figure(f"send + get of a {mib:.0f} MiB tensor (throughput)", thr, "MiB/s", 0.5,
                              peer=f"bare websockets, same bytes in 4 MiB messages: {thr_bare:.0f} MiB/s",
                              ratio=thr / thr_bare, higher_is_better=True))
        results.append(figure(f"worker process peak memory during {mib:.0f} MiB send + get", peak_worker / 2**20,
                              "MiB", 2.5, peer=f"bare websockets server: {peak_bare / 2**20:.0f} MiB",
                              ratio=peak_worker / size, note="peak RSS above the pre-transfer RSS, / tensor size"))
        results.append(figure(f"client process peak memory during {mib:.0f} MiB send + get", peak_client / 2**20,
                              "MiB", 2.5, peer="holds the tensor and the copy it got back (2x by nature)",
                              ratio=peak_client / size, note="peak RSS above the RSS before the tensor existed"))
        ws.close()

        # 3. the same op on two workers: both requests in flight (gather) vs one after the other
        alice_proc, alice_line = _start([sys.executable, "-m", "syft_lab.worker", "--id", "benchalice", "--port", "0",
                                         "--threads", "1"], env={"SYFT_LAB_TOKEN": token})
        try:
            alice = WebSocketWorker(alice_line.split("listening on ")[1], id="benchalice", token=token, progress=False)
            pb, pa = torch.ones(100, 100).send(bob), torch.ones(100, 100).send(alice)
            add = torch.ops.aten.add.Tensor
            fns = {"one": lambda: pb + pb, "sequential": lambda: (pb + pb, pa + pa),
                   "gather": lambda: sy.workers.gather([sy.workers.submit(add, (pb, pb)), sy.workers.submit(add, (pa, pa))])}
            for fn in fns.values():
                for _ in range(20):
                    fn()
            t2 = interleaved(fns, number=50 if quick else 200, repeat=7 if quick else 21)
            results.append(figure("100x100 add on 2 worker processes, both in flight (submit + gather)",
                                  t2["gather"] * 1e6, "us", 0.75,
                                  peer=f"one after the other: {t2['sequential'] * 1e6:.0f} us; one op on one worker: "
                                       f"{t2['one'] * 1e6:.0f} us ({t2['gather'] / t2['one']:.2f}x)",
                                  ratio=t2["gather"] / t2["sequential"]))
            del pb, pa
            alice.close()
        finally:
            alice_proc.kill()
        bob.close()
    finally:
        worker.kill()
        bare.kill()
    return results


def _has_numpy():
    try:
        import numpy  # noqa: F401

        return True
    except ImportError:
        return False


def main():
    if "--bare-server" in sys.argv:
        asyncio.run(_bare_main())
        return
    if "--rpc-peer" in sys.argv:
        _rpc_peer(int(sys.argv[sys.argv.index("--rpc-peer") + 1]))
        return
    if "--small-op-client" in sys.argv:
        i = sys.argv.index("--small-op-client")
        address, token, echo_port, rpc_port, n, repeat = sys.argv[i + 1:i + 7]
        _small_op_client(address, token, int(echo_port), int(rpc_port), int(n), int(repeat))
        return
    quick = "--quick" in sys.argv
    results = run(quick)
    rows = [f"{'figure':58} {'value':>12} {'ratio':>7} {'target':>7}  peer"]
    for r in results:
        sign = ">=" if r["higher_is_better"] else "<="
        target = f"{sign}{r['target']}" if r["target"] is not None else "-"
        ratio = f"{r['ratio']:.2f}" if r["ratio"] is not None else "-"
        rows.append(f"{r['name'][:58]:58} {r['value']:>8.1f} {r['unit']:<4}{ratio:>6} {target:>7}  {r['peer']}")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
