// The admin CLI's everyday reads and the way back for a disabled webhook endpoint, run as an
// operator runs them (a process beside the running service, on its database).
import { execFile } from "node:child_process";
import path from "node:path";
import t from "tap";
import { maxEnabledEndpoints } from "../../services/vocabulary/limits.ts";
import { call, idemKey, merchantWithKey, startTestApp } from "../helpers/harness.ts";

const root = path.resolve(import.meta.dirname, "../..");
const { app, base, databaseUrl } = await startTestApp(t);

/** Asynchronously: a blocked event loop would leave the test's kept-alive HTTP connections to go stale under it. */
function admin(...args: string[]) {
  return new Promise<{ status: number; stdout: string; stderr: string; json: any }>((resolve) => {
    execFile(
      process.execPath,
      [path.join(root, "services/app/admin.ts"), ...args],
      { cwd: root, env: { PATH: process.env.PATH, HOME: process.env.HOME, DATABASE_URL: databaseUrl, LOG_LEVEL: "warn" }, encoding: "utf8" },
      (err, stdout, stderr) => {
        let json: unknown;
        try {
          json = JSON.parse(stdout);
        } catch {
          json = undefined;
        }
        const status = err ? (typeof err.code === "number" ? err.code : 1) : 0;
        // eslint-disable-next-line @typescript-eslint/no-explicit-any
        resolve({ status, stdout, stderr, json: json as any });
      },
    );
  });
}

t.test("merchant list and show, qr list", async (t) => {
  const made = await admin("merchant", "create", "--name", "Corner Café");
  t.equal(made.status, 0, made.stderr);
  const id = made.json.id as string;
  const list = await admin("merchant", "list");
  t.equal(list.status, 0, list.stderr);
  t.ok(list.json.some((m: { id: string; name: string }) => m.id === id && m.name === "Corner Café"), "the new merchant is listed");

  const readKey = await admin("api-key", "create", "--merchant", id, "--environment", "test", "--scopes", "payment_intents:read");
  t.equal(readKey.status, 0);
  const hookKey = await admin("api-key", "create", "--merchant", id, "--environment", "test", "--scopes", "webhooks:read,webhooks:write");
  const revoked = await admin("api-key", "create", "--merchant", id, "--environment", "test", "--scopes", "webhooks:read");
  t.equal((await admin("api-key", "revoke", "--id", revoked.json.id)).status, 0);
  const hooks = `/api/v1/merchants/${id}/webhook-endpoints`;
  const endpoint = await call(base, "POST", hooks, { key: hookKey.json.api_key, body: { url: "https://93.184.216.34/hooks/shop", enabled_events: ["payment.confirmed"] } });
  t.equal(endpoint.status, 200, JSON.stringify(endpoint.body));
  const off = await call(base, "POST", hooks, { key: hookKey.json.api_key, body: { url: "https://93.184.216.34/hooks/old" } });
  await call(base, "POST", `${hooks}/${off.body.data.id}/disable`, { key: hookKey.json.api_key });

  const shown = await admin("merchant", "show", "--id", id);
  t.equal(shown.status, 0, shown.stderr);
  t.match(shown.json, { id, name: "Corner Café", environments: { test: { active_api_keys: 2, enabled_webhook_endpoints: 1, disabled_webhook_endpoints: 1 }, live: { active_api_keys: 0 } } }, "what it has, per environment");
  t.same(
    shown.json.environments.test.api_keys.map((k: { id: string; scopes: string[] }) => [k.id, k.scopes]),
    [[hookKey.json.id, ["webhooks:read", "webhooks:write"]], [readKey.json.id, ["payment_intents:read"]]],
    "its active keys, newest first, with their scopes (not the revoked one)",
  );
  t.match(shown.json.environments.test.api_keys[0], { hint: `${(hookKey.json.api_key as string).slice(0, 12)}…`, created_at: String }, "each with its prefix and when");
  t.same(
    shown.json.environments.test.webhook_endpoints.map((e: { id: string; url: string; status: string; enabled_events: string[] }) => [e.id, e.url, e.status, e.enabled_events]),
    [
      [off.body.data.id, "https://93.184.216.34/hooks/old", "disabled", ["*"]],
      [endpoint.body.data.id, "https://93.184.216.34/hooks/shop", "enabled", ["payment.confirmed"]],
    ],
    "its webhook endpoints, newest first, with URL and status",
  );
  t.same(shown.json.environments.live.webhook_endpoints, [], "none in live");
  for (const secret of [readKey.json.api_key, hookKey.json.api_key, endpoint.body.data.signing_secret]) t.notMatch(shown.stdout, secret, "no secret");
  const missing = await admin("merchant", "show", "--id", "mer_nope");
  t.not(missing.status, 0, "an unknown merchant fails");
  t.match(missing.stderr, /no merchant mer_nope/);
  t.equal(missing.stderr.trim().split("\n").filter((l) => !l.startsWith("admin: database")).length, 1, "in one line");

  const qr = await admin("qr", "create", "--merchant", id, "--environment", "test", "--label", "Counter 1");
  t.equal(qr.status, 0, qr.stderr);
  t.equal((await admin("qr", "disable", "--id", qr.json.qr_public_id)).status, 0);
  const qrs = await admin("qr", "list", "--merchant", id);
  t.equal(qrs.status, 0, qrs.stderr);
  t.match(qrs.json, [{ qr_public_id: qr.json.qr_public_id, label: "Counter 1", environment: "test" }], "the configuration");
  t.ok(qrs.json[0].disabled_at, "disabled ones too, with when");
});

