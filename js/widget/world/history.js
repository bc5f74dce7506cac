// The world view's history: the steps the kernel reported (world.step, syft_lab/widget/diff.py
// describe), which step is shown, stepping and replay, and what changed between two worlds
// (rows that appeared or changed are marked for a while; what left stays as a ghost).
// Pure: data in, data out (no DOM, no clock: `now` is an argument). timeline.js draws it.

import { isEdge, objKey } from "../dom.js";
import { indexWorld } from "../patch.js";

export const HISTORY = 200; // steps the timeline keeps
export const MARK_MS = 5000; // how long appeared and changed rows stay highlighted
export const GHOST_MS = 7000; // how long a ghost of what left stays

const plural = (n, one) => `${n} ${one}${n === 1 ? "" : "s"}`;
const STORED_HOW = { sent: "sent to", computed: "computed on", moved: "moved to" };

const EVENT_TEXT = {
  stored: (e) => `${STORED_HOW[e.how] || "stored on"} ${e.worker}`,
  moved: (e) => `moved ${e.worker} → ${e.to}`,
  fetched: (e) => `fetched from ${e.worker}`,
  deleted: (e) => `deleted on ${e.worker}`,
  "plan run": (e) => `plan ran on ${e.worker}`,
  "worker added": (e) => `worker ${e.worker} added`,
  "worker down": (e) => `${e.worker} ${e.state || "down"}`,
  "worker back": (e) => `${e.worker} back`,
  reconstructed: (e) => `reconstructed ${e.secret} from ${plural((e.workers || []).length, "share")}`,
  trained: (e) => `trained ${plural((e.clients || []).length, "client")}${e.round ? ` (round ${e.round})` : ""}`,
  averaged: (e) => `averaged ${plural(e.models ?? 0, "model")}${e.worker ? ` on ${e.worker}` : ""}`,
  ops: (e) => `${plural(e.count, "op")} on ${e.worker}`,
  named: () => "named", // (its names follow)
};

// what a step says first: what a kit or a protocol did, then what appeared and left
const FIRST = ["trained", "averaged", "reconstructed"];

export function eventText(e) {
  const f = EVENT_TEXT[e.type];
  const what = f ? f(e) : `${e.type} ${e.worker ?? ""}`;
  return e.names && e.names.length ? `${what} (${e.names.join(", ")})` : what;
}

/** A step's other events counted: "3 sent, 2 deleted, 120 ops". */
function countedText(evs) {
  const counts = new Map();
  for (const e of evs) {
    const t = e.type === "stored" ? e.how || "stored" : e.type;
    counts.set(t, (counts.get(t) || 0) + (e.type === "ops" ? e.count : 1));
  }
  return [...counts].map(([t, n]) => `${n} ${t}`).join(", ");
}

/** One line for a step: what a kit did first (trained, averaged, reconstructed), then its
 * other events (each, or counted by type when there are many). */
export function stepSummary(step) {
  const evs = step?.events || [];
  if (!evs.length) return "nothing changed in the world";
  const first = FIRST.flatMap((t) => evs.filter((e) => e.type === t)).map(eventText);
  const rest = evs.filter((e) => !FIRST.includes(e.type));
  const restText = !rest.length ? "" : rest.length <= 2 ? rest.map(eventText).join("; ") : countedText(rest);
  return [...first, restText].filter(Boolean).join("; ");
}

/** Where a step came from: "start" (none), "button", "[cell]" or "event". */
export function stepWhere(step) {
  if (!step) return "start";
  return step.by === "action" ? "button" : step.cell !== null && step.cell !== undefined ? `[${step.cell}]` : "event";
}

/** A history entry in words: "[3] moved alice → bob", or "when the view opened". */
export function stepLabel(entry) {
  const st = entry.step;
  if (!st) return "when the view opened";
  return `${stepWhere(st)} ${stepSummary(st)}`;
}

/** What the replay banner says while history entry `entry` is shown. */
export function replayText(entry) {
  const code = entry.step?.code ? `: ${entry.step.code.split("\n")[0]}` : "";
  return `Showing the world as it was after ${stepLabel(entry)}${code} (buttons are off). `;
}

