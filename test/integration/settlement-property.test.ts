// Settlement against the real code and database, as a property: random sequences of chain
// facts (new outputs, more confirmations, reorgs, re-mined outputs) and expiry, each in its
// own transaction, checked after every step against a model kept here (not the service's
// settle functions): amount_received, the status, and the events, each move once.
import { randomBytes } from "node:crypto";
import assert from "node:assert/strict";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import fc from "fast-check";
import t from "tap";
import { IntentService } from "../../gen/payments/v1/payment_intents_pb.ts";
import { Intents } from "../../services/intents/intents.ts";
import { IntentViews } from "../../services/intents/views.ts";
import { recordObservation, recordReorg } from "../../services/observations/record.ts";
import { idemKey, merchantWithKey, startTestApp } from "../helpers/harness.ts";

const { app, rpcUrl } = await startTestApp(t, {}, ["rpc"]);
const merchant = await merchantWithKey(app);
const client = createClient(IntentService, createGrpcTransport({ baseUrl: rpcUrl }));
const intents = new Intents(new IntentViews("https://checkout.example.test"));

const DECIMALS = 6;
const THRESHOLD = 12; // ethereum confirmations
const REQUESTED = 10n * 10n ** 6n; // "10" USDC

type Cmd =
  | { kind: "observe"; amount: number; confirmations: number }
  | { kind: "confirm"; k: number; more: number }
  | { kind: "reorg"; k: number }
  | { kind: "remine"; k: number; confirmations: number }
  | { kind: "expire" }
  /** expires_at passes, the scheduler does not run: the next settlement expires it first. */
  | { kind: "lapse" };

const cmdArb: fc.Arbitrary<Cmd> = fc.oneof(
  { weight: 4, arbitrary: fc.record({ kind: fc.constant("observe" as const), amount: fc.integer({ min: 1, max: 12 }), confirmations: fc.integer({ min: 0, max: 20 }) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("confirm" as const), k: fc.nat(11), more: fc.integer({ min: 1, max: 15 }) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("reorg" as const), k: fc.nat(11) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("remine" as const), k: fc.nat(11), confirmations: fc.integer({ min: 0, max: 20 }) }) },
  { weight: 1, arbitrary: fc.constant({ kind: "expire" as const }) },
  { weight: 1, arbitrary: fc.constant({ kind: "lapse" as const }) },
);

/** Decimal string → smallest units, written here (not the service's toUnits). */
function units(s: string): bigint {
  const [whole = "0", frac = ""] = s.split(".");
  assert.ok(frac.length <= DECIMALS, `more than ${DECIMALS} decimals: ${s}`);
  return BigInt(whole) * 10n ** BigInt(DECIMALS) + BigInt(frac.padEnd(DECIMALS, "0") || "0");
}

const hex64 = () => randomBytes(32).toString("hex");

// ---- the model ----
type Live = "pending" | "underpaid" | "confirmed" | "overpaid";
type ModelStatus = Live | "expired" | "late";
interface ModelOutput {
  txHash: string;
  blockHash: string;
  amount: number; // whole USDC
  confirmations: number;
  orphaned: boolean;
  /** Counted funds that became countable once the intent was expired. */
  late: boolean;
}
interface Model {
  outputs: ModelOutput[];
  expiresPassed: boolean;
  /** The intent is expired or late (it was unpaid at, or fell below requested after, its expiry). */
  closed: boolean;
  status: ModelStatus;
  events: number; // payment.* events other than payment.intent.created
}
interface Step {
  type: string;
  status: ModelStatus;
}

const counts = (o: ModelOutput) => !o.orphaned && o.confirmations >= THRESHOLD;
const toUnits = (whole: number) => BigInt(whole) * 10n ** BigInt(DECIMALS);
const countedOf = (m: Model) => m.outputs.filter(counts).reduce((s, o) => s + toUnits(o.amount), 0n);
function byFunds(counted: bigint): Live {
  if (counted === 0n) return "pending";
  if (counted < REQUESTED) return "underpaid";
  return counted === REQUESTED ? "confirmed" : "overpaid";
}
const rank: Record<Live, number> = { pending: 0, underpaid: 1, confirmed: 2, overpaid: 3 };
const isLive = (s: ModelStatus): s is Live => s in rank;

/** The events a move from one status to another emits, in order. */
function stepsOf(from: ModelStatus, to: ModelStatus, counted: bigint): Step[] {
  if (from === to) return [];
  if (isLive(from) && isLive(to)) return [{ type: rank[to] < rank[from] ? "payment.reorged" : `payment.${to}`, status: to }];
  if (isLive(from) && to === "expired") {
    // Unpaid at expiry: expired at once. Paid, then funds lost past expiry: back by funds, then expired.
    if (from === "pending" || from === "underpaid") return [{ type: "payment.expired", status: "expired" }];
    const back = byFunds(counted);
    return [
      { type: "payment.reorged", status: back },
      { type: "payment.expired", status: "expired" },
    ];
  }
  if (from === "expired" && to === "late") return [{ type: "payment.late", status: "late" }];
  if (from === "late" && to === "expired") return [{ type: "payment.reorged", status: "expired" }];
  throw new Error(`the model has no move ${from} → ${to}`);
}

