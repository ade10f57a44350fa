import { allocateDepositAddress, builtinStillAppliesTo, type DepositAddress } from "../addresses/allocate.ts";
import type { Owner } from "../auth/keys.ts";
import type { JsonValue, Message } from "@bufbuild/protobuf";
import type { PaymentIntent } from "../../gen/payments/v1/payment_intents_pb.ts";
import { AddressReserve, type ReservedAddress } from "../addresses/reserve.ts";
import { deliveriesFit, eventCtes, recordEvent, type NewEvent } from "../events/record.ts";
import { claimCtes, NeedsTransaction, settleExisting, type IdempotencyClaim } from "../idempotency/idempotent.ts";
import type { EntityManager } from "../platform/db.ts";
import { lockedNow } from "../platform/db-clock.ts";
import { apiError, isDatabaseUnavailable, validationError } from "../platform/errors.ts";
import { newId } from "../platform/ids.ts";
import type { Registry } from "prom-client";
import { CreateWriter, type CreatePart } from "./create-batch.ts";
import { canTransition, eventFor, isStatus, type Status } from "./status.ts";
import { claimDueIntents, findIntent, findIntentById, insertIntent, insertIntentCte, insertMethodAddressesCte, type IntentSource, statusTimes, updateStatus, type IntentRow } from "./store.ts";
import type { CreateInput, MethodAsk } from "./validate.ts";
import { priceInput, type PricedInput } from "./pricing.ts";
import type { RateEngine } from "../rates/engine.ts";
import type { IntentViews } from "./views.ts";
import { assets, findAsset, isEvmNetwork, notOfferedReason, offeredIn, type AssetInfo } from "../vocabulary/assets.ts";
import { intentPolicy, policyIsCurrent, policySnapshot, type IntentPolicy, type PolicySnapshot } from "../policy/policy.ts";
import { setBounded } from "../platform/bounded.ts";
import { howToWatch } from "./watched.ts";
import { OutboxWake } from "../delivery/outbox-wake.ts";
import { defaultQuoteTerms, quoteExpiry, type QuoteTerms } from "./quotes.ts";
import type { EventType, ExtensionEventType } from "../vocabulary/event-types.ts";

/** Merchants whose policy a process keeps a copy of (the rest read theirs again). */
const maxCachedPolicies = 10_000;

/** Where an intent was created, and for a terminal, by whom. */
export interface IntentOrigin {
  source: IntentSource;
  cashier?: string;
  terminal?: string | null;
}

function newIntentRow(id: string, owner: Owner, input: PricedInput, origin: IntentOrigin, now: Date, depositAddress: string | null, policy: IntentPolicy, quoting: QuoteTerms): IntentRow {
  const expiresAt = new Date(now.getTime() + input.expiresInSeconds * 1000);
  return {
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
    expiresAt,
    depositAddress,
    amountReceived: null,
    detectedAt: null,
    paidAt: null,
    expiredAt: null,
    cancelledAt: null,
    source: origin.source,
    cashier: origin.cashier ?? null,
    terminal: origin.terminal ?? null,
    sequence: 1,
    requiredConfirmations: policy.requiredConfirmations,
    underpaymentToleranceBps: input.underpaymentToleranceBps ?? policy.underpaymentToleranceBps,
    redirectUrl: input.redirectUrl,
    cancelUrl: input.cancelUrl,
    // Its quote holds for QUOTE_SECONDS, or until the intent expires if sooner.
    price: input.priced ? { ...input.priced, expiresAt: quoteExpiry(input.priced.quotedAt, expiresAt, quoting.seconds), history: [] } : null,
    methods: null,
  };
}

/** Whether the network would take the built-in Test key's address now (no source, no free imported address). */
async function builtinStillAppliesNow(tx: EntityManager, owner: Owner, network: string): Promise<boolean> {
  if (owner.environment !== "test") return false;
  const check = builtinStillAppliesTo(owner, [network]);
  const [row] = await tx.execute<{ ok: boolean }[]>(`select (${check.sql}) as ok`, check.params);
  return row?.ok === true;
}

