// An intent offering several payment methods (issue 62): priced once in USD, each method quoted
// from the same rates (RATE_SOURCES=fixed: 1 ETH = 2500 USD, USDC at its peg), an address per
// network, the top-level method fields null until a payment chooses one. Paid for real on two
// anvil chains (ethereum's Test chain and base's), followed by the built-in EVM watcher and read
// through REST and the merchant's webhooks (counted by event id).
import path from "node:path";
import { chromium } from "playwright-core";
import t from "tap";
import { axeViolations, executablePath, noBrowser, screenshotsDir } from "../helpers/browser.ts";
import type { Hex } from "viem";
import { signPayment, startDevChain } from "../../scripts/devchain/chain.ts";
import { applyAcceptedMethods } from "../../services/policy/policy.ts";
import { createSiteCredential } from "../../services/site/credentials.ts";
import { createCashierSession } from "../../services/terminal/sessions.ts";
import { dashboardClient } from "../helpers/dashboard.ts";
import { call, idemKey, merchantWithKey, until } from "../helpers/harness.ts";
import { webhookSetup } from "../helpers/webhooks.ts";

const [ethereum, base] = await Promise.all([startDevChain({ network: "ethereum" }), startDevChain({ network: "base" })]);
t.teardown(() => Promise.all([ethereum.stop(), base.stop()]));

// 2 confirmations instead of the asset table's: the test mines every block itself.
const s = await webhookSetup(t, {
  env: {
    CHECKOUT_BASE_URL: "http://127.0.0.1/checkout",
    DASHBOARD_BASE_URL: "http://127.0.0.1/dashboard",
    ETHEREUM_TEST_RPC_URL: ethereum.url,
    BASE_TEST_RPC_URL: base.url,
    ETHEREUM_CONFIRMATIONS: "2",
    BASE_CONFIRMATIONS: "2",
    WATCHER_POLL_MS: "100",
    RATE_SOURCES: "fixed",
    // Only the two built-in watchers follow chains here: "all" offers what they follow.
    OPERATOR_WATCHED_NETWORKS: "",
  },
});
await s.createEndpoint();
const intents = `/api/v1/merchants/${s.creds.merchant}/payment-intents`;
const create = (body: object) => call(s.base, "POST", intents, { key: s.creds.key, idempotencyKey: idemKey(), body });
const get = async (id: string) => (await call(s.base, "GET", `${intents}/${id}`, { key: s.creds.key })).body.data;
const position = async (network: string) =>
  (await s.app.db.em.fork().execute<{ height: string | null }[]>(`select height from chain_watchers where network = ? and environment = 'test'`, [network]))[0]?.height;
await until("both watchers saved a position", async () => (await position("ethereum")) != null && (await position("base")) != null, 30_000);

interface Method {
  network: string;
  asset: string;
  requested_amount: string;
  amount_due: string;
  deposit_address: Hex;
  payment_uri: string;
  quote: { rate: string } | null;
  chosen: boolean;
}

/** The webhooks received about an intent, one per event id, in order of arrival. */
function eventsOf(id: string): { id: string; type: string; data: any }[] {
  const seen = new Map<string, { id: string; type: string; data: any }>();
  for (const r of s.receiver.requests) {
    const body = JSON.parse(r.body.toString());
    if (body.data?.payment_intent?.public_id === id && !seen.has(body.id)) seen.set(body.id, body);
  }
  return [...seen.values()];
}

/** 19.99 USD in ETH or USDC on ethereum, or USDC on base: the shop. */
const shopPrice = {
  price_amount: "19.99",
  price_currency: "USD",
  payment_methods: [
    { network: "ethereum", asset: "ETH" },
    { network: "ethereum", asset: "USDC" },
    { network: "base", asset: "USDC" },
  ],
};

const methodOf = (pi: { payment_methods: Method[] }, network: string, asset: string) => pi.payment_methods.find((m) => m.network === network && m.asset === asset) as Method;

async function mineUntil(dev: typeof base, id: string, done: (pi: any) => boolean, what: string) {
  return until(
    what,
    async () => {
      await dev.test.mine({ blocks: 1 });
      const pi = await get(id);
      return done(pi) ? pi : undefined;
    },
    30_000,
  );
}

