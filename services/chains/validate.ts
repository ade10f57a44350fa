import { sha256 } from "@noble/hashes/sha2.js";
import { bytesToHex } from "@noble/hashes/utils.js";
import { checkAddress } from "../addresses/formats.ts";
import { checkAmount } from "../vocabulary/amount.ts";
import { assetsOn, findAsset, networks } from "../vocabulary/assets.ts";
import { validationError } from "../platform/errors.ts";

/** What every report of an output must be, whoever sends it (a built-in watcher, an operator's own, the sandbox). */

/** Transaction hashes and block hashes: hex (0x optional) or base58, as the chains write them. */
export const hashPattern = /^(0x)?[0-9A-Za-z]{16,128}$/;

/**
 * Networks whose transaction and block hashes are hex, where case carries nothing: stored
 * lowercased whoever reports them (ChainService, ObservationService, the sandbox), so that one
 * transaction is one row. Elsewhere (solana's base58 signatures) case is the hash and is kept.
 */
const hexHashNetworks: ReadonlySet<string> = new Set(["bitcoin", "ethereum", "polygon", "base", "arbitrum", "tron"]);

/** A transaction or block hash as the core keeps it: lowercased on a network of hex hashes. */
export function normalizeHash(network: string, hash: string): string {
  return hexHashNetworks.has(network) && /^(0x)?[0-9a-fA-F]+$/.test(hash) ? hash.toLowerCase() : hash;
}

export function checkNetwork(network: string): void {
  if (!networks.includes(network)) throw validationError("network", `Unsupported network "${network}"; supported: ${networks.join(", ")}.`);
}

/** An address of the network in either environment's format, normalized. */
export function normalizeAddress(network: string, address: string, param = "to_address"): string {
  const live = checkAddress(network, "live", address);
  if (live.ok) return live.address;
  const test = checkAddress(network, "test", address);
  if (test.ok) return test.address;
  throw validationError(param, `"${param.split(".").at(-1)}" ${live.reason}.`);
}

/** An output's asset, address, transaction and amount, normalized; a validation error names the first field that is wrong (under `prefix`). */
export function checkOutput(network: string, o: { asset: string; toAddress: string; txHash: string; amount: string }, prefix = ""): { asset: string; toAddress: string; txHash: string; amount: string } {
  const asset = findAsset(network, o.asset);
  if (!asset) throw validationError(`${prefix}asset`, `Asset "${o.asset}" is not supported on ${network}; supported: ${assetsOn(network).join(", ")}.`);
  if (o.toAddress === "") throw validationError(`${prefix}to_address`, `"to_address" is missing or empty.`);
  const toAddress = normalizeAddress(network, o.toAddress, `${prefix}to_address`);
  if (!hashPattern.test(o.txHash)) throw validationError(`${prefix}tx_hash`, `"tx_hash" must be the transaction's hash (16 to 128 letters or digits).`);
  const amount = checkAmount(o.amount, asset.decimals);
  if (!amount.ok) throw validationError(`${prefix}amount`, `"amount" ${amount.reason}.`);
  return { asset: o.asset, toAddress, txHash: normalizeHash(network, o.txHash), amount: amount.value };
}

/** The most a reported transaction's bytes may be and still be kept (a refund's PSBT carries them). */
export const maxRawTransactionBytes = 100_000;

/**
 * A reported output's transaction bytes as kept (hex), or undefined: bitcoin only, and only bytes
 * that hash to the output's txid (double SHA-256, shown byte-reversed as Core shows txids), so a
 * watcher's mistake cannot put another transaction in a PSBT; an oversized one is left out.
 */
export function rawTransactionOf(network: string, o: { txHash: string; rawTransaction: Uint8Array }): string | undefined {
  const raw = o.rawTransaction;
  if (network !== "bitcoin" || raw.length === 0 || raw.length > maxRawTransactionBytes) return undefined;
  const txid = bytesToHex(sha256(sha256(raw)).reverse());
  return txid === o.txHash.toLowerCase() ? bytesToHex(raw) : undefined;
}
