"""Static SVG renderings of the inspection model: the text/html fallback for places where
widgets cannot run (nbconvert, notebook viewers, a notebook opened without a kernel).

They draw the same dicts as the widget, in a simpler layout, with colours that read on light
and dark pages (text in currentColor, translucent fills).
"""
from __future__ import annotations

from html import escape

from ..ids import short
from ..inspection.text import fmt_size  # the text renderer's sizes
from ..tensors.nodes import LOCAL_OWNER, is_edge, tree_from_list

PALETTE = (330, 95, 30, 280, 205, 180, 0, 150)  # hues; js/widget/dom.js has the same list
FONT = "font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:11px"
MAX_ROWS = 40  # per lane in the static world picture


def worker_hue(worker_id: str) -> int | None:
    """The hue of a worker's colour; None for "me" (drawn in neutral grey). Same hash as the JS."""
    if worker_id == LOCAL_OWNER:
        return None
    h = 2166136261
    for ch in worker_id:
        h ^= ord(ch)
        h = (h * 16777619) & 0xFFFFFFFF
    return PALETTE[h % len(PALETTE)]


def _colour(worker_id: str) -> str:
    hue = worker_hue(worker_id)
    return "hsl(0,0%,55%)" if hue is None else f"hsl({hue},65%,50%)"


def _t(x, y, text, extra="") -> str:
    return f'<text x="{x}" y="{y}" fill="currentColor"{extra}>{escape(str(text))}</text>'


def clip_middle(text, n: int) -> str:
    """``text`` in ``n`` characters, cut in the middle: what tells names apart (a path's end, an
    index, a share number) stays; js/widget/dom.js cuts the same way."""
    text = str(text)
    if len(text) <= n:
        return text
    head = (n - 1) // 2
    return text[:head] + "\u2026" + text[len(text) - (n - 1 - head):]


def _t_full(x, y, text, n: int, extra="", cut: str | None = None) -> str:
    """A text cut to ``n`` characters (in the middle, or as ``cut`` says), with the whole of it
    as its tooltip."""
    cut = clip_middle(text, n) if cut is None else cut
    if cut == str(text):
        return _t(x, y, text, extra)
    return (f'<text x="{x}" y="{y}" fill="currentColor"{extra}>{escape(cut)}'
            f'<title>{escape(str(text))}</title></text>')


def _svg(width, height, body, label) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="syft-lab-static" width="{width}" '
            f'height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="{escape(label)}" '
            f'style="{FONT};max-width:100%">{"".join(body)}</svg>')


def shape_text(node: dict) -> str:
    if "dtype" not in node and "shape" not in node:
        return ""
    shape = node.get("shape")
    return f"{node.get('dtype', '?')}[{', '.join(map(str, shape))}]" if shape is not None else str(node.get("dtype", ""))


def node_lines(node: dict) -> list[str]:
    """The text lines of one chain box: its label and id, shape and owner, then what its layer
    displays (``display.lines``: any layer type, no renderer change), annotations and tags."""
    kind = node.get("kind")
    display = node.get("display") or {}
    label = display.get("label") or node.get("type", kind)
    badge = f"  [{display['badge']}]" if display.get("badge") else ""
    head = f"{label}  {short(node['id']) if isinstance(node.get('id'), int) else ''}".rstrip() + badge
    lines = [head]
    # a shared value lives on no worker: its box says so, not "on me" (issue 26.7)
    where = "held by nobody" if node.get("distributed") else f"on {node.get('owner')}" if node.get("owner") else ""
    meta = " ".join(x for x in (shape_text(node), where) if x)
    if meta:
        lines.append(meta)
    if "display" in node:
        lines.extend(display.get("lines") or [])
    elif is_edge(node):  # a pointer node of before version 2 (no display)
        state = "" if node.get("state", "ok") == "ok" else f" ({node['state']})"
        lines.append(f"-> {node.get('location')}:{short(node['id_at_location'])}{state}")
    elif kind == "unreachable":
        lines.append(str(node.get("error", ""))[:80])
    if kind == "plan" and node.get("sent_to"):
        lines.append(f"sent to {', '.join(node['sent_to'])}")
    for a in node.get("annotations") or ():
        lines.append(f"{a.get('label')}: {a.get('value')}")
    if node.get("tags"):
        lines.append(" ".join(node["tags"]))
    return [line[:90] for line in lines]


