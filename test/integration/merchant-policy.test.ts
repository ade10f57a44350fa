// What a merchant sets, end to end: an endpoint that takes only some event types, confirmation
// rules and an underpayment tolerance set with the admin CLI and AdminService and fixed on each
// intent when it is created, and the sequence number a receiver orders events by. Payments are
// real token transfers on anvil, followed by the watcher role; events come through the receiver.
import { createClient, ConnectError, Code } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import t from "tap";
import type { Hex } from "viem";
import { AdminService } from "../../gen/payments/v1/admin_pb.ts";
import { ChainService } from "../../gen/payments/v1/chains_pb.ts";
import { signPayment, startDevChain } from "../../scripts/devchain/chain.ts";
import { createInternalCredential } from "../../services/auth/admin.ts";
import { call, idemKey, until } from "../helpers/harness.ts";
import { runCli } from "../helpers/processes.ts";
import { hookHost, signedEvents, webhookSetup } from "../helpers/webhooks.ts";

const dev = await startDevChain();
t.teardown(() => dev.stop());
// The network's setting stays ethereum's default (12): every count below comes from a policy.
// EXCEPTION_WATCH_SECONDS=0: a cancelled intent's address is no longer watched, so the count it
// fixed stops mattering to watchers at once (by default it is watched a week more, for exceptions).
const s = await webhookSetup(t, { env: { ETHEREUM_TEST_RPC_URL: dev.url, WATCHER_POLL_MS: "100", EXCEPTION_WATCH_SECONDS: "0" } });
const { base, creds: a } = s;
const intentsPath = `/api/v1/merchants/${a.merchant}/payment-intents`;
const endpointsPath = `/api/v1/merchants/${a.merchant}/webhook-endpoints`;

const admin = async (...args: string[]) => {
  const run = await runCli("services/app/admin.ts", { DATABASE_URL: s.databaseUrl }, ...args);
  return { ...run, json: run.code === 0 ? JSON.parse(run.stdout) : undefined };
};
async function createIntent(body: Record<string, unknown>) {
  const res = await call(base, "POST", intentsPath, { key: a.key, idempotencyKey: idemKey(), body: { network: "ethereum", asset: "USDC", ...body } });
  if (res.status !== 200) throw new Error(`create: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.data as { public_id: string; deposit_address: Hex; required_confirmations: number; underpayment_tolerance_bps: number; sequence: number };
}
const get = async (id: string) => (await call(base, "GET", `${intentsPath}/${id}`, { key: a.key })).body.data;
const pay = (pi: { deposit_address: Hex }, amount: string) => signPayment(dev, pi.deposit_address, amount, "USDC", 6);
const mine = (blocks = 1) => dev.test.mine({ blocks });
async function seen(id: string, tx: string, confirmations: number) {
  await until(`${id} at ${confirmations} confirmations`, async () => {
    const pi = await get(id);
    return pi.transactions?.some((x: { tx_hash: string; confirmations: number }) => x.tx_hash === tx && x.confirmations === confirmations) || undefined;
  }, 20_000);
  return get(id);
}

const received = (path: string, secret: string) => signedEvents(s.receiver, secret, path);

t.test("an endpoint filtered to payment.confirmed receives only that, and webhook.test when tested", async (t) => {
  const all = await s.createEndpoint("/hooks/all");
  const res = await call(base, "POST", endpointsPath, { key: a.key, body: { url: `https://${hookHost}/hooks/confirmed`, enabled_events: ["payment.confirmed"] } });
  t.equal(res.status, 200, `created: ${res.body.error?.message ?? "ok"}`);
  const confirmedOnly = { id: res.body.data.id as string, secret: res.body.data.signing_secret as string };
  t.same(res.body.data.enabled_events, ["payment.confirmed"], "shown on create");
  t.same((await call(base, "GET", `${endpointsPath}/${confirmedOnly.id}`, { key: a.key })).body.data.enabled_events, ["payment.confirmed"], "and on every read");
  t.same((await call(base, "GET", `${endpointsPath}/${all.id}`, { key: a.key })).body.data.enabled_events, ["*"], "absent means every type");

  const before = (await call(base, "GET", endpointsPath, { key: a.key })).body.data.length;
  for (const bad of [["payment.confirmd"], ["payment.confirmed", 7], "payment.confirmed", Array.from({ length: 17 }, () => "payment.late")]) {
    const refused = await call(base, "POST", endpointsPath, { key: a.key, body: { url: `https://${hookHost}/hooks/x`, enabled_events: bad } });
    t.equal(refused.status, 400, `${JSON.stringify(bad)} refused`);
    t.equal(refused.body.error.param, "enabled_events");
  }
  t.equal((await call(base, "GET", endpointsPath, { key: a.key })).body.data.length, before, "a refused create makes nothing");

  // Created, then confirmed through the sandbox (the same settlement code as the watcher).
  const pi = await createIntent({ requested_amount: "5" });
  t.equal((await call(base, "POST", `/api/v1/sandbox/merchants/${a.merchant}/payment-intents/${pi.public_id}/simulate`, { key: a.key, body: { outcome: "confirmed" } })).status, 200);
  const tested = await call(base, "POST", `${endpointsPath}/${confirmedOnly.id}/test`, { key: a.key, idempotencyKey: idemKey() });
  t.equal(tested.status, 200, "tested");
  // webhook.test is recorded after both payment events: once it is in, anything else would be too.
  await until("webhook.test at the filtered endpoint", async () => received("/hooks/confirmed", confirmedOnly.secret).some((e) => e.type === "webhook.test") || undefined, 20_000);
  await until("both payment events at the unfiltered one", async () => received("/hooks/all", all.secret).filter((e) => e.data.payment_intent?.public_id === pi.public_id).length === 2 || undefined, 20_000);
  t.same(
    received("/hooks/confirmed", confirmedOnly.secret).map((e) => e.type).sort(),
    ["payment.confirmed", "webhook.test"],
    "the filtered endpoint: payment.confirmed and the test event, not payment.intent.created",
  );
  const [row] = await s.app.db.em.fork().execute<{ n: string }[]>(
    `select count(*) as n from webhook_deliveries d join webhook_events e on e.id = d.event_id where d.endpoint_id = ? and e.type = 'payment.intent.created'`,
    [confirmedOnly.id],
  );
  t.equal(Number(row?.n), 0, "no delivery was even made for it");
  await call(base, "POST", `${endpointsPath}/${confirmedOnly.id}/disable`, { key: a.key });
  await call(base, "POST", `${endpointsPath}/${all.id}/disable`, { key: a.key });
});

