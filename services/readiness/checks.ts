import type { Environment, Owner } from "../auth/keys.ts";
import { supportsAccountKey } from "../addresses/keys.ts";
import { blocksTaken, followedNetworks, networks } from "../vocabulary/assets.ts";
import { eventTypes, receives } from "../vocabulary/event-types.ts";
import type { EntityManager } from "../platform/db.ts";
import { networksWithNodeProblems } from "../chains/store.ts";
import { followingWithinMs } from "../chains/coverage.ts";
import { howToWatch } from "../intents/watched.ts";

/**
 * Go-live readiness: what the database shows of a merchant in one environment (readFacts,
 * the only part that queries), and the checks decided from it (pure, so each rule and
 * message is unit-tested). Messages name endpoints and keys by id only: never a URL (it may
 * carry a token), a secret or a key hint.
 */

export const checkIds = ["webhook_endpoint", "webhook_test_delivered", "deposit_addresses", "chain_watcher", "exchange_rates", "endpoint_health", "api_key_age"] as const;
export type CheckId = (typeof checkIds)[number];
export type Severity = "required" | "recommended";

export interface Check {
  id: CheckId;
  passed: boolean;
  severity: Severity;
  message: string;
}

export interface Readiness {
  ready: boolean;
  environment: Environment;
  checks: Check[];
}

/** The events a merchant acts on: an endpoint that takes none of them hears nothing of its payments. */
const paymentEventTypes = eventTypes.filter((t) => t.startsWith("payment."));

/** Finished deliveries per endpoint the health check looks at (newest first). */
export const healthWindow = 20;

/** An enabled endpoint, with its webhook.test history and its recent delivery outcomes. */
export interface EndpointFacts {
  id: string;
  createdAt: Date;
  /** When a webhook.test delivery to it last succeeded; null: never. */
  testDeliveredAt: Date | null;
  /** Its newest webhook.test delivery, whatever its status. */
  lastTest: { deliveryId: string; status: string; lastStatusCode: number | null } | null;
  /** Of its last `healthWindow` finished (delivered or failed) deliveries: how many, and how many failed. */
  finished: number;
  failed: number;
  /** Its enabled_events: ["*"] or the types it takes. */
  enabledEvents: string[];
}

export interface PoolFacts {
  network: string;
  imported: number;
  free: number;
}

export interface AddressFacts {
  /** Networks the merchant has created intents on in this environment. */
  usedNetworks: string[];
  /** Networks with an account key (address_sources). */
  accountKeys: string[];
  /** Imported address pools, per network. */
  pools: PoolFacts[];
}

export interface ApiKeyFacts {
  id: string;
  createdAt: Date;
  scopes: string[];
}

/** A chain (a network in the owner's environment) a watcher has followed: when it last saved its position. */
export interface ChainFacts {
  network: string;
  savedAt: Date | null;
  /** Set while the core counts nothing on the chain: a fork would take this many best blocks away, more than the network's maximum. */
  haltedDepth?: number | null;
  /** The fork parts below every block known of the chain: it would take at least haltedDepth blocks away. */
  haltedDepthIsLowerBound?: boolean;
}

/** A watcher that saved its position within this long is following its chain (the create path's notion too). */
export { followingWithinMs };

export interface ReadinessFacts {
  owner: Owner;
  /** The chains of the owner's environment with a watcher position. */
  chains: ChainFacts[];
  /**
   * The networks of the owner's environment whose watchers said within followingWithinMs that they
   * do not follow their node: which ones, never the node or why (the operator's, and any observe
   * credential can write them: ops chains, the watcher's log and metrics show them).
   */
  nodeProblems?: string[];
  /** Enabled endpoints, oldest first. */
  endpoints: EndpointFacts[];
  addresses: AddressFacts;
  /** Active (unrevoked) API keys of the merchant in this environment, oldest first. */
  apiKeys: ApiKeyFacts[];
  /** Whether the merchant has created a fiat-priced intent, in either environment: it prices in fiat. */
  fiatPricing?: boolean;
}

/** The rate engine's answer for an environment: whether every pair quotes now, and the pairs that do not. */
export interface RatesFreshness {
  ok: boolean;
  failing: string[];
}

