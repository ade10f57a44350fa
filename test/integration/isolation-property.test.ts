// Tenant isolation as a property: random sequences of operations by every kind of
// caller (API keys of both environments, full and read-only; site credentials; cashier
// sessions; internal credentials; the public QR route) on objects of two merchants in
// both environments. A caller never reads, lists, changes or learns of the existence of
// another merchant's or environment's object: the answer is the one a missing id gets,
// and the owner's data is unchanged.
import assert from "node:assert/strict";
import fc from "fast-check";
import t from "tap";
import { createInternalCredential } from "../../services/auth/admin.ts";
import { newId } from "../../services/platform/ids.ts";
import { createQrConfiguration, disableQrConfiguration } from "../../services/qr/admin.ts";
import { createSiteCredential } from "../../services/site/credentials.ts";
import { createCashierSession } from "../../services/terminal/sessions.ts";
import { call, idemKey, merchantWithKey, sampleIntent, type ApiResponse } from "../helpers/harness.ts";
import { webhookSetup } from "../helpers/webhooks.ts";

// The cashier's and the checkout's limits (public-limits.test.ts) are lifted: each actor calls many times.
const s = await webhookSetup(t, { env: { CHECKOUT_RATE_LIMIT_PER_MINUTE: "100000", TERMINAL_RATE_LIMIT_PER_MINUTE: "100000", TERMINAL_ADDRESS_RATE_LIMIT_PER_MINUTE: "100000" } });
const { base } = s;
const em = () => s.app.db.em.fork();

type Environment = "test" | "live";
interface Owner {
  merchant: string;
  environment: Environment;
}
type Kind = "intent" | "endpoint" | "event" | "delivery" | "qr";
interface Obj {
  kind: Kind;
  id: string;
  owner: Owner;
}
interface Actor {
  name: string;
  kind: "api_key" | "api_key_read" | "site" | "cashier" | "internal" | "public";
  credential: string | undefined;
  owner: Owner | undefined;
}

const prefixes: Record<Kind, string> = { intent: "pi", endpoint: "we", event: "evt", delivery: "wd", qr: "qr" };
const sameOwner = (a: Owner | undefined, b: Owner) => a !== undefined && a.merchant === b.merchant && a.environment === b.environment;

// Two merchants, each in both environments; every credential kind for each of the four owners.
const merchants = [(await merchantWithKey(s.app)).merchant, (await merchantWithKey(s.app)).merchant];
const owners: Owner[] = merchants.flatMap((merchant) => (["test", "live"] as const).map((environment) => ({ merchant, environment })));
const objects: Obj[] = [];
const actors: Actor[] = [];
const fullKeys = new Map<string, string>();
const disabledQr = new Set<string>();
const ownerKey = (o: Owner) => `${o.merchant}/${o.environment}`;
const internal = await createInternalCredential(em(), "isolation test", ["observe", "admin"], "test");
actors.push({ name: "internal", kind: "internal", credential: internal.credential, owner: undefined });
actors.push({ name: "public", kind: "public", credential: undefined, owner: undefined });

