// The kernel connector: follows the active notebook, its kernel changes and restarts, and
// for each Python kernel bootstraps the kernel side (a silent execute that binds no variable)
// and opens a comm to it (comm.ts). It says which state it is in, in words a user understands.

import type { ISessionContext } from "@jupyterlab/apputils";
import type { INotebookTracker, NotebookPanel } from "@jupyterlab/notebook";
import type { Kernel, KernelMessage } from "@jupyterlab/services";
import { ISignal, Signal } from "@lumino/signaling";
import { SidebarComm } from "./comm";

/** Run silently in the kernel: imports syft_lab.sidebar and registers its comm target. */
export const BOOTSTRAP = '__import__("syft_lab.sidebar", fromlist=["register"]).register()';

export type ConnectionState =
  | { kind: "disabled" }
  | { kind: "no-notebook" }
  | { kind: "no-kernel"; notebook: string }
  | { kind: "connecting"; notebook: string; kernel?: string }
  | { kind: "restarting"; notebook: string; kernel?: string }
  | { kind: "dead"; notebook: string; kernel?: string }
  | { kind: "not-python"; notebook: string; kernel: string; language: string }
  | { kind: "not-importable"; notebook: string; kernel: string; error: string }
  | { kind: "error"; notebook: string; kernel?: string; error: string }
  | { kind: "connected"; notebook: string; kernel: string; comm: SidebarComm };

const IMPORT_ERRORS = new Set(["ModuleNotFoundError", "ImportError"]);

export class KernelConnector {
  constructor(tracker: INotebookTracker) {
    this._tracker = tracker;
    tracker.currentChanged.connect(this._onCurrentChanged, this);
  }

  /** Fires on every state change (connected states carry the comm). */
  get stateChanged(): ISignal<this, ConnectionState> {
    return this._stateChanged;
  }

  get state(): ConnectionState {
    return this._state;
  }

  /** Start following the active notebook (the panel does it when first shown: a kernel is
   * bootstrapped only once the user looks at the panel). */
  enable(): void {
    if (this._enabled) return;
    this._enabled = true;
    this._follow(this._tracker.currentWidget);
  }

  /** Connect again to the current kernel (after a comm was lost). */
  reconnect(): void {
    if (this._enabled) void this._connect();
  }

  dispose(): void {
    this._tracker.currentChanged.disconnect(this._onCurrentChanged, this);
    this._unwatch();
    this._closeComm();
    Signal.clearData(this);
  }

  private _onCurrentChanged(_: INotebookTracker, panel: NotebookPanel | null): void {
    if (this._enabled) this._follow(panel);
  }

  private _follow(panel: NotebookPanel | null): void {
    if (panel === this._panel && panel !== null) return;
    this._unwatch();
    this._closeComm();
    this._panel = panel;
    this._gen++;
    if (!panel) {
      this._setState({ kind: "no-notebook" });
      return;
    }
    const ctx = panel.sessionContext;
    this._session = ctx;
    ctx.kernelChanged.connect(this._onKernelChanged, this);
    ctx.statusChanged.connect(this._onStatusChanged, this);
    panel.disposed.connect(this._onPanelDisposed, this);
    this._setState({ kind: "connecting", notebook: this._notebookName() });
    const gen = this._gen;
    ctx.ready.then(
      () => { if (gen === this._gen) void this._connect(); },
      (e) => { if (gen === this._gen) this._setState({ kind: "error", notebook: this._notebookName(), error: String(e) }); },
    );
  }

  private _unwatch(): void {
    const ctx = this._session;
    if (ctx && !ctx.isDisposed) {
      ctx.kernelChanged.disconnect(this._onKernelChanged, this);
      ctx.statusChanged.disconnect(this._onStatusChanged, this);
    }
    this._panel?.disposed.disconnect(this._onPanelDisposed, this);
    this._session = null;
    this._restarting = false;
  }

  private _onPanelDisposed(): void {
    if (this._panel && this._panel.isDisposed) this._follow(this._tracker.currentWidget);
  }

