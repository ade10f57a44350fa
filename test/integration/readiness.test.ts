// Go-live readiness through the real app: the REST route and gRPC, each check flipping as the
// merchant does what its message says, environments kept apart, and the credential errors.
import { randomBytes } from "node:crypto";
import { base58 } from "@scure/base";
import { HDKey } from "@scure/bip32";
import { ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import t from "tap";
import { ErrorDetailSchema } from "../../gen/payments/v1/options_pb.ts";
import { ChainService } from "../../gen/payments/v1/chains_pb.ts";
import { ReadinessService } from "../../gen/payments/v1/readiness_pb.ts";
import { importAddresses, setAccountKey } from "../../services/addresses/admin.ts";
import { createApiKey, createMerchant, revokeApiKey } from "../../services/auth/admin.ts";
import { scopes, type Environment } from "../../services/auth/keys.ts";
import { call, idemKey, merchantWithKey, until, type Credentials } from "../helpers/harness.ts";
import { startDevChain } from "../../scripts/devchain/chain.ts";
import { mainnetGenesis } from "../../services/vocabulary/assets.ts";
import { watcherClient } from "../helpers/lifecycle.ts";
import { startRpcProxy } from "../helpers/rpc-proxy.ts";
import type { Reply } from "../helpers/receiver.ts";
import { hookHost, waitForDelivery, webhookSetup } from "../helpers/webhooks.ts";

// Paths under /fail answer 410 (terminal: the delivery fails at its first attempt); the rest 200.
// A watcher follows a Live ethereum (a dev chain with mainnet's chain id, passing for mainnet
// through a proxy that answers mainnet's block 0) and a Test one: chain_watcher passes. Solana
// has no built-in watcher: the operator names it as followed by a watcher of its own.
const mainnet = await startDevChain({ chainId: 1 });
const sepolia = await startDevChain();
t.teardown(() => Promise.all([mainnet.stop(), sepolia.stop()]));
const mainnetNode = await startRpcProxy(t, mainnet.url);
mainnetNode.genesisHash = mainnetGenesis.ethereum;
const s = await webhookSetup(t, {
  respond: (req): Reply => (req.url.startsWith("/fail") ? { status: 410, body: "gone" } : { status: 200, body: "ok" }),
  env: { OPERATOR_WATCHED_NETWORKS: "solana", ETHEREUM_LIVE_RPC_URL: mainnetNode.url, ETHEREUM_TEST_RPC_URL: sepolia.url, WATCHER_POLL_MS: "100" },
});
await until(
  "both chains followed",
  async () => (await s.app.db.em.fork().execute(`select 1 from chain_watchers where saved_at is not null`)).length === 2,
  20_000,
);
const { base } = s;
const em = () => s.app.db.em.fork();

/** A merchant's key made with the admin code only: unlike the harness, no Live address source. */
async function bareKey(environment: Environment, merchant?: string): Promise<Credentials> {
  const id = merchant ?? (await createMerchant(em(), "Go-live Shop")).id;
  const key = await createApiKey(em(), id, environment, [...scopes]);
  return { merchant: id, key: key.api_key, keyId: key.id };
}

interface Check {
  id: string;
  passed: boolean;
  severity: string;
  message: string;
}

async function readiness(c: Credentials): Promise<{ ready: boolean; environment: string; checks: Check[] }> {
  const res = await call(base, "GET", `/api/v1/merchants/${c.merchant}/go-live/readiness`, { key: c.key });
  if (res.status !== 200) throw new Error(`readiness: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.data;
}

const check = (r: { checks: Check[] }, id: string): Check => {
  const found = r.checks.find((c) => c.id === id);
  if (!found) throw new Error(`no check ${id}`);
  return found;
};
const failing = (r: { checks: Check[] }) => r.checks.filter((c) => !c.passed).map((c) => c.id);

async function sendTest(c: Credentials, endpointId: string): Promise<string> {
  const res = await call(base, "POST", `/api/v1/merchants/${c.merchant}/webhook-endpoints/${endpointId}/test`, { key: c.key });
  if (res.status !== 200) throw new Error(`test: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.data.id;
}

t.test("Live: not ready until each required check is met, in order; not ready again once the endpoint is disabled", async (t) => {
  const live = await bareKey("live");
  const res = await call(base, "GET", `/api/v1/merchants/${live.merchant}/go-live/readiness`, { key: live.key });
  t.equal(res.status, 200);
  t.same(Object.keys(res.body), ["data"]);
  t.same(Object.keys(res.body.data).sort(), ["checks", "environment", "ready"]);
  const none = res.body.data;
  t.same(none.checks.map((c: Check) => [c.id, c.severity]), [
    ["webhook_endpoint", "required"],
    ["webhook_test_delivered", "required"],
    ["deposit_addresses", "required"],
    ["chain_watcher", "required"],
    ["exchange_rates", "recommended"],
    ["endpoint_health", "recommended"],
    ["api_key_age", "recommended"],
  ]);
  for (const c of none.checks) t.same(Object.keys(c).sort(), ["id", "message", "passed", "severity"]);
  t.equal(none.ready, false);
  t.equal(none.environment, "live");
  t.same(failing(none), ["webhook_endpoint", "webhook_test_delivered", "deposit_addresses"]);
  t.match(check(none, "webhook_endpoint").message, `curl -X POST ${s.config.publicBaseUrl}/api/v1/merchants/${live.merchant}/webhook-endpoints`);
  t.match(check(none, "deposit_addresses").message, `npm run -s admin -- address-source set --merchant ${live.merchant} --environment live --network <network> --xpub <account xpub>`);

  const ep = await s.createEndpoint("/live/ok", live);
  const withEndpoint = await readiness(live);
  t.equal(withEndpoint.ready, false);
  t.same(failing(withEndpoint), ["webhook_test_delivered", "deposit_addresses"]);
  t.match(check(withEndpoint, "webhook_endpoint").message, ep.id);
  t.match(check(withEndpoint, "webhook_test_delivered").message, `/api/v1/merchants/${live.merchant}/webhook-endpoints/${ep.id}/test`, "the exact call, with the endpoint's id");

  const delivery = await sendTest(live, ep.id);
  await waitForDelivery(s, delivery, (d) => d.status === "delivered", 15_000, live);
  const tested = await readiness(live);
  t.equal(tested.ready, false);
  t.same(failing(tested), ["deposit_addresses"]);
  t.match(check(tested, "webhook_test_delivered").message, `delivered to enabled endpoint ${ep.id}`);

  const xpub = HDKey.fromMasterSeed(randomBytes(32)).derive("m/44'/60'/0'").publicExtendedKey;
  await setAccountKey(em(), live.merchant, "live", "ethereum", xpub);
  const ready = await readiness(live);
  t.equal(ready.ready, true, "every required check passes");
  t.same(failing(ready), []);
  t.match(check(ready, "deposit_addresses").message, /ethereum \(account key\)/);
  t.equal(check(ready, "chain_watcher").message, "A watcher follows the Live chain of ethereum.", "the in-process watcher follows Live ethereum");
  t.notMatch(JSON.stringify(ready), xpub, "the account key is not echoed");

  const disabled = await call(base, "POST", `/api/v1/merchants/${live.merchant}/webhook-endpoints/${ep.id}/disable`, { key: live.key });
  t.equal(disabled.status, 200);
  const after = await readiness(live);
  t.equal(after.ready, false, "a disabled endpoint no longer counts");
  t.same(failing(after), ["webhook_endpoint", "webhook_test_delivered"], "nor does the test delivered to it");
});

t.test("Live: a network with intents but no free address names that network and its command", async (t) => {
  const live = await bareKey("live");
  const ep = await s.createEndpoint("/live/pool", live);
  await waitForDelivery(s, await sendTest(live, ep.id), (d) => d.status === "delivered", 15_000, live);
  await importAddresses(em(), live.merchant, "live", "solana", base58.encode(randomBytes(32)));
  const pooled = await readiness(live);
  t.equal(pooled.ready, true, "an imported pool with a free address is a source");
  t.match(check(pooled, "deposit_addresses").message, /solana \(imported pool, 1 free\)/);

  const pi = await call(base, "POST", `/api/v1/merchants/${live.merchant}/payment-intents`, {
    key: live.key,
    idempotencyKey: idemKey(),
    body: { network: "solana", asset: "SOL", requested_amount: "1.5" },
  });
  t.equal(pi.status, 200, "the intent takes the pool's only address");
  const usedUp = await readiness(live);
  t.equal(usedUp.ready, false);
  t.same(failing(usedUp), ["deposit_addresses"]);
  t.match(check(usedUp, "deposit_addresses").message, "No live deposit-address source for solana");
  t.match(check(usedUp, "deposit_addresses").message, `npm run -s admin -- address import --merchant ${live.merchant} --environment live --network solana --file <file>`);

  await importAddresses(em(), live.merchant, "live", "solana", base58.encode(randomBytes(32)));
  t.equal((await readiness(live)).ready, true, "more addresses: ready again");
});

t.test("Test: the built-in test keys are the deposit-address source; environments are kept apart", async (t) => {
  const test = await bareKey("test");
  const first = await readiness(test);
  t.equal(first.environment, "test");
  t.same(failing(first), ["webhook_endpoint", "webhook_test_delivered"]);
  t.equal(check(first, "deposit_addresses").passed, true);
  t.match(check(first, "deposit_addresses").message, /built-in test keys/);

  // The same merchant's Live endpoint and delivered test are invisible to its Test key.
  const live = await bareKey("live", test.merchant);
  const liveEp = await s.createEndpoint("/live/iso", live);
  await waitForDelivery(s, await sendTest(live, liveEp.id), (d) => d.status === "delivered", 15_000, live);
  const stillTest = await readiness(test);
  t.same(failing(stillTest), ["webhook_endpoint", "webhook_test_delivered"], "a Test key does not see Live endpoints");
  t.notMatch(JSON.stringify(stillTest), liveEp.id);
  const liveView = await readiness(live);
  t.equal(liveView.environment, "live");
  t.same(failing(liveView), ["deposit_addresses"], "Live sees its own endpoint and test");

  const ep = await s.createEndpoint("/test/ok", test);
  t.same(failing(await readiness(test)), ["webhook_test_delivered"]);
  await waitForDelivery(s, await sendTest(test, ep.id), (d) => d.status === "delivered", 15_000, test);
  const ready = await readiness(test);
  t.equal(ready.ready, true);
  t.notMatch(JSON.stringify(await readiness(live)), ep.id, "nor does Live see Test's");
});

t.test("recommended checks: a mostly failing endpoint and an old API key; ready stays true", async (t) => {
  const c = await bareKey("test");
  const good = await s.createEndpoint("/ok/health", c);
  await waitForDelivery(s, await sendTest(c, good.id), (d) => d.status === "delivered", 15_000, c);
  const bad = await s.createEndpoint("/fail/health", c);
  for (let i = 0; i < 2; i++) {
    const failed = await waitForDelivery(s, await sendTest(c, bad.id), (d) => d.status === "failed", 15_000, c);
    t.equal(failed.last_status_code, 410);
  }
  const r = await readiness(c);
  t.equal(r.ready, true, "recommended checks do not decide ready");
  t.same(failing(r), ["endpoint_health"]);
  const health = check(r, "endpoint_health").message;
  t.match(health, `${bad.id} (2 of its last 2 finished deliveries failed)`);
  t.notMatch(health, good.id, "the healthy endpoint is not named");
  t.match(health, /Fix the receiver/);
  t.match(health, `/webhook-endpoints/${bad.id}/disable`);
  t.notMatch(JSON.stringify(r), hookHost, "no endpoint URL (it may carry a token)");
  t.notMatch(JSON.stringify(r), /whsec_|sk_test_|sk_live_/, "no secret");
  t.match(check(r, "webhook_test_delivered").message, good.id, "the healthy endpoint's delivered test counts");

  await call(base, "POST", `/api/v1/merchants/${c.merchant}/webhook-endpoints/${bad.id}/disable`, { key: c.key });
  t.same(failing(await readiness(c)), [], "a disabled endpoint is not judged");

  const other = await merchantWithKey(s.app, "test", ["webhooks:read"], c.merchant);
  await em().execute(`update api_keys set created_at = now() - interval '400 days' where id = ?`, [other.keyId]);
  const old = await readiness(c);
  t.equal(old.ready, true);
  t.same(failing(old), ["api_key_age"]);
  const age = check(old, "api_key_age").message;
  t.match(age, `${other.keyId} (400 days)`);
  t.notMatch(age, c.keyId, "the young key is not named");
  t.match(age, `npm run -s admin -- api-key create --merchant ${c.merchant} --environment test --scopes webhooks:read`);
  t.match(age, `npm run -s admin -- api-key revoke --id ${other.keyId}`);
  t.notMatch(JSON.stringify(old), other.key, "no API key secret");
  t.notMatch(JSON.stringify(old), other.key.slice(0, 12), "nor its hint");
  t.notMatch(JSON.stringify(old), c.key.slice(0, 12));

  const live = await bareKey("live", c.merchant);
  await em().execute(`update api_keys set created_at = now() - interval '400 days' where id = ?`, [live.keyId]);
  t.same(failing(await readiness(c)), ["api_key_age"], "a Live key's age is Live's business");
  t.notMatch(check(await readiness(c), "api_key_age").message, live.keyId);

  await revokeApiKey(em(), other.keyId);
  t.same(failing(await readiness(c)), [], "a revoked key is not active");
});

t.test("credentials: scope, merchant, key", async (t) => {
  const c = await bareKey("test");
  const path = `/api/v1/merchants/${c.merchant}/go-live/readiness`;
  const noScope = await merchantWithKey(s.app, "test", ["webhooks:read", "payment_intents:read"], c.merchant);
  const denied = await call(base, "GET", path, { key: noScope.key });
  t.equal(denied.status, 403);
  t.equal(denied.body.error.code, "insufficient_scope");
  const onlyScope = await merchantWithKey(s.app, "test", ["merchant:readiness"], c.merchant);
  t.equal((await call(base, "GET", path, { key: onlyScope.key })).status, 200, "merchant:readiness alone is enough");

  const other = await bareKey("test");
  const mismatch = await call(base, "GET", path, { key: other.key });
  t.equal(mismatch.status, 403);
  t.equal(mismatch.body.error.code, "merchant_mismatch");

  const anonymous = await call(base, "GET", path);
  t.equal(anonymous.status, 401);
  t.equal(anonymous.body.error.code, "unauthenticated");
  const unknown = await call(base, "GET", path, { key: `sk_test_${"A".repeat(32)}` });
  t.equal(unknown.status, 401);
  t.equal(unknown.body.error.code, "invalid_api_key");
  const post = await call(base, "POST", path, { key: c.key });
  t.equal(post.status, 405);
  t.equal(post.headers.get("allow"), "GET");
});

t.test("over gRPC with the Connect client", async (t) => {
  const client = createClient(ReadinessService, createGrpcTransport({ baseUrl: s.rpcUrl }));
  const c = await bareKey("test");
  const ep = await s.createEndpoint("/grpc/ok", c);
  await waitForDelivery(s, await sendTest(c, ep.id), (d) => d.status === "delivered", 15_000, c);
  const res = await client.getGoLiveReadiness({ merchant: c.merchant }, { headers: { authorization: `Bearer ${c.key}` } });
  t.equal(res.data?.ready, true);
  t.equal(res.data?.environment, "test");
  t.same(res.data?.checks.map((x) => [x.id, x.passed, x.severity]), [
    ["webhook_endpoint", true, "required"],
    ["webhook_test_delivered", true, "required"],
    ["deposit_addresses", true, "required"],
    ["chain_watcher", true, "recommended"],
    ["exchange_rates", true, "recommended"],
    ["endpoint_health", true, "recommended"],
    ["api_key_age", true, "recommended"],
  ]);
  const rest = await readiness(c);
  t.same(res.data?.checks.map((x) => x.message), rest.checks.map((x) => x.message), "the same answer as REST");

  const codeOf = (e: unknown) => (e instanceof ConnectError ? e.findDetails(ErrorDetailSchema)[0]?.code : undefined);
  const noScope = await merchantWithKey(s.app, "test", ["webhooks:read"], c.merchant);
  t.equal(codeOf(await client.getGoLiveReadiness({ merchant: c.merchant }, { headers: { authorization: `Bearer ${noScope.key}` } }).catch((e) => e)), "insufficient_scope");
  const other = await bareKey("test");
  t.equal(codeOf(await client.getGoLiveReadiness({ merchant: c.merchant }, { headers: { authorization: `Bearer ${other.key}` } }).catch((e) => e)), "merchant_mismatch");
  t.equal(codeOf(await client.getGoLiveReadiness({ merchant: c.merchant }).catch((e) => e)), "unauthenticated");
});

t.test("Live: a network the watcher could follow but no watcher follows fails chain_watcher", async (t) => {
  const live = await bareKey("live");
  const ep = await s.createEndpoint("/live/chains", live);
  await waitForDelivery(s, await sendTest(live, ep.id), (d) => d.status === "delivered", 15_000, live);
  await setAccountKey(em(), live.merchant, "live", "polygon", HDKey.fromMasterSeed(randomBytes(32)).derive("m/44'/60'/0'").publicExtendedKey);
  const r = await readiness(live);
  t.equal(r.ready, false);
  t.same(failing(r), ["chain_watcher"]);
  t.match(check(r, "chain_watcher").message, "No watcher has followed the Live chain of polygon");
  t.match(check(r, "chain_watcher").message, "POLYGON_LIVE_RPC_URL");
});

t.test("readiness names a network not followed, never a node: not its host, not what a watcher wrote of it", async (t) => {
  const live = await bareKey("live");
  const ep = await s.createEndpoint("/live/nodes", live);
  await waitForDelivery(s, await sendTest(live, ep.id), (d) => d.status === "delivered", 15_000, live);
  await setAccountKey(em(), live.merchant, "live", "polygon", HDKey.fromMasterSeed(randomBytes(32)).derive("m/44'/60'/0'").publicExtendedKey);
  // Any observe credential may say what it likes of a node: an operator's host, or words for merchants.
  const { headers } = await watcherClient(s.app, s.rpcUrl, "live");
  const chains = createClient(ChainService, createGrpcTransport({ baseUrl: s.rpcUrl }));
  const host = "https://polygon-node.internal.example:8545";
  const words = "support moved: pay to 0x1111111111111111111111111111111111111111";
  await chains.reportChainNode({ network: "polygon", watcherId: "said-anything", node: host, problem: words }, { headers });
  const r = await readiness(live);
  const message = check(r, "chain_watcher").message;
  t.match(message, "No watcher has followed the Live chain of polygon", "the network not followed");
  t.match(message, "A watcher of polygon runs but does not follow the chain: the operator sees why", "and that its watcher has a problem the operator sees");
  const body = JSON.stringify(r);
  t.notOk(body.includes("polygon-node.internal.example"), "never the node's host");
  t.notOk(body.includes("support moved") || body.includes("0x1111"), "never what a watcher wrote");
});