export interface ReadinessSettings {
  /** Where merchants reach the API (PUBLIC_BASE_URL), for the curl commands. */
  publicBaseUrl: string;
  /** API_KEY_MAX_AGE_DAYS. */
  apiKeyMaxAgeDays: number;
  now: Date;
  /** Whether fiat-priced creates would be quoted now, per environment (the rpc process's rate engine); unset: no engine here. */
  rates?: (environment: "test" | "live") => RatesFreshness;
  /** OPERATOR_WATCHED_NETWORKS: networks a watcher of the operator's own follows, as the create path takes them. */
  operatorWatchedNetworks?: readonly string[];
}

const dayMs = 86_400_000;
const admin = "npm run -s admin --";

function merchantPath(s: ReadinessSettings, owner: Owner): string {
  return `${s.publicBaseUrl}/api/v1/merchants/${owner.merchantId}`;
}

function plural(n: number, one: string, many = `${one}s`): string {
  return `${n} ${n === 1 ? one : many}`;
}

function list(items: readonly string[]): string {
  if (items.length <= 1) return items.join("");
  return `${items.slice(0, -1).join(", ")} and ${items[items.length - 1]}`;
}

function byNetworkOrder(a: string, b: string): number {
  const ia = networks.indexOf(a);
  const ib = networks.indexOf(b);
  return (ia < 0 ? networks.length : ia) - (ib < 0 ? networks.length : ib) || a.localeCompare(b);
}

export function webhookEndpointCheck(facts: ReadinessFacts, s: ReadinessSettings): Check {
  const { owner, endpoints } = facts;
  const base = { id: "webhook_endpoint", severity: "required" } as const;
  const deaf = endpoints.filter((e) => !paymentEventTypes.some((type) => receives(e.enabledEvents, type)));
  const deafNote =
    deaf.length > 0
      ? ` ${list(deaf.map((e) => `${e.id} (enabled_events: ${e.enabledEvents.join(", ")})`))} ${deaf.length === 1 ? "receives" : "receive"} no payment event: create an endpoint whose enabled_events include the payment events you act on, or "*".`
      : "";
  if (endpoints.length > deaf.length) {
    return { ...base, passed: true, message: `${plural(endpoints.length, "enabled webhook endpoint")} in ${owner.environment}: ${list(endpoints.map((e) => e.id))}.${deafNote}` };
  }
  if (endpoints.length > 0) {
    return { ...base, passed: false, message: `No enabled webhook endpoint in ${owner.environment} receives payment events.${deafNote}` };
  }
  return {
    ...base,
    passed: false,
    message:
      `No enabled webhook endpoint in ${owner.environment}. Create one with an HTTPS URL of your server (port 443), and keep the signing_secret it returns: ` +
      `curl -X POST ${merchantPath(s, owner)}/webhook-endpoints -H "Authorization: Bearer <api_key>" -H "Content-Type: application/json" ` +
      `-d '{"url":"https://<your-server>/webhooks"}'`,
  };
}

export function webhookTestCheck(facts: ReadinessFacts, s: ReadinessSettings): Check {
  const { owner, endpoints } = facts;
  const base = { id: "webhook_test_delivered", severity: "required" } as const;
  const delivered = endpoints
    .filter((e): e is EndpointFacts & { testDeliveredAt: Date } => e.testDeliveredAt !== null)
    .sort((a, b) => b.testDeliveredAt.getTime() - a.testDeliveredAt.getTime())[0];
  if (delivered) {
    return { ...base, passed: true, message: `A webhook.test event was delivered to enabled endpoint ${delivered.id} at ${delivered.testDeliveredAt.toISOString()}.` };
  }
  const target = endpoints[endpoints.length - 1];
  const send = (id: string) => `curl -X POST ${merchantPath(s, owner)}/webhook-endpoints/${id}/test -H "Authorization: Bearer <api_key>"`;
  if (!target) {
    return {
      ...base,
      passed: false,
      message: `No webhook.test event was delivered: there is no enabled endpoint yet. Create one (see webhook_endpoint), then send a test event to it: ${send("<endpoint_id>")}`,
    };
  }
  let last = "";
  if (target.lastTest) {
    const { deliveryId, status, lastStatusCode } = target.lastTest;
    last =
      status === "failed"
        ? ` The last test delivery ${deliveryId} to ${target.id} failed${lastStatusCode !== null ? ` (HTTP ${lastStatusCode})` : ""}: check the receiver, which must verify the signature and answer 2xx.`
        : ` The last test delivery ${deliveryId} to ${target.id} is ${status}: wait for it to be delivered.`;
  }
  return {
    ...base,
    passed: false,
    message: `No webhook.test event has been delivered to an enabled endpoint in ${owner.environment}.${last} Send a test event to ${target.id}: ${send(target.id)}`,
  };
}

