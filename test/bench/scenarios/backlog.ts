import { jetstreamManager } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { createApiKey, createMerchant } from "../../../services/auth/admin.ts";
import { scopes } from "../../../services/auth/keys.ts";
import { streamNames } from "../../../services/delivery/jetstream.ts";
import { natsUrl } from "../../helpers/harness.ts";
import { EventProducer } from "../events.ts";
import { createBenchEndpoint, startBenchReceiver, steadyEvents, type BenchReceiver } from "../receiver.ts";
import { nowMs, percentile } from "../stats.ts";
import { Cleanup, startSystem, type System } from "../system.ts";
import type { Scenario } from "../types.ts";

/** The consumer's cap when WEBHOOK_MAX_ACK_PENDING is not set (platform/config.ts). */
const defaultMaxAckPending = 100_000;
const merchantsDown = 4;
const endpointsEach = 16;

const cleanup = new Cleanup();
let system: System;
let receiver: BenchReceiver;
let nc: NatsConnection;
const endpointsDown: { merchant: string; endpoint: string }[] = [];
let b: EventProducer;
let bEndpoint: string;

/**
 * A backlog larger than the consumer (issue 61): 4 merchants whose 16 endpoints each answer 503
 * are sent more deliveries than the consumer's default cap (100 000 unacknowledged), on the spec's
 * schedule and every default; merchant B's events, from the flood's commit on for 5 minutes, are
 * timed from commit to B's receiver. Before the outbox held the far retries, such a backlog filled
 * the consumer and B's webhook did not arrive within 30 s; before the worker went past a failing
 * endpoint's messages, and the relay took the newest deliveries in every pass, B's waited behind
 * the flood for 5–25 s. Measured too: the most messages the consumer held unacknowledged, and the
 * most deliveries waiting in the outbox meanwhile.
 */
