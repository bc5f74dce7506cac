"""A FedAvg round in syft_lab beside Flower's simulation engine (issue 28), in one run.

The same work on every side: a 64-32-10 MLP (the same initial weights) on scikit-learn's digits
(1,347 training / 450 test samples, features / 16) split IID across N clients (one seeded
permutation, near-equal parts), 1 local epoch, batch 16, SGD lr 0.1, 10 rounds; the figure is the
median round time of rounds 2-10 (round 1 is the warm-up: models sent, plans traced, actors
started), and the accuracy on the test set after round 10, as a mean over ``SEEDS`` seeds.

Like for like, accuracy included: for a seed both sides get the same split, the same initial
weights and the same batches. The sample order of every client in every round comes from one
seeded generator (``shuffles``: one ``torch.randperm`` per round and client, drawn here from
``torch.Generator().manual_seed(SHUFFLE_SEED + seed)``); syft_lab's FedAvg takes it as its
``order=`` and Flower's client cuts its batches from the same permutation, so the two systems
train on the same batches in the same order, and their accuracies after 10 rounds differ only by
float rounding (the order of additions in the SGD step and in the weighted average). Before,
each system drew its own shuffles, and after 10 rounds (still on the steep part of the curve)
the shuffle order alone moved one run's accuracy by several points.

One system at a time, never two Rays at once: for each N, syft_lab's process (its Ray up, the
rounds, its Ray down), then Flower's processes (one per actor layout, each with its own Ray);
the load average is read before and after each N.

- syft_lab FedAvg over N Ray workers (``sy.ray.workers(N, per_actor=ceil(N / 4))``: 4 actor
  processes, ``plans=True``), its rounds taken in turns with the same FedAvg over N VirtualWorkers;
- Flower at its best: ``flwr.simulation.run_simulation`` (its Ray backend, a 2-CPU Ray) with the
  Message API as Flower's documentation and quickstarts write it: a ``ClientApp`` whose
  ``@app.train()`` function loads its own partition (``context.node_config["partition-id"]``,
  cached in the actor process as Flower's quickstarts cache their ``FederatedDataset``) and a
  ``ServerApp`` whose ``main`` runs ``flwr.serverapp.strategy.FedAvg.start`` (central evaluation
  by its ``evaluate_fn``, after each round, outside the timed part). Two actor layouts
  (``backend_config["client_resources"]["num_cpus"]``): ``n-actors`` (2/N CPU: one actor per
  client, up to MAX_FLOWER_ACTORS) and ``4-actors`` (0.5 CPU, Flower's choice of a few actors
  sharing the cores); the faster one is Flower's figure, both are shown. The round time is the
  strategy's train phase (``configure_train`` to the end of ``aggregate_train``), timed inside
  the run. (Before issue 40 the Flower side was a NumPyClient that received the whole data set
  in its ``client_fn`` closure, pickled with every message: 4-10x slower than this at 16-32.)
  Flower's simulation engine polls for messages every 0.1 s (``InMemoryGrid.pull_interval`` and
  the engine's ``add_messages_to_queue``): that is its floor of ~0.2 s a round, part of Flower
  as it ships.

N = 4, 16, 32 and 100 (full mode), 4 and 16 (quick), 2 VirtualWorkers only (smoke: no Ray, no
flwr). flwr is never a dependency of syft_lab: Flower runs in a subprocess of the first Python
that can import it (``$FLWR_PYTHON``, .venv-flower/bin/python made by ``benchmarks/setup_flower``,
or this one), since flwr pins its own Ray version; without one its figures say they were skipped,
and why.

    benchmarks/setup_flower                                 # once: flwr in .venv-flower
    .venv/bin/python benchmarks/bench_flower.py            # full: writes benchmarks/flower_results.md
    .venv/bin/python benchmarks/bench_flower.py --quick    # prints the table only
"""
from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn

