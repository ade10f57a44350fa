// The header chain a bitcoin watcher keeps (services/watcher/bitcoin-headers.ts): from a
// compiled-in checkpoint up, every header read from its bytes, linked by hash, its bits by
// mainnet's retarget rule, its work summed here. Against 2 057 real contiguous mainnet headers
// (824 544–826 600, across the retarget at 826 560: test/fixtures/bitcoin/headers-824544-826600.md
// says where they come from), with expected hashes and work computed here with node:crypto and
// plain arithmetic, never by the code under test; and against mined regtest-difficulty chains for
// reorgs, forks below the checkpoint and a node whose chain moves while it is read.
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import t from "tap";
import { HeaderChain, mainnetCheckpoint, type Checkpoint } from "../../services/watcher/bitcoin-headers.ts";
import type { BitcoinNode } from "../../services/watcher/bitcoin-node.ts";
import { mine } from "../helpers/bitcoin-blocks.ts";

const first = 824_544;
const raw = readFileSync(new URL("../fixtures/bitcoin/headers-824544-826600.bin", import.meta.url));
const sha256d = (b: Buffer) => createHash("sha256").update(createHash("sha256").update(b).digest()).digest();
/** The real headers by height: hash (as RPC writes it), the 80 bytes as hex, bits. */
const real = Array.from({ length: raw.length / 80 }, (_, i) => {
  const bytes = raw.subarray(i * 80, i * 80 + 80);
  return { height: first + i, hash: Buffer.from(sha256d(bytes)).reverse().toString("hex"), hex: bytes.toString("hex"), bits: bytes.readUInt32LE(72) };
});
const at = (height: number) => real[height - first]!;

/** Work of a compact target, from first principles: 2^256 / (mantissa · 256^(exponent − 3) + 1). */
const work = (bits: number) => (1n << 256n) / ((BigInt(bits & 0xffffff) << BigInt(8 * ((bits >>> 24) - 3))) + 1n);

interface Served {
  height: number;
  hash: string;
  hex: string;
}

/** A node as Bitcoin Core answers: getblockhash past the head is undefined (code -8), getblockheader <hash> false the 80 bytes. */
function nodeOf(chain: () => readonly Served[]) {
  const calls = { hashesAt: 0, rawHeaders: 0, heights: 0 };
  const node = {
    hashesAt: async (hs: readonly number[]) => {
      calls.hashesAt++;
      calls.heights += hs.length;
      const c = chain();
      const base = c[0]!.height;
      return hs.map((h) => c[h - base]?.hash);
    },
    rawHeaders: async (hashes: readonly string[]) => {
      calls.rawHeaders++;
      return hashes.map((h) => chain().find((x) => x.hash === h)?.hex);
    },
  } as unknown as BitcoinNode;
  return { node, calls };
}

const checkpoint: Checkpoint = { height: 824_600, hash: at(824_600).hash, source: "the test's checkpoint" };

t.test("real mainnet headers: linked from the checkpoint across a retarget, work summed from their bits, read in batches", async (t) => {
  t.equal(at(826_560).bits, 0x1704005a, "826 560 retargets");
  t.equal(at(826_559).bits, 0x1703d869);
  const { node, calls } = nodeOf(() => real);
  const chain = new HeaderChain(node, checkpoint, "mainnet");
  const hashes = await chain.hashes(824_601, 826_600);
  t.same(hashes, real.filter((h) => h.height > checkpoint.height).map((h) => h.hash));
  let expected = 0n;
  for (let h = 824_601; h <= 826_600; h++) expected += work(at(h).bits);
  t.equal(chain.workAt(826_600), expected, "the work above the checkpoint, summed from each header's bits");
  t.equal(chain.workAt(824_600), 0n, "the checkpoint is the base");
  t.equal(chain.workAt(826_560) - chain.workAt(826_559), work(0x1704005a), "the retarget block's work is its new target's");
  t.ok(calls.hashesAt <= 6 && calls.rawHeaders <= 3, `2 057 headers in a few batches (${calls.hashesAt} getblockhash, ${calls.rawHeaders} getblockheader batches)`);
  // Reading on asks for the kept tip once and the new heights.
  const before = { ...calls };
  t.same(await chain.hashes(826_600, 826_600), [at(826_600).hash]);
  t.equal(calls.rawHeaders, before.rawHeaders, "a block already kept: no header read again");
});

