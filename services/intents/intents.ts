import { allocateDepositAddress } from "../addresses/allocate.ts";
import type { Owner } from "../auth/keys.ts";
import { recordEvent } from "../events/record.ts";
import type { EntityManager } from "../platform/db.ts";
import { apiError } from "../platform/errors.ts";
import { newId } from "../platform/ids.ts";
import { canTransition, eventFor, isStatus, type Status } from "./status.ts";
import { claimDueIntents, findIntent, findIntentById, insertIntent, type IntentSource, statusTimes, updateStatus, type IntentRow } from "./store.ts";
import type { CreateInput } from "./validate.ts";
import type { IntentViews } from "./views.ts";

/** Where an intent was created, and for a terminal, by whom. */
export interface IntentOrigin {
  source: IntentSource;
  cashier?: string;
  terminal?: string | null;
}

/**
 * The Payment Intent domain: every change to an intent, as functions of
 * (transaction, owner, input). The RPC handlers, the scheduler and the sandbox
 * call these; none of them writes an intent itself.
 */
export class Intents {
  readonly views: IntentViews;

  constructor(views: IntentViews) {
    this.views = views;
  }

  /** Creates a pending intent and records payment.intent.created, in the caller's transaction. */
  async create(tx: EntityManager, owner: Owner, input: CreateInput, origin: IntentOrigin = { source: "api" }, now = new Date()): Promise<IntentRow> {
    const id = newId("pi");
    const address = await allocateDepositAddress(tx, owner, input.network, id, now);
    const row: IntentRow = {
      id,
      merchantId: owner.merchantId,
      environment: owner.environment,
      status: "pending",
      merchantReference: input.merchantReference,
      network: input.network,
      asset: input.asset,
      requestedAmount: input.requestedAmount,
      metadata: input.metadata,
      createdAt: now,
      expiresAt: new Date(now.getTime() + input.expiresInSeconds * 1000),
      depositAddress: address.address,
      amountReceived: null,
      paidAt: null,
      expiredAt: null,
      cancelledAt: null,
      source: origin.source,
      cashier: origin.cashier ?? null,
      terminal: origin.terminal ?? null,
    };
    await insertIntent(tx, row, address.index);
    await recordEvent(tx, {
      merchantId: row.merchantId,
      environment: owner.environment,
      type: "payment.intent.created",
      data: this.views.eventData(row),
      paymentIntentId: row.id,
      createdAt: now,
    });
    return row;
  }

  /** The owner's intent, or 404 not_found; `lock` takes its row lock for the transaction. */
  async get(em: EntityManager, owner: Owner, id: string, lock = false): Promise<IntentRow> {
    const row = await findIntent(em, owner, id, lock);
    if (!row) throw apiError("not_found", `No payment intent ${id}.`, "public_id");
    return row;
  }

  /** Any intent by its public id (the checkout page's lookup: the id is the shopper's only key). */
  async find(em: EntityManager, id: string): Promise<IntentRow | undefined> {
    return findIntentById(em, id);
  }

  async cancel(tx: EntityManager, owner: Owner, id: string): Promise<IntentRow> {
    return this.transition(tx, await this.get(tx, owner, id, true), "cancelled");
  }

  /** Expires due intents, a batch per transaction; SKIP LOCKED lets any number of schedulers run. */
  async expireDue(em: EntityManager, batch = 100): Promise<number> {
    return em.transactional(async (tx) => {
      const rows = await claimDueIntents(tx, batch);
      const now = new Date();
      for (const row of rows) await this.expire(tx, row, now);
      return rows.length;
    });
  }

  /** Expires one intent (the scheduler's, and the sandbox's, way). */
  async expire(tx: EntityManager, row: IntentRow, at = new Date()): Promise<IntentRow> {
    return this.transition(tx, row, "expired", at);
  }

  /**
   * The one way an intent changes status: checked against the status machine,
   * applied only if nobody changed it meanwhile, and recorded as its event in
   * the same transaction (the caller's).
   */
  async transition(tx: EntityManager, row: IntentRow, to: Status, at = new Date()): Promise<IntentRow> {
    const from = row.status;
    if (!isStatus(from) || !canTransition(from, to)) {
      throw apiError("invalid_state", `Payment intent ${row.id} is ${from}; it cannot become ${to}.`);
    }
    const times = statusTimes(row, to, at);
    if (!(await updateStatus(tx, row, to, times, at))) {
      throw apiError("invalid_state", `Payment intent ${row.id} changed while this request ran; read it again.`);
    }
    const next = { ...row, ...times, status: to };
    await recordEvent(tx, {
      merchantId: row.merchantId,
      environment: row.environment === "live" ? "live" : "test",
      type: eventFor(from, to),
      data: this.views.eventData(next),
      paymentIntentId: row.id,
      createdAt: at,
    });
    return next;
  }
}
