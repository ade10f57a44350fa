import { randomBytes } from "node:crypto";
import { encodeFunctionData, getAddress, type Hex } from "viem";
import { startDevChain, tokenAbi, type DevChain } from "../../../scripts/devchain/chain.ts";
import { createInternalCredential } from "../../../services/auth/admin.ts";
import { startRpcProxy, type RpcProxy } from "../../helpers/rpc-proxy.ts";
import type { BenchContext, Scenario } from "../types.ts";
import { lastObservationId, loadWatchedIntents, recordedSince, WatcherProcess } from "./watcher-support.ts";

/**
 * The EVM watcher catching up over blocks the size of mainnet's and Polygon's: anvil behind the
 * JSON-RPC proxy of the tests, which adds 1,000 filler transactions of ~1.4 KB to every block read
 * with its transactions (about 1.4 MB of JSON a block, so 20 blocks are more than one 10 MiB
 * response). ETH and USDC payments to watched addresses in one block of ten; blocks and outputs
 * per second from the moment the watcher follows the chain until it has processed the head.
 */
const padding = 1000;
const pollMs = 500;
/** A block of `everyBlocks` carries `paymentsPerBlock` payments, half ETH (in the block's transactions), half USDC (logs). */
const everyBlocks = 10;
const paymentsPerBlock = 10;
const watchedCount = 1000;
let dev: DevChain;
let proxy: RpcProxy;
const closers: (() => unknown)[] = [];
let credential = "";
let addresses: Hex[] = [];
const watcher = new WatcherProcess("evm big-blocks watcher");
const startWatcher = (ctx: BenchContext) => watcher.start(ctx, credential, { ETHEREUM_TEST_RPC_URL: proxy.url, WATCHER_POLL_MS: String(pollMs) });
const until = watcher.until.bind(watcher);

/** The height the watcher saved as processed on the ethereum Test chain. */
async function processed(ctx: BenchContext): Promise<number> {
  const [row] = await ctx.db.em.fork().execute<{ height: string }[]>(`select height from chain_watchers where network = 'ethereum' and environment = 'test'`);
  return Number(row?.height ?? -1);
}

/** `count` payments of `asset` from anvil's unlocked payer (anvil signs them; numbered here, as they go out at once) to watched addresses of intents in that asset. */
async function sendPayments(asset: "ETH" | "USDC", count: number): Promise<void> {
  const half = watchedCount / 2;
  const first = asset === "ETH" ? 0 : half;
  const offset = Math.floor(Math.random() * half);
  const nonce = await dev.public.getTransactionCount({ address: dev.payer.address, blockTag: "pending" });
  await Promise.all(
    Array.from({ length: count }, (_, i) => {
      const to = addresses[first + ((offset + i) % half)] as Hex;
      const tx = asset === "ETH" ? { to, value: "0x2386f26fc10000" } : { to: dev.tokens.USDC as Hex, data: encodeFunctionData({ abi: tokenAbi, functionName: "transfer", args: [to, 1_000_000n] }) };
      return dev.test.request({
        method: "eth_sendTransaction" as never,
        params: [{ from: dev.payer.address, gas: "0x30d40", nonce: `0x${(nonce + i).toString(16)}`, ...tx }] as never,
      });
    }),
  );
}

export const evmBigBlocksScenario: Scenario = {
  name: "evm-big-blocks",
  title: `EVM watcher catching up over blocks of ${padding} transactions (~1.4 MB each, through a JSON-RPC proxy that pads anvil's blocks), payments in one block of ${everyBlocks}`,
  ownSystem: true,
  metrics: {
    catchup_blocks_per_s: { label: `catch-up: blocks of ${padding} transactions processed per second`, unit: "/s" },
    catchup_outputs_per_s: { label: "catch-up: outputs recorded per second", unit: "/s" },
  },

  async setup(ctx) {
    dev = await startDevChain();
    proxy = await startRpcProxy({ teardown: (fn) => void closers.push(fn) }, dev.url);
    proxy.padTransactions = padding;
    // A new chain: the position and the blocks another scenario's chain left are not this one's.
    await ctx.db.em.fork().execute(`delete from chain_watchers where network = 'ethereum' and environment = 'test'`);
    await ctx.db.em.fork().execute(`delete from chain_blocks where network = 'ethereum' and environment = 'test'`);
    credential = (await createInternalCredential(ctx.db.em.fork(), "bench big-blocks watcher", ["observe"], "test", { networks: ["ethereum"] })).credential;
    addresses = Array.from({ length: watchedCount }, () => getAddress(`0x${randomBytes(20).toString("hex")}`));
    await loadWatchedIntents(ctx, { network: "ethereum", asset: "ETH", amount: "1000000" }, addresses.slice(0, watchedCount / 2));
    await loadWatchedIntents(ctx, { network: "ethereum", asset: "USDC", amount: "1000000" }, addresses.slice(watchedCount / 2));
  },

  async run(ctx) {
    const blocks = ctx.quick ? 100 : 400;
    // The watcher takes its position at the head, then stops: the backlog is mined while none runs.
    startWatcher(ctx);
    await until("the watcher follows the chain", () => watcher.following(), 60_000);
    await until("the watcher at the head", async () => (await processed(ctx)) >= Number(await dev.public.getBlockNumber({ cacheTime: 0 })), 60_000, 50);
    await watcher.stop();
    const recorded = recordedSince(ctx, "ethereum", await lastObservationId(ctx));
    const t0 = performance.now();
    let payments = 0;
    for (let b = 1; b <= blocks; b += everyBlocks) {
      await sendPayments("ETH", paymentsPerBlock / 2);
      await sendPayments("USDC", paymentsPerBlock / 2);
      payments += paymentsPerBlock;
      await dev.test.mine({ blocks: Math.min(everyBlocks, blocks - b + 1) });
    }
    const head = Number(await dev.public.getBlockNumber({ cacheTime: 0 }));
    ctx.log(`evm big blocks: backlog of ${blocks} blocks (${payments} payments) mined in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    const reads = proxy.calls.get("eth_getBlockByNumber") ?? 0;
    startWatcher(ctx);
    await until("the watcher follows the chain again", () => watcher.following(), 60_000);
    const c0 = performance.now();
    await until(`the head (${head}) processed and ${payments} payments recorded`, async () => (await processed(ctx)) >= head && (await recorded()) >= payments, 600_000, 50);
    const seconds = (performance.now() - c0) / 1000;
    ctx.log(`evm big blocks: caught up in ${seconds.toFixed(1)} s, ${(proxy.calls.get("eth_getBlockByNumber") ?? 0) - reads} block requests for ${blocks} blocks`);
    await watcher.stop();
    return { catchup_blocks_per_s: blocks / seconds, catchup_outputs_per_s: payments / seconds };
  },

  async teardown() {
    await watcher.stop();
    for (const close of closers.splice(0)) await close();
    await dev?.stop();
  },
};
