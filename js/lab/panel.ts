// The Syft panel of the right sidebar: a Lumino widget that shows the world view of the
// active notebook's kernel, drawn by the widget's own world view (js/widget/world.js), with
// its buttons (send, get, move) acting through the comm as the widget's do. Until it is
// connected it says why not, in words a user can act on.

import { Widget } from "@lumino/widgets";
import type { Message } from "@lumino/messaging";
import { statusLine } from "../widget/actions.js";
import { LOCAL, h } from "../widget/dom.js";
import { createWorldView } from "../widget/world.js";
import type { SidebarComm, World } from "./comm";
import type { ConnectionState, KernelConnector } from "./connector";
import { PANEL_ID } from "./constants";

// Side by side, lanes are at least LANE_WIDTH px wide with LANE_GAP px for the arrows between
// them and LANE_PAD px of gutter at the sides (style.css .syft-lanes); a sidebar too narrow for
// that stacks them in one column (the arrows run in its right gutter), and the pointer rows'
// "→ worker:id" say where they point.
const LANE_WIDTH = 240;
const LANE_GAP = 24;
const LANE_PAD = 48;

const HINT_NO_WORKERS = "No workers yet. Create one in a cell: %load_ext syft_lab then %syft worker bob "
  + "(or bob = sy.VirtualWorker(\"bob\")); its objects and your pointers to them show here.";

/** What the panel says in each state (null: nothing to say, the world view shows). */
export function stateMessage(state: ConnectionState): string | null {
  switch (state.kind) {
    case "disabled":
      return "";
    case "no-notebook":
      return "No notebook is open. Open a notebook with a Python kernel to see its workers, objects and pointers here.";
    case "no-kernel":
      return `${state.notebook} has no kernel. Select a Python kernel to inspect it.`;
    case "connecting":
      return `Connecting to ${state.kernel || "the kernel"} of ${state.notebook}…`;
    case "restarting":
      return "The kernel is restarting; the panel reconnects when it is back.";
    case "dead":
      return "The kernel died. Restart it to reconnect.";
    case "not-python":
      return `${state.kernel} is a ${state.language} kernel. The Syft panel inspects Python kernels that have syft_lab.`;
    case "not-importable":
      return `syft_lab is not importable in this kernel (${state.kernel}): ${state.error}. `
        + "Install it in the kernel's environment (pip install syft-lab), then restart the kernel.";
    case "error":
      return `Could not connect to the kernel: ${state.error}`;
    case "connected":
      return null;
  }
}

export class SyftPanel extends Widget {
  constructor(connector: KernelConnector) {
    super();
    this.id = PANEL_ID;
    this.addClass("syft-lab-sidebar");
    this.title.caption = "Syft: workers, objects and pointers of the active notebook's kernel";
    this._connector = connector;

    this._where = h("div", { class: "syft-lab-where" });
    this._message = h("div", { class: "syft-lab-message", role: "status", "aria-live": "polite" });
    this._retry = h("button", { class: "syft-btn syft-lab-retry", type: "button", hidden: true,
      onclick: () => this._connector.reconnect() }, "Reconnect");
    this._hint = h("div", { class: "syft-lab-hint", hidden: true }, HINT_NO_WORKERS);
    this._status = statusLine();
    this._world = createWorldView({
      workers: () => (this._comm?.world?.workers ?? []).map((l) => ({ id: l.id, kind: l.kind, state: l.state })),
      request: (action: string, target: any, extra: any) => this._request(action, target, extra),
      run: (action: string, target: any, extra: any = {}) => this._run(action, target, extra),
      layoutChanged: () => this._world.layoutChanged(),
    });
    this.node.style.setProperty("--syft-lane-min", `${LANE_WIDTH}px`);
    this._worldBox = h("div", { class: "syft-lab-world", hidden: true }, this._world.frame);
    const root = h("div", { class: "syft-root syft-lab-root", "data-view": "world" },
      h("header", { class: "syft-lab-head" }, h("span", { class: "syft-lab-title" }, "Syft"), this._where),
      h("div", { class: "syft-lab-state" }, this._message, this._retry),
      this._hint, this._status.el, this._worldBox);
    this.node.append(root);
    this.node.dataset.state = "disabled";

    connector.stateChanged.connect(this._onState, this);
    this._onState(connector, connector.state);
  }

