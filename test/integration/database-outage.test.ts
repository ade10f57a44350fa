// PostgreSQL stops under load and comes back on the same port and data directory: meanwhile
// clients get 503 unavailable (REST, with Retry-After) and Code.Unavailable (gRPC), never 500;
// /readyz says not ready; afterwards the same process serves again without a restart, nothing
// acknowledged is lost, retried creates are created once and every event is delivered.
import { chmodSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import t from "tap";
import { ErrorDetailSchema } from "../../gen/payments/v1/options_pb.ts";
import { IntentService } from "../../gen/payments/v1/payment_intents_pb.ts";
import { startEmbeddedPostgres } from "../../services/app/embedded-postgres.ts";
import { freePort } from "../../services/platform/listen.ts";
import { call, idemKey, sampleIntent, until, type ApiResponse } from "../helpers/harness.ts";
import { webhookSetup } from "../helpers/webhooks.ts";

interface Outcome {
  key: string;
  status: number;
  response: ApiResponse;
}

t.test("a PostgreSQL outage mid-load: 503 unavailable while down, healed without a restart, nothing lost", { timeout: 90_000 }, async (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), "payments-db-outage-"));
  // The server runs as the unprivileged "postgres" user, which must reach the data directory.
  chmodSync(dir, 0o755);
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const pgOptions = { dataDir: path.join(dir, "pg"), port: await freePort(), user: "payments", password: "outage-test", database: "payments" };
  let pg = await startEmbeddedPostgres(pgOptions);
  // Teardowns run last-registered first: this one after the app has stopped.
  t.teardown(() => pg.stop());

  // A small pool: a connection the outage left checked out would soon starve the service (and hang its stop).
  const s = await webhookSetup(t, { env: { DATABASE_URL: pg.url, DB_POOL_SIZE: "4" } });
  await s.createEndpoint();
  const { merchant, key } = s.creds;
  const intentsPath = `/api/v1/merchants/${merchant}/payment-intents`;
  const ready = async () => (await fetch(`http://127.0.0.1:${s.app.ports.ops}/readyz`)).status;
  t.equal(await ready(), 200, "ready before the outage");

  // Clients creating intents in a loop, each under a fresh Idempotency-Key.
  const outcomes: Outcome[] = [];
  let loadOn = true;
  const client = async () => {
    while (loadOn) {
      const k = idemKey();
      const response = await call(s.base, "POST", intentsPath, { key, idempotencyKey: k, body: sampleIntent });
      outcomes.push({ key: k, status: response.status, response });
      // Pacing, so that four clients leave the two shared cores to the service.
      await sleep(50);
    }
  };
  const clients = Promise.all([client(), client(), client(), client()]);
  t.teardown(async () => {
    loadOn = false;
    await clients;
  });
  const acknowledgedCount = () => outcomes.filter((o) => o.status === 200).length;
  const unavailableCount = () => outcomes.filter((o) => o.status === 503).length;
  await until("creates acknowledged before the outage", async () => acknowledgedCount() >= 20, 20_000);

  await pg.stop();
  const seenBefore = unavailableCount();
  // Down long enough for the background loops (scheduler, outbox relay, worker) to fail and back off too.
  await until("clients see 503 while the database is down", async () => unavailableCount() >= seenBefore + 100, 20_000);
  await until("/readyz not ready while down", async () => (await ready()) === 503, 10_000);
  const readyz = await (await fetch(`http://127.0.0.1:${s.app.ports.ops}/readyz`)).json();
  t.match(readyz, { status: "not_ready", database: false }, "/readyz names the database");

  // Our own HTTP/2 session, closed at teardown: the rpc server's graceful close waits for its clients' sessions.
  const sessions = new Http2SessionManager(s.rpcUrl);
  t.teardown(() => sessions.abort());
  const grpc = createClient(IntentService, createGrpcTransport({ baseUrl: s.rpcUrl, sessionManager: sessions }));
  const grpcErr = await grpc
    .createPaymentIntent({ merchant, ...sampleIntent, requestedAmount: sampleIntent.requested_amount }, { headers: { authorization: `Bearer ${key}`, "idempotency-key": idemKey() } })
    .then(
      () => undefined,
      (e: unknown) => ConnectError.from(e),
    );
  t.equal(grpcErr?.code, Code.Unavailable, "gRPC: Code.Unavailable while down");
  t.same(grpcErr?.findDetails(ErrorDetailSchema).map((d) => d.code), ["unavailable"], "gRPC: ErrorDetail code unavailable");
  t.equal(grpcErr?.rawMessage, "The database is unavailable; retry shortly.");

  pg = await startEmbeddedPostgres(pgOptions);
  const back = outcomes.length;
  await until("creates succeed again after the database is back", async () => outcomes.slice(back).some((o) => o.status === 200), 30_000);
  await until("/readyz ready again", async () => (await ready()) === 200, 20_000);
  loadOn = false;
  await clients;

  // What clients saw: 200 or 503 unavailable, never anything else.
  const statuses = [...new Set(outcomes.map((o) => o.status))].sort();
  t.same(statuses, [200, 503], "every create answered 200 or 503, none 500");
  const unavailable = outcomes.filter((o) => o.status === 503);
  t.ok(unavailable.length >= 10, `${unavailable.length} creates answered 503 during the outage`);
  const badEnvelopes = unavailable.filter(
    ({ response: r }) =>
      r.headers.get("retry-after") !== "1" ||
      !/^req_/.test(r.headers.get("x-request-id") ?? "") ||
      JSON.stringify(Object.keys(r.body?.error ?? {}).sort()) !== JSON.stringify(["code", "message", "request_id"]) ||
      r.body.error.code !== "unavailable" ||
      r.body.error.request_id !== r.headers.get("x-request-id") ||
      Object.keys(r.body).length !== 1,
  );
  t.same(badEnvelopes.map((o) => [o.response.headers.get("retry-after"), o.response.body]), [], "each 503: Retry-After, X-Request-Id and the error envelope with code unavailable");
  t.equal(unavailable[0]?.response.body.error.message, "The database is unavailable; retry shortly.");

  // Every acknowledged create exists.
  const acknowledged = outcomes.filter((o) => o.status === 200).map((o) => o.response.body.data.public_id as string);
  const missing: string[] = [];
  for (const id of acknowledged) {
    const got = await call(s.base, "GET", `${intentsPath}/${id}`, { key });
    if (got.status !== 200 || got.body.data.public_id !== id) missing.push(`${id}: ${got.status}`);
  }
  t.same(missing, [], `all ${acknowledged.length} acknowledged creates exist`);

  // The creates refused during the outage, retried under their keys: created once each.
  const retried = new Map<string, string>();
  const retryFailures: string[] = [];
  const retry = async (o: Outcome) => {
    const first = await call(s.base, "POST", intentsPath, { key, idempotencyKey: o.key, body: sampleIntent });
    const again = await call(s.base, "POST", intentsPath, { key, idempotencyKey: o.key, body: sampleIntent });
    if (first.status !== 200 || again.status !== 200 || again.body.data.public_id !== first.body.data.public_id || again.headers.get("idempotent-replayed") !== "true") {
      retryFailures.push(`${o.key}: ${first.status} then ${again.status}`);
    } else retried.set(o.key, first.body.data.public_id);
  };
  for (let i = 0; i < unavailable.length; i += 4) await Promise.all(unavailable.slice(i, i + 4).map(retry));
  t.same(retryFailures, [], `all ${unavailable.length} refused creates succeed when retried with their Idempotency-Key, and replay after`);
  const expected = new Set([...acknowledged, ...retried.values()]);
  t.equal(expected.size, acknowledged.length + unavailable.length, "every retried key made an intent of its own");
  const rows = await s.app.db.em.fork().execute<{ id: string }[]>(`select id from payment_intents where merchant_id = ?`, [merchant]);
  t.same(rows.map((r) => r.id).sort(), [...expected].sort(), "the database holds exactly the acknowledged and the retried intents, once each");

  // Every recorded event reaches the receiver.
  const events = (await s.app.db.em.fork().execute<{ id: string }[]>(`select id from webhook_events where merchant_id = ?`, [merchant])).map((r) => r.id);
  t.ok(events.length >= expected.size, `${events.length} events recorded`);
  const delivered = () => new Set(s.receiver.requests.map((r) => String(r.headers["x-service-event-id"])));
  await until("every recorded event delivered", async () => events.every((id) => delivered().has(id)), 40_000, () => {
    const got = delivered();
    return `${events.filter((id) => !got.has(id)).length} of ${events.length} not delivered`;
  });
  t.pass(`all ${events.length} events delivered`);
});
