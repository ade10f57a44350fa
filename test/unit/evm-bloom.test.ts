// A block's logs bloom as the EVM watcher tests it: the Yellow Paper's M3:2048 (checked against
// go-ethereum's own vector), and the rule that reads a block's token logs again when its bloom
// says the range's answer left a watched transfer out (evm-coverage.ts), against a fake node that
// counts what it is asked.
import t from "tap";
import { keccak256, stringToBytes, toHex } from "viem";
import { addressTopic, bloomBits, bloomCovers, bloomHas, bloomOf, parseBloom } from "../../services/watcher/evm-bloom.ts";
import { coveredTransfers } from "../../services/watcher/evm-coverage.ts";
import type { EvmBlock, EvmNode, TokenTransfer } from "../../services/watcher/evm-node.ts";
import { EvmWatched } from "../../services/watcher/evm-source.ts";
import { BlockReadError } from "../../services/watcher/read-parts.ts";

const usdc = "0x1c7d4b196cb0c7b01d743fbc6116a902379c7238";
const other = "0x00000000000000000000000000000000000c0ffe";
const payee = "0x00000000000000000000000000000000000000a1";
const payer = "0x00000000000000000000000000000000000000b0";
const transferTopic = "0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef";
const approvalTopic = "0x8c5be1e5ebec7d5bc17f53f1c7b5d48c79e7ba9d58b4186d8ac51ce9dd3edb5d";
const hex = (b: Uint8Array) => toHex(b);

t.test("M3:2048 as go-ethereum builds it: 100 items give its bloom, bit for bit", async (t) => {
  const items = Array.from({ length: 100 }, (_, i) => stringToBytes(`xxxxxxxxxx data ${i} yyyyyyyyyyyyyy`));
  const bloom = bloomOf(items.map((item) => ({ address: toHex(item), topics: [] })));
  t.equal(keccak256(bloom), "0xc8d3ca65cdb4874300a9e39475508f23ed6da09fdbc487f89a2dcf50b09eb263", "go-ethereum's TestBloomExtensively");
  const small = bloomOf(["testtest", "test", "hallo", "other"].map((w) => ({ address: toHex(w), topics: [] })));
  t.ok(["testtest", "test", "hallo", "other"].every((w) => bloomHas(small, bloomBits(stringToBytes(w)))), "what was added tests true");
  t.notOk(["tes", "lo"].some((w) => bloomHas(small, bloomBits(stringToBytes(w)))), "its TestBloom negatives test false");
});

t.test("an item's bits: the low 11 bits of its hash's first three pairs of bytes; bit 0 the last byte's lowest", async (t) => {
  // keccak256("") = c5d2 4601 86f7 …: 0x5d2 = 1490, 0x601, 0x6f7.
  t.same(bloomBits(new Uint8Array()), [0x5d2, 0x601, 0x6f7]);
  const one = bloomOf([{ address: "0x", topics: [] }]);
  t.equal(one[255 - (0x5d2 >> 3)], 1 << (0x5d2 & 7), "bit 1490: byte 255 - 186, bit 2");
  t.equal(one.filter((b) => b !== 0).length, 3, "three bits in three bytes");
});

t.test("a log's address and topics; a bloom parsed only when it is 256 bytes; covering", async (t) => {
  const log = { address: usdc, topics: [transferTopic, addressTopic(payer), addressTopic(payee)] };
  const bloom = bloomOf([log]);
  t.equal(addressTopic("0x00000000000000000000000000000000000000A1"), `0x${"0".repeat(62)}a1`, "an address as a topic: 32 bytes, lowercase");
  t.ok([usdc, ...log.topics].every((x) => bloomHas(bloom, bloomBits(x as `0x${string}`))), "the address and every topic");
  t.notOk(bloomHas(bloom, bloomBits(other)), "not another contract");
  t.same(parseBloom(hex(bloom)), bloom, "read back");
  t.equal(parseBloom("0x00"), undefined, "too short");
  t.equal(parseBloom(`0x${"zz".repeat(256)}`), undefined, "not hex");
  t.equal(parseBloom(undefined), undefined, "none");
  t.ok(bloomCovers(bloomOf([log, { address: other, topics: [] }]), bloom), "more logs cover fewer");
  t.notOk(bloomCovers(new Uint8Array(256), bloom), "no logs cover none of them");
});

t.test("the watched addresses a bloom may hold as a Transfer's recipient", async (t) => {
  const w = new EvmWatched();
  w.add(payee.toUpperCase().replace("0X", "0x"));
  w.add(payer);
  const bloom = bloomOf([{ address: usdc, topics: [transferTopic, addressTopic(other), addressTopic(payee)] }]);
  t.same(w.inBloom(bloom), [payee], "lowercase, only the one the bloom holds");
  t.same(w.inBloom(bloom), [payee], "the same with the bits kept");
  w.clear();
  t.same(w.inBloom(bloom), [], "none once cleared");
});

const blockHash = (h: number) => `0x${h.toString(16).padStart(64, "0")}`;
const transfer = (h: number, to = payee): TokenTransfer => ({ blockHash: blockHash(h), height: h, txHash: `0x${"ab".repeat(31)}${h.toString(16).padStart(2, "0")}`, logIndex: 0, contract: usdc, to, value: 1n });
const logOf = (tr: TokenTransfer) => ({ blockHash: tr.blockHash, address: tr.contract, topics: [transferTopic, addressTopic(payer), addressTopic(tr.to)] });