t.test("confirmation rules from the admin CLI: a small payment counts at its lower count; a policy changed while an intent is open does not move it", async (t) => {
  const set = await admin("policy", "confirmations", "--merchant", a.merchant, "--environment", "test", "--network", "ethereum", "--asset", "USDC", "--confirmations", "4", "--below", "50", "--below-confirmations", "1");
  t.equal(set.code, 0, set.stderr);
  t.same(set.json.confirmation_rules, [{ network: "ethereum", asset: "USDC", confirmations: 4, below_amount: "50", below_confirmations: 1 }]);

  const coffee = await createIntent({ requested_amount: "3" });
  const car = await createIntent({ requested_amount: "5000" });
  t.same([coffee.required_confirmations, car.required_confirmations], [1, 4], "fixed on each intent, by its amount");
  const eth = (await call(base, "POST", intentsPath, { key: a.key, idempotencyKey: idemKey(), body: { network: "ethereum", asset: "ETH", requested_amount: "1" } })).body.data;
  t.equal(eth.required_confirmations, 12, "another asset of the network: the network's setting");

  // Changed while both are open: they keep theirs.
  const changed = await admin("policy", "confirmations", "--merchant", a.merchant, "--environment", "test", "--network", "ethereum", "--asset", "USDC", "--confirmations", "2");
  t.equal(changed.code, 0, changed.stderr);
  const later = await createIntent({ requested_amount: "5000" });
  t.equal(later.required_confirmations, 2, "a new intent takes the new rule");

  const small = await pay(coffee, "3");
  const big = await pay(car, "5000");
  const next = await pay(later, "5000");
  await mine();
  t.equal((await seen(coffee.public_id, small.hash, 1)).status, "confirmed", "3 USDC under 50: counted at 1 confirmation");
  t.equal((await seen(car.public_id, big.hash, 1)).status, "pending");
  await mine();
  t.equal((await seen(later.public_id, next.hash, 2)).status, "confirmed", "the later intent at 2");
  t.equal((await seen(car.public_id, big.hash, 2)).status, "pending", "the open one still waits for its 4, above the network's default the watcher was told");
  await mine(2);
  t.equal((await seen(car.public_id, big.hash, 4)).status, "confirmed", "and counts at 4");

  for (const [args, message] of [
    [["--confirmations", "0"], /allow_unconfirmed/],
    [["--confirmations", "3", "--below", "50"], /go together/],
    [["--confirmations", "3", "--below", "50.0000001", "--below-confirmations", "1"], /below_amount/],
    [["--confirmations", "3", "--below", "50", "--below-confirmations", "5"], /at most "confirmations"/],
    [["--asset", "DOGE", "--confirmations", "3"], /not supported on ethereum/],
    [["--asset", "*", "--confirmations", "3", "--below", "1", "--below-confirmations", "1"], /name the asset/],
  ] as const) {
    const refused = await admin("policy", "confirmations", "--merchant", a.merchant, "--environment", "test", "--network", "ethereum", "--asset", "USDC", ...args);
    t.not(refused.code, 0, `refused: ${args.join(" ")}`);
    t.match(refused.stderr, message);
  }
  const zero = await admin("policy", "confirmations", "--merchant", a.merchant, "--environment", "test", "--network", "ethereum", "--confirmations", "0", "--allow-unconfirmed");
  t.equal(zero.code, 0, "0 when the merchant says so in so many words");
  const shown = await admin("policy", "show", "--merchant", a.merchant, "--environment", "test");
  t.same(shown.json.confirmation_rules.map((r: { asset: string; confirmations: number }) => [r.asset, r.confirmations]), [["*", 0], ["USDC", 2]], "the refused ones changed nothing");
  t.equal((await admin("policy", "confirmations", "--merchant", a.merchant, "--environment", "test", "--network", "ethereum", "--remove")).code, 0);
  t.equal((await admin("policy", "confirmations", "--merchant", a.merchant, "--environment", "test", "--network", "ethereum", "--asset", "USDC", "--remove")).code, 0);
});

