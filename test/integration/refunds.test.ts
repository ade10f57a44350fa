// Refunds (issue 63): what may be refunded (never more than received, per network and asset,
// under concurrency), the amount a request without one means, the address given with the request
// or later, the events, cancel, and the sandbox simulator paying a Test refund. Against anvil
// followed by the app's in-process watcher (ethereum Test), the REST API and signed webhooks.
import path from "node:path";
import t from "tap";
import { axeViolations, executablePath, noBrowser, screenshotsDir } from "../helpers/browser.ts";
import { chromium } from "playwright-core";
import type { Hex } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { signPayment, startDevChain } from "../../scripts/devchain/chain.ts";
import { call, idemKey, merchantWithKey, until } from "../helpers/harness.ts";
import { createUsdcIntent, eventsOnce, webhookSetup } from "../helpers/webhooks.ts";
import { dashboardClient } from "../helpers/dashboard.ts";

const dev = await startDevChain();
t.teardown(() => dev.stop());
const s = await webhookSetup(t, { env: { ETHEREUM_TEST_RPC_URL: dev.url, ETHEREUM_CONFIRMATIONS: "2", WATCHER_POLL_MS: "100" } });
const { base, creds: a } = s;
const hooks = await s.createEndpoint();
const merchantPath = `/api/v1/merchants/${a.merchant}`;
const intentsPath = `${merchantPath}/payment-intents`;
const customer = "0x8ba1f109551bD432803012645Ac136ddd64DBA72";

const get = async (id: string) => (await call(base, "GET", `${intentsPath}/${id}`, { key: a.key })).body.data;
const pay = (pi: { deposit_address: Hex }, amount: string, asset: "USDC" | "ETH" = "USDC") => signPayment(dev, pi.deposit_address, amount, asset, asset === "USDC" ? 6 : 18);
const refund = (id: string, body: Record<string, unknown> = {}, idempotencyKey = idemKey()) => call(base, "POST", `${intentsPath}/${id}/refunds`, { key: a.key, idempotencyKey, body });
const eventsOf = (refundId: string) =>
  eventsOnce(s.receiver, hooks.secret, new URL(hooks.url).pathname)
    .filter((e) => e.type.startsWith("refund.") && (e.data as { refund?: { id: string } }).refund?.id === refundId);

/** An intent paid `amount` USDC from anvil, counted at two confirmations, at `status`. */
async function paidIntent(requested: string, amount: string, status: string) {
  const pi = await createUsdcIntent(s, requested);
  await pay(pi, amount);
  await dev.test.mine({ blocks: 2 });
  await until(`${pi.public_id} ${status}`, async () => ((await get(pi.public_id)).status === status ? true : undefined), 20_000);
  return pi;
}

