// The EVM source's reads in parts, against a fake node (no network) that answers as viem's HTTP
// transport does: the requests made in one turn of the event loop go out as one batch, one
// response, and a response over the cap fails every request of the batch with
// ResponseBodyTooLargeError. Blocks of a thousand transactions (mainnet's, Polygon's) make 20 of
// them more than one response carries: the read is split until its parts fit, one block at worst,
// and a block that cannot be read on its own is named.
import fc from "fast-check";
import t from "tap";
import { HttpRequestError, InvalidInputRpcError, InvalidParamsRpcError, LimitExceededRpcError, ResponseBodyTooLargeError, RpcRequestError, TimeoutError } from "viem";
import { chainAssetsIn } from "../../services/vocabulary/assets.ts";
import { addressTopic, bloomOf } from "../../services/watcher/evm-bloom.ts";
import type { EvmBlock, EvmNode, TokenTransfer } from "../../services/watcher/evm-node.ts";
import { evmSource, EvmWatched, tooLarge } from "../../services/watcher/evm-source.ts";
import { BlockReadError } from "../../services/watcher/read-parts.ts";

const chainAssets = chainAssetsIn("ethereum", "test");
const usdc = (chainAssets.find((a) => a.info.asset === "USDC")?.contract as string).toLowerCase();
const payee = "0x00000000000000000000000000000000000000a1";
const transferTopic = "0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef";
const noLogs = `0x${"00".repeat(256)}`;
/** The bloom of a block whose one log is a USDC Transfer to `payee`. */
const paidBloom = `0x${Buffer.from(bloomOf([{ address: usdc, topics: [transferTopic, addressTopic("0x00000000000000000000000000000000000000b0"), addressTopic(payee)] }])).toString("hex")}`;
const hashOf = (height: number, fork = 0) => `0x${fork.toString(16).padStart(8, "0")}${height.toString(16).padStart(56, "0")}`;

interface FakeChain {
  /** Bytes of each block as a node writes it with its transactions (default 1 000 transactions of ~1.1 KB). */
  size?: (height: number) => number;
  /** The most bytes one response may carry (viem: 10 MiB). */
  cap?: number;
  head: number;
  /** Value transfers to `payee` (native) and USDC Transfer logs to it, by height. */
  native?: number[];
  tokens?: number[];
  /** Heights whose value transfer to `payee` reverted (its receipt's status 0). */
  reverted?: number[];
  /** Logs over more than this many blocks are refused as too many results (a provider's limit). */
  logRange?: number;
}

/** A node over a fake chain: block and log requests of one turn of the event loop are one batch, one response. */
function fakeNode(c: FakeChain) {
  const size = c.size ?? (() => 1_100_000);
  const cap = c.cap ?? 10_485_760;
  let queue: { height: number; resolve: (b: EvmBlock | undefined) => void; reject: (e: unknown) => void }[] = [];
  const batches: number[][] = [];
  const logReads: [number, number][] = [];
  let fork = 0;
  let down = false;
  const block = (h: number): EvmBlock => ({
    height: h,
    hash: hashOf(h, fork),
    parentHash: hashOf(h - 1, fork),
    timestamp: 1_700_000_000 + h * 12,
    logsBloom: c.tokens?.includes(h) ? paidBloom : noLogs,
    valueTransfers: [{ txHash: hashOf(h, 0xf1), to: "0x00000000000000000000000000000000000f1117", value: 1n }, ...(c.native?.includes(h) ? [{ txHash: hashOf(h, 0xee), to: payee, value: 10n ** 17n }] : [])],
    // A node whose header fields hash to the hash it names (evm-header.ts is tested on its own).
    fieldsHash: { hash: hashOf(h, fork) },
  });
  function flush() {
    const batch = queue;
    queue = [];
    batches.push(batch.map((r) => r.height));
    const bytes = batch.reduce((n, r) => n + size(r.height), 0);
    for (const r of batch) {
      if (down) r.reject(new HttpRequestError({ url: "http://node.test", details: "connect ECONNREFUSED" }));
      else if (bytes > cap) r.reject(new ResponseBodyTooLargeError({ maxSize: cap, size: bytes }));
      else r.resolve(r.height > c.head ? undefined : block(r.height));
    }
  }
  const node: Pick<EvmNode, "block" | "tokenTransfers" | "headHeight" | "receipt"> = {
    // Each token payment's transaction logs something else first: its Transfer is the receipt's second log.
    async receipt(txHash) {
      const heights = [...Array(c.head + 1).keys()];
      const token = heights.find((x) => hashOf(x, 0xab) === txHash);
      if (token !== undefined) return { blockHash: hashOf(token, fork), success: true, logIndexes: [2, 3] };
      const native = heights.find((x) => hashOf(x, 0xee) === txHash);
      return native === undefined ? undefined : { blockHash: hashOf(native, fork), success: !c.reverted?.includes(native), logIndexes: [] };
    },
    headHeight: async () => c.head,
    block(height) {
      return new Promise((resolve, reject) => {
        queue.push({ height, resolve, reject });
        if (queue.length === 1) setImmediate(flush);
      });
    },
    async tokenTransfers(contracts, from, to) {
      logReads.push([from, to]);
      if (down) throw new HttpRequestError({ url: "http://node.test", details: "connect ECONNREFUSED" });
      if (c.logRange !== undefined && to - from + 1 > c.logRange) throw new LimitExceededRpcError(new Error("query returned more than 10000 results"));
      const out: TokenTransfer[] = [];
      for (let h = from; h <= Math.min(to, c.head); h++) {
        if (c.tokens?.includes(h) && contracts.includes(usdc)) out.push({ blockHash: hashOf(h, fork), height: h, txHash: hashOf(h, 0xab), logIndex: 3, contract: usdc, to: payee, value: 5_000_000n });
      }
      return out;
    },
  };
  return {
    node: node as unknown as EvmNode,
    batches,
    logReads,
    reorg: () => void fork++,
    setDown: (d: boolean) => void (down = d),
  };
}