CHAIN_WIDTH = 460  # a plain chain's boxes
BRANCH_MIN = 230  # each branch of a node with several children (a share per worker)
BRANCH_GAP = 10


def _tree_width(node: dict) -> int:
    kids = node.get("children") or []
    if len(kids) <= 1:
        return max(CHAIN_WIDTH, _tree_width(kids[0]) if kids else 0)
    return max(CHAIN_WIDTH, sum(max(BRANCH_MIN, _branch_width(k)) for k in kids) + BRANCH_GAP * (len(kids) - 1))


def _branch_width(node: dict) -> int:
    kids = node.get("children") or []
    if len(kids) <= 1:
        return max(BRANCH_MIN, _branch_width(kids[0]) if kids else 0)
    return sum(max(BRANCH_MIN, _branch_width(k)) for k in kids) + BRANCH_GAP * (len(kids) - 1)


def _draw(node: dict, x: int, y: int, w: int, home: str, body: list, top: bool) -> int:
    """Draw ``node`` and its subtree in the column [x, x + w); returns the y below it."""
    lines = node_lines(node)
    h = 8 + 14 * len(lines)
    owner = node.get("owner", home)
    col = _colour(owner)
    remote = owner != home
    bx = x + (14 if remote and top else 0)
    bw = w - (bx - x)
    body.append(f'<rect x="{bx}" y="{y}" width="{bw}" height="{h}" rx="4" fill="{col}" fill-opacity="0.12" '
                f'stroke="{col}" stroke-width="{1.5 if remote else 1}"/>')
    for k, line in enumerate(lines):
        body.append(_t(bx + 8, y + 16 + 14 * k, line, ' font-weight="bold"' if k == 0 else ""))
    y += h
    kids = node.get("children") or []
    if not kids:
        return y
    if len(kids) == 1:
        kid = kids[0]
        body.append(f'<path d="M {x + w // 2} {y + 1} v 10" stroke="currentColor" stroke-opacity="0.5"/>')
        if kid.get("owner", home) != owner:
            body.append(_t(x + w // 2 + 8, y + 10, f"on {kid.get('owner')}",
                           f' fill-opacity="0.7" style="fill:{_colour(kid.get("owner", ""))}"'))
        return _draw(kid, x, y + 12, w, home, body, top)
    # several children: one column per branch, side by side, each in its worker's colour
    widths = [max(BRANCH_MIN, _branch_width(k)) for k in kids]
    scale = (w - BRANCH_GAP * (len(kids) - 1)) / sum(widths)
    cx, bottom = x, y
    for kid, kw in zip(kids, widths):
        kw = int(kw * scale)
        body.append(f'<path d="M {x + w // 2} {y + 1} L {cx + kw // 2} {y + 11}" stroke="currentColor" '
                    f'stroke-opacity="0.5" fill="none"/>')
        label = f"on {kid.get('owner')}" + (f" -> {kid['location']}" if kid.get("location") else "")
        body.append(_t(cx + 4, y + 22, label, f' fill-opacity="0.8" style="fill:{_colour(kid.get("location") or kid.get("owner", ""))}"'))
        bottom = max(bottom, _draw(kid, cx, y + 26, kw, home, body, False))
        cx += kw + BRANCH_GAP
    return bottom


def chain_svg(root, title: str | None = None) -> str:
    """A chain tree (a root node, or a version 1 list of nodes) as boxes: a plain chain is a
    column of boxes as before; a node with several children (the shares of a secret) opens
    one column per branch, coloured by worker."""
    if isinstance(root, list):
        root = tree_from_list(root)
    body, y = [], 4
    if title:
        body.append(_t(6, 14, title, ' font-weight="bold"'))
        y = 22
    width = _tree_width(root)
    y = _draw(root, 4, y, width - 8, root.get("owner", LOCAL_OWNER), body, True)
    return _svg(width, y + 4, body, title or "chain")