t.test("Bitcoin Core 30.0's checkpoint is compiled in", async (t) => {
  t.same({ height: mainnetCheckpoint.height, hash: mainnetCheckpoint.hash }, { height: 910_000, hash: "0000000000000000000108970acb9522ffd516eae17acddcb1bd16469194a821" });
  const chain = new HeaderChain(nodeOf(() => real).node, mainnetCheckpoint, "mainnet");
  await t.rejects(chain.hashes(826_000, 826_001), /block 826000 is at or below Bitcoin Core 30.0's assumeutxo block \(910000\)/);
});

t.test("a node whose chain does not pass through the checkpoint is refused, named", async (t) => {
  const other: Checkpoint = { ...checkpoint, hash: at(824_601).hash };
  const err = await new HeaderChain(nodeOf(() => real).node, other, "mainnet").hashes(824_601, 824_700).catch((e: unknown) => e);
  t.match(err, { name: "BlockRefused", check: "checkpoint", height: 824_600, message: /it is not the test's checkpoint/ });
});

t.test("a header that does not hash to the hash named, or whose bits were changed, is refused", async (t) => {
  // The node names the real hash but serves other bytes (block 824 700's nonce changed).
  const lied = real.map((h) => (h.height === 824_700 ? { ...h, hex: h.hex.slice(0, 152) + "00000000" } : h));
  const err = await new HeaderChain(nodeOf(() => lied).node, checkpoint, "mainnet").hashes(824_601, 824_800).catch((e: unknown) => e);
  t.match(err, { name: "BlockRefused", check: "header", height: 824_700, message: /bytes hash to [0-9a-f]{64}, not the hash the node named/ });
  // A consistent liar: the retarget block's bits set to the old ones, its hash the one its bytes give (no work behind it).
  const bytes = Buffer.from(at(826_560).hex, "hex");
  bytes.writeUInt32LE(0x1703d869, 72);
  const forged = { height: 826_560, hash: Buffer.from(sha256d(bytes)).reverse().toString("hex"), hex: bytes.toString("hex") };
  const liar: Served[] = [...real.filter((h) => h.height < 826_560), forged];
  const refused = await new HeaderChain(nodeOf(() => liar).node, checkpoint, "mainnet").hashes(826_500, 826_560).catch((e: unknown) => e);
  t.match(refused, { name: "BlockRefused", check: "proof_of_work", height: 826_560, message: /above the target/ });
});

/** A regtest-difficulty chain of `length` blocks above `below`'s (or from block 0), tagged so two chains differ. */
function chainOf(length: number, tag: number, below: Served[] = []): Served[] {
  const out = [...below];
  for (let h = out.length; h < length; h++) {
    const b = mine({ height: h, previousblockhash: out[h - 1]?.hash, time: 1_700_000_000 + h * 600 + tag, tx: [{ tag: h * 1000 + tag, vout: [] }] });
    out.push({ height: h, hash: b.hash, hex: b.hex.slice(0, 160) });
  }
  return out;
}

t.test("reorgs above the checkpoint: the forked-off headers leave, the new branch is read and its work summed anew", async (t) => {
  const a = chainOf(21, 1);
  const b = chainOf(26, 2, a.slice(0, 13));
  let served = a;
  const { node } = nodeOf(() => served);
  const genesis: Checkpoint = { height: 0, hash: a[0]!.hash, source: "the test's block 0" };
  const chain = new HeaderChain(node, genesis, "test");
  t.same(await chain.hashes(1, 20), a.slice(1).map((h) => h.hash));
  const perBlock = work(0x207fffff);
  t.equal(chain.workAt(20), 20n * perBlock);
  served = b;
  t.same(await chain.hashes(10, 25), b.slice(10, 26).map((h) => h.hash), "the new branch from below the fork");
  t.equal(chain.workAt(25), 25n * perBlock);
  t.equal(chain.tip, 25);
  // Back to a shorter branch: the kept tip above the node's head leaves as soon as a read reaches it.
  served = a.slice(0, 19);
  t.same(await chain.hashes(15, 18), a.slice(15, 19).map((h) => h.hash));
  t.equal(chain.tip, 18, "block 19 of the other branch left");
});

t.test("a fork below the checkpoint is refused; a chain that moves while read is read again", async (t) => {
  const a = chainOf(12, 1);
  const c = chainOf(12, 3, a.slice(0, 3));
  let served = a;
  const cp: Checkpoint = { height: 5, hash: a[5]!.hash, source: "the test's block 5" };
  const chain = new HeaderChain(nodeOf(() => served).node, cp, "test");
  t.ok(await chain.hashes(6, 11));
  served = c;
  t.match(await chain.hashes(6, 11).catch((e: unknown) => e), { name: "BlockRefused", check: "checkpoint", message: /does not pass through the test's block 5/ });
  // Honest again: read from the checkpoint anew.
  served = a;
  t.same(await chain.hashes(6, 11), a.slice(6).map((h) => h.hash));

  // The node switches branches between the heights it names and the headers it serves.
  const b = chainOf(16, 4, a.slice(0, 8));
  let calls = 0;
  const moving = nodeOf(() => (calls++ === 0 ? a : b)).node;
  const again = new HeaderChain(moving, cp, "test");
  t.equal(await again.hashes(6, 11), undefined, "undefined: the chain changed under the read");
  t.same(await again.hashes(6, 15), b.slice(6).map((h) => h.hash), "read again: the new branch");
});

t.test("past the node's head: undefined, nothing kept above it", async (t) => {
  const a = chainOf(8, 1);
  const chain = new HeaderChain(nodeOf(() => a).node, { height: 0, hash: a[0]!.hash, source: "block 0" }, "test");
  t.equal(await chain.hashes(5, 9), undefined);
  t.same(await chain.hashes(5, 7), a.slice(5).map((h) => h.hash));
});
