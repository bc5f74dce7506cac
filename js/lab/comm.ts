// The comm client: one comm to the kernel's "syft_lab.sidebar" target (syft_lab/sidebar.py).
// It keeps the browser's copy of the world (a snapshot, then patches applied with the
// widget's patch.js), asks for a resync when a patch does not follow, and carries action
// requests with the widget's request/reply client (actions.js).

import type { Kernel } from "@jupyterlab/services";
import type { JSONObject } from "@lumino/coreutils";
import { ISignal, Signal } from "@lumino/signaling";
import { createClient } from "../widget/actions.js";
import { applyWorldPatch } from "../widget/patch.js";
import { COMM_TARGET, PROTOCOL } from "./tokens";

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

type Handler = (msg: any) => void;

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
    this._client = createClient({
      send: (msg: JSONObject) => this._send(msg),
      on: (fn: Handler) => this._handlers.add(fn),
      off: (fn: Handler) => this._handlers.delete(fn),
    });
  }

  /** The kernel this comm talks to. */
  get kernel(): Kernel.IKernelConnection {
    return this._kernel;
  }

  /** The current world (null until the first snapshot). */
  get world(): World | null {
    return this._world;
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
    return { ...this._counts };
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
    this._handlers.clear();
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
    if (data.type === "snapshot" && data.world && Array.isArray(data.world.workers)) {
      this._counts.snapshots++;
      this._setWorld(data.world as World);
    } else if (data.type === "world_patch") {
      const next = this._world ? applyWorldPatch(this._world, data) : null;
      if (next) {
        this._counts.patches++;
        this._setWorld(next as World);
      } else {
        this._counts.resyncs++;
        this._send({ type: "resync" });
      }
    }
    for (const fn of Array.from(this._handlers)) fn(data);
  }

  private _setWorld(world: World): void {
    this._world = world;
    this._worldChanged.emit(world);
  }

  private _kernel: Kernel.IKernelConnection;
  private _comm: Kernel.IComm;
  private _client: ReturnType<typeof createClient>;
  private _handlers = new Set<Handler>();
  private _world: World | null = null;
  private _disposed = false;
  private _closedByKernel = false;
  private _counts = { snapshots: 0, patches: 0, resyncs: 0 };
  private _worldChanged = new Signal<this, World>(this);
  private _closed = new Signal<this, void>(this);
}
