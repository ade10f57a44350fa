// Bitcoin payments seen in the mempool: bcoin on regtest behind the Bitcoin Core relay, the
// watcher role reading getrawmempool / getrawtransaction, the real REST API, the checkout page's
// status JSON and the real webhook receiver. Seen with 0 confirmations, then mined and counted at
// the threshold; a 0-confirmation rule counts from the mempool; a double spend mined from a second
// node withdraws the payment (payment.reorged once if it had counted); payment.detected only
// reaches an endpoint that asked for it.
import { existsSync, mkdirSync } from "node:fs";
import path from "node:path";
import { chromium } from "playwright-core";
import t from "tap";
import { applyConfirmationRule } from "../../services/policy/policy.ts";
import { startRegtest } from "../helpers/bitcoin-regtest.ts";
import { call, idemKey, until } from "../helpers/harness.ts";
import { hookHost, signedEvents, webhookSetup } from "../helpers/webhooks.ts";

const chain = await startRegtest();
t.teardown(() => chain.stop());
// BTC counts at 2 confirmations by default; the test keeps it.
const s = await webhookSetup(t, { env: { BITCOIN_TEST_RPC_URL: chain.url, WATCHER_POLL_MS: "100" } });
const { base, creds: a } = s;
// One endpoint takes every type ("*"); the other names payment.detected among a few.
const everything = await s.createEndpoint("/all");
const optIn = await (async () => {
  const res = await call(base, "POST", `/api/v1/merchants/${a.merchant}/webhook-endpoints`, {
    key: a.key,
    body: { url: `https://${hookHost}/detected`, enabled_events: ["payment.detected", "payment.confirmed", "payment.reorged"] },
  });
  if (res.status !== 200) throw new Error(`create endpoint: ${res.status} ${JSON.stringify(res.body)}`);
  return { id: res.body.data.id as string, secret: res.body.data.signing_secret as string };
})();

const intentsPath = `/api/v1/merchants/${a.merchant}/payment-intents`;
async function createIntent(body: Record<string, unknown>) {
  const res = await call(base, "POST", intentsPath, { key: a.key, idempotencyKey: idemKey(), body: { network: "bitcoin", asset: "BTC", ...body } });
  if (res.status !== 200) throw new Error(`create: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.data as { public_id: string; deposit_address: string; required_confirmations: number };
}
const get = async (id: string) => (await call(base, "GET", `${intentsPath}/${id}`, { key: a.key })).body.data;
type Tx = { tx_hash: string; output_index: number; confirmations: number; counted: boolean; amount: string; reason?: string; replaceable: boolean; block_height?: number };

/** Waits until the intent shows an output of `txid` that `ok` accepts; the intent as read then. */
function shows(id: string, txid: string, what: string, ok: (x: Tx, pi: any) => boolean) {
  return until(`${id}: ${what}`, async () => {
    const pi = await get(id);
    const x = (pi.transactions ?? []).find((x: Tx) => x.tx_hash === txid);
    return x && ok(x, pi) ? pi : undefined;
  }, 20_000, () => "");
}

/** The intent's events received at `path`, by event id: a delivery retried (at least once) is the same event. */
const typesAt = (path: string, secret: string, id: string) => {
  const byId = new Map<string, string>();
  for (const e of signedEvents(s.receiver, secret, path)) if (e.data.payment_intent?.public_id === id) byId.set(e.id, e.type);
  return [...byId.values()].sort();
};
const eventsAt = (path: string, secret: string, id: string, count: number) =>
  until(`${count} events of ${id} at ${path}`, async () => (typesAt(path, secret, id).length >= count ? typesAt(path, secret, id) : undefined), 20_000, () =>
    JSON.stringify(typesAt(path, secret, id)),
  );

t.test("a broadcast payment is seen with 0 confirmations at once, then counts at the threshold; each event once", async (t) => {
  const pi = await createIntent({ requested_amount: "0.0025" });
  const { txid } = await chain.pay([{ address: pi.deposit_address, btc: "0.0025" }]);
  // No block is mined: only the mempool can tell.
  const seen = await shows(pi.public_id, txid, "seen in the mempool", (x) => x.confirmations === 0);
  t.equal(seen.status, "pending", "the status does not move for unconfirmed funds");
  t.equal(seen.amount_received, "0");
  t.equal(seen.amount_pending, "0.0025", "seen but not counted");
  const tx = seen.transactions[0] as Tx;
  t.same([tx.counted, tx.reason, tx.replaceable, tx.block_height], [false, "unconfirmed", false, undefined]);
  const metrics = await (await fetch(`http://127.0.0.1:${s.app.ports.ops}/metrics`)).text();
  const inMempool = /^chain_mempool_transactions\{network="bitcoin",environment="test"\} (\d+)$/m.exec(metrics);
  t.ok(Number(inMempool?.[1]) >= 1, `the operator sees the node's mempool read: chain_mempool_transactions ${inMempool?.[1]}`);
  t.match(metrics, /^chain_mempool_read_seconds\{network="bitcoin",environment="test"\} \d/m, "and how long the read took");

  const page = (await (await fetch(`${base}${new URL(seen.checkout_url).pathname}/status.json`)).json()) as { amount_pending: string; required_confirmations: number };
  t.equal(page.amount_pending, "0.0025", "the checkout page's status says so too");
  t.equal(page.required_confirmations, 2);

  await chain.mine();
  const one = await shows(pi.public_id, txid, "mined, 1 confirmation", (x) => x.confirmations === 1);
  t.same([one.status, one.amount_pending, one.transactions[0].reason, one.transactions.length], ["pending", "0.0025", "below_confirmations", 1], "the same output, now in its block");
  await chain.mine();
  const done = await shows(pi.public_id, txid, "counted", (x) => x.counted);
  t.same([done.status, done.amount_received, done.amount_pending], ["confirmed", "0.0025", "0"]);

  t.same(await eventsAt("/detected", optIn.secret, pi.public_id, 2), ["payment.confirmed", "payment.detected"], "the endpoint that named payment.detected gets it, once, and not the creation it did not name");
  t.same(await eventsAt("/all", everything.secret, pi.public_id, 3), ["payment.confirmed", "payment.detected", "payment.intent.created"], '"*" takes payment.detected too (issue 65)');
  const [row] = await s.app.db.em.fork().execute<{ n: number }[]>(
    `select count(*)::int as n from webhook_deliveries d join webhook_events e on e.id = d.event_id where e.payment_intent_id = ? and e.type = 'payment.detected' and d.endpoint_id = ?`,
    [pi.public_id, everything.id],
  );
  t.equal(row?.n, 1, "one delivery of it for the \"*\" endpoint");
});