t.test("19.99 USD in ETH or USDC on ethereum or USDC on base: a USDC payment on base chooses base; a later ETH payment is an exception", async (t) => {
  const created = await create(shopPrice);
  t.equal(created.status, 200, JSON.stringify(created.body));
  const pi = created.body.data;
  t.same([pi.network, pi.asset, pi.requested_amount, pi.deposit_address, pi.payment_uri, pi.amount_due], [null, null, null, null, null, null], "no one method until a payment chooses");
  t.same([pi.price_amount, pi.price_currency, pi.status], ["19.99", "USD", "pending"]);
  t.equal(pi.payment_methods.length, 3, "three quoted methods");
  const eth = methodOf(pi, "ethereum", "ETH");
  const usdcEth = methodOf(pi, "ethereum", "USDC");
  const usdcBase = methodOf(pi, "base", "USDC");
  t.same([eth.requested_amount, eth.quote?.rate], ["0.007996", "2500"], "ETH at 2500 USD, rounded up in wei");
  t.same([usdcEth.requested_amount, usdcBase.requested_amount], ["19.99", "19.99"], "USDC at its peg");
  t.equal(eth.deposit_address, usdcEth.deposit_address, "one address for ethereum's assets");
  t.equal(usdcBase.deposit_address, usdcEth.deposit_address, "and base too: the built-in Test key's one index is one address on every EVM chain");
  t.match(usdcBase.payment_uri, /^ethereum:0x[0-9a-fA-F]{40}@84532\/transfer\?address=0x[0-9a-fA-F]{40}&uint256=19990000$/, "EIP-681 on base's Test chain");
  t.ok(pi.payment_methods.every((m: Method) => !m.chosen && m.amount_due === m.requested_amount), "none chosen; each asks its amount");

  const paid = await signPayment(base, usdcBase.deposit_address, "19.99", "USDC", 6);
  const confirmed = await mineUntil(base, pi.public_id, (x) => x.status === "confirmed", `${pi.public_id} confirmed by its base payment`);
  t.same([confirmed.network, confirmed.asset, confirmed.requested_amount, confirmed.deposit_address, confirmed.amount_received], ["base", "USDC", "19.99", usdcBase.deposit_address, "19.99"]);
  t.same(confirmed.payment_methods.filter((m: Method) => m.chosen).map((m: Method) => `${m.network}/${m.asset}`), ["base/USDC"], "base's USDC chosen");
  t.equal(methodOf(confirmed, "ethereum", "ETH").amount_due, "0", "the others ask nothing now");
  t.same([confirmed.transactions[0].tx_hash, confirmed.transactions[0].network], [paid.hash, "base"]);

  // A later ETH payment to its ethereum address: recorded, never counted, told as an exception.
  const late = await signPayment(ethereum, eth.deposit_address, eth.requested_amount, "ETH", 18);
  const excepted = await until(
    "payment.exception other_method",
    async () => {
      await ethereum.test.mine({ blocks: 1 });
      return eventsOf(pi.public_id).find((e) => e.type === "payment.exception");
    },
    30_000,
  );
  t.same([excepted.data.exception.reason, excepted.data.exception.transaction.tx_hash, excepted.data.exception.transaction.network], ["other_method", late.hash, "ethereum"]);
  const after = await get(pi.public_id);
  t.same([after.status, after.amount_received, after.network], ["confirmed", "19.99", "base"], "nothing more counted");
  const ethTx = after.transactions.find((x: { tx_hash: string }) => x.tx_hash === late.hash);
  t.same([ethTx?.counted, ethTx?.reason, ethTx?.network], [false, "other_method", "ethereum"]);
  const types = eventsOf(pi.public_id).map((e) => e.type);
  t.equal(types.filter((x) => x === "payment.confirmed").length, 1, "one payment.confirmed");
  t.equal(types.filter((x) => x === "payment.exception").length, 1, "one payment.exception");
});

