// `npm run -s listen` (issue 65): a merchant's events forwarded to a plain-HTTP receiver on this
// machine, signed with the secret the command prints, over the public port's event stream. Real
// service, PostgreSQL, NATS and receivers; the command run as a new user runs it, as a process.
// A payment reported through ChainService as a watcher reports it; events recorded while the
// command is stopped arrive once each, in order, when it starts again; a receiver that takes 10 s
// holds back no endpoint's delivery; `trigger` records the event it names; `resend` sends one again.
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import t from "tap";
import { signPayload } from "../../services/delivery/signature.ts";
import { call, idemKey, merchantWithKey, until } from "../helpers/harness.ts";
import { reportEthereumOutput } from "../helpers/lifecycle.ts";
import { runCli } from "../helpers/processes.ts";
import { eventsOnce, webhookSetup } from "../helpers/webhooks.ts";

const root = path.resolve(import.meta.dirname, "../..");
// RATE_SOURCES=fixed: a Test intent priced in USD is quoted offline, and its lapsed quote re-quoted.
const s = await webhookSetup(t, { roles: ["rpc", "gateway", "worker"], env: { ETHEREUM_CONFIRMATIONS: "1", RATE_SOURCES: "fixed" } });
const stateDir = mkdtempSync(path.join(tmpdir(), "listen-state-"));
t.teardown(() => rmSync(stateDir, { recursive: true, force: true }));
const intentsPath = `/api/v1/merchants/${s.creds.merchant}/payment-intents`;

interface Received {
  body: string;
  headers: http.IncomingHttpHeaders;
}

/** A plain-HTTP receiver on loopback, as a developer's app would be: it records and answers 200, after `delayMs`. */
async function localReceiver(delayMs = 0): Promise<{ url: string; received: Received[] }> {
  const received: Received[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      received.push({ body: Buffer.concat(chunks).toString("utf8"), headers: req.headers });
      setTimeout(() => res.writeHead(200).end("ok"), delayMs);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  t.teardown(() => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => resolve()); }));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/webhooks`, received };
}

interface Listener {
  child: ChildProcess;
  lines: string[];
  secret: string;
  stop(): Promise<void>;
}

const cliEnv = (key: string) => ({ PATH: process.env.PATH ?? "", PAYMENTS_API_KEY: key, PAYMENTS_API_BASE: s.base, LISTEN_STATE_DIR: stateDir });

/** Starts `npm run -s listen -- --forward-to <url> …` and waits for it to say it is ready. */
async function startListen(key: string, ...args: string[]): Promise<Listener> {
  const child = spawn(process.execPath, [path.join(root, "services/listen/main.ts"), ...args], { cwd: root, env: cliEnv(key), stdio: ["ignore", "pipe", "pipe"] });
  const lines: string[] = [];
  let buffered = "";
  const take = (chunk: Buffer) => {
    buffered += chunk.toString("utf8");
    const parts = buffered.split("\n");
    buffered = parts.pop() ?? "";
    lines.push(...parts);
  };
  child.stdout.on("data", take);
  child.stderr.on("data", take);
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  t.teardown(() => {
    child.kill("SIGKILL");
  });
  await until("listen is ready", async () => lines.some((l) => l.startsWith("Ready.")) || (child.exitCode !== null && Promise.reject(new Error(lines.join("\n")))), 30_000);
  const secret = /Signing secret: (whsec_\S+)/.exec(lines.join("\n"))?.[1];
  if (!secret) throw new Error(`no secret printed:\n${lines.join("\n")}`);
  return {
    child,
    lines,
    secret,
    stop: async () => {
      child.kill("SIGINT");
      await exited;
    },
  };
}

/** What the receiver got that verifies with `secret` exactly as a delivery's signature does. */
function verified(received: Received[], secret: string): { id: string; type: string; data: any; headers: http.IncomingHttpHeaders }[] {
  return received
    .filter((r) => r.headers["x-service-signature"] === signPayload(secret, Number(r.headers["x-service-timestamp"]), r.body))
    .map((r) => ({ ...(JSON.parse(r.body) as { id: string; type: string; data: any }), headers: r.headers }));
}

async function createIntent(body: Record<string, string> = { network: "ethereum", asset: "USDC", requested_amount: "5.00" }) {
  const res = await call(s.base, "POST", intentsPath, { key: s.creds.key, idempotencyKey: idemKey(), body });
  if (res.status !== 200) throw new Error(`create: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.data as { public_id: string; deposit_address: string };
}