  /** The world view (for tests and benchmarks). */
  get worldView(): ReturnType<typeof createWorldView> {
    return this._world;
  }

  dispose(): void {
    if (this.isDisposed) return;
    this._connector.stateChanged.disconnect(this._onState, this);
    this._setComm(null);
    this._world.destroy();
    super.dispose();
  }

  protected onAfterShow(msg: Message): void {
    super.onAfterShow(msg);
    this._connector.enable(); // the kernel is bootstrapped once someone looks
    this._arrange();
  }

  protected onResize(msg: Widget.ResizeMessage): void {
    super.onResize(msg);
    this._arrange();
  }

  /** Lanes side by side (with arrows) when they fit, else stacked. */
  private _arrange(): void {
    const n = this._comm?.world?.workers.length ?? 0;
    const need = n * LANE_WIDTH + Math.max(0, n - 1) * LANE_GAP + LANE_PAD + 8;
    const width = this.node.clientWidth;
    this.toggleClass("syft-lab-stacked", width > 0 && width < need);
    this._world.layoutChanged();
  }

  private _onState(_: KernelConnector, state: ConnectionState): void {
    const msg = stateMessage(state);
    this.node.dataset.state = state.kind;
    const parts = [];
    if ("notebook" in state && state.notebook) parts.push(state.notebook);
    if ("kernel" in state && state.kernel) parts.push(state.kernel);
    this._where.textContent = parts.join(" · ");
    this._where.title = this._where.textContent;
    this._message.textContent = msg ?? "";
    this._message.hidden = !msg;
    this._retry.hidden = state.kind !== "error";
    if (state.kind === "connected") {
      if (state.comm !== this._comm) this._setComm(state.comm);
    } else {
      this._setComm(null);
    }
  }

  private _setComm(comm: SidebarComm | null): void {
    if (this._comm) this._comm.worldChanged.disconnect(this._onWorld, this);
    if (comm !== this._comm) this._world.reset(); // another kernel (or none): the old one's History goes
    this._comm = comm;
    this._status.el.textContent = "";
    this._status.el.className = "syft-status";
    if (comm) {
      comm.worldChanged.connect(this._onWorld, this);
      if (comm.world) this._onWorld(comm, comm.world);
      else {
        this._message.textContent = "Waiting for the kernel's world…";
        this._message.hidden = false;
      }
    } else {
      this._worldBox.hidden = true;
      this._hint.hidden = true;
    }
  }

  private _onWorld(_: SidebarComm, world: World): void {
    if (this.node.dataset.state === "connected") {
      this._message.hidden = true;
      this._message.textContent = "";
    }
    this._worldBox.hidden = false;
    this._hint.hidden = world.workers.some((l) => l.id !== LOCAL);
    this.node.dataset.rev = String(world.rev ?? "");
    this._world.update(world, []);
    this._arrange();
  }

  private _request(action: string, target: any, extra: any) {
    const comm = this._comm;
    if (!comm) return Promise.resolve({ ok: false, error: "not connected to a kernel" });
    return comm.request(action, target, extra);
  }

  private async _run(action: string, target: any, extra: any) {
    this._status.pending(`${action}…`);
    const reply = await this._request(action, target, extra);
    this._status.show(reply);
    return reply;
  }

  private _connector: KernelConnector;
  private _comm: SidebarComm | null = null;
  private _where: HTMLElement;
  private _message: HTMLElement;
  private _retry: HTMLElement;
  private _hint: HTMLElement;
  private _status: ReturnType<typeof statusLine>;
  private _world: ReturnType<typeof createWorldView>;
  private _worldBox: HTMLElement;
}
