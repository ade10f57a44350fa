import { fromUnits, toUnits } from "../vocabulary/amount.ts";
import { findAsset } from "../vocabulary/assets.ts";
import { findCurrency } from "../vocabulary/currencies.ts";
import { valueAtRate } from "../rates/rate-math.ts";
import type { Intents } from "./intents.ts";
import { exceptionReason, impliedStatus, isPending, statusByFunds, uncountedReason, type Funds } from "./funds.ts";
import { isStatus, type Status } from "./status.ts";
import { chooseMethod, markFiatValueDue, methodPending, ofIntent, saveQuotes, saveSettled, updateStatuses, type IntentMethod, type IntentRow, type TransactionFact } from "./store.ts";
import { decideGrace, paidAt, requestedByQuotes } from "./quotes.ts";
import type { IntentPrice } from "./pricing.ts";
import { unvalued, valuationRate } from "./valuation.ts";
import { prepareEvent, recordPrepared, type NewEvent, type PreparedEvent } from "../events/record.ts";
import { apiError } from "../platform/errors.ts";
import type { EntityManager } from "../platform/db.ts";

/** An output paying an intent as settlement weighs it: the chain's facts about it, and whether (and how late) it counts. */
export interface IntentOutput extends TransactionFact {
  id: number;
  countedLate: boolean;
}

/** What counts of each output, as settlement decided it. */
export interface CountedChange {
  id: number;
  counted: boolean;
  countedLate: boolean;
  /** As it first counts: its value at the market's rate of the moment (marketValue). */
  valueAtCount?: string | undefined;
}

/**
 * The chain's outputs of intents, as settlement reads them and keeps what counts: the chain's
 * facts live with the chain (chains/outputs.ts), what they mean for an intent here.
 */
export interface IntentOutputs {
  /** The outputs of each intent, oldest first. */
  of(tx: EntityManager, intentIds: readonly string[]): Promise<Map<string, IntentOutput[]>>;
  markCounted(tx: EntityManager, changes: readonly CountedChange[], at: Date): Promise<void>;
  /** Marks outputs as told to the merchant (payment.exception); returns the ids not told before. */
  markExceptionReported(tx: EntityManager, ids: readonly number[], at: Date): Promise<number[]>;
  /** Fixes outputs' value in their intent's price currency, where none was fixed yet. */
  setFiatValues(tx: EntityManager, values: readonly { id: number; value: string }[]): Promise<void>;
}

/**
 * Brings a locked intent in line with its outputs: decides which count (the
 * intent's asset, the network's confirmations, not orphaned), saves
 * amount_received, and moves the status to what the funds and expiry imply —
 * each move through intents.transition(), so each emits its event once, in
 * the caller's transaction.
 */
export async function settle(tx: EntityManager, intents: Intents, outputs: IntentOutputs, locked: IntentRow, now: Date): Promise<IntentRow> {
  return (await settleMany(tx, intents, outputs, [locked], now))[0] as IntentRow;
}

/**
 * settle() for many locked intents at once: their outputs read in one statement, what counts and
 * amount_received saved in one statement each, and only the intents whose status moves go
 * through intents.transition() (each move's event once).
 */
