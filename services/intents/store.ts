import type { Owner } from "../auth/keys.ts";
import type { CursorCodec } from "../platform/cursor.ts";
import type { EntityManager } from "../platform/db.ts";
import { findOwned, pageOwned, type OwnedPage } from "../platform/owned.ts";
import { executePrepared } from "../platform/prepared.ts";
import { PaymentIntentRecord } from "./entities.ts";
import type { IntentPrice, QuoteEntry } from "./pricing.ts";

/** Reads and writes of payment_intents: the one owner of the table. */

/** The columns of a payment intent as the domain uses them. */
export interface IntentRow {
  id: string;
  merchantId: string;
  environment: string;
  status: string;
  merchantReference: string | null;
  network: string;
  asset: string;
  requestedAmount: string;
  metadata: Record<string, string>;
  createdAt: Date;
  expiresAt: Date;
  depositAddress: string | null;
  /** Counted funds, a decimal string; null until a transaction is seen. */
  amountReceived: string | null;
  /** When funds that do not count yet were first seen (payment.detected, told once); null: never. */
  detectedAt: Date | null;
  /** What its completed refunds gave back in its network and asset; null or unset: none. */
  amountRefunded?: string | null;
  paidAt: Date | null;
  expiredAt: Date | null;
  cancelledAt: Date | null;
  /** api, site or pos; and for pos, who and where. */
  source: IntentSource;
  cashier: string | null;
  terminal: string | null;
  /** 1 at creation, one more with each status change. */
  sequence: number;
  /** What an output needs to count, fixed at creation; null on intents from before policies (the network's setting). */
  requiredConfirmations: number | null;
  /** How far below the requested amount counted funds still confirm it, in basis points. */
  underpaymentToleranceBps: number;
  /** The shop's pages the checkout page links back to; null when not given. */
  redirectUrl: string | null;
  cancelUrl: string | null;
  /** A fiat-priced intent's price and its quotes (the current one, and those it replaced); null when priced in its asset. */
  price: IntentPrice | null;
  /**
   * Since when an output of its asset has waited for its fiat value (seen while no rate was
   * fresh); the valuation sweep gives it one (valuation.ts). Null or unset: none waits.
   */
  fiatValueDueSince?: Date | null;
  /** The transactions to its address, when the caller loaded them. */
  transactions?: TransactionFact[];
  /**
   * The payment methods of an intent created with several, in the order asked; null on an intent
   * of one method. Until a payment chooses one (methodPending), network, asset, requestedAmount,
   * requiredConfirmations and price.rate are the first method's, and depositAddress is null.
   */
  methods: IntentMethod[] | null;
}

/** One payment method of an intent offering several. */
export interface IntentMethod {
  network: string;
  asset: string;
  /** The amount it asks: the intent's price at its rate, or the intent's requested amount. */
  requestedAmount: string;
  /** The intent's address on the network (the network's assets share it). */
  depositAddress: string;
  addressIndex: number | null;
  /** What an output of it needs to count, fixed at create by the merchant's policy. */
  requiredConfirmations: number;
  /** On a fiat-priced intent: units of the currency per unit of its asset, after the spread, and the sources. */
  rate: string | null;
  sources: string[];
}

/** Whether an output is of the intent's own network and asset (not another asset, nor another of its methods). */
export const ofIntent = (row: Pick<IntentRow, "network" | "asset">, t: Pick<TransactionFact, "network" | "asset">): boolean =>
  t.asset === row.asset && (t.network === undefined || t.network === row.network);

/** An intent offering several methods none of which a payment has chosen yet. */
export const methodPending = (row: Pick<IntentRow, "methods" | "depositAddress">): boolean => row.methods !== null && row.depositAddress === null;

/** A method as payment_intents.methods keeps it (network and asset as keys, so SQL can match an output: `methods @> …`). */
interface StoredMethod {
  network: string;
  asset: string;
  requested_amount: string;
  deposit_address: string;
  address_index: number | null;
  required_confirmations: number;
  rate: string | null;
  sources: string[];
}

const storedMethod = (m: IntentMethod): StoredMethod => ({
  network: m.network,
  asset: m.asset,
  requested_amount: m.requestedAmount,
  deposit_address: m.depositAddress,
  address_index: m.addressIndex,
  required_confirmations: m.requiredConfirmations,
  rate: m.rate,
  sources: m.sources,
});

