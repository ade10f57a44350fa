// The same transaction mined again deep in a fork (issue 46), against anvil followed by the app's
// in-process watcher, ethereum Test at 3 confirmations (ETHEREUM_CONFIRMATIONS=3, so the most any
// output needs on the chain is 3 and today's core derives confirmations only for outputs above
// `below = min(oldTip, newTip) - 4`, services/chains/report.ts).
//
// The conditions under which today's code leaves the payment uncounted (checked: confirmations 0,
// reason below_confirmations, forever): the payment's block P is 8 below the old tip T (so P is
// already under the line T - 4), a 16-block fork (one batch of the follower's 20, the new tip at
// the old tip's height) drops P and re-mines the same signed transaction at offset 2 from the
// fork, that is in block T - 13, also under the line: the upsert moves the output to its new block
// with confirmations 0, and no later report derives confirmations that deep. (The same happens
// with a 14-block fork re-mining it in its first block when P is that first block, 13 below the
// tip: the black-box case that counted again had other conditions.)
import t from "tap";
import { reorgSetup } from "../helpers/reorg.ts";
import { consumerDrained } from "../helpers/webhooks.ts";

const r = await reorgSetup(t);
const count = (events: string[], type: string) => events.filter((e) => e === type).length;

t.test("a payment's transaction re-mined 13 blocks below the new tip, in a fork that dropped its block: counted again, once; the chain goes on", async (t) => {
  t.teardown(async () => {
    if (!t.passing()) console.error(await r.diagnosis());
  });
  await r.mine(40);
  const x = await r.createIntent("5");
  const paid = await r.pay(x, "5");
  await r.mine();
  const P = await r.head();
  await r.mine(8);
  await r.statusIs(x.public_id, "confirmed");
  // The watcher reported every block up to the old tip before the fork: the fork reaches the core as one.
  const T = await r.caughtUp();
  t.equal(T - P, 8, "the payment's block is 8 below the old tip, already under the line tip - 4");

  const depth = 16;
  const fork = T - depth + 1;
  await r.reorg(depth, [[paid.raw, 2]]);
  t.equal(await r.head(), T, "the new branch is as high as the old one");
  const receipt = await r.dev.public.getTransactionReceipt({ hash: paid.hash });
  t.ok(P >= fork, "the payment's old block left the best chain");
  t.equal(Number(receipt.blockNumber), T - 13, "the same transaction is mined again 13 blocks below the new tip");

  // The sentinel: a later payment on the new branch, counted once the watcher got past the fork.
  const z = await r.createIntent("1");
  await r.pay(z, "1");
  await r.mine(3);
  await r.statusIs(z.public_id, "confirmed");
  await r.eventSeen(z.public_id, "payment.confirmed");
  await consumerDrained(r.s);

  const now = await r.get(x.public_id);
  t.same(
    [now.status, now.amount_received, now.transactions.length],
    ["confirmed", "5", 1],
    `the payment counts again, once, listed once (transactions: ${JSON.stringify(now.transactions)})`,
  );
  t.match(now.transactions[0], { tx_hash: paid.hash, block_height: T - 13, counted: true }, "in its new block, counted");
  const events = r.eventsOf(x.public_id);
  t.ok(count(events, "payment.reorged") <= 1, `payment.reorged at most once: ${JSON.stringify(events)}`);
  t.equal(count(events, "payment.confirmed"), count(events, "payment.reorged") + 1, `payment.confirmed once, and once more after each payment.reorged: ${JSON.stringify(events)}`);
  t.equal((await r.get(z.public_id)).amount_received, "1", "the sentinel counted");
});