t.test("a payment reported by a watcher: payment.confirmed reaches a plain-HTTP receiver, signed with the printed secret", async (t) => {
  const receiver = await localReceiver();
  const listener = await startListen(s.creds.key, "--forward-to", receiver.url);
  t.match(listener.lines.join("\n"), new RegExp(`Forwarding Test events of ${s.creds.merchant} to ${receiver.url.replace(/[/.]/g, "\\$&")}`));
  const pi = await createIntent();

  const txHash = await reportEthereumOutput(s.app, s.rpcUrl, "listen-watcher", { toAddress: pi.deposit_address, asset: "USDC", amount: "5" });
  const confirmed = await until("payment.confirmed forwarded", async () => verified(receiver.received, listener.secret).find((e) => e.type === "payment.confirmed" && e.data.payment_intent?.public_id === pi.public_id), 30_000, () => listener.lines.join("\n"));
  t.equal(confirmed.data.payment_intent.status, "confirmed");
  t.equal(confirmed.data.payment_intent.transactions?.[0]?.tx_hash, txHash, "paid by the watcher's transaction");
  t.equal(confirmed.headers["x-service-event-id"], confirmed.id, "the event id header, as a delivery sends it");
  t.equal(confirmed.headers["content-type"], "application/json");
  // The body is the event's stored bytes: what GET webhook-events/{id} reads back.
  const stored = await call(s.base, "GET", `/api/v1/merchants/${s.creds.merchant}/webhook-events/${confirmed.id}`, { key: s.creds.key });
  t.equal(stored.body.data.id, confirmed.id);
  t.ok(verified(receiver.received, listener.secret).some((e) => e.type === "payment.intent.created" && e.data.payment_intent?.public_id === pi.public_id), "the create's event too");
  await until("its line printed", async () => listener.lines.some((l) => l.includes(confirmed.id) && /payment\.confirmed\s+evt_\S+\s+-> 200 \(\d+ ms\)/.test(l)), 10_000);
  const forwardedNothing = await s.app.db.em.fork().execute<{ n: number }[]>(`select count(*)::int as n from webhook_deliveries d join webhook_events e on e.id = d.event_id where e.payment_intent_id = ?`, [pi.public_id]);
  t.equal(forwardedNothing[0]?.n, 0, "no endpoint, no delivery: forwarding is not delivering");
  await listener.stop();
});

t.test("events recorded while listen is stopped arrive when it starts again, each once, in order, with the same secret", async (t) => {
  const receiver = await localReceiver();
  const first = await startListen(s.creds.key, "--forward-to", receiver.url);
  const sentinel = await createIntent();
  await until("the first listen forwards", async () => verified(receiver.received, first.secret).some((e) => e.data.payment_intent?.public_id === sentinel.public_id), 30_000);
  await first.stop();

  const created: string[] = [];
  for (let i = 0; i < 200; i += 20) created.push(...(await Promise.all(Array.from({ length: 20 }, () => createIntent()))).map((p) => p.public_id));
  const second = await startListen(s.creds.key, "--forward-to", receiver.url);
  t.equal(second.secret, first.secret, "the secret is the same at every start for this key");
  t.match(second.lines.join("\n"), /Resuming after evt_/);
  // A sentinel recorded after the 200: once it is in, nothing of theirs is still on its way.
  const last = await createIntent();
  await until("the sentinel after the 200", async () => verified(receiver.received, second.secret).some((e) => e.data.payment_intent?.public_id === last.public_id), 60_000);
  const events = verified(receiver.received, second.secret).filter((e) => e.type === "payment.intent.created");
  const ids = events.map((e) => e.id);
  t.equal(new Set(ids).size, ids.length, "no event twice");
  const missed = events.filter((e) => created.includes(e.data.payment_intent.public_id));
  t.equal(missed.length, 200, "all 200 recorded while stopped arrived");
  const times = missed.map((e) => e.id);
  t.same(times, [...times].sort(), "in the order they were recorded");
  await second.stop();
});