function methodsOf(raw: StoredMethod[] | string | null): IntentMethod[] | null {
  const list = typeof raw === "string" ? (JSON.parse(raw) as StoredMethod[]) : raw;
  return (
    list?.map((m) => ({
      network: m.network,
      asset: m.asset,
      requestedAmount: m.requested_amount,
      depositAddress: m.deposit_address,
      addressIndex: m.address_index,
      requiredConfirmations: m.required_confirmations,
      rate: m.rate,
      sources: m.sources,
    })) ?? null
  );
}

export type IntentSource = "api" | "site" | "pos";

/** A transaction output to an intent's address, as the intent shows it. */
export interface TransactionFact {
  /** Its chain: the intent's own, or (an intent offering several methods) another method's. */
  network?: string | undefined;
  txHash: string;
  outputIndex: number;
  amount: string;
  confirmations: number;
  blockHeight: number | null;
  counted: boolean;
  simulated: boolean;
  asset: string;
  /** On a block that left the best chain, or (with mempool) withdrawn from the mempool. */
  orphaned: boolean;
  /** Seen in the mempool, in no block yet. */
  mempool: boolean;
  /** Signals replace-by-fee (BIP 125) while in the mempool. */
  replaceable: boolean;
  /** A fiat-priced intent's output of its asset: its value in the price currency when first seen. */
  fiatValue?: string | undefined;
  /** Its value at the market's rate when it first counted (settle.ts): the books' value at confirmation. */
  fiatValueConfirmed?: string | undefined;
  /** When the core first recorded it. */
  recordedAt?: Date | undefined;
  /** Its block's time, or when it was first seen in the mempool. */
  observedAt?: Date | undefined;
}

const columns = `i.id, i.merchant_id, i.environment, i.status, i.merchant_reference, i.network, i.asset,
  i.requested_amount::text as requested_amount, i.metadata, i.created_at, i.expires_at, i.deposit_address,
  i.amount_received::text as amount_received, i.paid_at, i.expired_at, i.cancelled_at, i.source, i.cashier, i.terminal,
  i.sequence, i.required_confirmations, i.underpayment_tolerance_bps, i.redirect_url, i.cancel_url,
  i.price_amount::text as price_amount, i.price_currency, i.quote_rate::text as quote_rate, i.quote_sources, i.quoted_at, i.fiat_value_due_since,
  i.quote_expires_at, i.quote_history, i.methods, i.amount_refunded::text as amount_refunded, i.detected_at`;

interface DbRow {
  id: string;
  merchant_id: string;
  environment: string;
  status: string;
  merchant_reference: string | null;
  network: string;
  asset: string;
  requested_amount: string;
  metadata: Record<string, string> | string;
  created_at: Date | string;
  expires_at: Date | string;
  deposit_address: string | null;
  amount_received: string | null;
  paid_at: Date | string | null;
  expired_at: Date | string | null;
  cancelled_at: Date | string | null;
  source: string;
  cashier: string | null;
  terminal: string | null;
  sequence: number;
  required_confirmations: number | null;
  underpayment_tolerance_bps: number;
  redirect_url: string | null;
  cancel_url: string | null;
  price_amount: string | null;
  price_currency: string | null;
  quote_rate: string | null;
  quote_sources: string[] | string | null;
  quoted_at: Date | string | null;
  fiat_value_due_since: Date | string | null;
  quote_expires_at: Date | string | null;
  quote_history: StoredQuote[] | string | null;
  methods: StoredMethod[] | string | null;
  amount_refunded: string | null;
  detected_at: Date | string | null;
}

/** A replaced quote as quote_history keeps it. */
interface StoredQuote {
  rate: string;
  sources: string[];
  quoted_at: string;
  expires_at: string;
  grace?: "taken" | "declined";
}

const storedQuote = (q: QuoteEntry): StoredQuote => ({
  rate: q.rate,
  sources: q.sources,
  quoted_at: q.quotedAt.toISOString(),
  expires_at: q.expiresAt.toISOString(),
  ...(q.grace === undefined ? {} : { grace: q.grace }),
});

const quoteEntry = (q: StoredQuote): QuoteEntry => ({
  rate: q.rate,
  sources: q.sources,
  quotedAt: new Date(q.quoted_at),
  expiresAt: new Date(q.expires_at),
  ...(q.grace === undefined ? {} : { grace: q.grace }),
});

function quoteHistory(raw: DbRow["quote_history"]): QuoteEntry[] {
  const list = typeof raw === "string" ? (JSON.parse(raw) as StoredQuote[]) : (raw ?? []);
  return list.map(quoteEntry);
}

const date = (v: Date | string | null) => (v === null ? null : new Date(v));