LANE_W, ROW_H, LANE_CHARS = 300, 16, 44  # a lane of the static world picture, its line, its characters
LEDGER_ROWS = 8  # a lane's newest records in the static picture


def _row_names(o: dict) -> list[str]:
    return list(o.get("names") or []) + list(o.get("held_in") or [])


def _pointed_by(world: dict) -> dict:
    """(worker, object id) -> the names of the pointers to it (a target row says who points)."""
    out: dict = {}
    for lane in world.get("workers", []):
        for o in lane.get("objects", []):
            if is_edge(o) and _row_names(o):
                out.setdefault((o.get("location"), o.get("id_at_location")), []).extend(_row_names(o))
    return out


def _row_text(o: dict, pointed_by: list[str] | None = None, n: int | None = None) -> str:
    """A row in ``n`` characters: its names cut in the middle (their ends tell them apart), then
    its type, shape and where it points, cut at the end."""
    names = ", ".join(_row_names(o))
    if not names and pointed_by:
        names = "\u2190 " + ", ".join(pointed_by)
    where = f" -> {o['location']}" if is_edge(o) else ""
    state = f" ({o['state']})" if o.get("state") not in (None, "ok") else ""
    what = f"{o.get('type', '')} {shape_text(o)}".strip() + where + state
    if not names:
        return f"{short(o['id'])} {what}"
    if n is None:
        return f"{names} = {what}"
    names = clip_middle(names, max(26, n - len(what) - 3))
    return _clip(f"{names} = {what}", n)


def _ledger_lines(ledger: dict | None) -> list[tuple[str, str]]:
    """A lane's record as (text, style) lines: totals, material, then the newest records."""
    if not ledger or not ledger.get("seq"):
        return []

    ins = sum(c for k, (c, _b) in ledger.get("totals", {}).items() if k.endswith(" in"))
    outs = sum(c for k, (c, _b) in ledger.get("totals", {}).items() if not k.endswith(" in"))
    lines = [(f"record \u2193{ins} \u2191{outs}", "head")]
    for key, (count, nbytes) in sorted(ledger.get("totals", {}).items()):
        lines.append((f"{count} {key} ({fmt_size(nbytes)})", "muted"))
    if ledger.get("material"):
        lines.append(("material made: " + ", ".join(f"{n} {k}" for k, n in sorted(ledger["material"].items())), "muted"))
    for r in list(reversed(ledger.get("records") or []))[:LEDGER_ROWS]:
        arrow = "\u2193 from" if r.get("direction") == "in" else "\u2191 to"
        cell = f" [{r['cell']}]" if r.get("cell") is not None else ""
        op = f" {r['op']}" if r.get("op") else ""
        lines.append((f"{r.get('kind')} {arrow} {r.get('peer')} {fmt_size(r.get('bytes') or 0)}{cell}{op}", ""))
    older = ledger["seq"] - min(len(ledger.get("records") or []), LEDGER_ROWS)
    if older > 0:
        lines.append((f"... {older} older record(s)", "muted"))
    return lines


