import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { installDom } from "./setup-dom.js";

installDom();
const { layoutPlan, renderPlan, planNodeOf, nodeLabel } = await import("../../js/widget/plan.js");
const node = JSON.parse(readFileSync(new URL("./fixtures/plan_node.json", import.meta.url)));

test("dagre lays out every node, top to bottom along the edges, without overlaps", () => {
  const laid = layoutPlan(node.graph);
  assert.equal(laid.nodes.length, node.graph.nodes.length);
  assert.equal(laid.edges.length, node.graph.edges.length);
  const at = Object.fromEntries(laid.nodes.map((n) => [n.id, n]));
  for (const e of node.graph.edges) assert.ok(at[e.from].y < at[e.to].y, `${e.from} above ${e.to}`);
  for (const a of laid.nodes) {
    for (const b of laid.nodes) {
      if (a === b) continue;
      const apart = Math.abs(a.x - b.x) >= (a.width + b.width) / 2 || Math.abs(a.y - b.y) >= (a.height + b.height) / 2;
      assert.ok(apart, `${a.id} and ${b.id} overlap`);
    }
    assert.ok(a.x - a.width / 2 >= 0 && a.x + a.width / 2 <= laid.width);
  }
  assert.ok(laid.edges.every((e) => e.points.length >= 2));
  assert.deepEqual(laid.edges.find((e) => e.from === "v0").label, "[4, 8]");
});

test("edges to unknown nodes are skipped, an empty graph lays out", () => {
  const laid = layoutPlan({ nodes: [{ id: "a", role: "input" }], edges: [{ from: "a", to: "zz" }] });
  assert.equal(laid.nodes.length, 1);
  assert.equal(laid.edges.length, 0);
  assert.equal(layoutPlan({ nodes: [], edges: [] }).nodes.length, 0);
});

test("the plan view marks roles, shows output shapes on edges and where the plan went", () => {
  const el = renderPlan(node, { idPrefix: "t" });
  const roles = [...el.querySelectorAll(".syft-plan-node")].map((g) => g.getAttribute("data-role"));
  assert.deepEqual(roles.filter((r) => r === "input").length, 1);
  assert.deepEqual(roles.filter((r) => r === "state").length, 3);
  assert.deepEqual(roles.filter((r) => r === "output").length, 1);
  const labels = [...el.querySelectorAll(".syft-plan-edge-label")].map((t) => t.textContent);
  assert.ok(labels.includes("[4, 2]"));
  const sent = [...el.querySelectorAll(".syft-plan-sent [data-worker]")].map((c) => c.textContent);
  assert.deepEqual(sent, ["bob", "alice"]);
  assert.match(el.querySelector(".syft-plan-head").textContent, /mlp.*5 ops/);
  assert.ok(el.querySelector(".syft-plan-code pre").textContent.startsWith("def mlp"));
});

test("labels and lookup of the plan node", () => {
  assert.equal(nodeLabel({ id: "v0", op: "aten.relu.default" }), "relu");
  assert.equal(nodeLabel({ id: "v0", label: "x" }), "x");
  assert.equal(planNodeOf([{ nodes: [{ kind: "pointer" }, node] }]), node);
  assert.equal(renderPlan(null).textContent, "no plan to show");
  assert.match(renderPlan({ ...node, graph: null, built: false }).textContent, /not built yet/);
});
