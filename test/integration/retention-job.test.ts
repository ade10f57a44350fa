// The retention job (issue 50): `ops retention` shows each table's size, oldest row and what the
// next run removes; `ops retention run` from two processes at once removes each thing once (the
// reported counts add up to exactly what was past retention) and nothing still needed: a recent
// row, a retrying delivery of an expired event (and that event), a key within retention, a
// rejection reported again, a session not yet ended. The scheduler role runs it by itself,
// metrics show it, and readiness warns when it has not succeeded lately.
import t from "tap";
import { loadConfig } from "../../services/platform/config.ts";
import { removePastRetention } from "../../services/retention/job.ts";
import { call, until } from "../helpers/harness.ts";
import { runCli } from "../helpers/processes.ts";
import { webhookSetup } from "../helpers/webhooks.ts";

const retentionEnv = { EVENT_RETENTION: "60s", IDEMPOTENCY_RETENTION: "60s", REJECTED_OUTPUT_RETENTION: "60s", CASHIER_SESSION_RETENTION: "60s", DASHBOARD_SESSION_RETENTION: "60s" };
// No scheduler here: the runs are the test's own.
const s = await webhookSetup(t, { env: retentionEnv, roles: ["rpc", "gateway"] });
const em = () => s.app.db.em.fork();
const endpoint = await s.createEndpoint("/kept");
const m = s.creds.merchant;
const count = async (sql: string, params: unknown[] = []) => (await em().execute<{ n: number }[]>(`select count(*)::int as n from ${sql}`, params))[0]?.n;

const expiredEvents = 3000;
const freshEvents = 50;
const expiredKeys = 7000;

/** Events with two ended deliveries each (one delivered, one failed), and an attempt per delivery. */
async function events(prefix: string, n: number, ageSeconds: number, status: (i: number) => string = (i) => (i % 2 === 0 ? "delivered" : "failed")) {
  await em().execute(
    `insert into webhook_events (id, merchant_id, environment, type, payload, created_at)
     select ?::text || g, ?, 'test', 'webhook.test', '{}', now() - make_interval(secs => ?) from generate_series(1, ?) g`,
    [prefix, m, ageSeconds, n],
  );
  for (const k of [0, 1]) {
    const rows = Array.from({ length: n }, (_, i) => ({ id: `${prefix}d${k}_${i + 1}`, event: `${prefix}${i + 1}`, status: k === 0 ? status(i) : "delivered" }));
    await em().execute(
      `insert into webhook_deliveries (id, merchant_id, environment, event_id, endpoint_id, status, attempt_count, published_at, created_at, updated_at)
       select r.id, ?, 'test', r.event, ?, r.status, 1, now(), now() - make_interval(secs => ?), now() from json_to_recordset(?::json) as r(id text, event text, status text)`,
      [m, endpoint.id, ageSeconds, JSON.stringify(rows)],
    );
    await em().execute(
      `insert into webhook_attempts (delivery_id, number, started_at, duration_ms, status_code, outcome)
       select r.id, 1, now() - make_interval(secs => ?), 5, 200, 'success' from json_to_recordset(?::json) as r(id text)`,
      [ageSeconds, JSON.stringify(rows.map((r) => ({ id: r.id })))],
    );
  }
}