t.test("an overpaid intent: a refund with no amount is the overpaid part; the customer's address later; the simulator pays it", async (t) => {
  const pi = await paidIntent("10", "12.5", "overpaid");
  const created = await refund(pi.public_id, { reason: "paid too much" });
  t.equal(created.status, 200, JSON.stringify(created.body));
  const r = created.body.data;
  t.match(r, { payment_intent: pi.public_id, status: "awaiting_address", environment: "test", network: "ethereum", asset: "USDC", amount: "2.5", reason: "paid too much", simulated: false });
  t.match(r.id, /^rf_[0-9A-Za-z]{24}$/);
  t.match(r.claim_url, /^https:\/\/checkout\.example\.test\/refunds\/[0-9A-Za-z]{32}$/, "a claim page while the address is not known");
  t.equal(r.address, null);
  t.equal(r.payment_uri, null, "nothing to send to yet");
  t.equal(r.payment, `${(await get(pi.public_id)).transactions[0].tx_hash}:${(await get(pi.public_id)).transactions[0].output_index}`, "the transaction refunded");

  const again = await refund(pi.public_id);
  t.equal(again.status, 409, "the overpaid part is taken");
  t.equal(again.body.error.code, "refund_exceeds_refundable");
  t.match(again.body.error.message, /At most 10 USDC is still refundable on ethereum: the payment intent received 12\.5 USDC there and its refunds not cancelled take 2\.5/);

  const simulatedEarly = await call(base, "POST", `/api/v1/sandbox/merchants/${a.merchant}/refunds/${r.id}/simulate`, { key: a.key });
  t.equal(simulatedEarly.status, 409, "the simulator pays only a refund with an address");
  t.match(simulatedEarly.body.error.message, /no address yet/);

  // The claim page's call (RefundClaimService), as the page makes it.
  const token = r.claim_url.split("/").pop();
  const bad = await submitAddress(token, "tb1qw508d6qejxtdg4y5r3zarvary0c5xw7kxpjzsx");
  t.equal(bad.status, 400, "a bitcoin address for an ethereum refund is refused");
  const given = await submitAddress(token, customer.toLowerCase());
  t.equal(given.status, 200, JSON.stringify(given.body));
  t.match(given.body.data, { status: "awaiting_payment", amount: "2.5", asset: "USDC", network: "ethereum", address: customer, testMode: true });
  const other = await submitAddress(token, "0x000000000000000000000000000000000000dEaD");
  t.equal(other.status, 409, "the address cannot be changed");
  const now = (await call(base, "GET", `${merchantPath}/refunds/${r.id}`, { key: a.key })).body.data;
  t.match(now, { status: "awaiting_payment", address: customer });
  t.equal(now.claim_url, null, "no claim page once the address is known");
  t.match(now.payment_uri, new RegExp(`^ethereum:0x[0-9a-fA-F]{40}@11155111/transfer\\?address=${customer}&uint256=2500000$`), "EIP-681: USDC's transfer of 2.5 to the customer");

  const paid = await call(base, "POST", `/api/v1/sandbox/merchants/${a.merchant}/refunds/${r.id}/simulate`, { key: a.key });
  t.equal(paid.status, 200, JSON.stringify(paid.body));
  t.match(paid.body.data, { status: "completed", simulated: true, transactions: [{ amount: "2.5", simulated: true, output_index: 0 }] });
  t.ok(paid.body.data.completed_at);
  t.equal((await get(pi.public_id)).amount_refunded, "2.5", "the intent's amount_refunded");
  const cancelLate = await call(base, "POST", `${merchantPath}/refunds/${r.id}/cancel`, { key: a.key });
  t.equal(cancelLate.status, 409, "a completed refund is not cancelled");

  const types = await until("the refund's four events", async () => {
    const e = eventsOf(r.id);
    return e.length >= 4 ? e : undefined;
  }, 20_000);
  t.same(types.map((e) => e.type).sort(), ["refund.address_received", "refund.completed", "refund.created", "refund.sent"], "one of each, deduplicated by event id");
  t.match(types.find((e) => e.type === "refund.completed")!.data, { refund: { id: r.id, status: "completed" }, payment_intent: { public_id: pi.public_id, amount_refunded: "2.5" } }, "each carries the refund and its intent");
});

t.test("never more than received: over it is 409 saying what is left; two at once for the whole, one passes; an Idempotency-Key twice, one refund", async (t) => {
  const pi = await paidIntent("5", "5", "confirmed");
  const none = await refund(pi.public_id);
  t.equal(none.status, 400, "a confirmed intent's refund says how much");
  t.equal(none.body.error.param, "amount");
  const over = await refund(pi.public_id, { amount: "5.000001", address: customer });
  t.equal(over.status, 409);
  t.equal(over.body.error.code, "refund_exceeds_refundable");
  t.match(over.body.error.message, /At most 5 USDC is still refundable/);
  for (const [amount, why] of [["-1", "a sign"], ["1.0000001", "more decimals than USDC's 6"], ["0", "zero"], ["1e3", "an exponent"]] as const) {
    const res = await refund(pi.public_id, { amount });
    t.equal(res.status, 400, `${amount}: ${why}`);
    t.equal(res.body.error.param, "amount");
  }
  const badAddress = await refund(pi.public_id, { amount: "1", address: "0x8ba1f109551bd432803012645ac136ddd64dba7" });
  t.equal(badAddress.status, 400);
  t.equal(badAddress.body.error.param, "address");
  t.same((await call(base, "GET", `${intentsPath}/${pi.public_id}/refunds`, { key: a.key })).body.data, [], "refused requests made nothing");

  const both = await Promise.all([refund(pi.public_id, { amount: "5" }), refund(pi.public_id, { amount: "5" })]);
  t.same(both.map((r) => r.status).sort(), [200, 409], "exactly one of two concurrent refunds of the whole passes");

  const cancelled = await call(base, "POST", `${merchantPath}/refunds/${both.find((r) => r.status === 200)!.body.data.id}/cancel`, { key: a.key });
  t.equal(cancelled.status, 200);
  t.equal(cancelled.body.data.status, "cancelled");
  t.equal(cancelled.body.data.claim_url, null);
  const key = idemKey();
  const first = await refund(pi.public_id, { amount: "2", address: customer }, key);
  const second = await refund(pi.public_id, { amount: "2", address: customer }, key);
  t.equal(first.status, 200, "a cancelled refund's amount is refundable again");
  t.equal(first.body.data.status, "awaiting_payment", "with the address given, no claim page");
  t.same(second.body.data, first.body.data, "the same key: the same refund");
  const listed = (await call(base, "GET", `${intentsPath}/${pi.public_id}/refunds`, { key: a.key })).body.data;
  t.same(listed.map((r: { status: string }) => r.status), ["cancelled", "awaiting_payment"], "one cancelled, one made once");
});

