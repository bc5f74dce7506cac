"""Secure computation benchmark: syft_lab beside CrypTen 0.4.1, measured in turns in one run.

    .venv/bin/python benchmarks/bench_smpc.py [--quick]      # writes benchmarks/smpc_results.md and .json
    benchmarks/setup_crypten                                 # first, for the CrypTen columns

Figures:
- a sweep of each op over sizes (issue 40): element-wise ops (add, mul, relu, a comparison, exp,
  reciprocal, sigmoid) on 1 to 10^5 elements; matmul 10x10 and 100x100; max_pool2d 2x2; max,
  argmax, softmax and log_softmax along dim 1 of 100x10, 100x100 and 10x1000 (10, 100 and 1,000
  along the reduced dim); cross-entropy forward + backward on 32x10, 32x100 and 32x1000 (public
  targets). On 2 parties as worker processes (websockets on 127.0.0.1) and a third worker process
  as crypto provider (dealer), sampled in turns with CrypTen 0.4.1 on 2 parties as processes (gloo
  on 127.0.0.1) with its default trusted-first-party provider (TFP) and with a third-party dealer
  process (TTP, the design syft_lab has), on the same inputs; medians (BENCH_SMPC_REPEAT turns,
  default 5); rounds per op for every side (syft_lab: round trips from this process; CrypTen: its
  communicator's count of collectives); the worst ratio per op over its sizes; a ping round trip
  to a party in the same turns (the floor of one round). CrypTen runs in .venv-crypten
  (benchmarks/setup_crypten, never a dependency of syft_lab); without it the CrypTen columns say
  "CrypTen not installed" and the rest runs. BENCH_SMPC_KEYS=op@shape,... runs a few (no results
  written);
- in process (VirtualWorkers): a shared 100x100 matmul against a plain float32 100x100 matmul,
  in turns (CPU time of this thread: everything runs here), with the int64 matmul it is built on;
- randomness: 4*10^5 int64 words (a 100x100 relu's dealer material) from the generator the dealer
  uses (AES-256-CTR, syft_lab.workers.randomness, drawn on the provider's worker by its `deal`
  command), from os.urandom and from torch's randint (the Mersenne Twister the dealer used
  before, which a party could predict), side by side.
"""
from __future__ import annotations

import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import torch
import torch.nn.functional as F

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))

import common  # noqa: E402
from common import cpu_clock, figure, interleaved  # noqa: E402

CRYPTEN_PYTHON = ROOT / ".venv-crypten" / "bin" / "python"
CRYPTEN_PARTY = HERE / "crypten" / "crypten_party.py"
RESULTS = HERE / "smpc_results"

# The sweep (issue 40: "a size not benchmarked is a size not known"): each op over sizes, the same
# inputs on both sides (benchmarks/crypten/crypten_party.py makes "NAME@SHAPE" the same way).
ELEMENTWISE = ("1", "100", "10000", "100000")  # 1 to 10^5 elements
REDUCED = ("100x10", "100x100", "10x1000")  # 10, 100 and 1,000 along the reduced dim (dim 1)
SWEEP = [("add", "add", ELEMENTWISE), ("mul", "mul", ELEMENTWISE), ("relu", "relu", ELEMENTWISE),
         ("gt", "comparison a > b", ELEMENTWISE), ("exp", "exp", ELEMENTWISE),
         ("reciprocal", "reciprocal (x in [0.5, 4])", ELEMENTWISE), ("sigmoid", "sigmoid", ELEMENTWISE),
         ("matmul", "matmul", ("10x10", "100x100")), ("max_pool2d", "max_pool2d 2x2", ("1x8x8x8", "1x8x32x32")),
         ("max", "max along dim 1 (values and indices)", REDUCED), ("argmax", "argmax along dim 1", REDUCED),
         ("softmax", "softmax along dim 1", REDUCED), ("log_softmax", "log_softmax along dim 1", REDUCED),
         ("cross_entropy", "cross-entropy forward + backward, public targets", ("32x10", "32x100", "32x1000"))]