function fromDb(r: DbRow): IntentRow {
  return {
    id: r.id,
    merchantId: r.merchant_id,
    environment: r.environment,
    status: r.status,
    merchantReference: r.merchant_reference,
    network: r.network,
    asset: r.asset,
    requestedAmount: r.requested_amount,
    metadata: typeof r.metadata === "string" ? JSON.parse(r.metadata) : r.metadata,
    createdAt: new Date(r.created_at),
    expiresAt: new Date(r.expires_at),
    depositAddress: r.deposit_address,
    amountReceived: r.amount_received,
    amountRefunded: r.amount_refunded,
    detectedAt: date(r.detected_at),
    paidAt: date(r.paid_at),
    expiredAt: date(r.expired_at),
    cancelledAt: date(r.cancelled_at),
    source: r.source === "site" || r.source === "pos" ? r.source : "api",
    cashier: r.cashier,
    terminal: r.terminal,
    sequence: r.sequence,
    requiredConfirmations: r.required_confirmations,
    underpaymentToleranceBps: r.underpayment_tolerance_bps,
    redirectUrl: r.redirect_url,
    cancelUrl: r.cancel_url,
    price:
      r.price_amount === null || r.price_currency === null || r.quote_rate === null || r.quoted_at === null
        ? null
        : {
            amount: r.price_amount,
            currency: r.price_currency,
            rate: r.quote_rate,
            sources: typeof r.quote_sources === "string" ? (JSON.parse(r.quote_sources) as string[]) : (r.quote_sources ?? []),
            quotedAt: new Date(r.quoted_at),
            // Before quotes had a life of their own, a quote held until its intent expired.
            expiresAt: new Date(r.quote_expires_at ?? r.expires_at),
            history: quoteHistory(r.quote_history),
          },
    fiatValueDueSince: date(r.fiat_value_due_since),
    methods: methodsOf(r.methods),
  };
}

const insertColumns = `id, merchant_id, environment, status, merchant_reference, network, asset,
  requested_amount, metadata, created_at, expires_at, updated_at, deposit_address, address_index, source, cashier, terminal,
  sequence, required_confirmations, underpayment_tolerance_bps, redirect_url, cancel_url,
  price_amount, price_currency, quote_rate, quote_sources, quoted_at, quote_expires_at, methods`;

function insertParams(row: IntentRow, addressIndex: number | null): unknown[] {
  return [
    row.id,
    row.merchantId,
    row.environment,
    row.status,
    row.merchantReference,
    row.network,
    row.asset,
    row.requestedAmount,
    JSON.stringify(row.metadata),
    row.createdAt,
    row.expiresAt,
    row.createdAt,
    row.depositAddress,
    addressIndex,
    row.source,
    row.cashier,
    row.terminal,
    row.sequence,
    row.requiredConfirmations,
    row.underpaymentToleranceBps,
    row.redirectUrl,
    row.cancelUrl,
    row.price?.amount ?? null,
    row.price?.currency ?? null,
    row.price?.rate ?? null,
    row.price ? JSON.stringify(row.price.sources) : null,
    row.price?.quotedAt ?? null,
    row.price?.expiresAt ?? null,
    row.methods === null ? null : JSON.stringify(row.methods.map(storedMethod)),
  ];
}

export async function insertIntent(em: EntityManager, row: IntentRow, addressIndex: number | null): Promise<void> {
  // Plain SQL: this runs on every create, and the ORM's query building costs more than the insert.
  await em.execute(`insert into payment_intents (${insertColumns}) values (?, ?, ?, ?, ?, ?, ?, ?, ?::jsonb, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?::jsonb, ?, ?, ?::jsonb)`, insertParams(row, addressIndex));
  if (row.methods !== null) await insertMethodAddresses(em, row);
}

/**
 * The addresses of an intent offering several methods, one per network, in the create's
 * transaction (so they share its watch_xid): what the watchers follow and outputs are matched to.
 */
async function insertMethodAddresses(em: EntityManager, row: IntentRow): Promise<void> {
  const insert = methodAddressesInsert(row);
  await executePrepared(em, `${insert.sql} from json_to_recordset(?::json) as m(network text, address text, confirmations int)`, insert.params);
}

/** The insert of an intent's method addresses, to be completed by a FROM that yields `m` (its last `?` is the list). */
function methodAddressesInsert(row: IntentRow): { sql: string; params: unknown[] } {
  const byNetwork = new Map((row.methods ?? []).map((m) => [m.network, m.depositAddress]));
  const list = [...byNetwork].map(([network, address]) => ({
    network,
    address,
    // The most any of the network's methods needs: what the network's watcher must look back for.
    confirmations: Math.max(...(row.methods ?? []).filter((m) => m.network === network).map((m) => m.requiredConfirmations)),
  }));
  return {
    sql: `insert into payment_intent_methods (intent_id, network, environment, deposit_address, required_confirmations)
     select ?, m.network, ?, m.address, m.confirmations`,
    params: [row.id, row.environment, JSON.stringify(list)],
  };
}

