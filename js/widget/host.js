// What the widget asks of the page that hosts it, in one place. anywidget's portable interface
// (model.get/set/on/off/send, el) is all the widget needs to draw and to act; Jupyter's own
// front ends (JupyterLab, Notebook 7, which share the widget manager) also say when the view's
// kernel went away, which only they can know:
// - `model.widget_manager.kernel` (anywidget passes Jupyter's widget manager through): its
//   status ("restarting", "dead"), and whether the notebook changed kernel since the view drew;
// - the class Jupyter's widget manager puts on a view whose comm is no longer live.
// Elsewhere (VS Code, Colab, marimo, a static page) none of these exist: the fallback is a host
// that never reports the kernel gone by itself; a send that throws or an action that gets no
// reply still turns the view off (index.js, actions.js).

const DISCONNECTED_CLASS = "jupyter-widgets-disconnected";
const GONE_STATES = new Set(["restarting", "autorestarting", "dead"]);

/** The host of one view: `{ name, watch(onGone) -> cleanup, isGone(), kernelReplaced() }`. */
export function createHost(model, el) {
  const kernel = model?.widget_manager?.kernel ?? null;
  const disconnected = () =>
    !!(el?.classList?.contains(DISCONNECTED_CLASS) || el?.closest?.(`.${DISCONNECTED_CLASS}`));
  return {
    /** "jupyter" where the widget manager knows the kernel, else "anywidget". */
    name: kernel ? "jupyter" : "anywidget",
    /** Calls `onGone()` whenever the host says the kernel went away; returns the cleanup. */
    watch(onGone) {
      const cleanups = [];
      if (kernel?.statusChanged?.connect) {
        const onStatus = (_k, status) => { if (GONE_STATES.has(status)) onGone(); };
        kernel.statusChanged.connect(onStatus);
        cleanups.push(() => kernel.statusChanged.disconnect(onStatus));
      }
      const check = () => { if (disconnected()) onGone(); };
      if (typeof MutationObserver !== "undefined" && el) {
        const watcher = new MutationObserver(check);
        watcher.observe(el, { attributes: true, attributeFilter: ["class"] });
        cleanups.push(() => watcher.disconnect());
      }
      // Jupyter's widget manager says when a comm's liveness changed; another host's model may
      // know no such event or refuse an unknown name
      const onLive = () => setTimeout(check, 0);
      try {
        model.on("comm_live_update", onLive);
        cleanups.push(() => { try { model.off("comm_live_update", onLive); } catch { /* as on */ } });
      } catch { /* not a Jupyter model: nothing to watch */ }
      return () => { for (const c of cleanups) c(); };
    },
    /** True when the host already says the kernel is gone (a reload after a restart). */
    isGone: () => !!(kernel && (kernel.isDisposed || kernel.status === "dead")) || disconnected(),
    /** True when the notebook now talks to another kernel than the one the view was drawn with. */
    kernelReplaced: () => !!kernel && model.widget_manager?.kernel !== kernel,
  };
}