/** A node whose blocks hold `logs` (by height); what it answers by hash can be changed. */
function fakeNode(logs: Record<number, { blockHash: string; address: string; topics: string[] }[]>, paid: Record<number, TokenTransfer[]>) {
  const asked = { byHash: [] as string[], all: [] as string[] };
  const answers = {
    byHash: (hash: string): TokenTransfer[] => Object.values(paid).flat().filter((x) => x.blockHash === hash),
    all: (hash: string) => Object.values(logs).flat().filter((l) => l.blockHash === hash),
  };
  const node = {
    async tokenTransfersAt(_contracts: readonly string[], hash: string) {
      asked.byHash.push(hash);
      return answers.byHash(hash);
    },
    async logsAt(hash: string) {
      asked.all.push(hash);
      return answers.all(hash);
    },
  } as unknown as EvmNode;
  const blocks = Object.keys(logs).map(Number).map((h): EvmBlock => ({ height: h, hash: blockHash(h), parentHash: blockHash(h - 1), timestamp: h, logsBloom: hex(bloomOf(logs[h] ?? [])), valueTransfers: [], fieldsHash: { hash: blockHash(h) } }));
  return { node, asked, answers, blocks };
}

function watching(...addresses: string[]) {
  const w = new EvmWatched();
  for (const a of addresses) w.add(a);
  return w;
}

t.test("every block's watched transfer in the range's answer: nothing asked again", async (t) => {
  const paid = { 2: [transfer(2)] };
  const f = fakeNode({ 1: [], 2: paid[2].map(logOf), 3: [{ blockHash: blockHash(3), address: other, topics: [transferTopic] }] }, paid);
  const got = await coveredTransfers(f.node, [usdc], f.blocks, paid[2], watching(payee));
  t.same(got, paid[2]);
  t.same(f.asked, { byHash: [], all: [] }, "no extra call");
});

t.test("a block whose bloom holds a watched transfer the range's answer left out: read again by hash, and counted", async (t) => {
  const paid = { 2: [transfer(2)], 3: [transfer(3)] };
  const f = fakeNode({ 1: [], 2: paid[2].map(logOf), 3: paid[3].map(logOf) }, paid);
  // The range answered block 3 only (a replica behind for block 2).
  const got = await coveredTransfers(f.node, [usdc], f.blocks, paid[3], watching(payee));
  t.same(got.map((x) => x.height).sort(), [2, 3]);
  t.same(f.asked, { byHash: [blockHash(2)], all: [] }, "one call, for that block");
});

t.test("the node still answers nothing by hash for it: the read fails, naming the block", async (t) => {
  const paid = { 2: [transfer(2)] };
  const f = fakeNode({ 1: [], 2: paid[2].map(logOf) }, paid);
  f.answers.byHash = () => [];
  f.answers.all = () => [];
  const err = await coveredTransfers(f.node, [usdc], f.blocks, [], watching(payee)).then(() => undefined, (e: unknown) => e);
  t.type(err, BlockReadError);
  t.equal((err as BlockReadError).height, 2);
  t.match((err as Error).message, /^block 2 could not be read: its logs did not come back/);
});

t.test("a bloom false positive never holds up the chain", async (t) => {
  // USDC's Approval to the payee, and another token's Transfer: the bloom holds USDC, Transfer and
  // the payee, and no USDC Transfer pays the payee.
  const logs = [{ blockHash: blockHash(2), address: usdc, topics: [approvalTopic, addressTopic(payer), addressTopic(payee)] }, { blockHash: blockHash(2), address: other, topics: [transferTopic] }];
  const f = fakeNode({ 2: logs }, {});
  t.same(await coveredTransfers(f.node, [usdc], f.blocks, [], watching(payee)), [], "accepted: the block's logs account for its whole bloom");
  t.same(f.asked, { byHash: [blockHash(2)], all: [blockHash(2)] }, "two calls: its token logs, then all its logs");

  // A USDC Transfer to someone else by hash: the node has the block's logs; the payee's bits were a false positive.
  const elsewhere = transfer(2, other);
  const g = fakeNode({ 2: [...logs, logOf(elsewhere)] }, { 2: [elsewhere] });
  t.same(await coveredTransfers(g.node, [usdc], g.blocks, [], watching(payee)), [elsewhere]);
  t.same(g.asked, { byHash: [blockHash(2)], all: [] }, "one call");
});

t.test("an answer by hash from another block, or a block without a bloom: the read fails", async (t) => {
  const paid = { 2: [transfer(2)] };
  const f = fakeNode({ 2: paid[2].map(logOf) }, paid);
  f.answers.byHash = () => [transfer(7)];
  await t.rejects(coveredTransfers(f.node, [usdc], f.blocks, [], watching(payee)), { name: "BlockReadError", message: /logs of another block/ });
  const g = fakeNode({ 2: [] }, {});
  const blocks = g.blocks.map((b) => ({ ...b, logsBloom: undefined }));
  await t.rejects(coveredTransfers(g.node, [usdc], blocks, [], watching(payee)), { name: "BlockReadError", message: /no logs bloom/ });
});
