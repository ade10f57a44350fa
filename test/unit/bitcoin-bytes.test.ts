// Bitcoin blocks read from their bytes (services/watcher/bitcoin-bytes.ts), against real blocks
// (test/fixtures/bitcoin/blocks.json: mainnet 0, 1 and 542213, the last with a BIP 141 witness
// commitment, and a testnet3 block of 103 transactions). Expected hashes are computed here with
// node:crypto, never by the code under test. The issue's attack (a node rewriting block 1's
// coinbase output to 5 000 BTC paying a watched address) fails whichever way it is told: the JSON
// is never read, and rewritten bytes hash to another txid, so the merkle root refuses the block.
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import t from "tap";
import { bitcoinScript } from "../../services/addresses/formats.ts";
import { findAsset, type AssetInfo } from "../../services/vocabulary/assets.ts";
import { checkWitnessCommitment, parseBlock, parseTransaction } from "../../services/watcher/bitcoin-bytes.ts";
import { checkTransactions, merkleRoot } from "../../services/watcher/bitcoin-checks.ts";
import { BlockRefused } from "../../services/watcher/block-refused.ts";
import type { BitcoinNode } from "../../services/watcher/bitcoin-node.ts";
import { bitcoinSource, BitcoinWatched } from "../../services/watcher/bitcoin-source.ts";

type Fixture = { height?: number; hash: string; hex: string };
const fixtures = JSON.parse(readFileSync(new URL("../fixtures/bitcoin/blocks.json", import.meta.url), "utf8")) as { mainnet: Fixture[]; testnet3: Fixture[] };
const [genesis, block1, segwit] = fixtures.mainnet as [Fixture, Fixture, Fixture];
const testnet = fixtures.testnet3[0] as Fixture;
const sha256d = (b: Buffer) => createHash("sha256").update(createHash("sha256").update(b).digest()).digest();
const rpc = (b: Buffer) => Buffer.from(b).reverse().toString("hex");
const asked = (f: Fixture) => ({ height: f.height ?? 1, hash: f.hash });

t.test("real blocks: the header's bytes hash to the block's hash; the txids computed from the bytes hash up to its merkle root", async (t) => {
  for (const f of [genesis, block1, segwit, testnet]) {
    t.equal(rpc(sha256d(Buffer.from(f.hex.slice(0, 160), "hex"))), f.hash, `${f.hash}: node:crypto agrees with the fixture`);
    const b = parseBlock(f.hex, asked(f));
    t.equal(b.hash, f.hash, "the parsed header hashes to it");
    t.doesNotThrow(() => checkTransactions(b), `${b.tx.length} transactions: their merkle root is the header's`);
  }
  t.equal(parseBlock(genesis.hex, asked(genesis)).tx[0]?.txid, "4a5e1e4baab89f3a32518a88c31bc87f618f76673e2cc77ab2127b7afdeda33b", "block 0's coinbase");
  t.equal(parseBlock(testnet.hex, asked(testnet)).tx.length, 103);
  const b1 = parseBlock(block1.hex, asked(block1));
  t.same(b1.tx[0]?.outputs.map((o) => o.value), [5_000_000_000n], "block 1 paid 50 BTC, as its bytes say");
  t.equal(b1.previousblockhash, genesis.hash);
  t.same([b1.version, b1.time, b1.bits, b1.nonce], [1, 1231469665, "1d00ffff", 2573394689]);
});

t.test("a segwit block: txid without the witness, wtxid with it; its coinbase's commitment is the witness merkle root's", async (t) => {
  const b = parseBlock(segwit.hex, asked(segwit));
  t.ok(b.tx.some((x) => x.hasWitness), "block 542213 has witness transactions");
  for (const x of b.tx.filter((x) => x.hasWitness)) t.not(x.txid, x.wtxid, `${x.txid}: the wtxid hashes the witness too`);
  t.doesNotThrow(() => checkWitnessCommitment(b, merkleRoot), "its commitment holds");
  // Computed here: the witness root (the coinbase as zero), hashed with the coinbase's reserved value.
  const root = merkleRoot(["00".repeat(32), ...b.tx.slice(1).map((x) => x.wtxid)]);
  const commitment = sha256d(Buffer.concat([Buffer.from(root, "hex").reverse(), Buffer.from(b.tx[0]!.firstWitness[0]!)])).toString("hex");
  t.ok(b.tx[0]!.outputs.some((o) => o.script === `6a24aa21a9ed${commitment}`), "the coinbase names that commitment");
  // A witness changed in the bytes: the txids (and so the merkle root) are the same, the commitment is not.
  const w = b.tx.find((x, i) => i > 0 && x.hasWitness)!;
  const changed = { ...b, tx: b.tx.map((x) => (x === w ? { ...x, wtxid: "ab".repeat(32) } : x)) };
  t.doesNotThrow(() => checkTransactions(changed), "the merkle root does not see witnesses");
  t.throws(() => checkWitnessCommitment(changed, merkleRoot), { name: "BlockRefused", check: "witness_commitment" });
  const noCommitment = { ...b, tx: [{ ...b.tx[0]!, outputs: b.tx[0]!.outputs.filter((o) => !o.script.startsWith("6a24aa21a9ed")) }, ...b.tx.slice(1)] };
  t.throws(() => checkWitnessCommitment(noCommitment, merkleRoot), { check: "witness_commitment", message: /commits to none/ });
});