t.test("an underpayment on the chosen method, topped up on it, confirms; a top-up by another method is an exception", async (t) => {
  const created = await create({ requested_amount: "10", payment_methods: [{ network: "ethereum", asset: "USDC" }, { network: "base", asset: "USDC" }] });
  t.equal(created.status, 200, JSON.stringify(created.body));
  const pi = created.body.data;
  t.same(pi.payment_methods.map((m: Method) => m.requested_amount), ["10", "10"], "one asset: one amount, no price needed");
  const onBase = methodOf(pi, "base", "USDC");
  const onEth = methodOf(pi, "ethereum", "USDC");

  await signPayment(base, onBase.deposit_address, "4", "USDC", 6);
  const under = await mineUntil(base, pi.public_id, (x) => x.status === "underpaid", "underpaid on base");
  t.same([under.network, under.amount_due], ["base", "6"]);

  const other = await signPayment(ethereum, onEth.deposit_address, "6", "USDC", 6);
  await until(
    "the ethereum top-up told as other_method",
    async () => {
      await ethereum.test.mine({ blocks: 1 });
      return eventsOf(pi.public_id).find((e) => e.type === "payment.exception" && e.data.exception.transaction.tx_hash === other.hash);
    },
    30_000,
  );
  // The sentinel: the intent is still underpaid once the exception was told (same settlement).
  t.same([(await get(pi.public_id)).status, (await get(pi.public_id)).amount_received], ["underpaid", "4"], "the other method's 6 USDC not counted");

  await signPayment(base, onBase.deposit_address, "6", "USDC", 6);
  const done = await mineUntil(base, pi.public_id, (x) => x.status === "confirmed", "confirmed by the top-up on base");
  t.same([done.amount_received, done.network], ["10", "base"]);
});

t.test("the same Idempotency-Key twice: one intent, the same methods and addresses", async (t) => {
  const key = idemKey();
  const body = { price_amount: "7", price_currency: "USD", payment_methods: [{ network: "ethereum", asset: "USDC" }, { network: "base", asset: "USDC" }] };
  const first = await call(s.base, "POST", intents, { key: s.creds.key, idempotencyKey: key, body });
  const again = await call(s.base, "POST", intents, { key: s.creds.key, idempotencyKey: key, body });
  t.equal(first.status, 200, JSON.stringify(first.body));
  t.same(again.body.data, first.body.data, "the stored answer");
  const [n] = await s.app.db.em.fork().execute<{ n: number }[]>(`select count(*)::int as n from payment_intent_methods where intent_id = ?`, [first.body.data.public_id]);
  t.equal(n?.n, 2, "an address row per network, once");
  // The one-statement create (after others of these networks) shares it too.
  const [onEth, onBase] = first.body.data.payment_methods as Method[];
  t.equal(onEth?.deposit_address, onBase?.deposit_address, "one address for ethereum and base, an index used once");
});

t.test("a reorg on base takes the choosing payment back, as on ethereum: the choice stands, and the transaction mined again confirms it again", async (t) => {
  const created = await create({ requested_amount: "7", payment_methods: [{ network: "ethereum", asset: "USDC" }, { network: "base", asset: "USDC" }] });
  const pi = created.body.data;
  const { hash, raw } = await signPayment(base, methodOf(pi, "base", "USDC").deposit_address, "7", "USDC", 6);
  await mineUntil(base, pi.public_id, (x) => x.status === "confirmed", "confirmed on base");
  // The blocks from the payment's are replaced by empty ones (anvil sends no removed logs).
  const blocks = Number(await base.public.getBlockNumber()) - Number((await base.public.getTransactionReceipt({ hash })).blockNumber) + 1;
  await base.test.request({ method: "anvil_reorg" as never, params: [blocks, []] as never });
  const gone = await mineUntil(base, pi.public_id, (x) => x.status === "pending", "the reorg seen");
  t.same([gone.network, gone.amount_received, gone.transactions.find((x: { tx_hash: string }) => x.tx_hash === hash)?.counted], ["base", "0", false], "taken back; base stays chosen");
  await base.public.sendRawTransaction({ serializedTransaction: raw });
  const back = await mineUntil(base, pi.public_id, (x) => x.status === "confirmed", "counted again");
  t.same([back.network, back.amount_received], ["base", "7"]);
  // Delivered after the intent moved: wait for them, then nothing else may be among them.
  const types = await until(
    "payment.confirmed twice and payment.reorged at the receiver",
    async () => {
      const now = eventsOf(pi.public_id).map((e) => e.type);
      return now.filter((x) => x === "payment.confirmed").length >= 2 && now.includes("payment.reorged") ? now : undefined;
    },
    20_000,
  );
  // payment.detected too, once, if the watcher saw the payment short of its confirmations.
  t.same(types.filter((x) => x !== "payment.intent.created" && x !== "payment.detected").sort(), ["payment.confirmed", "payment.confirmed", "payment.reorged"], "each event once");
  t.ok(types.filter((x) => x === "payment.detected").length <= 1, "detected at most once");
});

