// The history's elements (history.js says what they show): the timeline of steps, newest
// first; the stepper (◀ step i of n ▶); the banner while a past world is replayed.

import { h } from "../dom.js";
import { stepperState, timelineRows } from "./history.js";

/** onShow(i): show history step i (-1: now); onStep(d): one step back (-1) or on (+1).
 * Returns {timeline, stepper, replay, render(history, replaying), showReplay(text) ("": hide)}. */
export function createTimeline({ onShow, onStep }) {
  const list = h("ol", { class: "syft-timeline-list" });
  const summary = h("summary", {}, "History");
  const timeline = h("details", { class: "syft-timeline" }, summary, list);
  const replayText = h("span", {});
  const replay = h("div", { class: "syft-replay", hidden: true, role: "status" }, replayText,
    h("button", { class: "syft-btn syft-replay-back", type: "button", onclick: () => onShow(-1) }, "Back to now"));
  const prevBtn = h("button", { class: "syft-btn syft-step-prev", type: "button", title: "the step before (←)",
    "aria-label": "previous step", onclick: () => onStep(-1) }, "◀");
  const nextBtn = h("button", { class: "syft-btn syft-step-next", type: "button", title: "the step after (→); Esc: now",
    "aria-label": "next step", onclick: () => onStep(1) }, "▶");
  const stepPos = h("span", { class: "syft-step-pos syft-muted" });
  const stepper = h("span", { class: "syft-stepper", role: "group", "aria-label": "history steps" }, prevBtn, stepPos, nextBtn);

  function render(history, replaying) {
    const n = history.length - 1;
    summary.textContent = `History · ${n} step${n === 1 ? "" : "s"}`;
    list.replaceChildren(...timelineRows(history, replaying).map((r) => h("li", {
      class: `syft-step${r.shown ? " syft-step-shown" : ""}`, "data-step": String(r.i), "data-types": r.types.join(",") },
    h("button", { class: "syft-step-btn", type: "button", title: "show the world as it was after this step", onclick: () => onShow(r.show) },
      h("span", { class: "syft-step-where" }, r.where),
      h("span", { class: "syft-step-what" }, r.what),
      r.code ? h("code", { class: "syft-step-code" }, r.code) : null))));
    const st = stepperState(history.length, replaying);
    stepper.hidden = st.hidden;
    stepPos.textContent = st.text;
    prevBtn.disabled = st.prevOff;
    nextBtn.disabled = st.nextOff;
  }

  function showReplay(text) {
    replay.hidden = !text;
    if (text) replayText.textContent = text;
  }

  return { timeline, stepper, replay, render, showReplay };
}
