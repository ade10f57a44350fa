// Go-live readiness, the pure part: each check's decision and message from given facts.
import t from "tap";
import {
  addressCommand,
  chainWatcherCheck,
  apiKeyAgeCheck,
  checkIds,
  depositAddressCheck,
  endpointHealthCheck,
  evaluate,
  mostlyFailing,
  webhookEndpointCheck,
  webhookTestCheck,
  type EndpointFacts,
  type ReadinessFacts,
  type ReadinessSettings,
} from "../../services/readiness/checks.ts";

const now = new Date("2026-11-23T10:00:00.000Z");
const settings: ReadinessSettings = { publicBaseUrl: "https://api.example.test", apiKeyMaxAgeDays: 365, now };
const daysAgo = (n: number) => new Date(now.getTime() - n * 86_400_000);

function endpoint(id: string, over: Partial<EndpointFacts> = {}): EndpointFacts {
  return { id, createdAt: daysAgo(1), testDeliveredAt: null, lastTest: null, finished: 0, failed: 0, enabledEvents: ["*"], ...over };
}

function facts(over: Partial<ReadinessFacts> = {}, environment: "test" | "live" = "live"): ReadinessFacts {
  return {
    owner: { merchantId: "mer_1", environment },
    chains: [
      { network: "ethereum", savedAt: now },
      { network: "polygon", savedAt: now },
    ],
    endpoints: [],
    addresses: { usedNetworks: [], accountKeys: [], pools: [] },
    apiKeys: [{ id: "key_1", createdAt: daysAgo(10), scopes: ["merchant:readiness"] }],
    ...over,
  };
}

t.test("the checks, in order, with their severities; ready only when every required one passes", async (t) => {
  const none = evaluate(facts(), settings);
  t.same(
    none.checks.map((c) => [c.id, c.severity]),
    [
      ["webhook_endpoint", "required"],
      ["webhook_test_delivered", "required"],
      ["deposit_addresses", "required"],
      ["chain_watcher", "required"],
      ["exchange_rates", "recommended"],
      ["endpoint_health", "recommended"],
      ["api_key_age", "recommended"],
    ],
  );
  t.same(none.checks.map((c) => c.id), [...checkIds]);
  t.equal(none.ready, false);
  t.equal(none.environment, "live");

  const good = facts({
    endpoints: [endpoint("we_a", { testDeliveredAt: daysAgo(0), finished: 1 })],
    addresses: { usedNetworks: ["ethereum"], accountKeys: ["ethereum"], pools: [] },
  });
  const ready = evaluate(good, settings);
  t.equal(ready.ready, true);
  t.ok(ready.checks.every((c) => c.passed));

  const failingRecommended = evaluate(
    { ...good, endpoints: [endpoint("we_a", { testDeliveredAt: daysAgo(0), finished: 3, failed: 2 })], apiKeys: [{ id: "key_old", createdAt: daysAgo(400), scopes: [] }] },
    settings,
  );
  t.equal(failingRecommended.ready, true, "recommended checks do not change ready");
  t.same(failingRecommended.checks.filter((c) => !c.passed).map((c) => c.id), ["endpoint_health", "api_key_age"]);
});

t.test("webhook_endpoint", async (t) => {
  const fail = webhookEndpointCheck(facts(), settings);
  t.equal(fail.passed, false);
  t.match(fail.message, "curl -X POST https://api.example.test/api/v1/merchants/mer_1/webhook-endpoints");
  t.match(fail.message, `-H "Content-Type: application/json"`);
  t.match(fail.message, "<api_key>");
  const pass = webhookEndpointCheck(facts({ endpoints: [endpoint("we_a"), endpoint("we_b")] }), settings);
  t.equal(pass.passed, true);
  t.match(pass.message, /2 enabled webhook endpoints in live: we_a and we_b/);

  const deaf = endpoint("we_t", { enabledEvents: ["webhook.test", "webhook_endpoint.disabled"] });
  const none = webhookEndpointCheck(facts({ endpoints: [deaf] }), settings);
  t.equal(none.passed, false, "an endpoint filtered to no payment event does not count");
  t.match(none.message, "No enabled webhook endpoint in live receives payment events.");
  t.match(none.message, "we_t (enabled_events: webhook.test, webhook_endpoint.disabled) receives no payment event");
  const one = webhookEndpointCheck(facts({ endpoints: [deaf, endpoint("we_c", { enabledEvents: ["payment.confirmed"] })] }), settings);
  t.equal(one.passed, true, "one that takes payment.confirmed does");
  t.match(one.message, "we_t (enabled_events: webhook.test, webhook_endpoint.disabled) receives no payment event");
});

