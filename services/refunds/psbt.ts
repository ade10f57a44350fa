/**
 * A bitcoin refund's payment as a PSBT (pure: refunds.ts gathers the outputs and their keys). It
 * spends outputs the intent received, its refunded payment first, pays the customer what is still
 * due, and sends the change to the key's change chain at that payment's index (…/1/i, as wallets
 * do; back to the deposit address, the watcher would count it as a payment), every input and the
 * change carrying its BIP-32 derivation so that a hardware wallet recognises its own keys and
 * signs (BIP 174).
 * Only P2WPKH is ours to spend: the deposit addresses are BIP 84 (services/addresses/keys.ts).
 */
import { Address, bip32Path, NETWORK, OutScript, TEST_NETWORK, Transaction } from "@scure/btc-signer";
import { hex } from "@scure/base";
import type { AddressDerivation } from "../addresses/origins.ts";
import { fromUnits } from "../vocabulary/amount.ts";

/** An output of the intent that the PSBT may spend. */
export interface SpendableOutput {
  txHash: string;
  outputIndex: number;
  sats: bigint;
  address: string;
  derivation: AddressDerivation;
  /**
   * Its transaction's bytes without witnesses, as the watcher read them: the input's non-witness
   * UTXO, which Trezor and Ledger's Bitcoin app require of a segwit v0 input (the amount a
   * signature commits to cannot be trusted from the witness UTXO alone: CVE-2020-14199).
   */
  rawTransaction?: Uint8Array | undefined;
}

export interface PsbtRequest {
  environment: "test" | "live";
  /** The customer's address and what is still due to it. */
  to: string;
  sats: bigint;
  feeRate: number;
  /** The intent's outputs, the refunded payment first: spent in this order until they cover it. */
  outputs: readonly SpendableOutput[];
}

export interface BuiltPsbt {
  psbt: string;
  fee: bigint;
  vsize: number;
  inputs: { txHash: string; outputIndex: number; sats: bigint; address: string; derivation: string; previousTransaction: boolean }[];
  outputs: { address: string; sats: bigint; change: boolean }[];
}

export type PsbtRefusal = { refused: string };

// Virtual sizes (BIP 141 weight / 4) of a transaction with segwit inputs: version, locktime and the
// two counts (10 bytes) plus the marker and flag (2 weight units); a P2WPKH input is its outpoint,
// empty script and sequence (41 bytes) and a witness of a signature of at most 72 bytes and a
// compressed key (108 weight units).
const overheadWeight = 10 * 4 + 2;
const inputWeight = 41 * 4 + 108;
const outputWeight = (script: Uint8Array) => (8 + 1 + script.length) * 4;

/**
 * Bitcoin Core's dust threshold at its default 3 sat/vB dust relay fee: an output worth less than
 * what spending it would cost is not relayed (policy.cpp GetDustThreshold).
 */
function dustOf(script: Uint8Array): bigint {
  const witness = script[0] !== undefined && (script[0] === 0x00 || (script[0] >= 0x51 && script[0] <= 0x60)) && script.length >= 4 && script.length <= 42;
  const spendSize = witness ? 32 + 4 + 1 + Math.floor(107 / 4) + 4 : 32 + 4 + 1 + 107 + 4;
  return BigInt((8 + 1 + script.length + spendSize) * 3);
}

const btc = (sats: bigint) => fromUnits(sats, 8);

/** The PSBT, or why none can be made (the outputs cannot cover the refund and its fee, an amount below dust). */
export function buildRefundPsbt(req: PsbtRequest): BuiltPsbt | PsbtRefusal {
  const network = req.environment === "live" ? NETWORK : TEST_NETWORK;
  const toScript = OutScript.encode(Address(network).decode(req.to));
  if (req.sats < dustOf(toScript)) {
    return { refused: `The ${btc(req.sats)} BTC still due is below bitcoin's dust limit for that address (${btc(dustOf(toScript))} BTC): no node would relay it.` };
  }
  const first = req.outputs[0];
  if (!first) return { refused: "The intent has no received outputs whose keys the store's wallet holds." };
  const changeTo = first.derivation.change;
  const changeScript = OutScript.encode(Address(network).decode(changeTo.address));
  const feeOf = (inputs: number, withChange: boolean) => {
    const weight = overheadWeight + inputs * inputWeight + outputWeight(toScript) + (withChange ? outputWeight(changeScript) : 0);
    const vsize = Math.ceil(weight / 4);
    return { vsize, fee: BigInt(Math.ceil(vsize * req.feeRate)) };
  };

  const chosen: SpendableOutput[] = [];
  let total = 0n;
  for (const output of req.outputs) {
    chosen.push(output);
    total += output.sats;
    const withChange = feeOf(chosen.length, true);
    const change = total - req.sats - withChange.fee;
    if (change >= dustOf(changeScript)) return build(withChange, change);
    const without = feeOf(chosen.length, false);
    // Change too small to be worth an output goes to the fee, as wallets do.
    if (total - req.sats >= without.fee) return build({ vsize: without.vsize, fee: total - req.sats }, 0n);
  }
  const needed = req.sats + feeOf(req.outputs.length, false).fee;
  return {
    refused: `The intent's received outputs hold ${btc(total)} BTC; the ${btc(req.sats)} BTC due and its fee at ${req.feeRate} sat/vB need ${btc(needed)} BTC. Send it from another wallet, or ask at a lower fee rate.`,
  };

  function build(size: { vsize: number; fee: bigint }, change: bigint): BuiltPsbt {
    const tx = new Transaction();
    const derivation = (d: Pick<AddressDerivation, "publicKey" | "path"> & { fingerprint: string }) => [d.publicKey, { fingerprint: Number.parseInt(d.fingerprint, 16), path: bip32Path(d.path) }] as [Uint8Array, { fingerprint: number; path: number[] }];
    for (const o of chosen) {
      tx.addInput({
        txid: hex.decode(o.txHash),
        index: o.outputIndex,
        witnessUtxo: { script: OutScript.encode(Address(network).decode(o.address)), amount: o.sats },
        ...(o.rawTransaction ? { nonWitnessUtxo: o.rawTransaction } : {}),
        bip32Derivation: [derivation(o.derivation)],
      });
    }
    tx.addOutput({ script: toScript, amount: req.sats });
    const outputs = [{ address: req.to, sats: req.sats, change: false }];
    if (change > 0n) {
      tx.addOutput({ script: changeScript, amount: change, bip32Derivation: [derivation({ ...changeTo, fingerprint: (first as SpendableOutput).derivation.fingerprint })] });
      outputs.push({ address: changeTo.address, sats: change, change: true });
    }
    const origin = (d: AddressDerivation) => `[${d.fingerprint}/${d.path.slice(2)}]`;
    return {
      psbt: Buffer.from(tx.toPSBT(0)).toString("base64"),
      fee: size.fee,
      vsize: size.vsize,
      inputs: chosen.map((o) => ({ txHash: o.txHash, outputIndex: o.outputIndex, sats: o.sats, address: o.address, derivation: origin(o.derivation), previousTransaction: o.rawTransaction !== undefined })),
      outputs,
    };
  }
}
