// No silent networks (issue 52): a Live create on a chain no watcher follows is refused with
// 409 network_not_watched and records nothing; a Test create there succeeds, and its response
// and checkout page say that the server does not watch that network and the sandbox pays it.
// What counts as followed: a built-in watcher configured in the process, a network named in
// OPERATOR_WATCHED_NETWORKS, or a chain a watcher (here one of the operator's own, through
// ChainService) saved its position on lately. REST and gRPC, a real Chromium for the page.
import { existsSync } from "node:fs";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { chromium } from "playwright-core";
import t from "tap";
import { ChainService } from "../../gen/payments/v1/chains_pb.ts";
import { ErrorDetailSchema } from "../../gen/payments/v1/options_pb.ts";
import { IntentService } from "../../gen/payments/v1/payment_intents_pb.ts";
import { importAddresses } from "../../services/addresses/admin.ts";
import { createSiteCredential } from "../../services/site/credentials.ts";
import { createCashierSession } from "../../services/terminal/sessions.ts";
import { mainnetGenesis } from "../../services/vocabulary/assets.ts";
import { call, giveLiveAccountKey, idemKey, merchantWithKey, startTestApp, until } from "../helpers/harness.ts";
import { hash, watcherClient } from "../helpers/lifecycle.ts";

// No watcher anywhere: no RPC URL, and the harness's default OPERATOR_WATCHED_NETWORKS emptied.
const s = await startTestApp(t, { OPERATOR_WATCHED_NETWORKS: "", CHECKOUT_BASE_URL: "http://127.0.0.1/checkout" });
const { base, app, rpcUrl } = s;
const em = () => app.db.em.fork();
const live = await merchantWithKey(app, "live");
const test = await merchantWithKey(app, "test");
const intents = (c = live) => `/api/v1/merchants/${c.merchant}/payment-intents`;
const usdc = { network: "ethereum", asset: "USDC", requested_amount: "12.50" };

/** Rows the merchant has in `table`: a refusal must leave none. */
async function rows(table: string, merchant: string): Promise<number> {
  const [r] = await em().execute<{ n: string }[]>(`select count(*) as n from ${table} where merchant_id = ?`, [merchant]);
  return Number(r?.n);
}

t.test("REST: a Live create on an unwatched network is refused, names what the operator sets, and records nothing", async (t) => {
  const key = idemKey();
  const res = await call(base, "POST", intents(), { key: live.key, idempotencyKey: key, body: usdc });
  t.equal(res.status, 409);
  t.equal(res.body.error?.code, "network_not_watched");
  t.equal(res.body.error?.param, "network");
  t.match(res.body.error?.request_id, /\S/, "the documented error envelope");
  t.match(res.body.error?.message, "No watcher follows ethereum in live on this server");
  t.match(res.body.error?.message, "nothing was created");
  t.match(res.body.error?.message, "ETHEREUM_LIVE_RPC_URL");
  t.match(res.body.error?.message, "OPERATOR_WATCHED_NETWORKS");
  t.notOk(res.headers.get("idempotent-replayed"), "not a replay");

  const list = await call(base, "GET", intents(), { key: live.key });
  t.same([list.status, list.body.data], [200, []], "the list is empty");
  t.equal(await rows("payment_intents", live.merchant), 0, "no intent");
  t.equal(await rows("idempotency_records", live.merchant), 0, "no idempotency record that would replay the refusal");
  t.equal(await rows("webhook_events", live.merchant), 0, "no event");

  const again = await call(base, "POST", intents(), { key: live.key, idempotencyKey: key, body: usdc });
  t.same([again.status, again.body.error?.code], [409, "network_not_watched"], "the same key again: refused again, not replayed");

  // A network with no built-in watcher names only the operator's setting.
  await importAddresses(em(), live.merchant, "live", "solana", "So11111111111111111111111111111111111111112");
  const sol = await call(base, "POST", intents(), { key: live.key, idempotencyKey: idemKey(), body: { network: "solana", asset: "SOL", requested_amount: "1" } });
  t.same([sol.status, sol.body.error?.code], [409, "network_not_watched"]);
  t.match(sol.body.error?.message, "The operator names solana in OPERATOR_WATCHED_NETWORKS");
  t.notMatch(sol.body.error?.message, "SOLANA_LIVE_RPC_URL", "no RPC URL a built-in watcher does not read");
  const [leased] = await em().execute<{ n: string }[]>(`select count(*) as n from address_pool where merchant_id = ? and leased_at is not null`, [live.merchant]);
  t.equal(Number(leased?.n), 0, "the pool's address is not leased");
});

