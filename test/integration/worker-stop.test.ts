// Stopping the delivery worker while it waits for room (more attempts in flight than half its
// concurrency): it stops as soon as those attempts finish, and records them. A stop at that
// moment used to hang the shutdown until the service's 20 s limit killed it.
import { setTimeout as sleep } from "node:timers/promises";
import pg from "pg";
import t from "tap";
import { until } from "../helpers/harness.ts";
import { createIntents, webhookSetup } from "../helpers/webhooks.ts";

let release!: () => void;
const released = new Promise<void>((resolve) => (release = resolve));
let held = 0;
const s = await webhookSetup(t, {
  env: { WEBHOOK_CONCURRENCY: "2", WEBHOOK_TIMEOUT_MS: "10000" },
  respond: async () => {
    held++;
    await released;
    return { status: 200, body: "ok" };
  },
});

t.test("a worker stopped with attempts in flight finishes them, records them, and stops", async (t) => {
  await s.createEndpoint();
  await createIntents(s, 2);
  await until("both attempts are in flight (the worker waits for room)", async () => held === 2, 15_000);

  const stopping = s.app.stop().then(() => "stopped");
  await sleep(200);
  release();
  const outcome = await Promise.race([stopping, sleep(15_000).then(() => "still stopping after 15 s")]);
  t.equal(outcome, "stopped", "the app stops once the attempts in flight have finished");
  if (outcome !== "stopped") return;

  // The app's own pool is closed: read with a connection of our own.
  const db = new pg.Client({ connectionString: s.databaseUrl });
  await db.connect();
  t.teardown(() => db.end());
  const { rows } = await db.query("select status, attempt_count as attempts from webhook_deliveries order by id");
  t.same(rows, [
    { status: "delivered", attempts: 1 },
    { status: "delivered", attempts: 1 },
  ], "both attempts in flight at the stop were recorded as delivered");
});
