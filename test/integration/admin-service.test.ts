// AdminService (internal gRPC): signing-secret rotation with overlap, bulk recovery of failed
// deliveries, auto-disable of endpoints that only fail, and the CLIs that call it. Real
// PostgreSQL, NATS and a local HTTPS receiver; the scheduler pass runs with a shortened period.
import { createHmac, timingSafeEqual } from "node:crypto";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { timestampDate, timestampFromDate } from "@bufbuild/protobuf/wkt";
import { setTimeout as sleep } from "node:timers/promises";
import t from "tap";
import { AdminService } from "../../gen/payments/v1/admin_pb.ts";
import { ErrorDetailSchema } from "../../gen/payments/v1/options_pb.ts";
import { createInternalCredential } from "../../services/auth/admin.ts";
import { startScheduler } from "../../services/app/scheduler.ts";
import { Intents } from "../../services/intents/intents.ts";
import { IntentViews } from "../../services/intents/views.ts";
import { createLogger } from "../../services/platform/logger.ts";
import { enableEndpoint } from "../../services/webhooks/operations.ts";
import { call, merchantWithKey, until, type Credentials } from "../helpers/harness.ts";
import { runCli } from "../helpers/processes.ts";
import type { RecordedRequest, Reply } from "../helpers/receiver.ts";
import { finished, waitForDelivery, webhookSetup } from "../helpers/webhooks.ts";

// ---- receivers' verification ----

/** The spec's rule (Signature, 3), and nothing more: X-Service-Signature is one lowercase hex HMAC. */
function specVerify(secret: string, r: RecordedRequest): boolean {
  const expected = createHmac("sha256", secret).update(`${tsOf(r)}.`).update(r.body).digest();
  const given = Buffer.from(String(sigOf(r) ?? "").toLowerCase(), "hex");
  return given.length === expected.length && timingSafeEqual(given, expected);
}

/** The documented receiver's check (docs/webhooks.md, "Receiving webhooks"), as a receiver copies it: either header may match. */
function readmeVerify(secret: string, r: RecordedRequest): boolean {
  const expected = createHmac("sha256", secret).update(`${tsOf(r)}.`).update(r.body).digest();
  return ["x-service-signature", "x-service-signature-next"].some((name) => {
    const given = Buffer.from(String(r.headers[name] ?? "").toLowerCase(), "hex");
    return given.length === expected.length && timingSafeEqual(given, expected);
  });
}

const verifiers = { spec: specVerify, readme: readmeVerify };
const sigOf = (r: RecordedRequest) => r.headers["x-service-signature"] as string | undefined;
const nextSigOf = (r: RecordedRequest) => r.headers["x-service-signature-next"] as string | undefined;
const tsOf = (r: RecordedRequest) => String(r.headers["x-service-timestamp"] ?? "");

// ---- the system ----

/**
 * Paths choose the answer: /ok/* 200, /fail/* 500, /switch/* whatever `switched` says now,
 * /spec/* 200 when the spec's rule verifies X-Service-Signature with the secret `held` says the
 * receiver holds, else 400 (as a receiver built to the spec answers).
 */
const switched = new Map<string, number>();
const held = new Map<string, string>();
function respond(req: RecordedRequest): Reply {
  if (req.url.startsWith("/fail/")) return { status: 500, body: "down" };
  if (req.url.startsWith("/spec/")) return specVerify(held.get(req.url) ?? "", req) ? { status: 200, body: "ok" } : { status: 400, body: "bad signature" };
  if (req.url.startsWith("/switch/")) return { status: switched.get(req.url) ?? 500 };
  return { status: 200, body: "ok" };
}

// No scheduler role: the auto-disable test runs its own schedulers, with a shortened period,
// only once the other tests (whose endpoints fail on purpose) are done.
const s = await webhookSetup(t, { respond, roles: ["rpc", "gateway", "worker"], env: { WEBHOOK_MAX_ATTEMPTS: "2" } });
const { credential } = await createInternalCredential(s.app.db.em.fork(), "admin-service test", ["admin"], "test");
const internal = { headers: { authorization: `Bearer ${credential}` } };
const admin = createClient(AdminService, createGrpcTransport({ baseUrl: s.rpcUrl }));
const cliEnv = { RPC_URL: s.rpcUrl, INTERNAL_CREDENTIAL: credential };

