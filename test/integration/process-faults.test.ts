// The whole service (all roles in one child process) stopped under load: SIGKILL loses
// nothing a client was told was created, nor any recorded event's webhook; SIGTERM also lets
// every request already received finish, records every webhook attempt in flight, and exits 0.
// Real PostgreSQL and NATS, a local HTTPS receiver, concurrent REST clients.
import http from "node:http";
import net from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import pg from "pg";
import t, { type Test } from "tap";
import { call, idemKey, sampleIntent, until } from "../helpers/harness.ts";
import { serviceSystem, type ServiceProcess, type ServiceSystem } from "../helpers/processes.ts";

interface Attempt {
  key: string;
  /** Date.now() when the request was sent. */
  sentAt: number;
  status?: number;
  publicId?: string;
  /** The connection-level failure (ECONNREFUSED, ECONNRESET, UND_ERR_SOCKET, …). */
  error?: string;
}

function failureOf(err: unknown): string {
  const cause = (err as { cause?: { code?: string; message?: string } }).cause;
  return cause?.code ?? cause?.message ?? (err as Error).message;
}

/** load()'s clients create as fast as the service answers, with one key: past its write limit on a fast machine. */
const unlimitedWrites = { API_WRITE_RATE_LIMIT: "1000000" };

/**
 * `clients` loops creating Payment Intents, each with its own Idempotency-Key, until `stop()`
 * or its first connection failure (the server is gone). Every attempt is recorded.
 */
function load(s: ServiceSystem, clients: number) {
  const attempts: Attempt[] = [];
  let stopped = false;
  const running = Array.from({ length: clients }, async () => {
    while (!stopped) {
      const a: Attempt = { key: idemKey(), sentAt: Date.now() };
      attempts.push(a);
      try {
        const res = await call(s.base, "POST", `/api/v1/merchants/${s.creds.merchant}/payment-intents`, {
          key: s.creds.key,
          idempotencyKey: a.key,
          body: sampleIntent,
        });
        a.status = res.status;
        if (res.status === 200) a.publicId = res.body.data.public_id;
      } catch (err) {
        a.error = failureOf(err);
        return;
      }
    }
  });
  return {
    attempts,
    acknowledged: () => attempts.filter((a) => a.status === 200),
    /** Resolves once every client has stopped (after `stop()`, or on its own once the server is gone). */
    done: Promise.all(running),
    stop() {
      stopped = true;
    },
  };
}

async function query<T>(databaseUrl: string, sql: string, params: unknown[] = []): Promise<T[]> {
  const c = new pg.Client({ connectionString: databaseUrl });
  await c.connect();
  try {
    return (await c.query(sql, params)).rows as T[];
  } finally {
    await c.end();
  }
}

/** Each acknowledged intent is there after the restart, as it was created. */
async function assertAllThere(t: Test, s: ServiceSystem, acknowledged: Attempt[]): Promise<void> {
  const missing: string[] = [];
  for (const a of acknowledged) {
    const res = await call(s.base, "GET", `/api/v1/merchants/${s.creds.merchant}/payment-intents/${a.publicId}`, { key: s.creds.key });
    if (res.status !== 200 || res.body.data.public_id !== a.publicId) missing.push(`${a.publicId}: ${res.status}`);
  }
  t.same(missing, [], `every one of the ${acknowledged.length} acknowledged creates can be read after the restart`);
}

/** Every event recorded in the database reaches the receiver (by event id), within the deadline. */
async function assertAllDelivered(t: Test, s: ServiceSystem, p: ServiceProcess): Promise<{ id: string; payment_intent_id: string }[]> {
  const events = await query<{ id: string; payment_intent_id: string }>(s.databaseUrl, `select id, payment_intent_id from webhook_events`);
  const received = () => new Set(s.receiver.requests.map((r) => String(r.headers["x-service-event-id"])));
  let missing: string[] = [];
  await until(
    `all ${events.length} recorded events delivered`,
    async () => {
      const got = received();
      missing = events.filter((e) => !got.has(e.id)).map((e) => e.id);
      return missing.length === 0;
    },
    45_000,
    () => `${missing.length} missing, e.g. ${missing.slice(0, 3).join(", ")}; service output: ${p.output().slice(-1500)}`,
  );
  t.pass(`every one of the ${events.length} recorded events reached the receiver`);
  let statuses: Record<string, number> = {};
  await until(
    "every delivery delivered, none left processing",
    async () => {
      const rows = await query<{ status: string; n: number }>(s.databaseUrl, `select status, count(*)::int as n from webhook_deliveries group by status`);
      statuses = Object.fromEntries(rows.map((r) => [r.status, r.n]));
      return Object.keys(statuses).length === 1 && statuses.delivered === events.length;
    },
    15_000,
    () => JSON.stringify(statuses),
  );
  t.pass("every delivery ends delivered");
  return events;
}

