// Dependencies between services/* folders (and gateway/) point one way: the check finds none in
// this tree, and finds (and names the imports of) one added to a copy of a small tree.
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import t from "tap";
import { describeCycle, folderImports, importCycles } from "../../scripts/import-cycles.ts";

const root = path.resolve(import.meta.dirname, "../..");

t.test("no import cycle between the service's folders", async (t) => {
  const imports = folderImports(root);
  t.ok(imports.length > 50, "the check reads the cross-folder imports");
  const cycles = importCycles(imports);
  t.same(cycles.map(describeCycle), [], cycles.map(describeCycle).join("\n\n"));
});

function tree(files: Record<string, string>): string {
  const dir = mkdtempSync(path.join(tmpdir(), "cycles-"));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  for (const [name, text] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(dir, name)), { recursive: true });
    writeFileSync(path.join(dir, name), text);
  }
  return dir;
}

t.test("an added import that closes a loop is found and printed", async (t) => {
  const base = {
    "services/platform/ids.ts": "export const id = 1;\n",
    "services/intents/store.ts": 'import { id } from "../platform/ids.ts";\nexport const row = id;\n',
    "services/events/record.ts": 'import type { row } from "../intents/store.ts";\nexport const x = 1;\n',
    "gateway/server.ts": 'export { x } from "../services/events/record.ts";\n',
  };
  t.same(importCycles(folderImports(tree(base))), [], "one-way imports: no cycle");

  const looped = tree({ ...base, "services/intents/emit.ts": 'const m = await import("../events/record.ts");\nexport default m;\n' });
  const cycles = importCycles(folderImports(looped));
  t.equal(cycles.length, 1);
  t.same(cycles[0]?.folders, ["services/events", "services/intents"]);
  t.match(describeCycle(cycles[0]!), /services\/intents\/emit\.ts imports services\/events\/record\.ts/, "names the import that closes it");

  // The command line: exit 1 and the cycle on stdout, as npm test shows it.
  const node = process.execPath;
  const r = spawnSync(node, [path.join(root, "scripts/import-cycles.ts"), looped], { encoding: "utf8" });
  t.equal(r.status, 1);
  t.match(r.stdout, /import cycle between services\/events, services\/intents/);
  const clean = spawnSync(node, [path.join(root, "scripts/import-cycles.ts"), tree(base)], { encoding: "utf8" });
  t.equal(clean.status, 0, clean.stdout + clean.stderr);
});

t.test("gateway counts as a folder: a domain importing the gateway that imports it back is a cycle", async (t) => {
  const dir = tree({
    "gateway/server.ts": 'import { page } from "../services/checkout/page.ts";\nexport const s = page;\n',
    "services/checkout/page.ts": 'import { s } from "../../gateway/server.ts";\nexport const page = 1;\nexport { s };\n',
  });
  t.same(importCycles(folderImports(dir)).map((c) => c.folders), [["gateway", "services/checkout"]]);
});