HERE = Path(__file__).resolve().parent
ROUNDS, BATCH, LR, SEED = 10, 16, 0.1, 0
# accuracy: the mean over these (full mode; BENCH_FLOWER_SEEDS=0,1 to choose); timing: the first
SEEDS = tuple(int(v) for v in os.environ.get("BENCH_FLOWER_SEEDS", "0,1,2").split(","))
SEEDS_100 = SEEDS[:1]  # 100 clients: 13 samples each, neither system learns in 10 rounds (both ~14%)
FLOWER_CPUS = 0.5  # per Flower client: 4 actors on a 2-CPU Ray, as many processes as syft_lab's side
SHUFFLE_SEED = 100_003  # the generator of the clients' sample orders: SHUFFLE_SEED + seed


def shuffles(parts, rounds: int, seed: int) -> list[list[torch.Tensor]]:
    """``[round][client]`` -> the client's sample order in that round (a permutation of its own
    indices, 0 .. len(part) - 1), the same for both systems: one generator, drawn round by round,
    client by client."""
    g = torch.Generator().manual_seed(SHUFFLE_SEED + seed)
    return [[torch.randperm(len(p), generator=g) for p in parts] for _ in range(rounds)]


def digits(n_clients: int, seed: int = SEED):
    """Train / test tensors and one index array per client (IID: a seeded permutation, split)."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    x, y = load_digits(return_X_y=True)
    x_tr, x_te, y_tr, y_te = train_test_split(x / 16.0, y, test_size=0.25, random_state=SEED, stratify=y)
    parts = np.array_split(np.random.default_rng(seed).permutation(len(x_tr)), n_clients)
    t = lambda a, dt: torch.tensor(a, dtype=dt)  # noqa: E731
    return t(x_tr, torch.float32), t(y_tr, torch.long), t(x_te, torch.float32), t(y_te, torch.long), parts


def mlp(seed: int = SEED) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))


def accuracy(model, x, y) -> float:
    with torch.no_grad():
        return float((model(x).argmax(1) == y).float().mean())


# --- Flower (run in a subprocess of a Python that has flwr; imports no syft_lab) ------------------
# Flower as its documentation recommends (the Message API of flwr >= 1.21: a ClientApp with a
# @train function, a ServerApp whose main runs a Message-API strategy): each ClientApp loads its
# own partition from ``context.node_config["partition-id"]`` into a per-process cache, the way
# Flower's quickstarts load theirs through flwr_datasets, instead of receiving the data set in a
# closure. The ClientApp lives at module level (this module, imported as ``bench_flower``), so
# Ray pickles it by reference: the app that travels with every message stays a few bytes.
FLOWER_LAYOUTS = ("n-actors", "4-actors")  # client_resources: 2/N CPU (one actor per client), 0.5 CPU (4)
MAX_FLOWER_ACTORS = 32  # ~250 MB each (torch): the N-actors layout stops here (100 actors: ~25 GB)
_PARTITIONS: dict = {}  # in each Flower actor process: (clients, seed, partition-id) -> its shard and orders


def _flower_layout_cpus(layout: str, n_clients: int) -> float:
    """``client_resources["num_cpus"]`` of a layout on the 2-CPU Ray: Flower starts
    floor(2 / num_cpus) actors."""
    return round(2.0 / n_clients, 4) if layout == "n-actors" else 0.5


def _flower_partition(n_clients: int, seed: int, pid: int, rounds: int):
    """The partition a Flower client trains on (and its per-round sample orders), loaded once per
    actor process: the same split and orders as syft_lab's side."""
    key = (n_clients, seed, pid)
    if key not in _PARTITIONS:
        x_tr, y_tr, _, _, parts = digits(n_clients, seed)
        orders = [per_round[pid] for per_round in shuffles(parts, rounds, seed)]
        _PARTITIONS[key] = (x_tr[parts[pid]], y_tr[parts[pid]], orders)
    return _PARTITIONS[key]


