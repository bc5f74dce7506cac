// A DOM for node's test runner (linkedom): enough for the views' rendering helpers.
import { parseHTML } from "linkedom";

export function installDom() {
  const { window, document } = parseHTML("<!doctype html><html><head></head><body></body></html>");
  globalThis.window = window;
  globalThis.document = document;
  for (const k of ["HTMLElement", "Node", "Element", "Event", "KeyboardEvent", "MouseEvent"]) {
    if (window[k] && !globalThis[k]) globalThis[k] = window[k];
  }
  globalThis.requestAnimationFrame = (f) => setTimeout(f, 0);
  // linkedom tracks no focus: an element's focus() makes it document.activeElement (body when
  // it leaves the document), as a browser does
  let focused = null;
  window.HTMLElement.prototype.focus = function focus() { focused = this; };
  Object.defineProperty(document, "activeElement", {
    configurable: true,
    get: () => (focused && focused.isConnected ? focused : document.body),
  });
  return document;
}