t.test("a payment in another asset is refunded in its own asset, whole, with no amount", async (t) => {
  const pi = await paidIntent("3", "3", "confirmed");
  const { hash } = await pay(pi, "0.01", "ETH");
  await dev.test.mine({ blocks: 2 });
  await until("the ETH payment told as an exception", async () => ((await get(pi.public_id)).transactions.some((x: { asset: string; confirmations: number }) => x.asset === "ETH" && x.confirmations >= 2) ? true : undefined), 20_000);
  const which = await refund(pi.public_id);
  t.equal(which.status, 400, "two assets received: which one?");
  t.equal(which.body.error.param, "payment");
  t.match(which.body.error.message, /USDC on ethereum and ETH on ethereum/);
  const res = await refund(pi.public_id, { payment: hash });
  t.equal(res.status, 200, JSON.stringify(res.body));
  t.match(res.body.data, { asset: "ETH", network: "ethereum", amount: "0.01", payment: `${hash}:0` });
  const priced = await refund(pi.public_id, { payment: hash, price_amount: "1", price_currency: "USD" });
  t.equal(priced.status, 400, "a payment the intent never quoted cannot be refunded by price");
  t.equal(priced.body.error.param, "price_amount");
  t.match(priced.body.error.message, /"rate": "current"/, "and says what would do it");

  // At the exchanges' rate now (the development rates: ETH at 2500 USD), once the whole refund is cancelled.
  t.equal((await call(base, "POST", `${merchantPath}/refunds/${res.body.data.id}/cancel`, { key: a.key })).status, 200);
  const current = await refund(pi.public_id, { payment: hash, price_amount: "10", price_currency: "USD", rate: "current" });
  t.equal(current.status, 200, JSON.stringify(current.body));
  t.match(current.body.data, { asset: "ETH", amount: "0.004", price_amount: "10", price_currency: "USD", rate: "2500" });
  const unpriced = await refund(pi.public_id, { payment: hash, rate: "current" });
  t.match([unpriced.status, unpriced.body.error.param, unpriced.body.error.message], [400, "price_amount", /"price_amount" is missing: "rate" needs it/], "a rate without a price");
  const neither = await refund(pi.public_id, { payment: hash, price_amount: "1", price_currency: "USD", rate: "sometimes" });
  t.match([neither.status, neither.body.error.param], [400, "rate"], "a rate that is neither");
});

t.test("a cancelled intent's payment is refunded whole; another merchant's intent and refund are not found", async (t) => {
  const pi = await createUsdcIntent(s, "4");
  t.equal((await call(base, "POST", `${intentsPath}/${pi.public_id}/cancel`, { key: a.key })).status, 200);
  const nothing = await refund(pi.public_id);
  t.equal(nothing.status, 409, "nothing received, nothing to refund");
  t.equal(nothing.body.error.code, "invalid_state");
  await pay(pi, "4");
  await dev.test.mine({ blocks: 2 });
  await until("the payment told as an exception", async () => ((await get(pi.public_id)).transactions[0]?.confirmations ?? 0) >= 2 || undefined, 20_000);
  const res = await refund(pi.public_id);
  t.equal(res.status, 200, JSON.stringify(res.body));
  t.equal(res.body.data.amount, "4", "all of it");
  const other = await merchantWithKey(s.app);
  t.equal((await call(base, "GET", `/api/v1/merchants/${other.merchant}/refunds/${res.body.data.id}`, { key: other.key })).status, 404, "another merchant's key: not found");
  t.equal((await call(base, "POST", `/api/v1/merchants/${other.merchant}/payment-intents/${pi.public_id}/refunds`, { key: other.key, idempotencyKey: idemKey(), body: {} })).status, 404);
  t.equal((await call(base, "GET", `${merchantPath}/refunds/rf_000000000000000000000000`, { key: a.key })).status, 404);
});

