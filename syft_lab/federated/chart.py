"""RoundChart: a live chart of federated rounds (loss and accuracy per client and global).

    chart = sy.federated.RoundChart()
    display(chart)                         # then train: fl.run(5, chart=chart)

A tiny anywidget (chart.mjs draws SVG): each ``add`` changes one synced trait, which reaches the
browser at once, while the cell still runs. Without a front end its text is a table.
"""
from __future__ import annotations

from pathlib import Path

import anywidget
import traitlets


class RoundChart(anywidget.AnyWidget):
    _esm = Path(__file__).with_name("chart.mjs").read_text(encoding="utf-8")  # text: a Path keeps instances alive
    rounds = traitlets.List().tag(sync=True)
    # the round running now: {"round": n, "clients": {worker id: metrics}}, one change per finished client
    running = traitlets.Dict().tag(sync=True)

    def client(self, round_no: int, worker_id: str, metrics: dict) -> None:
        """One client of round ``round_no`` finished (shown at once, before the round ends)."""
        done = self.running.get("clients", {}) if self.running.get("round") == round_no else {}
        self.running = {"round": round_no, "clients": {**done, worker_id: dict(metrics)}}

    def add(self, result) -> None:
        """Append one round (a RoundResult, or its ``as_dict()``)."""
        entry = result.as_dict() if hasattr(result, "as_dict") else dict(result)
        self.rounds = [*self.rounds, entry]  # a new list: traitlets syncs on assignment
        self.running = {}

    def clear(self) -> None:
        self.rounds, self.running = [], {}

    def text(self) -> str:
        lines = ["round  global loss  accuracy  clients (loss)"]
        for r in self.rounds:
            g = r.get("global") or {}
            clients = ", ".join(f"{k} {v['loss']:.4f}" for k, v in r.get("clients", {}).items())
            loss = f"{g['loss']:.4f}" if "loss" in g else "-"
            acc = f"{100 * g['accuracy']:.1f}%" if "accuracy" in g else "-"
            lines.append(f"{r['round']:>5}  {loss:>11}  {acc:>8}  {clients}")
        return "\n".join(lines)

    def _repr_mimebundle_(self, **kwargs):
        bundle = super()._repr_mimebundle_(**kwargs)
        if bundle is None:
            return None
        data, meta = bundle
        return {**data, "text/plain": self.text()}, meta