OPS = [(f"{op}@{shape}", label, shape) for op, label, shapes in SWEEP for shape in shapes]
SMOKE_OPS = ("add@100", "mul@1", "matmul@10x10", "relu@100")  # smoke mode: shows the path runs
QUICK_SHAPES = ("1", "10000", "100x100", "1x8x8x8", "32x100")  # --quick: one or two sizes per op
GOAL_TTP, GOAL_TFP = 1.0, 1.5


def _start(sy, ids):
    workers, threads = {}, []

    def start(i):
        workers[i] = sy.start_worker(i)

    for i in ids:
        threads.append(threading.Thread(target=start, args=(i,)))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    missing = [i for i in ids if i not in workers]
    if missing:
        for w in workers.values():
            w.close()
        raise RuntimeError(f"workers did not start: {missing}")
    return [workers[i] for i in ids]


# --- CrypTen: 2 party processes (+ a dealer process for TTP), driven over their stdin -------------

def crypten_missing() -> str | None:
    """Why CrypTen cannot run here (None: it can)."""
    if not CRYPTEN_PYTHON.exists():
        return "CrypTen not installed (run benchmarks/setup_crypten)"
    probe = subprocess.run([str(CRYPTEN_PYTHON), "-c", "import crypten"], capture_output=True, text=True)
    if probe.returncode != 0:
        return "CrypTen not installed (import failed: run benchmarks/setup_crypten)"
    return None