def _flower_client_app():
    from flwr.app import ArrayRecord, Context, Message, MetricRecord, RecordDict
    from flwr.clientapp import ClientApp

    app = ClientApp()

    @app.train()
    def train(msg: Message, context: Context) -> Message:
        torch.set_num_threads(1)
        cfg = msg.content["config"]
        n, pid = int(context.node_config["num-partitions"]), int(context.node_config["partition-id"])
        x, y, orders = _flower_partition(n, int(cfg["seed"]), pid, int(cfg["rounds"]))
        model = mlp(int(cfg["seed"]))
        model.load_state_dict(msg.content["arrays"].to_torch_state_dict())
        opt = torch.optim.SGD(model.parameters(), lr=LR)
        # this round's sample order (shuffles): batches of BATCH, the last one short
        for idx in orders[int(cfg["server-round"]) - 1].split(BATCH):
            opt.zero_grad()
            nn.functional.cross_entropy(model(x[idx]), y[idx]).backward()
            opt.step()
        content = RecordDict({"arrays": ArrayRecord(model.state_dict()),
                              "metrics": MetricRecord({"num-examples": len(x)})})
        return Message(content=content, reply_to=msg)

    return app


FLOWER_CLIENT_APP = None  # made on first use in the Flower subprocess (flwr is not imported otherwise)


def _flower_child(n_clients: int, rounds: int, seeds=(SEED,), layout: str = "4-actors") -> dict:
    """Flower's FedAvg for each seed in turn (one process); the first seed's rounds are timed."""
    runs = [_flower_seed(n_clients, rounds, seed, layout) for seed in seeds]
    out = dict(runs[0])
    out["accuracies"] = {str(seed): r["accuracy"] for seed, r in zip(seeds, runs)}
    return out


def _flower_seed(n_clients: int, rounds: int, seed: int, layout: str) -> dict:
    global FLOWER_CLIENT_APP
    import flwr
    from flwr.app import ArrayRecord, ConfigRecord, Context, MetricRecord
    from flwr.serverapp import Grid, ServerApp
    from flwr.serverapp.strategy import FedAvg
    from flwr.simulation import run_simulation
    import ray

    torch.set_num_threads(1)
    if FLOWER_CLIENT_APP is None:
        FLOWER_CLIENT_APP = _flower_client_app()
    _, _, x_te, y_te, _ = digits(n_clients, seed)  # the server's test set (central evaluation)
    times, scores = {}, {}

    class Timed(FedAvg):  # a round: configure_train to the end of aggregate_train
        def configure_train(self, server_round, arrays, config, grid):
            times[server_round] = [time.perf_counter()]
            return super().configure_train(server_round, arrays, config, grid)

        def aggregate_train(self, server_round, replies):
            replies = list(replies)
            out = super().aggregate_train(server_round, replies)
            times[server_round].append(time.perf_counter())
            failed = [m for m in replies if m.has_error()]
            if failed or len(replies) != n_clients:
                raise RuntimeError(f"round {server_round}: {len(failed)} Flower client(s) failed, "
                                   f"{len(replies)} replies: {failed[0].error.reason if failed else ''}")
            return out

    def evaluate_fn(server_round: int, arrays: ArrayRecord) -> MetricRecord:
        model = mlp(seed)
        model.load_state_dict(arrays.to_torch_state_dict())
        scores[server_round] = accuracy(model, x_te, y_te)
        return MetricRecord({"accuracy": scores[server_round]})

    server = ServerApp()

    @server.main()
    def main(grid: Grid, context: Context) -> None:
        strategy = Timed(fraction_train=1.0, fraction_evaluate=0.0, min_train_nodes=n_clients,
                         min_available_nodes=n_clients)
        strategy.start(grid=grid, initial_arrays=ArrayRecord(mlp(seed).state_dict()), num_rounds=rounds,
                       train_config=ConfigRecord({"seed": seed, "rounds": rounds}), evaluate_fn=evaluate_fn)

    cpus = _flower_layout_cpus(layout, n_clients)
    _start_ray(ray)
    t0 = time.perf_counter()
    run_simulation(server_app=server, client_app=FLOWER_CLIENT_APP, num_supernodes=n_clients,
                   backend_config={"init_args": {"num_cpus": 2, "include_dashboard": False},
                                   "client_resources": {"num_cpus": cpus, "num_gpus": 0.0}})
    total = time.perf_counter() - t0
    ray.shutdown()
    rounds_s = [times[r][1] - times[r][0] for r in sorted(times) if len(times[r]) == 2]
    if len(rounds_s) != rounds:
        raise RuntimeError(f"Flower ran {len(rounds_s)} of {rounds} rounds")
    return {"rounds": rounds_s, "accuracy": scores.get(rounds), "total": total, "layout": layout,
            "client_cpus": cpus, "actors": int(2 / cpus), "flwr": flwr.__version__, "ray": ray.__version__}


