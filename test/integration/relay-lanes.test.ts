// The relay's pass (services/delivery/webhook-deliveries.ts takeUnpublished) takes three lanes, so
// that no backlog holds up another merchant's new deliveries for longer than a pass or two, while
// a backlog still drains oldest first and a recovery's deliveries go out in event order. Real
// PostgreSQL, the service's migrations and partitions.
import t from "tap";
import { openDatabase } from "../../services/app/database.ts";
import { takeUnpublished } from "../../services/delivery/webhook-deliveries.ts";
import { newTimedId } from "../../services/platform/ids.ts";
import { ensurePartitions } from "../../services/retention/partitions.ts";
import { createTestDatabase } from "../helpers/harness.ts";

const db = await openDatabase(await createTestDatabase(t));
t.teardown(() => db.close());
await db.migrator.up();
await ensurePartitions(db.em.fork());
const em = () => db.em.fork();

await em().execute(`insert into merchants (id, name, created_at) values ('mer_a', 'A', now()), ('mer_b', 'B', now())`);
for (const [id, merchant] of [["we_a", "mer_a"], ["we_b", "mer_b"]]) {
  await em().execute(
    `insert into webhook_endpoints (id, merchant_id, environment, url, status, secret_ciphertext, created_at) values (?, ?, 'test', 'https://hooks.example.test/x', 'enabled', '\\x00', now())`,
    [id, merchant],
  );
}

let clock = Date.now() - 3_600_000;
/** `count` new deliveries to `endpoint`, each a millisecond after the last; `parked`: waiting in the outbox for a due time passed a moment ago. */
async function deliveries(endpoint: "we_a" | "we_b", count: number, parked = false, cause = "event"): Promise<string[]> {
  const merchant = endpoint === "we_a" ? "mer_a" : "mer_b";
  const at = Array.from({ length: count }, () => new Date(++clock));
  const events = at.map((d) => newTimedId("evt", d));
  const ids = at.map((d) => newTimedId("wd", d));
  const list = (xs: string[]) => `{${xs.map((x) => `"${x}"`).join(",")}}`;
  const times = list(at.map((d) => d.toISOString()));
  await em().execute(
    `insert into webhook_events (id, merchant_id, environment, type, payload, created_at)
     select e, ?, 'test', 'webhook.test', '{}', c from unnest(?::text[], ?::timestamptz[]) as x(e, c)`,
    [merchant, list(events), times],
  );
  await em().execute(
    `insert into webhook_deliveries (id, merchant_id, environment, event_id, endpoint_id, status, attempt_count, next_attempt_at, cause, created_at, updated_at)
     select d, ?, 'test', e, ?, 'pending', 0, case when ? then now() - interval '1 second' end, ?, c, c from unnest(?::text[], ?::text[], ?::timestamptz[]) as x(d, e, c)`,
    [merchant, endpoint, parked, cause, list(ids), list(events), times],
  );
  return ids;
}

t.test("another merchant's new deliveries behind a backlog of 3 000 go out in the next pass, and the backlog oldest first", async (t) => {
  const a = await deliveries("we_a", 3000);
  const b = await deliveries("we_b", 2);
  const first = (await takeUnpublished(em(), 500)).map((r) => r.id);
  t.ok(b.every((id) => first.includes(id)), "B's two are in the first pass of 500");
  t.same(first.filter((id) => b.includes(id)), b, "in the order they were made");
  const ofA = first.filter((id) => a.includes(id));
  t.ok(ofA.length >= 300, `A's backlog takes most of the pass (${ofA.length})`);
  t.same(ofA.slice(0, 250), a.slice(0, 250), "its oldest first");
  while ((await takeUnpublished(em(), 500)).length > 0);
});

t.test("a recovery's deliveries go out in event order, a prefix each pass, even behind newer ones", async (t) => {
  const recovered = await deliveries("we_b", 1200, false, "recovery");
  await deliveries("we_a", 600);
  const published: string[] = [];
  for (let pass = 0; pass < 20; pass++) {
    const taken = (await takeUnpublished(em(), 500)).map((r) => r.id);
    if (taken.length === 0) break;
    published.push(...taken.filter((id) => recovered.includes(id)));
  }
  t.same(published, recovered, "all 1 200, in the order they were made");
});

t.test("deliveries parked in the outbox and coming due together do not hold up a new one", async (t) => {
  await deliveries("we_a", 2000, true);
  const [b] = await deliveries("we_b", 1);
  const pass = (await takeUnpublished(em(), 500)).map((r) => r.id);
  t.ok(pass.includes(b!), "B's new delivery goes in the first pass beside 2 000 due");
  t.ok(pass.length >= 300, `the due ones take most of it (${pass.length} in all)`);
});
