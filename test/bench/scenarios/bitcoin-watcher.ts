import { randomBytes } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { bech32 } from "@scure/base";
import { createInternalCredential } from "../../../services/auth/admin.ts";
import { startRegtest, type Regtest } from "../../helpers/bitcoin-regtest.ts";
import { percentile } from "../stats.ts";
import type { BenchContext, Scenario } from "../types.ts";
import { lastObservationId, loadWatchedIntents, recordedSince, recordedAt, uncounted, WatcherProcess } from "./watcher-support.ts";

/**
 * The Bitcoin watcher on a bcoin regtest node (Bitcoin Core's RPC), as its own process against
 * the main system's rpc role: catch-up over a backlog of blocks of many outputs each with 100,000
 * watched addresses, then the time from a block being mined to its output being recorded while
 * following the head.
 */
const watchedCount = 100_000;
const pollMs = 500;
const outputsPerTx = 100;
const txsPerBlock = 10;
let chain: Regtest;
let credential = "";
let addresses: string[] = [];
const watcher = new WatcherProcess("bitcoin watcher");
const startWatcher = (ctx: BenchContext) => watcher.start(ctx, credential, { BITCOIN_TEST_RPC_URL: chain.url, WATCHER_POLL_MS: String(pollMs) });
const until = watcher.until.bind(watcher);

export const bitcoinWatcherScenario: Scenario = {
  name: "bitcoin-watcher",
  title: `Bitcoin watcher on a bcoin regtest node (${watchedCount} watched addresses; catch-up over blocks of ${txsPerBlock * outputsPerTx} outputs, then following the head with WATCHER_POLL_MS=${pollMs})`,
  ownSystem: true,
  metrics: {
    catchup_outputs_per_s: { label: "catch-up: outputs recorded per second", unit: "/s", target: { op: ">=", value: 1000 } },
    catchup_blocks_per_s: { label: "catch-up: blocks processed per second", unit: "/s" },
    head_p50_ms: { label: "following the head: mined → recorded, p50", unit: "ms" },
    head_p99_ms: { label: "following the head: mined → recorded, p99", unit: "ms", target: { op: "<=", value: pollMs + 250 } },
  },

  async setup(ctx) {
    chain = await startRegtest();
    credential = (await createInternalCredential(ctx.db.em.fork(), "bench bitcoin watcher", ["observe"], "test", { networks: ["bitcoin"] })).credential;
    // 100,000 open Test intents on bitcoin, each with a P2WPKH testnet address of its own.
    addresses = Array.from({ length: watchedCount }, () => bech32.encode("tb", [0, ...bech32.toWords(randomBytes(20))]));
    await loadWatchedIntents(ctx, { network: "bitcoin", asset: "BTC", amount: "1" }, addresses);
  },

  async run(ctx) {
    const blocks = ctx.quick ? 5 : 20;
    const rounds = ctx.quick ? 10 : 40;
    // Each transaction spends a coinbase output of its own: enough of them mature first.
    await chain.mine(blocks * txsPerBlock + rounds + 10);
    startWatcher(ctx);
    await until("the watcher follows the chain", () => watcher.following(), 60_000);
    await watcher.stop();
    const recorded = recordedSince(ctx, "bitcoin", await lastObservationId(ctx));
    const offset = Math.floor(Math.random() * addresses.length);
    let next = offset;
    const t0 = performance.now();
    for (let b = 0; b < blocks; b++) {
      for (let x = 0; x < txsPerBlock; x++) {
        await chain.pay(Array.from({ length: outputsPerTx }, () => ({ address: addresses[next++ % addresses.length] as string, btc: "0.0001" })));
      }
      await chain.mine();
    }
    const outputs = blocks * txsPerBlock * outputsPerTx;
    ctx.log(`bitcoin watcher: backlog of ${blocks} blocks × ${txsPerBlock * outputsPerTx} outputs mined in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    startWatcher(ctx);
    await until("the watcher follows the chain again", () => watcher.following(), 60_000);
    const c0 = performance.now();
    await until(`${outputs} outputs recorded`, async () => (await recorded()) >= outputs, 600_000, 50);
    const catchupSeconds = (performance.now() - c0) / 1000;
    // The backlog reaches its threshold (2 on bitcoin) before the head is timed.
    await chain.mine(2);
    await until("the backlog counted", async () => (await uncounted(ctx, "bitcoin")) === 0, 300_000, 100);

    // Following the head: one payment per block, mined at random moments of the poll cycle.
    const latencies: number[] = [];
    for (let i = 0; i < rounds; i++) {
      const { txid } = await chain.pay([{ address: addresses[next++ % addresses.length] as string, btc: "0.0001" }]);
      await sleep(Math.random() * pollMs);
      await chain.mine();
      const minedAt = Date.now();
      let at: number | undefined;
      await until(`round ${i} recorded`, async () => (at = await recordedAt(ctx, "bitcoin", txid)) !== undefined, 30_000, 5);
      latencies.push(Math.max(0, (at as number) - minedAt));
    }
    await watcher.stop();
    return {
      catchup_outputs_per_s: outputs / catchupSeconds,
      catchup_blocks_per_s: blocks / catchupSeconds,
      head_p50_ms: percentile(latencies, 50),
      head_p99_ms: percentile(latencies, 99),
    };
  },

  async teardown() {
    await watcher.stop();
    await chain?.stop();
  },
};
