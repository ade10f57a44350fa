// What a bitcoin block read from a node is checked against (services/watcher/bitcoin-checks.ts):
// its header hashes to the hash named and meets the target of its bits, its transactions hash up
// to its merkle root, mainnet's target rule. Against real mainnet headers (block 0, 1, 170 and
// 100 000), with the expected values computed here from first principles (node:crypto), never by
// the code under test; and the source refusing a block whose nonce, merkle root or bits were changed.
import { createHash } from "node:crypto";
import t from "tap";
import { findAsset, type AssetInfo } from "../../services/vocabulary/assets.ts";
import {
  checkHeader,
  checkTransactions,
  compactTarget,
  headerHash,
  mainnetNextBits,
  mainnetPowLimit,
  merkleRoot,
  toCompact,
  type HeaderFields,
} from "../../services/watcher/bitcoin-checks.ts";
import type { BitcoinNode } from "../../services/watcher/bitcoin-node.ts";
import { BlockRefused } from "../../services/watcher/block-refused.ts";
import type { Checkpoint } from "../../services/watcher/bitcoin-headers.ts";
import { bitcoinSource, BitcoinWatched } from "../../services/watcher/bitcoin-source.ts";
import { hashOfHeader, merkleRootOf, mine, withHeader, type MinedBlock } from "../helpers/bitcoin-blocks.ts";

const genesis: HeaderFields = {
  hash: "000000000019d6689c085ae165831e934ff763ae46a2a6c172b3f1b60a8ce26f",
  height: 0,
  version: 1,
  merkleroot: "4a5e1e4baab89f3a32518a88c31bc87f618f76673e2cc77ab2127b7afdeda33b",
  time: 1231006505,
  bits: "1d00ffff",
  nonce: 2083236893,
};
const block1: HeaderFields = {
  hash: "00000000839a8e6886ab5951d76f411475428afc90947ee320161bbf18eb6048",
  height: 1,
  version: 1,
  previousblockhash: genesis.hash,
  merkleroot: "0e3e2357e806b6cdb1f70b54c3a3a17b6714ee1f0e68bebb44a74b1efd512098",
  time: 1231469665,
  bits: "1d00ffff",
  nonce: 2573394689,
};
/** Block 170: the first transaction between two keys (the coinbase and Satoshi's payment to Hal Finney). */
const block170 = {
  hash: "00000000d1145790a8694403d4063f323d499e655c83426834d4ce2f8dd4a2ee",
  height: 170,
  version: 1,
  previousblockhash: "000000002a22cfee1f2c846adbd12b3e183d4f97683f85dad08a79780a84bd55",
  merkleroot: "7dac2c5666815c17a3b36427de37bb9d2e2c5ccec3f8633eb91a4205cb4c10ff",
  time: 1231731025,
  bits: "1d00ffff",
  nonce: 1889418792,
  tx: ["b1fea52486ce0c62bb442b530a3f0132b826c74e473d1f2c220bfa78111c5082", "f4184fc596403b9d638783cf57adfe4c75c605f6356fbc91338530e9831e9e16"].map((txid) => ({ txid })),
};
/** Block 100 000: four transactions, and a target below difficulty 1 (bits 1b04864c). */
const block100000 = {
  hash: "000000000003ba27aa200b1cecaad478d2b00432346c3f1f3986da1afd33e506",
  height: 100000,
  version: 1,
  previousblockhash: "000000000002d01c1fccc21636b607dfd930d31d01c3a62104612a1719011250",
  merkleroot: "f3e94742aca4b5ef85488dc37c06c3282295ffec960994b2c0d5ac2a25a95766",
  time: 1293623863,
  bits: "1b04864c",
  nonce: 274148111,
  tx: [
    "8c14f0db3df150123e6f3dbbf30f8b955a8249b62ac1d1ff16284aefa3d06d87",
    "fff2525b8931402dd09222c50775608f75787bd2b87e56995a7bdd30f79702c4",
    "6359f0868171b1d194cbee1af2f16ea598ae8fad666d9b012c8ed2b79a236ec4",
    "e9a66845e05d5abc0ad04ec80f774a7e585c6e8db975962d069a522137b80c1d",
  ].map((txid) => ({ txid })),
};


const sha256d = (b: Buffer) => createHash("sha256").update(createHash("sha256").update(b).digest()).digest();

