// A reorg deeper than today's follower window and within the new maximum (issue 46), against anvil
// followed by the app's in-process watcher, ethereum Test (ETHEREUM_CONFIRMATIONS=3,
// ETHEREUM_MAX_REORG_DEPTH left at its default, 128). Today the follower keeps
// min(1024, 2·3 + 16) = 22 blocks: a 46-block reorg leaves it no block in common with the node, the
// core refuses every batch as unlinked, and the chain stops, silently.
import t from "tap";
import { confirmedPayment, newBranchCounts, reorgSetup } from "../helpers/reorg.ts";

const r = await reorgSetup(t);

t.test("a 46-block reorg dropping a confirmed payment's block: followed; the payment withdrawn once; a payment on the new branch counted", async (t) => {
  t.teardown(async () => {
    if (!t.passing()) console.error(await r.diagnosis());
  });
  await r.mine(60);
  const { x, paid, block: P, head: T } = await confirmedPayment(r, "5", 10);

  const depth = 46;
  await r.reorg(depth);
  // anvil puts the dropped block's transaction back in its pool: dropped, so it is never mined again.
  await r.dev.test.request({ method: "anvil_dropAllTransactions" as never });
  t.equal(await r.head(), T, "the new branch is as high as the old one");
  t.ok(P >= T - depth + 1, "the payment's block is in the part replaced");
  t.equal(await r.dev.test.request({ method: "eth_getTransactionByHash" as never, params: [paid.hash] as never }), null, "the payment's transaction is on no chain and in no pool");

  // The sentinel: a payment on the new branch, counted once the watcher followed the reorg.
  await newBranchCounts(t, r, x, paid, "a 46-block reorg");
});