t.test("the dashboard's payment page lists the methods, the chosen one marked once a payment chose it", async (t) => {
  const pi = (await create({ requested_amount: "2", payment_methods: [{ network: "ethereum", asset: "USDC" }, { network: "base", asset: "USDC" }] })).body.data;
  const dash = dashboardClient(s.base);
  t.equal((await dash.signIn(s.creds.key)).status, 303, "signed in");
  const page = async () => (await dash.get(`/dashboard/payments/${pi.public_id}`)).body;
  const before = await page();
  t.match(before, /id="payment-methods"/);
  t.match(before, new RegExp(`2 USDC on base<br><code class="hash">${methodOf(pi, "base", "USDC").deposit_address}`), "each method with its address");
  t.notMatch(before, /\(chosen\)/, "none chosen yet");
  t.match(before, /the shopper's choice: none made yet/);
  await signPayment(base, methodOf(pi, "base", "USDC").deposit_address, "2", "USDC", 6);
  await mineUntil(base, pi.public_id, (x) => x.status === "confirmed", "confirmed on base");
  t.match(await page(), /2 USDC on base <strong>\(chosen\)<\/strong>/, "base marked chosen");
});

t.test("bad method lists: 400 naming the field, nothing created", async (t) => {
  const before = (await call(s.base, "GET", intents, { key: s.creds.key })).body.data.length;
  const cases: [object, string][] = [
    [{ requested_amount: "10", payment_methods: [{ network: "ethereum", asset: "ETH" }, { network: "base", asset: "USDC" }] }, "price_amount"],
    [{ price_amount: "10", price_currency: "USD", payment_methods: [] }, "payment_methods"],
    [{ price_amount: "10", price_currency: "USD", payment_methods: "some" }, "payment_methods"],
    [{ price_amount: "10", price_currency: "USD", payment_methods: [{ network: "base", asset: "DOGE" }] }, "payment_methods[0].asset"],
    [{ price_amount: "10", price_currency: "USD", payment_methods: [{ network: "moon", asset: "USDC" }] }, "payment_methods[0].network"],
    [{ price_amount: "10", price_currency: "USD", payment_methods: [{ network: "base", asset: "USDC" }, { network: "base", asset: "USDC" }] }, "payment_methods[1]"],
    [{ price_amount: "10", price_currency: "USD", network: "base", asset: "USDC", payment_methods: [{ network: "base", asset: "USDC" }] }, "payment_methods"],
    [{ price_amount: "10", price_currency: "USD" }, "network"],
  ];
  for (const [body, param] of cases) {
    const res = await create(body);
    t.equal(res.status, 400, `${JSON.stringify(body)}: ${JSON.stringify(res.body)}`);
    t.equal(res.body.error?.param, param, `names ${param}: ${res.body.error?.message}`);
  }
  t.equal((await call(s.base, "GET", intents, { key: s.creds.key })).body.data.length, before, "nothing was created");

  // Live: a method on a chain no watcher follows is refused, as a one-method create there is.
  const live = await merchantWithKey(s.app, "live");
  const refused = await call(s.base, "POST", `/api/v1/merchants/${live.merchant}/payment-intents`, {
    key: live.key,
    idempotencyKey: idemKey(),
    body: { requested_amount: "10", payment_methods: [{ network: "base", asset: "USDC" }, { network: "polygon", asset: "USDC" }] },
  });
  t.equal(refused.status, 409, JSON.stringify(refused.body));
  t.same([refused.body.error?.code, refused.body.error?.param], ["network_not_watched", "payment_methods[0].network"], "the first method no watcher follows in live");
});

t.test('"all": the merchant\'s accepted methods a watcher follows, quoted; one method asked is an intent of one method', async (t) => {
  const offered = async () => {
    const all = await create({ price_amount: "5", price_currency: "USD", payment_methods: "all" });
    t.equal(all.status, 200, JSON.stringify(all.body));
    return all.body.data.payment_methods.map((m: Method) => `${m.network}.${m.asset}`).sort();
  };
  t.same(await offered(), ["base.ETH", "base.USDC", "ethereum.ETH", "ethereum.USDC", "ethereum.USDT"], "by default every asset of the two followed chains");
  const owner = { merchantId: s.creds.merchant, environment: "test" as const };
  const policy = await applyAcceptedMethods(s.app.db.em.fork(), owner, ["base.USDC", "ethereum.ETH", "tron.USDT"]);
  t.same(policy.accepted_methods, ["base.USDC", "ethereum.ETH", "tron.USDT"]);
  t.same(await offered(), ["base.USDC", "ethereum.ETH"], "the accepted ones a watcher follows (tron is not followed here)");
  await applyAcceptedMethods(s.app.db.em.fork(), owner, null);
  t.equal((await offered()).length, 5, "reset: every one followed again");
  const one = await create({ requested_amount: "3", payment_methods: [{ network: "base", asset: "USDC" }] });
  t.equal(one.status, 200, JSON.stringify(one.body));
  t.same([one.body.data.network, one.body.data.asset, one.body.data.requested_amount], ["base", "USDC", "3"]);
  t.same(one.body.data.payment_methods.map((m: Method) => [m.network, m.chosen]), [["base", true]]);
});

t.test("the Site Gateway and the terminal take payment_methods as the API does", async (t) => {
  const methods = [{ network: "ethereum", asset: "ETH" }, { network: "base", asset: "USDC" }];
  const site = await createSiteCredential(s.app.db.em.fork(), s.creds.merchant, "test", ["https://shop.example"]);
  const viaSite = await call(s.base, "POST", "/api/v1/site-payment-intents", { key: site.credential, idempotencyKey: idemKey(), body: { price_amount: "25", price_currency: "USD", payment_methods: methods } });
  t.equal(viaSite.status, 200, JSON.stringify(viaSite.body));
  t.same(viaSite.body.data.payment_methods.map((m: Method) => [m.network, m.asset, m.requested_amount]), [["ethereum", "ETH", "0.01"], ["base", "USDC", "25"]], "the shopper view lists the methods");
  t.same([viaSite.body.data.network, viaSite.body.data.asset, viaSite.body.data.requested_amount, viaSite.body.data.deposit_address], [null, null, null, null], "none chosen: null, as in the merchant's view");
  const session = await createCashierSession(s.app.db.em.fork(), { merchantId: s.creds.merchant, environment: "test", cashier: "Ana", terminal: "Till 1" });
  const viaTill = await call(s.base, "POST", "/api/v1/terminal/pos/payment", { key: session.session, idempotencyKey: idemKey(), body: { price_amount: "25", price_currency: "USD", payment_methods: methods } });
  t.equal(viaTill.status, 200, JSON.stringify(viaTill.body));
  t.same([viaTill.body.data.source, viaTill.body.data.payment_methods.length, viaTill.body.data.network], ["pos", 2, null]);
});

const shots = screenshotsDir();


t.test("the checkout page in a phone browser: pick a method, change the pick, pay it, see it confirm with only that method left", { skip: noBrowser }, async (t) => {
  const created = await create(shopPrice);
  t.equal(created.status, 200, JSON.stringify(created.body));
  const pi = created.body.data;
  const onBase = methodOf(pi, "base", "USDC");
  const browser = await chromium.launch({ executablePath, args: ["--no-sandbox"] });
  t.teardown(() => browser.close());
  const page = await (await browser.newContext({ viewport: { width: 390, height: 844 }, locale: "en-US" })).newPage();
  const errors: string[] = [];
  page.on("pageerror", (err) => errors.push(err.message));
  page.on("console", (msg) => {
    if (/Content[- ]Security[- ]Policy|Refused to/i.test(msg.text())) errors.push(msg.text());
  });
  const text = async (selector: string) => ((await page.locator(selector).textContent()) ?? "").trim();
  const pageUrl = `${s.base}/checkout/${pi.public_id}`;

  t.equal((await page.goto(pageUrl))?.status(), 200);
  t.equal(await text("#price"), "19.99 USD", "the price in fiat");
  t.equal(await text("#status-title"), "Choose how to pay");
  const names = await page.locator("#methods a.method .method-name").allTextContents();
  t.same(names, ["ETH on Ethereum Sepolia testnet", "USDC on Ethereum Sepolia testnet", "USDC on Base Sepolia testnet"], "one button per method, named as people know them");
  t.same(await page.locator("#methods a.method .method-amount").allTextContents(), ["0.007996 ETH", "19.99 USDC", "19.99 USDC"], "each with its amount");
  t.equal(await page.locator("#address").count(), 0, "no address before a pick");
  t.same(await axeViolations(page), [], "the picker: no serious or critical axe violation");
  await page.screenshot({ path: path.join(shots, "methods-picker.png"), fullPage: true });

  // Keyboard: the first method is reached by Tab and opened by Enter.
  await page.locator("#methods a.method").first().focus();
  await page.keyboard.press("Enter");
  await page.waitForURL(/method=ethereum\.ETH/);
  t.same([await text("#amount"), await text("#asset"), await text("#network")], ["0.007996", "ETH", "Ethereum Sepolia testnet"], "ETH picked");
  t.ok(await page.locator("#qr svg").isVisible(), "its QR code");

  await page.locator("#change-method").click();
  await page.waitForURL((u) => !u.search.includes("method="));
  await page.getByRole("link", { name: /USDC on Base Sepolia testnet/ }).click();
  await page.waitForURL(/method=base\.USDC/);
  t.same([await text("#amount"), await text("#asset"), await text("#network")], ["19.99", "USDC", "Base Sepolia testnet"], "the pick changed to USDC on base");
  t.equal(await text("#address"), onBase.deposit_address, "base's address");
  t.match(await page.locator("#wallet").getAttribute("href"), /@84532\/transfer\?address=/, "the wallet link on base's chain");
  t.same(await axeViolations(page), [], "the picked method: no serious or critical axe violation");
  await page.screenshot({ path: path.join(shots, "methods-picked.png"), fullPage: true });

  await signPayment(base, onBase.deposit_address, "19.99", "USDC", 6);
  await until(
    "the page shows it paid, by itself",
    async () => {
      await base.test.mine({ blocks: 1 });
      return (await text("#status-title")) === "Paid";
    },
    30_000,
  );
  t.equal(await page.locator("#change-method").count(), 0, "no other method offered once paid");
  // Asking for another method now shows the chosen one.
  await page.goto(`${pageUrl}?method=ethereum.ETH`);
  t.same([await text("#asset"), await text("#network")], ["USDC", "Base Sepolia testnet"], "the chosen method, whatever was asked");
  t.equal(await page.locator("#methods").count(), 0, "no picker");
  t.same(errors, [], "no script error and nothing refused by the CSP");

  // Without JavaScript the picker is links: they work as they are.
  const other = await create({ price_amount: "5", price_currency: "USD", payment_methods: [{ network: "ethereum", asset: "ETH" }, { network: "base", asset: "USDC" }] });
  const plain = await (await browser.newContext({ viewport: { width: 390, height: 844 }, javaScriptEnabled: false })).newPage();
  await plain.goto(`${s.base}/checkout/${other.body.data.public_id}`);
  await plain.getByRole("link", { name: /ETH on Ethereum/ }).click();
  await plain.waitForURL(/method=ethereum\.ETH/);
  t.equal(((await plain.locator("#amount").textContent()) ?? "").trim(), "0.002", "5 USD in ETH, without JavaScript");
});