for (const owner of owners) {
  const full = await merchantWithKey(s.app, owner.environment, undefined, owner.merchant);
  const read = await merchantWithKey(s.app, owner.environment, ["payment_intents:read", "webhooks:read"], owner.merchant);
  fullKeys.set(ownerKey(owner), full.key);
  const site = await createSiteCredential(em(), owner.merchant, owner.environment, ["https://shop.example"]);
  const cashier = await createCashierSession(em(), { merchantId: owner.merchant, environment: owner.environment, cashier: "Ana" });
  const tag = `${owner.merchant.slice(-4)}/${owner.environment}`;
  actors.push(
    { name: `key ${tag}`, kind: "api_key", credential: full.key, owner },
    { name: `read key ${tag}`, kind: "api_key_read", credential: read.key, owner },
    { name: `site ${tag}`, kind: "site", credential: site.credential, owner },
    { name: `cashier ${tag}`, kind: "cashier", credential: cashier.session, owner },
  );
  for (let i = 0; i < 2; i++) {
    const ep = await s.createEndpoint(`/iso/${tag}/${i}`, { merchant: owner.merchant, key: full.key, keyId: full.keyId });
    objects.push({ kind: "endpoint", id: ep.id, owner });
  }
  for (let i = 0; i < 2; i++) {
    const res = await call(base, "POST", `/api/v1/merchants/${owner.merchant}/payment-intents`, { key: full.key, idempotencyKey: idemKey(), body: sampleIntent });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    objects.push({ kind: "intent", id: res.body.data.public_id, owner });
  }
  const qr = await createQrConfiguration(em(), { merchantId: owner.merchant, environment: owner.environment, label: `till ${tag}` });
  const off = await createQrConfiguration(em(), { merchantId: owner.merchant, environment: owner.environment, label: `old ${tag}` });
  await disableQrConfiguration(em(), off.qr_public_id);
  disabledQr.add(off.qr_public_id);
  objects.push({ kind: "qr", id: qr.qr_public_id, owner }, { kind: "qr", id: off.qr_public_id, owner });
}
for (const e of await em().execute<{ id: string; merchant_id: string; environment: Environment }[]>(`select id, merchant_id, environment from webhook_events`)) {
  objects.push({ kind: "event", id: e.id, owner: { merchant: e.merchant_id, environment: e.environment } });
}
for (const d of await em().execute<{ id: string; merchant_id: string; environment: Environment }[]>(`select id, merchant_id, environment from webhook_deliveries`)) {
  objects.push({ kind: "delivery", id: d.id, owner: { merchant: d.merchant_id, environment: d.environment } });
}

interface Request {
  method: string;
  path: string;
  body?: unknown;
  idempotencyKey?: string;
}
interface Operation {
  name: string;
  kind: Kind;
  /** Whether it may change the target (or create something of its owner). */
  writes: boolean;
  request(merchant: string, id: string): Request;
}
const m = (merchant: string) => `/api/v1/merchants/${merchant}`;
const operations: Operation[] = [
  { name: "get intent", kind: "intent", writes: false, request: (mer, id) => ({ method: "GET", path: `${m(mer)}/payment-intents/${id}` }) },
  { name: "list intents by id", kind: "intent", writes: false, request: (mer, id) => ({ method: "GET", path: `${m(mer)}/payment-intents?public_id=${id}` }) },
  { name: "cancel intent", kind: "intent", writes: true, request: (mer, id) => ({ method: "POST", path: `${m(mer)}/payment-intents/${id}/cancel` }) },
  {
    name: "simulate",
    kind: "intent",
    writes: true,
    request: (mer, id) => ({ method: "POST", path: `/api/v1/sandbox/merchants/${mer}/payment-intents/${id}/simulate`, body: { outcome: "underpaid" } }),
  },
  { name: "site get intent", kind: "intent", writes: false, request: (_, id) => ({ method: "GET", path: `/api/v1/site-payment-intents/${id}` }) },
  { name: "get endpoint", kind: "endpoint", writes: false, request: (mer, id) => ({ method: "GET", path: `${m(mer)}/webhook-endpoints/${id}` }) },
  { name: "disable endpoint", kind: "endpoint", writes: true, request: (mer, id) => ({ method: "POST", path: `${m(mer)}/webhook-endpoints/${id}/disable` }) },
  { name: "test endpoint", kind: "endpoint", writes: true, request: (mer, id) => ({ method: "POST", path: `${m(mer)}/webhook-endpoints/${id}/test` }) },
  { name: "deliveries of endpoint", kind: "endpoint", writes: false, request: (mer, id) => ({ method: "GET", path: `${m(mer)}/webhook-deliveries?endpoint_id=${id}` }) },
  { name: "get event", kind: "event", writes: false, request: (mer, id) => ({ method: "GET", path: `${m(mer)}/webhook-events/${id}` }) },
  { name: "deliveries of event", kind: "event", writes: false, request: (mer, id) => ({ method: "GET", path: `${m(mer)}/webhook-deliveries?event_id=${id}` }) },
  {
    name: "replay delivery",
    kind: "delivery",
    writes: true,
    request: (mer, id) => ({ method: "POST", path: `${m(mer)}/webhook-deliveries/${id}/replay`, idempotencyKey: idemKey() }),
  },
  { name: "public QR", kind: "qr", writes: false, request: (_, id) => ({ method: "GET", path: `/api/v1/qr/${id}` }) },
];

function send(actor: Actor, r: Request): Promise<ApiResponse> {
  return call(base, r.method, r.path, { key: actor.credential, body: r.body, idempotencyKey: r.idempotencyKey });
}