def world_svg(world: dict, focus: list[str] | None = None) -> str:
    """Each worker as a lane: its objects (names cut in the middle), its record (the ledger
    view: totals and newest records), and arrows from pointers to what they point at."""
    lanes = [w for w in world.get("workers", []) if not focus or w["id"] in focus]
    top = 34
    pos = {}
    body = []
    bottom = top
    pointers = _pointed_by(world)
    for li, lane in enumerate(lanes):
        x = 4 + li * (LANE_W + 10)
        col = _colour(lane["id"])
        objs = lane.get("objects", [])
        shown = objs[:MAX_ROWS]
        lines = [(_row_text(o, pointers.get((lane["id"], o["id"]))), "",
                  _row_text(o, pointers.get((lane["id"], o["id"])), LANE_CHARS)) for o in shown]
        if len(objs) > len(shown):
            lines.append((f"... {len(objs) - len(shown)} more", "muted", None))
        lines += [(text, style, None) for text, style in _ledger_lines(lane.get("ledger"))]
        height = top + len(lines) * ROW_H + 8
        bottom = max(bottom, height)
        body.append(f'<rect x="{x}" y="2" width="{LANE_W}" height="{height}" rx="5" fill="{col}" '
                    f'fill-opacity="0.08" stroke="{col}"/>')
        state = lane.get("state", "")
        body.append(_t(x + 8, 18, clip_middle(f"{lane['id']} ({lane.get('kind', '')}{', ' + state if state else ''})",
                                              LANE_CHARS), ' font-weight="bold"'))
        body.append(_t(x + 8, 30, f"{len(objs)} object(s)", ' fill-opacity="0.7"'))
        for r, (text, style, cut) in enumerate(lines):
            y = top + r * ROW_H + 12
            if r < len(shown):
                pos[(lane["id"], shown[r]["id"])] = (x, y - 4)
            extra = {"muted": ' fill-opacity="0.7"', "head": ' font-weight="bold"'}.get(style, "")
            body.append(_t_full(x + 8, y, text, LANE_CHARS, extra, cut))
    for lane in lanes:
        for o in lane.get("objects", [])[:MAX_ROWS]:
            if not is_edge(o):
                continue
            a = pos.get((lane["id"], o["id"]))
            b = pos.get((o.get("location"), o.get("id_at_location")))
            if a is None or b is None:
                continue
            x1 = a[0] + LANE_W - 6 if b[0] > a[0] else a[0] + 4
            x2 = b[0] + 4 if b[0] > a[0] else b[0] + LANE_W - 6
            col = _colour(o.get("location", ""))
            body.append(f'<path d="M {x1} {a[1]} C {(x1 + x2) / 2} {a[1]}, {(x1 + x2) / 2} {b[1]}, {x2} {b[1]}" '
                        f'fill="none" stroke="{col}" stroke-width="1.2" marker-end="url(#syft-arrow)"/>')
    defs = ('<defs><marker id="syft-arrow" viewBox="0 0 8 8" refX="7" refY="4" markerWidth="7" markerHeight="7" '
            'orient="auto"><path d="M0,0 L8,4 L0,8 z" fill="currentColor" fill-opacity="0.6"/></marker></defs>')
    width = max(1, len(lanes)) * (LANE_W + 10)
    return _svg(width, bottom + 10, [defs] + body, "world: workers and their objects")


def plan_layers(graph: dict) -> dict[str, int]:
    """A longest-path layering of a plan graph (the static picture's simple layout)."""
    ids = [n["id"] for n in graph.get("nodes", [])]
    preds: dict[str, list[str]] = {i: [] for i in ids}
    for e in graph.get("edges", []):
        if e.get("to") in preds and e.get("from") in preds:
            preds[e["to"]].append(e["from"])
    succs: dict[str, list[str]] = {i: [] for i in ids}
    indeg = {i: len(preds[i]) for i in ids}
    for i in ids:
        for p in preds[i]:
            succs[p].append(i)
    layer = {i: 0 for i in ids}
    ready = [i for i in ids if indeg[i] == 0]
    while ready:  # Kahn's order; nodes on a cycle (a plan has none) stay in layer 0
        i = ready.pop()
        for s in succs[i]:
            layer[s] = max(layer[s], layer[i] + 1)
            indeg[s] -= 1
            if indeg[s] == 0:
                ready.append(s)
    return layer


REGION_HUE = {"forward": 205, "backward": 25, "update": 330}  # style.css .syft-region-*
ROLE_HUE = {"input": 140, "output": 210, "state": 30, "constant": 280}
BOX_CHARS = 20  # characters of 11px monospace that fit a 150 px box with its padding


def _clip(text, n: int) -> str:
    text = str(text)
    return text if len(text) <= n else text[:n - 1] + "\u2026"