t.before(async () => {
  await events("evt_old", expiredEvents, 120);
  await events("evt_new", freshEvents, 10);
  // An expired event whose first delivery is still retrying: it, its event and its sibling stay.
  await events("evt_retrying", 1, 120, () => "pending");
  await em().execute(
    `insert into idempotency_records (merchant_id, environment, key, rpc, fingerprint, response, created_at, expires_at)
     select ?, 'test', 'k-' || g || '-' || (g > ?), 'x', 'f', '\\x00', now() - make_interval(secs => case when g > ? then 5 else 61 end), now()
       from generate_series(1, ? + 20) g`,
    [m, expiredKeys, expiredKeys, expiredKeys],
  );
  await em().execute(
    `insert into chain_rejected_observations (network, environment, tx_hash, output_index, asset, to_address, amount, reason, first_at, last_at)
     values ('ethereum', 'test', '0xold', 0, 'USDC', '0xa', '1', 'r', now() - interval '1 day', now() - interval '2 minutes'),
            ('ethereum', 'test', '0xagain', 0, 'USDC', '0xa', '1', 'r', now() - interval '1 day', now() - interval '5 seconds')`,
  );
  await em().execute(
    `insert into cashier_sessions (id, merchant_id, environment, cashier, secret_hash, hint, created_at, expires_at, revoked_at)
     values ('cs_ended', ?, 'test', 'a', 'h1', 'x', now() - interval '1 day', now() + interval '1 hour', now() - interval '2 minutes'),
            ('cs_active', ?, 'test', 'b', 'h2', 'x', now() - interval '1 day', now() + interval '1 hour', null)`,
    [m, m],
  );
  // An operator's recoveries: one ended long ago goes; one still running, and one ended lately, stay.
  await em().execute(
    `insert into webhook_recoveries (id, endpoint_id, since, until, page_size, events, enqueued, status, page_at, created_at, updated_at)
     values ('wr_ended', ?, now() - interval '1 day', now() - interval '1 hour', 100, 5, 5, 'done', now() - interval '1 hour', now() - interval '1 hour', now() - interval '2 minutes'),
            ('wr_running', ?, now() - interval '1 day', now() - interval '1 hour', 100, 500, 100, 'running', now() - interval '1 hour', now() - interval '1 hour', now() - interval '2 minutes'),
            ('wr_lately', ?, now() - interval '1 day', now() - interval '1 hour', 100, 5, 5, 'stopped', now() - interval '1 hour', now() - interval '1 hour', now() - interval '5 seconds')`,
    [endpoint.id, endpoint.id, endpoint.id],
  );
  // Dashboard sign-in links and sessions: ended (signed out, idle, past expiry; a link used or
  // expired) more than a minute ago they go; a live session stays, and so does the used link it came from.
  await em().execute(
    `insert into dashboard_links (id, merchant_id, environment, secret_hash, read_only, scopes, created_at, expires_at, used_at)
     values ('dlk_used', ?, 'test', 'lh1', false, '{payment_intents:read}', now() - interval '1 day', now() - interval '23 hours', now() - interval '23 hours'),
            ('dlk_expired', ?, 'test', 'lh2', false, '{payment_intents:read}', now() - interval '1 day', now() - interval '2 minutes', null),
            ('dlk_of_live', ?, 'test', 'lh3', false, '{payment_intents:read}', now() - interval '1 day', now() - interval '23 hours', now() - interval '23 hours'),
            ('dlk_unused', ?, 'test', 'lh4', false, '{payment_intents:read}', now(), now() + interval '10 minutes', null)`,
    [m, m, m, m],
  );
  await em().execute(
    `insert into dashboard_sessions (id, merchant_id, environment, secret_hash, api_key_id, link_id, read_only, created_at, last_seen_at, idle_seconds, expires_at, revoked_at)
     values ('dss_signed_out', ?, 'test', 'sh1', null, 'dlk_used', false, now() - interval '1 day', now() - interval '1 hour', 1800, now() + interval '1 hour', now() - interval '2 minutes'),
            ('dss_idle', ?, 'test', 'sh2', null, null, false, now() - interval '1 day', now() - interval '1 hour', 60, now() + interval '1 hour', null),
            ('dss_expired', ?, 'test', 'sh3', null, null, false, now() - interval '1 day', now() - interval '2 minutes', 1800, now() - interval '2 minutes', null),
            ('dss_live', ?, 'test', 'sh4', null, 'dlk_of_live', false, now() - interval '1 day', now(), 1800, now() + interval '1 hour', null),
            ('dss_lately', ?, 'test', 'sh5', null, null, false, now() - interval '1 day', now(), 1800, now() + interval '1 hour', now() - interval '5 seconds')`,
    [m, m, m, m, m],
  );
});

const cliEnv = { DATABASE_URL: s.databaseUrl, ...retentionEnv };

t.test("ops retention: each table's size, oldest row and what the next run removes", async (t) => {
  const run = await runCli("services/app/ops-cli.ts", cliEnv, "retention", "--json");
  t.equal(run.code, 0, run.stderr);
  const view = JSON.parse(run.stdout) as { tables: { table: string; bytes: number; oldest: string | null; removable: number | null; retention: string }[]; job: { last_success_at: string | null; late: boolean } };
  const of = (table: string) => view.tables.find((r) => r.table === table)!;
  t.equal(of("webhook_events").removable, expiredEvents, "the expired events, not the retrying one's");
  t.equal(of("webhook_deliveries").removable, 2 * expiredEvents);
  t.equal(of("webhook_attempts").removable, 2 * expiredEvents);
  t.equal(of("idempotency_records").removable, expiredKeys);
  t.equal(of("chain_rejected_observations").removable, 1);
  t.equal(of("cashier_sessions").removable, 1);
  t.equal(of("webhook_recoveries").removable, 1, "the recovery that ended long ago");
  t.equal(of("dashboard_sessions").removable, 3, "signed out, idle and expired sessions");
  t.equal(of("dashboard_links").removable, 1, "the expired link: the used one still has its session until this run removes it");
  t.equal(of("payment_intents").removable, null, "intents are kept");
  t.match(of("payment_intents").retention, /kept/);
  t.equal(of("webhook_events").retention, "EVENT_RETENTION: 1m");
  for (const r of view.tables) t.ok(r.bytes > 0, `${r.table} has a size`);
  t.ok(of("webhook_events").oldest && Date.now() - Date.parse(of("webhook_events").oldest!) >= 119_000, "the oldest event is the 2-minute-old one");
  t.same([view.job.last_success_at, view.job.late], [null, true], "the job never ran");
  const text = await runCli("services/app/ops-cli.ts", cliEnv, "retention");
  t.match(text.stdout, /webhook_events\s+EVENT_RETENTION: 1m\s+\S+ \S+\s+\S+\s+3000/, "the table for people");
  t.match(text.stdout, /never run; LATE/);
});

