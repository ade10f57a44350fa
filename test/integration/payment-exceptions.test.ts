// A payment after its intent stopped taking payments (issue 52): to a cancelled intent, or paid
// after the late-payment window, it is seen (the watchers keep looking for the address for
// EXCEPTION_WATCH_SECONDS more), never counts, changes no status, and is told once to an endpoint
// that takes payment.exception (one naming it, and since issue 65 a "*" one); ops payment-exceptions lists it. A payment
// within the window still counts, late. Against anvil followed by the app's in-process watcher,
// ethereum Test, LATE_PAYMENT_WINDOW_SECONDS=60.
import t from "tap";
import type { Hex } from "viem";
import { signPayment, startDevChain } from "../../scripts/devchain/chain.ts";
import { call, idemKey, until } from "../helpers/harness.ts";
import { dashboardClient } from "../helpers/dashboard.ts";
import { runCli } from "../helpers/processes.ts";
import { createUsdcIntent, eventsOnce, hookHost, webhookSetup } from "../helpers/webhooks.ts";

const dev = await startDevChain();
t.teardown(() => dev.stop());
const s = await webhookSetup(t, { env: { ETHEREUM_TEST_RPC_URL: dev.url, ETHEREUM_CONFIRMATIONS: "2", WATCHER_POLL_MS: "100", LATE_PAYMENT_WINDOW_SECONDS: "60" } });
const { base, creds: a } = s;
const everything = await s.createEndpoint();
const exceptions = await call(base, "POST", `/api/v1/merchants/${a.merchant}/webhook-endpoints`, {
  key: a.key,
  body: { url: `https://${hookHost}/exceptions`, enabled_events: ["payment.exception"] },
});
const intentsPath = `/api/v1/merchants/${a.merchant}/payment-intents`;

const createIntent = (amount: string) => createUsdcIntent(s, amount);
const get = async (id: string) => (await call(base, "GET", `${intentsPath}/${id}`, { key: a.key })).body.data;
const pay = (pi: { deposit_address: Hex }, amount: string) => signPayment(dev, pi.deposit_address, amount, "USDC", 6);
const mine = (blocks = 1) => dev.test.mine({ blocks });
/** Moves an intent's expiry into the past, as time would (the scheduler then expires it). */
const expiredAgo = (id: string, seconds: number) => s.app.db.em.fork().execute(`update payment_intents set expires_at = now() - make_interval(secs => ?) where id = ?`, [seconds, id]);
const statusIs = (id: string, status: string) => until(`${id} ${status}`, async () => ((await get(id)).status === status ? true : undefined), 20_000);
const told = (id: string) => eventsOnce(s.receiver, exceptions.body.data.signing_secret, "/exceptions").filter((e) => e.type === "payment.exception" && e.data.payment_intent?.public_id === id);
const toEverything = (id: string) => eventsOnce(s.receiver, everything.secret, new URL(everything.url).pathname).filter((e) => e.data.payment_intent?.public_id === id).map((e) => e.type).sort();

t.test("a payment to a cancelled intent: seen, never counted, the intent stays cancelled, the merchant told once", async (t) => {
  const pi = await createIntent("3");
  const cancelled = await call(base, "POST", `${intentsPath}/${pi.public_id}/cancel`, { key: a.key, idempotencyKey: idemKey() });
  t.equal(cancelled.status, 200, JSON.stringify(cancelled.body));
  const { hash } = await pay(pi, "3");
  await mine(2);
  const event = await until("payment.exception (intent_cancelled)", async () => told(pi.public_id)[0], 20_000);
  t.match(event.data, {
    payment_intent: { public_id: pi.public_id, status: "cancelled", amount_due: "0" },
    exception: { reason: "intent_cancelled", transaction: { tx_hash: hash, asset: "USDC", amount: "3", confirmations: 2 } },
  });
  const now = await get(pi.public_id);
  t.same([now.status, now.amount_received], ["cancelled", "0"], "still cancelled; nothing counted");
  t.match(now.transactions, [{ tx_hash: hash, counted: false, reason: "intent_cancelled" }], "shown, with why it does not count");

  // Two blocks more settle it again: still one event, one delivery to each endpoint that takes it.
  await mine(2);
  await until("4 confirmations", async () => ((await get(pi.public_id)).transactions[0]?.confirmations === 4 ? true : undefined), 20_000);
  const rows = await s.app.db.em.fork().execute<{ url: string }[]>(
    `select e.url from webhook_events ev join webhook_deliveries d on d.event_id = ev.id join webhook_endpoints e on e.id = d.endpoint_id
      where ev.payment_intent_id = ? and ev.type = 'payment.exception' order by e.url`,
    [pi.public_id],
  );
  t.same(rows.map((r) => r.url), [`https://${hookHost}/exceptions`, everything.url].sort(), "one payment.exception, to the endpoint that named it and to the \"*\" one");
  await until("the \"*\" endpoint's payment.cancelled", async () => (toEverything(pi.public_id).includes("payment.cancelled") ? true : undefined), 20_000);
  await until("the \"*\" endpoint's payment.exception", async () => (toEverything(pi.public_id).includes("payment.exception") ? true : undefined), 20_000);
  t.same(toEverything(pi.public_id), ["payment.cancelled", "payment.exception", "payment.intent.created"], "the \"*\" endpoint got every event, payment.exception among them (issue 65)");
});