/** The same as the CTE `methods` (+ `suffix`) of a larger statement, written only if `from` (a CTE of it) yields a row. */
export function insertMethodAddressesCte(row: IntentRow, from: string, suffix = ""): { sql: string; params: unknown[] } {
  const insert = methodAddressesInsert(row);
  return { sql: `methods${suffix} as (${insert.sql} from ${from} cross join json_to_recordset(?::json) as m(network text, address text, confirmations int) returning intent_id)`, params: insert.params };
}

/**
 * Fixes the method a payment chose on an intent offering several: its network, asset, amount,
 * address, confirmations and rate become the intent's. Only while none is chosen; returns whether it was.
 */
export async function chooseMethod(em: EntityManager, row: IntentRow, m: IntentMethod, at: Date): Promise<boolean> {
  const rows = await executePrepared<{ id: string }>(
    em,
    `update payment_intents set network = ?, asset = ?, requested_amount = ?::numeric, deposit_address = ?, address_index = ?, required_confirmations = ?,
            quote_rate = coalesce(?::numeric, quote_rate), quote_sources = coalesce(?::jsonb, quote_sources), updated_at = ?
      where id = ? and deposit_address is null returning id`,
    [m.network, m.asset, m.requestedAmount, m.depositAddress, m.addressIndex, m.requiredConfirmations, m.rate, m.rate === null ? null : JSON.stringify(m.sources), at, row.id],
  );
  return rows.length === 1;
}

/** The insert as the CTE `intent` (+ `suffix`) of a larger statement, written only if `from` (a CTE of it) yields a row. */
export function insertIntentCte(row: IntentRow, addressIndex: number | null, from: string, suffix = ""): { sql: string; params: unknown[] } {
  return {
    sql: `intent${suffix} as (
       insert into payment_intents (${insertColumns})
       select ?, ?, ?, ?, ?, ?, ?, ?, ?::jsonb, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?::numeric, ?::jsonb, ?::timestamptz, ?::timestamptz, ?::jsonb from ${from}
       returning id
     )`,
    params: insertParams(row, addressIndex),
  };
}

export async function findIntent(em: EntityManager, owner: Owner, id: string, forUpdate = false): Promise<IntentRow | undefined> {
  const row = await findOwned<DbRow>(em, `select ${columns} from payment_intents i where i.id = ?`, id, owner, forUpdate);
  return row && fromDb(row);
}

/** By public id alone, whoever owns it. */
export async function findIntentById(em: EntityManager, id: string): Promise<IntentRow | undefined> {
  const rows = await em.execute<DbRow[]>(`select ${columns} from payment_intents i where i.id = ?`, [id]);
  return rows[0] && fromDb(rows[0]);
}

export interface ListFilters {
  status?: string;
  createdAfter?: Date;
  createdBefore?: Date;
  publicId?: string;
  merchantReference?: string;
}

/** A page of the owner's intents, newest first; a cursor is bound to the owner and the filters. */
export async function listIntents(
  em: EntityManager,
  cursors: CursorCodec,
  owner: Owner,
  f: ListFilters,
  page: { cursor: string | undefined; limit: number; binding: string },
): Promise<OwnedPage<IntentRow>> {
  const result = await pageOwned<DbRow>(em, cursors, { select: `select ${columns} from payment_intents i`, alias: "i", owner, filters: filterClauses(f), ...page });
  return { ...result, rows: result.rows.map(fromDb) };
}

/** The list's filters as conditions on payment_intents aliased `i`, one `?` each. */
function filterClauses(f: ListFilters): [string, unknown][] {
  const filters: [string, unknown][] = [];
  if (f.status !== undefined) filters.push(["i.status = ?", f.status]);
  if (f.createdAfter) filters.push(["i.created_at > ?", f.createdAfter]);
  if (f.createdBefore) filters.push(["i.created_at < ?", f.createdBefore]);
  if (f.publicId !== undefined) filters.push(["i.id = ?", f.publicId]);
  if (f.merchantReference !== undefined) filters.push(["i.merchant_reference = ?", f.merchantReference]);
  return filters;
}

/**
 * The owner's intents matching the list's filters, newest first like the list, `limit` of them
 * after the keyset `after` (the last row of the previous batch): what an export reads batch by
 * batch, on the list's index, never with an OFFSET.
 */
