// Upgrading to retention (issue 50) on a database the previous version filled: the schema as it
// was before the retention migration, with rows written as that version wrote them (keys with a
// 24 h expires_at, events with delivered, failed and retrying deliveries and their attempts), some
// past the retention and some within it. The service starts on it (the migration runs, then the
// scheduler's first retention run): every row inside retention is kept, every row past it is
// gone, except a retrying delivery with its event; the API answers as before for what is kept.
import { randomBytes } from "node:crypto";
import t from "tap";
import { openDatabase } from "../../services/app/database.ts";
import { SecretBox } from "../../services/platform/secrets.ts";
import { call, createTestDatabase, until } from "../helpers/harness.ts";
import { webhookSetup } from "../helpers/webhooks.ts";

const databaseUrl = await createTestDatabase(t);
const masterKey = randomBytes(32);
const old = await openDatabase(databaseUrl);
await old.migrator.up({ to: "Migration20261128090000_DashboardSessions" });
const em = old.em.fork();
const merchant = "mer_upgrade";
await em.execute(`insert into merchants (id, name, created_at) values (?, 'Old Shop', now() - interval '1 year')`, [merchant]);
await em.execute(
  `insert into webhook_endpoints (id, merchant_id, environment, url, status, secret_ciphertext, created_at)
   values ('we_old', ?, 'test', 'https://hooks.example.test/old', 'enabled', ?, now() - interval '1 year')`,
  [merchant, SecretBox.fromMasterKeys(masterKey).seal("we_old", "whsec_" + randomBytes(24).toString("hex"))],
);
// Ages in seconds: past EVENT_RETENTION and IDEMPOTENCY_RETENTION (60 s below), and within them.
const ages = { old: [3600, 600, 90], kept: [30, 5] };
let n = 0;
for (const [kind, list] of Object.entries(ages)) {
  for (const age of list) {
    for (const status of ["delivered", "failed", "pending"]) {
      const id = `evt_${kind}_${++n}`;
      await em.execute(`insert into webhook_events (id, merchant_id, environment, type, payload, created_at) values (?, ?, 'test', 'webhook.test', '{"id":"' || ? || '"}', now() - make_interval(secs => ?))`, [id, merchant, id, age]);
      await em.execute(
        `insert into webhook_deliveries (id, merchant_id, environment, event_id, endpoint_id, status, attempt_count, published_at, created_at, updated_at)
         values (?, ?, 'test', ?, 'we_old', ?, 1, now(), now() - make_interval(secs => ?), now())`,
        [`wd_${id}`, merchant, id, status, age],
      );
      await em.execute(`insert into webhook_attempts (delivery_id, number, started_at, outcome) values (?, 1, now() - make_interval(secs => ?), ?)`, [`wd_${id}`, age, status === "pending" ? "retryable" : "success"]);
    }
    // As the previous version wrote keys: expires_at 24 h after created_at.
    await em.execute(
      `insert into idempotency_records (merchant_id, environment, key, rpc, fingerprint, response, created_at, expires_at)
       values (?, 'test', ?, 'x', 'f', '\\x00', now() - make_interval(secs => ?), now() - make_interval(secs => ?) + interval '24 hours')`,
      [merchant, `key_${kind}_${age}`, age, age],
    );
  }
}
const before = await em.execute<{ id: string }[]>(`select id from webhook_events order by id`);
await old.close();

const ids = (kind: string) => before.map((r) => r.id).filter((id) => id.startsWith(`evt_${kind}_`));
const s = await webhookSetup(t, {
  env: { DATABASE_URL: databaseUrl, EVENT_RETENTION: "60s", IDEMPOTENCY_RETENTION: "60s", RETENTION_INTERVAL: "1s" },
  roles: ["rpc", "gateway", "scheduler"],
  masterKey,
});
const now = () => s.app.db.em.fork();

t.test("the migration and the first run keep every row inside retention, and only those (and what is still retrying)", async (t) => {
  await until("the first retention run", async () => (await now().execute<{ at: Date | null }[]>(`select last_success_at as at from retention_state`))[0]?.at ?? undefined, 30_000);
  const events = (await now().execute<{ id: string }[]>(`select id from webhook_events order by id`)).map((r) => r.id);
  const oldRetrying = ids("old").filter((_, i) => i % 3 === 2);
  t.same(events, [...ids("kept"), ...oldRetrying].sort(), "every event within retention, and the old ones whose delivery is retrying");
  const deliveries = (await now().execute<{ event_id: string }[]>(`select event_id from webhook_deliveries order by event_id`)).map((r) => r.event_id);
  t.same(deliveries, events, "their deliveries with them");
  const [attempts] = await now().execute<{ n: number }[]>(`select count(*)::int as n from webhook_attempts`);
  t.equal(attempts?.n, events.length, "and their attempts");
  const keys = (await now().execute<{ key: string }[]>(`select key from idempotency_records order by key`)).map((r) => r.key);
  t.same(keys, ages.kept.map((a) => `key_kept_${a}`).sort(), "keys within IDEMPOTENCY_RETENTION stay, older ones (though their old expires_at is a day away) go");

  const key = await (async () => {
    const { createApiKey } = await import("../../services/auth/admin.ts");
    return (await createApiKey(now(), merchant, "test", ["webhooks:read"])).api_key;
  })();
  for (const id of ids("kept")) t.equal((await call(s.base, "GET", `/api/v1/merchants/${merchant}/webhook-events/${id}`, { key })).status, 200, `${id} still answers`);
  t.equal((await call(s.base, "GET", `/api/v1/merchants/${merchant}/webhook-events/${oldRetrying[0]}`, { key })).status, 200, "an old event with a retrying delivery still answers");
});