/**
 * Applies a command's facts to the model (after the outputs changed) and returns the expected events.
 * `settles`: the command made the service look at the intent (not a lapse, not a reorg of nothing of it).
 */
function settleModel(m: Model, countedBefore: Set<ModelOutput>, settles: boolean): Step[] {
  if (!settles) return [];
  const steps: Step[] = [];
  // Unpaid past its expiry: expired first (by the scheduler or by this settlement), then the facts.
  if (!m.closed && m.expiresPassed && (m.status === "pending" || m.status === "underpaid")) {
    m.closed = true;
    m.status = "expired";
    steps.push({ type: "payment.expired", status: "expired" });
  }
  // Whatever becomes countable while the intent is closed is late; what stays counted keeps its kind.
  for (const o of m.outputs) {
    if (!counts(o)) o.late = false;
    else if (!countedBefore.has(o)) o.late = m.closed;
  }
  const counted = countedOf(m);
  if (!m.closed && m.expiresPassed && rank[byFunds(counted)] < rank.confirmed) m.closed = true;
  const next: ModelStatus = m.closed ? (m.outputs.some((o) => counts(o) && o.late) ? "late" : "expired") : byFunds(counted);
  steps.push(...stepsOf(m.status, next, counted));
  m.status = next;
  m.events += steps.length;
  return steps;
}

async function apply(m: Model, id: string, address: string, c: Cmd): Promise<Step[]> {
  const countedBefore = new Set(m.outputs.filter(counts));
  let settles = true;
  const pick = (k: number) => (m.outputs.length === 0 ? undefined : m.outputs[k % m.outputs.length]);
  const send = (o: ModelOutput) =>
    app.db.em.fork().transactional((tx) =>
      recordObservation(
        tx,
        intents,
        {
          network: "ethereum",
          environment: "test",
          asset: "USDC",
          toAddress: address,
          txHash: o.txHash,
          outputIndex: 0,
          amount: String(o.amount),
          confirmations: o.confirmations,
          blockHeight: 1,
          blockHash: o.blockHash,
          observedAt: new Date(),
        },
        false,
      ),
    );
  switch (c.kind) {
    case "observe": {
      const o = { txHash: hex64(), blockHash: hex64(), amount: c.amount, confirmations: c.confirmations, orphaned: false, late: false };
      m.outputs.push(o);
      await send(o);
      break;
    }
    case "confirm": {
      const o = pick(c.k);
      if (!o) return [];
      o.confirmations += c.more;
      o.orphaned = false; // reported again in its block: the block is on the best chain again
      await send(o);
      break;
    }
    case "reorg": {
      const o = pick(c.k);
      if (!o) return [];
      await app.db.em.fork().transactional((tx) => recordReorg(tx, intents, "ethereum", "test", [o.blockHash], []));
      settles = !o.orphaned; // a block already orphaned touches no intent
      o.orphaned = true;
      break;
    }
    case "remine": {
      const o = pick(c.k);
      if (!o) return [];
      o.blockHash = hex64(); // another block: it counts again
      o.orphaned = false;
      o.confirmations = c.confirmations;
      await send(o);
      break;
    }
    case "expire": {
      await app.db.em.fork().execute(`update payment_intents set expires_at = now() - interval '1 second' where id = ?`, [id]);
      await intents.expireDue(app.db.em.fork());
      m.expiresPassed = true;
      break;
    }
    case "lapse": {
      await app.db.em.fork().execute(`update payment_intents set expires_at = now() - interval '1 second' where id = ?`, [id]);
      m.expiresPassed = true;
      settles = false;
      break;
    }
  }
  return settleModel(m, countedBefore, settles);
}

interface EventRow {
  id: string;
  type: string;
  payload: string;
  created_at: string;
}

const stepKey = (s: Step) => `${s.type}>${s.status}`;