t.test("real mainnet headers hash to their hash, the helper's independent serialization agrees, and they meet their targets", async (t) => {
  for (const h of [genesis, block1, block170, block100000]) {
    t.equal(hashOfHeader(h), h.hash, `block ${h.height}: first principles`);
    t.equal(headerHash(h), h.hash, `block ${h.height}: the watcher's serialization`);
    t.doesNotThrow(() => checkHeader(h, mainnetPowLimit), `block ${h.height} passes`);
  }
  // The genesis header by hand: 80 bytes, version 1 little-endian first, nonce last.
  const bytes = Buffer.concat([
    Buffer.from("01000000", "hex"),
    Buffer.alloc(32),
    Buffer.from(genesis.merkleroot, "hex").reverse(),
    Buffer.from("29ab5f49", "hex"),
    Buffer.from("ffff001d", "hex"),
    Buffer.from("1dac2b7c", "hex"),
  ]);
  t.equal(Buffer.from(sha256d(bytes)).reverse().toString("hex"), genesis.hash);
});

t.test("a changed nonce, merkle root, time or version does not hash to the named hash; a hash above the target is refused", async (t) => {
  for (const [what, changed] of [
    ["nonce", { ...genesis, nonce: genesis.nonce + 1 }],
    ["merkle root", { ...block1, merkleroot: genesis.merkleroot }],
    ["time", { ...block100000, time: block100000.time + 1 }],
    ["version", { ...block170, version: 2 }],
  ] as const) {
    t.throws(() => checkHeader(changed, mainnetPowLimit), { name: "BlockRefused", check: "header" }, what);
  }
  // The same fields with the hash they do hash to: it misses the target.
  const tampered = { ...genesis, nonce: genesis.nonce + 1 };
  t.throws(() => checkHeader({ ...tampered, hash: hashOfHeader(tampered) }, mainnetPowLimit), { name: "BlockRefused", check: "proof_of_work" });
  // Block 100 000 claiming a harder target than it met (bits 1a04864c: 256 times harder).
  const harder = { ...block100000, bits: "1a04864c" };
  t.throws(() => checkHeader({ ...harder, hash: hashOfHeader(harder) }, mainnetPowLimit), { name: "BlockRefused", check: "proof_of_work" });
  // A regtest target passes a test network's check but is easier than mainnet's limit.
  const easy = mine({ height: 1, previousblockhash: genesis.hash, time: 1, tx: [{ vout: [] }] });
  t.doesNotThrow(() => checkHeader(easy));
  t.throws(() => checkHeader(easy, mainnetPowLimit), { name: "BlockRefused", check: "proof_of_work", message: /easier target than the network allows/ });
  t.throws(() => checkHeader({ ...genesis, bits: "1d00fff" }), { name: "BlockRefused", check: "header" }, "bits not 8 hex digits");
  t.throws(() => checkHeader({ ...genesis, merkleroot: "zz" }), { name: "BlockRefused", check: "header" });
});

t.test("compact bits expand as Core's SetCompact does; negative, overflowing and zero targets are refused", async (t) => {
  t.equal(compactTarget(0x1d00ffff), 0xffffn << 208n);
  t.ok(compactTarget(0x1d00ffff) <= mainnetPowLimit, "difficulty 1 within mainnet's powLimit");
  t.equal(compactTarget(0x01123456), 0x12n);
  t.equal(compactTarget(0x02123456), 0x1234n);
  t.equal(compactTarget(0x03123456), 0x123456n);
  t.equal(compactTarget(0x04123456), 0x12345600n);
  t.equal(compactTarget(0x05009234), 0x92340000n);
  t.equal(compactTarget(0x20123456), 0x123456n << 232n);
  t.equal(compactTarget(0x1b04864c), 0x04864cn << 192n);
  t.equal(compactTarget(0x207fffff), 0x7fffffn << 232n, "regtest");
  t.equal(compactTarget(0x22000001), 1n << 248n, "a mantissa of one byte fits at 34 bytes");
  for (const bits of [0, 0x00123456, 0x01003456, 0x02000056, 0x03000000, 0x04000000, 0x00923456]) {
    t.throws(() => compactTarget(bits), { message: /zero target/ }, `${bits.toString(16)}: zero`);
  }
  for (const bits of [0x01fedcba, 0x04923456, 0x1d80ffff]) t.throws(() => compactTarget(bits), { message: /negative/ }, `${bits.toString(16)}: negative`);
  for (const bits of [0xff123456, 0x23000001, 0x22000100, 0x21010000]) t.throws(() => compactTarget(bits), { message: /overflows/ }, `${bits.toString(16)}: overflow`);
  // And back, as a retarget writes them (the sign bit moves into the exponent).
  t.equal(toCompact(0xffffn << 208n), 0x1d00ffff);
  t.equal(toCompact(0x12n), 0x01120000);
  t.equal(toCompact(0x80n), 0x02008000);
  t.equal(toCompact(0x92340000n), 0x05009234);
  t.equal(toCompact(0x12345600n), 0x04123456);
});