t.test("bytes that are not a block or a transaction are refused, named by what was asked", async (t) => {
  for (const hex of ["", "zz", genesis.hex.slice(0, 150), genesis.hex.slice(0, -2), `${genesis.hex}00`]) {
    t.throws(() => parseBlock(hex, { height: 0, hash: genesis.hash }), { name: "BlockRefused", check: "header", height: 0, hash: genesis.hash }, JSON.stringify(hex.slice(0, 20)));
  }
  t.throws(() => parseTransaction("0100"), RangeError);
  const coinbase = genesis.hex.slice(162);
  t.equal(parseTransaction(coinbase).txid, "4a5e1e4baab89f3a32518a88c31bc87f618f76673e2cc77ab2127b7afdeda33b");
});

/** A node serving mainnet blocks 0 and 1 as bytes, block 1's as `lie` makes them. */
function mainnetNode(lie: (hex: string) => string = (h) => h) {
  const byHash = new Map([genesis, block1].map((f) => [f.hash, f]));
  const header = (f: Fixture) => {
    const b = parseBlock(f.hex, asked(f));
    return { hash: b.hash, height: b.height, version: b.version, previousblockhash: f === genesis ? undefined : b.previousblockhash, merkleroot: b.merkleroot, time: b.time, bits: b.bits, nonce: b.nonce };
  };
  return {
    headHeight: async () => 1,
    hashAt: async (h: number) => [genesis, block1][h]?.hash,
    hashesAt: async (hs: readonly number[]) => hs.map((h) => [genesis, block1][h]?.hash),
    // The headers are the real ones whatever the block's bytes: the header chain links; the block must then hash to its header.
    rawHeaders: async (hashes: readonly string[]) => hashes.map((h) => byHash.get(h)?.hex.slice(0, 160)),
    block: async (hash: string) => (hash === block1.hash ? lie(block1.hex) : byHash.get(hash)?.hex),
    header: async (hash: string) => (byHash.has(hash) ? header(byHash.get(hash)!) : undefined),
  } as unknown as BitcoinNode;
}

t.test("the issue's attack: block 1's coinbase output rewritten to 5 000 BTC paying a watched address is refused on mainnet rules", async (t) => {
  const address = "bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4";
  const script = bitcoinScript(address)!;
  const watched = new BitcoinWatched();
  watched.add(address);
  const read = (node: BitcoinNode) => bitcoinSource(node, findAsset("bitcoin", "BTC") as AssetInfo, watched, { rules: "mainnet", checkpoint: { height: 0, hash: genesis.hash, source: "mainnet's block 0" } }).read(1, 1);
  t.same((await read(mainnetNode()))?.outputs, [], "the real block pays no watched address");
  // The coinbase's one output (50 BTC to a pubkey) rewritten in the bytes: 5 000 BTC to the watched script.
  const value = Buffer.alloc(8);
  value.writeBigUInt64LE(500_000_000_000n);
  const realOutput = `00f2052a01000000434104`;
  t.ok(block1.hex.includes(realOutput), "the real output's bytes are there");
  const forged = (hex: string) => {
    const at = hex.indexOf(realOutput);
    const end = at + realOutput.length - 6 + 2 * 0x43 + 2;
    return hex.slice(0, at) + value.toString("hex") + (script.length / 2).toString(16).padStart(2, "0") + script + hex.slice(end);
  };
  const err = await read(mainnetNode(forged)).catch((e: unknown) => e);
  t.ok(err instanceof BlockRefused, "refused");
  t.match(err, { check: "merkle_root", height: 1, hash: block1.hash, message: /merkle root is [0-9a-f]{64}, not the header's 0e3e2357/ });
  // The forged coinbase parses, pays the watched script: only the root betrays it.
  const b = parseBlock(forged(block1.hex), asked(block1));
  t.same(b.tx[0]?.outputs, [{ n: 0, value: 500_000_000_000n, script }], "what a watcher believing the bytes' outputs alone would count");
  // Bytes that hash to another block than the one the node named at that height.
  const other = await read(mainnetNode(() => genesis.hex)).catch((e: unknown) => e);
  t.match(other, { name: "BlockRefused", check: "header", height: 1, message: /its bytes hash to 000000000019d6689c/ });
});
