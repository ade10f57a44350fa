// A resume is spent on the stop it was given for (issue 60, item 3), against anvil followed by the
// app's in-process watcher through an RPC proxy, ethereum Test (ETHEREUM_CONFIRMATIONS=3,
// ETHEREUM_MAX_REORG_DEPTH=5):
//  - the watcher is pointed at a second node (anvil forked from the first below its head with
//    --fork-url, and mined past it): its branch takes 8 blocks off the chain counted, and the
//    chain stops;
//  - the operator puts the watcher back on the first node and resumes the chain; the chain goes
//    on (a payment on it confirms), and the resume is spent: `ops chains --json` shows none armed;
//  - a later 10-block reorg on the first node (anvil_reorg) stops the chain again. Before, the
//    resume stayed armed until a fork deeper than the maximum was taken: that reorg was followed
//    without a halt, weeks on as here.
//  - resumed for it, that fork is taken, and the resume is spent with it: a later 7-block reorg
//    stops the chain again;
//  - a resume not spent within its time (ops chain-resume --lapse-seconds 1, the watcher's node
//    held) lapses: the fork, reported after, stops the chain again.
// (anvil's evm_revert does not survive an anvil_reorg, so the second node is a fork, not a snapshot.)
import { spawn } from "node:child_process";
import t from "tap";
import { anvilPath } from "../../scripts/devchain/chain.ts";
import { until } from "../helpers/harness.ts";
import { reorgSetup } from "../helpers/reorg.ts";
import type { RpcProxy } from "../helpers/rpc-proxy.ts";

const r = await reorgSetup(t, { ETHEREUM_MAX_REORG_DEPTH: "5", WATCHER_NODE_PROOF_SECONDS: "1" }, { proxy: true });
const node = r.node as RpcProxy;

/** anvil forked from `url` at block `at`, mining only when asked; stopped at teardown. */
async function forkedNode(url: string, at: number): Promise<{ url: string; mine(blocks: number): Promise<void> }> {
  const child = spawn(anvilPath(), ["--port", "0", "--host", "127.0.0.1", "--fork-url", url, "--fork-block-number", String(at), "--no-mining"], { stdio: ["ignore", "pipe", "pipe"] });
  t.teardown(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
  });
  const port = await new Promise<number>((resolve, reject) => {
    let out = "";
    const timer = setTimeout(() => reject(new Error(`the forked anvil did not start: ${out.slice(-500)}`)), 20_000);
    const seen = (d: Buffer) => {
      out += d.toString();
      const m = /Listening on [^\s:]+:(\d+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    };
    child.stdout.on("data", seen);
    child.stderr.on("data", seen);
    child.once("exit", (code) => reject(new Error(`the forked anvil exited (${code}): ${out.slice(-500)}`)));
  });
  const forked = `http://127.0.0.1:${port}`;
  return {
    url: forked,
    async mine(blocks) {
      const res = await fetch(forked, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "anvil_mine", params: [`0x${blocks.toString(16)}`] }) });
      const body = (await res.json()) as { error?: unknown };
      if (body.error) throw new Error(`anvil_mine: ${JSON.stringify(body.error)}`);
    },
  };
}

interface ChainRow {
  network: string;
  environment: string;
  height: number | null;
  halted: string | null;
  halted_depth: number | null;
  resume?: { branch_height: number | null; branch_hash: string | null; until: string } | null;
}
async function chainRow(): Promise<ChainRow> {
  const run = await r.ops("chains", "--json");
  if (run.code !== 0) throw new Error(`ops chains: ${run.code} ${run.stderr}`);
  return (JSON.parse(run.stdout) as ChainRow[]).find((c) => c.network === "ethereum" && c.environment === "test") as ChainRow;
}

/** Waits until `ops chains` shows the chain stopped by a fork of `depth` blocks; returns its row. */
async function stoppedBy(depth: number, ms: number): Promise<ChainRow> {
  let last: ChainRow | undefined;
  return until(`the chain stopped by a ${depth}-block fork`, async () => ((last = await chainRow()).halted_depth === depth ? last : undefined), ms, () => JSON.stringify(last));
}