def _start_ray(ray) -> None:
    """Flower's Ray, started here as Flower's backend would start it (it uses a running Ray):
    under load its raylet sometimes dies waiting for its metrics agent (a fixed 15 s in Ray
    2.55), so a start that fails is tried again, as syft_lab's ``sy.ray.init`` does. Start-up
    is not timed (round 1 is the warm-up, and no round waits for it)."""
    pythonpath = os.pathsep.join(sys.path)  # what flwr's RayBackend.init_ray gives its actors
    if os.environ.get("PYTHONPATH"):
        pythonpath = f"{pythonpath}{os.pathsep}{os.environ['PYTHONPATH']}"
    os.environ["PYTHONPATH"] = pythonpath
    for attempt in range(4):
        try:
            ray.init(num_cpus=2, include_dashboard=False, runtime_env={"env_vars": {"PYTHONPATH": pythonpath}})
            return
        except Exception as e:  # noqa: BLE001
            print(f"bench_flower: Flower's Ray did not start (attempt {attempt + 1}): {str(e)[:200]}",
                  file=sys.stderr, flush=True)
            ray.shutdown()
            if attempt == 3:
                raise
            time.sleep(3)


def flower_python() -> tuple[str | None, str]:
    """A Python that imports flwr, or None and why not."""
    candidates = [os.environ.get("FLWR_PYTHON"), str(HERE.parent / ".venv-flower" / "bin" / "python"), sys.executable]
    tried = []
    for py in [c for c in candidates if c]:
        if not Path(py).exists():
            continue
        ok = subprocess.run([py, "-c", "import flwr.simulation, ray"], capture_output=True, text=True)
        if ok.returncode == 0:
            return py, ""
        tried.append(py)
    return None, (f"flwr[simulation] is not importable from {', '.join(tried) or 'any Python'} "
                  f"(benchmarks/setup_flower installs it for the benchmark only, into .venv-flower; or set FLWR_PYTHON)")


def flower(py: str, n_clients: int, rounds: int, seeds=(SEED,)) -> dict:
    """Flower in each actor layout (FLOWER_LAYOUTS; one layout when they give the same actors),
    each seed in a fresh subprocess (a fresh Ray: on a loaded machine a Ray started again in one
    process sometimes loses its raylet and hangs), tried twice. The first layout runs every seed
    (accuracy), the others the timed seed. -> {layout: run}; a layout that failed holds its error."""
    layouts, cpus = {}, set()
    for layout in FLOWER_LAYOUTS:
        c = _flower_layout_cpus(layout, n_clients)
        if c in cpus or (layout == "n-actors" and n_clients > MAX_FLOWER_ACTORS):
            continue
        cpus.add(c)
        try:
            runs = [_flower_once(py, n_clients, rounds, seed, layout) for seed in (seeds if not layouts else seeds[:1])]
        except Exception as e:  # noqa: BLE001  (reported in its row, the other layout stands)
            layouts[layout] = {"error": f"{type(e).__name__}: {str(e)[-300:]}"}
            continue
        out = dict(runs[0])
        out["accuracies"] = {str(seed): r["accuracy"] for seed, r in zip(seeds, runs)}
        layouts[layout] = out
    return layouts


def _flower_once(py: str, n_clients: int, rounds: int, seed: int, layout: str) -> dict:
    why = ""
    for _ in range(2):
        try:
            out = subprocess.run([py, str(Path(__file__).resolve()), "--flower-child", str(n_clients), str(rounds),
                                  str(seed), layout], capture_output=True, text=True, timeout=900 + 15 * n_clients,
                                 cwd=str(HERE), env=dict(os.environ, PYTHONPATH=str(HERE), RAY_DEDUP_LOGS="0",
                                                         RAY_agent_register_timeout_ms="600000"))
        except subprocess.TimeoutExpired:
            why = "timed out"
            continue
        if out.returncode == 0:
            return json.loads(out.stdout.strip().splitlines()[-1])
        why = out.stderr[-1500:]
    raise RuntimeError(f"Flower subprocess failed twice (seed {seed}, {layout}): {why}")