t.test("merkle roots: real blocks of 1, 2 and 4 transactions; odd levels pair the last with itself", async (t) => {
  t.equal(merkleRoot([genesis.merkleroot]), genesis.merkleroot, "one transaction: its txid");
  t.equal(merkleRoot(block170.tx.map((x) => x.txid)), block170.merkleroot);
  t.equal(merkleRoot(block100000.tx.map((x) => x.txid)), block100000.merkleroot);
  // Three and five: computed here by hand, pairing the odd last one with itself.
  const ids = block100000.tx.map((x) => Buffer.from(x.txid, "hex").reverse());
  const pair = (a: Buffer, b: Buffer) => sha256d(Buffer.concat([a, b]));
  const three = pair(pair(ids[0]!, ids[1]!), pair(ids[2]!, ids[2]!));
  t.equal(merkleRoot(block100000.tx.slice(0, 3).map((x) => x.txid)), Buffer.from(three).reverse().toString("hex"));
  const e = Buffer.from(genesis.merkleroot, "hex").reverse();
  const fiveL = pair(pair(ids[0]!, ids[1]!), pair(ids[2]!, ids[3]!));
  const fiveR = pair(pair(e, e), pair(e, e));
  t.equal(merkleRoot([...block100000.tx.map((x) => x.txid), genesis.merkleroot]), Buffer.from(pair(fiveL, fiveR)).reverse().toString("hex"));
  t.equal(merkleRootOf(block100000.tx.map((x) => x.txid)), block100000.merkleroot, "the test helper agrees");
});

t.test("a block's transactions must hash to its merkle root, with no txid twice (CVE-2012-2459)", async (t) => {
  t.doesNotThrow(() => checkTransactions(block100000));
  t.throws(() => checkTransactions({ ...block100000, tx: block100000.tx.slice(0, 3) }), { name: "BlockRefused", check: "merkle_root" }, "a transaction dropped");
  t.throws(() => checkTransactions({ ...block100000, tx: [...block100000.tx.slice(0, 3), { txid: block170.tx[1]!.txid }] }), { name: "BlockRefused", check: "merkle_root" }, "a txid changed");
  t.throws(() => checkTransactions({ ...block100000, tx: [block100000.tx[1]!, block100000.tx[0]!, ...block100000.tx.slice(2)] }), { name: "BlockRefused", check: "merkle_root" }, "reordered");
  // Three transactions and the same three with the last repeated have the same root: the repeat is refused.
  const three = block100000.tx.slice(0, 3);
  const root = merkleRootOf(three.map((x) => x.txid));
  t.equal(merkleRootOf([...three, three[2]!].map((x) => x.txid)), root, "the collision exists");
  t.doesNotThrow(() => checkTransactions({ ...block100000, merkleroot: root, tx: three }));
  t.throws(() => checkTransactions({ ...block100000, merkleroot: root, tx: [...three, three[2]!] }), { name: "BlockRefused", check: "duplicate_tx" });
  t.throws(() => checkTransactions({ ...block100000, tx: [] }), { name: "BlockRefused", check: "merkle_root" }, "no coinbase");
});

t.test("mainnet's target rule: the parent's bits between retargets; at a retarget the period's time scales the target, clamped 4x, at most powLimit", async (t) => {
  const twoWeeks = 14 * 24 * 3600;
  const parent = { bits: 0x1b04864c, time: 1_300_000_000 };
  t.equal(mainnetNextBits(100001, parent), 0x1b04864c);
  t.throws(() => mainnetNextBits(100800, parent), /the time of block 98784 is needed/);
  t.equal(mainnetNextBits(100800, parent, parent.time - twoWeeks), 0x1b04864c, "two weeks: the same target");
  // One week: half the target (0x04864c << 192, halved = 0x024326 << 192).
  t.equal(mainnetNextBits(100800, parent, parent.time - twoWeeks / 2), 0x1b024326);
  // One hour: clamped to a quarter (0x04864c / 4 = 0x012193).
  t.equal(mainnetNextBits(100800, parent, parent.time - 3600), 0x1b012193);
  // Twenty weeks: clamped to four times (0x04864c * 4 = 0x121930).
  t.equal(mainnetNextBits(100800, parent, parent.time - 10 * twoWeeks), 0x1b121930);
  // Slower than two weeks at difficulty 1 stays at powLimit, written 1d00ffff.
  t.equal(mainnetNextBits(2016, { bits: 0x1d00ffff, time: 1_233_000_000 }, 1_233_000_000 - 3 * twoWeeks), 0x1d00ffff);
});

