import type { EntityManager } from "../platform/db.ts";
import { findOwned, type RowOwner } from "../platform/owned.ts";
import type { ReceivedOutput, RefundStatus } from "./refundable.ts";

/** The refunds table, as its one writer reads and writes it (entities.ts). */

export interface RefundTransfer {
  txHash: string;
  outputIndex: number;
  amount: string;
  simulated: boolean;
}

export interface RefundRow {
  id: string;
  merchantId: string;
  environment: "test" | "live";
  intentId: string;
  status: RefundStatus;
  network: string;
  asset: string;
  amount: string;
  paymentTxHash: string;
  paymentOutputIndex: number;
  address: string | null;
  claimToken: string;
  reason: string | null;
  priceAmount: string | null;
  priceCurrency: string | null;
  rate: string | null;
  transactions: RefundTransfer[];
  simulated: boolean;
  createdAt: Date;
  addressReceivedAt: Date | null;
  sentAt: Date | null;
  completedAt: Date | null;
  cancelledAt: Date | null;
}

const columns = `r.id, r.merchant_id, r.environment, r.intent_id, r.status, r.network, r.asset, r.amount::text as amount,
  r.payment_tx_hash, r.payment_output_index, r.address, r.claim_token, r.reason, r.price_amount::text as price_amount,
  r.price_currency, r.rate::text as rate, r.transactions, r.simulated, r.created_at, r.address_received_at, r.sent_at,
  r.completed_at, r.cancelled_at`;

interface DbRow {
  id: string;
  merchant_id: string;
  environment: string;
  intent_id: string;
  status: string;
  network: string;
  asset: string;
  amount: string;
  payment_tx_hash: string;
  payment_output_index: number;
  address: string | null;
  claim_token: string;
  reason: string | null;
  price_amount: string | null;
  price_currency: string | null;
  rate: string | null;
  transactions: { tx_hash: string; output_index: number; amount: string; simulated: boolean }[] | string;
  simulated: boolean;
  created_at: Date | string;
  address_received_at: Date | string | null;
  sent_at: Date | string | null;
  completed_at: Date | string | null;
  cancelled_at: Date | string | null;
}

const date = (v: Date | string | null) => (v === null ? null : new Date(v));

function fromDb(r: DbRow): RefundRow {
  const transfers = typeof r.transactions === "string" ? (JSON.parse(r.transactions) as Exclude<DbRow["transactions"], string>) : r.transactions;
  return {
    id: r.id,
    merchantId: r.merchant_id,
    environment: r.environment === "live" ? "live" : "test",
    intentId: r.intent_id,
    status: r.status as RefundStatus,
    network: r.network,
    asset: r.asset,
    amount: r.amount,
    paymentTxHash: r.payment_tx_hash,
    paymentOutputIndex: r.payment_output_index,
    address: r.address,
    claimToken: r.claim_token,
    reason: r.reason,
    priceAmount: r.price_amount,
    priceCurrency: r.price_currency,
    rate: r.rate,
    transactions: transfers.map((t) => ({ txHash: t.tx_hash, outputIndex: t.output_index, amount: t.amount, simulated: t.simulated })),
    simulated: r.simulated,
    createdAt: new Date(r.created_at),
    addressReceivedAt: date(r.address_received_at),
    sentAt: date(r.sent_at),
    completedAt: date(r.completed_at),
    cancelledAt: date(r.cancelled_at),
  };
}

/** A new refund's columns. */
export type NewRefund = Omit<RefundRow, "transactions" | "simulated" | "addressReceivedAt" | "sentAt" | "completedAt" | "cancelledAt">;

export async function insertRefund(em: EntityManager, r: NewRefund): Promise<RefundRow> {
  const rows = await em.execute<DbRow[]>(
    `insert into refunds as r (id, merchant_id, environment, intent_id, status, network, asset, amount, payment_tx_hash, payment_output_index,
       address, claim_token, reason, price_amount, price_currency, rate, transactions, simulated, created_at, updated_at, address_received_at, watch_xid)
     values (?, ?, ?, ?, ?, ?, ?, ?::numeric, ?, ?, ?, ?, ?, ?::numeric, ?, ?::numeric, '[]', false, ?, ?, ?, case when ?::boolean then pg_current_xact_id() end)
     returning ${columns}`,
    [
      r.id, r.merchantId, r.environment, r.intentId, r.status, r.network, r.asset, r.amount, r.paymentTxHash, r.paymentOutputIndex,
      r.address, r.claimToken, r.reason, r.priceAmount, r.priceCurrency, r.rate, r.createdAt, r.createdAt, r.address === null ? null : r.createdAt, r.address !== null,
    ],
  );
  return fromDb(rows[0] as DbRow);
}