t.test("gRPC, the Site Gateway and the terminal: the same refusal", async (t) => {
  const client = createClient(IntentService, createGrpcTransport({ baseUrl: rpcUrl }));
  const err = await client
    .createPaymentIntent({ merchant: live.merchant, network: "ethereum", asset: "USDC", requestedAmount: "3" }, { headers: { authorization: `Bearer ${live.key}`, "idempotency-key": idemKey() } })
    .then(() => undefined, (e: unknown) => ConnectError.from(e));
  t.equal(err?.code, Code.FailedPrecondition);
  t.equal(err?.findDetails(ErrorDetailSchema)[0]?.code, "network_not_watched");
  t.match(err?.rawMessage, "No watcher follows ethereum in live");

  const site = await createSiteCredential(em(), live.merchant, "live", ["https://shop.example.test"]);
  const res = await call(base, "POST", "/api/v1/site-payment-intents", { key: site.credential, idempotencyKey: idemKey(), body: usdc, headers: { origin: "https://shop.example.test" } });
  t.same([res.status, res.body.error?.code], [409, "network_not_watched"], "a shop's Live create too");
  const till = await createCashierSession(em(), { merchantId: live.merchant, environment: "live", cashier: "Ana" });
  const pos = await call(base, "POST", "/api/v1/terminal/pos/payment", { key: till.session, idempotencyKey: idemKey(), body: usdc });
  t.same([pos.status, pos.body.error?.code], [409, "network_not_watched"], "and a cashier's");
  t.equal(await rows("payment_intents", live.merchant), 0, "still nothing recorded");
});

t.test("Test: created, with watched false and a notice that the sandbox pays it (REST and gRPC)", async (t) => {
  const res = await call(base, "POST", intents(test), { key: test.key, idempotencyKey: idemKey(), body: usdc });
  t.equal(res.status, 200);
  const pi = res.body.data;
  t.equal(pi.watched, false);
  t.match(pi.notice, "This server does not watch ethereum in test");
  t.match(pi.notice, "The sandbox simulator pays this intent");
  const keys = Object.keys(pi);
  t.same(keys.slice(keys.indexOf("amount_pending"), keys.indexOf("amount_due") + 1).slice(-3), ["watched", "notice", "amount_due"], "beside amount_due");
  const read = await call(base, "GET", `${intents(test)}/${pi.public_id}`, { key: test.key });
  t.same([read.body.data.watched, read.body.data.notice], [false, pi.notice], "a read says it too");

  const client = createClient(IntentService, createGrpcTransport({ baseUrl: rpcUrl }));
  const created = await client.createPaymentIntent(
    { merchant: test.merchant, network: "bitcoin", asset: "BTC", requestedAmount: "0.0002" },
    { headers: { authorization: `Bearer ${test.key}`, "idempotency-key": idemKey() } },
  );
  t.equal(created.data?.watched, false);
  t.match(created.data?.notice, "does not watch bitcoin in test");

  // The sandbox pays it, as the notice says.
  const paid = await call(base, "POST", `/api/v1/sandbox/merchants/${test.merchant}/payment-intents/${pi.public_id}/simulate`, { key: test.key, body: { outcome: "confirmed" } });
  t.same([paid.status, paid.body.data?.status], [200, "confirmed"]);
});

const executablePath = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
const noBrowser = existsSync(executablePath) ? false : `no Chromium at ${executablePath}: install it (apt-get install chromium) or set CHROMIUM_PATH`;

t.test("the checkout page of a Test intent on an unwatched network says so, in Chromium", { skip: noBrowser }, async (t) => {
  const pi = (await call(base, "POST", intents(test), { key: test.key, idempotencyKey: idemKey(), body: usdc })).body.data;
  t.equal(pi.watched, false);
  const browser = await chromium.launch({ executablePath, args: ["--no-sandbox"] });
  t.teardown(() => browser.close());
  const page = await browser.newPage({ viewport: { width: 390, height: 844 } });
  const response = await page.goto(`${base}${new URL(pi.checkout_url).pathname}`);
  t.equal(response?.status(), 200);
  const notice = page.locator("#unwatched");
  t.ok(await notice.isVisible(), "the notice shows");
  t.equal(
    ((await notice.textContent()) ?? "").trim(),
    "This server does not watch Ethereum Sepolia testnet: a payment sent to this address is not seen. The sandbox simulator pays this test payment (the merchant runs it with a Test API key).",
  );
  t.equal(await page.getByRole("note").filter({ hasText: "does not watch" }).count(), 1, "as a note");
  t.ok(await page.locator("#address").isVisible(), "the page still shows how to pay");
});