/** What a client can tell from an answer, with the ids it was asked about made alike. */
function observable(res: ApiResponse, ids: string[]): unknown {
  let text = JSON.stringify(res.body);
  for (const id of ids) text = text.replaceAll(id, "<id>");
  const body = JSON.parse(text);
  if (body?.error) delete body.error.request_id;
  return { status: res.status, body };
}

/** The owner's data as its own key would find it, less what the worker changes on its own (delivery progress). */
async function ownerState(o: Owner): Promise<unknown> {
  const [row] = await em().execute<Record<string, unknown>[]>(
    `select (select string_agg(id || ':' || status || ':' || coalesce(amount_received::text, '-'), ',' order by id) from payment_intents where merchant_id = ? and environment = ?) as intents,
            (select string_agg(id || ':' || status, ',' order by id) from webhook_endpoints where merchant_id = ? and environment = ?) as endpoints,
            (select count(*)::int from webhook_events where merchant_id = ? and environment = ?) as events,
            (select count(*)::int from webhook_deliveries where merchant_id = ? and environment = ?) as deliveries,
            (select count(*)::int from chain_observations o join payment_intents i on i.id = o.payment_intent_id where i.merchant_id = ? and i.environment = ?) as observations`,
    Array.from({ length: 5 }, () => [o.merchant, o.environment]).flat(),
  );
  return row;
}

const step = fc.record({
  actor: fc.nat(actors.length - 1),
  operation: fc.nat(operations.length - 1),
  target: fc.nat(1000),
  /** The {merchant} in the path: the caller's own, or the target owner's. */
  ownPath: fc.boolean(),
  /** A third of the steps on the caller's own objects: the control that owners do reach theirs. */
  own: fc.nat(2).map((n) => n === 0),
});

t.test("no caller reaches another merchant's or environment's objects", async (t) => {
  let runs = 0;
  let foreign = 0;
  let own = 0;
  await fc.assert(
    fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 8 }), async (steps) => {
      runs++;
      for (const st of steps) {
        const actor = actors[st.actor]!;
        const op = operations[st.operation]!;
        const all = objects.filter((o) => o.kind === op.kind);
        const owned = all.filter((o) => sameOwner(actor.owner, o.owner));
        const candidates = st.own && owned.length > 0 ? owned : all;
        const target = candidates[st.target % candidates.length]!;
        const pathMerchant = st.ownPath && actor.owner ? actor.owner.merchant : target.owner.merchant;
        const where = `${actor.name} → ${op.name} of ${target.kind} ${target.id} (owner ${ownerKey(target.owner)}) with path merchant ${pathMerchant}`;
        if (op.kind === "qr") {
          // Public by design, whoever asks: public facts only, and a disabled one is as missing.
          const res = await send(actor, op.request(pathMerchant, target.id));
          for (const mer of merchants) assert.ok(!JSON.stringify(res.body).includes(mer), `${where}: the QR answer names no merchant`);
          if (!disabledQr.has(target.id)) {
            assert.equal(res.status, 200, `${where}: ${JSON.stringify(res.body)}`);
            continue;
          }
          const absent = await send(actor, op.request(pathMerchant, newId("qr")));
          assert.deepEqual(observable(res, [target.id]), observable(absent, []), `${where}: disabled is answered as missing`);
          continue;
        }
        if (sameOwner(actor.owner, target.owner)) {
          // The positive control: an owner's full key reads its own objects (else every check below could pass vacuously).
          const res = await send(actor, op.request(pathMerchant, target.id));
          if (actor.kind === "api_key" && !op.writes && op.name !== "site get intent") {
            assert.equal(res.status, 200, `${where}: ${JSON.stringify(res.body)}`);
            own++;
          }
          continue;
        }
        foreign++;
        const before = await ownerState(target.owner);
        const missing = newId(prefixes[target.kind]);
        const got = await send(actor, op.request(pathMerchant, target.id));
        const absent = await send(actor, op.request(pathMerchant, missing));
        assert.ok(got.status >= 400 || (op.writes === false && got.status === 200), `${where}: ${got.status}`);
        assert.deepEqual(observable(got, [target.id, missing]), observable(absent, [target.id, missing]), `${where}: answered as for a missing id`);
        if (got.status === 200) {
          // A list filtered by a foreign id: empty, like a missing one's.
          assert.deepEqual(got.body.data, [], `${where}: nothing listed`);
        }
        assert.deepEqual(await ownerState(target.owner), before, `${where}: the owner's data is unchanged`);
      }
    }),
    { numRuns: Number(process.env.ISOLATION_RUNS ?? 40) },
  );
  t.ok(foreign > 0 && own > 0, `${runs} runs: ${foreign} foreign operations, ${own} own reads`);
});

