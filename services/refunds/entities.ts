import { defineEntity, p, type InferEntity } from "@mikro-orm/core";
import { Merchant } from "../auth/entities.ts";
import { PaymentIntentRecord } from "../intents/entities.ts";

/**
 * A refund of what a Payment Intent received (docs/api.md, "Refunds"). The refunds domain writes
 * it, and nothing else does. Its amount is in the refunded payment's network and asset; the
 * refunds of an intent that are not cancelled never sum past what it received in that asset
 * (refundable.ts), checked under the intent's row lock.
 */
export const RefundRecord = defineEntity({
  name: "RefundRecord",
  tableName: "refunds",
  properties: {
    id: p.string().length(32).primary(),
    merchant: () => p.manyToOne(Merchant).deleteRule("cascade"),
    intent: () => p.manyToOne(PaymentIntentRecord).deleteRule("cascade"),
    environment: p.string().length(4),
    /** awaiting_address, awaiting_payment, sent, completed or cancelled. */
    status: p.string().length(20),
    network: p.string().length(32),
    asset: p.string().length(16),
    amount: p.decimal("string").columnType("numeric"),
    /** The intent's output refunded: its transaction and output index. */
    paymentTxHash: p.string().length(128),
    paymentOutputIndex: p.integer(),
    /** The customer's address, once given; never changed after. */
    address: p.string().length(128).nullable(),
    /**
     * The claim page's key (claim_url): random, shown to the merchant and its customer like a
     * checkout page's id, and good only while the address is not given.
     */
    claimToken: p.string().length(40).unique(),
    reason: p.string().length(500).nullable(),
    /** A refund priced in a currency: the price, its currency and the rate it was converted at. */
    priceAmount: p.decimal("string").columnType("numeric").nullable(),
    priceCurrency: p.string().length(3).nullable(),
    rate: p.decimal("string").columnType("numeric").nullable(),
    /** The transfers that paid it, oldest first: [{tx_hash, output_index, amount, simulated}]. */
    transactions: p.json<unknown[]>().default("[]"),
    simulated: p.boolean().default(false),
    createdAt: p.datetime().length(3),
    updatedAt: p.datetime().length(3),
    addressReceivedAt: p.datetime().length(3).nullable(),
    sentAt: p.datetime().length(3).nullable(),
    completedAt: p.datetime().length(3).nullable(),
    cancelledAt: p.datetime().length(3).nullable(),
    /**
     * The id of the transaction that gave the address (set by the database): the chain watchers read
     * the addresses given since their last read by it, as they read intents' (intents/store.ts
     * watchedAddresses). Null while there is no address.
     */
    watchXid: p.string().columnType("xid8").nullable(),
  },
  indexes: [
    { name: "refunds_intent_index", properties: ["intent", "createdAt"] },
    { name: "refunds_watch_index", properties: ["network", "environment", "watchXid", "id"] },
  ],
});
export type RefundRecord = InferEntity<typeof RefundRecord>;