t.test("underpayment tolerance: 0.1 % short within 0.5 % is confirmed; a per-intent override; the bounds", async (t) => {
  const set = await admin("policy", "tolerance", "--merchant", a.merchant, "--environment", "test", "--bps", "50");
  t.equal(set.code, 0, set.stderr);
  t.equal(set.json.underpayment_tolerance_bps, 50);
  await admin("policy", "confirmations", "--merchant", a.merchant, "--environment", "test", "--network", "ethereum", "--confirmations", "1");

  const within = await createIntent({ requested_amount: "100" });
  const strict = await createIntent({ requested_amount: "100", underpayment_tolerance_bps: 0 });
  t.same([within.underpayment_tolerance_bps, strict.underpayment_tolerance_bps], [50, 0]);
  const paid = await pay(within, "99.9");
  const short = await pay(strict, "99.9");
  await mine();
  const w = await seen(within.public_id, paid.hash, 1);
  t.same([w.status, w.amount_received], ["confirmed", "99.9"], "confirmed, and it shows what was received");
  t.equal((await seen(strict.public_id, short.hash, 1)).status, "underpaid", "the override of 0: underpaid");
  const beyond = await createIntent({ requested_amount: "100" });
  const tx = await pay(beyond, "99.4");
  await mine();
  t.equal((await seen(beyond.public_id, tx.hash, 1)).status, "underpaid", "0.6 % short is beyond 0.5 %");

  for (const bps of [1001, -1, 1.5, "50"]) {
    const res = await call(base, "POST", intentsPath, { key: a.key, idempotencyKey: idemKey(), body: { network: "ethereum", asset: "USDC", requested_amount: "1", underpayment_tolerance_bps: bps } });
    t.equal(res.status, 400, `${JSON.stringify(bps)} refused`);
    if (typeof bps === "number" && Number.isInteger(bps)) t.equal(res.body.error.param, "underpayment_tolerance_bps");
  }
  const refused = await admin("policy", "tolerance", "--merchant", a.merchant, "--environment", "test", "--bps", "1001");
  t.not(refused.code, 0);
  t.match(refused.stderr, /from 0 to 1000/);
  t.equal((await admin("policy", "tolerance", "--merchant", "mer_nobody", "--environment", "test", "--bps", "10")).code !== 0, true, "an unknown merchant");
  await admin("policy", "tolerance", "--merchant", a.merchant, "--environment", "test", "--bps", "0");
  await admin("policy", "confirmations", "--merchant", a.merchant, "--environment", "test", "--network", "ethereum", "--remove");
});