export async function settleMany(tx: EntityManager, intents: Intents, chainOutputs: IntentOutputs, locked: readonly IntentRow[], now: Date): Promise<IntentRow[]> {
  if (locked.length === 0) return [];
  const outputsOf = await chainOutputs.of(tx, locked.map((r) => r.id));
  const graceMs = intents.quoting.graceSeconds * 1000;
  const chosen = await chooseMethods(tx, locked, outputsOf, now);
  // A re-quoted intent's payment within a replaced quote's grace: which of the two quotes it
  // counts at is decided once, here, before its value is fixed at that quote (quotes.ts).
  const graced = new Set<string>();
  const rows = chosen.map((row) => {
    const price = decideGrace(row, outputsOf.get(row.id) ?? [], intents.views.terms(row), graceMs, now);
    if (!price) return row;
    graced.add(row.id);
    return { ...row, price };
  });
  // Before the intents' transactions are copied from the outputs below.
  const { values: valued, due } = fiatValues(intents, rows, outputsOf, now);
  const changes: CountedChange[] = [];
  const amounts: { id: string; amount: string }[] = [];
  const quoted: { id: string; price: IntentPrice; requestedAmount: string }[] = [];
  const plans = rows.map((row) => {
    const asset = findAsset(row.network, row.asset);
    if (!asset) throw new Error(`intent ${row.id} has an unknown asset`);
    const terms = intents.views.terms(row);
    const expired = now.getTime() >= row.expiresAt.getTime();
    // Past its expiry an unpaid intent is expired, whether or not the scheduler got there first:
    // funds that count from now on are late.
    const expireFirst = expired && (row.status === "pending" || row.status === "underpaid");
    const lateFromNow = expireFirst || row.status === "expired" || row.status === "late";
    const outputs = outputsOf.get(row.id) ?? [];
    const funds: Funds = { counted: 0n, countedLate: 0n };
    for (const o of outputs) {
      const counts = uncountedReason(o, terms) === undefined;
      const late = counts && (o.counted ? o.countedLate : lateFromNow);
      if (counts !== o.counted || late !== o.countedLate) {
        const valueAtCount = counts && !o.counted ? marketValue(intents, row, o, now) : undefined;
        changes.push({ id: o.id, counted: counts, countedLate: late, valueAtCount });
        o.counted = counts;
        o.countedLate = late;
      }
      if (counts) {
        const units = toUnits(o.amount, asset.decimals);
        funds.counted += units;
        if (late) funds.countedLate += units;
      }
    }
    const amountReceived = outputs.length > 0 ? fromUnits(funds.counted, asset.decimals) : null;
    if (amountReceived !== null && amountReceived !== row.amountReceived) amounts.push({ id: row.id, amount: amountReceived });
    // A re-quoted intent asks for what its quotes and the payments each took say (quotes.ts).
    const requestedAmount = requestedByQuotes(row, outputs, terms, graceMs, now) ?? row.requestedAmount;
    if (row.price && (graced.has(row.id) || requestedAmount !== row.requestedAmount)) quoted.push({ id: row.id, price: row.price, requestedAmount });
    return { row: { ...row, requestedAmount, amountReceived, transactions: outputs.map(({ id: _, countedLate: __, ...fact }) => fact) }, asset, funds, expired, expireFirst };
  });
  const moves = plans.map((plan) => ({ row: plan.row, ...movesOf(plan, now) }));
  const detected = detectedNow(intents, moves, now);
  // An intent that moves saves its new amount and detected_at with its move (updateStatuses); the
  // others save theirs in one statement: one write each.
  const moving = new Set(moves.filter((m) => m.to.length > 0).map((m) => m.row.id));
  const amountOf = new Map(amounts.map((a) => [a.id, a.amount]));
  const planned = intents.planMoves(moves);
  const settled = planned.rows;
  // After the intent's own moves of this settlement, a millisecond each, so its events order by created_at.
  const movedBy = new Map(moves.map((m) => [m.row.id, m.to.length]));
  const found = exceptionsFound(intents, settled, outputsOf);

  // PostgreSQL writes the settlement while its events are built and serialized here, a few hundred
  // at a time between its statements: for thousands of intents (a catch-up's batch) building the
  // events takes about as long as writing the rows, and one waited for the other.
  const written = (async () => {
    await chainOutputs.markCounted(tx, changes, now);
    await saveSettled(
      tx,
      moves
        .filter((m) => !moving.has(m.row.id) && (amountOf.has(m.row.id) || detected.has(m.row.id)))
        .map((m) => ({ id: m.row.id, amount: amountOf.get(m.row.id) ?? null, detected: detected.has(m.row.id) })),
      now,
    );
    await saveQuotes(tx, quoted, now);
    await chainOutputs.setFiatValues(tx, valued);
    await markFiatValueDue(tx, due, now);
    const moved = planned.finals.length === 0 ? 0 : await updateStatuses(tx, planned.finals);
    // Each exception is told once: those not told before.
    const told = found.length === 0 ? [] : await chainOutputs.markExceptionReported(tx, found.map((f) => f.output.id), now);
    return { moved, told: new Set(told) };
  })();
  // Awaited below, after the events are built; a failure meanwhile is not unhandled.
  written.catch(() => undefined);
  // The events are inserted a thousand at a time as they are built, after the rows: the last
  // thousand waits, not all of them.
  const events: PreparedEvent[] = [];
  let inserted: Promise<void> = written.then(() => undefined);
  const flush = () => {
    const batch = events.splice(0);
    if (batch.length > 0) inserted = inserted.then(() => recordPrepared(tx, batch));
  };
  const add = (e: NewEvent) => {
    events.push(prepareEvent(e));
    if (events.length >= eventsPerInsert) flush();
  };
  try {
    await inTurns(planned.steps, (step) => add(intents.moveEvent(step)));
    await inTurns(
      settled.filter((row) => detected.has(row.id)),
      (row) => add(detectedEvent(intents, row, now, movedBy)),
    );
  } finally {
    // Nothing queued on the transaction is still to run when it goes on, or rolls back.
    await inserted.catch(() => undefined);
  }
  const { moved, told } = await written;
  await inserted;
  if (moved < planned.finals.length) throw apiError("invalid_state", "A payment intent changed while this request ran; read it again.");
  for (const e of exceptionEvents(intents, found.filter((f) => told.has(f.output.id)), now, movedBy)) add(e);
  flush();
  await inserted;
  return settled;
}