t.test("endpoint enable: a disabled endpoint comes back, within the cap", async (t) => {
  const a = await merchantWithKey(app);
  const hooks = `/api/v1/merchants/${a.merchant}/webhook-endpoints`;
  const create = (n: number) => call(base, "POST", hooks, { key: a.key, idempotencyKey: idemKey(), body: { url: `https://93.184.216.34/hooks/${n}` } });
  const first = await create(0);
  t.equal(first.status, 200);
  const id = first.body.data.id as string;
  t.equal((await call(base, "POST", `${hooks}/${id}/disable`, { key: a.key, idempotencyKey: idemKey() })).body.data?.status, "disabled");
  // While it is off, the merchant fills the cap with others.
  for (let i = 1; i <= maxEnabledEndpoints; i++) t.equal((await create(i)).status, 200, `endpoint ${i}`);
  const over = await admin("endpoint", "enable", "--id", id);
  t.not(over.status, 0, "over the cap: refused");
  t.match(over.stderr, new RegExp(`At most ${maxEnabledEndpoints} endpoints can be enabled`));
  t.equal((await call(base, "GET", `${hooks}/${id}`, { key: a.key })).body.data.status, "disabled", "and still disabled");

  const others = (await call(base, "GET", `${hooks}?limit=200`, { key: a.key })).body.data.filter((e: { id: string; status: string }) => e.id !== id && e.status === "enabled");
  t.equal((await call(base, "POST", `${hooks}/${others[0].id}/disable`, { key: a.key, idempotencyKey: idemKey() })).status, 200, "one disabled");
  const enabled = await admin("endpoint", "enable", "--id", id);
  t.equal(enabled.status, 0, enabled.stderr);
  t.match(enabled.json, { id, status: "enabled" });
  const got = (await call(base, "GET", `${hooks}/${id}`, { key: a.key })).body.data;
  t.equal(got.status, "enabled", "the API shows it enabled");
  t.equal(got.disabled_at, null, "no longer disabled");
  const test = await call(base, "POST", `${hooks}/${id}/test`, { key: a.key, idempotencyKey: idemKey() });
  t.equal(test.status, 200, "it takes a test event again");
  t.equal((await admin("endpoint", "enable", "--id", id)).status, 0, "enabling an enabled endpoint changes nothing");
  const unknown = await admin("endpoint", "enable", "--id", "we_nope");
  t.not(unknown.status, 0);
  t.match(unknown.stderr, /No webhook endpoint we_nope/);
});

t.test("endpoint delete: a disabled endpoint goes with its deliveries; the events stay", async (t) => {
  const a = await merchantWithKey(app);
  const hooks = `/api/v1/merchants/${a.merchant}/webhook-endpoints`;
  const made = await call(base, "POST", hooks, { key: a.key, idempotencyKey: idemKey(), body: { url: "https://93.184.216.34/hooks" } });
  const id = made.body.data.id as string;
  const sent = await call(base, "POST", `${hooks}/${id}/test`, { key: a.key, idempotencyKey: idemKey() });
  t.equal(sent.status, 200, "a delivery to it");
  const eventId = sent.body.data.event_id as string;

  const enabled = await admin("endpoint", "delete", "--id", id);
  t.not(enabled.status, 0, "an enabled endpoint is refused");
  t.match(enabled.stderr, /is enabled: disable it first/);
  t.equal((await call(base, "GET", `${hooks}/${id}`, { key: a.key })).status, 200, "and is still there");

  t.equal((await call(base, "POST", `${hooks}/${id}/disable`, { key: a.key, idempotencyKey: idemKey() })).status, 200);
  // What workers keep of an endpoint that timed out: its circuit, and a slot of an attempt that lapsed.
  const em = app.db.em.fork();
  await em.execute(`insert into webhook_endpoint_circuits (endpoint_id, timeouts_in_row, open, updated_at) values (?, 3, true, now())`, [id]);
  await em.execute(`insert into webhook_endpoint_slots (endpoint_id, slot, holder, taken_at, until) values (?, 0, 'worker-gone', now(), now())`, [id]);
  const deleted = await admin("endpoint", "delete", "--id", id);
  t.equal(deleted.status, 0, deleted.stderr);
  t.match(deleted.json, { id, deleted: true, deliveries_deleted: 1 });
  t.equal((await call(base, "GET", `${hooks}/${id}`, { key: a.key })).status, 404, "the endpoint is gone");
  const deliveries = await call(base, "GET", `/api/v1/merchants/${a.merchant}/webhook-deliveries?endpoint_id=${id}`, { key: a.key });
  t.same(deliveries.body.data, [], "with its deliveries");
  t.equal((await call(base, "GET", `/api/v1/merchants/${a.merchant}/webhook-events/${eventId}`, { key: a.key })).status, 200, "the event stays");
  const left = await em.execute<{ n: number }[]>(
    `select (select count(*) from webhook_endpoint_circuits where endpoint_id = ?) + (select count(*) from webhook_endpoint_slots where endpoint_id = ?) as n`,
    [id, id],
  );
  t.equal(Number(left[0]?.n), 0, "and its circuit and slots");
  const again = await admin("endpoint", "delete", "--id", id);
  t.not(again.status, 0);
  t.match(again.stderr, new RegExp(`No webhook endpoint ${id}`));
});
