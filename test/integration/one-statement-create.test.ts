// A create writes its Idempotency-Key, intent, event and deliveries in one statement once the
// process knows where the merchant's addresses come from (AddressReserve). What a merchant
// would notice if that went wrong: a replay that differs, an index skipped in its wallet, an
// address from the built-in Test key after it set its own account key or imported a pool,
// an endpoint without its webhook. Each is checked here, after a first create per network.
import { randomBytes } from "node:crypto";
import { HDKey } from "@scure/bip32";
import t from "tap";
import { importAddresses, setAccountKey } from "../../services/addresses/admin.ts";
import { deriveAddress } from "../../services/addresses/keys.ts";
import { newId } from "../../services/platform/ids.ts";
import { maxEnabledEndpoints } from "../../services/vocabulary/limits.ts";
import { call, idemKey, merchantWithKey, sampleIntent, startTestApp, type Credentials } from "../helpers/harness.ts";

const s = await startTestApp(t, {}, ["rpc", "gateway"]);
const em = () => s.app.db.em.fork();
const create = (c: Credentials, key = idemKey(), body: object = sampleIntent) =>
  call(s.base, "POST", `/api/v1/merchants/${c.merchant}/payment-intents`, { key: c.key, idempotencyKey: key, body });
const indexOf = async (id: string) =>
  (await em().execute<{ address_index: number | null; deposit_address: string }[]>(`select address_index, deposit_address from payment_intents where id = ?`, [id]))[0];

t.test("replays, conflicts and the rows of creates after the first", async (t) => {
  const c = await merchantWithKey(s.app);
  t.equal((await create(c)).status, 200, "a first create");
  for (let i = 0; i < 5; i++) {
    const key = idemKey();
    const body = { ...sampleIntent, merchant_reference: `order-${i}`, metadata: { i: String(i) } };
    const first = await create(c, key, body);
    t.equal(first.status, 200, `create ${i}`);
    t.equal(first.headers.get("idempotent-replayed"), null, "not marked as a replay");
    const again = await create(c, key, body);
    t.equal(again.status, 200, "the same request again");
    t.equal(again.headers.get("idempotent-replayed"), "true", "is a replay");
    t.same(again.body, first.body, "with the same body");
    const other = await create(c, key, { ...body, requested_amount: "99" });
    t.equal(other.status, 409, "another request under the key");
    t.equal(other.body.error.code, "idempotency_conflict");
    const [events] = await em().execute<{ n: number }[]>(`select count(*)::int as n from webhook_events where payment_intent_id = ?`, [first.body.data.public_id]);
    t.equal(events?.n, 1, "one payment.intent.created event");
    const row = await indexOf(first.body.data.public_id);
    t.equal(row?.deposit_address, first.body.data.deposit_address, "the stored address is the one answered");
  }
  const [count] = await em().execute<{ n: number }[]>(`select count(*)::int as n from payment_intents where merchant_id = ?`, [c.merchant]);
  t.equal(count?.n, 6, "six intents, none from the replays or conflicts");
});

t.test("a merchant's account key: contiguous indices, replays and refusals burn none", async (t) => {
  const c = await merchantWithKey(s.app);
  t.equal((await create(c)).status, 200, "a first create, from the built-in Test key");
  const xpub = HDKey.fromMasterSeed(randomBytes(32)).derive("m/44'/60'/0'").publicExtendedKey;
  await setAccountKey(em(), c.merchant, "test", "ethereum", xpub);
  const ids: string[] = [];
  for (let i = 0; i < 20; i++) {
    const key = idemKey();
    const res = await create(c, key);
    t.equal(res.status, 200);
    ids.push(res.body.data.public_id);
    if (i % 3 === 0) t.equal((await create(c, key)).headers.get("idempotent-replayed"), "true", "a replay");
    if (i % 4 === 0) t.equal((await create(c, key, { ...sampleIntent, requested_amount: "1" })).status, 409, "a conflict");
    if (i % 5 === 0) t.equal((await create(c, idemKey(), { ...sampleIntent, requested_amount: "-1" })).status, 400, "an invalid request");
  }
  const rows = await Promise.all(ids.map(indexOf));
  t.same(
    rows.map((r) => r?.address_index),
    Array.from({ length: 20 }, (_, i) => i),
    "the merchant's key gives indices 0, 1, 2 … with no gap",
  );
  t.same(
    rows.map((r) => r?.deposit_address),
    rows.map((_, i) => deriveAddress("ethereum", "test", xpub, i)),
    "each address is the key's at that index",
  );

  // A new key set meanwhile: the next address is the new key's first.
  const next = HDKey.fromMasterSeed(randomBytes(32)).derive("m/44'/60'/0'").publicExtendedKey;
  await setAccountKey(em(), c.merchant, "test", "ethereum", next);
  const after = await create(c);
  t.equal(after.body.data.deposit_address, deriveAddress("ethereum", "test", next, 0), "a key set since is used at once");
});

t.test("an account key set or a pool imported after built-in addresses is used at once", async (t) => {
  const keyed = await merchantWithKey(s.app);
  const pooled = await merchantWithKey(s.app);
  for (const c of [keyed, pooled]) for (let i = 0; i < 3; i++) t.equal((await create(c)).status, 200, "built-in Test addresses");
  const xpub = HDKey.fromMasterSeed(randomBytes(32)).derive("m/44'/60'/0'").publicExtendedKey;
  await setAccountKey(em(), keyed.merchant, "test", "ethereum", xpub);
  const fromKey = await create(keyed);
  t.equal(fromKey.body.data.deposit_address, deriveAddress("ethereum", "test", xpub, 0), "the account key's first address");

  const pool = Array.from({ length: 2 }, (_, i) => deriveAddress("ethereum", "test", HDKey.fromMasterSeed(randomBytes(32)).derive("m/44'/60'/0'").publicExtendedKey, i));
  await importAddresses(em(), pooled.merchant, "test", "ethereum", pool.join("\n"));
  const fromPool = [await create(pooled), await create(pooled)].map((r) => r.body.data.deposit_address);
  t.same(fromPool.sort(), [...pool].sort(), "then the imported addresses");
  const third = await create(pooled);
  t.equal(third.status, 200, "with the pool used up, Test mode falls back to the built-in key");
  t.notOk(pool.includes(third.body.data.deposit_address), "a built-in address");
});

t.test("more enabled endpoints than the API allows still get the event, through the transactional path", async (t) => {
  const c = await merchantWithKey(s.app);
  t.equal((await create(c)).status, 200, "a first create");
  const total = maxEnabledEndpoints + 3;
  for (let i = 0; i < total; i++) {
    const id = newId("we");
    await em().execute(
      `insert into webhook_endpoints (id, merchant_id, environment, url, status, secret_ciphertext, created_at) values (?, ?, 'test', ?, 'enabled', ?, now())`,
      [id, c.merchant, `https://hooks.example.test/many/${i}`, Buffer.from("x")],
    );
  }
  const res = await create(c);
  t.equal(res.status, 200);
  const rows = await em().execute<{ n: number }[]>(
    `select count(distinct d.endpoint_id)::int as n from webhook_deliveries d join webhook_events e on e.id = d.event_id where e.payment_intent_id = ?`,
    [res.body.data.public_id],
  );
  t.equal(rows[0]?.n, total, "one delivery per enabled endpoint");
});
