// docs/webhooks.md shows the example receiver whole, and the docs tests run examples/receiver.mjs:
// the block must be the file, or a reader would copy code no test has run.
import { readFileSync } from "node:fs";
import path from "node:path";
import t from "tap";

const root = path.resolve(import.meta.dirname, "../..");
const file = readFileSync(path.join(root, "examples/receiver.mjs"), "utf8");
const doc = readFileSync(path.join(root, "docs/webhooks.md"), "utf8");

t.test("docs/webhooks.md's receiver block is examples/receiver.mjs, byte for byte", async (t) => {
  const blocks = [...doc.matchAll(/^```js\n([\s\S]*?)^```$/gm)].map((m) => m[1]!).filter((b) => b.includes("createServer"));
  t.equal(blocks.length, 1, "one receiver block");
  t.equal(blocks[0], file, "the block is the file");
  t.match(doc, /\[examples\/receiver\.mjs\]\(\.\.\/examples\/receiver\.mjs\)/, "and the page links to it");
});

t.test("the README's walk-through runs the file, not a copy", async (t) => {
  const readme = readFileSync(path.join(root, "README.md"), "utf8");
  t.match(readme, /node examples\/receiver\.mjs &/);
  t.notMatch(readme, /saved as receiver\.mjs|node receiver\.mjs/);
});
