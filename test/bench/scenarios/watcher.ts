import { randomBytes } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { encodeFunctionData, getAddress, type Hex } from "viem";
import { startDevChain, tokenAbi, type DevChain } from "../../../scripts/devchain/chain.ts";
import { createInternalCredential } from "../../../services/auth/admin.ts";
import { startRpcProxy } from "../../helpers/rpc-proxy.ts";
import { backendsOf, meterGroups } from "../cpu.ts";
import { percentile } from "../stats.ts";
import type { BenchContext, Scenario } from "../types.ts";
import { lastObservationId, loadWatchedIntents, recordedSince, recordedAt, uncounted, WatcherProcess } from "./watcher-support.ts";

/**
 * The EVM watcher on anvil, as its own process against the main system's rpc role:
 * catch-up over a backlog of blocks full of token transfers with 100,000 watched addresses,
 * then the time from a block being mined to its observation being recorded while following the head,
 * then a node outage (20 s; 5 s quick) while the same backlog is mined, timed from the node's return.
 */
const watchedCount = 100_000;
const pollMs = 500;
let dev: DevChain;
let credential = "";
let addresses: Hex[] = [];
const watcher = new WatcherProcess("watcher");
const startWatcher = (ctx: BenchContext, url = dev.url) => watcher.start(ctx, credential, { ETHEREUM_TEST_RPC_URL: url, WATCHER_POLL_MS: String(pollMs) });
const closers: (() => unknown)[] = [];
const until = watcher.until.bind(watcher);

/** `count` USDC transfers from anvil's unlocked payer (anvil signs them; numbered here, as they go out at once) to watched addresses. */
async function sendTransfers(count: number, offset: number): Promise<void> {
  const token = dev.tokens.USDC as Hex;
  const nonce = await dev.public.getTransactionCount({ address: dev.payer.address, blockTag: "pending" });
  let next = 0;
  const lane = async () => {
    while (next < count) {
      const i = next++;
      const to = addresses[(offset + i) % addresses.length] as Hex;
      await dev.test.request({
        method: "eth_sendTransaction" as never,
        params: [{ from: dev.payer.address, to: token, gas: "0x30d40", nonce: `0x${(nonce + i).toString(16)}`, data: encodeFunctionData({ abi: tokenAbi, functionName: "transfer", args: [to, 1_000_000n] }) }] as never,
      });
    }
  };
  await Promise.all(Array.from({ length: 32 }, lane));
}