export async function intentsAfter(em: EntityManager, owner: Owner, f: ListFilters, after: { createdAt: Date; id: string } | undefined, limit: number): Promise<IntentRow[]> {
  const filters = filterClauses(f);
  const where = ["i.merchant_id = ?", "i.environment = ?", ...filters.map(([clause]) => clause)];
  const params: unknown[] = [owner.merchantId, owner.environment, ...filters.map(([, value]) => value)];
  if (after) {
    where.push("(i.created_at, i.id) < (?, ?)");
    params.push(after.createdAt, after.id);
  }
  const rows = await em.execute<DbRow[]>(`select ${columns} from payment_intents i where ${where.join(" and ")} order by i.created_at desc, i.id desc limit ?`, [...params, limit]);
  return rows.map(fromDb);
}

/** The times a status records: kept while the intent stays in their statuses, cleared when it leaves them. */
export function statusTimes(row: Pick<IntentRow, "paidAt" | "expiredAt" | "cancelledAt">, to: string, at: Date): Pick<IntentRow, "paidAt" | "expiredAt" | "cancelledAt"> {
  const paid = to === "confirmed" || to === "overpaid";
  return {
    paidAt: paid ? (row.paidAt ?? at) : null,
    expiredAt: to === "expired" || to === "late" ? (row.expiredAt ?? at) : null,
    cancelledAt: to === "cancelled" ? (row.cancelledAt ?? at) : null,
  };
}

/** Moves an intent from `from` to `to`, one more in its sequence, unless it changed meanwhile; returns whether it moved. */
export async function updateStatus(em: EntityManager, row: IntentRow, to: string, times: ReturnType<typeof statusTimes>, at: Date): Promise<boolean> {
  // Guarded by status and sequence both: a status that left and came back (confirmed, reorged, confirmed) still moved.
  const changed = await em.nativeUpdate(PaymentIntentRecord, { id: row.id, status: row.status, sequence: row.sequence }, { status: to, updatedAt: at, sequence: row.sequence + 1, ...times });
  return changed === 1;
}

/**
 * Several intents moved at once, each guarded as updateStatus guards one, each with the amount
 * received and detected_at its row carries (what a settlement changed goes in the same write as
 * its move: one row version per intent, not two; detected_at is only ever set once); returns how many moved.
 */
export async function updateStatuses(em: EntityManager, moves: readonly { from: IntentRow; to: IntentRow; at: Date }[]): Promise<number> {
  const rows = await executePrepared<{ id: string }>(
    em,
    `update payment_intents i set status = m.status, sequence = m.sequence, updated_at = m.updated_at, paid_at = m.paid_at, expired_at = m.expired_at, cancelled_at = m.cancelled_at,
            amount_received = m.amount_received::numeric, detected_at = coalesce(i.detected_at, m.detected_at)
       from json_to_recordset(?::json) as m(id text, from_status text, from_sequence int, status text, sequence int, updated_at timestamptz, paid_at timestamptz, expired_at timestamptz, cancelled_at timestamptz,
            amount_received text, detected_at timestamptz)
      where i.id = m.id and i.status = m.from_status and i.sequence = m.from_sequence
      returning i.id`,
    [
      JSON.stringify(
        moves.map(({ from, to, at }) => ({
          id: from.id,
          from_status: from.status,
          from_sequence: from.sequence,
          status: to.status,
          sequence: to.sequence,
          updated_at: at,
          paid_at: to.paidAt,
          expired_at: to.expiredAt,
          cancelled_at: to.cancelledAt,
          amount_received: to.amountReceived,
          detected_at: to.detectedAt,
        })),
      ),
    ],
  );
  return rows.length;
}

/** Adds a completed refund's amount (in the intent's network and asset) to its amount_refunded. */
export async function addAmountRefunded(em: EntityManager, id: string, amount: string, at: Date): Promise<void> {
  await em.execute(`update payment_intents set amount_refunded = coalesce(amount_refunded, 0) + ?::numeric, updated_at = ? where id = ?`, [amount, at, id]);
}

/**
 * Saves what a settlement changed on intents whose status stays, one statement for all and one row
 * version each: a new amount_received (and updated_at with it), and detected_at where it is first
 * set (payment.detected).
 */
export async function saveSettled(em: EntityManager, changes: readonly { id: string; amount: string | null; detected: boolean }[], at: Date): Promise<void> {
  if (changes.length === 0) return;
  await executePrepared(
    em,
    `update payment_intents i set amount_received = coalesce(a.amount::numeric, i.amount_received),
            updated_at = case when a.amount is null then i.updated_at else ?::timestamptz end,
            detected_at = case when a.detected then coalesce(i.detected_at, ?::timestamptz) else i.detected_at end
       from json_to_recordset(?::json) as a(id text, amount text, detected boolean) where i.id = a.id`,
    [at, at, JSON.stringify(changes)],
  );
}