t.test("webhook_test_delivered", async (t) => {
  const noEndpoint = webhookTestCheck(facts(), settings);
  t.equal(noEndpoint.passed, false);
  t.match(noEndpoint.message, "/webhook-endpoints/<endpoint_id>/test");

  const notSent = webhookTestCheck(facts({ endpoints: [endpoint("we_old"), endpoint("we_new")] }), settings);
  t.equal(notSent.passed, false);
  t.match(notSent.message, `curl -X POST https://api.example.test/api/v1/merchants/mer_1/webhook-endpoints/we_new/test -H "Authorization: Bearer <api_key>"`);

  const failed = webhookTestCheck(facts({ endpoints: [endpoint("we_a", { lastTest: { deliveryId: "wd_1", status: "failed", lastStatusCode: 500 } })] }), settings);
  t.match(failed.message, /last test delivery wd_1 to we_a failed \(HTTP 500\)/);
  t.match(failed.message, "/webhook-endpoints/we_a/test");
  const pending = webhookTestCheck(facts({ endpoints: [endpoint("we_a", { lastTest: { deliveryId: "wd_2", status: "pending", lastStatusCode: null } })] }), settings);
  t.match(pending.message, /wd_2 to we_a is pending/);

  const at = daysAgo(2);
  const pass = webhookTestCheck(facts({ endpoints: [endpoint("we_a"), endpoint("we_b", { testDeliveredAt: at })] }), settings);
  t.equal(pass.passed, true);
  t.match(pass.message, `enabled endpoint we_b at ${at.toISOString()}`);
});

t.test("deposit_addresses", async (t) => {
  const test = depositAddressCheck(facts({ addresses: { usedNetworks: ["bitcoin", "solana"], accountKeys: [], pools: [] } }, "test"));
  t.equal(test.passed, true, "Test: the built-in test keys cover every network");
  t.match(test.message, /built-in test keys/);

  const nothing = depositAddressCheck(facts());
  t.equal(nothing.passed, false, "Live with no source at all");
  t.match(nothing.message, "npm run -s admin -- address-source set --merchant mer_1 --environment live --network <network> --xpub <account xpub>");
  t.match(nothing.message, "npm run -s admin -- address import --merchant mer_1 --environment live --network <network> --file <file>");

  const configuredUnused = depositAddressCheck(facts({ addresses: { usedNetworks: [], accountKeys: ["bitcoin"], pools: [] } }));
  t.equal(configuredUnused.passed, true, "one network configured, no intents yet");
  t.match(configuredUnused.message, /bitcoin \(account key\)/);

  const missing = depositAddressCheck(
    facts({
      addresses: {
        usedNetworks: ["solana", "polygon", "bitcoin", "ethereum"],
        accountKeys: ["ethereum"],
        pools: [{ network: "polygon", imported: 3, free: 0 }, { network: "solana", imported: 0, free: 0 }],
      },
    }),
  );
  t.equal(missing.passed, false);
  t.match(missing.message, /for bitcoin, solana and polygon, where you have created intents/, "the networks, in the order of the asset table");
  t.match(missing.message, "bitcoin: npm run -s admin -- address-source set --merchant mer_1 --environment live --network bitcoin --xpub <account xpub>");
  t.match(missing.message, "polygon (every imported address is in use): npm run -s admin -- address import --merchant mer_1 --environment live --network polygon --file <file>");
  t.match(missing.message, "solana: npm run -s admin -- address import --merchant mer_1 --environment live --network solana --file <file>");
  t.notMatch(missing.message, /network ethereum/, "a covered network is not named");

  const covered = depositAddressCheck(
    facts({ addresses: { usedNetworks: ["solana", "ethereum"], accountKeys: ["ethereum"], pools: [{ network: "solana", imported: 5, free: 2 }] } }),
  );
  t.equal(covered.passed, true);
  t.match(covered.message, /ethereum \(account key\) and solana \(imported pool, 2 free\)/);

  t.equal(addressCommand({ merchantId: "m", environment: "live" }, "solana", undefined), "solana: npm run -s admin -- address import --merchant m --environment live --network solana --file <file>");
});