/** `seen`: ids of the events already checked; this command's are added. */
async function check(m: Model, id: string, seen: Set<string>, steps: Step[], where: string): Promise<void> {
  const em = app.db.em.fork();
  const [row] = await em.execute<{ status: string; amount_received: string | null }[]>(
    `select status, amount_received::text as amount_received from payment_intents where id = ?`,
    [id],
  );
  assert.ok(row, `${where}: the intent`);
  const outputs = await em.execute<{ tx_hash: string; amount: string; confirmations: number; orphaned: boolean; counted: boolean; counted_late: boolean }[]>(
    `select tx_hash, amount::text as amount, confirmations, orphaned, counted, counted_late from chain_observations where payment_intent_id = ?`,
    [id],
  );
  // Outputs: the same facts, and counted exactly when not orphaned with enough confirmations.
  assert.equal(outputs.length, m.outputs.length, `${where}: outputs recorded`);
  for (const o of m.outputs) {
    const r = outputs.find((x) => x.tx_hash === o.txHash);
    assert.ok(r, `${where}: output ${o.txHash}`);
    assert.equal(units(r.amount), toUnits(o.amount), `${where}: amount of ${o.txHash}`);
    assert.equal(r.confirmations, o.confirmations, `${where}: confirmations of ${o.txHash}`);
    assert.equal(r.orphaned, o.orphaned, `${where}: orphaned ${o.txHash}`);
    assert.equal(r.counted, counts(o), `${where}: counted ${o.txHash}`);
    assert.equal(r.counted_late, counts(o) && o.late, `${where}: counted_late ${o.txHash}`);
  }
  // amount_received: the sum of what counts (null until the first output).
  const dbSum = outputs.filter((r) => !r.orphaned && r.confirmations >= THRESHOLD).reduce((s, r) => s + units(r.amount), 0n);
  if (m.outputs.length === 0) assert.equal(row.amount_received, null, `${where}: no outputs, no amount_received`);
  else {
    assert.ok(row.amount_received !== null, `${where}: amount_received set`);
    assert.equal(units(row.amount_received), dbSum, `${where}: amount_received = counted outputs in the database`);
    assert.equal(units(row.amount_received), countedOf(m), `${where}: amount_received = counted outputs of the model`);
  }
  // Status.
  assert.equal(row.status, m.status, `${where}: status`);
  // Events: each move once, embedding the status it moved to, in the order of the moves: the
  // two moves of one transaction (expired then late; reorged then expired) are a millisecond apart.
  const events = await em.execute<EventRow[]>(`select id, type, payload, created_at::text as created_at from webhook_events where payment_intent_id = ? order by created_at`, [id]);
  assert.equal(events[0]?.type, "payment.intent.created", `${where}: created first`);
  assert.equal(new Set(events.map((e) => e.created_at)).size, events.length, `${where}: no two events of the intent share created_at`);
  // payment.detected is no status move: at most one per intent, the first time funds are seen not counting yet.
  assert.ok(events.filter((e) => e.type === "payment.detected").length <= 1, `${where}: payment.detected at most once`);
  const moves = events.filter((e) => e.type.startsWith("payment.") && e.type !== "payment.intent.created" && e.type !== "payment.detected");
  assert.equal(moves.length, m.events, `${where}: one event per status move`);
  const embedded = (e: EventRow): string => JSON.parse(e.payload).data.payment_intent.status;
  const fresh = events.filter((e) => !seen.has(e.id) && e.type !== "payment.detected");
  assert.deepEqual(fresh.map((e) => `${e.type}>${embedded(e)}`), steps.map(stepKey), `${where}: this command's events, in order`);
  for (const e of fresh) seen.add(e.id);
  assert.equal(embedded(events.at(-1) as EventRow), row.status, `${where}: the last event embeds the status`);
}

t.test("settlement: random chain facts and expiry keep amount, status and events consistent", async (t) => {
  let runs = 0;
  const reached = new Set<string>();
  await fc.assert(
    fc.asyncProperty(fc.array(cmdArb, { minLength: 1, maxLength: 12 }), async (cmds) => {
      runs++;
      const created = await client.createPaymentIntent(
        { merchant: merchant.merchant, network: "ethereum", asset: "USDC", requestedAmount: "10" },
        { headers: { authorization: `Bearer ${merchant.key}`, "idempotency-key": idemKey() } },
      );
      const id = created.data?.publicId ?? "";
      const address = created.data?.depositAddress ?? "";
      assert.ok(id && address, "created with a deposit address");
      const m: Model = { outputs: [], expiresPassed: false, closed: false, status: "pending", events: 0 };
      const seen = new Set<string>();
      await check(m, id, seen, [{ type: "payment.intent.created", status: "pending" }], "created");
      for (const [i, c] of cmds.entries()) {
        const before = m.status;
        const steps = await apply(m, id, address, c);
        await check(m, id, seen, steps, `after #${i} ${JSON.stringify(c)}`);
        if (steps.length > 0) reached.add([before, ...steps.map((s) => s.status)].join("→"));
      }
    }),
    { numRuns: Number(process.env.SETTLEMENT_RUNS ?? 150) },
  );
  t.pass(`${runs} runs (shrinks included)`);
  t.comment(`moves seen (one command each): ${[...reached].sort().join(", ")}`);
});