/** The intent whose deposit address this is on the chain (network and environment), locked for the caller's transaction. */
export async function lockIntentByAddress(em: EntityManager, network: string, environment: string, address: string): Promise<IntentRow | undefined> {
  // One statement: an address is an intent's own (one method) or one of its methods' (payment_intent_methods).
  const rows = await em.execute<DbRow[]>(
    `select ${columns} from payment_intents i
      where i.id = (select id from payment_intents where network = ? and environment = ? and deposit_address = ?
                    union all
                    select intent_id from payment_intent_methods where network = ? and environment = ? and deposit_address = ?
                    limit 1)
        for update`,
    [network, environment, address, network, environment, address],
  );
  return rows[0] && fromDb(rows[0]);
}

/** Intents by id, locked in id order (so concurrent lockers cannot deadlock). */
export async function lockIntents(em: EntityManager, ids: readonly string[]): Promise<IntentRow[]> {
  if (ids.length === 0) return [];
  const rows = await executePrepared<DbRow>(em, `select ${columns} from payment_intents i where i.id = any(?::text[]) order by i.id for update`, [`{${ids.join(",")}}`]);
  return rows.map(fromDb);
}

/** Claims intents past their expiry that can still expire; locked rows are skipped, not waited for. */
export async function claimDueIntents(em: EntityManager, batch: number): Promise<IntentRow[]> {
  const rows = await em.execute<DbRow[]>(
    `select ${columns} from payment_intents i
      where i.status in ('pending', 'underpaid') and i.expires_at <= now()
      order by i.expires_at limit ? for update skip locked`,
    [batch],
  );
  return rows.map(fromDb);
}

/** A deposit address to watch, with its intent's place in the order of the creating transactions (the watcher's cursor). */
export interface WatchedAddress {
  address: string;
  /** watch_xid: the id of the transaction that created the intent, as a decimal string. */
  xid: string;
  id: string;
}

/**
 * How long an intent's deposit address is watched once it can no longer be paid on time: past
 * its expiry for the late-payment window (a payment then counts, late), and past that, or past its
 * cancellation, for the exception window (a payment then never counts: it is told to the merchant,
 * payment.exception). Addresses are never handed out twice, so watching one longer is safe.
 */
export interface WatchWindow {
  /** LATE_PAYMENT_WINDOW_SECONDS */
  lateSeconds: number;
  /** EXCEPTION_WATCH_SECONDS */
  exceptionSeconds: number;
}

/** An intent (`alias`) whose deposit address the watchers still look for (its two `?` are watchArgs'). */
export const stillWatched = (alias: string) =>
  `(case when ${alias}.status = 'cancelled' then coalesce(${alias}.cancelled_at, ${alias}.expires_at) > now() - make_interval(secs => ?) else ${alias}.expires_at > now() - make_interval(secs => ?) end)`;

/** The values of stillWatched's `?`, in order. */
export const watchArgs = (w: WatchWindow): [number, number] => [w.exceptionSeconds, w.lateSeconds + w.exceptionSeconds];

/**
 * Deposit addresses on a chain whose intents the watchers still look for (stillWatched); after `after` in the order of
 * (watch_xid, id). With them, in the same statement and so of the same snapshot, that snapshot's
 * xmin (`horizon`): every transaction below it had ended when the rows were read, so the rows of
 * those that committed are among them (if after `after`); one at or above it may commit later.
 */
