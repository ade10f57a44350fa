import { randomBytes } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import pg from "pg";
import { from as copyFrom } from "pg-copy-streams";
import { loadConfig } from "../../../services/platform/config.ts";
import { runRetention } from "../../../services/retention/job.ts";
import { SecretBox } from "../../../services/platform/secrets.ts";
import { percentile } from "../stats.ts";
import type { BenchContext, Scenario } from "../types.ts";

/**
 * A retention pass over a day of deliveries (issue 50): ten days of webhook events, two delivered
 * deliveries each and an attempt per delivery, bulk-loaded with COPY (100k deliveries in --quick,
 * 1M in full, BENCH_RETENTION_DELIVERIES to set it, e.g. 100000000), then each run moves
 * EVENT_RETENTION back one day further and times the job's run that removes that day (DELETE in
 * batches: no time partitions yet), and the first page of the deliveries list after it.
 */

const day = 86_400_000;
const days = 10;
const deliveriesFor = (ctx: BenchContext) => Number(process.env.BENCH_RETENTION_DELIVERIES ?? (ctx.quick ? 100_000 : 1_000_000));
let passes = 0;
let loadedAt = 0;

/** Rows for COPY, oldest first: `perEvent` lines for each of `events` events spread evenly over the days loaded. */
function* rows(events: number, line: (i: number, created: string) => string) {
  const oldest = loadedAt - days * day;
  const step = (days * day) / events;
  let chunk = "";
  for (let i = 0; i < events; i++) {
    chunk += line(i, new Date(oldest + Math.floor(i * step)).toISOString());
    if ((i + 1) % 4096 === 0) {
      yield chunk;
      chunk = "";
    }
  }
  if (chunk) yield chunk;
}

async function copy(client: pg.Client, sql: string, source: Iterable<string>): Promise<void> {
  await pipeline(Readable.from(source, { objectMode: false }), client.query(copyFrom(sql)));
}

export const retentionScenario: Scenario = {
  name: "retention",
  title: "A retention pass over a day of deliveries, and the deliveries list after it",
  metrics: {
    pass_seconds: { label: "retention run removing one day of events, deliveries and attempts", unit: "s" },
    removed_deliveries: { label: "deliveries that run removed (a tenth of those loaded)", unit: "rows" },
    removed_per_second: { label: "deliveries removed per second (with their events and attempts)", unit: "rows/s" },
    list_p50: { label: "GET webhook-deliveries, first page, after the run: p50", unit: "ms" },
    deliveries: { label: "deliveries loaded (--quick 100k; BENCH_RETENTION_DELIVERIES)", unit: "rows" },
  },

  async setup(ctx) {
    const deliveries = deliveriesFor(ctx);
    const events = Math.floor(deliveries / 2);
    loadedAt = Date.now();
    const merchant = ctx.merchant.id;
    const endpoint = `we_bench_retention_${randomBytes(4).toString("hex")}`;
    const client = new pg.Client({ connectionString: ctx.databaseUrl });
    await client.connect();
    try {
      // Disabled: the loaded deliveries have ended and nothing new is sent to it.
      await client.query(
        `insert into webhook_endpoints (id, merchant_id, environment, url, status, secret_ciphertext, created_at, disabled_at)
         values ($1, $2, 'test', 'https://bench.example.test/hooks', 'disabled', $3, now(), now())`,
        [endpoint, merchant, SecretBox.fromMasterKeys(ctx.masterKey).seal(endpoint, "whsec_" + randomBytes(24).toString("hex"))],
      );
      ctx.log(`retention: loading ${events} events, ${deliveries} deliveries and attempts over ${days} days with COPY`);
      const t0 = performance.now();
      const id = (i: number) => `evt_r${i}`;
      await copy(client, `COPY webhook_events (id, merchant_id, environment, type, payload, created_at) FROM STDIN`, rows(events, (i, at) => `${id(i)}\t${merchant}\ttest\twebhook.test\t{}\t${at}\n`));
      await copy(
        client,
        `COPY webhook_deliveries (id, merchant_id, environment, event_id, endpoint_id, status, attempt_count, published_at, created_at, updated_at) FROM STDIN`,
        rows(events, (i, at) => [0, 1].map((k) => `wd_r${i}_${k}\t${merchant}\ttest\t${id(i)}\t${endpoint}\tdelivered\t1\t${at}\t${at}\t${at}\n`).join("")),
      );
      await copy(
        client,
        `COPY webhook_attempts (delivery_id, number, started_at, duration_ms, status_code, outcome) FROM STDIN`,
        rows(events, (i, at) => [0, 1].map((k) => `wd_r${i}_${k}\t1\t${at}\t20\t200\tsuccess\n`).join("")),
      );
      await client.query("VACUUM (ANALYZE) webhook_events, webhook_deliveries, webhook_attempts");
      await client.query("CHECKPOINT");
      ctx.log(`retention: loaded in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    } finally {
      await client.end();
    }
  },

  async run(ctx) {
    // Each run one day further back: the oldest day still loaded is past retention, nothing newer.
    passes++;
    const settings = { ...loadConfig({}).retention, eventSeconds: Math.round((days * day - passes * day - (Date.now() - loadedAt)) / 1000) };
    const t0 = performance.now();
    let result = await runRetention(ctx.db.em.fork(), settings, `bench-${process.pid}`);
    // The service's own scheduler may be running it (at its start): wait for its turn.
    while (!result.ran) {
      await sleep(200);
      result = await runRetention(ctx.db.em.fork(), settings, `bench-${process.pid}`);
    }
    const seconds = (performance.now() - t0) / 1000;
    const times: number[] = [];
    for (let n = 0; n < 50; n++) {
      const started = performance.now();
      const res = await fetch(`${ctx.base}/api/v1/merchants/${ctx.merchant.id}/webhook-deliveries?limit=50`, { headers: { authorization: `Bearer ${ctx.merchant.key}` } });
      await res.arrayBuffer();
      if (res.status !== 200) throw new Error(`retention: the deliveries list answered ${res.status}`);
      times.push(performance.now() - started);
    }
    const removed = result.removed.webhook_deliveries;
    return { pass_seconds: seconds, removed_deliveries: removed, removed_per_second: removed / seconds, list_p50: percentile(times, 50), deliveries: deliveriesFor(ctx) };
  },
};