function source(f: ReturnType<typeof fakeNode>) {
  const watched = new EvmWatched();
  watched.add(payee);
  return evmSource(f.node, chainAssets, watched);
}

t.test("20 blocks of 1,000 transactions: read in parts that fit, every block in order with its outputs", async (t) => {
  const f = fakeNode({ head: 100, native: [7, 19], tokens: [7, 12] });
  const read = await source(f).read(1, 20);
  t.ok(read);
  t.same(read?.blocks.map((b) => b.height), Array.from({ length: 20 }, (_, i) => 1 + i), "all 20, in order");
  t.same(read?.blocks.map((b) => b.parentHash === hashOf(b.height - 1)), Array(20).fill(true), "linked by parent hash");
  const outputs = read?.outputs.map((o) => [o.blockHeight, o.asset, o.amount, o.outputIndex]).sort((a, b) => Number(a[0]) - Number(b[0]) || Number(a[3]) - Number(b[3]));
  t.same(outputs, [[7, "ETH", "0.1", 0], [7, "USDC", "5", 2], [12, "USDC", "5", 2], [19, "ETH", "0.1", 0]], "the payments inside the backlog, a token output known by its place among its transaction's logs");
  // 20 × 1.1 MB fails, 10 fails, then 5 at a time (5.5 MB) for the rest: never more than fits.
  t.same(f.batches.map((b) => b.length), [20, 10, 5, 5, 5, 5]);
  t.same(f.batches.slice(2).flat(), Array.from({ length: 20 }, (_, i) => 1 + i), "each block read once it fits");
});

t.test("the parts are read one after another: a client that batches what is asked together cannot merge them", async (t) => {
  const f = fakeNode({ head: 100, cap: 1_100_000 });
  const read = await source(f).read(1, 8);
  t.same(read?.blocks.length, 8);
  t.ok(f.batches.slice(-8).every((b) => b.length === 1), "one block per response at worst");
});

t.test("logs over a range too large for one answer are split too", async (t) => {
  const f = fakeNode({ head: 100, tokens: [3, 9, 18], logRange: 4, size: () => 1000 });
  const read = await source(f).read(1, 20);
  t.same(read?.outputs.map((o) => o.blockHeight).sort((a, b) => a - b), [3, 9, 18]);
  t.same(f.logReads.slice(0, 3), [[1, 20], [1, 10], [1, 5]]);
  t.ok(f.logReads.slice(3).every(([a, b]) => b - a + 1 <= 4), "then parts the node accepts");
  t.same(f.batches, [Array.from({ length: 20 }, (_, i) => 1 + i)], "the blocks fitted in one response");
});

t.test("a block too big for any read is named; nothing after it is returned; the caller retries", async (t) => {
  const f = fakeNode({ head: 100, size: (h) => (h === 13 ? 11_000_000 : 1_100_000) });
  const s = source(f);
  const err = await s.read(1, 20).then(() => undefined, (e: unknown) => e);
  t.type(err, BlockReadError);
  t.equal((err as BlockReadError).height, 13);
  t.equal((err as Error).message, "block 13 could not be read: HTTP response body exceeded the size limit.");
  t.type((err as Error).cause, ResponseBodyTooLargeError, "the node's error kept as the cause");
  t.same(f.batches.at(-1), [13], "it came down to the block alone, and stopped there");
  await t.rejects(s.read(13, 13), { message: /^block 13 could not be read: / }, "on its own too (following the head)");
});

