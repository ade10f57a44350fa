// The webhook endpoint, delivery and event routes through the REST gateway:
// validation, scopes, tenancy, secrets, disable, test, replay and the delivery list.
import t from "tap";
import { call, idemKey, merchantWithKey, sampleIntent } from "../helpers/harness.ts";
import { finished, hookHost, waitForDelivery, webhookSetup } from "../helpers/webhooks.ts";

const s = await webhookSetup(t);
const { base, creds: a } = s;
const b = await merchantWithKey(s.app);
const endpoints = (c: { merchant: string }) => `/api/v1/merchants/${c.merchant}/webhook-endpoints`;
const deliveries = (c: { merchant: string }) => `/api/v1/merchants/${c.merchant}/webhook-deliveries`;

async function count(table: string): Promise<number> {
  const rows = await s.app.db.em.fork().execute<{ n: string }[]>(`select count(*)::text as n from ${table}`);
  return Number(rows[0]?.n);
}

t.test("create returns the endpoint and its signing secret, once", async (t) => {
  const res = await call(base, "POST", endpoints(a), {
    key: a.key,
    body: { url: `https://${hookHost}/hooks/create`, description: "orders" },
  });
  t.equal(res.status, 200);
  const ep = res.body.data;
  t.match(ep.id, /^we_[0-9A-Za-z]{24}$/);
  t.same({ ...ep, id: undefined, created_at: undefined, signing_secret: undefined }, {
    id: undefined,
    url: `https://${hookHost}/hooks/create`,
    description: "orders",
    status: "enabled",
    environment: "test",
    created_at: undefined,
    disabled_at: null,
    signing_secret: undefined,
    enabled_events: ["*"],
  });
  t.same(Object.keys(res.body), ["data"], "the secret is inside data, nothing beside it");
  const secret: string = ep.signing_secret;
  t.match(secret, /^whsec_[A-Za-z0-9_-]{43,}$/, "whsec_ and at least 32 random bytes");
  t.ok(Buffer.from(secret.slice(6), "base64url").length >= 32);

  const got = await call(base, "GET", `${endpoints(a)}/${ep.id}`, { key: a.key });
  t.equal(got.status, 200);
  const { signing_secret: _, ...shown } = ep;
  t.same(got.body.data, shown, "GET shows the endpoint without secret material");
  t.notOk("signing_secret" in got.body.data, "no signing_secret key on a read");
  t.notMatch(JSON.stringify(got.body), secret.slice(6, 20));
  const list = await call(base, "GET", endpoints(a), { key: a.key });
  t.equal(list.status, 200);
  t.ok(list.body.data.some((e: { id: string }) => e.id === ep.id));
  t.notMatch(JSON.stringify(list.body), /whsec_|signing_secret/, "the list never carries secret material");

  const [row] = await s.app.db.em.fork().execute<{ secret_ciphertext: Buffer }[]>("select secret_ciphertext from webhook_endpoints where id = ?", [ep.id]);
  t.notOk(row!.secret_ciphertext.includes(Buffer.from(secret.slice(6))), "the secret is stored encrypted");
  t.notOk(row!.secret_ciphertext.toString("latin1").includes("whsec_"));
});