t.test("ops retention run from two processes at once removes each thing once, and nothing still needed", async (t) => {
  const runs = await Promise.all([1, 2].map(() => runCli("services/app/ops-cli.ts", cliEnv, "retention", "run", "--json")));
  const totals: Record<string, number> = {};
  for (const r of runs) {
    if (r.code === 0) {
      for (const [table, n] of Object.entries((JSON.parse(r.stdout) as { removed: Record<string, number> }).removed)) totals[table] = (totals[table] ?? 0) + n;
    } else {
      t.equal(r.code, 1, r.stderr);
      t.match(r.stderr, /retention is running in ops-cli .*: nothing was run/, "the other run is named");
    }
  }
  t.ok(runs.some((r) => r.code === 0), "one of them ran");
  t.same(
    totals,
    {
      idempotency_records: expiredKeys,
      webhook_events: expiredEvents,
      webhook_deliveries: 2 * expiredEvents,
      webhook_attempts: 2 * expiredEvents,
      chain_rejected_observations: 1,
      cashier_sessions: 1,
      webhook_recoveries: 1,
      dashboard_sessions: 3,
      dashboard_links: 2,
    },
    "the removed counts add up to what was past retention, once",
  );
  t.equal(await count(`webhook_events where id like 'evt_old%'`), 0, "the expired events are gone");
  t.equal(await count(`webhook_deliveries where id like 'evt_old%'`), 0, "with their deliveries");
  t.equal(await count(`webhook_attempts where delivery_id like 'evt_old%'`), 0, "and attempts");
  t.equal(await count(`webhook_events where id like 'evt_new%'`), freshEvents, "recent events stay");
  t.equal(await count(`webhook_deliveries where id like 'evt_new%'`), 2 * freshEvents);
  t.equal(await count(`webhook_events where id = 'evt_retrying1'`), 1, "an expired event with a retrying delivery stays");
  t.equal(await count(`webhook_deliveries where event_id = 'evt_retrying1'`), 2, "with its deliveries");
  t.equal(await count(`idempotency_records where merchant_id = ?`, [m]), 20, "keys within retention stay");
  t.same((await em().execute<{ tx_hash: string }[]>(`select tx_hash from chain_rejected_observations`)).map((r) => r.tx_hash), ["0xagain"], "a rejection reported again stays");
  t.same((await em().execute<{ id: string }[]>(`select id from cashier_sessions where id like 'cs_%'`)).map((r) => r.id), ["cs_active"], "a session not ended stays");
  t.same((await em().execute<{ id: string }[]>(`select id from webhook_recoveries order by id`)).map((r) => r.id), ["wr_lately", "wr_running"], "a running recovery, and one ended lately, stay");
  t.same((await em().execute<{ id: string }[]>(`select id from dashboard_sessions order by id`)).map((r) => r.id), ["dss_lately", "dss_live"], "a live session, and one ended lately, stay");
  t.same((await em().execute<{ id: string }[]>(`select id from dashboard_links order by id`)).map((r) => r.id), ["dlk_of_live", "dlk_unused"], "the link of a live session, and one not yet used, stay");

  const after = JSON.parse((await runCli("services/app/ops-cli.ts", cliEnv, "retention", "--json")).stdout) as { tables: { table: string; removable: number }[]; job: { last_success_at: string | null; late: boolean; last_removed: Record<string, number> } };
  t.ok(after.job.last_success_at, "the run is recorded");
  t.equal(after.job.late, false);
  t.ok(after.job.last_removed, "with what it removed (the later of the two runs: all, or nothing left)");
  t.same(after.tables.filter((r) => r.removable).map((r) => r.table), [], "the next run removes nothing");

  // The retrying delivery ends: its event goes at the next run.
  await em().execute(`update webhook_deliveries set status = 'delivered' where event_id = 'evt_retrying1'`);
  const again = await runCli("services/app/ops-cli.ts", cliEnv, "retention", "run");
  t.equal(again.code, 0, again.stderr);
  t.equal(again.stdout.trim(), "removed 1 webhook_events, 2 webhook_deliveries, 2 webhook_attempts");
});

