// The notebook's own worker has one name in the front end, as in the kernel (issue 25.6):
// js/widget/dom.js LOCAL is the only place code writes "me" (comments may say it).
import assert from "node:assert/strict";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";

const ROOT = new URL("../../js/", import.meta.url).pathname;

function sources(dir) {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) return sources(p);
    return /\.(js|mjs|ts)$/.test(name) ? [p] : [];
  });
}

/** The "me" / 'me' / `me` literals of `text` outside comments: [line numbers]. */
export function meLiterals(text) {
  const code = text.replace(/\/\*[\s\S]*?\*\//g, (c) => c.replace(/[^\n]/g, " ")).replace(/(^|[^:"'`\\])\/\/.*$/gm, "$1");
  const out = [];
  code.split("\n").forEach((line, i) => { if (/(["'`])me\1/.test(line)) out.push(i + 1); });
  return out;
}

test("the checker sees a literal in code, not in a comment", () => {
  assert.deepEqual(meLiterals('// "me" is the notebook\n/** "me" */\nconst a = lane.id === "me";\nf(\'me\');'), [3, 4]);
  assert.deepEqual(meLiterals("const url = \"http://x\"; // 'me'"), []);
});

test('"me" is written once, as LOCAL in js/widget/dom.js; every other module imports it', () => {
  const found = [];
  for (const p of sources(ROOT)) {
    for (const line of meLiterals(readFileSync(p, "utf8"))) found.push(`${p.slice(ROOT.length)}:${line}`);
  }
  assert.equal(found.length, 1, found.join(" "));
  assert.match(found[0], /^widget\/dom\.js:/);
});