class CrypTen:
    """CrypTen's 2 parties as processes with ``provider`` TFP (its default) or TTP (a dealer process)."""

    def __init__(self, provider: str):
        self.provider = provider
        self._rendezvous = tempfile.NamedTemporaryFile(prefix="crypten-rv-", delete=False)
        self._rendezvous.close()
        os.unlink(self._rendezvous.name)  # gloo's file store makes it
        self._logs, self.procs = [], []
        ranks = 3 if provider == "TTP" else 2
        for rank in range(ranks):
            env = dict(os.environ, WORLD_SIZE="2", RANK=str(rank), RENDEZVOUS=f"file://{self._rendezvous.name}",
                       DISTRIBUTED_BACKEND="gloo", CRYPTEN_PROVIDER=provider, GLOO_SOCKET_IFNAME="lo",
                       MASTER_ADDR="127.0.0.1", OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")
            log = tempfile.TemporaryFile(mode="w+")
            self._logs.append(log)
            self.procs.append(subprocess.Popen([str(CRYPTEN_PYTHON), str(CRYPTEN_PARTY)], env=env, text=True,
                                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log))
        self.parties = self.procs[:2]
        self.ask("ready?")

    def ask(self, command: str) -> list[dict]:
        for p in self.parties:
            p.stdin.write(command + "\n")
            p.stdin.flush()
        out = []
        for p in self.parties:
            line = p.stdout.readline()
            if not line:
                self._logs[self.procs.index(p)].seek(0)
                raise RuntimeError(f"a CrypTen party ({self.provider}) ended: "
                                   f"{self._logs[self.procs.index(p)].read()[-2000:]}")
            out.append(json.loads(line))
        if any("error" in o for o in out):
            raise RuntimeError(out)
        return out

    def time(self, name: str) -> float:
        """Seconds of one ``name`` (the slower party, from a barrier before it)."""
        return max(o["t"] for o in self.ask(f"time {name}"))

    def rounds(self, name: str) -> int:
        return self.ask(f"rounds {name}")[0]["rounds"]

    def close(self) -> None:
        for p in self.parties:
            try:
                p.stdin.write("quit\n")
                p.stdin.flush()
            except OSError:
                pass
        deadline = time.monotonic() + 10
        for p in self.procs:
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:  # crypten.uninit may wait on a peer that left: end it
                p.kill()
                p.wait()
        for log in self._logs:
            log.close()
        if os.path.exists(self._rendezvous.name):
            os.unlink(self._rendezvous.name)


# --- syft_lab: 2 worker processes + a dealer ---------------------------------------------------------

def _syft_op(name, alice, bob, carol):
    """One op of the sweep on shared inputs among alice and bob (carol the dealer)."""
    g = torch.Generator().manual_seed(0)
    key, _, shape = name.partition("@")
    dims = tuple(int(v) for v in shape.split("x"))

    def shared(low=-2.0, high=2.0, **kw):
        t = torch.rand(*dims, generator=g) * (high - low) + low
        return t.fix_precision().share(alice, bob, crypto_provider=carol, **kw)

    if key == "reciprocal":
        x = shared(0.5, 4.0)
        return lambda: x.reciprocal()
    if key == "cross_entropy":
        logits = shared(requires_grad=True)
        target = torch.randint(0, dims[1], (dims[0],), generator=g)

        def cross_entropy():
            logits.grad = None
            F.cross_entropy(logits, target).backward()
            return logits.grad

        return cross_entropy
    a = shared()
    b = shared() if key in ("add", "mul", "matmul", "gt") else None
    return {"add": lambda: a + b, "mul": lambda: a * b, "matmul": lambda: a @ b, "relu": lambda: a.relu(),
            "gt": lambda: a > b, "exp": lambda: a.exp(), "sigmoid": lambda: a.sigmoid(),
            "softmax": lambda: F.softmax(a, 1), "log_softmax": lambda: F.log_softmax(a, 1),
            "max": lambda: a.max(1), "argmax": lambda: a.argmax(1), "max_pool2d": lambda: F.max_pool2d(a, 2)}[key]


def _syft_ops(alice, bob, carol, keys):
    return {k: _syft_op(k, alice, bob, carol) for k in keys}


def _keys(quick):
    if common.SMOKE:
        return list(SMOKE_OPS)
    if os.environ.get("BENCH_SMPC_KEYS"):  # a few ops only (a check; writes no results)
        return os.environ["BENCH_SMPC_KEYS"].split(",")
    return [k for k, _, shape in OPS if not quick or shape in QUICK_SHAPES]


def _remote(sy, runtime, quick):
    keys = _keys(quick)
    missing = crypten_missing() or ("CrypTen skipped in smoke mode" if common.SMOKE else None)
    repeat = 3 if quick else int(os.environ.get("BENCH_SMPC_REPEAT", "5"))
    load_start = [round(x, 2) for x in os.getloadavg()]
    peers = {}
    try:
        if missing is None:
            peers = {"TTP": CrypTen("TTP"), "TFP": CrypTen("TFP")}
        alice, bob, carol = _start(sy, ["bench_smpc_alice", "bench_smpc_bob", "bench_smpc_carol"])
        try:
            ops = _syft_ops(alice, bob, carol, keys)

            def whole(k):
                # the op, then its last round sent: a round that opens nothing is held back to go
                # with the worker's next message (runtime.py), which would charge it to the op after
                ops[k]()
                runtime.send_held()

            rounds = {}
            for k in keys:
                whole(k)  # warm: meta shapes memoised, connections open, the dealer's pools and templates
                runtime.reset_stats()
                whole(k)
                rounds[k] = {"ours": dict(runtime.stats)}
                for name, c in peers.items():
                    c.time(k)
                    rounds[k][name] = c.rounds(k)
            sides = ["ours", *peers]
            samples = {(s, k): [] for s in sides for k in keys}
            samples.update({("ping", "ping"): []})
            for r in range(repeat):
                for k in (keys if r % 2 == 0 else keys[::-1]):
                    for s in (sides if r % 2 == 0 else sides[::-1]):
                        if s == "ours":
                            t0 = time.perf_counter()
                            whole(k)
                            samples[(s, k)].append(time.perf_counter() - t0)
                        else:
                            samples[(s, k)].append(peers[s].time(k))
                t0 = time.perf_counter()
                alice.ping()
                samples[("ping", "ping")].append(time.perf_counter() - t0)
            del ops
        finally:
            for w in (alice, bob, carol):
                w.close()
    finally:
        for c in peers.values():
            c.close()
    med = {key: statistics.median(v) * 1e3 for key, v in samples.items()}
    ping = med[("ping", "ping")]
    rows, table = [], []
    for k, op, shape in OPS:
        if k not in keys:
            continue
        ours, r = med[("ours", k)], rounds[k]
        entry = {"key": k, "op": op, "shape": shape, "ours_ms": round(ours, 3), "rounds_ours": r["ours"]["rounds"],
                 "messages_ours": r["ours"]["messages"], "rounds_not_waited_ours": r["ours"].get("unwaited", 0)}
        if peers:
            ttp, tfp = med[("TTP", k)], med[("TFP", k)]
            entry.update({"crypten_ttp_ms": round(ttp, 3), "crypten_tfp_ms": round(tfp, 3),
                          "ratio_ttp": round(ours / ttp, 3), "ratio_tfp": round(ours / tfp, 3),
                          "rounds_crypten_ttp": r["TTP"], "rounds_crypten_tfp": r["TFP"]})
            entry["meets"] = {"ttp": ours / ttp <= GOAL_TTP, "tfp": ours / tfp <= GOAL_TFP,
                              "rounds": r["ours"]["rounds"] <= r["TFP"]}
            peer = (f"CrypTen TTP {ttp:.2f} ms ({r['TTP']} rounds), default {tfp:.2f} ms ({ours / tfp:.2f}x, target "
                    f"<= {GOAL_TFP}; {r['TFP']} rounds); ours {r['ours']['rounds']} rounds, "
                    f"{r['ours']['messages']} messages")
            rows.append(figure(f"{op} {shape}, 2 worker processes + dealer (ratio: to CrypTen TTP)", ours, "ms",
                               GOAL_TTP, ratio=ours / ttp, peer=peer))
        else:
            rows.append(figure(f"{op} {shape}, 2 worker processes + dealer", ours, "ms", None,
                               peer=f"{missing}; ours {r['ours']['rounds']} rounds, {r['ours']['messages']} messages"))
        table.append(entry)
    rows.append(figure("a ping round trip to a party (the floor of one round), in turns with the ops", ping, "ms", None))
    info = {"crypten": missing or "CrypTen 0.4.1 (.venv-crypten, benchmarks/crypten/patch_crypten.py)",
            "repeat": repeat, "ping_ms": round(ping, 3), "load_average_start": load_start,
            "load_average_end": [round(x, 2) for x in os.getloadavg()], "nice": os.nice(0)}
    return rows, table, info


def _in_process(sy, quick):
    alice, bob, carol = (sy.VirtualWorker(f"bench_smpc_v{i}") for i in range(3))
    try:
        x, w = torch.randn(100, 100), torch.randn(100, 100)
        xi, wi = (x * 1000).long(), (w * 1000).long()
        sx = x.fix_precision().share(alice, bob, crypto_provider=carol)
        sw = w.fix_precision().share(alice, bob, crypto_provider=carol)
        from syft_lab.smpc import ring

        t = interleaved({"shared": lambda: sx @ sw, "plain": lambda: x @ w, "int64": lambda: xi @ wi,
                         "limbs": lambda: ring.limb_matmul(xi, wi)},
                        number=2 if quick else 5, repeat=5 if quick else 15, clock=cpu_clock)
        del sx, sw
    finally:
        for v in (alice, bob, carol):
            v.close()
    # a shared product is 5 ring matmuls' work (the dealer's c = a b, pooled; per party
    # [e | a_i] @ [b_i (+ d); d], here) plus the protocol's ops; each ring product runs on whichever of
    # the int64 kernel and the float64 limbs is the faster in this process (ring._dispatch)
    return [figure("shared 100x100 matmul in process (VirtualWorkers) vs a plain float32 matmul", t["shared"] * 1e3,
                   "ms", 20.0, ratio=t["shared"] / t["plain"],
                   peer=f"plain {t['plain'] * 1e6:.0f} us; one ring 100x100 matmul: torch int64 {t['int64'] * 1e6:.0f} us, "
                        f"float64 limbs (ring.limb_matmul) {t['limbs'] * 1e6:.0f} us; ring.matmul took "
                        f"{'the limbs' if ring.prefer_limbs() else 'int64'}")]


def _randomness(sy, quick):
    from syft_lab.workers import randomness as csprng

    words = 4 * 10**5
    fns = {"csprng": lambda: csprng.random_words([words]),
           "urandom": lambda: torch.frombuffer(bytearray(os.urandom(8 * words)), dtype=torch.int64),
           "randint": lambda: torch.randint(-2**63, 2**63 - 1, (words,), dtype=torch.int64)}
    t = interleaved(fns, number=1 if quick else 3, repeat=5 if quick else 15, clock=cpu_clock)
    mb = 8 * words / 1e6
    return [figure(f"4e5 random int64 words from the dealer's generator ({csprng.BACKEND}) (ratio: to torch randint)",
                   t["csprng"] * 1e3, "ms", None, ratio=t["csprng"] / t["randint"],
                   peer=f"{mb / t['csprng']:.0f} MB/s; os.urandom {t['urandom'] * 1e3:.2f} ms ({mb / t['urandom']:.0f} MB/s); "
                        f"torch randint (Mersenne Twister) {t['randint'] * 1e3:.2f} ms ({mb / t['randint']:.0f} MB/s)")]


def _commit() -> str:
    out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout.strip()
    from run import is_output

    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", "syft_lab", "benchmarks"],
                            capture_output=True, text=True, cwd=ROOT).stdout
    dirty = [line for line in status.splitlines() if line and not is_output(line[3:])]
    return f"{out or 'unknown'}{' plus uncommitted changes' if dirty else ' (clean)'}"


