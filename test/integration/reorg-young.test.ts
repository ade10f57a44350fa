// A reorg deeper than every block the core keeps of a chain it began following a few blocks ago
// (the watcher starts just below the node's head): no kept block is left in common with the node.
// Within the maximum depth the chain is followed, not stopped silently; deeper, it stops loudly with
// the fork's true depth, not the few blocks kept. Against anvil followed by the app's in-process
// watcher, ethereum Test (ETHEREUM_CONFIRMATIONS=3; maximum 128, and 30 for the second chain).
import t from "tap";
import { until } from "../helpers/harness.ts";
import { confirmedPayment, metricValue, newBranchCounts, reorgSetup } from "../helpers/reorg.ts";

// 60 blocks before the app starts: its watcher follows from block 59 on.
const r = await reorgSetup(t, {}, { premine: 60 });
const shallow = await reorgSetup(t, { ETHEREUM_MAX_REORG_DEPTH: "30" }, { premine: 60 });

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
  const chains = await shallow.ops("chains");
  t.match(chains.stdout, /40/, `ops chains shows it: ${chains.stdout}`);
});