/** A node serving a chain (each block's bytes and headers), or one whose bytes for a block are `lie`'s. */
function nodeOf(chain: readonly { hash: string; hex: string; height: number }[], lie?: (b: MinedBlock) => string) {
  const byHash = (hash: string) => chain.find((x) => x.hash === hash);
  const node = {
    headHeight: async () => chain.length - 1,
    hashAt: async (h: number) => chain[h]?.hash,
    hashesAt: async (hs: readonly number[]) => hs.map((h) => chain[h]?.hash),
    rawHeaders: async (hashes: readonly string[]) => hashes.map((h) => byHash(h)?.hex.slice(0, 160)),
    block: async (hash: string) => {
      const b = byHash(hash);
      return b && lie ? lie(b as MinedBlock) : b?.hex;
    },
    header: async (hash: string) => {
      const b = byHash(hash);
      return b && headers.get(b.hash);
    },
  } as unknown as BitcoinNode;
  return { node };
}

/** Headers the fake nodes serve by hash (getblockheader), as Core writes them. */
const headers = new Map<string, HeaderFields>([genesis, block1].map((h) => [h.hash, h]));

const payTx = (n: number) => ({ tag: n, vout: [{ value: 0.5, scriptPubKey: { hex: "0014" + "00".repeat(20) } }] });

function regtestChain(length: number): MinedBlock[] {
  const chain: MinedBlock[] = [];
  for (let h = 0; h < length; h++) chain.push(mine({ height: h, previousblockhash: chain[h - 1]?.hash, time: 1_700_000_000 + h * 600, tx: [payTx(h + 1), payTx(h + 1000)] }));
  return chain;
}

/** A source's read; on mainnet rules the chain's block 0 stands for the compiled-in checkpoint. */
const read = (node: BitcoinNode, rules: "mainnet" | "test", from: number, to: number, checkpoint?: Checkpoint) =>
  bitcoinSource(node, findAsset("bitcoin", "BTC") as AssetInfo, new BitcoinWatched(), { rules, checkpoint }).read(from, to);

t.test("the source refuses a block whose nonce, merkle root, transactions or bits were changed, whole, naming it", async (t) => {
  const chain = regtestChain(6);
  t.same((await read(nodeOf(chain).node, "test", 1, 5))?.blocks.map((b) => b.height), [1, 2, 3, 4, 5]);
  const at3 = (change: (b: MinedBlock) => string) => (b: MinedBlock) => (b.height === 3 ? change(b) : b.hex);
  const header = (b: MinedBlock) => ({ version: b.version, previousblockhash: b.previousblockhash, merkleroot: b.merkleroot, time: b.time, bits: b.bits, nonce: b.nonce });
  const txs = (b: MinedBlock, list: readonly { hex: string }[]) => b.hex.slice(0, 160) + list.length.toString(16).padStart(2, "0") + list.map((x) => x.hex).join("");
  for (const [what, change, check] of [
    ["nonce", (b: MinedBlock) => withHeader(b, { ...header(b), nonce: b.nonce + 1 }), "header"],
    ["merkle root", (b: MinedBlock) => withHeader(b, { ...header(b), merkleroot: chain[1]!.merkleroot }), "header"],
    ["a transaction dropped", (b: MinedBlock) => txs(b, b.tx.slice(0, 1)), "merkle_root"],
    // An output's value rewritten in the transaction's bytes: its txid is another, the root no longer the header's.
    ["an output's amount changed", (b: MinedBlock) => txs(b, [b.tx[0]!, { hex: b.tx[1]!.hex.replace("80f0fa02", "00e1f505") }]), "merkle_root"],
    ["bits made harder", (b: MinedBlock) => withHeader(b, { ...header(b), bits: "1d00ffff" }), "header"],
    ["bytes that are not a block", () => "00", "header"],
  ] as const) {
    const err = await read(nodeOf(chain, at3(change)).node, "test", 1, 5).catch((e: unknown) => e);
    t.ok(err instanceof BlockRefused, what);
    t.match(err, { check, height: 3, hash: chain[3]!.hash }, what);
  }
});

t.test("mainnet rules refuse a test network's easy target that a test network's rules take", async (t) => {
  const chain = regtestChain(5);
  t.ok(await read(nodeOf(chain).node, "test", 1, 4));
  const checkpoint = { height: 0, hash: chain[0]!.hash, source: "the test's block 0" };
  t.match(await read(nodeOf(chain).node, "mainnet", 1, 4, checkpoint).catch((e: unknown) => e), { name: "BlockRefused", check: "proof_of_work", height: 1, message: /easier target than the network allows/ });
});