def worst_per_op(table) -> list[dict]:
    """Per op of the sweep: its highest ratio to each CrypTen provider over the sizes, and whether
    its rounds were at most CrypTen's default provider's at every size (issue 40's gate)."""
    out = []
    for op, label, _ in SWEEP:
        rows = [e for e in table if e["key"].partition("@")[0] == op and "ratio_ttp" in e]
        if not rows:
            continue
        ttp = max(rows, key=lambda e: e["ratio_ttp"])
        tfp = max(rows, key=lambda e: e["ratio_tfp"])
        out.append({"op": label, "sizes": [e["shape"] for e in rows], "worst_ratio_ttp": ttp["ratio_ttp"],
                    "at_ttp": ttp["shape"], "worst_ratio_tfp": tfp["ratio_tfp"], "at_tfp": tfp["shape"],
                    "rounds_ok": all(e["meets"]["rounds"] for e in rows)})
    return out


def write_results(table, info, in_process, path: Path = RESULTS) -> None:
    """benchmarks/smpc_results.md and .json: one row per op, every side measured in the same run."""
    info = dict(info, date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                commit=_commit(), cores=os.cpu_count(), torch=torch.__version__,
                in_process_matmul={"ms": round(in_process["value"], 4), "ratio_to_plain_float": round(in_process["ratio"], 2),
                                   "peer": in_process["peer"]})
    worst = worst_per_op(table)
    path.with_suffix(".json").write_text(json.dumps({"info": info, "worst": worst, "ops": table}, indent=2) + "\n")

    def yes(v):
        return "yes" if v else "**no**"

    lines = ["# Secure computation: syft_lab beside CrypTen 0.4.1 (benchmarks/bench_smpc.py)", "",
             f"Run {info['date']} at {info['commit']}; {info['cores']} cores, torch {info['torch']}; load average "
             f"(1, 5, 15 min) {info['load_average_start']} at the start, {info['load_average_end']} at the end, "
             f"niceness {info.get('nice', 0)} (the machine is shared: read the ratios, every side was sampled in turns "
             f"in the same run).", "",
             f"syft_lab: 2 parties and a crypto provider as worker processes (websockets on 127.0.0.1), driven by this "
             f"process; CrypTen: {info['crypten']}, 2 parties as processes (gloo on 127.0.0.1) with its default "
             f"trusted-first-party provider (TFP) and with a third-party dealer process (TTP). Medians of "
             f"{info['repeat']} turns, wall time (CrypTen: the slower party's, from a barrier). Rounds: syft_lab's "
             f"round trips from this process (its rounds that open nothing are sent and not waited for: no round "
             f"trip; counted in the .json as rounds_not_waited_ours); CrypTen's communicator count (collectives, its TTP requests included). "
             f"A ping round trip to a party in the same turns: {info['ping_ms']:.2f} ms.", "",
             "Goals (issue 30): ours <= 1.0x CrypTen TTP, <= 1.5x CrypTen default (TFP), rounds <= CrypTen's "
             "(its default provider's count: its TTP count adds the dealer's requests).", ""]
    if worst:
        lines += ["Worst case per op over its swept sizes (the size where the ratio is highest; rounds: every size).", "",
                  "| op | sizes | worst / TTP (at) | worst / default (at) | rounds <= CrypTen default at every size | "
                  "meets the goals |", "|---|---|---|---|---|---|"]
        for w in worst:
            lines.append(f"| {w['op']} | {', '.join(w['sizes'])} | {w['worst_ratio_ttp']:.2f} ({w['at_ttp']}) | "
                         f"{w['worst_ratio_tfp']:.2f} ({w['at_tfp']}) | {yes(w['rounds_ok'])} | "
                         f"{yes(w['worst_ratio_ttp'] <= GOAL_TTP and w['worst_ratio_tfp'] <= GOAL_TFP and w['rounds_ok'])} |")
        lines += ["", "Every size:", ""]
    if table and "crypten_ttp_ms" in table[0]:
        lines += ["| op | shape | ours ms | CrypTen TTP ms | CrypTen default ms | ours / TTP | ours / default | "
                  "rounds ours | rounds CrypTen TTP | rounds CrypTen default | <= 1.0x TTP | <= 1.5x default | rounds |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for e in table:
            m = e["meets"]
            lines.append(f"| {e['op']} | {e['shape']} | {e['ours_ms']:.2f} | {e['crypten_ttp_ms']:.2f} | "
                         f"{e['crypten_tfp_ms']:.2f} | {e['ratio_ttp']:.2f} | {e['ratio_tfp']:.2f} | {e['rounds_ours']} | "
                         f"{e['rounds_crypten_ttp']} | {e['rounds_crypten_tfp']} | {yes(m['ttp'])} | {yes(m['tfp'])} | "
                         f"{yes(m['rounds'])} |")
    else:
        lines += ["| op | shape | ours ms | rounds ours | messages ours |", "|---|---|---|---|---|"]
        for e in table:
            lines.append(f"| {e['op']} | {e['shape']} | {e['ours_ms']:.2f} | {e['rounds_ours']} | {e['messages_ours']} |")
        lines += ["", info["crypten"]]
    lines += ["", f"In process (VirtualWorkers, CPU time of this thread): a shared 100x100 matmul "
                  f"{info['in_process_matmul']['ms']:.3f} ms, {info['in_process_matmul']['ratio_to_plain_float']}x a "
                  f"plain float32 matmul (goal <= 20x); {info['in_process_matmul']['peer']}.", ""]
    path.with_suffix(".md").write_text("\n".join(lines))


def run(quick: bool = False) -> list[dict]:
    torch.set_num_threads(1)  # as the workers (start_worker's default): comparable and not oversubscribed
    import syft_lab as sy
    from syft_lab.smpc import runtime

    sy.hook()
    in_process = _in_process(sy, quick)
    remote, table, info = _remote(sy, runtime, quick)
    if not common.SMOKE and not quick and not os.environ.get("BENCH_SMPC_KEYS"):
        write_results(table, info, in_process[0])
    return _randomness(sy, quick) + in_process + remote


if __name__ == "__main__":
    from run import print_table

    print_table(run("--quick" in sys.argv))