export const watcherScenario: Scenario = {
  name: "watcher",
  title: `EVM chain watcher on anvil (${watchedCount} watched addresses; catch-up over blocks of token transfers, then following the head with WATCHER_POLL_MS=${pollMs})`,
  ownSystem: true,
  metrics: {
    catchup_transfers_per_s: { label: "catch-up: transfers recorded per second", unit: "/s", target: { op: ">=", value: 1000 } },
    catchup_blocks_per_s: { label: "catch-up: blocks processed per second", unit: "/s" },
    head_p50_ms: { label: "following the head: mined → recorded, p50", unit: "ms" },
    head_p99_ms: { label: "following the head: mined → recorded, p99", unit: "ms", target: { op: "<=", value: pollMs + 250 } },
    reconnect_call_ms: { label: "after a node outage: node back → the watcher's first call to it", unit: "ms", target: { op: "<=", value: 1000 } },
    reconnect_first_ms: { label: "after a node outage: node back → first output recorded", unit: "ms", target: { op: "<=", value: 1500 } },
    reconnect_outputs_per_s: { label: "after a node outage: outputs recorded per second from the node's return (reconnect included)", unit: "/s", target: { op: ">=", value: 1500 } },
    // CPU time, summed over the cores, per output recorded in the catch-up: unlike its rate, it does
    // not move with what else the machine runs, so two commits compare on a noisy machine.
    catchup_cpu_service_ms: { label: "catch-up: CPU per output, the service (the core recording reports)", unit: "ms" },
    catchup_cpu_postgres_ms: { label: "catch-up: CPU per output, PostgreSQL", unit: "ms" },
    catchup_cpu_watcher_ms: { label: "catch-up: CPU per output, the watcher", unit: "ms" },
    catchup_cpu_node_ms: { label: "catch-up: CPU per output, the node (anvil)", unit: "ms" },
  },

  async setup(ctx) {
    dev = await startDevChain();
    credential = (await createInternalCredential(ctx.db.em.fork(), "bench watcher", ["observe"], "test", { networks: ["ethereum"] })).credential;
    // 100,000 open Test intents on ethereum, each with a deposit address of its own.
    addresses = Array.from({ length: watchedCount }, () => getAddress(`0x${randomBytes(20).toString("hex")}`));
    await loadWatchedIntents(ctx, { network: "ethereum", asset: "USDC", amount: "1000000" }, addresses);
  },

  async run(ctx) {
    const blocks = ctx.quick ? 10 : 50;
    const perBlock = 100;
    // The watcher takes its position at the head, then stops: the backlog is mined while none runs.
    startWatcher(ctx);
    await until("the watcher follows the chain", () => watcher.following(), 60_000);
    await watcher.stop();
    const recorded = recordedSince(ctx, "ethereum", await lastObservationId(ctx));
    const offset = Math.floor(Math.random() * addresses.length);
    const t0 = performance.now();
    for (let b = 0; b < blocks; b++) {
      await sendTransfers(perBlock, offset + b * perBlock);
      await dev.test.mine({ blocks: 1 });
    }
    ctx.log(`watcher: backlog of ${blocks} blocks × ${perBlock} transfers mined in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    startWatcher(ctx);
    await until("the watcher follows the chain again", () => watcher.following(), 60_000);
    const c0 = performance.now();
    const cpu = meterGroups({
      service: () => [ctx.servicePid],
      postgres: () => backendsOf(ctx.database),
      watcher: () => (watcher.pid === undefined ? [] : [watcher.pid]),
      node: () => (dev.process.pid === undefined ? [] : [dev.process.pid]),
    });
    await until(`${blocks * perBlock} transfers recorded`, async () => (await recorded()) >= blocks * perBlock, 300_000, 50);
    const catchupSeconds = (performance.now() - c0) / 1000;
    // Over the same time as the rate.
    const perOutput = cpu.stop(blocks * perBlock);
    // The backlog's outputs reach their threshold (the main system's: 12 on ethereum) before the head is timed.
    const required = 12;
    await dev.test.mine({ blocks: required });
    await until("the backlog counted", async () => (await uncounted(ctx, "ethereum")) === 0, 120_000, 100);

    // Following the head: one transfer per block, mined at random moments of the poll cycle.
    const latencies: number[] = [];
    const rounds = ctx.quick ? 10 : 40;
    for (let i = 0; i < rounds; i++) {
      const to = addresses[(offset + blocks * perBlock + i) % addresses.length] as Hex;
      const hash = (await dev.test.request({
        method: "eth_sendTransaction" as never,
        params: [{ from: dev.payer.address, to: dev.tokens.USDC, gas: "0x30d40", data: encodeFunctionData({ abi: tokenAbi, functionName: "transfer", args: [to, 1_000_000n] }) }] as never,
      })) as string;
      await sleep(Math.random() * pollMs);
      await dev.test.mine({ blocks: 1 });
      const minedAt = Date.now();
      let createdAt: number | undefined;
      await until(`round ${i} recorded`, async () => (createdAt = await recordedAt(ctx, "ethereum", hash)) !== undefined, 30_000, 5);
      latencies.push(Math.max(0, (createdAt as number) - minedAt));
    }
    await watcher.stop();

    // A node outage: the watcher follows through a proxy that stops answering (connections
    // refused) while the backlog is mined, for 20 s at least; timed from the node's return, as a
    // merchant would see it: the reconnect (the watcher's retry, the node's proof) and the catch-up.
    const proxy = await startRpcProxy({ teardown: (fn) => void closers.push(fn) }, dev.url);
    startWatcher(ctx, proxy.url);
    await until("the watcher follows the chain through the proxy", () => watcher.following(), 60_000);
    const outageMs = ctx.quick ? 5_000 : 20_000;
    const recorded2 = recordedSince(ctx, "ethereum", await lastObservationId(ctx));
    const offset2 = offset + blocks * perBlock + rounds;
    await proxy.down();
    const downAt = performance.now();
    for (let b = 0; b < blocks; b++) {
      await sendTransfers(perBlock, offset2 + b * perBlock);
      await dev.test.mine({ blocks: 1 });
    }
    await sleep(Math.max(0, outageMs - (performance.now() - downAt)));
    // The watcher's first call to the node after its return: what is left of its retry's wait.
    let firstCall: number | undefined;
    proxy.onRequest = () => (firstCall ??= performance.now());
    await proxy.up();
    const u0 = performance.now();
    ctx.log(`watcher: the node was away ${((u0 - downAt) / 1000).toFixed(1)} s while ${blocks} blocks × ${perBlock} transfers were mined`);
    let firstMs: number | undefined;
    await until(
      `${blocks * perBlock} transfers recorded after the node's return`,
      async () => {
        const n = await recorded2();
        if (firstMs === undefined && n > 0) firstMs = performance.now() - u0;
        return n >= blocks * perBlock;
      },
      300_000,
      20,
    );
    const reconnectSeconds = (performance.now() - u0) / 1000;
    await watcher.stop();
    return {
      catchup_transfers_per_s: (blocks * perBlock) / catchupSeconds,
      catchup_blocks_per_s: blocks / catchupSeconds,
      head_p50_ms: percentile(latencies, 50),
      head_p99_ms: percentile(latencies, 99),
      reconnect_call_ms: (firstCall as number) - u0,
      reconnect_first_ms: firstMs as number,
      reconnect_outputs_per_s: (blocks * perBlock) / reconnectSeconds,
      catchup_cpu_service_ms: perOutput?.service ?? Number.NaN,
      catchup_cpu_postgres_ms: perOutput?.postgres ?? Number.NaN,
      catchup_cpu_watcher_ms: perOutput?.watcher ?? Number.NaN,
      catchup_cpu_node_ms: perOutput?.node ?? Number.NaN,
    };
  },

  async teardown() {
    await watcher.stop();
    for (const close of closers.splice(0)) await close();
    await dev?.stop();
  },
};