t.test("URLs that fail the delivery security policy are refused with the reason", async (t) => {
  const before = await count("webhook_endpoints");
  const cases: [string, RegExp][] = [
    ["http://hooks.example.test/x", /https/],
    ["https://hooks.example.test:8443/", /8443.*443/],
    ["https://u:p@hooks.example.test/", /user name or password/],
    ["https://127.0.0.1/", /loopback/],
    ["https://[::1]/", /loopback/],
    ["https://10.1.2.3/", /private/],
    ["https://169.254.169.254/latest/meta-data", /link-local/],
    ["https://100.64.0.1/", /carrier-grade NAT/i],
    ["https://[::ffff:127.0.0.1]/", /loopback/],
    ["https://[fd00::1]/", /unique local/],
    ["https://nonexistent.invalid/hook", /could not be resolved/],
    [`https://${hookHost}/${"a".repeat(3000)}`, /2048/],
    ["not a url", /URL/i],
    ["https://", /URL/i],
    ["ftp://hooks.example.test/", /https/],
  ];
  for (const [url, reason] of cases) {
    const res = await call(base, "POST", endpoints(a), { key: a.key, body: { url } });
    t.equal(res.status, 400, `${url.slice(0, 60)} → 400`);
    t.equal(res.body.error?.code, "validation_failed");
    t.equal(res.body.error?.param, "url");
    t.match(res.body.error?.message, reason, `reason for ${url.slice(0, 60)}`);
    t.notMatch(res.body.error?.message ?? "", /:p@/, "never echoes credentials");
  }
  for (const body of [{}, { url: "" }, { url: 42 }, { url: `https://${hookHost}/`, description: "x".repeat(257) }, { url: `https://${hookHost}/`, extra: 1 }]) {
    const res = await call(base, "POST", endpoints(a), { key: a.key, body });
    t.equal(res.status, 400, `${JSON.stringify(body).slice(0, 60)} → 400`);
    t.match(res.body.error?.code, /validation_failed|invalid_json/);
  }
  t.equal(await count("webhook_endpoints"), before, "nothing was stored");
});

t.test("scopes and tenancy", async (t) => {
  const reader = await merchantWithKey(s.app, "test", ["webhooks:read"], a.merchant);
  const writer = await merchantWithKey(s.app, "test", ["payment_intents:write"], a.merchant);
  const ep = await s.createEndpoint();
  const denied = await call(base, "POST", endpoints(a), { key: reader.key, body: { url: `https://${hookHost}/` } });
  t.equal(denied.status, 403);
  t.equal(denied.body.error.code, "insufficient_scope");
  for (const [method, path] of [
    ["POST", `${endpoints(a)}/${ep.id}/disable`],
    ["POST", `${endpoints(a)}/${ep.id}/test`],
  ] as const) {
    const res = await call(base, method, path, { key: reader.key });
    t.equal(res.status, 403, `${path} needs webhooks:write`);
  }
  const noRead = await call(base, "GET", endpoints(a), { key: writer.key });
  t.equal(noRead.status, 403, "listing needs webhooks:read");
  const noReadDeliveries = await call(base, "GET", deliveries(a), { key: writer.key });
  t.equal(noReadDeliveries.status, 403);

  // Another merchant, or the other environment, sees none of it.
  t.equal((await call(base, "GET", `${endpoints(b)}/${ep.id}`, { key: b.key })).status, 404);
  t.equal((await call(base, "POST", `${endpoints(b)}/${ep.id}/disable`, { key: b.key })).status, 404);
  t.equal((await call(base, "POST", `${endpoints(b)}/${ep.id}/test`, { key: b.key })).status, 404);
  t.equal((await call(base, "GET", `${endpoints(a)}/${ep.id}`, { key: b.key })).status, 403, "merchant_mismatch");
  const live = await merchantWithKey(s.app, "live", undefined, a.merchant);
  t.equal((await call(base, "GET", `${endpoints(a)}/${ep.id}`, { key: live.key })).status, 404, "a Live key does not see Test endpoints");
  const liveList = await call(base, "GET", endpoints(a), { key: live.key });
  t.same(liveList.body.data, []);
  const got = await call(base, "GET", `${endpoints(a)}/${ep.id}`, { key: a.key });
  t.equal(got.body.data.status, "enabled", "nothing changed");
});

t.test("test sends webhook.test to that endpoint only", async (t) => {
  const one = await s.createEndpoint();
  const other = await s.createEndpoint();
  const seen = s.receiver.requests.length;
  const res = await call(base, "POST", `${endpoints(a)}/${one.id}/test`, { key: a.key });
  t.equal(res.status, 200);
  const d = res.body.data;
  t.match(d.id, /^wd_/);
  t.equal(d.endpoint_id, one.id);
  t.equal(d.event_type, "webhook.test");
  t.equal(d.status, "pending");
  await waitForDelivery(s, d.id, finished);
  const event = await call(base, "GET", `/api/v1/merchants/${a.merchant}/webhook-events/${d.event_id}`, { key: a.key });
  t.equal(event.status, 200);
  t.same(event.body.data.data, { test: { synthetic: true, environment: "test", endpoint_id: one.id } });
  t.notOk("payment_intent" in event.body.data.data, "no payment intent");
  const forEvent = await call(base, "GET", `${deliveries(a)}?event_id=${d.event_id}`, { key: a.key });
  t.same(forEvent.body.data.map((x: { endpoint_id: string }) => x.endpoint_id), [one.id], `one delivery, not to ${other.id}`);
  const got = s.receiver.requests.slice(seen).filter((r) => r.headers["x-service-event-id"] === d.event_id);
  t.equal(got.length, 1);
  t.equal(got[0]!.url, one.url.replace(`https://${hookHost}`, ""));
});