t.test("a 0-confirmation rule below an amount confirms a small payment from the mempool; a transaction signalling RBF is flagged", async (t) => {
  await applyConfirmationRule(s.app.db.em.fork(), { merchantId: a.merchant, environment: "test" }, {
    network: "bitcoin",
    asset: "BTC",
    confirmations: 2,
    belowAmount: "0.01",
    belowConfirmations: 0,
    allowUnconfirmed: true,
  });
  const small = await createIntent({ requested_amount: "0.005" });
  t.equal(small.required_confirmations, 0);
  const { txid } = await chain.pay([{ address: small.deposit_address, btc: "0.005" }], { rbf: true });
  const now = await shows(small.public_id, txid, "counted from the mempool", (x) => x.counted);
  t.same([now.status, now.amount_received, now.amount_pending, now.transactions[0].confirmations], ["confirmed", "0.005", "0", 0]);
  t.equal(now.transactions[0].replaceable, true, "BIP 125 signalled: the merchant can see the payer may replace it");
  await chain.mine();
  const mined = await shows(small.public_id, txid, "mined", (x) => x.confirmations === 1);
  t.same([mined.status, mined.transactions[0].replaceable], ["confirmed", false], "mined: no longer replaceable, still confirmed");
  t.same(await eventsAt("/detected", optIn.secret, small.public_id, 1), ["payment.confirmed"], "counted at once: nothing was pending to detect");
});

