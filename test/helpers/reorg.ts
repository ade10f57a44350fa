// What the reorg tests share: one anvil dev chain followed by the app's in-process watcher
// (ethereum Test), a merchant with a webhook endpoint on the local receiver, the app's log lines
// kept in memory, and the calls the tests make: intents through REST, events as the receiver got
// them (deduplicated by event id), blocks mined and replaced with anvil's own methods.
import { Writable } from "node:stream";
import type { Test } from "tap";
import { pino } from "pino";
import type { Hex } from "viem";
import { signPayment, startDevChain, type DevChain } from "../../scripts/devchain/chain.ts";
import type { Logger } from "../../services/platform/logger.ts";
import { call, idemKey, until } from "./harness.ts";
import { runCli } from "./processes.ts";
import { startRpcProxy, type RpcProxy } from "./rpc-proxy.ts";
import { consumerDrained, notDetected, signedEvents, webhookSetup, type WebhookSetup } from "./webhooks.ts";

interface Teardown {
  teardown(fn: () => unknown): void;
}

/** A pino logger at `level` whose lines (parsed JSON) are kept in memory. */
export function memoryLog(level = "info"): { logger: Logger; lines: () => Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  let partial = "";
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      partial += chunk.toString();
      const parts = partial.split("\n");
      partial = parts.pop() ?? "";
      for (const line of parts) if (line.trim() !== "") lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  return { logger: pino({ level, base: undefined }, sink), lines: () => [...lines] };
}

export interface Intent {
  public_id: string;
  deposit_address: Hex;
  required_confirmations: number;
}

export interface ReorgSetup {
  dev: DevChain;
  /** With `proxy`: what the watcher calls its node, relaying to `dev` until retargeted (another node put in its place). */
  node: RpcProxy | undefined;
  s: WebhookSetup;
  endpoint: { id: string; secret: string };
  log: ReturnType<typeof memoryLog>;
  createIntent(amount: string): Promise<Intent>;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  get(id: string): Promise<any>;
  /** Waits (at most `ms`) until the intent has `status`; returns it. */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  statusIs(id: string, status: string, ms?: number): Promise<any>;
  /** The types of the events received for the intent, each event once (by id), sorted. */
  eventsOf(id: string): string[];
  /** Waits (at most `ms`) until the intent has an event of `type` (deduplicated); returns its event types. */
  eventSeen(id: string, type: string, ms?: number): Promise<string[]>;
  pay(pi: { deposit_address: Hex }, amount: string): Promise<{ raw: Hex; hash: Hex }>;
  mine(blocks?: number): Promise<void>;
  /** Waits (at most `ms`) until the watcher processed the node's current head (chain_processed_height on the ops port); returns that height. */
  caughtUp(ms?: number): Promise<number>;
  head(): Promise<number>;
  /** anvil_reorg: the last `depth` blocks replaced by as many new ones, `txs` (signed raw, offset from the fork) in them. */
  reorg(depth: number, txs?: [Hex, number][]): Promise<void>;
  /** Runs the ops CLI against the app's database (and NATS prefix). */
  ops(...args: string[]): ReturnType<typeof runCli>;
  /** The merchant's go-live readiness check of the chain watcher (Test). */
  chainCheck(): Promise<{ id: string; passed: boolean; message: string }>;
  /** Sets a confirmation rule of the merchant with the admin CLI. */
  confirmations(asset: string, n: number): Promise<void>;
  /** What a failed run needs to be understood: the chain's row and blocks as the core keeps them, and the watcher's log lines. */
  diagnosis(): Promise<string>;
}

/**
 * `premine`: blocks mined before the app starts, so its watcher begins following the chain there.
 * `proxy`: the watcher reads `dev` through an RPC proxy (`node`), to be pointed at another node.
 */