t.test("a resume is spent on the halt it was given for: back on the first node the chain goes on, and a later 10-block reorg stops it again", async (t) => {
  t.teardown(async () => {
    if (!t.passing()) console.error(await r.diagnosis());
  });
  await r.mine(20);
  const T = await r.caughtUp();

  // The second node: the first one's chain up to T-8, then a branch of its own, 2 blocks higher.
  const second = await forkedNode(r.dev.url, T - 8);
  await second.mine(10);
  node.retarget(second.url);
  const first = await stoppedBy(8, 30_000);
  t.match(first.halted, /takes 8 blocks off the best chain/, `ops chains: the chain stopped, 8 blocks deep: ${first.halted}`);
  t.equal((await r.chainCheck()).passed, false, "readiness says so");

  // The runbook: the watcher back on a good node (the first one, still at T), then resume.
  node.retarget(r.dev.url);
  const resumed = await r.ops("chain-resume", "--network", "ethereum", "--environment", "test");
  t.equal(resumed.code, 0, `ops chain-resume exits 0: ${resumed.stdout}${resumed.stderr}`);

  // The chain goes on without the fork: a payment on it confirms, and the resume is spent.
  const x = await r.createIntent("2");
  const paid = await r.pay(x, "2");
  await r.mine(4);
  const counted = await r.statusIs(x.public_id, "confirmed", 40_000);
  t.equal(counted.transactions?.[0]?.tx_hash, paid.hash, "the payment on the first node's chain confirms");
  const head = await r.caughtUp();
  const goneOn = await chainRow();
  t.equal(goneOn.halted, null, "the chain counts");
  t.equal(goneOn.height, head, "at the first node's head");
  t.equal(goneOn.resume, null, `ops chains --json: no resume armed once the chain went on without its fork (${JSON.stringify(goneOn.resume)})`);

  // Later, a reorg deeper than the maximum on the first node: the chain stops again.
  await r.reorg(10);
  const again = await stoppedBy(10, 30_000).catch((err: Error) => {
    t.fail(`a later 10-block reorg stops the chain again: ${err.message}`);
    return undefined;
  });
  t.match(again?.halted, /takes 10 blocks off the best chain/, `ops chains: stopped again, 10 blocks deep: ${again?.halted}`);
  const check = await r.chainCheck();
  t.equal(check.passed, false, `readiness fails again: ${check.message}`);
  if (!again) return;

  // Resumed for this fork, the fork is taken and the resume spent with it. The node's answers are
  // held meanwhile, so that the resume is seen armed before the watcher spends it.
  node.hold = () => true;
  const resumedAgain = await r.ops("chain-resume", "--network", "ethereum", "--environment", "test");
  t.equal(resumedAgain.code, 0, `ops chain-resume exits 0: ${resumedAgain.stdout}${resumedAgain.stderr}`);
  t.match(resumedAgain.stdout, new RegExp(`the branch with block ${head - 9}, 0x[0-9a-f]{64}`), "and names the fork it takes");
  const armed = await chainRow();
  node.release();
  t.match(armed.resume, { branch_height: head - 9, branch_hash: /^0x[0-9a-f]{64}$/ }, `ops chains --json names the fork the resume is for: ${JSON.stringify(armed.resume)}`);
  const lapses = Date.parse(armed.resume?.until ?? "") - Date.now();
  t.ok(lapses > 55 * 60_000 && lapses <= 60 * 60_000, `and that it lapses in an hour: ${armed.resume?.until}`);
  let last: ChainRow | undefined;
  await until("the 10-block fork taken", async () => ((last = await chainRow()).halted === null && last.resume === null ? last : undefined), 30_000, () => JSON.stringify(last));
  t.equal((await r.chainCheck()).passed, true, "readiness passes: the chain follows the fork it was resumed for");

  // Spent with its fork: the next deep reorg stops the chain again. Resumed for it with a resume
  // that lapses before the watcher reports the fork (its node held), it stops the chain again too.
  await r.caughtUp();
  await r.reorg(7);
  await stoppedBy(7, 30_000).catch((err: Error) => t.fail(`a 7-block reorg after the resumed one stops the chain: ${err.message}`));
  node.hold = () => true;
  const brief = await r.ops("chain-resume", "--network", "ethereum", "--environment", "test", "--lapse-seconds", "1");
  t.equal(brief.code, 0, `ops chain-resume --lapse-seconds 1 exits 0: ${brief.stdout}${brief.stderr}`);
  let row: ChainRow | undefined;
  const lapsed = await until("the resume lapsed", async () => ((row = await chainRow()).halted === null && row.resume === null ? row : undefined), 10_000, () => JSON.stringify(row)).catch(
    (err: Error) => t.fail(err.message),
  );
  t.ok(lapsed, "ops chains: no resume armed a second after it was given, the fork not taken");
  node.release();
  const stoppedAgain = await stoppedBy(7, 30_000).catch((err: Error) => {
    t.fail(`the fork reported after its resume lapsed stops the chain again: ${err.message}`);
    return undefined;
  });
  t.match(stoppedAgain?.halted, /takes 7 blocks off the best chain/, "a lapsed resume takes nothing: the chain stopped again by its fork");
  t.match(
    (await r.ops("chain-resume", "--network", "ethereum", "--environment", "test", "--lapse-seconds", "86401")).stderr,
    /--lapse-seconds must be a whole number of seconds, 1 to 86400/,
    "a resume for more than a day is refused",
  );
});