t.test("a refund is watched: a transfer before the address is not its; a short one leaves it open with what is due; the rest sends it, confirmations complete it, a reorg takes it back", async (t) => {
  const pi = await paidIntent("10", "13", "overpaid");
  const r = (await refund(pi.public_id)).body.data;
  t.equal(r.amount, "3");
  const to = privateKeyToAccount(generatePrivateKey()).address;
  const refundOf = async () => (await call(base, "GET", `${merchantPath}/refunds/${r.id}`, { key: a.key })).body.data;
  const before = await signPayment(dev, to, "3", "USDC", 6);
  await dev.test.mine({ blocks: 2 });
  // Block times have whole seconds: the address comes in a later second than that transfer's block.
  await new Promise((resolve) => setTimeout(resolve, 1100));
  t.equal((await submitAddress(r.claim_url.split("/").pop(), to)).status, 200, "the address given after a transfer to it");

  const short = await signPayment(dev, to, "1", "USDC", 6);
  await dev.test.mine({ blocks: 2 });
  let diag = "";
  const open = await until("the short transfer recorded", async () => {
    const now = await refundOf();
    diag = JSON.stringify([now, await s.app.db.em.fork().execute(`select to_address, asset, amount::text, confirmations, observed_at, payment_intent_id from chain_observations where lower(to_address) = lower(?)`, [to]), await s.app.db.em.fork().execute(`select status, address, address_received_at, watch_xid::text from refunds where id = ?`, [r.id])]);
    return now.transactions.length > 0 ? now : undefined;
  }, 20_000, () => diag);
  t.match(open, { status: "awaiting_payment", amount_due: "2" }, "still open, with what is due");
  t.same(open.transactions.map((x: { tx_hash: string }) => x.tx_hash), [short.hash], "the short transfer only: the one before the address is not this refund's");
  t.notOk(open.transactions.some((x: { tx_hash: string }) => x.tx_hash === before.hash));

  const rest = await signPayment(dev, to, "2", "USDC", 6);
  await dev.test.mine({ blocks: 1 });
  await until("sent: seen, one confirmation of two", async () => ((await refundOf()).status === "sent" ? true : undefined), 20_000);
  await dev.test.mine({ blocks: 1 });
  const done = await until("completed at two confirmations", async () => {
    const now = await refundOf();
    return now.status === "completed" ? now : undefined;
  }, 20_000);
  t.same(done.transactions.map((x: { tx_hash: string }) => x.tx_hash), [short.hash, rest.hash], "the transfers that paid it");
  t.equal(done.amount_due, "0");
  t.equal((await get(pi.public_id)).amount_refunded, "3", "the intent's amount_refunded");
  await until("refund.sent and refund.completed", async () => (["refund.sent", "refund.completed"].every((type) => eventsOf(r.id).some((e) => e.type === type)) ? true : undefined), 20_000);

  // The block with the rest and the one after it replaced by empty ones: the transfer is gone.
  await dev.test.request({ method: "anvil_reorg" as never, params: [2, []] as never });
  await dev.test.request({ method: "anvil_dropAllTransactions" as never });
  await dev.test.mine({ blocks: 1 });
  const back = await until("back to awaiting_payment", async () => {
    const now = await refundOf();
    return now.status === "awaiting_payment" ? now : undefined;
  }, 30_000);
  t.match(back, { amount_due: "2", completed_at: null }, "what is due again");
  t.same(back.transactions.map((x: { tx_hash: string }) => x.tx_hash), [short.hash], "the short transfer stays");
  t.equal((await get(pi.public_id)).amount_refunded, "0", "no longer refunded");
  await until("refund.reorged says so", async () => (eventsOf(r.id).some((e) => e.type === "refund.reorged") ? true : undefined), 20_000);
});