/**
 * The history after the world `next` arrives (the world before it was `prev`, null at first):
 * `history` itself when `next` is already its last world, else a new array. Entries are
 * {rev, step, world}; the first is the world when the view opened (step null); a new revision
 * without a step is an "event" step; a step of the cell run the last step came from (a refresh
 * while it ran) replaces that step, their events joined. At most `max` entries: the oldest steps after the first go.
 */
export function recordStep(history, prev, next, max = HISTORY) {
  if (history.length && history[history.length - 1].world === next) return history;
  const out = history.slice();
  if (!out.length) out.push({ rev: prev?.rev ?? next.rev, step: null, world: prev || next });
  const last = out[out.length - 1];
  if (prev && next.step && next.rev !== prev.rev && sameCellRun(last.step, next.step)) {
    // a long cell refreshes while it runs and again when it ends: one run of a cell is one step
    const events = joinEvents(last.step.events || [], next.step.events || []);
    out[out.length - 1] = { rev: next.rev, step: { ...next.step, events }, world: next };
  } else if (prev && next.step && next.rev !== prev.rev) out.push({ rev: next.rev, step: next.step, world: next });
  else if (prev && next.rev !== prev.rev) out.push({ rev: next.rev, step: { by: "event", code: "", events: [] }, world: next });
  else if (!prev) out[0] = { ...out[0], world: next };
  while (out.length > max) out.splice(1, 1);
  return out;
}

/** The events of two refreshes of one cell run: a later event about the same object (the
 * kernel says it again once a variable names it: diff.restate) takes the earlier one's place. */
function joinEvents(before, after) {
  const out = before.slice();
  for (const e of after) {
    const i = e.id == null ? -1 : out.findIndex((b) => b.id === e.id && b.type === e.type && b.worker === e.worker);
    if (i < 0) out.push(e); else out[i] = e;
  }
  return out;
}

/** Whether two steps come from one run of one cell (its In[] number is new at each run). */
function sameCellRun(a, b) {
  return !!a && a.by === "cell" && b.by === "cell" && a.cell !== null && a.cell !== undefined && a.cell === b.cell;
}

/** The step replayed when step i of a history of `length` entries is asked for: -1 (now) for
 * the last one or anything outside. */
export const shownStep = (i, length) => (i >= 0 && i < length - 1 ? i : -1);

/** The step one back (d = -1) or on (+1) from the one replayed (-1: now), clamped; null when
 * the history has no step to go to. */
export function stepFrom(length, replaying, d) {
  const last = length - 1;
  if (last < 1) return null;
  const at = replaying >= 0 ? replaying : last;
  return Math.max(0, Math.min(last, at + d));
}

/** The stepper's state: "step at of n", which buttons are off, hidden without steps. */
export function stepperState(length, replaying) {
  const n = length - 1;
  const at = replaying >= 0 ? replaying : n;
  return { hidden: n < 1, at, n, text: `step ${at} of ${n}`, prevOff: at <= 0, nextOff: at >= n };
}

/** The timeline's rows, newest first: {i, where, what, code (two lines at most), types (of
 * its events), shown (replayed now), show (the step a click shows: -1 for the last)}. */
export function timelineRows(history, replaying) {
  return history.map((entry, i) => {
    const st = entry.step;
    return {
      i,
      where: stepWhere(st),
      what: st ? stepSummary(st) : "the world when this view opened",
      code: st?.code ? st.code.split("\n").slice(0, 2).join("; ") : "",
      types: [...new Set((st?.events || []).map((e) => e.type))],
      shown: i === replaying,
      show: i === history.length - 1 ? -1 : i,
    };
  }).reverse();
}

/** What a ghost says: where an object went; for a pointer, what became of its object (a
 * pointer whose object was fetched or moved is gone: the view shows it so before it goes). */
export function ghostText(step, laneId, o) {
  const evs = step?.events || [];
  const e = evs.find((x) => x.worker === laneId && x.id === o.id);
  if (e?.type === "moved") return `moved to ${e.to}`;
  if (e?.type === "fetched") return "fetched to me";
  if (e?.type === "deleted") return "deleted";
  if (isEdge(o)) {
    const t = evs.find((x) => x.worker === o.location && x.id === o.id_at_location);
    if (t?.type === "fetched") return "gone: its object was fetched";
    if (t?.type === "moved") return `gone: its object moved to ${t.to}`;
    if (t?.type === "deleted") return "dropped: its object was deleted";
    return "pointer dropped";
  }
  return "left";
}