/** Resolves once a new TCP connection to the port is refused: the server stopped listening. */
async function refusesConnections(port: number): Promise<void> {
  await until(
    `port ${port} refuses connections`,
    () =>
      new Promise<boolean>((resolve) => {
        const socket = net.connect(port, "127.0.0.1");
        socket.once("connect", () => {
          socket.destroy();
          resolve(false);
        });
        socket.once("error", (err: NodeJS.ErrnoException) => resolve(err.code === "ECONNREFUSED"));
      }),
    15_000,
  );
}

t.test("SIGKILL under load: nothing acknowledged is lost and every recorded event is delivered after a restart", async (t) => {
  const s = await serviceSystem(t, { env: { WEBHOOK_RETRY_DELAYS: "1,1,1,1,1", WEBHOOK_TIMEOUT_MS: "3000", ...unlimitedWrites } });
  const endpoint = await call(s.base, "POST", `/api/v1/merchants/${s.creds.merchant}/webhook-endpoints`, {
    key: s.creds.key,
    body: { url: "https://hooks.example.test/hooks/kill" },
  });
  t.equal(endpoint.status, 200, endpoint.status === 200 ? "a webhook endpoint on the receiver" : JSON.stringify(endpoint.body));

  const traffic = load(s, 4);
  // Mid-load: creates acknowledged and webhooks already arriving.
  await until("40 creates acknowledged and webhooks arriving", async () => traffic.acknowledged().length >= 40 && s.receiver.requests.length >= 5, 30_000);
  await s.first.kill("SIGKILL");
  t.equal(s.first.child.signalCode, "SIGKILL", "the service was killed");
  await traffic.done;
  const acknowledged = traffic.acknowledged();
  t.ok(traffic.attempts.some((a) => a.error), "the clients saw the service go");
  t.same(traffic.attempts.filter((a) => a.status !== undefined && a.status !== 200).map((a) => a.status), [], "every answered create was a 200");

  const again = await s.start();
  await assertAllThere(t, s, acknowledged);
  const events = await assertAllDelivered(t, s, again);
  const withEvent = new Set(events.map((e) => e.payment_intent_id));
  t.same(acknowledged.filter((a) => !withEvent.has(a.publicId!)).map((a) => a.publicId), [], "every acknowledged create recorded its payment.intent.created event");
});