/** The admin command that gives `network` deposit addresses. */
export function addressCommand(owner: Owner, network: string, pool: PoolFacts | undefined): string {
  const target = `--merchant ${owner.merchantId} --environment ${owner.environment} --network ${network}`;
  const setKey = `${admin} address-source set ${target} --xpub <account xpub>`;
  const importPool = `${admin} address import ${target} --file <file>`;
  if (!supportsAccountKey(network)) return `${network}: ${importPool}`;
  if (pool && pool.imported > 0) return `${network} (every imported address is in use): ${importPool}, or set an account key: ${setKey}`;
  return `${network}: ${setKey}`;
}

export function depositAddressCheck(facts: ReadinessFacts): Check {
  const { owner, addresses } = facts;
  const base = { id: "deposit_addresses", severity: "required" } as const;
  const poolOf = (n: string) => addresses.pools.find((p) => p.network === n);
  const sources = [
    ...addresses.accountKeys.map((n) => ({ network: n, what: "account key" })),
    ...addresses.pools.filter((p) => p.free > 0 && !addresses.accountKeys.includes(p.network)).map((p) => ({ network: p.network, what: `imported pool, ${p.free} free` })),
  ].sort((a, b) => byNetworkOrder(a.network, b.network));
  const configured = new Set(sources.map((x) => x.network));
  const own = sources.map((x) => `${x.network} (${x.what})`);
  if (owner.environment === "test") {
    return {
      ...base,
      passed: true,
      message: `Test intents take deposit addresses from the built-in test keys on every network${own.length ? `; your own sources: ${list(own)}` : ""}.`,
    };
  }
  const used = [...new Set(addresses.usedNetworks)].sort(byNetworkOrder);
  const missing = used.filter((n) => !configured.has(n));
  if (missing.length > 0) {
    return {
      ...base,
      passed: false,
      message:
        `No ${owner.environment} deposit-address source for ${list(missing)}, where you have created intents. ` +
        `Give your wallet account's extended PUBLIC key (never a private one), or import addresses: ${missing.map((n) => addressCommand(owner, n, poolOf(n))).join("; ")}`,
    };
  }
  if (configured.size === 0) {
    return {
      ...base,
      passed: false,
      message:
        `No ${owner.environment} deposit-address source is set up for any network. For each network you will accept, give your wallet account's extended PUBLIC key ` +
        `(bitcoin, ethereum, polygon, base, arbitrum, tron): ${admin} address-source set --merchant ${owner.merchantId} --environment ${owner.environment} --network <network> --xpub <account xpub>; ` +
        `or import addresses (solana, or any network): ${admin} address import --merchant ${owner.merchantId} --environment ${owner.environment} --network <network> --file <file>`,
    };
  }
  return {
    ...base,
    passed: true,
    message: `Live deposit addresses are set up for ${list(own)}${used.length ? `, covering every network with intents (${list(used)})` : ""}.`,
  };
}

/** Whether an endpoint's recent deliveries are mostly failing: more than half of its last finished ones. */
export function mostlyFailing(e: Pick<EndpointFacts, "finished" | "failed">): boolean {
  return e.finished > 0 && e.failed * 2 > e.finished;
}

export function endpointHealthCheck(facts: ReadinessFacts, s: ReadinessSettings): Check {
  const { owner, endpoints } = facts;
  const base = { id: "endpoint_health", severity: "recommended" } as const;
  const failing = endpoints.filter(mostlyFailing);
  if (failing.length === 0) {
    return {
      ...base,
      passed: true,
      message:
        endpoints.length === 0
          ? "No enabled endpoint, so none is failing."
          : `No enabled endpoint (of ${endpoints.length}) has more than half of its last ${healthWindow} finished deliveries failed.`,
    };
  }
  const path = merchantPath(s, owner);
  return {
    ...base,
    passed: false,
    message:
      `Most recent deliveries fail for ${list(failing.map((e) => `${e.id} (${e.failed} of its last ${plural(e.finished, "finished delivery", "finished deliveries")} failed)`))}. ` +
      `Fix the receiver (it must verify the signature and answer 2xx promptly; GET ${path}/webhook-deliveries?endpoint_id=<id> shows each attempt), ` +
      `or disable the endpoint: ${failing.map((e) => `curl -X POST ${path}/webhook-endpoints/${e.id}/disable -H "Authorization: Bearer <api_key>"`).join("; ")}`,
  };
}

