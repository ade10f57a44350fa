// `npm run -s listen`: forwards a merchant's events to a receiver on this machine, signed as
// deliveries are; `trigger` makes an event happen in Test; `resend` forwards a recorded event again.
// A client of the public REST API only (the same TLS as every other call): no database, no NATS.
import { parseArgs } from "node:util";
import { createParser, type EventSourceMessage } from "eventsource-parser";
import { ApiRefused, call, currentKey, type Api, type CurrentKey } from "./api.ts";
import { forward, line } from "./forward.ts";
import { forwarded, loadState, saveState, stateDir, stateFile, type ListenState } from "./state.ts";
import { trigger, triggerable } from "./trigger.ts";

const usage = `Usage:
  npm run -s listen -- --forward-to <url> [--events <type,...>] [--from now] [--api-base <url>] [--api-key <key>]
  npm run -s listen -- --print-secret [--api-base <url>] [--api-key <key>]
  npm run -s listen -- trigger <event type> [--api-base <url>] [--api-key <key>]
  npm run -s listen -- resend <evt_...> [--forward-to <url>] [--api-base <url>] [--api-key <key>]

The key is PAYMENTS_API_KEY unless --api-key gives one; the server is PAYMENTS_API_BASE, else
http://127.0.0.1:$PORT (8080). Triggerable: ${triggerable.join(", ")}.
Details: docs/webhooks.md, "Developing locally".`;

class UsageError extends Error {}

interface Options {
  api: Api;
  forwardTo?: string;
  events?: string;
  fromNow: boolean;
  timeoutMs: number;
  state: string;
}

function options(argv: string[]): { command: string; args: string[]; o: Options } {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      "forward-to": { type: "string" },
      events: { type: "string" },
      from: { type: "string" },
      "api-base": { type: "string" },
      "api-key": { type: "string" },
      "timeout-ms": { type: "string" },
      "print-secret": { type: "boolean" },
      help: { type: "boolean" },
    },
  });
  if (values.help) {
    console.log(usage);
    process.exit(0);
  }
  const key = values["api-key"] ?? process.env.PAYMENTS_API_KEY;
  if (!key) throw new UsageError("An API key is needed: set PAYMENTS_API_KEY or pass --api-key.");
  const base = (values["api-base"] ?? process.env.PAYMENTS_API_BASE ?? `http://127.0.0.1:${process.env.PORT || 8080}`).replace(/\/+$/, "");
  if (!URL.canParse(base)) throw new UsageError(`--api-base "${base}" is not a URL.`);
  if (values.from !== undefined && values.from !== "now") throw new UsageError(`--from takes "now" only (resuming after the last forwarded event is the default).`);
  const forwardTo = values["forward-to"];
  if (forwardTo !== undefined && !/^https?:\/\//.test(forwardTo)) throw new UsageError(`--forward-to "${forwardTo}" must be an http:// or https:// URL, e.g. http://localhost:3000/webhooks.`);
  const timeoutMs = values["timeout-ms"] === undefined ? 30_000 : Number(values["timeout-ms"]);
  if (!Number.isInteger(timeoutMs) || timeoutMs < 100) throw new UsageError("--timeout-ms must be a whole number of milliseconds, at least 100.");
  const [command = values["print-secret"] ? "print-secret" : "listen", ...args] = positionals;
  const api = { base, key };
  return { command, args, o: { api, forwardTo, events: values.events, fromNow: values.from === "now", timeoutMs, state: stateFile(stateDir(process.env), base, key) } };
}

const label = (k: CurrentKey) => (k.environment === "live" ? "Live" : "Test");

async function listen(o: Options): Promise<void> {
  if (!o.forwardTo) throw new UsageError("--forward-to is required, e.g. --forward-to http://localhost:3000/webhooks.");
  const forwardTo = o.forwardTo;
  const key = await currentKey(o.api);
  let state: ListenState = loadState(o.state);
  if (o.fromNow) state = { ...state, last: null, recent: [] };
  state = { ...state, forwardTo };
  saveState(o.state, state);
  console.log(`Forwarding ${label(key)} events of ${key.merchant} to ${forwardTo}${o.events ? ` (${o.events} only)` : ""}`);
  console.log(`Signing secret: ${state.secret} (the same at every start for this key on this machine; verify X-Service-Signature with it)`);
  console.log(state.last ? `Resuming after ${state.last} (--from now skips what was missed)` : "From now on");

  const stop = new AbortController();
  for (const signal of ["SIGINT", "SIGTERM"] as const) process.once(signal, () => stop.abort());
  let failures = 0;
  let ready = false;
  while (!stop.signal.aborted) {
    try {
      await streamOnce(o, key, state, stop.signal, {
        ready() {
          failures = 0;
          console.log(ready ? "Reconnected." : "Ready. Waiting for events (Ctrl-C to stop)…");
          ready = true;
        },
        async event(id, type, payload) {
          if (state.recent.includes(id)) return;
          const result = await forward(forwardTo, state.secret, id, payload, o.timeoutMs);
          console.log(line(new Date(), type, id, result));
          state = forwarded(state, id);
          saveState(o.state, state);
        },
      });
    } catch (err) {
      if (stop.signal.aborted) break;
      if (err instanceof ApiRefused && err.status !== 429 && err.status < 500) throw err;
      failures++;
      const wait = Math.min(10_000, 500 * 2 ** Math.min(failures, 5));
      console.log(`The stream ended (${(err as Error).message}); reconnecting in ${Math.round(wait / 1000)} s…`);
      await new Promise((resolve) => setTimeout(resolve, wait));
    }
  }
}