def plan_svg(node: dict) -> str:
    """The plan's graph in a simple layered layout: role colours, regions of a training step as
    a coloured edge on their ops, in-place writes in dashes, scalar constants as small pills,
    shapes beside the edges, and the workers that hold the plan now."""
    graph = node.get("graph") or {"nodes": [], "edges": []}
    layer = plan_layers(graph)
    by_layer: dict[int, list[dict]] = {}
    for n in graph.get("nodes", []):
        by_layer.setdefault(layer.get(n["id"], 0), []).append(n)
    bw, bh, gx, gy = 150, 36, 16, 34
    pos = {}
    cols = max((len(v) for v in by_layer.values()), default=1)
    for d, ns in sorted(by_layer.items()):
        for k, n in enumerate(ns):
            pos[n["id"]] = (8 + k * (bw + gx), 30 + d * (bh + gy))
    where = f"  sent to {', '.join(node['sent_to'])}" if node.get("sent_to") else ""
    left = [w for w in node.get("left") or [] if w not in (node.get("sent_to") or [])]
    if left:
        where += f"  (no longer on {', '.join(left)})"
    body = [_t(8, 16, f"Plan {node.get('name', '')}  {len(graph.get('nodes', []))} node(s){where}", ' font-weight="bold"')]
    labels = {n["id"]: n.get("label") or n.get("op") or n["id"] for n in graph.get("nodes", [])}
    for e in graph.get("edges", []):
        a, b = pos.get(e.get("from")), pos.get(e.get("to"))
        if a and b:
            body.append(f'<line x1="{a[0] + bw / 2}" y1="{a[1] + bh}" x2="{b[0] + bw / 2}" y2="{b[1]}" '
                        f'stroke="currentColor" stroke-opacity="0.5"/>')
            if e.get("shape") is not None:  # beside the line's middle, not on it
                body.append(_t((a[0] + b[0]) / 2 + bw / 2 + 6, (a[1] + bh + b[1]) / 2 + 4,
                               f"[{', '.join(map(str, e['shape']))}]", ' fill-opacity="0.7"'))
    for n in graph.get("nodes", []):
        x, y = pos[n["id"]]
        hue = ROLE_HUE.get(n.get("role"))
        col = f"hsl({hue},60%,50%)" if hue is not None else "hsl(0,0%,55%)"
        if n.get("region") in REGION_HUE:
            col = f"hsl({REGION_HUE[n['region']]},70%,50%)"
        dash = ' stroke-dasharray="4 2"' if n.get("role") == "state" or n.get("inplace") else ""
        width = 2 if n.get("inplace") else 1
        label = str(n.get("label") or n.get("op") or n["id"])
        if n.get("scalar"):
            body.append(f'<rect x="{x + bw / 2 - 30}" y="{y + 8}" width="60" height="20" rx="10" fill="{col}" '
                        f'fill-opacity="0.12" stroke="{col}" stroke-dasharray="2 2"/>')
            body.append(_t(x + bw / 2, y + 22, _clip(label, 8), ' text-anchor="middle"'))
            continue
        body.append(f'<rect x="{x}" y="{y}" width="{bw}" height="{bh}" rx="5" fill="{col}" fill-opacity="0.12" '
                    f'stroke="{col}" stroke-width="{width}"{dash}/>')
        if n.get("inplace"):
            sub = "in-place -> " + ", ".join(str(labels.get(w, w)) for w in n.get("writes", []))
        else:
            sub = f"{n.get('role', '')} {shape_text(n)}" + (f" {n['region']}" if n.get("region") else "")
        body.append(_t(x + 6, y + 15, _clip(label, BOX_CHARS), ' font-weight="bold"'))
        body.append(_t(x + 6, y + 29, _clip(sub.strip(), BOX_CHARS), ' fill-opacity="0.7"'))
    height = 30 + (max(layer.values(), default=0) + 1) * (bh + gy)
    return _svg(max(300, 16 + cols * (bw + gx)), height, body, f"plan {node.get('name', '')}")