/** The owner's refund, locked for the caller's transaction when asked. */
export async function findRefund(em: EntityManager, owner: RowOwner, id: string, forUpdate = false): Promise<RefundRow | undefined> {
  const row = await findOwned<DbRow>(em, `select ${columns} from refunds r where r.id = ?`, id, owner, forUpdate);
  return row && fromDb(row);
}

/** The refund whose claim page this is, locked when asked. */
export async function findRefundByToken(em: EntityManager, token: string, forUpdate = false): Promise<RefundRow | undefined> {
  const rows = await em.execute<DbRow[]>(`select ${columns} from refunds r where r.claim_token = ?${forUpdate ? " for update" : ""}`, [token]);
  return rows[0] && fromDb(rows[0]);
}

/** An intent's refunds, oldest first. */
export async function refundsOfIntent(em: EntityManager, intentId: string): Promise<RefundRow[]> {
  const rows = await em.execute<DbRow[]>(`select ${columns} from refunds r where r.intent_id = ? order by r.created_at, r.id`, [intentId]);
  return rows.map(fromDb);
}

/** What a refund move changes. */
export interface RefundChange {
  status: RefundStatus;
  address?: string;
  addressReceivedAt?: Date;
  sentAt?: Date;
  completedAt?: Date;
  cancelledAt?: Date;
  transactions?: RefundTransfer[];
  simulated?: boolean;
}

/** Applies a move if the refund is still in `from` (the caller holds its lock); the row after it. */
export async function updateRefund(em: EntityManager, id: string, from: RefundStatus, c: RefundChange, at: Date): Promise<RefundRow | undefined> {
  const rows = await em.execute<DbRow[]>(
    `update refunds r set status = ?, address = coalesce(?, address), address_received_at = coalesce(?, address_received_at),
       -- Sent and completed hold only while the refund is (a reorg takes it back: cleared).
       sent_at = case when ?::text in ('sent', 'completed') then coalesce(?, sent_at) end,
       completed_at = case when ?::text = 'completed' then coalesce(?, completed_at) end, cancelled_at = coalesce(?, cancelled_at),
       transactions = coalesce(?::jsonb, transactions), simulated = coalesce(?, simulated), updated_at = ?,
       -- An address given now is listed to the watchers by this transaction (watchedAddresses).
       watch_xid = case when address is null and ?::text is not null then pg_current_xact_id() else watch_xid end
      where id = ? and status = ? returning ${columns}`,
    [
      c.status, c.address ?? null, c.addressReceivedAt ?? null, c.status, c.sentAt ?? null, c.status, c.completedAt ?? null, c.cancelledAt ?? null,
      c.transactions ? JSON.stringify(c.transactions.map((t) => ({ tx_hash: t.txHash, output_index: t.outputIndex, amount: t.amount, simulated: t.simulated }))) : null,
      c.simulated ?? null, at, c.address ?? null, id, from,
    ],
  );
  return rows[0] && fromDb(rows[0]);
}

/**
 * The intent's outputs a refund may give back: not orphaned, in a block, and either counted or
 * told to the merchant as an exception (another asset or method, or paid after it closed).
 * Read from chain_observations, which the chains domain writes.
 */
export async function refundableOutputs(em: EntityManager, intentId: string): Promise<ReceivedOutput[]> {
  const rows = await em.execute<{ network: string; asset: string; tx_hash: string; output_index: number; amount: string; counted: boolean }[]>(
    `select network, asset, tx_hash, output_index, amount::text as amount, counted from chain_observations
      where payment_intent_id = ? and not orphaned and not mempool and (counted or exception_reported_at is not null)
      order by created_at, id`,
    [intentId],
  );
  return rows.map((r) => ({ network: r.network, asset: r.asset, txHash: r.tx_hash, outputIndex: r.output_index, amount: r.amount, counted: r.counted }));
}

/**
 * The refunds on a chain whose transfers the watchers may be recording, locked in id order: those
 * with a transfer recorded at their address, or listed on them before (one a reorg may take away).
 * A refund still waiting for its first transfer costs a lookup in the address index, no more.
 */
