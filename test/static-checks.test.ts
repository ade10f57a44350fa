// tsc (strict), buf lint, and a fresh buf generate that matches the committed gen/.
import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import t from "tap";

const root = path.resolve(import.meta.dirname, "..");
const bin = (name: string) => path.join(root, "node_modules", ".bin", name);
const run = (cmd: string, args: string[]) => spawnSync(cmd, args, { cwd: root, encoding: "utf8" });

function files(dir: string, base = dir): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? files(path.join(dir, e.name), base) : [path.relative(base, path.join(dir, e.name))],
  );
}

t.test("tsc --noEmit is clean", async (t) => {
  const r = run(bin("tsc"), ["--noEmit", "-p", "."]);
  t.equal(r.status, 0, r.stdout + r.stderr);
});

t.test("buf lint is clean", async (t) => {
  const r = run(bin("buf"), ["lint"]);
  t.equal(r.status, 0, r.stdout + r.stderr);
});

t.test("gen/ is what buf generate makes from proto/", async (t) => {
  const out = mkdtempSync(path.join(tmpdir(), "gen-"));
  t.teardown(() => rmSync(out, { recursive: true, force: true }));
  execFileSync(bin("buf"), ["generate", "-o", out], { cwd: root, env: { ...process.env, PATH: `${path.dirname(bin("buf"))}:${process.env.PATH}` } });
  const fresh = files(path.join(out, "gen")).sort();
  t.same(files(path.join(root, "gen")).sort(), fresh, "same files");
  for (const f of fresh) {
    t.equal(readFileSync(path.join(root, "gen", f), "utf8"), readFileSync(path.join(out, "gen", f), "utf8"), `${f} is fresh`);
  }
});

for (const [page, dir] of [["checkout page", "services/checkout/browser"], ["dashboard", "services/dashboard/browser"]] as const) {
  t.test(`the ${page}'s browser script type-checks as the browser runs it (DOM, ES5)`, async (t) => {
    const r = run(bin("tsc"), ["--noEmit", "-p", dir]);
    t.equal(r.status, 0, r.stdout + r.stderr);
  });
}
