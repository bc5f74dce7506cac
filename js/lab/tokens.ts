// Tokens other plugins can require: the Syft sidebar (its panel and its kernel connector).

import { Token } from "@lumino/coreutils";
import type { KernelConnector } from "./connector";
import type { SyftPanel } from "./panel";

export const PLUGIN_ID = "syft-lab:sidebar";
export const PANEL_ID = "syft-lab-sidebar";
/** The comm target syft_lab/sidebar.py registers. */
export const COMM_TARGET = "syft_lab.sidebar";
export const PROTOCOL = 1;

export namespace CommandIDs {
  export const showPanel = "syft-lab:show-panel";
}

export interface ISyftSidebar {
  readonly panel: SyftPanel;
  readonly connector: KernelConnector;
}

export const ISyftSidebar = new Token<ISyftSidebar>(
  "syft-lab:ISyftSidebar",
  "The Syft sidebar: the world view of the active notebook's kernel.",
);
