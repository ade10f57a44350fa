import { defineEntity, p, type InferEntity } from "@mikro-orm/core";
import { Merchant } from "../auth/entities.ts";

/**
 * How many confirmations a merchant's payments on a network need, per environment: for every
 * asset of the network (asset "*") or one asset, which may also name an amount below which
 * fewer confirmations do. Read when an intent is created and fixed on it.
 */
export const ConfirmationPolicy = defineEntity({
  name: "ConfirmationPolicy",
  tableName: "confirmation_policies",
  properties: {
    merchant: () => p.manyToOne(Merchant).deleteRule("cascade").primary(),
    environment: p.string().length(4).primary(),
    network: p.string().length(32).primary(),
    asset: p.string().length(16).primary(),
    confirmations: p.integer(),
    /** Intents requesting less than this (the asset's units) need belowConfirmations instead. */
    belowAmount: p.decimal("string").columnType("numeric").nullable(),
    belowConfirmations: p.integer().nullable(),
    updatedAt: p.datetime().length(3),
  },
});
export type ConfirmationPolicy = InferEntity<typeof ConfirmationPolicy>;

/** A merchant's settings per environment that apply to every network: how short a payment may fall and still count in full. */
export const MerchantPolicy = defineEntity({
  name: "MerchantPolicy",
  tableName: "merchant_policies",
  properties: {
    merchant: () => p.manyToOne(Merchant).deleteRule("cascade").primary(),
    environment: p.string().length(4).primary(),
    /** In basis points of the requested amount (50 = 0.5 %). */
    underpaymentToleranceBps: p.integer().default(0),
    /** Taken off the quoted rate of its fiat-priced intents, in basis points (their shoppers pay this much more). */
    priceSpreadBps: p.integer().default(0),
    /**
     * The payment methods ("network.asset") an intent created with payment_methods "all" offers, of
     * those a watcher follows; null: every one a watcher follows.
     */
    acceptedMethods: p.json<string[]>().nullable(),
    /** One more with every change to the merchant's policy in this environment (its rules too): a create checks its copy against it. */
    version: p.bigint("number").defaultRaw("0"),
    updatedAt: p.datetime().length(3),
  },
});
export type MerchantPolicy = InferEntity<typeof MerchantPolicy>;
