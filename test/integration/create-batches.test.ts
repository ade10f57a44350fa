// Creates that arrive together are written in one statement (intents/create-batch.ts). What a
// merchant would notice if that went wrong: a create answered for another's intent, one
// refused by the database taking the others down with it, a client's retry of a create still
// in flight holding up everyone else's, a key sent twice in one burst making two intents, a
// webhook made for another create's event. That creates did share statements is read from
// PostgreSQL itself: rows one statement inserted carry its transaction id (xmin).
// create-writer.test.ts decides which writes share a statement; here it is whatever HTTP brings.
import pg from "pg";
import t from "tap";
import { newId } from "../../services/platform/ids.ts";
import { call, idemKey, merchantWithKey, sampleIntent, startTestApp, until, type Credentials } from "../helpers/harness.ts";

const s = await startTestApp(t, {}, ["rpc", "gateway"]);
const em = () => s.app.db.em.fork();
const create = (c: Credentials, key = idemKey(), body: object = sampleIntent) =>
  call(s.base, "POST", `/api/v1/merchants/${c.merchant}/payment-intents`, { key: c.key, idempotencyKey: key, body });
/** `n` creates sent at once, each with its own key (`keys`, in order). */
const burst = async (c: Credentials, n: number, body = (i: number): object => ({ ...sampleIntent, merchant_reference: `order-${i}` }), keyAt = (_: number) => idemKey()) => {
  const keys = Array.from({ length: n }, (_, i) => keyAt(i));
  const answers = await Promise.all(keys.map((key, i) => create(c, key, body(i))));
  return Object.assign(answers, { keys });
};
const transactionsOf = async (ids: readonly string[]) =>
  (await em().execute<{ n: number }[]>(`select count(distinct xmin::text)::int as n from payment_intents where id in (?)`, [ids]))[0]?.n ?? 0;

t.test("a burst of creates shares statements; each answer is its own intent, with its event and key", async (t) => {
  const c = await merchantWithKey(s.app);
  // Two endpoints: each create's event gets a delivery to each, and to no other create's event.
  for (const n of [1, 2]) {
    await em().execute(
      `insert into webhook_endpoints (id, merchant_id, environment, url, status, secret_ciphertext, created_at) values (?, ?, 'test', ?, 'enabled', ?, now())`,
      [newId("we"), c.merchant, `https://hooks.example.test/batch/${n}`, Buffer.from("x")],
    );
  }
  // The first create of a network learns where the merchant's addresses come from (the transactional path).
  t.equal((await create(c)).status, 200, "a first create");
  let answers = Object.assign([] as Awaited<ReturnType<typeof create>>[], { keys: [] as string[] });
  let statements = 0;
  // Requests that reach the server in the same turn of its event loop share a statement: a
  // burst of 16 on 16 connections does nearly always; a few tries make it certain.
  await until("a burst of 16 creates written in fewer than 16 statements", async () => {
    answers = await burst(c, 16);
    statements = await transactionsOf(answers.flatMap((a) => a.body.data?.public_id ?? []));
    return statements < 16;
  }, 30_000);
  t.ok(statements < 16, `16 creates in ${statements} transactions`);
  // And an operator sees it: statements that wrote more than one create are counted.
  const metrics = await (await fetch(`http://127.0.0.1:${s.app.ports.ops}/metrics`)).text();
  const shared = [...metrics.matchAll(/^payments_intent_create_statements_total\{creates="(\d+)"\} (\d+)$/gm)].filter((m) => Number(m[1]) > 1).reduce((n, m) => n + Number(m[2]), 0);
  t.ok(shared > 0, `payments_intent_create_statements_total counts ${shared} statements of several creates`);
  t.same(answers.map((a) => a.status), Array(16).fill(200), "each created");
  t.same(
    answers.map((a) => a.body.data.merchant_reference),
    Array.from({ length: 16 }, (_, i) => `order-${i}`),
    "each answer is the intent its own request asked for",
  );
  const ids = answers.map((a) => a.body.data.public_id as string);
  t.equal(new Set(ids).size, 16, "16 intents");
  t.equal(new Set(answers.map((a) => a.body.data.deposit_address)).size, 16, "each at its own address");
  const events = await em().execute<{ payment_intent_id: string; n: number }[]>(
    `select payment_intent_id, count(*)::int as n from webhook_events where payment_intent_id in (?) group by 1`,
    [ids],
  );
  t.same(events.map((e) => e.n).sort(), Array(16).fill(1), "one payment.intent.created each");
  const deliveries = await em().execute<{ intent: string; endpoints: number }[]>(
    `select e.payment_intent_id as intent, count(distinct d.endpoint_id)::int as endpoints
       from webhook_deliveries d join webhook_events e on e.id = d.event_id
      where e.payment_intent_id in (?) group by 1`,
    [ids],
  );
  t.same(deliveries.map((d) => d.endpoints), Array(16).fill(2), "each intent's event delivered to both endpoints");
  const [stray] = await em().execute<{ n: number }[]>(
    `select count(*)::int as n from webhook_deliveries d join webhook_events e on e.id = d.event_id where e.payment_intent_id in (?)`,
    [ids],
  );
  t.equal(stray?.n, 32, "32 deliveries in all: none made twice or for another create's event");
  const stored = await em().execute<{ address: string; id: string }[]>(`select deposit_address as address, id from payment_intents where id in (?)`, [ids]);
  const byId = new Map(stored.map((r) => [r.id, r.address]));
  t.ok(answers.every((a) => byId.get(a.body.data.public_id) === a.body.data.deposit_address), "each stored address is the one its answer gave");
  // Each key replays its own intent.
  const again = await Promise.all(answers.keys.map((key, i) => create(c, key, { ...sampleIntent, merchant_reference: `order-${i}` })));
  t.same(
    again.map((a) => [a.headers.get("idempotent-replayed"), a.body.data.public_id]),
    ids.map((id) => ["true", id]),
    "each key replays its own intent",
  );
});