t.test("a double spend mined from a second node withdraws the payment; one that had counted goes back with payment.reorged, once", async (t) => {
  // The rule of the test above still holds: below 0.01 counts at 0.
  const counted = await createIntent({ requested_amount: "0.004" });
  const waiting = await createIntent({ requested_amount: "0.5" });
  const paid = await chain.pay([
    { address: counted.deposit_address, btc: "0.004" },
    { address: waiting.deposit_address, btc: "0.5" },
  ]);
  await shows(counted.public_id, paid.txid, "counted from the mempool", (x) => x.counted);
  await shows(waiting.public_id, paid.txid, "seen", (x) => x.confirmations === 0);
  // The same coin spent again, to the payer only, mined by another node and handed over as a block.
  const other = await chain.pay([], { coinbase: paid.coinbase, send: false, fee: 20_000 });
  await chain.mineElsewhere(other.raw);

  const back = await shows(counted.public_id, paid.txid, "withdrawn", (x) => x.reason === "withdrawn");
  t.same([back.status, back.amount_received, back.amount_pending, back.transactions[0].counted], ["pending", "0", "0", false]);
  const gone = await shows(waiting.public_id, paid.txid, "withdrawn", (x) => x.reason === "withdrawn");
  t.same([gone.status, gone.amount_pending], ["pending", "0"]);

  // Sentinel: a later payment to the counted intent is seen and counted; the withdrawn one stays out.
  const again = await chain.pay([{ address: counted.deposit_address, btc: "0.004" }]);
  const repaid = await shows(counted.public_id, again.txid, "the new payment counted", (x) => x.counted);
  t.equal(repaid.status, "confirmed");
  t.equal(repaid.transactions.find((x: Tx) => x.tx_hash === paid.txid)?.reason, "withdrawn");
  t.same(
    await eventsAt("/all", everything.secret, counted.public_id, 4),
    ["payment.confirmed", "payment.confirmed", "payment.intent.created", "payment.reorged"],
    "payment.reorged once, for the withdrawn payment that had counted",
  );
  const recorded = await s.app.db.em.fork().execute<{ type: string; n: number }[]>(
    `select type, count(*)::int as n from webhook_events where payment_intent_id = ? and type like 'payment.%' group by type order by type`,
    [counted.public_id],
  );
  t.same(recorded, [{ type: "payment.confirmed", n: 2 }, { type: "payment.intent.created", n: 1 }, { type: "payment.reorged", n: 1 }], "as recorded: withdrawn once, never back");
  t.same(await eventsAt("/detected", optIn.secret, waiting.public_id, 1), ["payment.detected"], "the intent that only saw it: detected, never reorged");
});

const executablePath = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
const noBrowser = existsSync(executablePath) ? false : `no Chromium at ${executablePath}: install it (apt-get install chromium) or set CHROMIUM_PATH`;

t.test("the checkout page on a phone says the payment is seen and waits for its confirmations, without a reload", { skip: noBrowser }, async (t) => {
  const browser = await chromium.launch({ executablePath, args: ["--no-sandbox"] });
  t.teardown(() => browser.close());
  const context = await browser.newContext({ viewport: { width: 390, height: 844 }, deviceScaleFactor: 2, locale: "en-US" });
  const page = await context.newPage();
  const pageErrors: string[] = [];
  page.on("pageerror", (err) => pageErrors.push(err.message));
  t.teardown(() => void (pageErrors.length > 0 && console.error("page errors:", pageErrors)));
  const pi = await createIntent({ requested_amount: "0.031" });
  const pagePath = new URL((await get(pi.public_id)).checkout_url).pathname;
  await page.goto(`${base}${pagePath}`);
  await page.evaluate("window.__marker = 'same page'");
  t.equal(await page.locator("#seen").isVisible(), false, "nothing seen yet");
  // (0.031: above the 0-confirmation rule set above, so it waits for 2.) CHECKOUT_SCREENSHOT_DIR=dir saves the page before and after.
  const shots = process.env.CHECKOUT_SCREENSHOT_DIR;
  if (shots) mkdirSync(shots, { recursive: true });
  if (shots) await page.screenshot({ path: path.join(shots, "checkout-bitcoin-waiting.png"), fullPage: true });

  const { txid } = await chain.pay([{ address: pi.deposit_address, btc: "0.031" }]);
  await page.locator("#status-title", { hasText: "Payment seen" }).waitFor({ timeout: 20_000 });
  t.equal(
    ((await page.locator("#status-detail").textContent()) ?? "").trim(),
    "Your payment of 0.031 BTC is on the network: 0 of 2 confirmations so far. Do not send it again; you can keep this page open.",
    "the whole amount seen: the shopper is told it is on its way and how far, not to send it",
  );
  t.equal(await page.locator("#pay").isVisible(), false, "no countdown, address buttons or QR code inviting a second payment");
  t.equal(await page.locator("#seen").isVisible(), false, "and not twice");
  t.equal((await get(pi.public_id)).status, "pending", "the intent is still pending");
  t.equal(await page.evaluate("window.__marker"), "same page", "no reload");
  if (shots) await page.screenshot({ path: path.join(shots, "checkout-bitcoin-seen.png"), fullPage: true });

  await chain.mine(2);
  await shows(pi.public_id, txid, "counted", (x) => x.counted);
  await page.locator("#status-title", { hasText: /^\s*Paid\s*$/ }).waitFor({ timeout: 20_000 });
  if (shots) await page.screenshot({ path: path.join(shots, "checkout-bitcoin-paid.png"), fullPage: true });
});
