import { createHmac } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import type { Role } from "../../services/app/app.ts";
import type { Logger } from "../../services/platform/logger.ts";
import { connect } from "@nats-io/transport-node";
import { jetstreamManager } from "@nats-io/jetstream";
import { streamNames } from "../../services/delivery/jetstream.ts";
import { call, idemKey, merchantWithKey, natsUrl, sampleIntent, startTestApp, until, type Credentials, type TestApp } from "./harness.ts";
import { makeTestCa, startReceiver, trustTestCa, type RecordedRequest, type Receiver, type Responder, type TestCa } from "./receiver.ts";

interface Teardown {
  teardown(fn: () => unknown): void;
}

/** The name merchants' endpoints use in tests; WEBHOOK_CONNECT_TO maps it to the local receiver. */
export const hookHost = "hooks.example.test";

export interface WebhookSetup extends TestApp {
  ca: TestCa;
  receiver: Receiver;
  creds: Credentials;
  /** Creates an endpoint on the receiver (path `/hooks/<n>`) for `creds` (default: the setup's); returns its id and signing secret. */
  createEndpoint(path?: string, creds?: Credentials): Promise<{ id: string; secret: string; url: string }>;
}

/**
 * A running app whose worker delivers to a local HTTPS receiver signed by a
 * test CA, reached as https://hooks.example.test/ through WEBHOOK_CONNECT_TO.
 */
export async function webhookSetup(
  t: Teardown,
  opts: { env?: Record<string, string>; respond?: Responder; roles?: readonly Role[]; masterKey?: Buffer; logger?: Logger } = {},
): Promise<WebhookSetup> {
  const ca = await makeTestCa(t, [hookHost]);
  trustTestCa(ca.caPem);
  const receiver = await startReceiver(t, { key: ca.key, cert: ca.cert, respond: opts.respond });
  const app = await startTestApp(
    t,
    {
      WEBHOOK_CONNECT_TO: `${hookHost}:443:127.0.0.1:${receiver.port}`,
      WEBHOOK_RETRY_DELAYS: "0.2,0.2,0.2,0.2,0.2",
      WEBHOOK_TIMEOUT_MS: "2000",
      ...opts.env,
    },
    opts.roles,
    opts.masterKey,
    opts.logger,
  );
  const creds = await merchantWithKey(app.app);
  let n = 0;
  return {
    ...app,
    ca,
    receiver,
    creds,
    async createEndpoint(path = `/hooks/${++n}`, c = creds) {
      const url = `https://${hookHost}${path}`;
      const res = await call(app.base, "POST", `/api/v1/merchants/${c.merchant}/webhook-endpoints`, { key: c.key, body: { url } });
      if (res.status !== 200) throw new Error(`create endpoint: ${res.status} ${JSON.stringify(res.body)}`);
      return { id: res.body.data.id, secret: res.body.data.signing_secret, url };
    },
  };
}

/** Polls the delivery list until `done` holds for the delivery (or times out). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function waitForDelivery(
  s: WebhookSetup,
  deliveryId: string,
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  done: (d: any) => boolean,
  timeoutMs = 15_000,
  creds: Credentials = s.creds,
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
): Promise<any> {
  const deadline = Date.now() + timeoutMs;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  let last: any;
  while (Date.now() < deadline) {
    last = await deliveryById(s, deliveryId, creds);
    if (last && done(last)) return last;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`delivery ${deliveryId} did not reach the expected state: ${JSON.stringify(last)}`);
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function deliveryById(s: WebhookSetup, deliveryId: string, creds: Credentials = s.creds): Promise<any> {
  const res = await call(s.base, "GET", `/api/v1/merchants/${creds.merchant}/webhook-deliveries?limit=200`, { key: creds.key });
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  return res.body.data.find((d: any) => d.id === deliveryId);
}

export const finished = (d: { status: string }) => d.status === "delivered" || d.status === "failed";

/** Creates `n` payment intents through the REST API, `parallel` at a time; returns their public ids. */
export async function createIntents(s: WebhookSetup, n: number, parallel = 10): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i += parallel) {
    const batch = await Promise.all(
      Array.from({ length: Math.min(parallel, n - i) }, () =>
        call(s.base, "POST", `/api/v1/merchants/${s.creds.merchant}/payment-intents`, { key: s.creds.key, idempotencyKey: idemKey(), body: sampleIntent }),
      ),
    );
    for (const res of batch) {
      if (res.status !== 200) throw new Error(`create intent: ${res.status} ${JSON.stringify(res.body)}`);
      ids.push(res.body.data.public_id);
    }
  }
  return ids;
}

