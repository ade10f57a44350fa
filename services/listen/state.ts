import { createHash, randomBytes } from "node:crypto";
import { mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import path from "node:path";
import { idTime } from "../platform/ids.ts";

/** How far behind the last forwarded event the server may still send one (events/stream.ts lateCommitMs), and a margin. */
const rememberedMs = 70_000;

/**
 * What `listen` keeps per API key and server on this machine: its signing secret (so a receiver's
 * configuration survives restarts), the last event it forwarded (where the next start resumes),
 * the ids forwarded just before it (the server may send those again on a resume: they are skipped),
 * and the URL it forwarded to (resend's default).
 */
export interface ListenState {
  secret: string;
  last: string | null;
  recent: string[];
  forwardTo: string | null;
}

/** The folder: LISTEN_STATE_DIR, else $XDG_STATE_HOME/payments-listen, else ~/.local/state/payments-listen. */
export function stateDir(env: NodeJS.ProcessEnv): string {
  if (env.LISTEN_STATE_DIR) return env.LISTEN_STATE_DIR;
  return path.join(env.XDG_STATE_HOME || path.join(homedir(), ".local", "state"), "payments-listen");
}

/** One file per key and server, named by a hash of both: the key itself is never written. */
export function stateFile(dir: string, apiBase: string, apiKey: string): string {
  const name = createHash("sha256").update(`${apiBase}\n${apiKey}`).digest("hex").slice(0, 24);
  return path.join(dir, `${name}.json`);
}

export function loadState(file: string): ListenState {
  try {
    const s = JSON.parse(readFileSync(file, "utf8")) as Partial<ListenState>;
    if (typeof s.secret === "string" && s.secret.startsWith("whsec_")) {
      return { secret: s.secret, last: typeof s.last === "string" ? s.last : null, recent: Array.isArray(s.recent) ? s.recent.filter((x) => typeof x === "string") : [], forwardTo: typeof s.forwardTo === "string" ? s.forwardTo : null };
    }
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw new Error(`${file} cannot be read (${(err as Error).message}); delete it to start afresh (a new signing secret).`);
  }
  // The same shape as an endpoint's secret, so a receiver verifies both alike.
  return { secret: `whsec_${randomBytes(24).toString("base64url")}`, last: null, recent: [], forwardTo: null };
}

/** Written whole and renamed into place, readable by the user only: it holds a signing secret. */
export function saveState(file: string, state: ListenState): void {
  mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  const tmp = `${file}.${process.pid}.tmp`;
  writeFileSync(tmp, `${JSON.stringify(state)}\n`, { mode: 0o600 });
  renameSync(tmp, file);
}

/** The state once `id` is forwarded: it is the last, and the ids within reach of a resume are kept. */
export function forwarded(state: ListenState, id: string): ListenState {
  const lastTime = idTime(id)?.getTime() ?? Date.now();
  const last = state.last === null || (idTime(state.last)?.getTime() ?? 0) <= lastTime ? id : state.last;
  const horizon = (idTime(last)?.getTime() ?? lastTime) - rememberedMs;
  const recent = [...state.recent.filter((r) => r !== id && (idTime(r)?.getTime() ?? 0) >= horizon), id];
  return { ...state, last, recent };
}