def flower_best(layouts: dict) -> dict:
    """The layout with the fastest median round (a peer counts at its best configuration)."""
    ok = {k: v for k, v in layouts.items() if "rounds" in v}
    if not ok:
        return {"error": "; ".join(f"{k}: {v.get('error')}" for k, v in layouts.items()) or "no layout ran"}
    return ok[min(ok, key=lambda k: _median_after_warmup(ok[k]["rounds"]))]


# --- syft_lab ------------------------------------------------------------------------------------
def _syft_fedavg(sy, workers, n_clients, name, seed=SEED, rounds=ROUNDS):
    x_tr, y_tr, x_te, y_te, parts = digits(n_clients, seed)
    fds = sy.BaseDataset(x_tr, y_tr, name=name).federate(workers, indices=parts)
    orders, index = shuffles(parts, rounds, seed), {w.id: k for k, w in enumerate(workers)}
    fl = sy.federated.FedAvg(mlp(seed), fds, lr=LR, batch_size=BATCH, local_epochs=1, plans=True, seed=seed,
                             order=lambda rnd, wid, epoch: orders[rnd - 1][index[wid]])
    return fl, fds, (x_te, y_te)


def _syft_rounds(sy, ray_workers, n, rounds, between=None, seeds=(SEED,)):
    """Rounds on Ray workers and on VirtualWorkers, taken in turns (ABBA...); ``between()``, if
    given, runs after the first half of the rounds. Then the other seeds' rounds on
    VirtualWorkers (the same model as on Ray for a seed), for their accuracy."""
    virtual = [sy.VirtualWorker(f"bench_flower_v{i}") for i in range(n)]
    sides = {}
    try:
        if ray_workers is not None:
            sides["ray"] = _syft_fedavg(sy, ray_workers, n, f"bench_flower_r{n}", seeds[0], rounds)
        sides["virtual"] = _syft_fedavg(sy, virtual, n, f"bench_flower_v{n}", seeds[0], rounds)
        times = {k: [] for k in sides}
        order = list(sides)
        for r in range(rounds):
            if r == rounds // 2 and between is not None:
                between()
            for k in (order if r % 2 == 0 else order[::-1]):
                t0 = time.perf_counter()
                sides[k][0].round(progress=False)
                times[k].append(time.perf_counter() - t0)
        out = {k: {"rounds": times[k], "accuracy": accuracy(fl.model, *test)} for k, (fl, _, test) in sides.items()}
        accs = {str(seeds[0]): out["virtual"]["accuracy"]}
        for seed in seeds[1:]:
            fl, fds, test = _syft_fedavg(sy, virtual, n, f"bench_flower_v{n}_s{seed}", seed, rounds)
            try:
                fl.run(rounds, progress=False)
                accs[str(seed)] = accuracy(fl.model, *test)
            finally:
                fds.unload()
        out["virtual"]["accuracies"] = accs
        return out
    finally:
        for _, fds, _ in sides.values():
            fds.unload()
        for w in virtual:
            w.close()


def _median_after_warmup(rounds):
    return statistics.median(rounds[1:]) if len(rounds) > 1 else rounds[0]


def _syft_child(n: int, rounds: int, seeds, smoke: bool = False) -> dict:
    """syft_lab's side for one size, alone on the machine's Ray (in its own process: never two Rays
    at once): ``sy.ray.init``, N Ray workers in 4 actor processes, the rounds (Ray and
    VirtualWorkers in turns), then everything shut down."""
    sys.path.insert(0, str(HERE.parent))
    import syft_lab as sy

    torch.set_num_threads(1)
    sy.hook()
    if smoke:
        return _syft_rounds(sy, None, n, rounds, None, seeds)
    import ray
    from common import stop_ray_workers

    for attempt in range(3):  # a loaded machine: Ray gives its raylet 30 s to register
        try:
            sy.ray.init(num_cpus=2)
            break
        except Exception:  # noqa: BLE001
            if attempt == 2:
                raise
            ray.shutdown()
            time.sleep(5)
    try:
        workers = sy.ray.workers(n, prefix=f"bench_flower_{n}_", per_actor=math.ceil(n / 4), start_timeout=600)
        try:
            return _syft_rounds(sy, workers, n, rounds, None, seeds)
        finally:
            stop_ray_workers(workers)
    finally:
        sy.ray.shutdown()


