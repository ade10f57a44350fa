// The EVM chain watcher against a real node: Foundry's anvil (mining only when told), the Test
// token contracts placed at the asset table's addresses, payments made with real signed
// transactions, followed by the watcher role in the app's process and counted through the real
// REST API, with each event delivered once as a signed webhook.
import t from "tap";
import type { Hex } from "viem";
import { signPayment, startDevChain, testTokenCode, tokenAbi } from "../../scripts/devchain/chain.ts";
import { call, idemKey, merchantWithKey, until } from "../helpers/harness.ts";
import { eventsOnce, hookHost, webhookSetup } from "../helpers/webhooks.ts";
import { runCli } from "../helpers/processes.ts";
import { encodeFunctionData, parseUnits } from "viem";

const dev = await startDevChain();
t.teardown(() => dev.stop());
const s = await webhookSetup(t, { env: { ETHEREUM_TEST_RPC_URL: dev.url, ETHEREUM_CONFIRMATIONS: "3", WATCHER_POLL_MS: "100" } });
const { base, creds: a } = s;
const endpoint = await s.createEndpoint();
// An endpoint that names payment.exception alone (the one above takes "*": every type, this one too).
const exceptionsEndpoint = await call(base, "POST", `/api/v1/merchants/${s.creds.merchant}/webhook-endpoints`, {
  key: s.creds.key,
  body: { url: `https://${hookHost}/exceptions`, enabled_events: ["payment.exception"] },
});
const intentsPath = (m = a.merchant) => `/api/v1/merchants/${m}/payment-intents`;

