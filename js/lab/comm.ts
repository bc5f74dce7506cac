// The comm client: one comm to the kernel's "syft_lab.sidebar" target (syft_lab/sidebar.py).
// The world protocol (snapshot, patches, resync) and the action requests are the widget's own
// world channel (js/widget/channel.js): this file only carries its messages over the comm.

import type { Kernel } from "@jupyterlab/services";
import type { JSONObject } from "@lumino/coreutils";
import { ISignal, Signal } from "@lumino/signaling";
import { createWorldChannel } from "../widget/channel.js";
import { COMM_TARGET, PROTOCOL } from "./constants";

/** The world model of syft_lab.inspection.model.world_dict (docs/inspection-model.md). */
export interface WorldLane {
  id: string;
  kind?: string;
  state?: string;
  error?: string;
  objects: any[];
}
export interface World {
  schema?: string;
  version?: number;
  rev?: number;
  workers: WorldLane[];
}

export interface ActionReply {
  ok: boolean;
  req?: string | number | null;
  action?: string;
  error?: string;
  code?: string;
  name?: string;
}

export class SidebarComm {
  constructor(kernel: Kernel.IKernelConnection) {
    this._kernel = kernel;
    this._comm = kernel.createComm(COMM_TARGET);
    this._comm.onMsg = (msg) => this._onMsg(msg.content.data as any);
    this._comm.onClose = () => {
      if (this._disposed) return;
      this._closedByKernel = true;
      this._closed.emit();
    };
    this._channel = createWorldChannel({
      send: (msg: JSONObject) => this._send(msg),
      onWorld: (world: World) => this._worldChanged.emit(world),
    });
    this._client = this._channel.client();
  }

  /** The kernel this comm talks to. */
  get kernel(): Kernel.IKernelConnection {
    return this._kernel;
  }

  /** The current world (null until the first snapshot). */
  get world(): World | null {
    return this._channel.world as World | null;
  }

  /** Fires with the new world after a snapshot or a patch. */
  get worldChanged(): ISignal<this, World> {
    return this._worldChanged;
  }

  /** Fires when the kernel closed the comm. */
  get closed(): ISignal<this, void> {
    return this._closed;
  }

  get isDisposed(): boolean {
    return this._disposed;
  }

  /** How many snapshots and patches arrived (for tests). */
  get received(): { snapshots: number; patches: number; resyncs: number } {
    return { ...this._channel.counts };
  }

  open(): void {
    this._comm.open({ type: "hello", version: PROTOCOL });
  }

  /** Run a named action (send, get, move) in the kernel; resolves with its reply. */
  request(action: string, target: { worker: string; id: number }, extra: { worker?: string; name?: string } = {})
    : Promise<ActionReply> {
    return this._client.request(action, target, extra);
  }

  dispose(): void {
    if (this._disposed) return;
    this._disposed = true;
    this._client.dispose();
    this._channel.dispose();
    if (!this._closedByKernel && !this._comm.isDisposed) {
      try {
        this._comm.close();
      } catch {
        /* the kernel may be gone (a restart) */
      }
    }
    Signal.clearData(this);
  }

  private _send(msg: JSONObject): void {
    if (this._disposed || this._comm.isDisposed) return;
    this._comm.send(msg);
  }

  private _onMsg(data: any): void {
    if (this._disposed || !data || typeof data !== "object") return;
    this._channel.receive(data);
  }

  private _kernel: Kernel.IKernelConnection;
  private _comm: Kernel.IComm;
  private _channel: ReturnType<typeof createWorldChannel>;
  private _client: ReturnType<ReturnType<typeof createWorldChannel>["client"]>;
  private _disposed = false;
  private _closedByKernel = false;
  private _worldChanged = new Signal<this, World>(this);
  private _closed = new Signal<this, void>(this);
}