export const backlogScenario: Scenario = {
  name: "backlog",
  ownSystem: true,
  title: `A backlog past the consumer's cap: ${merchantsDown} merchants × ${endpointsEach} endpoints answering 503, more deliveries than max_ack_pending (${defaultMaxAckPending}, the default); merchant B's first attempts meanwhile`,
  metrics: {
    flood: { label: "deliveries to endpoints that answer 503", unit: "" },
    attempted: { label: "of those, attempted at least once by the end of B's 5 minutes", unit: "" },
    max_ack_pending: { label: "most unacknowledged in the two lanes' consumers together (cap 100 000 each)", unit: "" },
    max_outbox_waiting: { label: "most deliveries waiting in the outbox (retries, and first attempts held back)", unit: "" },
    b_events: { label: "B's events (20/s for 5 minutes, from the flood's commit on)", unit: "" },
    b_p50: { label: "B's first attempt p50 (commit → request at B)", unit: "ms" },
    b_p99: { label: "B's first attempt p99", unit: "ms", target: { op: "<=", value: 1000 } },
    b_max: { label: "B's first attempt max", unit: "ms" },
    b_relay_p99: { label: "of that, B's commit → published by the relay, p99 (the database's clock)", unit: "ms" },
    b_worker_p99: { label: "B's published → attempt started (JetStream, pull, claim), p99", unit: "ms" },
  },
  async setup() {
    receiver = await startBenchReceiver(cleanup, 0, undefined, "/a/");
    system = await startSystem(cleanup, receiver.env);
    const em = system.db.em.fork();
    for (let m = 1; m <= merchantsDown; m++) {
      const merchant = await createMerchant(em, `Bench Shop down ${m}`);
      const key = (await createApiKey(em, merchant.id, "test", [...scopes])).api_key;
      for (let e = 1; e <= endpointsEach; e++) {
        endpointsDown.push({ merchant: merchant.id, endpoint: (await createBenchEndpoint(system, `/a/${m}/${e}`, { id: merchant.id, key })).id });
      }
    }
    const merchantB = await createMerchant(em, "Bench Shop B");
    const keyB = (await createApiKey(em, merchantB.id, "test", [...scopes])).api_key;
    bEndpoint = (await createBenchEndpoint(system, "/b", { id: merchantB.id, key: keyB })).id;
    b = new EventProducer(system.databaseUrl, merchantB.id, bEndpoint);
    nc = await connect({ servers: natsUrl.split(",") });
    cleanup.teardown(async () => {
      await b.close();
      await nc.close();
    });
  },
  async run(ctx) {
    await receiver.reset();
    const perEndpoint = ctx.quick ? 100 : Math.ceil((defaultMaxAckPending * 1.056) / endpointsDown.length);
    const flood = perEndpoint * endpointsDown.length;
    const names = streamNames(system.env.JETSTREAM_PREFIX as string);
    const jsm = await jetstreamManager(nc);
    let maxAckPending = 0;
    let maxOutbox = 0;
    const since = new Date();
    const sample = async () => {
      // Both lanes' consumers (delivery/lanes.ts): the flood's surplus waits in the backlog lane's.
      const lanes = await Promise.all([names.consumer, names.backlogConsumer].map((c) => jsm.consumers.info(names.stream, c)));
      maxAckPending = Math.max(maxAckPending, lanes.reduce((sum, info) => sum + info.num_ack_pending, 0));
      const [row] = await system.db.em
        .fork()
        .execute<{ waiting: number; attempted: number }[]>(
          `select count(*) filter (where published_at is null and next_attempt_at > now())::int as waiting,
                  count(*) filter (where attempt_count >= 1 and created_at >= ?)::int as attempted
             from webhook_deliveries where endpoint_id = any(?::text[])`,
          [since, `{${endpointsDown.map((d) => d.endpoint).join(",")}}`],
        );
      maxOutbox = Math.max(maxOutbox, row?.waiting ?? 0);
      return row?.attempted ?? 0;
    };
    // One producer at a time: 64 pools of connections at once would be more than PostgreSQL takes.
    const t0 = nowMs();
    for (const d of endpointsDown) {
      const p = new EventProducer(system.databaseUrl, d.merchant, d.endpoint);
      for (let left = perEndpoint; left > 0; left -= 500) await p.record(Math.min(500, left));
      await p.close();
    }
    ctx.log(`backlog: ${flood} deliveries to endpoints that answer 503 recorded in ${((nowMs() - t0) / 1000).toFixed(1)} s`);
    // B's events run from here for 5 minutes (20 s quick) while the backlog waits: the relay
    // publishing the flood, the worker going past its messages, the 60 s and 5 min retries coming
    // back among the first attempts, the consumer holding the most it will. Not until the flood's
    // first attempts are all made: 64 endpoints answering 503 share half of the worker, so that
    // takes tens of minutes, by design.
    const windowS = ctx.quick ? 20 : 300;
    let attempted = 0;
    const { commits, latencies } = await steadyEvents(b, receiver, windowS, async () => (attempted = await sample()));
    attempted = await sample();
    ctx.log(`backlog: B's events for ${windowS} s; meanwhile ${attempted} of ${flood} attempted once, the consumers held at most ${maxAckPending}, the outbox ${maxOutbox} waiting`);
    return {
      flood,
      attempted,
      max_ack_pending: maxAckPending,
      max_outbox_waiting: maxOutbox,
      b_events: commits.size,
      b_p50: percentile(latencies, 50),
      b_p99: percentile(latencies, 99),
      b_max: Math.max(...latencies),
      ...(await stagesOfB(system.db.em.fork(), bEndpoint, since)),
    };
  },
  async teardown() {
    await cleanup.run();
  },
};

/** Where B's first attempts spent their time, by stage, from the service's own records (one clock: PostgreSQL's). */
async function stagesOfB(em: ReturnType<System["db"]["em"]["fork"]>, endpoint: string, since: Date): Promise<{ b_relay_p99: number; b_worker_p99: number }> {
  const rows = await em.execute<{ relay_ms: number; worker_ms: number }[]>(
    `select extract(epoch from (d.published_at - d.created_at)) * 1000 as relay_ms,
            extract(epoch from (a.started_at - d.published_at)) * 1000 as worker_ms
       from webhook_deliveries d join webhook_attempts a on a.delivery_id = d.id and a.number = 1
      where d.endpoint_id = ? and d.created_at >= ? and d.published_at is not null`,
    [endpoint, since],
  );
  return {
    b_relay_p99: percentile(rows.map((r) => Number(r.relay_ms)), 99),
    b_worker_p99: percentile(rows.map((r) => Number(r.worker_ms)), 99),
  };
}
