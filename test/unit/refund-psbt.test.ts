// A bitcoin refund's PSBT (services/refunds/psbt.ts) and the key origins it names
// (services/addresses/keys.ts): pure, against the public test mnemonic's keys.
import t from "tap";
import { HDKey } from "@scure/bip32";
import { mnemonicToSeedSync } from "@scure/bip39";
import { Transaction, p2wpkh, TEST_NETWORK } from "@scure/btc-signer";
import { hex } from "@scure/base";
import { deriveAddress, deriveChange, derivePublicKey, SourceKeyError, splitKeyOrigin, testAccountKeys, testKeyOrigins } from "../../services/addresses/keys.ts";
import { buildRefundPsbt, type SpendableOutput } from "../../services/refunds/psbt.ts";
import { rawTransactionOf } from "../../services/chains/validate.ts";

const master = HDKey.fromMasterSeed(mnemonicToSeedSync("abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon about"));
const vpub = testAccountKeys.bitcoin;
const customer = p2wpkh(new Uint8Array(33).fill(2), TEST_NETWORK).address as string;

function output(index: number, sats: bigint, tx = index + 1): SpendableOutput {
  return {
    txHash: hex.encode(new Uint8Array(32).fill(tx)),
    outputIndex: 0,
    sats,
    address: deriveAddress("bitcoin", "test", vpub, index),
    derivation: {
      publicKey: derivePublicKey("bitcoin", "test", vpub, index),
      fingerprint: "73c5da0a",
      path: `m/84'/1'/0'/0/${index}`,
      change: { ...deriveChange("bitcoin", "test", vpub, index), path: `m/84'/1'/0'/1/${index}` },
    },
  };
}

t.test("key origins: the built-in Test key's is its mnemonic's master fingerprint; a descriptor's origin is split off and checked", async (t) => {
  t.equal(master.fingerprint.toString(16).padStart(8, "0"), testKeyOrigins.bitcoin?.fingerprint);
  t.equal(master.derive("m/84'/1'/0'/0/3").publicKey && hex.encode(master.derive("m/84'/1'/0'/0/3").publicKey as Uint8Array), hex.encode(derivePublicKey("bitcoin", "test", vpub, 3)), "the public key at …/0/3");
  const change = deriveChange("bitcoin", "test", vpub, 3);
  t.equal(change.address, p2wpkh(master.derive("m/84'/1'/0'/1/3").publicKey as Uint8Array, TEST_NETWORK).address, "the change address at …/1/3");

  t.same(splitKeyOrigin("bitcoin", "test", ` [73C5DA0A/84'/1'/0']${vpub} `), { key: vpub, origin: { fingerprint: "73c5da0a", path: "m/84'/1'/0'" } });
  t.same(splitKeyOrigin("bitcoin", "test", `[73c5da0a/84h/1h/0h]${vpub}`).origin, { fingerprint: "73c5da0a", path: "m/84'/1'/0'" }, "h for '");
  t.same(splitKeyOrigin("bitcoin", "test", vpub), { key: vpub, origin: null }, "a bare key has none");
  t.throws(() => splitKeyOrigin("bitcoin", "test", `[73c5da0a/84'/0'/0']${vpub}`), { message: /path is m\/84'\/0'\/0'; bitcoin test mode expects m\/84'\/1'\/0'/ });
  t.throws(() => splitKeyOrigin("bitcoin", "live", `[73c5da0/84'/0'/0']${vpub}`), new SourceKeyError("the key origin [73c5da0/84'/0'/0'] must start with the master key's fingerprint, 8 hex digits (as in [d34db33f/84'/0'/0'])"));
  const xprv = master.derive("m/84'/1'/0'").privateExtendedKey;
  t.throws(() => splitKeyOrigin("bitcoin", "test", `[73c5da0a/84'/1'/0']${xprv}`), { message: /never give a private key/ }, "a private key behind an origin is still called out");
});

t.test("one output covers it: the customer paid, change to the change chain, the fee the rate times the size", async (t) => {
  const built = buildRefundPsbt({ environment: "test", to: customer, sats: 30_000n, feeRate: 2, outputs: [output(4, 130_000n)] });
  if ("refused" in built) throw new Error(built.refused);
  t.equal(built.vsize, 141, "one P2WPKH input, two P2WPKH outputs: 10.5 + 68 + 31 + 31 vB");
  t.equal(built.fee, 282n);
  t.same(built.outputs, [
    { address: customer, sats: 30_000n, change: false },
    { address: deriveChange("bitcoin", "test", vpub, 4).address, sats: 130_000n - 30_000n - 282n, change: true },
  ]);
  t.equal(built.inputs[0]?.derivation, "[73c5da0a/84'/1'/0'/0/4]");

  const tx = Transaction.fromPSBT(Buffer.from(built.psbt, "base64"));
  t.equal(tx.inputsLength, 1);
  t.equal(tx.getInput(0).witnessUtxo?.amount, 130_000n, "the witness UTXO: the amount the signature commits to");
  t.equal(tx.getOutput(1).bip32Derivation?.[0]?.[1].fingerprint, 0x73c5da0a, "the change says whose it is, so the wallet does not show it as spent");
  t.equal(tx.sign(master as unknown as Parameters<Transaction["sign"]>[0]), 1, "the wallet finds its key by the input's derivation");
  tx.finalize();
  t.ok(tx.vsize <= built.vsize, "the signed size is within the estimate");
  t.equal(tx.fee, built.fee);
});

