// The README is a front door to docs/: every relative link in them points at a file that exists,
// and every #anchor at a heading of that file (GitHub's anchors: lower case, punctuation dropped,
// spaces as hyphens). No doc points outside the project (a reader's clone has nothing beside it).
import { existsSync, readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import t from "tap";

const root = path.resolve(import.meta.dirname, "../..");
const docs = ["README.md", ...readdirSync(path.join(root, "docs")).filter((f) => f.endsWith(".md")).map((f) => `docs/${f}`)];

function anchors(file: string): Set<string> {
  const text = readFileSync(path.join(root, file), "utf8").replace(/```[\s\S]*?```/g, "");
  const out = new Set<string>();
  for (const m of text.matchAll(/^#{1,6} (.+)$/gm)) {
    out.add(m[1]!.trim().toLowerCase().replace(/[^a-z0-9 _-]/g, "").replace(/ /g, "-"));
  }
  return out;
}

t.test("every relative link and anchor resolves", async (t) => {
  let links = 0;
  for (const file of docs) {
    const text = readFileSync(path.join(root, file), "utf8").replace(/```[\s\S]*?```/g, "");
    for (const m of text.matchAll(/\]\(([^)\s]+)\)/g)) {
      const target = m[1]!;
      if (/^[a-z]+:/.test(target)) continue;
      links++;
      const [rel, hash] = target.split("#");
      const resolved = rel ? path.normalize(path.join(path.dirname(file), rel)) : file;
      t.notOk(resolved.startsWith(".."), `${file}: ${target} stays inside the project`);
      t.ok(existsSync(path.join(root, resolved)), `${file}: ${target} exists`);
      if (hash && resolved.endsWith(".md") && existsSync(path.join(root, resolved))) t.ok(anchors(resolved).has(hash), `${file}: #${hash} is a heading of ${resolved}`);
    }
    t.notMatch(text, /\.\.\/shared\//, `${file} does not send readers to ../shared, which a clone does not have`);
  }
  t.ok(links >= 8, `the README links its guides (${links} links checked)`);
});

t.test("the README stays a front door", async (t) => {
  const lines = readFileSync(path.join(root, "README.md"), "utf8").split("\n").length;
  t.ok(lines <= 260, `README.md is ${lines} lines; the rest belongs in docs/`);
});