/**
 * An intent offering several methods takes the method of its first payment: the oldest output not
 * orphaned whose network and asset are one of its methods (in the mempool too: the shopper has
 * chosen). From then on the intent is that method's, exactly as if created with it, and a payment
 * to another is an exception (other_method). A choice stands even if a reorg takes that payment
 * back: the shopper was shown only the chosen method since.
 */
async function chooseMethods(tx: EntityManager, rows: readonly IntentRow[], outputsOf: ReadonlyMap<string, IntentOutput[]>, now: Date): Promise<IntentRow[]> {
  const chosen: IntentRow[] = [];
  for (const row of rows) {
    const first = methodPending(row) ? (outputsOf.get(row.id) ?? []).find((o) => !o.orphaned && methodOf(row, o)) : undefined;
    const m = first && methodOf(row, first);
    if (!m || !(await chooseMethod(tx, row, m, now))) {
      chosen.push(row);
      continue;
    }
    chosen.push({
      ...row,
      network: m.network,
      asset: m.asset,
      requestedAmount: m.requestedAmount,
      depositAddress: m.depositAddress,
      requiredConfirmations: m.requiredConfirmations,
      price: row.price && m.rate !== null ? { ...row.price, rate: m.rate, sources: m.sources } : row.price,
    });
  }
  return chosen;
}

/** The method of an intent offering several that an output pays, if any. */
function methodOf(row: IntentRow, o: Pick<IntentOutput, "network" | "asset">): IntentMethod | undefined {
  return row.methods?.find((m) => m.network === o.network && m.asset === o.asset);
}

/**
 * An output's value at the market's rate of `now` as a quote reads it (the median of fresh
 * agreeing sources, without the merchant's spread), in the intent's price currency: what the books
 * call its value at confirmation, kept as it first counts. Only a fiat-priced intent's outputs of
 * its asset; undefined without a fresh rate (the engine keeps no history, so none is made up later).
 */
