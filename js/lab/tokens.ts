// Tokens other plugins can require: the Syft sidebar (its panel and its kernel connector).
// The sidebar's own modules take its names from constants.ts, so none of them imports this one.

import { Token } from "@lumino/coreutils";
import type { KernelConnector } from "./connector";
import type { SyftPanel } from "./panel";

export interface ISyftSidebar {
  readonly panel: SyftPanel;
  readonly connector: KernelConnector;
}

export const ISyftSidebar = new Token<ISyftSidebar>(
  "syft-lab:ISyftSidebar",
  "The Syft sidebar: the world view of the active notebook's kernel.",
);
