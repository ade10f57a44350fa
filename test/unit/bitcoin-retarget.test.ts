// Mainnet's retarget rule (mainnetNextBits in services/watcher/bitcoin-checks.ts) across real
// 2016-block boundaries: real mainnet headers (test/fixtures/bitcoin/retargets.json says where
// each came from) and Bitcoin Core's own pow_tests cases. Every expected value is the chain's
// (the bits the real boundary block carries) or Core's; the headers' bytes and hashes are checked
// here with node:crypto, never with the code under test.
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import t from "tap";
import { checkHeader, mainnetNextBits, mainnetPowLimit, type HeaderFields } from "../../services/watcher/bitcoin-checks.ts";

type Header = Required<Omit<HeaderFields, "previousblockhash">> & { previousblockhash: string; raw: string };
interface Boundary {
  height: number;
  note: string;
  sources: string[];
  periodFirst: Header;
  parent: Header;
  block: Header;
  /** The block after the boundary, where a source gives it: its previous hash names the boundary block. */
  next?: { height: number; previousblockhash: string; bits: string; source: string };
}
interface CoreCase {
  name: string;
  boundary: number;
  periodFirstHeight: number;
  periodFirstTime: number;
  parentHeight: number;
  parentTime: number;
  parentBits: string;
  expectedBits: string;
  note: string;
}
const fixture = JSON.parse(readFileSync(new URL("../fixtures/bitcoin/retargets.json", import.meta.url), "utf8")) as {
  _source: string;
  boundaries: Boundary[];
  core: CoreCase[];
};

const twoWeeks = 14 * 24 * 60 * 60;
const bitsOf = (hex: string): number => Number.parseInt(hex, 16);
const sha256d = (b: Buffer): Buffer => createHash("sha256").update(createHash("sha256").update(b).digest()).digest();
/** The header's 80 bytes written here from its fields (little-endian integers, hashes in internal byte order). */
const serialize = (h: Header): Buffer => {
  const out = Buffer.alloc(80);
  out.writeUInt32LE(h.version >>> 0, 0);
  Buffer.from(h.previousblockhash, "hex").reverse().copy(out, 4);
  Buffer.from(h.merkleroot, "hex").reverse().copy(out, 36);
  out.writeUInt32LE(h.time, 68);
  out.writeUInt32LE(bitsOf(h.bits), 72);
  out.writeUInt32LE(h.nonce, 76);
  return out;
};
const hashOfRaw = (raw: string): string => Buffer.from(sha256d(Buffer.from(raw, "hex"))).reverse().toString("hex");

t.test("the fixture is what its source says: five boundaries, each header 80 bytes whose fields and hash are their own", async (t) => {
  t.match(fixture._source, /ckb-bitcoin-spv-testdata/);
  t.match(fixture._source, /pow_tests\.cpp/);
  t.same(
    fixture.boundaries.map((b) => b.height),
    [2016, 32256, 68544, 552384, 826560],
  );
  for (const b of fixture.boundaries) {
    t.equal(b.height % 2016, 0, `${b.height} is a retarget height`);
    t.equal(b.periodFirst.height, b.height - 2016, `${b.height}: the period's first block is 2016 below`);
    t.equal(b.parent.height, b.height - 1);
    t.equal(b.block.height, b.height);
    t.equal(b.sources.length, 3);
    for (const h of [b.periodFirst, b.parent, b.block]) {
      t.equal(h.raw.length, 160, `block ${h.height}: 80 bytes`);
      t.equal(serialize(h).toString("hex"), h.raw, `block ${h.height}: its fields are its bytes`);
      t.equal(hashOfRaw(h.raw), h.hash, `block ${h.height}: its bytes hash to its hash (node:crypto)`);
    }
    // The chain links: the boundary block names its parent's hash.
    t.equal(b.block.previousblockhash, b.parent.hash, `${b.height}: block names its parent`);
    if (b.next) {
      t.equal(b.next.height, b.height + 1);
      t.equal(b.next.previousblockhash, b.block.hash, `${b.height}: the next block (${b.next.source.split(" ")[0]}) names the boundary block`);
    }
  }
});

t.test("the real headers pass the header checks: they hash to their hash and meet their bits, within mainnet's powLimit", async (t) => {
  for (const b of fixture.boundaries) {
    for (const h of [b.periodFirst, b.parent, b.block]) {
      t.doesNotThrow(() => checkHeader(h, mainnetPowLimit), `block ${h.height} (bits ${h.bits}) passes`);
    }
  }
});

t.test("at each real boundary, the rule gives the bits the real block carries", async (t) => {
  for (const b of fixture.boundaries) {
    const parent = { bits: bitsOf(b.parent.bits), time: b.parent.time };
    const got = mainnetNextBits(b.height, parent, b.periodFirst.time);
    t.equal(got.toString(16).padStart(8, "0"), b.block.bits, `${b.height}: ${b.parent.bits} -> ${b.block.bits} (${b.note})`);
    // Not knowing the period's first time at a retarget height is an error, not a guess.
    t.throws(() => mainnetNextBits(b.height, parent), new RegExp(`the time of block ${b.periodFirst.height} is needed`));
  }
});