t.test("disable: no new deliveries, idempotent, and test/replay refuse it", async (t) => {
  const ep = await s.createEndpoint();
  const res = await call(base, "POST", `${endpoints(a)}/${ep.id}/disable`, { key: a.key });
  t.equal(res.status, 200);
  t.equal(res.body.data.status, "disabled");
  t.ok(res.body.data.disabled_at);
  const again = await call(base, "POST", `${endpoints(a)}/${ep.id}/disable`, { key: a.key });
  t.equal(again.status, 200, "disabling a disabled endpoint is 200");
  t.same(again.body.data, res.body.data, "and changes nothing");
  const test = await call(base, "POST", `${endpoints(a)}/${ep.id}/test`, { key: a.key });
  t.equal(test.status, 409);
  t.equal(test.body.error.code, "invalid_state");
  const pi = await call(base, "POST", `/api/v1/merchants/${a.merchant}/payment-intents`, { key: a.key, idempotencyKey: idemKey(), body: sampleIntent });
  t.equal(pi.status, 200);
  const forEndpoint = await call(base, "GET", `${deliveries(a)}?endpoint_id=${ep.id}`, { key: a.key });
  t.same(forEndpoint.body.data, [], "a disabled endpoint gets no deliveries");
});

t.test("replay: Idempotency-Key required, 404 for unknown or foreign deliveries", async (t) => {
  const ep = await s.createEndpoint();
  const sent = await call(base, "POST", `${endpoints(a)}/${ep.id}/test`, { key: a.key });
  const original = await waitForDelivery(s, sent.body.data.id, finished);
  t.equal(original.cause, "event", "made for its event");
  const path = `${deliveries(a)}/${original.id}/replay`;
  const noKey = await call(base, "POST", path, { key: a.key });
  t.equal(noKey.status, 400);
  t.equal(noKey.body.error.code, "idempotency_key_required");
  const badKey = await call(base, "POST", path, { key: a.key, idempotencyKey: "short" });
  t.equal(badKey.status, 400);
  t.equal(badKey.body.error.code, "invalid_idempotency_key");
  const unknown = await call(base, "POST", `${deliveries(a)}/wd_unknown/replay`, { key: a.key, idempotencyKey: idemKey() });
  t.equal(unknown.status, 404);
  t.equal(unknown.body.error.code, "not_found");
  const foreign = await call(base, "POST", `${deliveries(b)}/${original.id}/replay`, { key: b.key, idempotencyKey: idemKey() });
  t.equal(foreign.status, 404, "another merchant's delivery is not found");
  const reader = await merchantWithKey(s.app, "test", ["webhooks:read"], a.merchant);
  t.equal((await call(base, "POST", path, { key: reader.key, idempotencyKey: idemKey() })).status, 403);

  const key = idemKey();
  const replay = await call(base, "POST", path, { key: a.key, idempotencyKey: key });
  t.equal(replay.status, 200);
  t.not(replay.body.data.id, original.id, "a new delivery");
  t.equal(replay.body.data.replay_of, original.id);
  t.equal(replay.body.data.cause, "replay", "made by a replay, and says so");
  t.equal(replay.body.data.event_id, original.event_id, "of the same event");
  t.equal(replay.body.data.endpoint_id, ep.id);
  const repeat = await call(base, "POST", path, { key: a.key, idempotencyKey: key });
  t.equal(repeat.status, 200);
  t.equal(repeat.headers.get("idempotent-replayed"), "true");
  t.same(repeat.body.data, replay.body.data, "the same request with the same key replays the response");
  const conflict = await call(base, "POST", `${deliveries(a)}/${replay.body.data.id}/replay`, { key: a.key, idempotencyKey: key });
  t.equal(conflict.status, 409);
  t.equal(conflict.body.error.code, "idempotency_conflict");
  const forEvent = await call(base, "GET", `${deliveries(a)}?event_id=${original.event_id}`, { key: a.key });
  t.equal(forEvent.body.data.length, 2, "exactly one replay was created");
});