t.test("a receiver that answers after 10 s holds back no endpoint's delivery of the same event", async (t) => {
  const slow = await localReceiver(10_000);
  const endpoint = await s.createEndpoint();
  const listener = await startListen(s.creds.key, "--forward-to", slow.url, "--from", "now");
  const a = await createIntent();
  await until("the slow receiver has the first event", async () => slow.received.some((r) => r.body.includes(a.public_id)), 30_000);
  const held = Date.now();
  // The same event, delivered to the endpoint while the listener's receiver still holds it.
  await until("the endpoint's delivery of the event the receiver holds", async () => eventsOnce(s.receiver, endpoint.secret, new URL(endpoint.url).pathname).some((e) => e.data.payment_intent?.public_id === a.public_id), 30_000);
  t.ok(Date.now() - held < 9_000, "the endpoint had it while the receiver still held it");
  // While the listener waits on its receiver, a second event: the endpoint has it at once.
  const b = await createIntent();
  const started = Date.now();
  await until("the endpoint's delivery of the second event", async () => eventsOnce(s.receiver, endpoint.secret, new URL(endpoint.url).pathname).some((e) => e.data.payment_intent?.public_id === b.public_id), 30_000);
  t.ok(slow.received.every((r) => !r.body.includes(b.public_id)), "the listener had not forwarded it yet when the endpoint had it");
  t.ok(Date.now() - started < 9_000, "delivered while the receiver still held the first");
  await until("the listener forwards it after", async () => slow.received.some((r) => r.body.includes(b.public_id)), 40_000);
  await listener.stop();
});

t.test("trigger records the event it names (confirmed, exception, detected, reorged, cancelled, requoted); resend forwards one again", async (t) => {
  const receiver = await localReceiver();
  const triggered = ["payment.confirmed", "payment.exception", "payment.detected", "payment.reorged", "payment.cancelled", "payment.requoted"];
  const listener = await startListen(s.creds.key, "--forward-to", receiver.url, "--events", triggered.join(","), "--from", "now");
  for (const type of triggered) {
    const run = await runCli("services/listen/main.ts", cliEnv(s.creds.key), "trigger", type);
    t.equal(run.code, 0, run.stderr + run.stdout);
    const id = /created (pi_\S+)/.exec(run.stdout)?.[1];
    t.ok(id, `${type}: the intent named`);
    await until(`${type} forwarded`, async () => verified(receiver.received, listener.secret).find((e) => e.type === type && e.data.payment_intent?.public_id === id), 30_000);
  }
  const types = verified(receiver.received, listener.secret).map((e) => e.type);
  t.same([...new Set(types)].sort(), [...triggered].sort(), "--events: only the types asked for (no payment.intent.created)");
  const one = verified(receiver.received, listener.secret)[0]!;
  const before = receiver.received.length;
  const resent = await runCli("services/listen/main.ts", cliEnv(s.creds.key), "resend", one.id);
  t.equal(resent.code, 0, resent.stderr + resent.stdout);
  t.match(resent.stdout, new RegExp(`${one.id}\\s+-> 200`));
  const again = verified(receiver.received.slice(before), listener.secret);
  t.same(again.map((e) => e.id), [one.id], "the same event again, signed with the same secret");
  await listener.stop();
});

t.test("refusals: a Live key without webhooks:listen, a wrong after, a URL refused in Test names listen", async (t) => {
  const live = await merchantWithKey(s.app, "live", ["webhooks:read"]);
  const refused = await fetch(`${s.base}/api/v1/merchants/${live.merchant}/webhook-events/stream`, { headers: { authorization: `Bearer ${live.key}` } });
  t.equal(refused.status, 403);
  t.match(await refused.json(), { error: { code: "insufficient_scope", message: /webhooks:listen/ } });
  const bad = await fetch(`${s.base}/api/v1/merchants/${s.creds.merchant}/webhook-events/stream?after=pi_123`, { headers: { authorization: `Bearer ${s.creds.key}` } });
  t.equal(bad.status, 400);
  t.match(await bad.json(), { error: { code: "validation_failed", param: "after" } });
  const http = await call(s.base, "POST", `/api/v1/merchants/${s.creds.merchant}/webhook-endpoints`, { key: s.creds.key, body: { url: "http://localhost:3000/webhooks" } });
  t.equal(http.status, 400);
  t.match(http.body.error.message, /npm run -s listen -- --forward-to/);
  t.match(http.body.error.message, /WEBHOOK_CONNECT_TO/);
  const cli = await runCli("services/listen/main.ts", cliEnv(live.key), "--forward-to", "http://127.0.0.1:1/webhooks");
  t.equal(cli.code, 1);
  t.match(cli.stderr, /insufficient_scope.*webhooks:listen/);
});