/**
 * The Payment Intent domain: every change to an intent, as functions of
 * (transaction, owner, input). The RPC handlers, the scheduler and the sandbox
 * call these; none of them writes an intent itself.
 */
export class Intents {
  readonly views: IntentViews;
  readonly #addresses: AddressReserve;
  /** The relays of this process, woken after a one-statement create's commit (delivery/outbox-wake.ts). */
  readonly #outboxWake: OutboxWake;
  /**
   * Merchants' policies as last read, by merchant and environment: the one-statement create
   * writes with this copy only if its version is still the policy's (else it writes nothing, and
   * the transactional create reads the policy again), so a create costs no extra round trip.
   */
  readonly #policies = new Map<string, PolicySnapshot>();
  /** One-statement creates that arrive together, written in one statement. */
  readonly #creates: CreateWriter;

  /** Where fiat-priced creates (and re-quotes: requote.ts) get their quote; without it such a create answers rate_unavailable. */
  readonly rates: RateEngine | undefined;

  /** How long a fiat-priced intent's quote holds, and the grace after it was replaced (QUOTE_SECONDS, QUOTE_GRACE_SECONDS). */
  readonly quoting: QuoteTerms;

  constructor(views: IntentViews, addresses = new AddressReserve(), rates?: RateEngine, quoting: QuoteTerms = defaultQuoteTerms, outboxWake = new OutboxWake(), registry?: Registry) {
    this.#creates = new CreateWriter({ registry });
    this.views = views;
    this.#addresses = addresses;
    this.rates = rates;
    this.quoting = quoting;
    this.#outboxWake = outboxWake;
  }

