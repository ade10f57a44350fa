// A reorg to a shorter head (issue 60): the node's new best chain is lower than the block the core
// counted, with another block below it (proof of stake picks branches by attestations, not
// height; anvil: evm_revert to before the payment's block, then fewer blocks mined). The counted
// blocks above where the branches part leave as soon as the node no longer has them, not once
// the node's branch grows past them: the payment in them stops counting at once (orphaned,
// payment.reorged once), and the chain goes on from the lower head.
// The maximum reorg depth holds as for any fork: a lower branch that takes more blocks off than it
// stops the chain, changing nothing, until an operator resumes it.
// Against anvil followed by the app's in-process watcher, ethereum Test (ETHEREUM_CONFIRMATIONS=3;
// ETHEREUM_MAX_REORG_DEPTH=4 for the second chain).
import t from "tap";
import { until } from "../helpers/harness.ts";
import { metricValue, newBranchCounts, reorgSetup } from "../helpers/reorg.ts";

const r = await reorgSetup(t);
const shallow = await reorgSetup(t, { ETHEREUM_MAX_REORG_DEPTH: "4" });

t.test("a reorg to a head two blocks lower: the counted payments above the fork point stop counting at once; the chain goes on", async (t) => {
  t.teardown(async () => {
    if (!t.passing()) console.error(await r.diagnosis());
  });
  await r.mine(5);
  const before = await r.caughtUp();
  const snapshot = (await r.dev.test.request({ method: "evm_snapshot" as never })) as string;

  // x paid in block N, confirmed at N+2 (3 confirmations); y paid in N+1, 2 of its 3.
  const x = await r.createIntent("5");
  const paid = await r.pay(x, "5");
  await r.mine();
  const N = await r.head();
  t.equal(N, before + 1, "the payment's block is the first above the snapshot");
  const y = await r.createIntent("2");
  const paidY = await r.pay(y, "2");
  await r.mine(2);
  await r.statusIs(x.public_id, "confirmed");
  await r.eventSeen(x.public_id, "payment.confirmed");
  const T = await r.caughtUp();
  t.equal(T, N + 2, "the core's tip is two blocks above the payment's block");
  await until(`${y.public_id} at 2 confirmations`, async () => (await r.get(y.public_id)).transactions[0]?.confirmations === 2, 20_000, () => "");
  t.match((await r.get(y.public_id)).transactions[0], { tx_hash: paidY.hash, block_height: N + 1, confirmations: 2, counted: false }, "y's payment has 2 of its 3 confirmations");

  // The node goes back to before block N and takes another, empty, block N: its head is N, two below the core's tip.
  t.equal(await r.dev.test.request({ method: "evm_revert" as never, params: [snapshot] as never }), true, "evm_revert");
  await r.dev.test.request({ method: "anvil_dropAllTransactions" as never });
  await r.mine();
  t.equal(await r.head(), N, "the node's head is N, lower than the core's tip N+2");
  const block = await r.dev.public.getBlock({ blockNumber: BigInt(N) });
  t.equal(block.transactions.length, 0, "another block N, without the payment");

  // Nothing more is mined: the node's branch stays lower than what the core counted.
  try {
    await r.eventSeen(x.public_id, "payment.reorged", 20_000);
  } catch (err) {
    t.fail(`the payment stops counting while the node's head stays lower: ${(err as Error).message}`);
  }
  const now = await r.get(x.public_id);
  t.same([now.status, now.amount_received], ["pending", "0"], "x is pending again");
  t.match(now.transactions[0], { tx_hash: paid.hash, counted: false, confirmations: 0, reason: "orphaned" }, "its payment is orphaned");
  const nowY = await r.get(y.public_id);
  t.match(nowY.transactions[0], { tx_hash: paidY.hash, counted: false, confirmations: 0, reason: "orphaned" }, "y's payment, 2 of 3 before, is orphaned with 0");
  t.equal(await r.head(), N, "and the node's head is still N");
  t.equal(await r.caughtUp(10_000), N, "the watcher is at the node's lower head");

  // The chain goes on from there: a payment on the new branch counts; x's payment was withdrawn once.
  await newBranchCounts(t, r, x, paid, "a reorg to a shorter head");
  t.notOk(r.eventsOf(y.public_id).includes("payment.reorged"), "y never counted, so it was never withdrawn");
  const chains = await r.ops("chains");
  t.notMatch(chains.stdout, /halted|stopped/i, "the chain is not stopped");
});

t.test("a reorg to a lower head that takes 6 blocks off, past ETHEREUM_MAX_REORG_DEPTH=4: the chain stops with depth 6, nothing un-counted; ops chain-resume takes it", async (t) => {
  t.teardown(async () => {
    if (!t.passing()) console.error(await shallow.diagnosis());
  });
  const labels = { network: "ethereum", environment: "test" };
  await shallow.mine(3);
  await shallow.caughtUp();
  const snapshot = (await shallow.dev.test.request({ method: "evm_snapshot" as never })) as string;
  const x = await shallow.createIntent("5");
  const paid = await shallow.pay(x, "5");
  await shallow.mine();
  const N = await shallow.head();
  await shallow.mine(5);
  await shallow.statusIs(x.public_id, "confirmed");
  const T = await shallow.caughtUp();
  t.equal(T, N + 5, "the core's tip is 5 above the payment's block: a fork below it takes 6");

  await shallow.dev.test.request({ method: "evm_revert" as never, params: [snapshot] as never });
  await shallow.dev.test.request({ method: "anvil_dropAllTransactions" as never });
  await shallow.mine(2);
  t.equal(await shallow.head(), N + 1, "the node's head is 4 below the core's tip, on another branch from N");
  let depth: number | undefined;
  try {
    await until("chain_halted_reorg_depth 6", async () => (depth = await metricValue(shallow.s.app.ports.ops, "chain_halted_reorg_depth", labels)) === 6, 20_000, () => String(depth));
  } catch (err) {
    t.fail((err as Error).message);
  }
  t.equal(depth, 6, "stopped, with the fork's depth: the 6 blocks the lower branch takes off, not the 4 the head went down");
  const held = await shallow.get(x.public_id);
  t.match(held, { status: "confirmed", amount_received: "5" }, "a halt changes nothing: the payment still counts until a person looks");
  t.notOk(shallow.eventsOf(x.public_id).includes("payment.reorged"), "no payment.reorged");

  const resumed = await shallow.ops("chain-resume", "--network", "ethereum", "--environment", "test");
  t.equal(resumed.code, 0, `ops chain-resume exits 0: ${resumed.stderr}`);
  try {
    await shallow.eventSeen(x.public_id, "payment.reorged", 30_000);
  } catch (err) {
    t.fail(`resumed, the lower branch is taken: ${(err as Error).message}`);
  }
  const now = await shallow.get(x.public_id);
  t.same([now.status, now.amount_received], ["pending", "0"], "the payment no longer counts");
  t.match(now.transactions[0], { tx_hash: paid.hash, counted: false, reason: "orphaned" }, "orphaned");
  t.equal(await shallow.caughtUp(10_000), N + 1, "the watcher is at the node's lower head");
  t.notOk(await metricValue(shallow.s.app.ports.ops, "chain_halted_reorg_depth", labels), "chain_halted_reorg_depth back to 0");
});