interface Handlers {
  ready(): void;
  event(id: string, type: string, payload: string): Promise<void>;
}

/** One connection to the event stream, until it ends: each event handled before the next is read. */
async function streamOnce(o: Options, key: CurrentKey, state: ListenState, signal: AbortSignal, on: Handlers): Promise<void> {
  const query = new URLSearchParams();
  if (state.last) query.set("after", state.last);
  if (o.events) query.set("types", o.events);
  const url = `${o.api.base}/api/v1/merchants/${key.merchant}/webhook-events/stream${query.size ? `?${query}` : ""}`;
  let res: Response;
  try {
    res = await fetch(url, { headers: { authorization: `Bearer ${o.api.key}`, accept: "text/event-stream" }, signal });
  } catch (err) {
    const e = err as Error & { cause?: { code?: string } };
    throw new Error(`${o.api.base} does not answer: ${e.cause?.code ?? e.message}`);
  }
  if (!res.ok || !res.body) {
    const body = (await res.json().catch(() => ({}))) as { error?: { code?: string; message?: string } };
    throw new ApiRefused(res.status, body.error?.code ?? "unknown", body.error?.message ?? `HTTP ${res.status}`);
  }
  on.ready();
  const messages: EventSourceMessage[] = [];
  const parser = createParser({ onEvent: (m) => messages.push(m) });
  const text = new TextDecoder();
  for await (const chunk of res.body) {
    parser.feed(text.decode(chunk, { stream: true }));
    while (messages.length > 0) {
      const m = messages.shift() as EventSourceMessage;
      const data = JSON.parse(m.data) as { error?: { code: string; message: string }; event?: { id: string; type: string; payload: string } | null };
      if (m.event === "error" && data.error) throw new ApiRefused(503, data.error.code, data.error.message);
      if (data.event) await on.event(data.event.id, data.event.type, data.event.payload);
    }
  }
  throw new Error("the server closed it");
}

async function resend(o: Options, id: string | undefined): Promise<void> {
  if (!id || !id.startsWith("evt_")) throw new UsageError("resend takes an event id: npm run -s listen -- resend evt_…");
  const key = await currentKey(o.api);
  const state = loadState(o.state);
  const to = o.forwardTo ?? state.forwardTo;
  if (!to) throw new UsageError("Where to? Pass --forward-to, or run listen once with it (resend then uses the same URL).");
  const event = await call<{ data: { id: string; type: string } }>(o.api, "GET", `/api/v1/merchants/${key.merchant}/webhook-events/${encodeURIComponent(id)}`);
  saveState(o.state, state);
  const result = await forward(to, state.secret, event.data.id, JSON.stringify(event.data), o.timeoutMs);
  console.log(line(new Date(), event.data.type, event.data.id, result));
  if (result.status === null || result.status >= 300) process.exitCode = 1;
}

async function main(): Promise<void> {
  const { command, args, o } = options(process.argv.slice(2));
  if (command === "listen") return listen(o);
  if (command === "resend") return resend(o, args[0]);
  if (command === "print-secret") {
    // What a receiver is configured with before listen starts: made now if this is the first time.
    const state = loadState(o.state);
    saveState(o.state, state);
    console.log(state.secret);
    return;
  }
  if (command === "trigger") {
    const key = await currentKey(o.api);
    if (key.environment !== "test") throw new UsageError("trigger works with a Test key only: it drives a Test intent through the sandbox.");
    if (!args[0]) throw new UsageError(`trigger takes an event type: ${triggerable.join(", ")}.`);
    for (const done of await trigger(o.api, key.merchant, args[0])) console.log(done);
    const when = args[0] === "payment.requoted" ? "is recorded by the server's requote sweep within a second" : "is recorded";
    console.log(`${args[0]} ${when}: a running listen forwards it, and endpoints that take it get a delivery.`);
    return;
  }
  throw new UsageError(`Unknown command "${command}".\n${usage}`);
}

main().then(
  () => process.exit(process.exitCode ?? 0),
  (err: unknown) => {
    if (err instanceof UsageError) console.error(err.message);
    else if (err instanceof ApiRefused) console.error(`Refused (${err.status} ${err.code}): ${err.message}`);
    else console.error(err instanceof Error ? err.message : String(err));
    process.exit(err instanceof UsageError ? 2 : 1);
  },
);