t.test("endpoint_health: more than half of the last finished deliveries failed", async (t) => {
  t.equal(mostlyFailing({ finished: 0, failed: 0 }), false, "no deliveries yet");
  t.equal(mostlyFailing({ finished: 20, failed: 10 }), false, "exactly half is not more than half");
  t.equal(mostlyFailing({ finished: 20, failed: 11 }), true);
  t.equal(mostlyFailing({ finished: 1, failed: 1 }), true);
  const pass = endpointHealthCheck(facts({ endpoints: [endpoint("we_a", { finished: 20, failed: 10 })] }), settings);
  t.equal(pass.passed, true);
  const fail = endpointHealthCheck(
    facts({ endpoints: [endpoint("we_ok", { finished: 4, failed: 0 }), endpoint("we_bad", { finished: 20, failed: 15 }), endpoint("we_worse", { finished: 1, failed: 1 })] }),
    settings,
  );
  t.equal(fail.passed, false);
  t.equal(fail.severity, "recommended");
  t.match(fail.message, "we_bad (15 of its last 20 finished deliveries failed) and we_worse (1 of its last 1 finished delivery failed)");
  t.match(fail.message, /Fix the receiver/);
  t.match(fail.message, `curl -X POST https://api.example.test/api/v1/merchants/mer_1/webhook-endpoints/we_bad/disable`);
  t.notMatch(fail.message, /we_ok/);
});

t.test("api_key_age", async (t) => {
  const young = apiKeyAgeCheck(facts({ apiKeys: [{ id: "key_a", createdAt: daysAgo(365), scopes: [] }] }), settings);
  t.equal(young.passed, true, "exactly the limit is not older");
  t.match(young.message, /365 days old/);
  const old = apiKeyAgeCheck(
    facts({
      apiKeys: [
        { id: "key_a", createdAt: daysAgo(400), scopes: ["webhooks:read", "merchant:readiness"] },
        { id: "key_b", createdAt: daysAgo(3), scopes: [] },
      ],
    }),
    settings,
  );
  t.equal(old.passed, false);
  t.match(old.message, /key_a \(400 days\)/);
  t.notMatch(old.message, /key_b/);
  t.match(old.message, "npm run -s admin -- api-key create --merchant mer_1 --environment live --scopes webhooks:read,merchant:readiness");
  t.match(old.message, "npm run -s admin -- api-key revoke --id key_a");
  t.notMatch(old.message, "&&", "the revoke is not chained to the create: the integration moves first");
  const shorter = apiKeyAgeCheck(facts({ apiKeys: [{ id: "key_b", createdAt: daysAgo(3), scopes: [] }] }), { ...settings, apiKeyMaxAgeDays: 2 });
  t.equal(shorter.passed, false, "the limit is configurable");
});