export async function watchedAddresses(
  em: EntityManager,
  chain: { network: string; environment: string },
  watch: WatchWindow,
  after: { xid: string; id: string },
  limit: number,
): Promise<{ rows: WatchedAddress[]; horizon: string }> {
  // The xid goes out as text under another name: `order by watch_xid` must sort the xid8 column, not its text.
  const rows = await em.execute<{ horizon: string; deposit_address: string | null; xid: string | null; id: string | null }[]>(
    // An intent offering several methods is listed by its methods' addresses (payment_intent_methods,
    // as `<intent id>/<network>`), the chosen one's included, and not by its own column.
    `select s.horizon, w.deposit_address, w.xid, w.id
       from (select pg_snapshot_xmin(pg_current_snapshot())::text as horizon) s
       left join lateral (
         select deposit_address, x::text as xid, id from (
           (select deposit_address, watch_xid as x, id from payment_intents p
             where network = ? and environment = ? and deposit_address is not null and methods is null and ${stillWatched("p")}
               and (watch_xid, id) > (?::xid8, ?)
             order by watch_xid, id limit ?)
           union all
           (select m.deposit_address, m.watch_xid as x, m.intent_id || '/' || m.network as id from payment_intent_methods m join payment_intents p on p.id = m.intent_id
             where m.network = ? and m.environment = ? and ${stillWatched("p")}
               and (m.watch_xid, m.intent_id || '/' || m.network) > (?::xid8, ?)
             order by m.watch_xid, m.intent_id || '/' || m.network limit ?)
           union all
           -- And the addresses refunds go to, from when the customer gave one until the refund is
           -- paid (services/refunds/settle.ts reads the transfers the watchers record there).
           (select r.address, r.watch_xid as x, r.id from refunds r
             where r.network = ? and r.environment = ? and r.status in ('awaiting_payment', 'sent') and r.watch_xid is not null
               and (r.watch_xid, r.id) > (?::xid8, ?)
             order by r.watch_xid, r.id limit ?)
         ) u order by x, id limit ?
       ) w on true`,
    [
      ...[chain.network, chain.environment, ...watchArgs(watch), after.xid, after.id, limit],
      ...[chain.network, chain.environment, ...watchArgs(watch), after.xid, after.id, limit],
      ...[chain.network, chain.environment, after.xid, after.id, limit],
      limit,
    ],
  );
  const horizon = rows[0]?.horizon;
  if (horizon === undefined) throw new Error("watchedAddresses: no snapshot horizon");
  const listed = rows.filter((r) => r.deposit_address !== null && r.xid !== null && r.id !== null);
  return { rows: listed.map((r) => ({ address: r.deposit_address as string, xid: r.xid as string, id: r.id as string })), horizon };
}

/** The intents' longest lifetime (expires_in_seconds' maximum): bounds how far back a watched intent was created. */
const longestLifetimeSeconds = 86_400;

/**
 * The most confirmations a watched intent of the chain has fixed on it: an intent keeps the count
 * it was created with, whatever the merchant's rules say now. Read by created_at (indexed), since
 * an intent still watched was created within its lifetime and the watch windows.
 */
export async function highestFixedConfirmations(em: EntityManager, chain: { network: string; environment: string }, watch: WatchWindow): Promise<number> {
  const since = longestLifetimeSeconds + watch.lateSeconds + watch.exceptionSeconds;
  const [row] = await em.execute<{ n: number | null }[]>(
    `select greatest(
       (select max(required_confirmations) from payment_intents p
         where network = ? and environment = ? and created_at > now() - make_interval(secs => ?) and ${stillWatched("p")}),
       (select max(m.required_confirmations) from payment_intent_methods m join payment_intents p on p.id = m.intent_id
         where m.network = ? and m.environment = ? and p.created_at > now() - make_interval(secs => ?) and ${stillWatched("p")})) as n`,
    [chain.network, chain.environment, since, ...watchArgs(watch), chain.network, chain.environment, since, ...watchArgs(watch)],
  );
  return row?.n ?? 0;
}

/** When the oldest intent whose address is still watched on the chain was created (as watchedAddresses counts them); undefined when none is. */
export async function oldestWatchedCreatedAt(em: EntityManager, chain: { network: string; environment: string }, watch: WatchWindow): Promise<Date | undefined> {
  const since = longestLifetimeSeconds + watch.lateSeconds + watch.exceptionSeconds;
  const [row] = await em.execute<{ at: Date | string | null }[]>(
    `select least(
       (select min(created_at) from payment_intents p
         where network = ? and environment = ? and created_at > now() - make_interval(secs => ?)
           and deposit_address is not null and ${stillWatched("p")}),
       (select min(p.created_at) from payment_intent_methods m join payment_intents p on p.id = m.intent_id
         where m.network = ? and m.environment = ? and p.created_at > now() - make_interval(secs => ?) and ${stillWatched("p")})) as at`,
    [chain.network, chain.environment, since, ...watchArgs(watch), chain.network, chain.environment, since, ...watchArgs(watch)],
  );
  return row?.at ? new Date(row.at) : undefined;
}

/** The intents whose deposit addresses are among `addresses` on the chain, by address. */
export async function intentIdsByAddress(em: EntityManager, chain: { network: string; environment: string }, addresses: readonly string[]): Promise<Map<string, string>> {
  if (addresses.length === 0) return new Map();
  const rows = await executePrepared<{ id: string; deposit_address: string }>(
    em,
    `select id, deposit_address from payment_intents where network = ? and environment = ? and deposit_address = any(?::text[])
     union all
     select intent_id, deposit_address from payment_intent_methods where network = ? and environment = ? and deposit_address = any(?::text[])`,
    [chain.network, chain.environment, `{${addresses.join(",")}}`, chain.network, chain.environment, `{${addresses.join(",")}}`],
  );
  return new Map(rows.map((r) => [r.deposit_address, r.id]));
}