t.test("the node down: the failure as it is, not split into more requests", async (t) => {
  const f = fakeNode({ head: 100 });
  f.setDown(true);
  await t.rejects(source(f).read(1, 20), { name: "HttpRequestError" });
  // The logs, asked beside the blocks, fail first; the blocks' request goes out on the next turn.
  await new Promise((resolve) => setImmediate(resolve));
  t.same(f.batches.map((b) => b.length), [20], "one request for the blocks");
  t.same(f.logReads, [[1, 20]], "and one for the logs");
  f.setDown(false);
  t.equal((await source(f).read(1, 20))?.blocks.length, 20, "read once it is back");
});

t.test("past the head in a later part, or the chain changed between parts: undefined (the next step sorts it out)", async (t) => {
  const f = fakeNode({ head: 15 });
  t.equal(await source(f).read(1, 20), undefined, "block 16 is not there yet");

  // Logs of another branch than the blocks read: the chain changed under the read (the logs,
  // asked beside the blocks, answered before it changed; the blocks after).
  const g = fakeNode({ head: 100, tokens: [5], size: () => 1000 });
  const s = source(g);
  const node = g.node;
  const transfersOf = node.tokenTransfers.bind(node);
  node.tokenTransfers = async (contracts, from, to) => {
    const logs = await transfersOf(contracts, from, to);
    g.reorg();
    return logs;
  };
  t.equal(await s.read(1, 20), undefined);
});

t.test("a native transfer counts only once its receipt says it succeeded; no receipt: the chain changed under the read", async (t) => {
  const f = fakeNode({ head: 100, native: [3, 5], reverted: [3], size: () => 1000 });
  const read = await source(f).read(1, 6);
  t.same(read?.outputs.map((o) => [o.blockHeight, o.asset]), [[5, "ETH"]], "the reverted one at 3 is not an output");
  const g = fakeNode({ head: 100, native: [4], size: () => 1000 });
  g.node.receipt = async () => undefined;
  t.equal(await source(g).read(1, 6), undefined);
});

t.test("any chain of blocks and any cap: the read in parts is the read in one, or names the first block over the cap", async (t) => {
  await fc.assert(
    fc.asyncProperty(
      fc.array(fc.integer({ min: 1, max: 12 }), { minLength: 1, maxLength: 20 }),
      fc.integer({ min: 1, max: 40 }),
      fc.uniqueArray(fc.integer({ min: 1, max: 20 }), { maxLength: 5 }),
      async (sizes, cap, paid) => {
        const n = sizes.length;
        const size = (h: number) => sizes[h - 1] ?? 0;
        const all = fakeNode({ head: 100, size, cap: 1_000, native: paid, tokens: paid });
        const parts = fakeNode({ head: 100, size, cap, native: paid, tokens: paid });
        const whole = await source(all).read(1, n);
        const first = sizes.findIndex((s) => s > cap);
        const got = await source(parts).read(1, n).then((r) => r, (e: unknown) => e);
        if (first >= 0) return got instanceof BlockReadError && got.height === first + 1;
        return JSON.stringify(got) === JSON.stringify(whole);
      },
    ),
    { numRuns: 200 },
  );
  t.pass("200 chains");
});

t.test("what is a size failure: splitting helps", async (t) => {
  t.ok(tooLarge(new ResponseBodyTooLargeError({ maxSize: 10, size: 11 })), "an answer over viem's cap");
  t.ok(tooLarge(new LimitExceededRpcError(new Error("query returned more than 10000 results"))), "a node's -32005 limit");
  t.ok(tooLarge(new TimeoutError({ body: {}, url: "http://node.test" })), "an answer too slow to come");
  const refused = (code: number, message: string) => new RpcRequestError({ body: {}, url: "http://node.test", error: { code, message } });
  t.ok(tooLarge(new InvalidParamsRpcError(refused(-32602, "Log response size exceeded. You can make eth_getLogs requests with up to a 2K block range"))), "a provider's words (Alchemy)");
  t.ok(tooLarge(new InvalidInputRpcError(refused(-32000, "exceed maximum block range: 5000"))), "a provider's words (BSC, Polygon)");
  t.ok(tooLarge(refused(-32602, "eth_getLogs is limited to a 10,000 range")), "a provider's words (QuickNode)");
  t.ok(tooLarge(new Error("outer", { cause: new ResponseBodyTooLargeError({ maxSize: 10, size: 11 }) })), "found as a cause");
  t.notOk(tooLarge(new HttpRequestError({ url: "http://node.test", status: 429, details: "Too Many Requests" })), "a rate limit is not a size");
  t.notOk(tooLarge(new LimitExceededRpcError(new Error("project ID request rate exceeded"))), "nor Infura's -32005 rate limit");
  t.notOk(tooLarge(new HttpRequestError({ url: "http://node.test", details: "connect ECONNREFUSED" })), "nor an outage");
  t.notOk(tooLarge(new InvalidParamsRpcError(refused(-32602, "invalid argument 0: hex string without 0x prefix"))), "nor another refusal");
  t.notOk(tooLarge("a string"), "nor what is not an error");
});
