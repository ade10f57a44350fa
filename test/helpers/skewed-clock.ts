// Loaded into one process with `node --import` (skewedClock() gives the environment): its wall
// clock reads SKEWED_CLOCK_MS ahead of the machine's (behind, when negative), as on a host whose
// clock has drifted. Date.now(), `new Date()` and `Date()` move; a Date made from a given time does
// not, and neither does performance.now() (monotonic), as on such a host. Everything else, the
// test, PostgreSQL and the other processes, keeps the machine's clock.
import { pathToFileURL } from "node:url";

const offsetMs = Number(process.env.SKEWED_CLOCK_MS ?? "0");

if (offsetMs !== 0) {
  const RealDate = Date;
  const now = () => RealDate.now() + offsetMs;
  globalThis.Date = new Proxy(RealDate, {
    construct: (target, args, newTarget) => Reflect.construct(target, args.length === 0 ? [now()] : args, newTarget),
    apply: () => new RealDate(now()).toString(),
    get: (target, key, receiver) => (key === "now" ? now : Reflect.get(target, key, receiver)),
  });
}

/** The environment of a child process (spawnService) whose clock reads `offsetMs` ahead of the machine's. */
export function skewedClock(offsetMs: number): Record<string, string> {
  return { NODE_OPTIONS: `--import=${pathToFileURL(import.meta.filename).href}`, SKEWED_CLOCK_MS: String(offsetMs) };
}