  private _onKernelChanged(): void {
    void this._connect();
  }

  private _onStatusChanged(_: ISessionContext, status: Kernel.Status): void {
    if (status === "restarting" || status === "autorestarting") {
      // the kernel process goes away with its comm and its registered target
      this._restarting = true;
      this._gen++;
      this._closeComm();
      this._setState({ kind: "restarting", notebook: this._notebookName(), kernel: this._kernelName() });
    } else if (status === "dead") {
      this._gen++;
      this._closeComm();
      this._setState({ kind: "dead", notebook: this._notebookName(), kernel: this._kernelName() });
    } else if (status === "idle" && this._restarting) {
      this._restarting = false;
      void this._connect();
    }
  }

  private _notebookName(): string {
    return this._panel?.context.localPath ?? this._panel?.title.label ?? "";
  }

  private _kernelName(): string {
    const ctx = this._session;
    return ctx?.kernelDisplayName ?? ctx?.session?.kernel?.name ?? "";
  }

  /** Bootstrap the current kernel and open a comm to it. Stale attempts (the notebook or
   * kernel changed meanwhile) stop at their next step. */
  private async _connect(): Promise<void> {
    const gen = ++this._gen;
    this._closeComm();
    const notebook = this._notebookName();
    const kernel = this._session?.session?.kernel ?? null;
    if (!this._panel) {
      this._setState({ kind: "no-notebook" });
      return;
    }
    if (!kernel) {
      this._setState({ kind: "no-kernel", notebook });
      return;
    }
    this._setState({ kind: "connecting", notebook, kernel: this._kernelName() });
    try {
      const info = await kernel.info;
      if (gen !== this._gen) return;
      const language = info.language_info?.name ?? "";
      if (language.toLowerCase() !== "python") {
        this._setState({ kind: "not-python", notebook, kernel: this._kernelName(), language: language || "unknown" });
        return;
      }
      const future = kernel.requestExecute({ code: BOOTSTRAP, silent: true, store_history: false, allow_stdin: false,
        stop_on_error: false }, true);
      const reply = (await future.done) as KernelMessage.IExecuteReplyMsg;
      if (gen !== this._gen) return;
      const content = reply.content;
      if (content.status === "error") {
        const error = `${content.ename}: ${content.evalue}`;
        this._setState(IMPORT_ERRORS.has(content.ename)
          ? { kind: "not-importable", notebook, kernel: this._kernelName(), error }
          : { kind: "error", notebook, kernel: this._kernelName(), error });
        return;
      }
      if (content.status !== "ok") {
        this._setState({ kind: "error", notebook, kernel: this._kernelName(), error: `bootstrap ${content.status}` });
        return;
      }
      const comm = new SidebarComm(kernel);
      this._comm = comm;
      comm.closed.connect(() => {
        // the kernel closed it (another panel took its place, or the kernel went away)
        if (gen === this._gen && this._comm === comm) {
          this._comm = null;
          this._setState({ kind: "error", notebook, kernel: this._kernelName(),
            error: "the kernel closed the connection" });
        }
      });
      comm.open();
      this._setState({ kind: "connected", notebook, kernel: this._kernelName(), comm });
    } catch (e) {
      if (gen !== this._gen) return;
      this._setState({ kind: "error", notebook, kernel: this._kernelName(), error: String((e as Error)?.message ?? e) });
    }
  }

  private _closeComm(): void {
    const comm = this._comm;
    this._comm = null;
    comm?.dispose();
  }

  private _setState(state: ConnectionState): void {
    this._state = state;
    this._stateChanged.emit(state);
  }

  private _tracker: INotebookTracker;
  private _enabled = false;
  private _panel: NotebookPanel | null = null;
  private _session: ISessionContext | null = null;
  private _comm: SidebarComm | null = null;
  private _gen = 0;
  private _restarting = false;
  private _state: ConnectionState = { kind: "disabled" };
  private _stateChanged = new Signal<this, ConnectionState>(this);
}
