// A deep fork reported in parts (issue 46), against anvil followed by the app's in-process watcher,
// ethereum Test (ETHEREUM_CONFIRMATIONS=3), a merchant whose confirmation policy asks 30 for USDC.
// The follower reports a fork in batches of 20 blocks on EVM; a 45-block fork that starts above a
// payment's block never lowers that payment's confirmations: the new branch is as high as the old.
// Today's core takes the first batch's top as the best tip (25 below the old one), derives the
// payment's confirmations from it (26 < 30), withdraws it, and counts it again two batches later.
import t from "tap";
import { reorgSetup } from "../helpers/reorg.ts";
import { consumerDrained } from "../helpers/webhooks.ts";

const r = await reorgSetup(t);

t.test("a 45-block fork above a payment with 30 confirmations, reported in parts: the payment stays confirmed, no payment.reorged", async (t) => {
  t.teardown(async () => {
    if (!t.passing()) console.error(await r.diagnosis());
  });
  await r.confirmations("USDC", 30);
  const x = await r.createIntent("5");
  t.equal(x.required_confirmations, 30, "the merchant's policy: 30 confirmations");
  const paid = await r.pay(x, "5");
  await r.mine();
  const P = await r.head();
  await r.mine(50);
  await r.statusIs(x.public_id, "confirmed");
  await r.eventSeen(x.public_id, "payment.confirmed");
  const T = await r.caughtUp();

  // Statuses of the payment, read through REST from the fork until the sentinel is counted.
  const seen = new Set<string>();
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      seen.add((await r.get(x.public_id)).status);
      await new Promise((done) => setTimeout(done, 20));
    }
  })();

  const depth = 45;
  await r.reorg(depth);
  const fork = T - depth + 1;
  t.equal(await r.head(), T, "the new branch is as high as the old one");
  t.equal(fork - P, 6, "the fork starts 6 blocks above the payment's block");
  t.equal((await r.dev.public.getTransactionReceipt({ hash: paid.hash })).blockNumber, BigInt(P), "the payment's block stays on the best chain");

  // The sentinel: a payment on the new branch, counted once the watcher got past the whole fork.
  const y = await r.createIntent("1");
  await r.pay(y, "1");
  await r.mine(30);
  try {
    await r.statusIs(y.public_id, "confirmed");
    await r.eventSeen(y.public_id, "payment.confirmed");
    await consumerDrained(r.s);
  } finally {
    sampling = false;
    await sampler;
  }

  const now = await r.get(x.public_id);
  t.same([...seen], ["confirmed"], "the payment was confirmed at every read while the fork was reported");
  t.same([now.status, now.amount_received, now.transactions.length], ["confirmed", "5", 1], "confirmed, counted once, listed once");
  t.match(now.transactions[0], { tx_hash: paid.hash, block_height: P, counted: true }, "in its own block");
  t.same(r.eventsOf(x.public_id), ["payment.confirmed", "payment.intent.created"], "no payment.reorged (nor a second payment.confirmed) for a payment the fork never reached");
});