export function apiKeyAgeCheck(facts: ReadinessFacts, s: ReadinessSettings): Check {
  const { owner, apiKeys } = facts;
  const base = { id: "api_key_age", severity: "recommended" } as const;
  const age = (k: ApiKeyFacts) => Math.floor((s.now.getTime() - k.createdAt.getTime()) / dayMs);
  const old = apiKeys.filter((k) => s.now.getTime() - k.createdAt.getTime() > s.apiKeyMaxAgeDays * dayMs);
  if (old.length === 0) {
    const oldest = apiKeys.reduce((max, k) => Math.max(max, age(k)), 0);
    return {
      ...base,
      passed: true,
      message: `No active ${owner.environment} API key is older than ${plural(s.apiKeyMaxAgeDays, "day")} (${plural(apiKeys.length, "active key")}; the oldest is ${plural(oldest, "day")} old).`,
    };
  }
  const target = `--merchant ${owner.merchantId} --environment ${owner.environment}`;
  return {
    ...base,
    passed: false,
    message:
      `${old.length === 1 ? "An active API key is" : "Active API keys are"} older than ${plural(s.apiKeyMaxAgeDays, "day")}: ${list(old.map((k) => `${k.id} (${plural(age(k), "day")})`))}. ` +
      `Rotate each: create a new key with the same scopes, move your integration to it, and only then revoke the old one. ` +
      old.map((k) => `${k.id}: ${admin} api-key create ${target} --scopes ${k.scopes.join(",")}, then ${admin} api-key revoke --id ${k.id}`).join("; "),
  };
}

/**
 * Live: every network the merchant accepts (a deposit-address source, or intents created on it)
 * has a watcher following its mainnet now: the built-in one (a position saved within
 * followingWithinMs), or one of the operator's own named in OPERATOR_WATCHED_NETWORKS; else no
 * payment on it is ever seen, and Live creates there are refused (network_not_watched, the same
 * settings: chains/coverage.ts). Test: recommended, a Test chain followed (else only the sandbox pays).
 */
export function chainWatcherCheck(facts: ReadinessFacts, s: ReadinessSettings): Check {
  const { owner, addresses } = facts;
  const operator = s.operatorWatchedNetworks ?? [];
  const builtIn = (n: string) => (followedNetworks as readonly string[]).includes(n);
  const following = (n: string) => facts.chains.some((c) => c.network === n && c.savedAt !== null && s.now.getTime() - c.savedAt.getTime() <= followingWithinMs);
  const followed = followedNetworks.filter(following);
  // Which chains not followed have a watcher that runs but does not follow its node: nothing of the node.
  const said = (networks: readonly string[]) => {
    const troubled = networks.filter((n) => facts.nodeProblems?.includes(n));
    if (troubled.length === 0) return "";
    return ` A watcher of ${list(troubled)} runs but does not follow the chain: the operator sees why (npm run -s ops -- chains, the watcher's log and metrics).`;
  };
  // A chain stopped by a reorg deeper than its maximum counts nothing, followed or not: said first.
  const stopped = facts.chains.filter((c) => typeof c.haltedDepth === "number").sort((a, b) => byNetworkOrder(a.network, b.network));
  if (stopped.length > 0) {
    return {
      id: "chain_watcher",
      severity: owner.environment === "test" ? "recommended" : "required",
      passed: false,
      message:
        `Payments on ${list(stopped.map((c) => c.network))} do not count for now: ` +
        stopped.map((c) => `on ${c.network} a reorg would take ${blocksTaken(c.haltedDepth as number, c.haltedDepthIsLowerBound === true)} off the chain counted so far`).join("; ") +
        ", deeper than is followed without a person looking. Nothing there is counted or taken back until the operator checks the chain and resumes it.",
    };
  }
  const operatorNote = (networks: readonly string[]) =>
    networks.length > 0 ? ` Payments on ${list(networks)} are seen only through a watcher of your operator's own (ObservationService; OPERATOR_WATCHED_NETWORKS).` : "";
  if (owner.environment === "test") {
    const base = { id: "chain_watcher", severity: "recommended" } as const;
    if (followed.length > 0) return { ...base, passed: true, message: `A watcher follows the Test chain of ${list(followed)}: Test intents there can be paid with real transactions.${operatorNote(operator)}` };
    if (operator.length > 0) return { ...base, passed: true, message: `No built-in watcher follows a Test chain.${operatorNote(operator)}` };
    return {
      ...base,
      passed: false,
      message:
        "No watcher follows a Test chain: Test intents are paid only with the sandbox simulator (their responses and checkout pages say so). Point the watcher at a testnet node (BITCOIN_TEST_RPC_URL, ETHEREUM_TEST_RPC_URL, POLYGON_TEST_RPC_URL, BASE_TEST_RPC_URL, ARBITRUM_TEST_RPC_URL, TRON_TEST_RPC_URL) or at the local dev chain (npm run devchain)." +
        said(followedNetworks),
    };
  }
  const base = { id: "chain_watcher", severity: "required" } as const;
  const accepted = [...new Set([...addresses.usedNetworks, ...addresses.accountKeys, ...addresses.pools.filter((p) => p.imported > 0).map((p) => p.network)])].sort(byNetworkOrder);
  const own = accepted.filter((n) => operator.includes(n));
  const missing = accepted.filter((n) => !operator.includes(n) && !(builtIn(n) && following(n)));
  if (missing.length > 0) {
    const missingBuiltIn = missing.filter((n) => builtIn(n));
    const missingOwn = missing.filter((n) => !builtIn(n));
    return {
      ...base,
      passed: false,
      message:
        `No watcher has followed the Live chain of ${list(missing)} in the last ${followingWithinMs / 60_000} minutes, so no payment there would be seen (and Live creates there are refused: network_not_watched).` +
        (missingBuiltIn.length > 0
          ? ` The operator sets ${missingBuiltIn.map((n) => `${n.toUpperCase()}_LIVE_RPC_URL`).join(" and ")} to a mainnet node and runs the watcher role (npm start, or npm start -- watcher), or names ${missingBuiltIn.length === 1 ? "it" : "them"} in OPERATOR_WATCHED_NETWORKS when a watcher of their own reports ${missingBuiltIn.length === 1 ? "it" : "them"}.`
          : "") +
        missingOwn.map((n) => ` ${n} has no built-in watcher: t${howToWatch(n, "live").slice(1)}`).join("") +
        said(missingBuiltIn) +
        operatorNote(own),
    };
  }
  const watched = accepted.filter((n) => builtIn(n) && !operator.includes(n));
  return {
    ...base,
    passed: true,
    message:
      watched.length > 0 ? `A watcher follows the Live chain of ${list(watched)}.${operatorNote(own)}` : `No Live network with a built-in watcher is accepted yet.${operatorNote(own)}`,
  };
}