export async function reorgSetup(t: Teardown, env: Record<string, string> = {}, o: { premine?: number; proxy?: boolean } = {}): Promise<ReorgSetup> {
  const dev = await startDevChain();
  t.teardown(() => dev.stop());
  if (o.premine) await dev.test.mine({ blocks: o.premine });
  const node = o.proxy ? await startRpcProxy(t, dev.url) : undefined;
  const log = memoryLog();
  const s = await webhookSetup(t, {
    env: { ETHEREUM_TEST_RPC_URL: node?.url ?? dev.url, ETHEREUM_CONFIRMATIONS: "3", WATCHER_POLL_MS: "100", ...env },
    logger: log.logger,
  });
  const endpoint = await s.createEndpoint();
  const a = s.creds;
  const intentsPath = `/api/v1/merchants/${a.merchant}/payment-intents`;
  const get = async (id: string) => (await call(s.base, "GET", `${intentsPath}/${id}`, { key: a.key })).body.data;
  const eventsOf = (id: string) => {
    const byId = new Map(signedEvents(s.receiver, endpoint.secret).map((e) => [e.id, e]));
    return [...byId.values()].filter((e) => e.data.payment_intent?.public_id === id && notDetected(e)).map((e) => e.type).sort();
  };
  const r: ReorgSetup = {
    dev,
    node,
    s,
    endpoint,
    log,
    async createIntent(amount) {
      const res = await call(s.base, "POST", intentsPath, { key: a.key, idempotencyKey: idemKey(), body: { network: "ethereum", asset: "USDC", requested_amount: amount } });
      if (res.status !== 200) throw new Error(`create: ${res.status} ${JSON.stringify(res.body)}`);
      return res.body.data as Intent;
    },
    get,
    async statusIs(id, status, ms = 45_000) {
      let last: unknown;
      return until(
        `${id} ${status}`,
        async () => {
          const pi = await get(id);
          last = pi && { status: pi.status, amount_received: pi.amount_received, transactions: pi.transactions };
          return pi?.status === status ? pi : undefined;
        },
        ms,
        () => JSON.stringify(last),
      );
    },
    eventsOf,
    eventSeen: (id, type, ms = 45_000) => until(`a ${type} event of ${id}`, async () => (eventsOf(id).includes(type) ? eventsOf(id) : undefined), ms, () => JSON.stringify(eventsOf(id))),
    pay: (pi, amount) => signPayment(dev, pi.deposit_address, amount, "USDC", 6),
    mine: async (blocks = 1) => {
      await dev.test.mine({ blocks });
    },
    head: async () => Number(await dev.public.getBlockNumber({ cacheTime: 0 })),
    async caughtUp(ms = 30_000) {
      const head = Number(await dev.public.getBlockNumber({ cacheTime: 0 }));
      let last: number | undefined;
      await until(
        `the watcher at block ${head}`,
        async () => (last = await metricValue(s.app.ports.ops, "chain_processed_height", { network: "ethereum", environment: "test" })) === head,
        ms,
        () => `chain_processed_height ${last}`,
      );
      return head;
    },
    async reorg(depth, txs = []) {
      await dev.test.request({ method: "anvil_reorg" as never, params: [depth, txs] as never });
    },
    ops: (...args) => runCli("services/app/ops-cli.ts", { DATABASE_URL: s.databaseUrl, NATS_URL: s.config.natsUrl ?? "nats://127.0.0.1:4222", JETSTREAM_PREFIX: s.prefix }, ...args),
    async chainCheck() {
      const res = await call(s.base, "GET", `/api/v1/merchants/${a.merchant}/go-live/readiness`, { key: a.key });
      if (res.status !== 200) throw new Error(`readiness: ${res.status} ${JSON.stringify(res.body)}`);
      const check = (res.body.data.checks as { id: string; passed: boolean; message: string }[]).find((c) => c.id === "chain_watcher");
      if (!check) throw new Error(`readiness has no chain_watcher check: ${JSON.stringify(res.body.data.checks)}`);
      return check;
    },
    async confirmations(asset, n) {
      const run = await runCli("services/app/admin.ts", { DATABASE_URL: s.databaseUrl }, "policy", "confirmations", "--merchant", a.merchant, "--environment", "test", "--network", "ethereum", "--asset", asset, "--confirmations", String(n));
      if (run.code !== 0) throw new Error(`admin policy confirmations: ${run.stderr}`);
    },
    async diagnosis() {
      const em = s.app.db.em.fork();
      const chain = `network = 'ethereum' and environment = 'test'`;
      const [row] = await em.execute(`select holder, epoch, height, head_height, lease_expires_at > now() as lease_live, halted_depth, halted_depth_is_lower_bound, halted_reason, accept_reorg from chain_watchers where ${chain}`);
      const blocks = await em.execute<{ height: string; hash: string; best: boolean }[]>(`select height, hash, best from chain_blocks where ${chain} order by height desc, best desc limit 120`);
      const watcher = log.lines().filter((l) => typeof l.chain === "string" || Number(l.level) >= 40).slice(-60);
      return [
        `node head ${Number(await dev.public.getBlockNumber({ cacheTime: 0 }))}`,
        `chain_watchers: ${JSON.stringify(row)}`,
        `chain_blocks (newest first): ${blocks.map((b) => `${b.height}${b.best ? "" : "(side)"} ${b.hash.slice(0, 10)}`).join(", ")}`,
        ...watcher.map((l) => JSON.stringify(l)),
      ].join("\n");
    },
  };
  // The watcher follows the chain before the test mines or reorgs: one started late (a loaded
  // machine) begins just below the node's head and knows only the maximum depth's blocks below it,
  // so a deeper fork right after would be measured from there (a 40-block reorg halted as 32).
  await r.caughtUp();
  return r;
}