export async function lockRefundsToSettle(em: EntityManager, chain: { network: string; environment: string }): Promise<RefundRow[]> {
  // Completed ones for a while after (a reorg can take their transfer back): the deepest reorg any
  // network allows passes within a day.
  const rows = await em.execute<DbRow[]>(
    `select ${columns} from refunds r
      where r.network = ? and r.environment = ? and r.address is not null and not r.simulated
        and (r.status in ('awaiting_payment', 'sent') or (r.status = 'completed' and r.completed_at > now() - interval '1 day'))
        and (jsonb_array_length(r.transactions) > 0
             or exists (select 1 from chain_observations o where o.network = r.network and o.environment = r.environment and o.to_address = r.address and o.payment_intent_id is null))
      order by r.id for update`,
    [chain.network, chain.environment],
  );
  return rows.map(fromDb);
}

/** A transfer the watchers recorded at a refund's address. */
export interface RecordedTransfer {
  txHash: string;
  outputIndex: number;
  amount: string;
  confirmations: number;
  orphaned: boolean;
  mempool: boolean;
}

/**
 * The transfers of the refund's asset to its address recorded in blocks made after the address
 * was given (an earlier one was not made for this refund; block times have whole seconds, so one
 * in the second the address came counts), oldest first. Read from
 * chain_observations, which the chains domain writes, by the address as the watchers write it (the
 * form checkAddress gives: EIP-55 on EVM chains, bech32 in lower case); an address that is also an
 * intent's is not a refund's to read.
 */
export async function transfersTo(em: EntityManager, r: RefundRow): Promise<RecordedTransfer[]> {
  const rows = await em.execute<{ tx_hash: string; output_index: number; amount: string; confirmations: number; orphaned: boolean; mempool: boolean }[]>(
    `select tx_hash, output_index, amount::text as amount, confirmations, orphaned, mempool from chain_observations
      where network = ? and environment = ? and asset = ? and to_address = ? and payment_intent_id is null and not mempool
        and observed_at >= date_trunc('second', ?::timestamptz)
      order by created_at, id`,
    [r.network, r.environment, r.asset, r.address, r.addressReceivedAt],
  );
  return rows.map((x) => ({ txHash: x.tx_hash, outputIndex: x.output_index, amount: x.amount, confirmations: x.confirmations, orphaned: x.orphaned, mempool: x.mempool }));
}

/** An output an intent received on a network, with its address (what a refund's PSBT may spend). */
export interface ReceivedAt {
  txHash: string;
  outputIndex: number;
  amount: string;
  address: string;
  /** The address's derivation index, when the intent's address was derived from a key. */
  index: number | null;
  /** Bitcoin: its transaction's bytes without witnesses, as the watcher read them (null: not kept). */
  rawTransaction: Uint8Array | null;
}

/**
 * The intent's received outputs of an asset on a network, on the chain (not a simulator's), counted
 * or excepted, with the derivation index of the address each was sent to: the intent's deposit
 * address or one of its methods'.
 */
export async function receivedOutputsAt(em: EntityManager, intentId: string, network: string, asset: string): Promise<ReceivedAt[]> {
  const rows = await em.execute<{ tx_hash: string; output_index: number; amount: string; to_address: string; address_index: number | null; raw_transaction: Buffer | null }[]>(
    `select o.tx_hash, o.output_index, o.amount::text as amount, o.to_address,
            -- Kept with one output of each transaction (the first the watcher saw): any of them.
            coalesce(o.raw_transaction, (select x.raw_transaction from chain_observations x
                                          where x.network = o.network and x.environment = o.environment and x.tx_hash = o.tx_hash
                                            and x.raw_transaction is not null limit 1)) as raw_transaction,
            coalesce(case when o.to_address = i.deposit_address then i.address_index end,
                     (select (m ->> 'address_index')::int from jsonb_array_elements(coalesce(i.methods, '[]'::jsonb)) m
                       where m ->> 'network' = o.network and m ->> 'deposit_address' = o.to_address limit 1)) as address_index
       from chain_observations o join payment_intents i on i.id = o.payment_intent_id
      where o.payment_intent_id = ? and o.network = ? and o.asset = ? and not o.orphaned and not o.mempool and not o.simulated
        and (o.counted or o.exception_reported_at is not null)
      order by o.created_at, o.id`,
    [intentId, network, asset],
  );
  return rows.map((r) => ({ txHash: r.tx_hash, outputIndex: r.output_index, amount: r.amount, address: r.to_address, index: r.address_index, rawTransaction: r.raw_transaction === null ? null : new Uint8Array(r.raw_transaction) }));
}
