// The world view's legend: what each mark, badge and arrow means.

import { LOCAL } from "../dom.js";

export function legendHTML() {
  const item = (sample, text) => `<li>${sample}<span>${text}</span></li>`;
  return `<ul class="syft-legend-list">${[
    item('<svg width="34" height="10"><path d="M1 5 H28" class="syft-legend-arrow"/><path d="M27 1 L33 5 L27 9 z" class="syft-arrowhead"/></svg>',
      "a pointer (its row, left) stands for an object on a worker (the row it points to); arrows run between lanes, never across rows; hover a row to light up its pair"),
    item('<svg width="34" height="10"><path d="M1 5 H28" class="syft-legend-arrow syft-legend-weak"/></svg>',
      '<b>weak</b>: a pointer that does not own its object (search results): dropping it deletes nothing; an owning pointer (solid) deletes its object when the last one goes'),
    item('<span class="syft-pointed">← x_ptr</span>', "the variables that point at this object"),
    item('<span class="syft-held">held</span>', "data the worker holds itself (worker.load): no pointer owns it"),
    item('<span class="syft-badge-gone">gone<span class="syft-gone-where">: moved to alice</span></span>',
      "a pointer a variable still names, whose object was fetched or moved away (it says where): the row stays while the name is bound"),
    item('<span class="syft-badge-gone">dangling</span>', "a pointer to a worker that is closed or unreachable (its lane is greyed)"),
    item('<span class="syft-legend-lane"></span>', `one colour per worker: its lane, its pointers' chips and arrows ('${LOCAL}' is the notebook)`),
    item('<span class="syft-share" style="--syft-group-hue:205">share 1/2</span>',
      "one share of a secret (its value is never shown: alone it reveals nothing); hover or click one to light up its siblings on the other workers"),
    item('<span class="syft-lane-state syft-state-connected">connected</span>',
      "a worker process; <i>disconnected</i>: reconnects on the next call; <i>unreachable</i>, <i>closed</i>: down"),
    item('<span class="syft-legend-new">new</span><span class="syft-legend-changed">changed</span><span class="syft-ghost-sample">left</span>',
      "after a cell or a click: what appeared, changed, or left (and where it went)"),
  ].join("")}</ul>`;
}