t.test("paid after the late-payment window: never counted, the intent stays expired; within it: counted, late", async (t) => {
  const after = await createIntent("2");
  const within = await createIntent("2");
  await expiredAgo(after.public_id, 120);
  await expiredAgo(within.public_id, 10);
  await statusIs(after.public_id, "expired");
  await statusIs(within.public_id, "expired");
  const late = await pay(after, "2");
  const inTime = await pay(within, "2");
  await mine(2);

  await statusIs(within.public_id, "late");
  t.match(await get(within.public_id), { status: "late", amount_received: "2", transactions: [{ tx_hash: inTime.hash, counted: true, reason: null }] }, "within the window: counted, late");

  const event = await until("payment.exception (after_late_window)", async () => told(after.public_id)[0], 20_000);
  t.match(event.data, { payment_intent: { public_id: after.public_id, status: "expired" }, exception: { reason: "after_late_window", transaction: { tx_hash: late.hash, amount: "2" } } });
  const now = await get(after.public_id);
  t.same([now.status, now.amount_received], ["expired", "0"], "after it: still expired, nothing counted");
  t.match(now.transactions, [{ tx_hash: late.hash, counted: false, reason: "after_late_window" }]);
  t.same(told(within.public_id), [], "no exception for the payment within the window");

  const listed = await runCli("services/app/ops-cli.ts", { DATABASE_URL: s.databaseUrl, LATE_PAYMENT_WINDOW_SECONDS: "60" }, "payment-exceptions", "--merchant", a.merchant, "--json");
  t.equal(listed.code, 0, listed.stderr);
  const rows = JSON.parse(listed.stdout) as { payment_intent_id: string; reason: string; tx_hash: string; exception_reported_at: string | null }[];
  t.match(rows.find((r) => r.payment_intent_id === after.public_id), { reason: "after_late_window", tx_hash: late.hash }, "ops payment-exceptions lists it, with its reason");
  t.ok(rows.find((r) => r.payment_intent_id === after.public_id)?.exception_reported_at, "and when the merchant was told");
  t.match(rows.find((r) => r.payment_intent_id !== after.public_id), { reason: "intent_cancelled" }, "and the cancelled intent's");
  t.notOk(rows.some((r) => r.payment_intent_id === within.public_id), "not the payment that counted");

  // And in the dashboard: the exception badge on the payments list.
  const dashboard = dashboardClient(base);
  await dashboard.signIn(a.key);
  const page = (await dashboard.get("/dashboard/payments")).body;
  const rowOf = (id: string) => page.split("<tr>").find((r) => r.includes(`>${id}</a>`)) ?? "";
  t.match(rowOf(after.public_id), /Exception: [^<]*paid after the late window/, "the dashboard flags the payment after the window");
  t.match(rowOf(rows.find((r) => r.reason === "intent_cancelled")?.payment_intent_id ?? "none"), /Exception: [^<]*paid after cancellation/, "and the cancelled intent's");
  t.notMatch(rowOf(within.public_id), /paid after/, "not the one paid within the window");
});
