import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import path from "node:path";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { setTimeout as sleep } from "node:timers/promises";
import pg from "pg";
import { from as copyFrom } from "pg-copy-streams";
import { encodeFunctionData, getAddress, type Hex } from "viem";
import { startDevChain, tokenAbi, type DevChain } from "../../../scripts/devchain/chain.ts";
import { createInternalCredential } from "../../../services/auth/admin.ts";
import { newIds } from "../../../services/platform/ids.ts";
import { percentile } from "../stats.ts";
import type { BenchContext, Scenario } from "../types.ts";

/**
 * The EVM watcher on anvil, as its own process against the main system's rpc role:
 * catch-up over a backlog of blocks full of token transfers with 100,000 watched addresses,
 * then the time from a block being mined to its observation being recorded while following the head.
 */
const root = path.resolve(import.meta.dirname, "../../..");
const watchedCount = 100_000;
const pollMs = 500;
let dev: DevChain;
let credential = "";
let addresses: Hex[] = [];
let watcher: { child: ChildProcess; output: () => string } | undefined;

function startWatcher(ctx: BenchContext) {
  const child = spawn(process.execPath, [path.join(root, "services/app/main.ts"), "watcher"], {
    cwd: root,
    env: {
      PATH: process.env.PATH,
      RPC_URL: ctx.rpcUrl,
      WATCHER_CREDENTIAL_TEST: credential,
      ETHEREUM_TEST_RPC_URL: dev.url,
      WATCHER_POLL_MS: String(pollMs),
      WATCHER_LEASE_SECONDS: "5",
      OPS_PORT: "0",
      LOG_LEVEL: "info",
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  child.stdout?.on("data", (d: Buffer) => (out += d.toString()));
  child.stderr?.on("data", (d: Buffer) => (out += d.toString()));
  return { child, output: () => out };
}

async function stopWatcher(): Promise<void> {
  const w = watcher;
  watcher = undefined;
  if (!w || w.child.exitCode !== null) return;
  await new Promise<void>((resolve) => {
    w.child.once("exit", () => resolve());
    w.child.kill("SIGTERM");
  });
}

async function until(what: string, check: () => Promise<boolean> | boolean, timeoutMs: number, stepMs = 20): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`watcher: ${what} did not happen within ${timeoutMs} ms${watcher ? `; watcher output: ${watcher.output().slice(-800)}` : ""}`);
    await sleep(stepMs);
  }
}

async function recorded(ctx: BenchContext): Promise<number> {
  const [row] = await ctx.db.em.fork().execute<{ n: string }[]>(`select count(*) as n from chain_observations where network = 'ethereum' and environment = 'test' and not simulated`);
  return Number(row?.n ?? 0);
}

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
  },

  async setup(ctx) {
    dev = await startDevChain();
    credential = (await createInternalCredential(ctx.db.em.fork(), "bench watcher", ["observe"], "test")).credential;
    // 100,000 open Test intents on ethereum, each with a deposit address of its own.
    const client = new pg.Client({ connectionString: ctx.databaseUrl });
    await client.connect();
    try {
      const t0 = performance.now();
      const ids = newIds("pi", watchedCount);
      addresses = ids.map(() => getAddress(`0x${randomBytes(20).toString("hex")}`));
      const now = new Date().toISOString();
      const until = new Date(Date.now() + 86_400_000).toISOString();
      const copy = client.query(
        copyFrom(
          `COPY payment_intents (id, merchant_id, environment, status, network, asset, requested_amount, metadata, deposit_address, created_at, expires_at, updated_at) FROM STDIN`,
        ),
      );
      const rows = function* () {
        for (let i = 0; i < ids.length; i += 1000) {
          let chunk = "";
          for (let j = i; j < Math.min(ids.length, i + 1000); j++) chunk += `${ids[j]}\t${ctx.merchant.id}\ttest\tpending\tethereum\tUSDC\t1000000\t{}\t${addresses[j]}\t${now}\t${until}\t${now}\n`;
          yield chunk;
        }
      };
      await pipeline(Readable.from(rows(), { objectMode: false }), copy);
      await client.query("VACUUM (ANALYZE) payment_intents");
      ctx.log(`watcher: ${watchedCount} watched intents loaded in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    } finally {
      await client.end();
    }
  },

  async run(ctx) {
    const blocks = ctx.quick ? 10 : 50;
    const perBlock = 100;
    // The watcher takes its position at the head, then stops: the backlog is mined while none runs.
    watcher = startWatcher(ctx);
    await until("the watcher follows the chain", () => /following the chain/.test(watcher?.output() ?? ""), 60_000);
    await stopWatcher();
    const before = await recorded(ctx);
    const offset = Math.floor(Math.random() * addresses.length);
    const t0 = performance.now();
    for (let b = 0; b < blocks; b++) {
      await sendTransfers(perBlock, offset + b * perBlock);
      await dev.test.mine({ blocks: 1 });
    }
    ctx.log(`watcher: backlog of ${blocks} blocks × ${perBlock} transfers mined in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    watcher = startWatcher(ctx);
    await until("the watcher follows the chain again", () => /following the chain/.test(watcher?.output() ?? ""), 60_000);
    const c0 = performance.now();
    const total = before + blocks * perBlock;
    await until(`${blocks * perBlock} transfers recorded`, async () => (await recorded(ctx)) >= total, 300_000, 50);
    const catchupSeconds = (performance.now() - c0) / 1000;
    // The backlog's outputs reach their threshold (the main system's: 12 on ethereum) before the head is timed.
    const required = 12;
    await dev.test.mine({ blocks: required });
    await until("the backlog counted", async () => {
      const [row] = await ctx.db.em.fork().execute<{ n: string }[]>(`select count(*) as n from chain_observations where not counted and not simulated and network = 'ethereum'`);
      return Number(row?.n) === 0;
    }, 120_000, 100);

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
      await until(`round ${i} recorded`, async () => {
        const [row] = await ctx.db.em.fork().execute<{ created_at: Date }[]>(`select created_at from chain_observations where tx_hash = ?`, [hash]);
        createdAt = row && new Date(row.created_at).getTime();
        return createdAt !== undefined;
      }, 30_000, 5);
      latencies.push(Math.max(0, (createdAt as number) - minedAt));
    }
    await stopWatcher();
    return {
      catchup_transfers_per_s: (blocks * perBlock) / catchupSeconds,
      catchup_blocks_per_s: blocks / catchupSeconds,
      head_p50_ms: percentile(latencies, 50),
      head_p99_ms: percentile(latencies, 99),
    };
  },

  async teardown() {
    await stopWatcher();
    await dev?.stop();
  },
};
