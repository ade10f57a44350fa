import { defineEntity, p, type InferEntity } from "@mikro-orm/core";
import { Merchant } from "../auth/entities.ts";

/**
 * A merchant's extended public key for one network and environment: deposit
 * addresses are its external chain, …/0/next_index, taken atomically.
 */
export const AddressSource = defineEntity({
  name: "AddressSource",
  tableName: "address_sources",
  properties: {
    merchant: () => p.manyToOne(Merchant).deleteRule("cascade").primary(),
    environment: p.string().length(4).primary(),
    network: p.string().length(32).primary(),
    accountKey: p.string().length(255),
    nextIndex: p.integer().default(0),
    /** Keys this source had before, each with the index it had reached: set again, one resumes there. */
    retiredKeys: p.json<Record<string, number>>().default("{}"),
    /** Each key's origin, if given ("d34db33f/84'/0'/0'": master fingerprint, account path), kept past the key's retirement. */
    keyOrigins: p.json<Record<string, string>>().default("{}"),
    createdAt: p.datetime().length(3),
    updatedAt: p.datetime().length(3),
  },
});
export type AddressSource = InferEntity<typeof AddressSource>;

/** An imported deposit address, leased to one intent at most, ever. */
export const PooledAddress = defineEntity({
  name: "PooledAddress",
  tableName: "address_pool",
  properties: {
    id: p.bigint("number").primary().autoincrement(),
    merchant: () => p.manyToOne(Merchant).deleteRule("cascade"),
    environment: p.string().length(4),
    network: p.string().length(32),
    address: p.string().length(128),
    importedAt: p.datetime().length(3),
    paymentIntentId: p.string().nullable(),
    leasedAt: p.datetime().length(3).nullable(),
  },
  indexes: [{ properties: ["merchant", "environment", "network", "leasedAt", "id"] }],
  uniques: [{ properties: ["network", "address"] }],
});
export type PooledAddress = InferEntity<typeof PooledAddress>;