t.test("chain_watcher: each accepted Live network the built-in watcher follows is followed now", async (t) => {
  const accepts = { usedNetworks: [], accountKeys: ["ethereum", "polygon", "bitcoin", "tron"], pools: [{ network: "solana", imported: 5, free: 5 }] };
  const operated = { ...settings, operatorWatchedNetworks: ["solana"] };
  const ok = chainWatcherCheck(facts({ addresses: accepts, chains: [...facts().chains, { network: "bitcoin", savedAt: now }, { network: "tron", savedAt: now }] }), operated);
  t.same([ok.passed, ok.severity], [true, "required"]);
  t.match(ok.message, "A watcher follows the Live chain of bitcoin, ethereum, tron and polygon.");
  t.match(ok.message, "Payments on solana are seen only through a watcher of your operator's own (ObservationService; OPERATOR_WATCHED_NETWORKS).");
  // solana has no built-in watcher: unless the operator names it, nobody follows it (and Live creates there are refused).
  const unnamed = chainWatcherCheck(facts({ addresses: accepts, chains: [...facts().chains, { network: "bitcoin", savedAt: now }, { network: "tron", savedAt: now }] }), settings);
  t.equal(unnamed.passed, false, "an accepted network no watcher follows fails, built-in watcher or not");
  t.match(unnamed.message, "No watcher has followed the Live chain of solana");
  t.match(unnamed.message, "network_not_watched");
  t.match(unnamed.message, "solana has no built-in watcher: the operator names solana in OPERATOR_WATCHED_NETWORKS");
  // A built-in network the operator's own watcher follows counts without a chain position.
  const ownTron = chainWatcherCheck(facts({ addresses: accepts, chains: [...facts().chains, { network: "bitcoin", savedAt: now }] }), { ...settings, operatorWatchedNetworks: ["solana", "tron"] });
  t.equal(ownTron.passed, true, "tron named in OPERATOR_WATCHED_NETWORKS");
  t.match(ownTron.message, "Payments on tron and solana are seen only through a watcher of your operator's own");
  const noTron = chainWatcherCheck(facts({ addresses: accepts, chains: [...facts().chains, { network: "bitcoin", savedAt: now }] }), settings);
  t.equal(noTron.passed, false, "tron is followed by the built-in watcher: accepted on Live, it needs one");
  t.match(noTron.message, "sets TRON_LIVE_RPC_URL to a mainnet node");
  t.match(noTron.message, "or names it in OPERATOR_WATCHED_NETWORKS");

  const minute = 60_000;
  const stale = chainWatcherCheck(
    facts({ addresses: accepts, chains: [{ network: "ethereum", savedAt: new Date(now.getTime() - 3 * minute) }, { network: "polygon", savedAt: now }, { network: "bitcoin", savedAt: now }, { network: "tron", savedAt: now }] }),
    operated,
  );
  t.equal(stale.passed, false, "a watcher that stopped saving 3 minutes ago is not following");
  t.match(stale.message, "No watcher has followed the Live chain of ethereum in the last 2 minutes");
  t.match(stale.message, "sets ETHEREUM_LIVE_RPC_URL to a mainnet node and runs the watcher role");
  const none = chainWatcherCheck(facts({ addresses: { usedNetworks: ["polygon"], accountKeys: [], pools: [] }, chains: [] }), settings);
  t.match(none.message, "Live chain of polygon");
  t.equal(evaluate(facts({ chains: [], addresses: { usedNetworks: ["ethereum"], accountKeys: ["ethereum"], pools: [] } }), settings).ready, false, "required in Live");

  const nothing = chainWatcherCheck(facts({ chains: [] }), settings);
  t.same([nothing.passed, nothing.message], [true, "No Live network with a built-in watcher is accepted yet."]);

  const test = chainWatcherCheck(facts({ chains: [] }, "test"), settings);
  t.same([test.passed, test.severity], [false, "recommended"]);
  t.match(test.message, "npm run devchain");
  t.equal(chainWatcherCheck(facts({ chains: [] }, "test"), { ...settings, operatorWatchedNetworks: ["ethereum"] }).passed, true, "a watcher of the operator's own follows a Test chain");
  t.equal(chainWatcherCheck(facts({}, "test"), settings).passed, true);
});

t.test("chain_watcher and deposit_addresses: base and arbitrum as built-in networks, on Live as on Test", async (t) => {
  const l2 = { usedNetworks: [], accountKeys: ["arbitrum", "base"], pools: [] };
  const both = chainWatcherCheck(facts({ addresses: l2, chains: [{ network: "base", savedAt: now }] }), settings);
  t.equal(both.passed, false, "arbitrum accepted on Live, and no watcher follows it yet");
  t.match(both.message, "No watcher has followed the Live chain of arbitrum in the last 2 minutes");
  t.match(both.message, "The operator sets ARBITRUM_LIVE_RPC_URL to a mainnet node and runs the watcher role", "its node setting, as for base");
  t.equal(chainWatcherCheck(facts({ addresses: l2, chains: [{ network: "base", savedAt: now }, { network: "arbitrum", savedAt: now }] }), settings).passed, true, "the built-in watcher follows Live arbitrum");
  t.equal(chainWatcherCheck(facts({ addresses: l2, chains: [{ network: "base", savedAt: now }] }), { ...settings, operatorWatchedNetworks: ["arbitrum"] }).passed, true, "an operator's own watcher may report Live arbitrum");
  const baseOnly = chainWatcherCheck(facts({ addresses: { ...l2, accountKeys: ["base"] }, chains: [{ network: "base", savedAt: now }] }), settings);
  t.same([baseOnly.passed, baseOnly.message], [true, "A watcher follows the Live chain of base."]);
  const baseMissing = chainWatcherCheck(facts({ addresses: { ...l2, accountKeys: ["base"] }, chains: [] }), settings);
  t.match(baseMissing.message, "sets BASE_LIVE_RPC_URL to a mainnet node");
  t.match(chainWatcherCheck(facts({ chains: [] }, "test"), settings).message, "BASE_TEST_RPC_URL, ARBITRUM_TEST_RPC_URL", "a Test chain to follow");
  t.match(depositAddressCheck(facts()).message, "(bitcoin, ethereum, polygon, base, arbitrum, tron)", "account keys are taken for base and arbitrum");
});