t.test("one height past a boundary, the rule gives the parent's bits (the period's start no longer matters)", async (t) => {
  for (const b of fixture.boundaries) {
    const parent = { bits: bitsOf(b.block.bits), time: b.block.time };
    t.equal(mainnetNextBits(b.height + 1, parent), bitsOf(b.block.bits), `${b.height + 1}: ${b.block.bits}`);
    t.equal(mainnetNextBits(b.height + 1, parent, b.periodFirst.time), bitsOf(b.block.bits), `${b.height + 1}: a period start given is ignored`);
    if (b.next) t.equal(mainnetNextBits(b.next.height, parent), bitsOf(b.next.bits), `${b.next.height}: the real next block's bits`);
  }
});

t.test("a boundary block keeping the previous period's bits is refused by the rule", async (t) => {
  for (const b of fixture.boundaries) {
    const expected = mainnetNextBits(b.height, { bits: bitsOf(b.parent.bits), time: b.parent.time }, b.periodFirst.time);
    if (b.parent.bits === b.block.bits) {
      // 2016: the period was slower than two weeks, the target would pass powLimit and stays at it.
      t.equal(b.height, 2016);
      t.ok(b.parent.time - b.periodFirst.time > twoWeeks, "2016: the first period took longer than two weeks");
      t.equal(b.block.bits, "1d00ffff", "2016: capped at difficulty 1");
      continue;
    }
    // The same header with the previous period's bits: the rule's bits are not those.
    const stale = { ...b.block, bits: b.parent.bits };
    t.not(expected, bitsOf(stale.bits), `${b.height}: bits ${stale.bits} are not what the rule gives`);
    // Nor does such a header hash to the real block's hash: it is a different header.
    t.not(hashOfRaw(serialize(stale).toString("hex")), b.block.hash);
    t.throws(() => checkHeader(stale, mainnetPowLimit), { name: "BlockRefused", check: "header" });
  }
});

t.test("the clamps show in the real data: 68544's period took under a quarter of two weeks, 552384's over two weeks", async (t) => {
  const at = (h: number): Boundary => fixture.boundaries.find((b) => b.height === h) as Boundary;
  const fast = at(68544);
  t.ok(fast.parent.time - fast.periodFirst.time < twoWeeks / 4, "68544: clamped to 4x harder");
  // Bits 1c05a3f4 to 1c0168fd: the mantissa a quarter (0x05a3f4 / 4 = 0x0168fd), the exponent the same.
  t.equal(bitsOf(fast.parent.bits) & 0xffffff, 0x05a3f4);
  t.equal(bitsOf(fast.block.bits) & 0xffffff, 0x0168fd);
  t.equal(0x05a3f4 >> 2, 0x0168fd);
  const slow = at(552384);
  t.ok(slow.parent.time - slow.periodFirst.time > twoWeeks, "552384: slower than two weeks, the target rises");
  t.ok(bitsOf(slow.block.bits) > bitsOf(slow.parent.bits), "552384: same exponent, larger mantissa");
});

t.test("Bitcoin Core's pow_tests cases, including both clamps and the powLimit cap", async (t) => {
  t.same(
    fixture.core.map((c) => c.name),
    ["get_next_work", "get_next_work_pow_limit", "get_next_work_lower_limit_actual", "get_next_work_upper_limit_actual"],
  );
  for (const c of fixture.core) {
    t.equal(c.boundary, c.parentHeight + 1);
    t.equal(c.periodFirstHeight, c.boundary - 2016);
    const got = mainnetNextBits(c.boundary, { bits: bitsOf(c.parentBits), time: c.parentTime }, c.periodFirstTime);
    t.equal(got.toString(16).padStart(8, "0"), c.expectedBits, `${c.name}: ${c.note}`);
  }
  const upper = fixture.core.find((c) => c.name === "get_next_work_upper_limit_actual") as CoreCase;
  t.ok(upper.parentTime - upper.periodFirstTime > 4 * twoWeeks, "upper limit: a period over four times two weeks");
  const lower = fixture.core.find((c) => c.name === "get_next_work_lower_limit_actual") as CoreCase;
  t.ok(lower.parentTime - lower.periodFirstTime < twoWeeks / 4, "lower limit: a period under a quarter of two weeks");
});

t.test("Core's cases on real boundaries agree with the real headers (two independent sources)", async (t) => {
  let compared = 0;
  for (const c of fixture.core) {
    const b = fixture.boundaries.find((x) => x.height === c.boundary);
    if (!b) continue;
    compared++;
    t.equal(b.periodFirst.time, c.periodFirstTime, `${c.name}: block ${c.periodFirstHeight}'s time`);
    t.equal(b.parent.time, c.parentTime, `${c.name}: block ${c.parentHeight}'s time`);
    t.equal(b.parent.bits, c.parentBits, `${c.name}: block ${c.parentHeight}'s bits`);
    t.equal(b.block.bits, c.expectedBits, `${c.name}: block ${c.boundary}'s bits`);
  }
  t.equal(compared, 3, "2016, 32256 and 68544");
});
