// A reorg deeper than every block the core keeps of a chain it began following a few blocks ago
// (the watcher starts just below the node's head): no kept block is left in common with the node.
// Within the maximum depth the chain is followed, not stopped silently; deeper, it stops loudly with
// the fork's true depth, not the few blocks kept, when the watcher finds where the branches part
// among the node's hashes it read below where it started (the maximum's worth); when they part
// below even those, the depth it can count is a lower bound, and every report says "at least".
// Against anvil followed by the app's in-process watcher, ethereum Test (ETHEREUM_CONFIRMATIONS=3;
// maximum 128, and 30 for the second and third chains).
import t from "tap";
import { until } from "../helpers/harness.ts";
import { confirmedPayment, metricValue, newBranchCounts, reorgSetup } from "../helpers/reorg.ts";

// 60 blocks before the app starts: its watcher follows from block 59 on.
const r = await reorgSetup(t, {}, { premine: 60 });
const shallow = await reorgSetup(t, { ETHEREUM_MAX_REORG_DEPTH: "30" }, { premine: 60 });
const deeper = await reorgSetup(t, { ETHEREUM_MAX_REORG_DEPTH: "30" }, { premine: 60 });
const labels = { network: "ethereum", environment: "test" };

t.test("a 46-block reorg below the first block the core kept: followed; the payment withdrawn once; a payment on the new branch counted", async (t) => {
  t.teardown(async () => {
    if (!t.passing()) console.error(await r.diagnosis());
  });
  const first = await r.head();
  // More kept blocks than a watcher reads in one batch (20): the new branch is longer than a batch too.
  const { x, paid, head: T } = await confirmedPayment(r, "5", 30);

  const depth = 46;
  await r.reorg(depth);
  await r.dev.test.request({ method: "anvil_dropAllTransactions" as never });
  t.equal(await r.head(), T, "the new branch is as high as the old one");
  t.ok(T - depth + 1 < first, "the branches part below the first block the watcher followed");

  await newBranchCounts(t, r, x, paid, "a reorg below every kept block");
  const chains = await r.ops("chains");
  t.notMatch(chains.stdout, /halted|stopped/i, "the chain is not stopped");
});

t.test("a 40-block reorg below the first block the core kept, past ETHEREUM_MAX_REORG_DEPTH=30: the chain stops with the fork's depth", async (t) => {
  t.teardown(async () => {
    if (!t.passing()) console.error(await shallow.diagnosis());
  });
  await shallow.mine(10);
  const T = await shallow.caughtUp();
  await shallow.reorg(40);
  t.equal(await shallow.head(), T, "the new branch is as high as the old one");
  let depth: number | undefined;
  try {
    await until("chain_halted_reorg_depth 40", async () => (depth = await metricValue(shallow.s.app.ports.ops, "chain_halted_reorg_depth", { network: "ethereum", environment: "test" })) === 40, 40_000, () => String(depth));
  } catch (err) {
    t.fail((err as Error).message);
  }
  t.equal(depth, 40, "stopped, with the fork's true depth (40), not the few blocks the core kept");
  t.equal(await metricValue(shallow.s.app.ports.ops, "chain_halted_reorg_depth_is_lower_bound", labels), 0, "exact, not a lower bound");
  const chains = await shallow.ops("chains");
  t.match(chains.stdout, /40/, `ops chains shows it: ${chains.stdout}`);
  t.notMatch(chains.stdout, /at least/, "as the exact depth");
  const check = await shallow.chainCheck();
  t.match(check.message, /on ethereum a reorg would take 40 blocks off the chain counted so far/, `readiness says the exact depth: ${check.message}`);
  t.notMatch(check.message, /at least/, "not as a lower bound");
});

t.test("a 45-block reorg parting below every block the watcher knew, past ETHEREUM_MAX_REORG_DEPTH=30: the chain stops, its depth said as a lower bound", async (t) => {
  t.teardown(async () => {
    if (!t.passing()) console.error(await deeper.diagnosis());
  });
  // The watcher started just below the head (60) knowing the node's 30 blocks below that: a
  // 45-block reorg ten blocks later parts below all of them. It can count only from the lowest it
  // knew: at least 42 (71 - 29).
  await deeper.mine(10);
  const T = await deeper.caughtUp();
  await deeper.reorg(45);
  t.equal(await deeper.head(), T, "the new branch is as high as the old one");
  const gauge = (name: string) => metricValue(deeper.s.app.ports.ops, name, labels);
  let depth: number | undefined;
  try {
    await until("chain_halted_reorg_depth set", async () => (depth = await gauge("chain_halted_reorg_depth")) !== undefined && depth > 0, 40_000, () => String(depth));
  } catch (err) {
    t.fail((err as Error).message);
  }
  t.ok(depth !== undefined && depth > 30 && depth < 45, `stopped, with a depth past the maximum and short of the true 45: ${depth}`);
  t.equal(await gauge("chain_halted_reorg_depth_is_lower_bound"), 1, "chain_halted_reorg_depth_is_lower_bound: the depth is a lower bound");

  const check = await deeper.chainCheck();
  t.equal(check.passed, false, "readiness: chain_watcher fails");
  t.match(check.message, new RegExp(`on ethereum a reorg would take at least ${depth} blocks off the chain counted so far`), `readiness says "at least": ${check.message}`);

  const chains = await deeper.ops("chains");
  t.match(chains.stdout, new RegExp(`at least ${depth} blocks`), `ops chains says "at least": ${chains.stdout}`);
  const json = await deeper.ops("chains", "--json");
  const row = (JSON.parse(json.stdout) as { network: string; environment: string; halted_depth: number; halted_depth_is_lower_bound: boolean }[]).find((c) => c.network === "ethereum" && c.environment === "test");
  t.match(row, { halted_depth: depth, halted_depth_is_lower_bound: true }, "ops chains --json: the depth and that it is a lower bound");

  const logged = deeper.log.lines().filter((l) => Number(l.level) >= 50 && /stopped counting/.test(String(l.msg)));
  t.match(logged, [{ depth, depth_is_lower_bound: true, blocks_taken: `at least ${depth} blocks` }], `the watcher's log line says so: ${JSON.stringify(logged)}`);
});