/**
 * What changed from world `prev` to `next` (whose step says why), at time `now` (ms):
 * {marks: key -> {mark: "new"|"changed", until}, ghosts: lane id -> [{ghost, key, entry, at,
 * text, until}] (what left, at the row it had: `positions` is lane id -> (object id -> row
 * index) of the rows shown, else its place in the lane), gone: key -> {how, to} (a pointer
 * that became gone, and what the step did to its object)}.
 */
export function changesBetween(prev, next, now, positions = new Map()) {
  const marks = new Map();
  const ghosts = new Map();
  const gone = new Map();
  const before = indexWorld(prev);
  const after = indexWorld(next);
  for (const [key, { entry }] of after) {
    const old = before.get(key);
    if (isEdge(entry) && entry.state === "gone" && old && old.entry.state !== "gone" && !entry.gone_how) {
      const e = (next.step?.events || []).find((x) => x.worker === entry.location && x.id === entry.id_at_location);
      if (e && (e.type === "moved" || e.type === "fetched" || e.type === "deleted")) gone.set(key, { how: e.type, to: e.to });
    }
    if (!old) marks.set(key, { mark: "new", until: now + MARK_MS });
    else if (old.entry !== entry && JSON.stringify(old.entry) !== JSON.stringify(entry)) marks.set(key, { mark: "changed", until: now + MARK_MS });
  }
  for (const lane of prev.workers || []) {
    const objs = lane.objects || [];
    const shownAt = positions.get(lane.id);
    const at = new Map();
    objs.forEach((o, i) => at.set(o.id, shownAt?.get(o.id) ?? i));
    for (const o of objs) {
      const key = objKey(lane.id, o.id);
      if (after.has(key)) continue;
      if (!ghosts.has(lane.id)) ghosts.set(lane.id, []);
      ghosts.get(lane.id).push({ ghost: true, key, entry: o, at: at.get(o.id) ?? 0, text: ghostText(next.step, lane.id, o), until: now + GHOST_MS });
    }
  }
  return { marks, ghosts, gone };
}

/** The view's marks, ghosts and gone pointers `state` ({marks, ghosts, gone}) with `changes`
 * (changesBetween) added: new maps; a lane's ghost list is new only where ghosts were added. */
export function mergeChanges(state, changes) {
  const ghosts = new Map(state.ghosts);
  for (const [id, list] of changes.ghosts) ghosts.set(id, [...(ghosts.get(id) || []), ...list]);
  return {
    marks: new Map([...state.marks, ...changes.marks]),
    ghosts,
    gone: new Map([...state.gone, ...changes.gone]),
  };
}

/** `state` at time `now`: the marks and ghosts whose time is up removed. Returns {state,
 * expired: keys of the marks that ended, ghostsChanged}; a lane's ghost list keeps its
 * identity when none of its ghosts ended. */
export function expireChanges(state, now) {
  const marks = new Map();
  const expired = [];
  for (const [k, m] of state.marks) {
    if (m.until <= now) expired.push(k);
    else marks.set(k, m);
  }
  const ghosts = new Map();
  let ghostsChanged = false;
  for (const [id, list] of state.ghosts) {
    const left = list.filter((g) => g.until > now);
    if (left.length !== list.length) ghostsChanged = true;
    if (left.length === list.length) ghosts.set(id, list);
    else if (left.length) ghosts.set(id, left);
  }
  return { state: { ...state, marks, ghosts }, expired, ghostsChanged };
}

/** When the next mark or ghost ends (ms), Infinity when none is left. */
export function nextExpiry(state) {
  return Math.min(...[...state.marks.values()].map((m) => m.until), ...[...state.ghosts.values()].flat().map((g) => g.until));
}

/** A lane's rows with its ghosts put back where they were (a ghost's `at`, oldest first). */
export function withGhosts(items, ghostList) {
  if (!ghostList || !ghostList.length) return items;
  const out = items.slice();
  for (const g of [...ghostList].sort((a, b) => a.at - b.at)) out.splice(Math.min(g.at, out.length), 0, g);
  return out;
}
