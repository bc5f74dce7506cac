"""How far 200 steps of encrypted training drift from the same run in plaintext, at precision 3 and 4
(issue 30, "Precision"). A script, not a test (it takes minutes):

    .venv/bin/python tests/smpc/drift_200_steps.py [--steps 200] [--out test-artifacts/drift.json]

Two runs per precision, each beside its plaintext twin (same seed, same batches, same steps):
- "regression": the linear model of tests/smpc/test_learning.py (4 -> 1, MSE, SGD lr 0.1, 32 rows;
  the targets are exact, so the loss falls towards 0 and relative gaps grow where it is tiny);
- "digits": the 64-16-10 MLP of tests/smpc/test_digits.py on scikit-learn's digits (cross-entropy,
  SGD lr 0.5, batches of 32 from 1400 training rows), accuracy on the other 397.
Per run: the largest relative loss gap |l - l_plain| / l_plain over the steps (and over the steps
whose plaintext loss is at least 1% of the first), the first step past 2%, the largest parameter
difference at the end, and (digits) both accuracies. docs/secure-computation.md quotes the result.
"""
import argparse
import copy
import json
import platform
import subprocess
import time
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

import syft_lab as sy

sy.hook()


def regression_data():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(32, 4, generator=g)
    return x, x @ torch.tensor([[1.0], [-2.0], [0.5], [0.0]]) + 0.3


def digits_data():
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    x, y = torch.tensor(x, dtype=torch.float32) / 16, torch.tensor(y)
    perm = torch.randperm(len(x), generator=torch.Generator().manual_seed(0))
    x, y = x[perm], y[perm]
    return x[:1400], y[:1400], x[1400:], y[1400:]


def run(kind, precision, steps, parties, provider):
    torch.manual_seed(1 if kind == "regression" else 0)
    if kind == "regression":
        model, lr = nn.Linear(4, 1), 0.1
        x, y = regression_data()
        batches = lambda s: (x, y)  # noqa: E731
        loss_fn = F.mse_loss
    else:
        model, lr = nn.Sequential(nn.Linear(64, 16), nn.ReLU(), nn.Linear(16, 10)), 0.5
        xtr, ytr, xte, yte = digits_data()
        batches = lambda s: (xtr[(s * 32) % 1400:(s * 32) % 1400 + 32], ytr[(s * 32) % 1400:(s * 32) % 1400 + 32])  # noqa: E731
        loss_fn = F.cross_entropy
    ref = copy.deepcopy(model)
    model.fix_precision(precision=precision).share(*parties, crypto_provider=provider)
    opt, ref_opt = torch.optim.SGD(model.parameters(), lr=lr), torch.optim.SGD(ref.parameters(), lr=lr)
    losses, ref_losses = [], []
    start = time.time()
    for s in range(steps):
        xb, yb = batches(s)
        sx = xb.fix_precision(precision=precision).share(*parties, crypto_provider=provider)
        target = yb.fix_precision(precision=precision).share(*parties, crypto_provider=provider) \
            if kind == "regression" else yb
        opt.zero_grad()
        loss = loss_fn(model(sx), target)
        loss.backward()
        opt.step()
        losses.append(loss.get().float_precision().item())
        ref_opt.zero_grad()
        ref_loss = loss_fn(ref(xb), yb)
        ref_loss.backward()
        ref_opt.step()
        ref_losses.append(ref_loss.item())
    model.get().float_precision()
    gaps = [abs(a - b) / b for a, b in zip(losses, ref_losses)]
    floor = 0.01 * ref_losses[0]
    out = {"kind": kind, "precision": precision, "steps": steps, "seconds": round(time.time() - start, 1),
           "max_rel_loss_gap": max(gaps),
           "max_rel_loss_gap_above_1pct_of_first_loss": max(
               [g for g, b in zip(gaps, ref_losses) if b >= floor], default=None),
           "first_step_over_2pct": next((i for i, g in enumerate(gaps) if g > 0.02), None),
           "final_loss": losses[-1], "final_plain_loss": ref_losses[-1],
           "max_param_diff": max((p - q).abs().max().item() for p, q in zip(model.parameters(), ref.parameters()))}
    if kind == "digits":
        with torch.no_grad():
            out["accuracy"] = (model(xte).argmax(1) == yte).float().mean().item()
            out["plain_accuracy"] = (ref(xte).argmax(1) == yte).float().mean().item()
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--kinds", nargs="+", default=["regression", "digits"])
    ap.add_argument("--precisions", nargs="+", type=int, default=[3, 4])
    ap.add_argument("--out", default="test-artifacts/drift.json")
    args = ap.parse_args()
    ws = [sy.VirtualWorker(n) for n in ("alice", "bob", "carol")]
    results = []
    for kind in args.kinds:
        for p in args.precisions:
            r = run(kind, p, args.steps, ws[:2], ws[2])
            print(json.dumps(r), flush=True)
            results.append(r)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"commit": commit, "machine": platform.platform(), "results": results},
                                         indent=1))


if __name__ == "__main__":
    main()