t.test("every payment event carries the intent's sequence; the receiver's rule orders them", async (t) => {
  const hook = await s.createEndpoint("/hooks/ordered");
  await admin("policy", "confirmations", "--merchant", a.merchant, "--environment", "test", "--network", "ethereum", "--confirmations", "1");
  const pi = await createIntent({ requested_amount: "10" });
  t.equal(pi.sequence, 1, "1 when created");
  const first = await pay(pi, "4");
  await mine();
  await seen(pi.public_id, first.hash, 1);
  const second = await pay(pi, "6");
  await mine();
  const now = await seen(pi.public_id, second.hash, 1);
  t.same([now.status, now.sequence], ["confirmed", 3], "two status changes later: 3");
  const events = await until("three events", async () => {
    const got = received("/hooks/ordered", hook.secret).filter((e) => e.data.payment_intent?.public_id === pi.public_id);
    return got.length === 3 ? got : undefined;
  }, 20_000);
  const bySequence = [...events].sort((x, y) => (x.data.payment_intent?.sequence ?? 0) - (y.data.payment_intent?.sequence ?? 0));
  t.same(bySequence.map((e) => [e.type, e.data.payment_intent?.sequence, e.data.payment_intent?.status]), [
    ["payment.intent.created", 1, "pending"],
    ["payment.underpaid", 2, "underpaid"],
    ["payment.confirmed", 3, "confirmed"],
  ]);
  // The receiver's rule: keep the highest sequence seen; whatever order the events came in, the last state kept is the newest.
  for (const order of [events, [...events].reverse()]) {
    let kept: { sequence: number; status: string } | undefined;
    for (const e of order) {
      const intent = e.data.payment_intent as { sequence: number; status: string };
      if (!kept || intent.sequence > kept.sequence) kept = intent;
    }
    t.equal(kept?.status, "confirmed");
  }
  await admin("policy", "confirmations", "--merchant", a.merchant, "--environment", "test", "--network", "ethereum", "--remove");
});

t.test("AdminService sets and reads the same policy, in its credential's environment", async (t) => {
  const { credential } = await createInternalCredential(s.app.db.em.fork(), "policy admin", ["admin"], "test");
  const adminRpc = createClient(AdminService, createGrpcTransport({ baseUrl: s.rpcUrl }));
  const headers = { authorization: `Bearer ${credential}` };
  const set = await adminRpc.setConfirmationPolicy({ merchant: a.merchant, network: "bitcoin", confirmations: 3 }, { headers });
  t.same(set.policy?.confirmationRules.map((r) => [r.network, r.asset, r.confirmations]), [["bitcoin", "*", 3]]);
  t.equal(set.policy?.environment, "test");
  const tol = await adminRpc.setUnderpaymentTolerance({ merchant: a.merchant, underpaymentToleranceBps: 25 }, { headers });
  t.equal(tol.policy?.underpaymentToleranceBps, 25);
  const btc = (await call(base, "POST", intentsPath, { key: a.key, idempotencyKey: idemKey(), body: { network: "bitcoin", asset: "BTC", requested_amount: "0.01" } })).body.data;
  t.same([btc.required_confirmations, btc.underpayment_tolerance_bps], [3, 25], "a REST create takes what AdminService set");
  const bad = await adminRpc.setConfirmationPolicy({ merchant: a.merchant, network: "bitcoin", confirmations: 20_000 }, { headers }).catch((e: unknown) => e);
  t.ok(bad instanceof ConnectError && bad.code === Code.InvalidArgument, "out of range: InvalidArgument");
  const read = await adminRpc.getMerchantPolicy({ merchant: a.merchant }, { headers });
  t.same([read.policy?.confirmationRules.length, read.policy?.underpaymentToleranceBps], [1, 25], "the refused call changed nothing");
  const noKey = await adminRpc.getMerchantPolicy({ merchant: a.merchant }, { headers: { authorization: `Bearer ${a.key}` } }).catch((e: unknown) => e);
  t.ok(noKey instanceof ConnectError && noKey.code === Code.Unauthenticated, "an API key cannot");
  const nobody = await adminRpc.getMerchantPolicy({ merchant: "mer_nobody" }, { headers }).catch((e: unknown) => e);
  t.ok(nobody instanceof ConnectError && nobody.code === Code.NotFound, "an unknown merchant: not found");
  const tooMany = await adminRpc.setConfirmationPolicy({ merchant: a.merchant, network: "bitcoin", confirmations: 501 }, { headers }).catch((e: unknown) => e);
  t.ok(tooMany instanceof ConnectError && tooMany.code === Code.InvalidArgument, "more than the 500 a watcher's history covers");
  await adminRpc.setUnderpaymentTolerance({ merchant: a.merchant, underpaymentToleranceBps: 0 }, { headers });
  await adminRpc.setConfirmationPolicy({ merchant: a.merchant, network: "bitcoin", confirmations: 1, remove: true }, { headers });
  await call(base, "POST", `${intentsPath}/${btc.public_id}/cancel`, { key: a.key });
});

