// Every ```sh block of the README and docs/ is run by a test or listed, with the reason, as one
// that cannot run: the README's walk-through blocks by walkthrough.test.ts (one block under each of
// its headings, which is all it reads), every block of the guides in docsInOrder by
// docs-commands.test.ts. A new guide, a README block under another heading or a listed block that
// no longer exists fails here, without a database.
import { readdirSync } from "node:fs";
import path from "node:path";
import t from "tap";
import { blockId, docsInOrder, notRun, shBlocks, walkthroughHeadings } from "../helpers/doc-blocks.ts";

const root = path.resolve(import.meta.dirname, "../..");
const guides = readdirSync(path.join(root, "docs"))
  .filter((f) => f.endsWith(".md"))
  .map((f) => `docs/${f}`);

t.test("docs-commands.test.ts runs every guide", async (t) => {
  t.same([...docsInOrder].sort(), [...guides].sort(), "docsInOrder names each docs/*.md once");
});

t.test("every README block is the walk-through's or listed", async (t) => {
  const blocks = shBlocks("README.md");
  const headings: string[] = Object.values(walkthroughHeadings);
  for (const h of headings) t.equal(blocks.filter((b) => b.heading === h).length, 1, `one block under "${h}" (the walk-through reads the first)`);
  for (const b of blocks) {
    const key = blockId("README.md", b);
    t.ok(headings.includes(b.heading) || notRun[key], `${key}: run by walkthrough.test.ts or listed as not run`);
  }
});

t.test("the not-run list names blocks that exist, each with a reason", async (t) => {
  const all = new Set(["README.md", ...guides].flatMap((f) => shBlocks(f).map((b) => blockId(f, b))));
  for (const [key, why] of Object.entries(notRun)) {
    t.ok(all.has(key), `a block exists: ${key}`);
    t.ok(why.length > 20, `with a reason: ${key}`);
  }
  const readme = shBlocks("README.md");
  const walked: string[] = Object.values(walkthroughHeadings);
  t.notOk(
    readme.some((b) => walked.includes(b.heading) && notRun[blockId("README.md", b)]),
    "no walk-through block is also listed as not run",
  );
});