async function createIntent(body: Record<string, unknown>, c = a) {
  const res = await call(base, "POST", intentsPath(c.merchant), { key: c.key, idempotencyKey: idemKey(), body: { network: "ethereum", ...body } });
  if (res.status !== 200) throw new Error(`create: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.data as { public_id: string; deposit_address: Hex; asset: string };
}
const get = async (id: string, c = a) => (await call(base, "GET", `${intentsPath(c.merchant)}/${id}`, { key: c.key })).body.data;
const mine = (blocks = 1) => dev.test.mine({ blocks });
const decimals = (asset: string) => (asset === "ETH" ? 18 : 6);
const pay = (pi: { deposit_address: Hex; asset: string }, amount: string, asset = pi.asset) => signPayment(dev, pi.deposit_address, amount, asset, decimals(asset));

/** Waits until the intent shows `tx` with `confirmations`: a GET is one snapshot, so that read's status goes with it. */
function seen(id: string, tx: string, confirmations: number) {
  return until(`${id} shows ${tx} at ${confirmations} confirmations`, async () => {
    const pi = await get(id);
    return pi.transactions?.some((x: { tx_hash: string; confirmations: number }) => x.tx_hash === tx && x.confirmations === confirmations) ? pi : undefined;
  }, 20_000, () => "");
}

/**
 * The event types the receiver got for an intent (signatures checked), in any order; payment.detected
 * aside ("*" takes it): it comes or not as the watcher first sees a payment below its confirmations
 * or already at them, and the first test asserts it where it must come.
 */
const eventsOf = (id: string, detected = false) =>
  eventsOnce(s.receiver, endpoint.secret).filter((e) => e.data.payment_intent?.public_id === id && (detected || e.type !== "payment.detected")).map((e) => e.type).sort();
const events = (id: string, expected: string[]) =>
  until(`events of ${id}`, async () => (eventsOf(id).length >= expected.length ? eventsOf(id) : undefined), 20_000, () => JSON.stringify(eventsOf(id)));

t.test("a token payment counts exactly at the threshold, as a signed webhook", async (t) => {
  const pi = await createIntent({ asset: "USDC", requested_amount: "12.50" });
  const { hash } = await pay(pi, "12.5");
  await mine();
  let now = await seen(pi.public_id, hash, 1);
  t.equal(now.status, "pending", "1 of 3 confirmations: seen, not counted");
  t.equal(now.transactions[0].counted, false);
  t.equal(now.transactions[0].amount, "12.5");
  t.same([now.transactions[0].asset, now.transactions[0].reason], ["USDC", "below_confirmations"], "why it does not count yet");
  await mine();
  now = await seen(pi.public_id, hash, 2);
  t.equal(now.status, "pending", "2 of 3: still not counted");
  await mine();
  now = await seen(pi.public_id, hash, 3);
  t.equal(now.status, "confirmed", "at 3 it counts");
  t.equal(now.amount_received, "12.5");
  t.type(now.transactions[0].block_height, "number", "block_height is a JSON number");
  t.equal(now.transactions[0].reason, null, "counted: no reason");
  t.same(await events(pi.public_id, ["payment.confirmed", "payment.intent.created"]), ["payment.confirmed", "payment.intent.created"]);
  const withDetected = await until("payment.detected too", async () => (eventsOf(pi.public_id, true).length >= 3 ? eventsOf(pi.public_id, true) : undefined), 20_000);
  t.same(withDetected, ["payment.confirmed", "payment.detected", "payment.intent.created"], "and payment.detected, seen at 1 of 3 confirmations: \"*\" takes it");
});

t.test("native ETH in a top-level transaction, amounts exact to the wei", async (t) => {
  const pi = await createIntent({ asset: "ETH", requested_amount: "0.000000000000000123" });
  const { hash } = await pay(pi, "0.000000000000000123");
  await mine(3);
  const now = await seen(pi.public_id, hash, 3);
  t.equal(now.status, "confirmed");
  t.equal(now.amount_received, "0.000000000000000123");
});

t.test("underpaid, then topped up: confirmed; overpaid", async (t) => {
  const pi = await createIntent({ asset: "USDC", requested_amount: "10" });
  t.equal((await get(pi.public_id)).amount_due, "10", "pending: all of it is due");
  const first = await pay(pi, "4");
  await mine(1);
  const seenOnce = await seen(pi.public_id, first.hash, 1);
  t.same([seenOnce.status, seenOnce.amount_pending, seenOnce.amount_due], ["pending", "4", "10"], "seen, not counted yet: in amount_pending, still due");
  await mine(2);
  const under = await seen(pi.public_id, first.hash, 3);
  t.same([under.status, under.amount_pending, under.amount_due], ["underpaid", "0", "6"], "underpaid: 6 still due");
  const status = (await (await fetch(`${base}/${pi.public_id}/status.json`)).json()) as { amount_due: string };
  t.equal(status.amount_due, under.amount_due, "the checkout page's figure");
  const second = await pay(pi, "6");
  await mine(3);
  const now = await seen(pi.public_id, second.hash, 3);
  t.equal(now.status, "confirmed");
  t.equal(now.amount_received, "10");
  t.equal(now.amount_due, "0", "topped up: nothing due");
  t.same(await events(pi.public_id, ["a", "b", "c"]), ["payment.confirmed", "payment.intent.created", "payment.underpaid"]);
  const underpaidEvent = eventsOnce(s.receiver, endpoint.secret).find((e) => e.type === "payment.underpaid" && e.data.payment_intent?.public_id === pi.public_id);
  t.equal((underpaidEvent?.data.payment_intent as { amount_due?: string } | undefined)?.amount_due, "6", "the webhook's payload carries it");

  const over = await createIntent({ asset: "USDT", requested_amount: "5" });
  const tx = await pay(over, "5.000001");
  await mine(3);
  const o = await seen(over.public_id, tx.hash, 3);
  t.equal(o.status, "overpaid");
  t.equal(o.amount_received, "5.000001");
});

t.test("paid after expiry: late", async (t) => {
  const pi = await createIntent({ asset: "USDC", requested_amount: "3", expires_in_seconds: 60 });
  await s.app.db.em.fork().execute(`update payment_intents set expires_at = now() - interval '1 second' where id = ?`, [pi.public_id]);
  await until("expired by the scheduler", async () => (await get(pi.public_id)).status === "expired", 10_000);
  const { hash } = await pay(pi, "3");
  await mine(3);
  const now = await seen(pi.public_id, hash, 3);
  t.equal(now.status, "late");
  t.same(await events(pi.public_id, ["a", "b", "c"]), ["payment.expired", "payment.intent.created", "payment.late"]);
});

t.test("a reorg takes a counted payment away; the transaction mined again counts again; each event once", async (t) => {
  const pi = await createIntent({ asset: "USDC", requested_amount: "7" });
  const { hash, raw } = await pay(pi, "7");
  await mine(3);
  t.equal((await seen(pi.public_id, hash, 3)).status, "confirmed");
  // The three blocks from the payment's are replaced by empty ones (anvil sends no removed logs).
  await dev.test.request({ method: "anvil_reorg" as never, params: [3, []] as never });
  await mine();
  const gone = await until("the reorg seen", async () => {
    const now = await get(pi.public_id);
    return now.status === "pending" ? now : undefined;
  }, 20_000);
  t.equal(gone.amount_received, "0");
  t.equal(gone.transactions.find((x: { tx_hash: string }) => x.tx_hash === hash)?.counted, false);
  await dev.public.sendRawTransaction({ serializedTransaction: raw });
  await mine(3);
  // The orphaned record kept its 3 confirmations: wait for the one in the new chain to count.
  const back = await until("counted again", async () => {
    const now = await get(pi.public_id);
    return now.status !== "pending" ? now : undefined;
  }, 20_000);
  t.equal(back.status, "confirmed", "the same transaction in the new chain counts again");
  t.equal(back.amount_received, "7");
  const all = await events(pi.public_id, ["a", "b", "c", "d"]);
  t.same(all, ["payment.confirmed", "payment.confirmed", "payment.intent.created", "payment.reorged"]);
});

t.test("another asset of the network to an intent's address: shown, with its asset and why it does not count", async (t) => {
  const pi = await createIntent({ asset: "USDC", requested_amount: "5" });
  const { hash } = await pay(pi, "5", "USDT");
  await mine(3);
  const now = await seen(pi.public_id, hash, 3);
  t.same([now.status, now.amount_received], ["pending", "0"], "it does not count");
  t.match(now.transactions[0], { tx_hash: hash, asset: "USDT", amount: "5", counted: false, reason: "wrong_asset" });
  // The checkout page's status (CHECKOUT_BASE_URL has no path here: the page is at /<id>).
  const status = (await (await fetch(`${base}/${pi.public_id}/status.json`)).json()) as { status: string; other_assets_received: string[] };
  t.same([status.status, status.other_assets_received], ["pending", ["USDT"]], "the checkout page tells the shopper");

  // The merchant is told too: payment.exception, to the endpoint that named it.
  const told = await until("payment.exception reaches the endpoint that named it", async () =>
    eventsOnce(s.receiver, exceptionsEndpoint.body.data.signing_secret, "/exceptions").find((e) => e.type === "payment.exception" && e.data.payment_intent?.public_id === pi.public_id),
  20_000);
  t.match(told.data, {
    payment_intent: { public_id: pi.public_id, status: "pending", amount_due: "5" },
    exception: { reason: "wrong_asset", transaction: { tx_hash: hash, output_index: now.transactions[0].output_index, asset: "USDT", amount: "5", confirmations: 3 } },
  });
  // And to the endpoint made the default way ("*"): a merchant who never heard of payment.exception
  // still learns that the shopper paid in the wrong asset (issue 65; "*" left it out before).
  const toEverything = await until("payment.exception reaches the \"*\" endpoint", async () =>
    eventsOnce(s.receiver, endpoint.secret, new URL(endpoint.url).pathname).find((e) => e.type === "payment.exception" && e.data.payment_intent?.public_id === pi.public_id),
  20_000);
  t.equal(toEverything.id, told.id, "the same event");
  // Three more blocks settle the intent again; still one event, one delivery to each endpoint
  // (its deliveries are decided with the event, in the same transaction).
  await mine(3);
  await seen(pi.public_id, hash, 6);
  const rows = await s.app.db.em.fork().execute<{ url: string }[]>(
    `select e.url from webhook_events ev join webhook_deliveries d on d.event_id = ev.id join webhook_endpoints e on e.id = d.endpoint_id
      where ev.payment_intent_id = ? and ev.type = 'payment.exception' order by e.url`,
    [pi.public_id],
  );
  t.same(rows.map((r) => r.url), [`https://${hookHost}/exceptions`, endpoint.url].sort(), "one payment.exception, one delivery to each endpoint that takes it");

  // Operators find such intents without reading every intent's transactions.
  const listed = await runCli("services/app/ops-cli.ts", { DATABASE_URL: s.databaseUrl }, "payment-exceptions", "--merchant", a.merchant, "--json");
  t.equal(listed.code, 0, listed.stderr);
  const found = (JSON.parse(listed.stdout) as { payment_intent_id: string; intent_asset: string; asset: string; amount: string; tx_hash: string; exception_reported_at: string | null }[]).find(
    (r) => r.payment_intent_id === pi.public_id,
  );
  t.match(found, { intent_asset: "USDC", asset: "USDT", amount: "5", tx_hash: hash }, "ops payment-exceptions lists it");
  t.ok(found?.exception_reported_at, "with when the merchant was told");
});