t.test("a rule removed while an intent is open: watchers are still told that intent's count", async (t) => {
  const { credential } = await createInternalCredential(s.app.db.em.fork(), "policy admin 2", ["admin"], "test");
  const { credential: observe } = await createInternalCredential(s.app.db.em.fork(), "a watcher", ["observe"], "test", { networks: ["bitcoin"] });
  const transport = createGrpcTransport({ baseUrl: s.rpcUrl });
  const adminRpc = createClient(AdminService, transport);
  const chains = createClient(ChainService, transport);
  const claim = async () =>
    (await chains.claimChain({ network: "bitcoin", watcherId: "policy-test", leaseSeconds: 5 }, { headers: { authorization: `Bearer ${observe}` } })).requiredConfirmations.BTC;
  t.equal(await claim(), 2, "bitcoin's own count");
  await adminRpc.setConfirmationPolicy({ merchant: a.merchant, network: "bitcoin", confirmations: 30 }, { headers: { authorization: `Bearer ${credential}` } });
  t.equal(await claim(), 30, "a merchant's rule asks for more");
  const open = (await call(base, "POST", intentsPath, { key: a.key, idempotencyKey: idemKey(), body: { network: "bitcoin", asset: "BTC", requested_amount: "0.5" } })).body.data;
  t.equal(open.required_confirmations, 30);
  await adminRpc.setConfirmationPolicy({ merchant: a.merchant, network: "bitcoin", confirmations: 1, remove: true }, { headers: { authorization: `Bearer ${credential}` } });
  t.equal(await claim(), 30, "removed, but the open intent keeps 30: a watcher restarting still looks that far back");
  await call(base, "POST", `${intentsPath}/${open.public_id}/cancel`, { key: a.key });
  t.equal(await claim(), 2, "once no watched intent needs it, the chain's own again");
});

t.test("the sandbox counts the tolerance: underpaid stays underpaid", async (t) => {
  const pi = await createIntent({ requested_amount: "100", underpayment_tolerance_bps: 50 });
  const simulate = (body: Record<string, unknown>) => call(base, "POST", `/api/v1/sandbox/merchants/${a.merchant}/payment-intents/${pi.public_id}/simulate`, { key: a.key, body });
  t.equal((await simulate({ outcome: "underpaid", amount: "99" })).body.data?.status, "underpaid", "99 of 100: 1 % short");
  const again = await simulate({ outcome: "underpaid" });
  t.same([again.status, again.body.data?.status], [200, "underpaid"], "its default amount leaves it short of the 99.5 that confirms it");
  const confirmed = await simulate({ outcome: "confirmed" });
  t.same([confirmed.body.data?.status, confirmed.body.data?.required_confirmations], ["confirmed", 12]);
});