t.test("change worth less than spending it goes to the fee; a second output is spent when the first is short", async (t) => {
  const tight = buildRefundPsbt({ environment: "test", to: customer, sats: 30_000n, feeRate: 1, outputs: [output(1, 30_000n + 110n + 200n)] });
  if ("refused" in tight) throw new Error(tight.refused);
  t.equal(tight.outputs.length, 1, "no change output");
  t.equal(tight.fee, 310n, "the 200 over the fee went to it");

  const two = buildRefundPsbt({ environment: "test", to: customer, sats: 50_000n, feeRate: 5, outputs: [output(1, 40_000n), output(2, 40_000n)] });
  if ("refused" in two) throw new Error(two.refused);
  t.same(two.inputs.map((i) => i.derivation), ["[73c5da0a/84'/1'/0'/0/1]", "[73c5da0a/84'/1'/0'/0/2]"]);
  t.equal(two.outputs[1]?.address, deriveChange("bitcoin", "test", vpub, 1).address, "change at the first (the refunded payment's) index");
  t.equal(two.fee, BigInt(two.vsize * 5));
});

t.test("refused: not enough in the outputs at that fee rate, a refund below dust, no outputs", async (t) => {
  const short = buildRefundPsbt({ environment: "test", to: customer, sats: 100_000n, feeRate: 10, outputs: [output(1, 100_500n)] });
  t.match(short, { refused: /hold 0\.001005 BTC; the 0\.001 BTC due and its fee at 10 sat\/vB need 0\.001011 BTC/ });
  t.match(buildRefundPsbt({ environment: "test", to: customer, sats: 293n, feeRate: 1, outputs: [output(1, 100_000n)] }), { refused: /below bitcoin's dust limit.*0\.00000294 BTC/ });
  t.ok("psbt" in buildRefundPsbt({ environment: "test", to: customer, sats: 294n, feeRate: 1, outputs: [output(1, 100_000n)] }), "294 sats to a P2WPKH address is not dust");
  t.match(buildRefundPsbt({ environment: "test", to: customer, sats: 1000n, feeRate: 1, outputs: [] }), { refused: /no received outputs/ });
});

t.test("the previous transaction: carried when known, kept by the core only when its bytes hash to the txid", async (t) => {
  // A transaction paying the address at index 4, as the watcher reads it from its block (no witness).
  const prev = new Transaction({ allowUnknownInputs: true });
  prev.addInput({ txid: new Uint8Array(32).fill(9), index: 0 });
  prev.addOutputAddress(deriveAddress("bitcoin", "test", vpub, 4), 130_000n, TEST_NETWORK);
  const raw = prev.toBytes(true, false);
  const spent = { ...output(4, 130_000n), txHash: prev.id, rawTransaction: raw };
  const built = buildRefundPsbt({ environment: "test", to: customer, sats: 30_000n, feeRate: 2, outputs: [spent] });
  if ("refused" in built) throw new Error(built.refused);
  t.equal(built.inputs[0]?.previousTransaction, true);
  t.ok(Transaction.fromPSBT(Buffer.from(built.psbt, "base64")).getInput(0).nonWitnessUtxo, "the non-witness UTXO is in the PSBT");
  const without = buildRefundPsbt({ environment: "test", to: customer, sats: 30_000n, feeRate: 2, outputs: [output(4, 130_000n)] });
  t.equal("psbt" in without && without.inputs[0]?.previousTransaction, false, "unknown: the witness UTXO alone, and said");

  t.equal(rawTransactionOf("bitcoin", { txHash: prev.id, rawTransaction: raw }), hex.encode(raw), "bytes that hash to the txid are kept");
  t.equal(rawTransactionOf("bitcoin", { txHash: prev.id.toUpperCase(), rawTransaction: raw }), hex.encode(raw), "whatever the txid's case");
  t.equal(rawTransactionOf("bitcoin", { txHash: "ab".repeat(32), rawTransaction: raw }), undefined, "another transaction's bytes are not");
  t.equal(rawTransactionOf("ethereum", { txHash: prev.id, rawTransaction: raw }), undefined, "nor any on another chain");
  t.equal(rawTransactionOf("bitcoin", { txHash: prev.id, rawTransaction: new Uint8Array(0) }), undefined, "nor none");
  t.equal(rawTransactionOf("bitcoin", { txHash: prev.id, rawTransaction: new Uint8Array(100_001) }), undefined, "nor past 100 000 bytes");
});