/**
 * Fiat-priced intents are quoted from fresh, agreeing exchange rates (RATE_SOURCES): without them
 * a fiat-priced create answers rate_unavailable. It applies once the merchant prices in fiat (a
 * fiat-priced intent in either environment, so a merchant who tried it in Test is held to it
 * before going live): required in Live, recommended in Test. The development source (fixed)
 * never counts for Live.
 */
export function exchangeRatesCheck(facts: ReadinessFacts, s: ReadinessSettings): Check {
  const environment = facts.owner.environment === "live" ? "live" : "test";
  const severity: Severity = environment === "live" && facts.fiatPricing ? "required" : "recommended";
  const base = { id: "exchange_rates", severity } as const;
  if (!facts.fiatPricing) return { ...base, passed: true, message: "No fiat-priced intent yet: this check applies once intents are priced in a currency (price_amount)." };
  const fresh = s.rates?.(environment);
  if (!fresh) return { ...base, passed: false, message: "No rate engine answers in this process: fiat-priced intents (price_amount) cannot be quoted." };
  if (fresh.ok) return { ...base, passed: true, message: `Exchange rates are fresh: fiat-priced intents (price_amount) are quoted in ${environment === "live" ? "Live" : "Test"}.` };
  return {
    ...base,
    passed: false,
    message:
      `Fiat-priced intents (price_amount) cannot be quoted in ${environment === "live" ? "Live" : "Test"} now: too few fresh, agreeing rate sources for ${list(fresh.failing)}. ` +
      `The operator checks RATE_SOURCES and the rate_source_* metrics (the development source "fixed" answers in Test only).`,
  };
}

/** Every check, in the documented order; ready when every required check passes. */
export function evaluate(facts: ReadinessFacts, s: ReadinessSettings): Readiness {
  const checks = [
    webhookEndpointCheck(facts, s),
    webhookTestCheck(facts, s),
    depositAddressCheck(facts),
    chainWatcherCheck(facts, s),
    exchangeRatesCheck(facts, s),
    endpointHealthCheck(facts, s),
    apiKeyAgeCheck(facts, s),
  ];
  return { ready: checks.every((c) => c.severity !== "required" || c.passed), environment: facts.owner.environment, checks };
}