def _syft_once(n: int, rounds: int, seeds, smoke: bool) -> dict:
    args = [sys.executable, str(Path(__file__).resolve()), "--syft-child", str(n), str(rounds),
            ",".join(map(str, seeds))] + (["--smoke"] if smoke else [])
    out = subprocess.run(args, capture_output=True, text=True, timeout=1200 + 15 * n, cwd=str(HERE),
                         env=dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE), str(HERE.parent)])))
    if out.returncode != 0:
        raise RuntimeError(f"syft_lab subprocess failed ({n} clients): {out.stderr[-1500:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def run(quick: bool = False) -> list[dict]:
    import common
    from common import figure

    smoke = common.SMOKE
    sizes = (2,) if smoke else (4, 16) if quick else (4, 16, 32, 100)
    if not smoke and os.environ.get("BENCH_FLOWER_SIZES"):  # e.g. 4,16: a shorter full run
        sizes = tuple(int(v) for v in os.environ["BENCH_FLOWER_SIZES"].split(","))
    rounds = 2 if smoke else 4 if quick else ROUNDS
    py, why = (None, "smoke mode: no Ray, no Flower") if smoke else flower_python()
    seeds = SEEDS if not (smoke or quick) else (SEED,)
    measured, loads = {}, {}
    import run as run_mod

    RUN_INFO.update(source=run_mod.source(), started=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    for n in sizes:  # in turns, one system at a time: syft_lab's process, then Flower's
        size_seeds = seeds if n < 100 else SEEDS_100
        before = os.getloadavg()
        measured[n] = _syft_once(n, rounds, size_seeds, smoke)
        if py is not None:
            layouts = flower(py, n, rounds, size_seeds)
            measured[n]["flower_layouts"] = layouts
            measured[n]["flower"] = flower_best(layouts)
        loads[n] = (before, os.getloadavg())
        if not (smoke or quick):  # the raw measurements so far, before any figure is made of them
            RUN_INFO["ended"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            (HERE / "flower_results.raw.json").write_text(json.dumps({"measured": measured, "loads": loads,
                                                                      "run": RUN_INFO}, indent=1))
        print(f"bench_flower: {n} clients done: {json.dumps(measured[n])[:1500]}", file=sys.stderr, flush=True)
    global LOADS
    LOADS = loads
    return _figures(figure, measured, sizes, rounds, why, smoke)


LOADS: dict = {}  # clients -> (load average before, after) of the last run
RUN_INFO: dict = {}  # the run's source (at its start), start and end (UTC): kept in the raw file


def _mean(values) -> float:
    return sum(values) / len(values)


FLOWER_VERSIONS: dict = {}  # flwr, ray: of the Flower runs the figures were made of


def _load_note(loads: dict, cores: int) -> str:
    """What the load averages say about the machine during the run."""
    peak = max((v for b, a in loads.values() for v in (*b, *a)), default=0.0)
    if peak <= cores:
        return f"The machine was quiet enough: load average at most {peak:.1f} on {cores} cores."
    return (f"The machine was shared with other work during this run (other agents' tests and benchmarks; load "
            f"average up to {peak:.1f} on {cores} cores, the figures' own processes included): every figure is "
            f"noisy, both systems alike (they ran in turns, size by size). A rerun on a quiet machine will replace it.")


def _layout_text(n: int, layouts: dict) -> str:
    """Each Flower layout's median round, or why it failed."""
    return "; ".join(f"{k} ({v['actors']} actors) {_median_after_warmup(v['rounds']) * 1e3:.0f} ms" if "rounds" in v
                     else f"{k} failed: {v.get('error', '')[:120]}" for k, v in layouts.items())


def _figures(figure, measured, sizes, rounds, why, smoke):
    out = []
    med = {n: {k: _median_after_warmup(v["rounds"]) for k, v in m.items() if isinstance(v, dict) and "rounds" in v}
           for n, m in measured.items()}
    for n in sizes:
        m, t = measured[n], med[n]
        fl = m.get("flower", {})
        if smoke:
            out.append(figure(f"one FedAvg round of the digits MLP on {n} VirtualWorkers (Flower's setup)",
                              t["virtual"], "s", None,
                              peer=f"Ray and Flower rounds skipped ({why}); accuracy {m['virtual']['accuracy']:.3f}"))
            continue
        if "rounds" in fl:
            FLOWER_VERSIONS.update(flwr=fl["flwr"], ray=fl["ray"])
            peer = (f"Flower's best: {fl['layout']} {t['flower'] * 1e3:.0f} ms [{_layout_text(n, m['flower_layouts'])}]; "
                    f"VirtualWorkers {t['virtual'] * 1e3:.0f} ms")
            ratio, target = t["ray"] / t["flower"], 0.5
        else:
            peer = (f"Flower skipped: {fl.get('error') or why}; VirtualWorkers {t['virtual'] * 1e3:.0f} ms")
            ratio, target = None, None
        out.append(figure(f"FedAvg round, digits MLP, {n} clients: syft_lab on Ray workers (plans) vs Flower's "
                          f"best layout", t["ray"], "s", target, ratio=ratio, peer=peer))
        acc = {k: v["accuracy"] for k, v in m.items() if isinstance(v, dict) and v.get("accuracy") is not None}
        if "flower" in acc:
            ours = m["virtual"]["accuracies"]
            theirs = next((v["accuracies"] for v in m["flower_layouts"].values() if "accuracies" in v), {})
            seeds = [s for s in ours if s in theirs]
            mine, flw = _mean([ours[s] for s in seeds]), _mean([theirs[s] for s in seeds])
            each = ", ".join(f"{100 * ours[s]:.1f}/{100 * theirs[s]:.1f}" for s in seeds)
            out.append(figure(f"test accuracy after {rounds} rounds, {n} clients, mean of {len(seeds)} seed(s): "
                              f"syft_lab minus Flower", 100 * mine, "%", 1.0, ratio=abs(100 * (mine - flw)),
                              peer=f"Flower {100 * flw:.1f}%; per seed syft_lab/Flower {each}; seed {seeds[0]} "
                                   f"on Ray {100 * acc['ray']:.1f}% (ratio: points apart)"))
        else:
            out.append(figure(f"test accuracy after {rounds} rounds, {n} clients: syft_lab (Ray)",
                              100 * acc["ray"], "%", None,
                              peer=f"Flower skipped; VirtualWorkers {100 * acc['virtual']:.1f}%"))
    if smoke:
        return out
    small = sizes[0]
    for big in [s for s in sizes if s != small and s in (32, 100)] or sizes[-1:]:
        both = "flower" in med[big] and "flower" in med[small]
        out.append(figure(f"FedAvg round on Ray workers: {big} clients vs {small} clients (the same work)",
                          med[big]["ray"], "s", 2.0 if big == 32 else None, ratio=med[big]["ray"] / med[small]["ray"],
                          peer=f"{small} clients {med[small]['ray'] * 1e3:.0f} ms" +
                               (f"; Flower's best {med[big]['flower'] / med[small]['flower']:.2f}x "
                                f"({med[small]['flower'] * 1e3:.0f} -> {med[big]['flower'] * 1e3:.0f} ms)"
                                if both else "")))
    return out


def main(argv) -> int:
    if argv[:1] == ["--flower-child"]:
        seeds = tuple(int(s) for s in argv[3].split(",")) if len(argv) > 3 else (SEED,)
        layout = argv[4] if len(argv) > 4 else FLOWER_LAYOUTS[-1]
        try:
            # through the module ``bench_flower`` (on PYTHONPATH), not __main__: Ray then pickles the
            # ClientApp's functions by reference, as it would an app's own module
            import bench_flower

            print(json.dumps(bench_flower._flower_child(int(argv[1]), int(argv[2]), seeds, layout)), flush=True)
        except BaseException:  # noqa: BLE001
            import traceback

            traceback.print_exc()
            sys.stderr.flush()
            os._exit(1)  # after a failed simulation flwr's thread pool can hang the interpreter's exit
        return 0
    sys.path.insert(0, str(HERE))
    sys.path.insert(0, str(HERE.parent))
    if argv[:1] == ["--syft-child"]:
        out = _syft_child(int(argv[1]), int(argv[2]), tuple(int(s) for s in argv[3].split(",")), "--smoke" in argv)
        print(json.dumps(out), flush=True)
        return 0
    import common
    import run as run_mod

    common.SMOKE = "--smoke" in argv
    torch.set_num_threads(1)  # as in every process of the run (the machine line reports it)
    quick = "--quick" in argv or common.SMOKE
    t0 = time.perf_counter()
    if "--from-raw" in argv:  # the figures of a run cut short: what flower_results.raw.json holds
        raw = json.loads((HERE / "flower_results.raw.json").read_text())
        measured = {int(k): v for k, v in raw["measured"].items()}
        LOADS.update({int(k): v for k, v in raw["loads"].items()})
        RUN_INFO.update(raw.get("run", {}))
        sizes = tuple(sorted(measured))
        results = _figures(common.figure, measured, sizes, len(measured[sizes[0]]["ray"]["rounds"]), "", False)
    else:
        results = run(quick)
    text = run_mod.table(results)
    print(text)
    if not quick:  # the full run: benchmarks/flower_results.md and .json
        info, src = run_mod.machine(), RUN_INFO.get("source") or run_mod.source()
        when = (f"{RUN_INFO['started']} to {RUN_INFO.get('ended', '?')}" if "started" in RUN_INFO
                else f"{info['date']}, {time.perf_counter() - t0:.0f} s")
        (HERE / "flower_results.json").write_text(json.dumps({"machine": info, "source": src, "results": results},
                                                             indent=2))
        md = ["# syft_lab FedAvg beside Flower's simulation at its best (issues 28, 40)", "",
              run_mod.source_line(src), "",
              f"Machine: {info['cpu']}, {info['cores']} cores, Python {info['python']}, torch {info['torch']} "
              f"({info['torch_threads']} thread(s)), {info['platform']}; "
              f"{'' if '--from-raw' in argv else 'load average at the end ' + ', '.join(map(str, info['load_average'])) + '; '}"
              f"run {when}"
              f"{' (figures made again from flower_results.raw.json)' if '--from-raw' in argv else ''}. Flower: "
              f"{'flwr ' + FLOWER_VERSIONS['flwr'] + ', Ray ' + FLOWER_VERSIONS['ray'] if FLOWER_VERSIONS else '-'}.",
              "", "Peer configuration: Flower's Message API as its documentation recommends (a ClientApp whose "
              "train function loads its own partition from `context.node_config['partition-id']`, a ServerApp "
              "running `flwr.serverapp.strategy.FedAvg.start`), `run_simulation` on a 2-CPU Ray, in two actor "
              "layouts (`client_resources.num_cpus` 2/N: one actor per client, up to "
              f"{MAX_FLOWER_ACTORS}; 0.5: 4 actors); Flower's figure is the faster layout, both are in the peer "
              "column. syft_lab: `sy.ray.workers(N, per_actor=ceil(N/4))` (4 actor processes), `FedAvg(plans=True)`. "
              "Same work on both sides: digits MLP 64-32-10, IID split, batch 16, SGD lr 0.1, 1 local epoch, the "
              "same initial weights and batches; median round of rounds 2-10. One system at a time (never two "
              "Rays at once).",
              "", _load_note(LOADS, info["cores"]),
              "", "Load average (1, 5, 15 min) before and after each size's syft_lab + Flower block: " +
              "; ".join(f"{n} clients {', '.join(f'{v:.1f}' for v in b)} -> {', '.join(f'{v:.1f}' for v in a)}"
                        for n, (b, a) in LOADS.items()) + ".",
              "", "Made by `.venv/bin/python benchmarks/bench_flower.py` (see its docstring for the setup).", "",
              text, ""]
        (HERE / "flower_results.md").write_text("\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