t.test("the dashboard refunds: the Refund form on an overpaid payment, the refund's page with the customer's link, what to send once the address is known, cancel", async (t) => {
  const pi = await paidIntent("4", "5", "overpaid");
  const dash = dashboardClient(base);
  t.equal((await dash.signIn(a.key)).status, 303);
  const page = await dash.get(`/dashboard/payments/${pi.public_id}`);
  t.equal(page.status, 200);
  t.match(page.body, /id="refund-form"/, "a Refund form on a payment with something to refund");
  t.match(page.body, /<p>No refunds\.<\/p>/);
  const idem = /id="refund-form"[\s\S]*?name="idem" value="([^"]+)"/.exec(page.body)?.[1] ?? "";
  const payment = /name="payment" value="([^"]+)"/.exec(page.body)?.[1] ?? "";
  const over = await dash.post(`/dashboard/payments/${pi.public_id}/refund`, { idem, payment, amount: "9" }, { from: `/dashboard/payments/${pi.public_id}` });
  t.equal(over.status, 409, "more than received: refused, said as the API says it");
  t.match(over.body, /At most 5 USDC is still refundable/);
  const made = await dash.post(`/dashboard/payments/${pi.public_id}/refund`, { idem, payment, reason: "paid twice" }, { from: `/dashboard/payments/${pi.public_id}` });
  t.equal(made.status, 303, made.body.slice(0, 400));
  const refundPath = made.headers.get("location") ?? "";
  t.match(refundPath, /^\/dashboard\/refunds\/rf_[0-9A-Za-z]{24}\?done=refund_created$/);
  const shown = await dash.get(refundPath);
  t.equal(shown.status, 200);
  t.match(shown.body, /id="refund-status"[^>]*>awaiting address</, "its state");
  t.match(shown.body, /1 USDC on Ethereum Sepolia testnet/, "the overpaid part");
  const claim = /id="claim-link">([^<]+)</.exec(shown.body)?.[1] ?? "";
  t.match(claim, /\/refunds\/[0-9A-Za-z]{32}$/, "the link to send the customer");
  t.equal((await submitAddress(claim.split("/").pop() ?? "", customer)).status, 200);
  const known = await dash.get(refundPath.split("?")[0] as string);
  t.match(known.body, /id="refund-address">0x8ba1f109551bD432803012645Ac136ddd64DBA72</, "the customer's address");
  t.match(known.body, /id="refund-uri">ethereum:/, "the payment URI to send with");
  t.match(known.body, /<svg class="qr-code"/, "and its QR code");
  t.notMatch(known.body, /id="claim-link"/, "no link once the address is known");
  const listed = await dash.get(`/dashboard/payments/${pi.public_id}`);
  t.match(listed.body, /id="refunds"[\s\S]*awaiting payment/, "the payment's page lists it");
  t.match(listed.body, /Refund address received: send 1 USDC on ethereum to 0x8ba1f109551bD432803012645Ac136ddd64DBA72/, "and its timeline tells it");
  const cancelIdem = /id="cancel-refund"/.test(known.body) ? (/action="[^"]*\/cancel"[^>]*>[\s\S]*?name="idem" value="([^"]+)"/.exec(known.body)?.[1] ?? "") : "";
  const cancelled = await dash.post(`${refundPath.split("?")[0]}/cancel`, { idem: cancelIdem }, { from: refundPath.split("?")[0] });
  t.equal(cancelled.status, 303);
  t.match((await dash.get(cancelled.headers.get("location") ?? "")).body, /id="refund-status"[^>]*>cancelled</);
});

const shots = screenshotsDir();