t.test("a held lease: the run says who holds it and removes nothing", async (t) => {
  await em().execute(`update retention_state set holder = 'elsewhere-1', lease_until = now() + interval '1 minute'`);
  const run = await runCli("services/app/ops-cli.ts", cliEnv, "retention", "run");
  t.equal(run.code, 1);
  t.match(run.stderr, /^ops: retention is running in elsewhere-1 \(lease until .*\): nothing was run/);
  // A lapsed lease (its holder died) is taken over.
  await em().execute(`update retention_state set lease_until = now() - interval '1 second'`);
  t.equal((await runCli("services/app/ops-cli.ts", cliEnv, "retention", "run")).code, 0, "taken over once lapsed");
});

t.test("two runs at once without the lease (one taken over from a holder that was only slow) still remove and count each row once", async (t) => {
  await events("evt_twice", expiredEvents, 120);
  await em().execute(
    `insert into idempotency_records (merchant_id, environment, key, rpc, fingerprint, response, created_at, expires_at)
     select ?, 'test', 'twice-' || g, 'x', 'f', '\\x00', now() - interval '2 minutes', now() from generate_series(1, ?) g`,
    [m, expiredKeys],
  );
  const settings = loadConfig(retentionEnv).retention;
  const [a, b] = await Promise.all([removePastRetention(em(), settings, async () => undefined), removePastRetention(em(), settings, async () => undefined)]);
  const sum = (table: keyof typeof a) => a[table] + b[table];
  t.same(
    [sum("webhook_events"), sum("webhook_deliveries"), sum("webhook_attempts"), sum("idempotency_records")],
    [expiredEvents, 2 * expiredEvents, 2 * expiredEvents, expiredKeys],
    `each row once (${JSON.stringify(a)} + ${JSON.stringify(b)})`,
  );
  t.equal(await count(`webhook_events where id like 'evt_twice%'`), 0);
  t.equal(await count(`idempotency_records where key like 'twice-%'`), 0);
});

t.test("the scheduler role runs it by itself; metrics show it; readiness warns when it is late", async (t) => {
  const readyz = async () => (await (await fetch(`http://127.0.0.1:${s.app.ports.ops}/readyz`)).json()) as { status: string; warnings: string[]; retention?: { last_success_at: string | null } };
  await em().execute(`update retention_state set last_success_at = now() - interval '3 hours'`);
  const late = await readyz();
  t.equal(late.status, "ready", "a warning, not a refusal");
  t.match(late.warnings, [/^retention has not run since .* \(RETENTION_INTERVAL 3600 s\): is a scheduler role running\?$/]);

  const { startTestApp } = await import("../helpers/harness.ts");
  await events("evt_sched", 5, 120);
  const scheduler = await startTestApp(t, { DATABASE_URL: s.databaseUrl, ...retentionEnv, RETENTION_INTERVAL: "1s" }, ["scheduler"], s.masterKey);
  await until("the scheduler's run removed them", async () => (await count(`webhook_events where id like 'evt_sched%'`)) === 0, 20_000);
  await until("readiness no longer warns", async () => ((await readyz()).warnings.length === 0 ? true : undefined), 10_000);
  const metrics = await (await fetch(`http://127.0.0.1:${scheduler.app.ports.ops}/metrics`)).text();
  t.match(metrics, /payments_retention_rows_removed_total\{table="webhook_events"\} 5\b/, "rows removed, by table");
  t.match(metrics, /payments_table_bytes\{table="webhook_deliveries"\} \d+/, "table sizes");
  t.match(metrics, /payments_table_bytes\{table="payment_intents"\} \d+/);
  const success = /^payments_retention_last_success_timestamp_seconds (\S+)$/m.exec(metrics);
  t.ok(success && Math.abs(Number(success[1]) - Date.now() / 1000) < 30, "the last success, recent");
  const res = await call(s.base, "GET", `/api/v1/merchants/${m}/webhook-deliveries?limit=1`, { key: s.creds.key });
  t.equal(res.status, 200, "the API still answers");
});
