// The sidebar's names, shared by its modules (a leaf: it imports none of them).

export const PLUGIN_ID = "syft-lab:sidebar";
export const PANEL_ID = "syft-lab-sidebar";
/** The comm target syft_lab/sidebar.py registers. */
export const COMM_TARGET = "syft_lab.sidebar";
export const PROTOCOL = 1;

export namespace CommandIDs {
  export const showPanel = "syft-lab:show-panel";
}
