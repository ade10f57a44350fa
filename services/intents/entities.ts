import { defineEntity, p, type InferEntity } from "@mikro-orm/core";
import { Merchant } from "../auth/entities.ts";

/**
 * A Payment Intent. `id` is its public identifier. Lists page newest first
 * on (created_at, id), so every filter has an index in that order.
 */
export const PaymentIntentRecord = defineEntity({
  name: "PaymentIntentRecord",
  tableName: "payment_intents",
  properties: {
    id: p.string().primary(),
    merchant: () => p.manyToOne(Merchant).deleteRule("cascade"),
    environment: p.string().length(4),
    status: p.string().length(16),
    merchantReference: p.string().length(128).nullable(),
    network: p.string().length(32),
    asset: p.string().length(16),
    requestedAmount: p.decimal("string").columnType("numeric"),
    metadata: p.json<Record<string, string>>(),
    createdAt: p.datetime().length(3),
    expiresAt: p.datetime().length(3),
    updatedAt: p.datetime().length(3),
    /** Watch-only: derived from the merchant's account key or leased from its pool; never reused on a network. */
    depositAddress: p.string().length(128).nullable(),
    /** The derivation index of depositAddress (…/0/index), when derived. */
    addressIndex: p.integer().nullable(),
    /** Counted funds: confirmed to the network's threshold and not orphaned. Null until a transaction is seen. */
    amountReceived: p.decimal("string").columnType("numeric").nullable(),
    /** What its completed refunds gave back in its own network and asset (the refunds domain adds to it); null: none. */
    amountRefunded: p.decimal("string").columnType("numeric").nullable(),
    paidAt: p.datetime().length(3).nullable(),
    expiredAt: p.datetime().length(3).nullable(),
    cancelledAt: p.datetime().length(3).nullable(),
    /** Where it was created: api (merchant API key), site (Site Gateway) or pos (a cashier's terminal). */
    source: p.string().length(8).default("api"),
    /** The cashier and terminal of a pos intent. */
    cashier: p.string().length(100).nullable(),
    terminal: p.string().length(100).nullable(),
    /** Grows by one with each status change (each event about the intent): receivers order events by it. */
    sequence: p.integer().default(1),
    /** The confirmation policy in force when it was created: what an output needs to count. Null on intents from before policies (the network's then). */
    requiredConfirmations: p.integer().nullable(),
    /** How far below the requested amount counted funds still confirm it, in basis points, fixed at creation. */
    underpaymentToleranceBps: p.integer().default(0),
    /**
     * The id of the transaction that created it (set by the database): the chain watchers read the
     * addresses added since their last read by it, in the order of commits rather than of a clock
     * (services/chains/watched-cursor.ts). 0 on intents from before it.
     */
    /** The shop's pages the checkout page links back to (paid; pending, expired or cancelled), as the merchant gave them. */
    redirectUrl: p.string().length(2048).nullable(),
    cancelUrl: p.string().length(2048).nullable(),
    /** When the intent first saw funds of its asset that did not count yet (payment.detected, once). */
    detectedAt: p.datetime().length(3).nullable(),
    watchXid: p.string().columnType("xid8").defaultRaw("pg_current_xact_id()"),
    /** A fiat-priced intent's price (in priceCurrency) and the quote requestedAmount was computed at; null when priced in its asset. */
    priceAmount: p.decimal("string").columnType("numeric").nullable(),
    priceCurrency: p.string().length(3).nullable(),
    /** Units of priceCurrency per unit of the asset, after the merchant's spread. */
    quoteRate: p.decimal("string").columnType("numeric").nullable(),
    /** The sources whose answers made the rate. */
    quoteSources: p.json<string[]>().nullable(),
    quotedAt: p.datetime().length(3).nullable(),
    /**
     * Since when an output of its asset has waited for its value in priceCurrency: settlement saw
     * it while no rate was fresh. The valuation sweep (valuation.ts) values it and clears this.
     */
    fiatValueDueSince: p.datetime().length(3).nullable(),
    /**
     * When the current quote lapses: QUOTE_SECONDS after quotedAt, at most expiresAt. The requote
     * sweep (requote.ts) then quotes what is still due again. Null on intents from before quotes had
     * a life of their own: theirs holds until expiresAt.
     */
    quoteExpiresAt: p.datetime().length(3).nullable(),
    /** The quotes the current one replaced, oldest first, each {rate, sources, quoted_at, expires_at, grace?}; null: never re-quoted. */
    quoteHistory: p.json<unknown[]>().nullable(),
    /**
     * The payment methods of an intent created with several (store.ts StoredMethod): each network
     * and asset, its amount, address and rate. Null on an intent of one method (its columns say
     * it). Until a payment chooses one, network, asset, requested_amount and the quote columns hold
     * the first method's and deposit_address is null; then they hold the chosen one's.
     */
    methods: p.json<unknown[]>().nullable(),
  },
  indexes: [
    { properties: ["merchant", "environment", "createdAt", "id"] },
    { properties: ["merchant", "environment", "status", "createdAt", "id"] },
    { properties: ["merchant", "environment", "merchantReference", "createdAt", "id"] },
    { properties: ["status", "expiresAt"] },
    // What the chain watchers' confirmations and catch-up read by creation time (services/chains).
    { properties: ["network", "environment", "createdAt", "id"] },
    // The chain watchers' list of addresses to watch, and what was added since (services/chains).
    { properties: ["network", "environment", "watchXid", "id"] },
    // The few intents the valuation sweep reads (valuation.ts), oldest first.
    { name: "payment_intents_fiat_value_due_index", properties: ["fiatValueDueSince"], where: `"fiat_value_due_since" is not null` },
    // The payable intents whose quote lapses before they expire, by when: the requote sweep's (requote.ts).
    {
      name: "payment_intents_quote_expires_index",
      properties: ["quoteExpiresAt"],
      where: `"status" in ('pending', 'underpaid') and "quote_expires_at" < "expires_at"`,
    },
  ],
  uniques: [{ properties: ["network", "depositAddress"] }],
});
export type PaymentIntentRecord = InferEntity<typeof PaymentIntentRecord>;

/**
 * The deposit addresses of an intent offering several payment methods, one per network (the
 * network's assets share it): what the chain watchers follow and what an output's address is
 * matched to, beside payment_intents.deposit_address. Written at create, never changed.
 */
export const PaymentIntentMethodRecord = defineEntity({
  name: "PaymentIntentMethodRecord",
  tableName: "payment_intent_methods",
  properties: {
    // Keyed by what a chain shows, an address on a network: how an output finds its intent.
    network: p.string().length(32).primary(),
    depositAddress: p.string().length(128).primary(),
    intent: () => p.manyToOne(PaymentIntentRecord).deleteRule("cascade"),
    environment: p.string().length(4),
    /** The most confirmations any of its methods on the network needs: how far back that network's watcher looks. */
    requiredConfirmations: p.integer(),
    /** The same transaction id as its intent's watch_xid: the watchers' cursor over both tables. */
    watchXid: p.string().columnType("xid8").defaultRaw("pg_current_xact_id()"),
  },
  indexes: [{ name: "payment_intent_methods_watch_index", properties: ["network", "environment", "watchXid", "intent"] }],
});
export type PaymentIntentMethodRecord = InferEntity<typeof PaymentIntentMethodRecord>;
