// The JupyterLab extension: a "Syft" panel in the right sidebar that shows the world view of
// the active notebook's kernel, and the command "Syft: Show panel" in the command palette.
//
//   constants.ts  plugin id, panel id, comm target, command ids (a leaf: every module reads them)
//   tokens.ts     the ISyftSidebar token other plugins require (its panel and its connector)
//   connector.ts  follows the active notebook, kernel changes and restarts; bootstraps the kernel
//   comm.ts       the comm to syft_lab/sidebar.py: snapshot, patches, action requests
//   panel.ts      the Lumino widget, drawn by the widget's world view (js/widget/world.js)

import { ILayoutRestorer, JupyterFrontEnd, JupyterFrontEndPlugin } from "@jupyterlab/application";
import { ICommandPalette } from "@jupyterlab/apputils";
import { INotebookTracker } from "@jupyterlab/notebook";
import { LabIcon } from "@jupyterlab/ui-components";
import { CommandIDs, PANEL_ID, PLUGIN_ID } from "./constants";
import { KernelConnector } from "./connector";
import { SyftPanel } from "./panel";
import { ISyftSidebar } from "./tokens";

// three workers (lanes) and an arrow: the world view in small
const ICON_SVG = `<svg xmlns="http://www.w3.org/2000/svg" width="16" height="16" viewBox="0 0 24 24">
<g class="jp-icon3" fill="#616161"><rect x="2" y="3" width="6" height="18" rx="1.5"/><rect x="16" y="3" width="6" height="18" rx="1.5"/></g>
<path class="jp-icon3" d="M8.5 8 C12 8 12 16 15.5 16" fill="none" stroke="#616161" stroke-width="1.8"/>
<path class="jp-icon3" d="M13.5 13.8 L16 16 L13.2 17.6 Z" fill="#616161"/></svg>`;

export const syftIcon = new LabIcon({ name: "syft-lab:world", svgstr: ICON_SVG });

const plugin: JupyterFrontEndPlugin<ISyftSidebar> = {
  id: PLUGIN_ID,
  description: "The Syft sidebar: workers, objects and pointers of the active notebook's kernel.",
  autoStart: true,
  requires: [INotebookTracker],
  optional: [ICommandPalette, ILayoutRestorer],
  provides: ISyftSidebar,
  activate: (app: JupyterFrontEnd, tracker: INotebookTracker, palette: ICommandPalette | null,
    restorer: ILayoutRestorer | null): ISyftSidebar => {
    const connector = new KernelConnector(tracker);
    const panel = new SyftPanel(connector);
    panel.title.icon = syftIcon;
    app.shell.add(panel, "right", { rank: 600 });
    restorer?.add(panel, PANEL_ID);

    app.commands.addCommand(CommandIDs.showPanel, {
      label: "Syft: Show panel",
      caption: "Show the Syft sidebar (the world view of the active notebook's kernel)",
      icon: syftIcon,
      execute: () => {
        app.shell.activateById(panel.id);
      },
    });
    palette?.addItem({ command: CommandIDs.showPanel, category: "Syft" });
    return { panel, connector };
  },
};

export default plugin;