t.test("the claim page on a phone, without JavaScript: says who refunds what, refuses a wrong address keeping it, takes a right one once", { skip: noBrowser }, async (t) => {
  const pi = await paidIntent("7", "7.5", "overpaid");
  const r = (await refund(pi.public_id, { reason: "Order 1042 returned" })).body.data;
  const claimPath = new URL(r.claim_url).pathname;
  const browser = await chromium.launch({ executablePath, args: ["--no-sandbox"] });
  t.teardown(() => browser.close());
  const page = await (await browser.newContext({ viewport: { width: 390, height: 844 }, locale: "en-US" })).newPage();
  const errors: string[] = [];
  page.on("console", (msg) => {
    if (/Content[- ]Security[- ]Policy|Refused to/i.test(msg.text())) errors.push(msg.text());
  });
  const text = async (selector: string) => ((await page.locator(selector).textContent()) ?? "").trim();

  const first = await page.goto(`${s.base}${claimPath}`);
  t.equal(first?.status(), 200);
  t.match(first?.headers()["content-security-policy"], /form-action 'self'/, "a strict policy that lets the form post to the page only");
  t.equal(await page.locator("script").count(), 0, "no script at all: it works without JavaScript (a plain form)");
  t.equal(await text("h1"), "Refund from Test Shop", "who is refunding");
  t.equal(await text("#amount"), "0.5 USDC", "how much");
  t.match(await text(".network"), /Ethereum Sepolia testnet/);
  t.match(await text("#reason"), /Order 1042 returned/);
  t.match(await text("#next"), /sends 0\.5 USDC on Ethereum Sepolia testnet to the address you give here.*cannot be changed/, "what happens next");
  t.match(await text("#exchange-warning"), /exchange deposit address may not credit a refund/, "the exchange warning");
  t.same(await axeViolations(page), [], "the form: no serious or critical axe violation");
  await page.screenshot({ path: path.join(shots, "refund-claim.png"), fullPage: true });

  await page.locator("#address").fill("tb1qw508d6qejxtdg4y5r3zarvary0c5xw7kxpjzsx");
  const refused = await Promise.all([page.waitForNavigation(), page.locator("#submit").click()]);
  t.equal(refused[0]?.status(), 400, "a bitcoin address for an ethereum refund");
  t.match(await text("#address-error"), /^This address is not a valid ethereum address/, "said beside the field");
  t.equal(await page.locator("#address").getAttribute("aria-invalid"), "true");
  t.equal(await page.locator("#address").inputValue(), "tb1qw508d6qejxtdg4y5r3zarvary0c5xw7kxpjzsx", "what was typed is kept");
  t.same(await axeViolations(page), [], "the refusal: no serious or critical axe violation");

  await page.locator("#address").fill(customer.toLowerCase());
  const taken = await Promise.all([page.waitForNavigation(), page.locator("#submit").click()]);
  t.equal(taken[0]?.status(), 200, "after the form's 303, the page");
  t.equal(page.url(), `${s.base}${claimPath}`, "the page itself: a reload sends nothing again");
  t.equal(await text("#status-title"), "Address received");
  t.equal(await text("#address"), customer, "the address shown back, checksummed");
  t.equal(await page.locator("form").count(), 0, "no form once it is given");
  t.same(await axeViolations(page), [], "the address received: no serious or critical axe violation");
  await page.screenshot({ path: path.join(shots, "refund-claimed.png"), fullPage: true });

  const again = await fetch(`${s.base}${claimPath}`, { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body: "address=0x000000000000000000000000000000000000dEaD" });
  t.equal(again.status, 409, "a second submission is refused");
  t.match(await again.text(), /cannot be changed/);
  t.match((await call(base, "GET", `${merchantPath}/refunds/${r.id}`, { key: a.key })).body.data, { status: "awaiting_payment", address: customer }, "and changed nothing");
  t.equal((await fetch(`${s.base}/refunds/${"x".repeat(32)}`)).status, 404, "an unknown link: not found");
  t.equal((await fetch(`${s.base}/refunds/nope`)).status, 404);
  t.same(errors, [], "nothing refused by the page's policy");
});

/** The claim page's call, over Connect as the page's server side makes it. */
async function submitAddress(token: string, address: string) {
  const res = await fetch(`${s.rpcUrl}/payments.v1.RefundClaimService/SubmitRefundAddress`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ token, address }),
  });
  const body = (await res.json()) as Record<string, unknown>;
  return { status: res.status === 200 ? 200 : connectStatus(body), body: body as { data: Record<string, unknown> } & Record<string, unknown> };
}

function connectStatus(body: Record<string, unknown>): number {
  return ({ invalid_argument: 400, failed_precondition: 409, not_found: 404 } as Record<string, number>)[body.code as string] ?? 500;
}