  /**
   * A token with no contract in the owner's environment (polygon's USDT on Test) is refused with
   * 400 naming the field: no wallet could pay it there (assets.ts offeredIn).
   */
  #refuseUnoffered(owner: Owner, network: string, asset: string, field: string): void {
    const info = findAsset(network, asset);
    const why = info && notOfferedReason(info, owner.environment);
    if (why !== undefined) throw validationError(field, `${why}; nothing was created.`);
  }

  /**
   * A Live create on a chain no watcher follows is refused with 409 network_not_watched before
   * anything is read or written: nobody would see the shopper's payment. A Test one goes ahead,
   * and its view says so (watched: false, and a notice: IntentViews.message).
   */
  #refuseUnwatched(owner: Owner, network: string): void {
    if (owner.environment !== "live" || this.views.watched(network, "live")) return;
    throw apiError(
      "network_not_watched",
      `No watcher follows ${network} in live on this server, so a payment there would not be seen; nothing was created. ${howToWatch(network, "live")}`,
      "network",
    );
  }

  /** Confirmations an output of the asset needs to count when no merchant policy says otherwise. */
  requiredConfirmations(asset: AssetInfo): number {
    return this.views.defaultConfirmations(asset);
  }

  /** What an output of this intent needs to count: fixed on it when it was created. */
  confirmationsOf(row: Pick<IntentRow, "network" | "asset" | "requiredConfirmations">): number {
    return this.views.confirmationsOf(row);
  }

  /** The owner's policy as read now (and remembered for the one-statement create). */
  async #readPolicy(em: EntityManager, owner: Owner): Promise<PolicySnapshot> {
    const snapshot = await policySnapshot(em, owner);
    setBounded(this.#policies, `${owner.merchantId}:${owner.environment}`, snapshot, maxCachedPolicies);
    return snapshot;
  }

  /** What the owner's policy fixes on a new intent: its confirmations and tolerance. */
  #policyFor(snapshot: PolicySnapshot, input: PricedInput): IntentPolicy {
    const asset = findAsset(input.network, input.asset) as AssetInfo;
    return intentPolicy(snapshot, asset, input.requestedAmount, this.requiredConfirmations(asset));
  }

  /** The input with its asset amount decided (a price quoted now, less the policy's spread), or rate_unavailable. */
  #priced(owner: Owner, input: CreateInput, snapshot: PolicySnapshot, now: Date): PricedInput {
    return priceInput(input, findAsset(input.network, input.asset) as AssetInfo, this.rates, owner.environment, snapshot.priceSpreadBps, now);
  }

  /** Creates a pending intent and records payment.intent.created, in the caller's transaction. */
  async create(tx: EntityManager, owner: Owner, input: CreateInput, origin: IntentOrigin = { source: "api" }, now = new Date()): Promise<IntentRow> {
    if (input.methods !== undefined) {
      const snapshot = await this.#readPolicy(tx, owner);
      const asks = this.#methodsAsked(owner, input.methods, input.price !== undefined, snapshot.acceptedMethods);
      const [first] = asks;
      // One method is an intent of one method, whichever way it was asked for.
      if (asks.length === 1 && first) return this.create(tx, owner, { ...input, ...first, methods: undefined }, origin, now);
      return this.#createWithMethods(tx, owner, input, asks, snapshot, origin, now);
    }
    this.#refuseUnoffered(owner, input.network, input.asset, "asset");
    this.#refuseUnwatched(owner, input.network);
    const id = newId("pi");
    // Priced first: with no quote nothing is reserved or derived (the transaction would undo it anyway).
    const snapshot = await this.#readPolicy(tx, owner);
    const priced = this.#priced(owner, input, snapshot, now);
    const address = await allocateDepositAddress(tx, owner, input.network, id, now);
    // The next create for this merchant's network may reserve its address ahead (createClaimed).
    this.#addresses.learn(owner, input.network, address.kind);
    const row = newIntentRow(id, owner, priced, origin, now, address.address, this.#policyFor(snapshot, priced), this.quoting);
    await insertIntent(tx, row, address.index);
    await recordEvent(tx, this.#createdEvent(row, now));
    return row;
  }

  /**
   * The methods a create asks for, "all" made the list of the merchant's accepted methods (its
   * policy; unset: every network and asset) that a watcher follows in the owner's environment (in
   * Test with none followed: every accepted one, the simulator pays them). A Live method on a
   * chain no watcher follows is refused as a one-method create is.
   */
  #methodsAsked(owner: Owner, asked: MethodAsk[] | "all", priced: boolean, accepted: readonly string[] | null): MethodAsk[] {
    const env = owner.environment === "live" ? "live" : "test";
    if (asked === "all") {
      const offered = (accepted === null ? assets : assets.filter((a) => accepted.includes(`${a.network}.${a.asset}`))).filter((a) => offeredIn(a, env));
      const watched = offered.filter((a) => this.views.watched(a.network, env));
      const all = (watched.length > 0 || env === "live" ? watched : offered).map((a) => ({ network: a.network, asset: a.asset }));
      if (all.length === 0) throw apiError("network_not_watched", `No watcher follows any of this merchant's accepted payment methods in live on this server, so no payment would be seen; nothing was created.`, "payment_methods");
      if (!priced && new Set(all.map((m) => m.asset)).size > 1) {
        throw validationError("price_amount", `"payment_methods": "all" offers several assets (${[...new Set(all.map((m) => m.asset))].join(", ")}): send "price_amount" and "price_currency" instead of "requested_amount".`);
      }
      return all;
    }
    asked.forEach((m, i) => {
      this.#refuseUnoffered(owner, m.network, m.asset, `payment_methods[${i}].asset`);
      if (env !== "live" || this.views.watched(m.network, "live")) return;
      throw apiError(
        "network_not_watched",
        `No watcher follows ${m.network} in live on this server, so a payment there would not be seen; nothing was created. ${howToWatch(m.network, "live")}`,
        `payment_methods[${i}].network`,
      );
    });
    return asked;
  }

  /**
   * An intent offering several methods: each priced from the same rates (a price in a currency),
   * or the one amount of their one asset; an address per network, the network's assets sharing it;
   * the first method's values in the intent's own columns, its deposit address null until a
   * payment chooses (settle.ts). Its quotes hold for its life: re-quoting the methods a shopper
   * is comparing would move prices under them (docs/payments.md).
   */
  async #createWithMethods(tx: EntityManager, owner: Owner, input: CreateInput, asks: readonly MethodAsk[], snapshot: PolicySnapshot, origin: IntentOrigin, now: Date): Promise<IntentRow> {
    const id = newId("pi");
    const priced = asks.map((m) => this.#priced(owner, { ...input, ...m }, snapshot, now));
    const addresses = new Map<string, { address: string; index: number | null }>();
    let builtinEvm: DepositAddress | undefined;
    for (const network of new Set(asks.map((m) => m.network))) {
      // The built-in Test key's index is one address on every EVM chain: one serves them all,
      // while each of them still takes the built-in key (as reserve.ts takeShared does).
      const address =
        builtinEvm && isEvmNetwork(network) && (await builtinStillAppliesNow(tx, owner, network))
          ? builtinEvm
          : await allocateDepositAddress(tx, owner, network, id, now);
      if (isEvmNetwork(network) && address.kind === "builtin") builtinEvm ??= address;
      addresses.set(network, address);
      // The next create offering this network may reserve its address ahead (createClaimed).
      this.#addresses.learn(owner, network, address.kind);
    }
    const first = priced[0] as PricedInput;
    const row = newIntentRow(id, owner, first, origin, now, null, this.#policyFor(snapshot, first), this.quoting);
    this.#offer(row, priced, snapshot, (network) => addresses.get(network) as { address: string; index: number | null });
    await insertIntent(tx, row, null);
    await recordEvent(tx, this.#createdEvent(row, now));
    return row;
  }

  /** Makes a new row an intent offering the priced methods, each at its network's address; its quote holds for its life. */
  #offer(row: IntentRow, priced: readonly PricedInput[], snapshot: PolicySnapshot, addressOf: (network: string) => { address: string; index: number | null }): void {
    row.methods = priced.map((p) => ({
      network: p.network,
      asset: p.asset,
      requestedAmount: p.requestedAmount,
      depositAddress: addressOf(p.network).address,
      addressIndex: addressOf(p.network).index,
      requiredConfirmations: this.#policyFor(snapshot, p).requiredConfirmations,
      rate: p.priced?.rate ?? null,
      sources: p.priced?.sources ?? [],
    }));
    row.depositAddress = null;
    if (row.price) row.price.expiresAt = row.expiresAt;
  }

  /**
   * The same create in one statement, with no transaction to open: the Idempotency-Key's row
   * with the stored response, the intent, its event and the event's deliveries, all written only
   * if the key is new, and none of it if not (a statement shared with the creates that arrived
   * with it: create-batch.ts). It needs an address known before the statement
   * (AddressReserve) and at most maxEnabledEndpoints endpoints; otherwise, or when the key's
   * row cannot be read yet, it throws NeedsTransaction having written nothing, and `create`
   * runs in the transactional path. A repeated key answers its stored response (`replay`) or
   * idempotency_conflict, as in that path.
   */
  async createClaimed(
    em: EntityManager,
    owner: Owner,
    input: CreateInput,
    claim: IdempotencyClaim,
    respond: (intent: PaymentIntent) => Message,
  ): Promise<{ row: IntentRow; message: Message } | { replay: Message }> {
    // Refused here, the transactional path answers: a repeated key replays what it stored.
    if (owner.environment === "live" && !this.views.watched(input.network, "live")) throw new NeedsTransaction();
    if (input.methods === undefined && !offeredIn(findAsset(input.network, input.asset) as AssetInfo, owner.environment)) throw new NeedsTransaction();
    const now = new Date();
    const snapshot = this.#policies.get(`${owner.merchantId}:${owner.environment}`) ?? (await this.#readPolicy(em, owner));
    let asks: MethodAsk[] = [{ network: input.network, asset: input.asset }];
    let priced: PricedInput[];
    try {
      if (input.methods !== undefined) asks = this.#methodsAsked(owner, input.methods, input.price !== undefined, snapshot.acceptedMethods);
      priced = asks.map((m) => this.#priced(owner, { ...input, ...m }, snapshot, now));
    } catch {
      // Refused, or no quote: the transactional path answers, where a repeated key replays its
      // stored intent (with the quote it was created at) rather than failing for want of a new one.
      throw new NeedsTransaction();
    }
    // One reserved address per network (a network's assets share it), one for all the EVM networks
    // where the built-in Test key gives them (reserve.ts takeShared); any missing: the transactional path.
    const networks = [...new Set(asks.map((m) => m.network))];
    const taken = new Map<string, ReservedAddress>();
    const evm: readonly string[] = networks.filter(isEvmNetwork);
    const shared = await this.#addresses.takeShared(em, owner, evm);
    try {
      for (const network of networks) {
        const reserved = shared && evm.includes(network) ? shared : await this.#addresses.take(em, owner, network);
        if (reserved) taken.set(network, reserved);
      }
    } catch (err) {
      // A take refused (its refill failed): the addresses already taken go back, no index skipped.
      for (const reserved of new Set([...taken.values(), ...(shared ? [shared] : [])])) reserved.release();
      throw err;
    }
    if (taken.size < networks.length) {
      for (const reserved of new Set(taken.values())) reserved.release();
      throw new NeedsTransaction();
    }
    const reserved = [...new Set(taken.values())];
    const release = () => reserved.forEach((r) => r.release());
    const guard = { sql: reserved.map((r) => `(${r.guard.sql})`).join(" and "), params: reserved.flatMap((r) => r.guard.params) };
    const first = priced[0] as PricedInput;
    const one = asks.length === 1;
    const address = taken.get(first.network) as ReservedAddress;
    const row = newIntentRow(newId("pi"), owner, first, { source: "api" }, now, one ? address.address : null, this.#policyFor(snapshot, first), this.quoting);
    if (!one) this.#offer(row, priced, snapshot, (network) => taken.get(network) as ReservedAddress);
    // Built once, for the response and for the event's data.
    const view = this.views.message(row);
    const message = respond(view);
    const fits = deliveriesFit(owner.merchantId, owner.environment);
    const current = policyIsCurrent(owner, snapshot.version);
    const created = this.#createdEvent(row, now, view);
    const response = claim.encode(message);
    // With a relay in this process, it is woken after the commit rather than by a NOTIFY (outbox-wake.ts).
    const quiet = this.#outboxWake.local;
    const build = (s: string, lockTimeoutMs: number | undefined): CreatePart => {
      const key = claimCtes(claim, response, `gate${s}`, { suffix: s, lockTimeoutMs });
      const intent = insertIntentCte(row, one ? address.index : null, `claimed${s}`, s);
      const methods = one ? undefined : insertMethodAddressesCte(row, `claimed${s}`, s);
      const event = eventCtes(created, `intent${s}`, quiet, s);
      return {
        ctes: `policy${s} as (select ${current.sql} as current),
       gate${s} as (select (${guard.sql}) and ${fits.sql} and policy${s}.current as ok from policy${s}),
       ${key.sql}, ${intent.sql},${methods ? ` ${methods.sql},` : ""} ${event.sql}`,
        answer: `gate${s}.ok as fresh, policy${s}.current as policy_current, exists (select 1 from claimed${s}) as claimed, existing${s}.rpc, existing${s}.fingerprint, existing${s}.response
         from gate${s} cross join policy${s} left join existing${s} on true`,
        params: [...current.params, ...guard.params, ...fits.params, ...key.params, ...intent.params, ...(methods?.params ?? []), ...event.params],
      };
    };
    claim.sent = true;
    type Answer = { fresh: boolean; policy_current: boolean; claimed: boolean; rpc: string | null; fingerprint: string | null; response: Buffer | null };
    let result: Answer;
    try {
      // Written with the creates that came with it, in one statement (create-batch.ts).
      result = (await this.#creates.write({ em, shape: `${guard.sql}|${one}|${quiet}`, key: `${claim.merchantId}|${claim.environment}|${claim.key}`, build })) as Answer;
    } catch (err) {
      // A statement the database refused wrote nothing: its addresses go back (an account key's
      // next index is not skipped). One cut off by an outage may have committed: they are kept.
      if (!isDatabaseUnavailable(err)) release();
      throw err;
    }
    if (result.claimed) {
      if (quiet) this.#outboxWake.wake();
      return { row, message };
    }
    // Nothing was written: the address goes back, and a stale guess (of the policy, or of where
    // addresses come from) is dropped.
    release();
    if (!result.policy_current) this.#policies.delete(`${owner.merchantId}:${owner.environment}`);
    else if (!result.fresh) for (const network of networks) this.#addresses.forget(owner, network);
    return { replay: settleExisting(claim, result) };
  }

  #createdEvent(row: IntentRow, at: Date, view = this.views.message(row)): NewEvent {
    return this.eventOf(row, "payment.intent.created", at, this.views.eventDataOf(view));
  }

  /** An event of an intent, at `at`: its data the intent as `row` shows it, unless given. */
  eventOf(row: IntentRow, type: EventType | ExtensionEventType, at: Date, data: Record<string, JsonValue> = this.views.eventData(row)): NewEvent {
    return { merchantId: row.merchantId, environment: row.environment === "live" ? "live" : "test", type, data, paymentIntentId: row.id, createdAt: at };
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

  /**
   * Cancels at the moment the intent's lock is held, on the database's clock: payments are
   * recorded on it too (chains/report.ts), so cancelled_at and their times compare in the order
   * they took the lock, whatever this process's clock says.
   */
  async cancel(tx: EntityManager, owner: Owner, id: string): Promise<IntentRow> {
    const row = await this.get(tx, owner, id, true);
    return this.transition(tx, row, "cancelled", await lockedNow(tx));
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
    const { next, event } = this.#planMove(row, to, at);
    if (!(await updateStatus(tx, row, to, { paidAt: next.paidAt, expiredAt: next.expiredAt, cancelledAt: next.cancelledAt }, at))) {
      throw apiError("invalid_state", `Payment intent ${row.id} changed while this request ran; read it again.`);
    }
    await recordEvent(tx, event);
    return next;
  }

  /**
   * transition() for many intents at once (a settlement of a batch of blocks), planned: each
   * intent's moves in order, the row after them, and each move, checked against the status
   * machine (throws if one is forbidden). The caller saves `finals` in one statement
   * (updateStatuses: each applied only if the intent did not change meanwhile) and records each
   * step's event (moveEvent) once, in its transaction: apart, so that it can build the events
   * while the rows are written.
   */
  planMoves(moves: readonly { row: IntentRow; to: readonly Status[]; at: readonly Date[] }[]): {
    rows: IntentRow[];
    steps: MoveStep[];
    finals: { from: IntentRow; to: IntentRow; at: Date }[];
  } {
    const steps: MoveStep[] = [];
    const finals: { from: IntentRow; to: IntentRow; at: Date }[] = [];
    const rows = moves.map(({ row, to, at }) => {
      let next = row;
      to.forEach((status, i) => {
        const from = next;
        next = this.#nextRow(from, status, at[i] as Date);
        steps.push({ from, next, at: at[i] as Date });
      });
      if (next !== row) finals.push({ from: row, to: next, at: at[to.length - 1] as Date });
      return next;
    });
    return { rows, steps, finals };
  }

  /** A move's event: the intent as it is after the move. */
  moveEvent(step: MoveStep): NewEvent {
    return this.eventOf(step.next, eventFor(step.from.status as Status, step.next.status as Status), step.at);
  }

  /** What a move does, without doing it: the row after it and its event. Throws if the status machine forbids it. */
  #planMove(row: IntentRow, to: Status, at: Date): { next: IntentRow; event: NewEvent } {
    const next = this.#nextRow(row, to, at);
    return { next, event: this.moveEvent({ from: row, next, at }) };
  }

  /** The row after a move. Throws if the status machine forbids it. */
  #nextRow(row: IntentRow, to: Status, at: Date): IntentRow {
    const from = row.status;
    if (!isStatus(from) || !canTransition(from, to)) {
      throw apiError("invalid_state", `Payment intent ${row.id} is ${from}; it cannot become ${to}.`);
    }
    return { ...row, ...statusTimes(row, to, at), status: to, sequence: row.sequence + 1 };
  }
}

/** One status move of a planned settlement: the intent before and after it, and when. */
export interface MoveStep {
  from: IntentRow;
  next: IntentRow;
  at: Date;
}