async function sendTest(endpointId: string, c: Credentials = s.creds): Promise<{ id: string; event_id: string }> {
  const res = await call(s.base, "POST", `/api/v1/merchants/${c.merchant}/webhook-endpoints/${endpointId}/test`, { key: c.key });
  if (res.status !== 200) throw new Error(`test event: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.data;
}

/** The receiver's request carrying `eventId` on `path`. */
function requestFor(path: string, eventId: string): Promise<RecordedRequest> {
  return until(`a request on ${path} for ${eventId}`, async () => s.receiver.requests.find((r) => r.url === path && r.headers["x-service-event-id"] === eventId), 15_000);
}

async function grpcError(p: Promise<unknown>): Promise<ConnectError> {
  try {
    await p;
  } catch (err) {
    return ConnectError.from(err);
  }
  throw new Error("expected the call to fail");
}

const detailOf = (err: ConnectError) => err.findDetails(ErrorDetailSchema)[0];

t.test("rotation: during the overlap X-Service-Signature is the previous secret's, X-Service-Signature-Next the new one's", async (t) => {
  const endpoint = await s.createEndpoint("/ok/rotate-overlap");
  const rotated = await admin.rotateSigningSecret({ endpointId: endpoint.id }, internal);
  t.match(rotated.signingSecret, /^whsec_[A-Za-z0-9_-]{43}$/, "a new whsec_ secret");
  t.not(rotated.signingSecret, endpoint.secret);
  const expires = timestampDate(rotated.previousSecretExpiresAt!).getTime();
  t.ok(expires > Date.now() + 86_000_000 && expires <= Date.now() + 86_400_000, "default overlap: a day");

  const delivery = await sendTest(endpoint.id);
  const req = await requestFor("/ok/rotate-overlap", delivery.event_id);
  t.match(sigOf(req), /^[0-9a-f]{64}$/, "X-Service-Signature: one lowercase hex signature, as the spec says");
  t.match(nextSigOf(req), /^[0-9a-f]{64}$/, "X-Service-Signature-Next: one too");
  t.ok(specVerify(endpoint.secret, req), "the spec's rule verifies with the previous secret, the one the receiver holds");
  t.notOk(specVerify(rotated.signingSecret, req), "not yet with the new one");
  t.ok(readmeVerify(rotated.signingSecret, req), "the check in docs/webhooks.md accepts the new secret (X-Service-Signature-Next)");
  t.ok(readmeVerify(endpoint.secret, req), "and the previous one");
  for (const [name, verify] of Object.entries(verifiers)) {
    t.notOk(verify(`whsec_${"x".repeat(43)}`, req), `${name} verifier refuses another secret`);
  }
  await waitForDelivery(s, delivery.id, (d) => d.status === "delivered");
});

t.test("rotation: a receiver that implements only the spec's rule accepts every webhook during the overlap, and the new secret after it", async (t) => {
  const path = "/spec/rotate";
  const endpoint = await s.createEndpoint(path);
  held.set(path, endpoint.secret);
  const before = await sendTest(endpoint.id);
  t.equal((await waitForDelivery(s, before.id, finished)).status, "delivered", "before the rotation");

  const rotated = await admin.rotateSigningSecret({ endpointId: endpoint.id, overlapSeconds: 4 }, internal);
  const expires = timestampDate(rotated.previousSecretExpiresAt!).getTime();
  const during = await Promise.all([sendTest(endpoint.id), sendTest(endpoint.id), sendTest(endpoint.id)]);
  for (const d of during) {
    const req = await requestFor(path, d.event_id);
    t.ok(Number(tsOf(req)) * 1000 <= expires, "sent during the overlap");
    t.match(await waitForDelivery(s, d.id, finished), { status: "delivered", attempt_count: 1 }, "accepted at once by a receiver still on the previous secret");
  }

  // The overlap ends; the receiver has moved to the new secret (which it was given at the rotation).
  await until("the overlap's end has passed", async () => Date.now() > expires + 50, 10_000);
  held.set(path, rotated.signingSecret);
  const after = await sendTest(endpoint.id);
  const req = await requestFor(path, after.event_id);
  t.equal(nextSigOf(req), undefined, "no X-Service-Signature-Next after the overlap");
  t.ok(specVerify(rotated.signingSecret, req), "the new secret signs X-Service-Signature");
  t.equal((await waitForDelivery(s, after.id, finished)).status, "delivered", "and the receiver accepts it");
});

t.test("rotation: once the overlap has passed only the new signature (admin CLI)", async (t) => {
  const endpoint = await s.createEndpoint("/ok/rotate-short");
  const cli = await runCli("services/app/admin.ts", cliEnv, "endpoint", "rotate-secret", "--id", endpoint.id, "--overlap", "1");
  t.equal(cli.code, 0, `admin exits 0 (${cli.stderr})`);
  const out = JSON.parse(cli.stdout);
  t.equal(out.endpoint_id, endpoint.id);
  t.match(out.signing_secret, /^whsec_/);
  const expires = new Date(out.previous_secret_expires_at).getTime();
  t.ok(expires > 0, "the overlap's end is printed");
  t.equal(cli.stderr, "", "nothing on stderr");

  await until("the overlap's end has passed", async () => Date.now() > expires + 50, 10_000);
  const delivery = await sendTest(endpoint.id);
  const req = await requestFor("/ok/rotate-short", delivery.event_id);
  t.match(sigOf(req), /^[0-9a-f]{64}$/, "one signature");
  t.equal(nextSigOf(req), undefined, "and no X-Service-Signature-Next");
  for (const [name, verify] of Object.entries(verifiers)) {
    t.ok(verify(out.signing_secret, req), `${name}: the new secret verifies`);
    t.notOk(verify(endpoint.secret, req), `${name}: the previous secret no longer does`);
  }

  const immediate = await s.createEndpoint("/ok/rotate-zero");
  const zero = await admin.rotateSigningSecret({ endpointId: immediate.id, overlapSeconds: 0 }, internal);
  t.equal(zero.previousSecretExpiresAt, undefined, "overlap 0: no previous secret");
  const d0 = await sendTest(immediate.id);
  const r0 = await requestFor("/ok/rotate-zero", d0.event_id);
  t.ok(specVerify(zero.signingSecret, r0) && nextSigOf(r0) === undefined, "only the new secret signs");
  t.notOk(readmeVerify(immediate.secret, r0), "the old one is gone at once");
});

t.test("bad input is refused with a clear error", async (t) => {
  const endpoint = await s.createEndpoint("/ok/bad-input");
  const tooLong = await grpcError(admin.rotateSigningSecret({ endpointId: endpoint.id, overlapSeconds: 604_801 }, internal));
  t.equal(tooLong.code, Code.InvalidArgument, "overlap past 7 days");
  t.same({ ...detailOf(tooLong) }, { $typeName: "payments.v1.ErrorDetail", code: "validation_failed", param: "overlap_seconds" });
  t.match(tooLong.rawMessage, /0 to 604800/);
  const max = await admin.rotateSigningSecret({ endpointId: endpoint.id, overlapSeconds: 604_800 }, internal);
  t.match(max.signingSecret, /^whsec_/, "7 days exactly is taken");

  const unknown = await grpcError(admin.rotateSigningSecret({ endpointId: "we_doesnotexist" }, internal));
  t.equal(unknown.code, Code.NotFound, "unknown endpoint");
  t.equal(detailOf(unknown)?.code, "not_found");

  const disabled = await s.createEndpoint("/ok/disabled");
  const off = await call(s.base, "POST", `/api/v1/merchants/${s.creds.merchant}/webhook-endpoints/${disabled.id}/disable`, { key: s.creds.key });
  t.equal(off.status, 200);
  const refused = await grpcError(admin.rotateSigningSecret({ endpointId: disabled.id }, internal));
  t.equal(refused.code, Code.FailedPrecondition, "disabled endpoint");
  t.equal(detailOf(refused)?.code, "invalid_state");
  t.match(refused.rawMessage, /disabled/);

  const future = await grpcError(admin.recoverFailedDeliveries({ endpointId: endpoint.id, since: timestampFromDate(new Date(Date.now() + 3_600_000)) }, internal));
  t.equal(future.code, Code.InvalidArgument, "recovery since a future time");
  t.equal(detailOf(future)?.param, "since");
  const noSince = await grpcError(admin.recoverFailedDeliveries({ endpointId: endpoint.id }, internal));
  t.equal(noSince.code, Code.InvalidArgument, "recovery without since");
  const unknownRecovery = await grpcError(admin.recoverFailedDeliveries({ endpointId: "we_doesnotexist", since: timestampFromDate(new Date(0)) }, internal));
  t.equal(unknownRecovery.code, Code.NotFound, "recovery of an unknown endpoint");

  const withKey = await grpcError(admin.rotateSigningSecret({ endpointId: endpoint.id }, { headers: { authorization: `Bearer ${s.creds.key}` } }));
  t.equal(withKey.code, Code.Unauthenticated, "an API key is refused");
  t.equal(detailOf(withKey)?.code, "invalid_api_key");
  t.notOk(withKey.rawMessage.includes(s.creds.key), "the key is not repeated");
  const none = await grpcError(admin.recoverFailedDeliveries({ endpointId: endpoint.id, since: timestampFromDate(new Date(0)) }));
  t.equal(none.code, Code.Unauthenticated, "no credential is refused");

  const badCli = await runCli("services/app/ops-cli.ts", cliEnv, "recover", "--endpoint", endpoint.id, "--since", "yesterday");
  t.equal(badCli.code, 2, "ops recover: a bad --since exits 2");
  t.match(badCli.stderr, /--since/);
  const noCred = await runCli("services/app/admin.ts", { RPC_URL: s.rpcUrl }, "endpoint", "rotate-secret", "--id", endpoint.id);
  t.equal(noCred.code, 2, "admin rotate-secret without INTERNAL_CREDENTIAL exits 2");
  t.match(noCred.stderr, /INTERNAL_CREDENTIAL/);
  const cliDisabled = await runCli("services/app/admin.ts", cliEnv, "endpoint", "rotate-secret", "--id", disabled.id);
  t.equal(cliDisabled.code, 2, "a disabled endpoint exits 2");
  t.match(cliDisabled.stderr, /FailedPrecondition: .*disabled/);
  t.equal(cliDisabled.stdout, "");
});

t.test("bulk recovery replays exactly the failed deliveries since the time (ops CLI)", async (t) => {
  const path = "/switch/recover";
  const endpoint = await s.createEndpoint(path);
  const early = await sendTest(endpoint.id);
  await waitForDelivery(s, early.id, (d) => d.status === "failed");
  const since = new Date();
  const failedA = await sendTest(endpoint.id);
  const failedB = await sendTest(endpoint.id);
  await waitForDelivery(s, failedA.id, (d) => d.status === "failed");
  await waitForDelivery(s, failedB.id, (d) => d.status === "failed");
  switched.set(path, 200);
  const succeeded = await sendTest(endpoint.id);
  await waitForDelivery(s, succeeded.id, (d) => d.status === "delivered");
  const originals = new Map<string, Buffer>();
  for (const d of [failedA, failedB]) originals.set(d.event_id, (await requestFor(path, d.event_id)).body);

  const cli = await runCli("services/app/ops-cli.ts", cliEnv, "recover", "--endpoint", endpoint.id, "--since", since.toISOString());
  t.equal(cli.code, 0, `ops recover exits 0 (${cli.stderr})`);
  const out = JSON.parse(cli.stdout);
  t.equal(out.recovered, 2, "the two failed since then, not the earlier one nor the delivered one");
  t.equal(out.delivery_ids.length, 2);
  t.equal(out.endpoint_id, endpoint.id);

  for (const id of out.delivery_ids as string[]) {
    const d = await waitForDelivery(s, id, (x) => x.status === "delivered");
    t.ok([failedA.id, failedB.id].includes(d.replay_of), "a replay of one of the failed deliveries");
    t.equal(d.cause, "replay", "the operator's recovery of failed deliveries replays them");
    // Two failed attempts (WEBHOOK_MAX_ATTEMPTS=2), then the replay's.
    const sent = s.receiver.requests.filter((r) => r.url === path && r.headers["x-service-event-id"] === d.event_id);
    t.equal(sent.length, 3, "the replay reached the receiver");
    t.ok(sent.every((r) => r.body.equals(originals.get(d.event_id)!)), "with the same event bytes");
  }
  const replayed = new Set((await Promise.all((out.delivery_ids as string[]).map((id) => waitForDelivery(s, id, () => true)))).map((d) => d.replay_of));
  t.same([...replayed].sort(), [failedA.id, failedB.id].sort(), "each failed delivery once");

  const again = await admin.recoverFailedDeliveries({ endpointId: endpoint.id, since: timestampFromDate(since) }, internal);
  t.equal(again.recovered, 0, "a second recovery finds nothing new: the failed ones already have their replay");
  const all = await admin.recoverFailedDeliveries({ endpointId: endpoint.id, since: timestampFromDate(new Date(0)) }, internal);
  t.equal(all.recovered, 1, "an earlier since takes the early failure too");
});

t.test("a disabled endpoint enabled with --recover-since receives exactly what it missed, once, however often it is run", async (t) => {
  const m = await merchantWithKey(s.app);
  const base = `/api/v1/merchants/${m.merchant}`;
  const path = "/ok/recover-missed";
  // It takes intent creations and cancellations only.
  const created = await call(s.base, "POST", `${base}/webhook-endpoints`, {
    key: m.key,
    body: { url: `https://hooks.example.test${path}`, enabled_events: ["payment.intent.created", "payment.cancelled"] },
  });
  t.equal(created.status, 200);
  const endpoint = { id: created.body.data.id as string, secret: created.body.data.signing_secret as string };
  const other = await s.createEndpoint("/ok/recover-other", m);
  const newIntent = async (ref: string) => {
    const res = await call(s.base, "POST", `${base}/payment-intents`, { key: m.key, idempotencyKey: `recover-${ref}-${m.merchant}`, body: { network: "ethereum", asset: "USDC", requested_amount: "1.00", merchant_reference: ref } });
    if (res.status !== 200) throw new Error(`create: ${res.status}`);
    return res.body.data.public_id as string;
  };
  const eventsOf = async (intent: string) =>
    s.app.db.em.fork().execute<{ id: string; type: string }[]>(`select id, type from webhook_events where payment_intent_id = ? order by created_at, id`, [intent]);
  const atEndpoint = () => s.receiver.requests.filter((r) => r.url === path).map((r) => String(r.headers["x-service-event-id"]));

  const before = await newIntent("before");
  const [beforeCreated] = await eventsOf(before);
  await until("the event before the disable delivered", async () => atEndpoint().includes(beforeCreated?.id ?? ""), 15_000);
  const since = new Date();
  t.equal((await call(s.base, "POST", `${base}/webhook-endpoints/${endpoint.id}/disable`, { key: m.key })).status, 200, "disabled by the merchant");

  // While it is disabled: two intents created, one cancelled, one paid (a type it does not take),
  // and a test event of another endpoint (not its own).
  const first = await newIntent("while-1");
  const second = await newIntent("while-2");
  t.equal((await call(s.base, "POST", `${base}/payment-intents/${first}/cancel`, { key: m.key })).status, 200);
  t.equal((await call(s.base, "POST", `/api/v1/sandbox/${base.slice("/api/v1/".length)}/payment-intents/${second}/simulate`, { key: m.key, body: { outcome: "confirmed" } })).status, 200);
  t.equal((await call(s.base, "POST", `${base}/webhook-endpoints/${other.id}/test`, { key: m.key })).status, 200);
  const missed = [...(await eventsOf(first)), ...(await eventsOf(second))]
    .filter((e) => e.type === "payment.intent.created" || e.type === "payment.cancelled");
  const missedIds = (await s.app.db.em.fork().execute<{ id: string }[]>(`select id from webhook_events where id in (?) order by created_at, id`, [missed.map((e) => e.id)])).map((e) => e.id);
  t.equal(missedIds.length, 3, "it missed three events it takes: two creations and a cancellation");
  const noneYet = await s.app.db.em.fork().execute<{ n: number }[]>(`select count(*)::int as n from webhook_deliveries where endpoint_id = ? and event_id in (?)`, [endpoint.id, missedIds]);
  t.equal(noneYet[0]?.n, 0, "and has no delivery of them");

  const cli = await runCli("services/app/admin.ts", cliEnv, "endpoint", "enable", "--id", endpoint.id, "--recover-since", since.toISOString());
  t.equal(cli.code, 0, `admin endpoint enable --recover-since exits 0 (${cli.stderr})`);
  const out = JSON.parse(cli.stdout || "{}");
  t.equal(out.status, "enabled");
  t.equal(out.recovered, 3, "three events recovered");
  t.equal(out.enqueued, 3, "all in the first page");
  t.equal(out.recovery_id, null, "so nothing is left for the scheduler");
  t.same([out.first_event_id, out.last_event_id], [missedIds[0], missedIds.at(-1)], "the first and last event recovered");
  const recoveredEvents = await s.app.db.em.fork().execute<{ id: string; event_id: string }[]>(
    `select id, event_id from webhook_deliveries where endpoint_id = ? and event_id in (?) order by created_at, id`,
    [endpoint.id, missedIds],
  );
  t.same(recoveredEvents.map((d) => d.event_id), missedIds, "one delivery for each missed event, in event order");

  for (const d of recoveredEvents) await waitForDelivery(s, d.id, (x) => x.status === "delivered", 15_000, m);
  const received = atEndpoint();
  for (const id of missedIds) t.equal(received.filter((e) => e === id).length, 1, `the receiver got ${id} once`);
  t.same(new Set(received), new Set([beforeCreated?.id, ...missedIds]), "and nothing else: not the payment it does not take, not another endpoint's test");
  const signed = s.receiver.requests.filter((r) => r.url === path && missedIds.includes(String(r.headers["x-service-event-id"])));
  t.ok(signed.every((r) => readmeVerify(endpoint.secret, r)), "signed with its secret");

  // Again, through the CLI and AdminService, from an earlier time too: nothing more.
  const again = await runCli("services/app/admin.ts", cliEnv, "endpoint", "enable", "--id", endpoint.id, "--recover-since", since.toISOString());
  t.equal(again.code, 0);
  t.equal(JSON.parse(again.stdout || "{}").recovered, 0, "a second run creates nothing");
  // From the epoch: beyond WEBHOOK_RECOVERY_MAX_DAYS, so forced.
  const concurrent = await Promise.all([0, 1].map(() => admin.enableWebhookEndpoint({ endpointId: endpoint.id, recoverSince: timestampFromDate(new Date(0)), force: true }, internal)));
  t.same(concurrent.map((r) => r.recovered), [0, 0], "nor do two at once from the epoch");
  const deliveries = await s.app.db.em.fork().execute<{ n: number }[]>(`select count(*)::int as n from webhook_deliveries where endpoint_id = ?`, [endpoint.id]);
  t.equal(deliveries[0]?.n, 4, "the endpoint has one delivery per event it takes, no more");

  const future = await grpcError(admin.enableWebhookEndpoint({ endpointId: endpoint.id, recoverSince: timestampFromDate(new Date(Date.now() + 3_600_000)) }, internal));
  t.equal(future.code, Code.InvalidArgument, "a future recover_since is refused");
  t.equal(detailOf(future)?.param, "recover_since");
  const badCli = await runCli("services/app/admin.ts", cliEnv, "endpoint", "enable", "--id", endpoint.id, "--recover-since", "yesterday");
  t.equal(badCli.code, 2, "a bad --recover-since exits 2");
  const unknown = await grpcError(admin.enableWebhookEndpoint({ endpointId: "we_doesnotexist", recoverSince: timestampFromDate(new Date(0)) }, internal));
  t.equal(unknown.code, Code.NotFound);
});