t.test("another token, a Live intent's address, an address of no intent: nothing counted", async (t) => {
  const pi = await createIntent({ asset: "USDC", requested_amount: "2" });
  // The same token code at an address the asset table does not name.
  const other: Hex = "0x00000000000000000000000000000000000c0ffe";
  await dev.test.setCode({ address: other, bytecode: testTokenCode() });
  await dev.wallet.sendTransaction({ account: dev.payer, chain: dev.wallet.chain, to: other, data: encodeFunctionData({ abi: tokenAbi, functionName: "mint", args: [pi.deposit_address, parseUnits("2", 6)] }) });
  // A Live intent of the same merchant: its address on the Test chain is not its chain.
  const live = await merchantWithKey(s.app, "live", undefined, a.merchant);
  const livePi = await createIntent({ asset: "USDC", requested_amount: "2" }, live);
  await pay(livePi, "2");
  await pay({ deposit_address: "0x000000000000000000000000000000000000bEEF", asset: "USDC" }, "2");
  await mine(3);
  // The sentinel: a payment in a later block, to another intent, seen and counted.
  const sentinel = await createIntent({ asset: "USDC", requested_amount: "1" });
  const tx = await pay(sentinel, "1");
  await mine(3);
  t.equal((await seen(sentinel.public_id, tx.hash, 3)).status, "confirmed");
  const now = await get(pi.public_id);
  t.same([now.status, now.amount_received, now.transactions], ["pending", null, []], "another token's transfer is not seen");
  const l = await get(livePi.public_id, live);
  t.same([l.status, l.transactions], ["pending", []], "a Test chain's payment never matches a Live intent");
  const rows = await s.app.db.em.fork().execute<{ n: string }[]>(`select count(*) as n from chain_observations where lower(to_address) = lower(?)`, ["0x000000000000000000000000000000000000bEEF"]);
  t.equal(Number(rows[0]?.n), 0, "an address of no intent is not watched, so nothing is recorded");
});