t.test("a watcher of the operator's own reports the Live chain (ChainService): the refused key now creates", async (t) => {
  const key = idemKey();
  t.equal((await call(base, "POST", intents(), { key: live.key, idempotencyKey: key, body: usdc })).status, 409, "refused while nobody follows");
  const { headers } = await watcherClient(app, rpcUrl, "live", ["ethereum"]);
  const chains = createClient(ChainService, createGrpcTransport({ baseUrl: rpcUrl }));
  const claim = await until("the Live lease", async () => {
    const c = await chains.claimChain({ network: "ethereum", watcherId: "own-watcher", leaseSeconds: 30 }, { headers });
    return c.active ? c : undefined;
  }, 20_000);
  const first = hash();
  await chains.reportBlocks(
    {
      network: "ethereum",
      watcherId: "own-watcher",
      leaseEpoch: claim.epoch,
      genesisHash: mainnetGenesis.ethereum,
      blocks: [
        { height: 100n, hash: `0x${first}`, parentHash: `0x${hash()}`, outputs: [] },
        { height: 101n, hash: `0x${hash()}`, parentHash: `0x${first}`, outputs: [] },
      ],
      headHeight: 101n,
    },
    { headers },
  );
  // The create path reads the chains watchers follow every few seconds, never per create.
  const created = await until("the Live create taken", async () => {
    const res = await call(base, "POST", intents(), { key: live.key, idempotencyKey: key, body: usdc });
    return res.status === 200 ? res : undefined;
  }, 20_000);
  t.equal(created.body.data.watched, true);
  t.equal(created.body.data.notice, null);
  t.equal(created.body.data.environment, "live");
  const replay = await call(base, "POST", intents(), { key: live.key, idempotencyKey: key, body: usdc });
  t.same([replay.body.data.public_id, replay.headers.get("idempotent-replayed")], [created.body.data.public_id, "true"], "the same key now replays the intent");
  t.equal(await rows("payment_intents", live.merchant), 1);
  // Only that chain: Test ethereum is another chain, still unwatched.
  const testPi = await call(base, "POST", intents(test), { key: test.key, idempotencyKey: idemKey(), body: usdc });
  t.equal(testPi.body.data.watched, false, "Test ethereum is another chain");
});

t.test("OPERATOR_WATCHED_NETWORKS names a network: Live creates there are taken, Test ones carry no notice", async (t) => {
  const named = await startTestApp(t, { OPERATOR_WATCHED_NETWORKS: "polygon, solana" }, ["rpc", "gateway"]);
  const l = await merchantWithKey(named.app, "live");
  await giveLiveAccountKey(named.app, l.merchant, "polygon");
  const ok = await call(named.base, "POST", `/api/v1/merchants/${l.merchant}/payment-intents`, { key: l.key, idempotencyKey: idemKey(), body: { network: "polygon", asset: "USDC", requested_amount: "2" } });
  t.same([ok.status, ok.body.data?.watched, ok.body.data?.notice], [200, true, null], "Live polygon taken");
  const eth = await call(named.base, "POST", `/api/v1/merchants/${l.merchant}/payment-intents`, { key: l.key, idempotencyKey: idemKey(), body: usdc });
  t.same([eth.status, eth.body.error?.code], [409, "network_not_watched"], "a network it does not name is still refused");
  const tm = await merchantWithKey(named.app, "test");
  const tp = await call(named.base, "POST", `/api/v1/merchants/${tm.merchant}/payment-intents`, { key: tm.key, idempotencyKey: idemKey(), body: { network: "solana", asset: "SOL", requested_amount: "1" } });
  t.same([tp.status, tp.body.data?.watched, tp.body.data?.notice], [200, true, null], "Test solana: no notice");
});

t.test("a built-in watcher configured in the process: no notice, though it has not reported yet", async (t) => {
  // A node that is not there: configured is enough for the create path (readiness asks more).
  const configured = await startTestApp(t, { OPERATOR_WATCHED_NETWORKS: "", ETHEREUM_TEST_RPC_URL: "http://127.0.0.1:9" }, ["rpc", "gateway"]);
  const tm = await merchantWithKey(configured.app, "test");
  const res = await call(configured.base, "POST", `/api/v1/merchants/${tm.merchant}/payment-intents`, { key: tm.key, idempotencyKey: idemKey(), body: usdc });
  t.same([res.status, res.body.data?.watched, res.body.data?.notice], [200, true, null]);
  const btc = await call(configured.base, "POST", `/api/v1/merchants/${tm.merchant}/payment-intents`, { key: tm.key, idempotencyKey: idemKey(), body: { network: "bitcoin", asset: "BTC", requested_amount: "0.001" } });
  t.equal(btc.body.data?.watched, false, "another network still has the notice");
});