t.test("one key twice in a burst: one intent, the other request its replay", async (t) => {
  const c = await merchantWithKey(s.app);
  t.equal((await create(c)).status, 200, "a first create");
  const key = idemKey();
  const body = { ...sampleIntent, merchant_reference: "twice" };
  const answers = await Promise.all([create(c, key, body), ...Array.from({ length: 6 }, (_, i) => create(c, idemKey(), { ...sampleIntent, merchant_reference: `other-${i}` })), create(c, key, body)]);
  t.same(answers.map((a) => a.status), Array(8).fill(200), "every request answered 200");
  const [first, second] = [answers[0], answers[7]];
  t.equal(first?.body.data.public_id, second?.body.data.public_id, "the key's two requests answer the same intent");
  const [n] = await em().execute<{ n: number }[]>(`select count(*)::int as n from payment_intents where merchant_id = ? and merchant_reference = 'twice'`, [c.merchant]);
  t.equal(n?.n, 1, "one intent for the key");
});

t.test("a create the database refuses fails alone; the others of its burst are written", async (t) => {
  const c = await merchantWithKey(s.app);
  t.equal((await create(c)).status, 200, "a first create");
  // A rule of the database's that this one create breaks (as a constraint would).
  await em().execute(`create function refuse_marked() returns trigger language plpgsql as $$
    begin if new.merchant_reference = 'refuse-me' then raise exception 'refused by a test trigger'; end if; return new; end $$`);
  await em().execute(`create trigger refuse_marked before insert on payment_intents for each row execute function refuse_marked()`);
  t.teardown(async () => {
    await em().execute(`drop trigger if exists refuse_marked on payment_intents`);
    await em().execute(`drop function if exists refuse_marked()`);
  });
  // Whether it shared a statement (create-writer.test.ts shows what happens then) or not, a
  // merchant sees the same: that create fails, the others do not.
  const answers = await burst(c, 8, (i) => ({ ...sampleIntent, merchant_reference: i === 3 ? "refuse-me" : `kept-${i}` }));
  t.same(answers.map((a) => a.status), [200, 200, 200, 500, 200, 200, 200, 200], "the refused create fails; the seven others are created");
  t.equal(answers[3]?.body.error.code, "internal_error", "in the error envelope");
  t.notMatch(JSON.stringify(answers[3]?.body), /refused by a test trigger/, "the database's words stay in the log");
  const keyOf = (i: number) => answers.keys[i] as string;
  const [left] = await em().execute<{ intents: number; keys: number }[]>(
    `select (select count(*)::int from payment_intents where merchant_id = ? and merchant_reference = 'refuse-me') as intents,
            (select count(*)::int from idempotency_records where merchant_id = ? and key = ?) as keys`,
    [c.merchant, c.merchant, keyOf(3)],
  );
  t.same(left, { intents: 0, keys: 0 }, "the refused create left no intent and no key");
});

t.test("a key another request holds: the creates beside it are not held up", async (t) => {
  const c = await merchantWithKey(s.app);
  t.equal((await create(c)).status, 200, "a first create");
  const held = idemKey();
  // Another request's transaction holds the key (its create not committed yet).
  const client = new pg.Client({ connectionString: s.databaseUrl });
  await client.connect();
  t.teardown(() => client.end());
  await client.query("begin");
  await client.query(`insert into idempotency_records (merchant_id, environment, key, rpc, fingerprint, response, created_at) values ($1, 'test', $2, 'other', 'x', '\\x00', now())`, [c.merchant, held]);
  // Sent with seven others: they share a statement, which waits for the key only briefly, then
  // is written again one create at a time; the others are not held for the key's full wait (10 s).
  const keyWaitMs = 10_000;
  const sent = Array.from({ length: 8 }, (_, i) => (i === 4 ? create(c, held, { ...sampleIntent, merchant_reference: "held" }) : create(c, idemKey(), { ...sampleIntent, merchant_reference: `beside-${i}` })));
  const waiting = sent[4] as Promise<Awaited<ReturnType<typeof create>>>;
  const others = await Promise.race([
    Promise.all(sent.filter((_, i) => i !== 4)),
    new Promise<never>((_, reject) => setTimeout(() => reject(new Error("the creates beside a held key waited as long as the key's own wait")), keyWaitMs).unref()),
  ]);
  t.same(others.map((a) => a.status), Array(7).fill(200), "the creates sent with it are answered while the key is still held");
  await client.query("rollback");
  const answer = await waiting;
  t.equal(answer.status, 200, "the held key's create goes on once the other request gives the key up");
  t.equal(answer.body.data.merchant_reference, "held");
});