/**
 * Marks intents as having an output that waits for its fiat value (settlement saw it while no rate
 * was fresh), since `at` unless marked already: the valuation sweep reads only marked intents.
 */
export async function markFiatValueDue(em: EntityManager, ids: readonly string[], at: Date): Promise<void> {
  if (ids.length === 0) return;
  await em.execute(`update payment_intents set fiat_value_due_since = ? where id = any(?::text[]) and fiat_value_due_since is null`, [at, `{${ids.join(",")}}`]);
}

/** Intents none of whose outputs waits for its fiat value any more. */
export async function clearFiatValueDue(em: EntityManager, ids: readonly string[]): Promise<void> {
  if (ids.length === 0) return;
  await em.execute(`update payment_intents set fiat_value_due_since = null where id = any(?::text[]) and fiat_value_due_since is not null`, [`{${ids.join(",")}}`]);
}

/** A pair with a rate now: an asset in a price currency, in an environment. */
export interface QuotablePair {
  asset: string;
  currency: string;
  environment: string;
}

/**
 * Claims intents whose outputs wait for their fiat value and whose pair has a rate now (`quotable`),
 * oldest mark first: those of a pair with none are not read, so they never hold up the others.
 * Locked rows are skipped, not waited for: another process's sweep (or a settlement) has them,
 * and after it commits the mark is gone or the row is claimed by the next pass.
 */
export async function claimFiatValueDue(em: EntityManager, quotable: readonly QuotablePair[], batch: number): Promise<IntentRow[]> {
  if (quotable.length === 0) return [];
  const rows = await em.execute<DbRow[]>(
    `select ${columns} from payment_intents i
      where i.fiat_value_due_since is not null
        and (i.asset, i.price_currency, i.environment) in (select q.asset, q.currency, q.environment from json_to_recordset(?::json) as q(asset text, currency text, environment text))
      order by i.fiat_value_due_since, i.id limit ? for update skip locked`,
    [JSON.stringify(quotable), batch],
  );
  return rows.map(fromDb);
}

/**
 * Claims payable fiat-priced intents whose quote has lapsed before their expiry, and whose pair
 * has a rate now (`quotable`), the longest lapsed first: the requote sweep (requote.ts) gives each
 * a new quote. Those of a pair with no rate are not read: their quote stands until one is fresh.
 * Locked rows are skipped, not waited for (another sweep, or a settlement, holds them).
 */
export async function claimLapsedQuotes(em: EntityManager, quotable: readonly QuotablePair[], batch: number): Promise<IntentRow[]> {
  if (quotable.length === 0) return [];
  const rows = await em.execute<DbRow[]>(
    `select ${columns} from payment_intents i
      where i.status in ('pending', 'underpaid') and i.quote_expires_at < i.expires_at
        and i.quote_expires_at <= now() and i.expires_at > now()
        and (i.asset, i.price_currency, i.environment) in (select q.asset, q.currency, q.environment from json_to_recordset(?::json) as q(asset text, currency text, environment text))
      order by i.quote_expires_at, i.id limit ? for update skip locked`,
    [JSON.stringify(quotable), batch],
  );
  return rows.map(fromDb);
}

/**
 * Saves fiat-priced intents' quotes (the current one in its columns, those it replaced in
 * quote_history) and their requested amount, in one statement.
 */
export async function saveQuotes(em: EntityManager, rows: readonly { id: string; price: IntentPrice; requestedAmount: string }[], at: Date): Promise<void> {
  if (rows.length === 0) return;
  await executePrepared(
    em,
    `update payment_intents i set quote_rate = q.rate::numeric, quote_sources = q.sources, quoted_at = q.quoted_at, quote_expires_at = q.expires_at,
            quote_history = q.history, requested_amount = q.requested::numeric, updated_at = ?
       from json_to_recordset(?::json) as q(id text, rate text, sources jsonb, quoted_at timestamptz, expires_at timestamptz, history jsonb, requested text)
      where i.id = q.id`,
    [
      at,
      JSON.stringify(
        rows.map(({ id, price, requestedAmount }) => ({
          id,
          rate: price.rate,
          sources: price.sources,
          quoted_at: price.quotedAt,
          expires_at: price.expiresAt,
          history: price.history.map(storedQuote),
          requested: requestedAmount,
        })),
      ),
    ],
  );
}
