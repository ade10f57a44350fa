// Runs a doc's shell blocks as a reader pastes them: one bash, fed line by line, in a working
// directory of its own that is still this checkout to npm (every top-level entry linked).
import { spawn } from "node:child_process";
import { mkdtempSync, readdirSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { until } from "./harness.ts";

export const root = path.resolve(import.meta.dirname, "../..");

export { shBlocks, type ShBlock } from "./doc-blocks.ts";

/** The JSON objects in a text, in order (curl prints responses without a newline, so they may touch). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export function jsonObjects(text: string): any[] {
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  const found: any[] = [];
  let depth = 0;
  let start = -1;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const ch = text[i];
    if (inString) {
      if (ch === "\\") i++;
      else if (ch === '"') inString = false;
    } else if (ch === '"' && depth > 0) inString = true;
    else if (ch === "{") {
      if (depth++ === 0) start = i;
    } else if (ch === "}" && depth > 0 && --depth === 0) {
      // Braces in plain text (a log line, a usage message) are not JSON: skipped.
      try {
        found.push(JSON.parse(text.slice(start, i + 1)));
      } catch {
        /* not JSON */
      }
    }
  }
  return found;
}

export interface Shell {
  dir: string;
  /** Pastes lines; resolves with what they printed and the last command's exit status. */
  paste(lines: string[]): Promise<{ out: string; status: number }>;
  variable(name: string): Promise<string>;
}

export function startShell(t: { teardown(fn: () => unknown): void }, env: Record<string, string>): Shell {
  const dir = mkdtempSync(path.join(tmpdir(), "docs-"));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  for (const entry of readdirSync(root)) {
    // Not the files a reader's earlier run left in the checkout (hook.key and the like): the paste makes its own.
    if (entry === ".git" || entry === ".data" || entry.startsWith("hook.") || entry === "receiver.mjs" || entry === "addresses.txt") continue;
    symlinkSync(path.join(root, entry), path.join(dir, entry));
  }
  const full: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (v === undefined || k === "NODE_OPTIONS" || k.startsWith("TAP") || k.startsWith("_TAP")) continue;
    full[k] = v;
  }
  Object.assign(full, { DATA_DIR: path.join(dir, "data"), LOG_LEVEL: "warn" }, env);
  const bash = spawn("bash", [], { cwd: dir, env: full, stdio: ["pipe", "pipe", "pipe"] });
  t.teardown(() => {
    if (bash.exitCode === null) bash.kill("SIGKILL");
  });
  let output = "";
  bash.stdout.on("data", (d: Buffer) => (output += d.toString()));
  bash.stderr.on("data", (d: Buffer) => (output += d.toString()));
  // A command that fails anywhere in a paste (not only the last) is reported; pipes fail as a whole.
  bash.stdin.write("exec 2>&1\nset -o pipefail\ntrap 'echo \"@@failed: $BASH_COMMAND\"' ERR\n");
  let marker = 0;
  const paste = async (lines: string[]) => {
    const id = ++marker;
    const from = output.length;
    bash.stdin.write(`${lines.join("\n")}\n__status=$?; echo; echo "@@end ${id} $__status"\n`);
    const end = new RegExp(`\\n@@end ${id} (\\d+)\\n`);
    const m = await until(`the shell to finish paste ${id}`, async () => end.exec(output.slice(from)) ?? undefined, 60_000, () => output.slice(from));
    const out = output.slice(from, from + m.index);
    // Any failed command makes the paste fail, whatever the last one did.
    return { out, status: /@@failed: /.test(out) ? Math.max(1, Number(m[1])) : Number(m[1]) };
  };
  return { dir, paste, variable: async (name) => (await paste([`printf '%s' "$${name}"`])).out.trim() };
}