function marketValue(intents: Intents, row: IntentRow, o: IntentOutput, now: Date): string | undefined {
  if (!row.price || !ofIntent(row, o) || o.orphaned) return undefined;
  const asset = findAsset(row.network, row.asset);
  const currency = findCurrency(row.price.currency);
  const q = intents.rates?.quote(row.asset, row.price.currency, row.environment === "live" ? "live" : "test", now.getTime());
  return asset && currency && q ? valueAtRate(o.amount, asset.decimals, q.rate, currency.decimals) : undefined;
}

/**
 * What each output of a fiat-priced intent's asset was worth in its price currency, fixed by the
 * settlement that first sees it, so the merchant's books need no second lookup: within the
 * payment window at the quote it counts at (what the shopper was asked to pay at: quotes.ts), at
 * the market's rate of the moment for a late payment (valuation.ts has the rule). Rounded down to the
 * currency's places. Sets them on the outputs too. With no fresh rate the intent is returned as
 * `due`: marked, it is the valuation sweep's (valuation.ts), which values it at the first fresh
 * rate and says so in its timeline; until then settlements leave its values to the sweep, so that
 * a value fixed after the fact is always told.
 */
function fiatValues(intents: Intents, rows: readonly IntentRow[], outputsOf: ReadonlyMap<string, IntentOutput[]>, now: Date): { values: { id: number; value: string }[]; due: string[] } {
  const values: { id: number; value: string }[] = [];
  const due: string[] = [];
  for (const row of rows) {
    if (!row.price || row.fiatValueDueSince) continue;
    const asset = findAsset(row.network, row.asset);
    const currency = findCurrency(row.price.currency);
    if (!asset || !currency) continue;
    const pending = unvalued(row, outputsOf.get(row.id) ?? []);
    if (pending.length === 0) continue;
    // Each is seen by this settlement: its moment is `now` (within the window, it is valued at the
    // quote it counts at, by when it was paid).
    const rates = pending.map((o) => valuationRate(intents, row, now, now.getTime(), paidAt(o, now)));
    if (rates.some((r) => r === undefined)) {
      due.push(row.id);
      continue;
    }
    pending.forEach((o, i) => {
      o.fiatValue = valueAtRate(o.amount, asset.decimals, (rates[i] as NonNullable<(typeof rates)[number]>).rate, currency.decimals);
      values.push({ id: o.id, value: o.fiatValue });
    });
  }
  return { values, due };
}

/**
 * payment.exception, once per output: a payment to the intent's address that can never count for
 * it and that the merchant must act on (refund it, or ask the shopper): another asset of the
 * network (wrong_asset), or paid after the intent stopped taking payments (intent_cancelled,
 * after_late_window). Told once the output has the confirmations the intent's own asset would
 * need, so a reorg does not take back what the merchant was told. Its status does not change.
 * Delivered to endpoints that take the type (vocabulary/event-types.ts receives).
 */
function exceptionsFound(intents: Intents, rows: readonly IntentRow[], outputsOf: ReadonlyMap<string, IntentOutput[]>): { row: IntentRow; output: IntentOutput; reason: string }[] {
  return rows.flatMap((row) => {
    const terms = intents.views.terms(row);
    return (outputsOf.get(row.id) ?? []).flatMap((output) => {
      const reason = exceptionReason(output, terms);
      // A payment to another method counts its confirmations on its own chain, as that method would.
      const needs = (reason === "other_method" ? methodOf(row, output)?.requiredConfirmations : undefined) ?? terms.requiredConfirmations;
      return reason !== undefined && !output.orphaned && !output.mempool && output.confirmations >= needs ? [{ row, output, reason }] : [];
    });
  });
}

