import { reachable } from "../platform/reachable.ts";
import { sleep } from "./sleep.ts";

/** How often a node that refused connections is probed while the watcher waits to ask it again. */
const probeEveryMs = 20;
/** A probe that neither connects nor is refused within this is taken as not accepting yet. */
const probeTimeoutMs = 200;

/** Whether a failed call to a node failed because its host refused the connection (nothing listens on its port). */
export function connectionRefused(err: unknown): boolean {
  for (let e = err, depth = 0; e instanceof Error && depth < 8; e = e.cause, depth++) {
    if ((e as { code?: unknown }).code === "ECONNREFUSED") return true;
  }
  return false;
}

/**
 * Waits up to `ms` for the node at `url` to accept a TCP connection again, trying every 20 ms;
 * resolves as soon as one is accepted (and closed at once), or when `ms` is up or `signal` aborts.
 * A refused connection costs the node nothing, so the watcher can notice its return within a
 * probe's interval instead of at its next full retry (the node's proof, then the read), without
 * asking it more often: a node that answers with an error is not probed, and waits the retry's
 * time as before.
 */
export async function untilAccepting(url: string, ms: number, signal: AbortSignal): Promise<void> {
  const { host, port } = hostAndPort(url);
  const until = Date.now() + ms;
  while (!signal.aborted) {
    const left = until - Date.now();
    if (left <= 0) return;
    if (await reachable(host, port, Math.min(probeTimeoutMs, left))) return;
    await sleep(Math.min(probeEveryMs, until - Date.now()), signal);
  }
}

function hostAndPort(url: string): { host: string; port: number } {
  const u = new URL(url);
  const secure = u.protocol === "https:" || u.protocol === "wss:";
  // A URL keeps an IPv6 host in brackets; a socket wants it bare.
  return { host: u.hostname.replace(/^\[(.*)\]$/, "$1"), port: Number(u.port || (secure ? 443 : 80)) };
}