t.test("auto-disable: a new failure that ends a delivery after the endpoint failed for the whole period disables it, and it is announced; an idle endpoint with an old failure is not disabled", async (t) => {
  const m = await merchantWithKey(s.app);
  // The idle endpoint is another merchant's, so the announcement below does not reach it.
  const idleOwner = await merchantWithKey(s.app);
  const idle = await s.createEndpoint("/fail/auto-idle", idleOwner);
  const failing = await s.createEndpoint("/fail/auto", m);
  const other = await s.createEndpoint("/ok/auto-other", m);
  const recovered = await s.createEndpoint("/switch/auto-recovered", m);

  // Two schedulers, as two scheduler processes would run, from the start: the period is 2 s.
  const intents = new Intents(new IntentViews("https://checkout.example.test"));
  const logger = createLogger("silent", 2);
  const schedulers = [0, 1].map(() => startScheduler(s.app.db, logger, intents, { intervalMs: 100, autoDisableAfterSeconds: 2, attemptSpanSeconds: 60 }));
  t.teardown(() => Promise.all(schedulers.map((x) => x.stop())));

  // The idle endpoint fails once and then gets nothing more; the failing one fails too.
  const idleFailure = await sendTest(idle.id, idleOwner);
  await waitForDelivery(s, idleFailure.id, (d) => d.status === "failed", 15_000, idleOwner);
  const early = await sendTest(failing.id, m);
  await waitForDelivery(s, early.id, (d) => d.status === "failed", 15_000, m);
  const flaky = await sendTest(recovered.id, m);
  await waitForDelivery(s, flaky.id, (d) => d.status === "failed", 15_000, m);
  switched.set("/switch/auto-recovered", 200);
  const fine = await sendTest(recovered.id, m);
  await waitForDelivery(s, fine.id, (d) => d.status === "delivered", 15_000, m);
  // The period passes: both endpoints have failed, and had no success, for longer than it.
  await sleep(2_500);
  // A new failure that ends a delivery of the failing endpoint.
  const late = await sendTest(failing.id, m);
  await waitForDelivery(s, late.id, (d) => d.status === "failed", 15_000, m);

  const endpointOf = async (id: string) => (await call(s.base, "GET", `/api/v1/merchants/${m.merchant}/webhook-endpoints/${id}`, { key: m.key })).body.data;
  const disabled = await until("the failing endpoint disabled", async () => {
    const e = await endpointOf(failing.id);
    return e.status === "disabled" && e;
  }, 20_000);
  t.ok(disabled.disabled_at, "disabled_at set");
  const [row] = await s.app.db.em.fork().execute<{ last_error: string | null }[]>(`select last_error from webhook_endpoints where id = ?`, [failing.id]);
  t.equal(row?.last_error, "auto_disabled");

  const announced = await until("webhook_endpoint.disabled at the other endpoint", async () =>
    s.receiver.requests.find((r) => r.url === "/ok/auto-other" && JSON.parse(r.body.toString("utf8")).type === "webhook_endpoint.disabled"), 15_000);
  const event = JSON.parse(announced.body.toString("utf8"));
  t.equal(event.data.webhook_endpoint.id, failing.id);
  t.equal(event.data.webhook_endpoint.status, "disabled");
  t.equal(event.data.webhook_endpoint.last_error, "auto_disabled");
  t.ok(readmeVerify(other.secret, announced), "signed with the other endpoint's secret");
  const stored = await call(s.base, "GET", `/api/v1/merchants/${m.merchant}/webhook-events/${event.id}`, { key: m.key });
  t.equal(stored.body.data.type, "webhook_endpoint.disabled", "recorded like every event");

  const idleNow = (await call(s.base, "GET", `/api/v1/merchants/${idleOwner.merchant}/webhook-endpoints/${idle.id}`, { key: idleOwner.key })).body.data;
  t.equal(idleNow.status, "enabled", "the idle endpoint, whose only failure is older than the period, stays enabled: no new failure ended a delivery");
  t.equal((await endpointOf(other.id)).status, "enabled", "an endpoint that succeeds stays enabled");
  t.equal((await endpointOf(recovered.id)).status, "enabled", "an endpoint that succeeded after failing stays enabled");
  const events = await s.app.db.em.fork().execute<{ n: number }[]>(
    `select count(*)::int as n from webhook_events where merchant_id = ? and type = 'webhook_endpoint.disabled'`,
    [m.merchant],
  );
  t.equal(events[0]?.n, 1, "one announcement with two schedulers running");
  t.notOk(s.receiver.requests.some((r) => r.url === "/fail/auto" && r.headers["x-service-event-id"] === event.id), "the disabled endpoint is not told");

  // Enabled again by an operator (admin endpoint enable): its old failures count no more. Proved
  // with a sentinel: an endpoint that fails after the re-enable is disabled by a later pass, and
  // the re-enabled one is still enabled then.
  t.match(await enableEndpoint(s.app.db.em.fork(), failing.id), { id: failing.id, status: "enabled" });
  const sentinel = await s.createEndpoint("/fail/auto-sentinel", m);
  const lost = await sendTest(sentinel.id, m);
  await waitForDelivery(s, lost.id, (d) => d.status === "failed", 15_000, m);
  await sleep(2_500);
  const lostAgain = await sendTest(sentinel.id, m);
  await waitForDelivery(s, lostAgain.id, (d) => d.status === "failed", 15_000, m);
  await until("the sentinel endpoint disabled", async () => (await endpointOf(sentinel.id)).status === "disabled", 20_000);
  const back = await endpointOf(failing.id);
  t.equal(back.status, "enabled", "the re-enabled endpoint stays enabled");
  t.equal(back.disabled_at, null);
});