/** Creates an ethereum USDC intent for `amount` through the REST API (the merchant's own key); returns it. */
export async function createUsdcIntent(s: WebhookSetup, amount: string): Promise<{ public_id: string; deposit_address: `0x${string}` }> {
  const res = await call(s.base, "POST", `/api/v1/merchants/${s.creds.merchant}/payment-intents`, {
    key: s.creds.key,
    idempotencyKey: idemKey(),
    body: { network: "ethereum", asset: "USDC", requested_amount: amount },
  });
  if (res.status !== 200) throw new Error(`create: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.data;
}

/** The event a webhook request carries. */
export const eventIdOf = (r: RecordedRequest) => String(r.headers["x-service-event-id"]);

/**
 * Waits until the app's delivery consumers (both lanes) hold no message: none waiting, none
 * delivered and unacknowledged (a retry waiting on its backoff is one). From then on no attempt can
 * be made until a new delivery is published: the proof of absence a sleep cannot give.
 */
export async function consumerDrained(app: Pick<TestApp, "prefix" | "config">, timeoutMs = 20_000): Promise<void> {
  const names = streamNames(app.prefix);
  const nc = await connect({ servers: (app.config.natsUrl ?? natsUrl).split(",") });
  try {
    const jsm = await jetstreamManager(nc);
    let last = "";
    await until(
      `${names.consumer} and ${names.backlogConsumer} drained`,
      async () => {
        const infos = await Promise.all([names.consumer, names.backlogConsumer].map((c) => jsm.consumers.info(names.stream, c)));
        last = infos.map((info) => `${info.name}: num_pending ${info.num_pending}, num_ack_pending ${info.num_ack_pending}`).join("; ");
        return infos.every((info) => info.num_pending === 0 && info.num_ack_pending === 0);
      },
      timeoutMs,
      () => last,
    );
  } finally {
    await nc.close();
  }
}

/** A lane's delivery consumer (delivery/lanes.ts) as JetStream describes it now (its num_ack_pending, max_ack_pending…). */
export async function consumerInfo(app: Pick<TestApp, "prefix" | "config">, lane: "main" | "backlog" = "main") {
  const names = streamNames(app.prefix);
  const nc = await connect({ servers: (app.config.natsUrl ?? natsUrl).split(",") });
  try {
    return await (await jetstreamManager(nc)).consumers.info(names.stream, lane === "main" ? names.consumer : names.backlogConsumer);
  } finally {
    await nc.close();
  }
}

/**
 * Whether an event is not payment.detected. "*" takes it since issue 65, and it comes or not as a
 * watcher first sees a payment below its confirmations or already at them (a chain mined several
 * blocks at a time, read by polling): a test that lists an intent's events at a "*" endpoint leaves
 * it out, and one about it asserts it where it must come (evm-watcher, bitcoin-watcher, tron-watcher).
 */
export const notDetected = (e: { type: string }) => e.type !== "payment.detected";

/** An event as a receiver parses it: the envelope, with the embedded intent of payment events. */
export interface ReceivedEvent {
  id: string;
  type: string;
  data: { payment_intent?: { public_id: string; sequence: number; status: string } };
}

/**
 * The events the receiver got (at `path` only, when given), each signature checked with the
 * endpoint's secret as a receiver would, independently of the service's own signing code.
 */
export function signedEvents(receiver: Receiver, secret: string, path?: string): ReceivedEvent[] {
  return receiver.requests
    .filter((r) => path === undefined || r.url === path)
    .map((r) => {
      const ts = String(r.headers["x-service-timestamp"]);
      if (createHmac("sha256", secret).update(`${ts}.`).update(r.body).digest("hex") !== r.headers["x-service-signature"]) throw new Error("a webhook with a bad signature");
      return JSON.parse(r.body.toString()) as ReceivedEvent;
    });
}

/**
 * Each event the receiver got once, by event id, in the order first received: delivery is at
 * least once (a redelivery under load POSTs an event again), so a receiver, and a test counting
 * what a merchant was told, dedupes by id.
 */
export function eventsOnce(receiver: Receiver, secret: string, path?: string): ReceivedEvent[] {
  const byId = new Map<string, ReceivedEvent>();
  for (const e of signedEvents(receiver, secret, path)) if (!byId.has(e.id)) byId.set(e.id, e);
  return [...byId.values()];
}

/** The environment of a worker child process that belongs to the setup's system. */
export function workerEnv(t: Teardown, s: WebhookSetup, extra: Record<string, string>): Record<string, string> {
  const dataDir = mkdtempSync(path.join(tmpdir(), "test-worker-"));
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
  return {
    DATABASE_URL: s.databaseUrl,
    NATS_URL: natsUrl,
    JETSTREAM_PREFIX: s.prefix,
    SECRET_ENCRYPTION_KEY: s.masterKey.toString("hex"),
    WEBHOOK_CONNECT_TO: `${hookHost}:443:127.0.0.1:${s.receiver.port}`,
    NODE_EXTRA_CA_CERTS: s.ca.caFile,
    PORT: "0",
    RPC_PORT: "0",
    OPS_PORT: "0",
    LOG_LEVEL: "warn",
    DATA_DIR: dataDir,
    ...extra,
  };
}