t.test("the watcher's position and lease are durable, and its metrics are served", async (t) => {
  const em = s.app.db.em.fork();
  const [row] = await em.execute<{ height: string; holder: string }[]>(`select height, holder from chain_watchers where network = 'ethereum' and environment = 'test'`);
  const head = Number(await dev.public.getBlockNumber());
  t.ok(row && Number(row.height) <= head && Number(row.height) >= head - 1, "the position follows the head");
  const [tip] = await em.execute<{ height: string; hash: string }[]>(`select height, hash from chain_blocks where network = 'ethereum' and environment = 'test' and best order by height desc limit 1`);
  const block = await dev.public.getBlock({ blockNumber: BigInt(tip?.height ?? 0) });
  t.equal(tip?.hash, block.hash.toLowerCase(), "the core keeps the chain: its best tip is the node's block at that height");
  const metrics = await (await fetch(`http://127.0.0.1:${s.app.ports.ops}/metrics`)).text();
  t.match(metrics, /chain_head_height\{network="ethereum",environment="test"\} \d+/);
  t.match(metrics, /chain_watcher_active\{network="ethereum",environment="test"\} 1/);
  t.match(metrics, /chain_observations_reported_total\{network="ethereum",environment="test"\} [1-9]/);
  // As a host's port (":38795"), not as digits: a heap's byte count may hold the same five digits.
  t.notMatch(metrics, new RegExp(`:${dev.port}(?!\\d)`), "the node's URL is not in the metrics");
});