t.test("the delivery list: filters, pagination and bad input", async (t) => {
  const ep = await s.createEndpoint();
  const created: string[] = [];
  for (let i = 0; i < 5; i++) {
    const res = await call(base, "POST", `${endpoints(a)}/${ep.id}/test`, { key: a.key });
    created.unshift(res.body.data.id);
  }
  for (const id of created) await waitForDelivery(s, id, finished);
  const pages: string[] = [];
  let cursor: string | null = null;
  do {
    const q: string = `endpoint_id=${ep.id}&limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`;
    const res = await call(base, "GET", `${deliveries(a)}?${q}`, { key: a.key });
    t.equal(res.status, 200);
    t.ok(res.body.data.length <= 2);
    pages.push(...res.body.data.map((d: { id: string }) => d.id));
    cursor = res.body.next_cursor;
    t.equal(res.body.has_more, cursor !== null);
  } while (cursor);
  t.same(pages, created, "newest first, every delivery once across pages");
  const delivered = await call(base, "GET", `${deliveries(a)}?endpoint_id=${ep.id}&status=delivered`, { key: a.key });
  t.equal(delivered.body.data.length, 5);
  t.ok(delivered.body.data.every((d: { status: string; attempts: unknown[] }) => d.status === "delivered" && d.attempts.length === 1));
  const failed = await call(base, "GET", `${deliveries(a)}?endpoint_id=${ep.id}&status=failed`, { key: a.key });
  t.same(failed.body.data, []);

  for (const [q, param] of [
    ["status=sent", "status"],
    ["limit=0", "limit"],
    ["limit=201", "limit"],
    ["limit=abc", "limit"],
    ["cursor=garbage", "cursor"],
  ] as const) {
    const res = await call(base, "GET", `${deliveries(a)}?${q}`, { key: a.key });
    t.equal(res.status, 400, q);
    t.equal(res.body.error.param, param, `${q} names ${param}`);
  }
  // A cursor is bound to its filters.
  const first = await call(base, "GET", `${deliveries(a)}?endpoint_id=${ep.id}&limit=1`, { key: a.key });
  const other = await call(base, "GET", `${deliveries(a)}?limit=1&cursor=${encodeURIComponent(first.body.next_cursor)}`, { key: a.key });
  t.equal(other.status, 400);
  t.equal(other.body.error.code, "invalid_cursor");
});

t.test("at most 16 enabled endpoints per merchant and environment", async (t) => {
  const c = await merchantWithKey(s.app);
  for (let i = 0; i < 16; i++) {
    const res = await call(base, "POST", endpoints(c), { key: c.key, body: { url: `https://${hookHost}/c/${i}` } });
    t.equal(res.status, 200);
  }
  const over = await call(base, "POST", endpoints(c), { key: c.key, body: { url: `https://${hookHost}/c/16` } });
  t.equal(over.status, 409);
  t.equal(over.body.error.code, "invalid_state");
  const list = await call(base, "GET", `${endpoints(c)}?limit=10`, { key: c.key });
  t.equal(list.body.data.length, 10);
  t.equal(list.body.has_more, true);
  const rest = await call(base, "GET", `${endpoints(c)}?limit=10&cursor=${encodeURIComponent(list.body.next_cursor)}`, { key: c.key });
  t.equal(rest.body.data.length, 6);
  t.equal(rest.body.has_more, false);
  const first = list.body.data[0].id;
  await call(base, "POST", `${endpoints(c)}/${first}/disable`, { key: c.key });
  const again = await call(base, "POST", endpoints(c), { key: c.key, body: { url: `https://${hookHost}/c/16` } });
  t.equal(again.status, 200, "disabling one makes room");
});
