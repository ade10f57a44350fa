// IDEMPOTENCY_RETENTION (issue 50): a key older than the retention is absent on lookup, whether
// or not the retention job has removed its row (this app runs no scheduler, so nothing removes
// it): the same key with another body is a new request, not 409. A key whose request is still
// running is never removed by the job. Within the retention the key
// still replays or conflicts. Both write paths are checked: the one-statement create (a key this
// process has not answered) and the transactional one (a key it has). Rows are aged in the
// database, as time would age them.
import { create as createMessage } from "@bufbuild/protobuf";
import { createContextValues } from "@connectrpc/connect";
import t from "tap";
import { IntentService } from "../../gen/payments/v1/payment_intents_pb.ts";
import { claimFor, runIdempotent } from "../../services/idempotency/idempotent.ts";
import { removePastRetention } from "../../services/retention/job.ts";
import { call, idemKey, merchantWithKey, sampleIntent, startTestApp, until } from "../helpers/harness.ts";

const s = await startTestApp(t, { IDEMPOTENCY_RETENTION: "60s" }, ["rpc", "gateway"]);
const em = () => s.app.db.em.fork();
const c = await merchantWithKey(s.app);
const create = (key: string, body: object) => call(s.base, "POST", `/api/v1/merchants/${c.merchant}/payment-intents`, { key: c.key, idempotencyKey: key, body });
const age = (key: string, seconds: number) =>
  em().execute(`update idempotency_records set created_at = created_at - make_interval(secs => ?) where merchant_id = ? and key = ?`, [seconds, c.merchant, key]);
const rows = async (key: string) => (await em().execute<{ n: number }[]>(`select count(*)::int as n from idempotency_records where merchant_id = ? and key = ?`, [c.merchant, key]))[0]?.n;

const first = { ...sampleIntent, merchant_reference: "first" };
const second = { ...sampleIntent, requested_amount: "7", merchant_reference: "second" };

t.test("within retention the key conflicts; past it, the same key with another body is created (transactional path)", async (t) => {
  const key = idemKey();
  const a = await create(key, first);
  t.equal(a.status, 200, JSON.stringify(a.body));
  const conflict = await create(key, second);
  t.equal(conflict.status, 409, "another body within the retention");
  t.equal(conflict.body.error.code, "idempotency_conflict");
  await age(key, 50);
  t.equal((await create(key, second)).status, 409, "still within the retention at 50 s");

  await age(key, 11);
  const b = await create(key, second);
  t.equal(b.status, 200, `past the retention: created, ${JSON.stringify(b.body)}`);
  t.equal(b.headers.get("idempotent-replayed"), null, "a new request, not a replay");
  t.not(b.body.data.public_id, a.body.data.public_id, "a new intent");
  t.equal(b.body.data.merchant_reference, "second");
  t.equal(await rows(key), 1, "the key's row was taken over, not doubled");

  const again = await create(key, second);
  t.equal(again.headers.get("idempotent-replayed"), "true", "the new request is what the key now replays");
  t.equal(again.body.data.public_id, b.body.data.public_id);
  t.equal((await create(key, first)).status, 409, "and the first body is now the conflict");
});

t.test("a key this process never answered, past retention, is created in the one-statement path", async (t) => {
  const key = idemKey();
  // Another process answered it long ago (its row only).
  await em().execute(
    `insert into idempotency_records (merchant_id, environment, key, rpc, fingerprint, response, created_at, expires_at)
     values (?, 'test', ?, 'payments.v1.IntentService/CreatePaymentIntent', ?, '\\x00', now() - interval '2 minutes', now() - interval '1 minute')`,
    [c.merchant, key, "0".repeat(64)],
  );
  const b = await create(key, second);
  t.equal(b.status, 200, JSON.stringify(b.body));
  t.equal(b.headers.get("idempotent-replayed"), null, "a new request");
  const [row] = await em().execute<{ fresh: boolean }[]>(`select created_at > now() - interval '30 seconds' as fresh from idempotency_records where merchant_id = ? and key = ?`, [c.merchant, key]);
  t.equal(row?.fresh, true, "the key's row is the new request's");
  const again = await create(key, second);
  t.equal(again.body.data.public_id, b.body.data.public_id, "replayed from then on");
});

t.test("the same request after retention is also new: a reused key never replays what was forgotten", async (t) => {
  const key = idemKey();
  const a = await create(key, first);
  await age(key, 61);
  const b = await create(key, first);
  t.equal(b.status, 200);
  t.equal(b.headers.get("idempotent-replayed"), null);
  t.not(b.body.data.public_id, a.body.data.public_id, "Stripe: a key reused after it was removed is a new request");
});

t.test("a key whose request is in flight is never removed: the job waits for it and then finds the key new", async (t) => {
  const method = IntentService.method.cancelPaymentIntent;
  const owner = { merchantId: c.merchant, environment: "test" as const };
  const key = idemKey();
  const req = { method, message: createMessage(method.input, { merchant: c.merchant, publicId: "pi_inflight" }), contextValues: createContextValues(), header: new Headers() };
  // The key was used long ago (past retention); a request now takes it over and is still running.
  await em().execute(
    `insert into idempotency_records (merchant_id, environment, key, rpc, fingerprint, response, created_at, expires_at)
     values (?, 'test', ?, 'old', 'old', '\\x00', now() - interval '2 minutes', now())`,
    [c.merchant, key],
  );
  let release!: () => void;
  const held = new Promise<void>((r) => (release = r));
  let running = false;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  const request = runIdempotent(em(), owner, key, req as any, async () => {
    running = true;
    await held;
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    return { message: createMessage(method.output, {}) } as any;
  }, claimFor(owner, key, req as never, 60));
  await until("the request is running", async () => running, 10_000);
  const removal = removePastRetention(em(), s.config.retention, async () => undefined);
  await until(
    "the job waits on the running request's key",
    async () => (await em().execute<{ n: number }[]>(`select count(*)::int as n from pg_stat_activity where wait_event_type = 'Lock' and query like '%delete from idempotency_records%'`))[0]?.n === 1,
    10_000,
  );
  release();
  await request;
  const removed = await removal;
  t.equal(removed.idempotency_records, 0, "the job removed nothing of it");
  const [row] = await em().execute<{ rpc: string; fresh: boolean }[]>(`select rpc, created_at > now() - interval '30 seconds' as fresh from idempotency_records where merchant_id = ? and key = ?`, [c.merchant, key]);
  t.same(row, { rpc: "payments.v1.IntentService/CancelPaymentIntent", fresh: true }, "the key is the running request's, kept");
});