t.test("every list shows only the caller's own objects, and a cursor does not cross owners", async (t) => {
  const listOwner = fc.record({ actor: fc.nat(owners.length - 1), of: fc.nat(owners.length - 1), path: fc.constantFrom("payment-intents", "webhook-endpoints", "webhook-deliveries") });
  await fc.assert(
    fc.asyncProperty(listOwner, async ({ actor, of, path }) => {
      const me = owners[actor]!;
      const them = owners[of]!;
      const key = fullKeys.get(ownerKey(me))!;
      const listed = await call(base, "GET", `${m(me.merchant)}/${path}?limit=200`, { key });
      assert.equal(listed.status, 200);
      const kind: Kind = path === "payment-intents" ? "intent" : path === "webhook-endpoints" ? "endpoint" : "delivery";
      const mineIds = new Set(objects.filter((o) => o.kind === kind && sameOwner(me, o.owner)).map((o) => o.id));
      const foreignIds = new Set(objects.filter((o) => o.kind === kind && !sameOwner(me, o.owner)).map((o) => o.id));
      const ids: string[] = listed.body.data.map((x: { id?: string; public_id?: string }) => x.public_id ?? x.id);
      assert.ok(ids.every((id) => !foreignIds.has(id)), `${path} of ${ownerKey(me)}: no foreign object`);
      assert.ok([...mineIds].every((id) => ids.includes(id) || kind === "delivery"), `${path} of ${ownerKey(me)}: its own objects`);
      assert.ok(
        listed.body.data.every((x: { environment?: string }) => x.environment === undefined || x.environment === me.environment),
        "the caller's environment only",
      );

      // A next_cursor of another owner's list is refused, not used.
      const theirs = await call(base, "GET", `${m(them.merchant)}/${path}?limit=1`, { key: fullKeys.get(ownerKey(them))! });
      const cursor: string | null = theirs.body.next_cursor;
      if (cursor === null || sameOwner(me, them)) return;
      const crossed = await call(base, "GET", `${m(me.merchant)}/${path}?limit=1&cursor=${encodeURIComponent(cursor)}`, { key });
      assert.equal(crossed.status, 400, `a cursor of ${ownerKey(them)} used by ${ownerKey(me)}: ${JSON.stringify(crossed.body)}`);
      assert.equal(crossed.body.error.code, "invalid_cursor");
    }),
    { numRuns: Number(process.env.ISOLATION_RUNS ?? 40) },
  );
  t.pass("lists and cursors stay with their owner");
});

t.test("what a site credential or a cashier session creates belongs to its own merchant and environment", async (t) => {
  const creators = actors.filter((a) => a.kind === "site" || a.kind === "cashier");
  await fc.assert(
    fc.asyncProperty(fc.nat(creators.length - 1), fc.constantFrom("5", "12.50", "0.01"), async (i, amount) => {
      const actor = creators[i]!;
      const path = actor.kind === "site" ? "/api/v1/site-payment-intents" : "/api/v1/terminal/pos/payment";
      const res = await call(base, "POST", path, { key: actor.credential, idempotencyKey: idemKey(), body: { ...sampleIntent, requested_amount: amount } });
      assert.equal(res.status, 200, `${actor.name}: ${JSON.stringify(res.body)}`);
      const id: string = res.body.data.public_id;
      for (const o of owners) {
        const seen = await call(base, "GET", `${m(o.merchant)}/payment-intents/${id}`, { key: fullKeys.get(ownerKey(o))! });
        assert.equal(seen.status, sameOwner(actor.owner, o) ? 200 : 404, `${actor.name}'s intent seen by ${ownerKey(o)}`);
      }
      objects.push({ kind: "intent", id, owner: actor.owner! });
    }),
    { numRuns: 12 },
  );
  t.pass("created under the credential's own owner");
});