interface EndpointRow {
  id: string;
  created_at: Date | string;
  enabled_events: string[];
  test_delivered_at: Date | string | null;
  last_test_id: string | null;
  last_test_status: string | null;
  last_test_status_code: number | null;
  finished: number;
  failed: number;
}

/**
 * What the checks need, read for the owner only. Per enabled endpoint (at most 16), each
 * delivery lookup walks the (endpoint_id, created_at, id) index newest first.
 */
export async function readFacts(em: EntityManager, owner: Owner): Promise<ReadinessFacts> {
  const scope = [owner.merchantId, owner.environment];
  const endpointRows = await em.execute<EndpointRow[]>(
    `select w.id, w.created_at, w.enabled_events,
            (select d.last_attempt_at from webhook_deliveries d join webhook_events e on e.id = d.event_id
              where d.endpoint_id = w.id and d.status = 'delivered' and e.type = 'webhook.test'
              order by d.created_at desc, d.id desc limit 1) as test_delivered_at,
            t.id as last_test_id, t.status as last_test_status, t.last_status_code as last_test_status_code,
            h.finished, h.failed
       from webhook_endpoints w
       left join lateral (
         select d.id, d.status, d.last_status_code from webhook_deliveries d join webhook_events e on e.id = d.event_id
          where d.endpoint_id = w.id and e.type = 'webhook.test'
          order by d.created_at desc, d.id desc limit 1) t on true
       cross join lateral (
         select count(*)::int as finished, (count(*) filter (where r.status = 'failed'))::int as failed
           from (select d.status from webhook_deliveries d
                  where d.endpoint_id = w.id and d.status in ('delivered', 'failed')
                  order by d.created_at desc, d.id desc limit ${healthWindow}) r) h
      where w.merchant_id = ? and w.environment = ? and w.status = 'enabled'
      order by w.created_at, w.id`,
    scope,
  );
  const endpoints = endpointRows.map(
    (r): EndpointFacts => ({
      id: r.id,
      createdAt: new Date(r.created_at),
      testDeliveredAt: r.test_delivered_at === null ? null : new Date(r.test_delivered_at),
      lastTest: r.last_test_id === null ? null : { deliveryId: r.last_test_id, status: r.last_test_status ?? "", lastStatusCode: r.last_test_status_code },
      finished: r.finished,
      failed: r.failed,
      enabledEvents: r.enabled_events,
    }),
  );
  // Test needs no source of its own (the built-in test keys), so only Live reads the networks used.
  const used =
    owner.environment === "test"
      ? []
      : await em.execute<{ network: string }[]>(`select distinct network from payment_intents where merchant_id = ? and environment = ?`, scope);
  const keys = await em.execute<{ network: string }[]>(`select network from address_sources where merchant_id = ? and environment = ?`, scope);
  const pools = await em.execute<PoolFacts[]>(
    `select network, count(*)::int as imported, (count(*) filter (where leased_at is null))::int as free
       from address_pool where merchant_id = ? and environment = ? group by network`,
    scope,
  );
  const apiKeys = await em.execute<{ id: string; created_at: Date | string; scopes: string[] }[]>(
    `select id, created_at, scopes from api_keys where merchant_id = ? and environment = ? and revoked_at is null order by created_at, id`,
    scope,
  );
  const chains = await em.execute<{ network: string; saved_at: Date | string | null; halted_depth: number | null; halted_depth_is_lower_bound: boolean }[]>(
    `select network, saved_at, halted_depth, halted_depth_is_lower_bound from chain_watchers where environment = ?`,
    [owner.environment],
  );
  const nodeProblems = await networksWithNodeProblems(em, owner.environment, followingWithinMs / 1000);
  const [fiat] = await em.execute<{ priced: boolean }[]>(`select exists (select 1 from payment_intents where merchant_id = ? and price_currency is not null) as priced`, [owner.merchantId]);
  return {
    fiatPricing: fiat?.priced === true,
    owner,
    nodeProblems,
    chains: chains.map((c) => ({ network: c.network, savedAt: c.saved_at === null ? null : new Date(c.saved_at), haltedDepth: c.halted_depth, haltedDepthIsLowerBound: c.halted_depth_is_lower_bound === true })),
    endpoints,
    addresses: { usedNetworks: used.map((r) => r.network), accountKeys: keys.map((r) => r.network), pools },
    apiKeys: apiKeys.map((k) => ({ id: k.id, createdAt: new Date(k.created_at), scopes: k.scopes })),
  };
}