t.test("SIGTERM under load: requests in progress finish, webhook attempts in flight are recorded, exit 0, nothing lost", async (t) => {
  // The receiver answers after 1.5 s, so attempts are in flight when the signal comes.
  const answering = new Set<string>();
  const s = await serviceSystem(t, {
    env: { WEBHOOK_RETRY_DELAYS: "1,1,1,1,1", WEBHOOK_TIMEOUT_MS: "5000", ...unlimitedWrites },
    respond: async (req) => {
      const id = String(req.headers["x-service-event-id"]);
      answering.add(id);
      await sleep(1500);
      answering.delete(id);
      return { status: 200, body: "ok" };
    },
  });
  const port = Number(s.env.PORT);
  const endpoint = await call(s.base, "POST", `/api/v1/merchants/${s.creds.merchant}/webhook-endpoints`, {
    key: s.creds.key,
    body: { url: "https://hooks.example.test/hooks/term" },
  });
  t.equal(endpoint.status, 200, endpoint.status === 200 ? "a webhook endpoint on the receiver" : JSON.stringify(endpoint.body));

  // A request the server has received (its headers answered with 100 Continue) whose body
  // is still to come when the signal arrives: certainly in progress at SIGTERM.
  const slowKey = idemKey();
  const body = JSON.stringify(sampleIntent);
  const slow = http.request({
    host: "127.0.0.1",
    port,
    method: "POST",
    path: `/api/v1/merchants/${s.creds.merchant}/payment-intents`,
    headers: {
      authorization: `Bearer ${s.creds.key}`,
      "idempotency-key": slowKey,
      "content-type": "application/json",
      "content-length": String(Buffer.byteLength(body)),
      expect: "100-continue",
    },
  });
  const slowResponse = new Promise<{ status: number; connection: string | undefined; body: string }>((resolve, reject) => {
    slow.on("response", (res) => {
      let text = "";
      res.on("data", (d: Buffer) => (text += d.toString()));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, connection: res.headers.connection, body: text }));
      res.on("error", reject);
    });
    slow.on("error", reject);
  });
  slowResponse.catch(() => undefined);
  slow.flushHeaders();
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("no 100 Continue within 10 s")), 10_000);
    slow.once("continue", () => {
      clearTimeout(timer);
      resolve();
    });
  });

  const traffic = load(s, 4);
  await until("30 creates acknowledged and webhook attempts in flight", async () => traffic.acknowledged().length >= 30 && answering.size >= 2, 30_000);
  const inFlight = [...answering].sort();
  const signalledAt = Date.now();
  s.first.child.kill("SIGTERM");

  // The gateway stops listening at once, but answers what it has already received.
  await refusesConnections(port);
  slow.end(body);
  const answered = await slowResponse;
  t.equal(answered.status, 200, `the request in progress at SIGTERM is answered: ${answered.body}`);
  t.equal(answered.connection, "close", "and its connection is closed after the answer");
  const slowId: string = JSON.parse(answered.body).data.public_id;

  const code = await Promise.race([s.first.exited, sleep(25_000).then(() => "still running after 25 s")]);
  t.equal(code, 0, `the service exits 0 (output: ${s.first.output().slice(-1500)})`);
  await traffic.done;

  const answeredStatuses = traffic.attempts.filter((a) => a.status !== undefined).map((a) => a.status);
  t.same(answeredStatuses.filter((x) => x !== 200), [], "every answered create was a 200");
  const before = traffic.attempts.filter((a) => a.sentAt < signalledAt);
  t.ok(before.length > 30, `${before.length} creates were sent before the signal`);

  // Nothing stays processing: the attempts in flight at SIGTERM finished and were recorded.
  const rows = await query<{ event_id: string; status: string; attempts: number; outcomes: string[] }>(
    s.databaseUrl,
    `select d.event_id, d.status, d.attempt_count as attempts,
            array(select coalesce(a.error, a.outcome) from webhook_attempts a where a.delivery_id = d.id order by a.number) as outcomes
       from webhook_deliveries d`,
  );
  t.same(rows.filter((r) => r.status === "processing"), [], "no delivery is left processing after the exit");
  t.same(
    rows
      .filter((r) => inFlight.includes(r.event_id))
      .sort((a, b) => (a.event_id < b.event_id ? -1 : 1))
      .map((r) => [r.event_id, r.status, r.outcomes]),
    inFlight.map((id) => [id, "delivered", ["success"]]),
    `the ${inFlight.length} attempts in flight at SIGTERM finished and were recorded as delivered`,
  );

  const again = await s.start();
  // A connection the server closed under a request it had not read is the client's to retry;
  // one it closed under a request it had carried out would leave the client not knowing.
  const dropped = traffic.attempts.filter((a) => a.error !== undefined && a.error !== "ECONNREFUSED");
  const carriedOut: string[] = [];
  for (const a of dropped) {
    const retry = await call(s.base, "POST", `/api/v1/merchants/${s.creds.merchant}/payment-intents`, {
      key: s.creds.key,
      idempotencyKey: a.key,
      body: sampleIntent,
    });
    if (retry.headers.get("idempotent-replayed") === "true") carriedOut.push(`${a.key} (${a.error})`);
  }
  t.same(carriedOut, [], `no connection was closed under a request the server carried out (${dropped.length} dropped before being read)`);

  await assertAllThere(t, s, [...traffic.acknowledged(), { key: slowKey, sentAt: signalledAt, status: 200, publicId: slowId }]);
  const events = await assertAllDelivered(t, s, again);
  const attempts = await query<{ error: string | null }>(s.databaseUrl, `select error from webhook_attempts where error = 'worker_lost'`);
  t.equal(attempts.length, 0, "no attempt was lost to the shutdown");
  t.ok(events.length >= traffic.acknowledged().length, "an event for every acknowledged create");
});