/** The payment.exception events of the exceptions found that were not told before. */
function exceptionEvents(intents: Intents, tell: readonly { row: IntentRow; output: IntentOutput; reason: string }[], now: Date, movedBy: ReadonlyMap<string, number>): NewEvent[] {
  return tell.map(({ row, output, reason }, i) =>
    intents.eventOf(
      row,
      "payment.exception",
      // After the intent's moves and its payment.detected of this settlement.
      new Date(now.getTime() + (movedBy.get(row.id) ?? 0) + 1 + i),
      {
        ...intents.views.eventData(row),
        exception: {
          reason,
          transaction: {
            network: output.network ?? row.network,
            tx_hash: output.txHash,
            output_index: output.outputIndex,
            asset: output.asset,
            amount: output.amount,
            confirmations: output.confirmations,
            block_height: output.blockHeight,
            simulated: output.simulated,
          },
        },
      },
    ),
  );
}

/**
 * payment.detected, once per intent: the first time a payable intent has funds of its asset on
 * the chain that do not count yet (a bitcoin payment in the mempool, or in a block short of the
 * intent's confirmations). Its status does not change. Decided before the settlement writes, from
 * the locked rows (their detected_at is this transaction's to set), so that detected_at goes in the
 * same write as the rest of what changed; each intent's row is marked (detectedAt) here.
 */
function detectedNow(intents: Intents, moves: readonly { row: IntentRow; to: readonly Status[] }[], now: Date): Set<string> {
  const detected = new Set<string>();
  for (const m of moves) {
    // What it is once this settlement's moves are made.
    const status = m.to.at(-1) ?? m.row.status;
    if (m.row.detectedAt !== null || (status !== "pending" && status !== "underpaid")) continue;
    const terms = intents.views.terms({ ...m.row, status });
    if (!(m.row.transactions ?? []).some((t) => isPending(t, terms))) continue;
    m.row.detectedAt = now;
    detected.add(m.row.id);
  }
  return detected;
}

/** payment.detected of an intent detectedNow marked. Delivered to endpoints that take the type (vocabulary/event-types.ts receives). */
function detectedEvent(intents: Intents, row: IntentRow, now: Date, movedBy: ReadonlyMap<string, number>): NewEvent {
  return intents.eventOf(row, "payment.detected", new Date(now.getTime() + (movedBy.get(row.id) ?? 0)));
}

/** Calls `each` on every item, letting other work (the settlement's statements) go on every few hundred. */
async function inTurns<T>(items: readonly T[], each: (item: T) => void): Promise<void> {
  for (let i = 0; i < items.length; i++) {
    if (i > 0 && i % turnSize === 0) await new Promise((resolve) => setImmediate(resolve));
    each(items[i] as T);
  }
}
/** Events built and serialized between two looks at the event loop: a few milliseconds' work. */
const turnSize = 200;
/** Events inserted by one statement while the next are built. */
const eventsPerInsert = 1000;

/** The statuses a settled intent moves through to reach what its funds and expiry imply (none: it stays). */
function movesOf(plan: { row: IntentRow; asset: { decimals: number }; funds: Funds; expired: boolean; expireFirst: boolean }, now: Date): { to: Status[]; at: Date[] } {
  const to: Status[] = [];
  // Each move of one settlement gets its own millisecond, so its events order by created_at.
  const at = () => Array.from({ length: to.length }, (_, i) => new Date(now.getTime() + i));
  let status = plan.row.status;
  if (plan.expireFirst) {
    to.push("expired");
    status = "expired";
  }
  if (!isStatus(status)) return { to, at: at() };
  const requested = toUnits(plan.row.requestedAmount, plan.asset.decimals);
  const tolerance = plan.row.underpaymentToleranceBps;
  const target = impliedStatus(status, requested, plan.funds, plan.expired, tolerance);
  if (target === status) return { to, at: at() };
  if (target === "expired" && status !== "late") {
    // A reorg took funds from an intent past its expiry: first back to what the funds say
    // (payment.reorged), then expired like any unpaid intent (payment.expired).
    const byFunds = statusByFunds(requested, plan.funds.counted, tolerance);
    if (byFunds !== status) to.push(byFunds);
  }
  to.push(target);
  return { to, at: at() };
}