/** The value of a sample of /metrics on the ops port with exactly these labels; undefined when absent. */
export async function metricValue(opsPort: number, name: string, labels: Record<string, string>): Promise<number | undefined> {
  const res = await fetch(`http://127.0.0.1:${opsPort}/metrics`);
  if (res.status !== 200) throw new Error(`/metrics answered ${res.status}`);
  const want = Object.entries(labels).sort(([x], [y]) => x.localeCompare(y));
  for (const line of (await res.text()).split("\n")) {
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{([^}]*)\})?\s+(\S+)/.exec(line);
    if (!m || m[1] !== name) continue;
    const got = [...(m[2] ?? "").matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)].map((x) => [x[1], x[2]] as [string, string]).sort(([x], [y]) => x.localeCompare(y));
    if (JSON.stringify(got) === JSON.stringify(want)) return Number(m[3]);
  }
  return undefined;
}

/**
 * A payment of `amount` to a new intent, mined, then `after` more blocks: confirmed, its event
 * received, the watcher caught up. Returns the intent, the payment, its block's height and the head.
 */
export async function confirmedPayment(r: ReorgSetup, amount: string, after: number): Promise<{ x: Intent; paid: { hash: Hex }; block: number; head: number }> {
  const x = await r.createIntent(amount);
  const paid = await r.pay(x, amount);
  await r.mine();
  const block = await r.head();
  await r.mine(after);
  await r.statusIs(x.public_id, "confirmed");
  await r.eventSeen(x.public_id, "payment.confirmed");
  return { x, paid, block, head: await r.caughtUp() };
}

/**
 * After a reorg that dropped `x`'s payment `paid`: a payment on the new branch (the sentinel) is
 * counted once the watcher followed the reorg, and `x` is pending again with its payment orphaned,
 * withdrawn once (exactly one payment.reorged).
 */
export async function newBranchCounts(
  t: Test,
  r: ReorgSetup,
  x: Intent,
  paid: { hash: Hex },
  what: string,
): Promise<void> {
  const y = await r.createIntent("1");
  const sentinel = await r.pay(y, "1");
  await r.mine(3);
  try {
    await r.statusIs(y.public_id, "confirmed");
    await r.eventSeen(y.public_id, "payment.confirmed");
    await consumerDrained(r.s);
  } catch (err) {
    t.fail(`the chain is followed after ${what}: a payment on the new branch is counted (${(err as Error).message})`);
  }
  const counted = await r.get(y.public_id);
  t.match(counted, { status: "confirmed", amount_received: "1" }, "the payment on the new branch counts");
  t.equal(counted.transactions[0]?.tx_hash, sentinel.hash, "by its transaction");

  const now = await r.get(x.public_id);
  t.same([now.status, now.amount_received, now.transactions.length], ["pending", "0", 1], "the dropped payment no longer counts: the intent is pending again, the transaction still listed");
  t.match(now.transactions[0], { tx_hash: paid.hash, counted: false, reason: "orphaned" }, "not counted, as orphaned");
  t.same(r.eventsOf(x.public_id), ["payment.confirmed", "payment.intent.created", "payment.reorged"], "withdrawn once: exactly one payment.reorged");
}
