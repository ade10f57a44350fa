// The per-merchant limit of enabled webhook endpoints under concurrency, and events
// of a merchant that has more enabled endpoints than the limit (rows written
// directly, or a limit lowered since): each of them still gets its delivery.
import { createHmac } from "node:crypto";
import t from "tap";
import { deriveKey } from "../../services/platform/secret-key.ts";
import { newId } from "../../services/platform/ids.ts";
import { maxEnabledEndpoints } from "../../services/vocabulary/limits.ts";
import { generateSigningSecret, SecretBox } from "../../services/platform/secrets.ts";
import { call, idemKey, merchantWithKey, sampleIntent, until, type ApiResponse, type Credentials } from "../helpers/harness.ts";
import { hookHost, webhookSetup } from "../helpers/webhooks.ts";

const s = await webhookSetup(t);
const { base } = s;
const endpoints = (c: { merchant: string }) => `/api/v1/merchants/${c.merchant}/webhook-endpoints`;

async function enabledCount(merchant: string, environment: string): Promise<number> {
  const [row] = await s.app.db.em
    .fork()
    .execute<{ n: number }[]>(`select count(*)::int as n from webhook_endpoints where merchant_id = ? and environment = ? and status = 'enabled'`, [merchant, environment]);
  return row?.n ?? 0;
}

function createMany(c: Credentials, n: number, tag: string): Promise<ApiResponse>[] {
  return Array.from({ length: n }, (_, i) =>
    call(base, "POST", endpoints(c), { key: c.key, idempotencyKey: idemKey(), body: { url: `https://${hookHost}/${tag}/${i}` } }),
  );
}

t.test(`concurrent creates never pass the limit of ${maxEnabledEndpoints} enabled endpoints`, async (t) => {
  const c = await merchantWithKey(s.app);
  const live = await merchantWithKey(s.app, "live", undefined, c.merchant);
  // Both environments of one merchant at once: each has its own limit.
  const [testAnswers, liveAnswers] = await Promise.all([Promise.all(createMany(c, 30, "t")), Promise.all(createMany(live, 30, "l"))]);
  for (const [environment, answers] of [["test", testAnswers], ["live", liveAnswers]] as const) {
    const ok = answers.filter((r) => r.status === 200);
    const refused = answers.filter((r) => r.status !== 200);
    t.equal(ok.length, maxEnabledEndpoints, `${environment}: exactly the limit succeed`);
    t.equal(refused.length, 30 - maxEnabledEndpoints, `${environment}: the rest are refused`);
    for (const r of refused) {
      t.equal(r.status, 409, `${environment}: 409`);
      t.equal(r.body.error?.code, "invalid_state");
      t.match(r.body.error?.message, new RegExp(`At most ${maxEnabledEndpoints}`));
      t.equal(r.body.error?.request_id, r.headers.get("x-request-id"));
    }
    t.equal(new Set(ok.map((r) => r.body.data.id)).size, maxEnabledEndpoints, `${environment}: distinct endpoints`);
    t.ok(ok.every((r) => r.body.data.environment === environment));
    t.equal(await enabledCount(c.merchant, environment), maxEnabledEndpoints, `${environment}: as many rows as successes`);
  }

  // Once full, disabling several at once and creating again in parallel lands on the limit again.
  const toDisable = testAnswers.filter((r) => r.status === 200).slice(0, 3);
  await Promise.all(toDisable.map((r) => call(base, "POST", `${endpoints(c)}/${r.body.data.id}/disable`, { key: c.key })));
  const again = await Promise.all(createMany(c, 10, "again"));
  t.equal(again.filter((r) => r.status === 200).length, 3, "as many as were freed");
  t.equal(await enabledCount(c.merchant, "test"), maxEnabledEndpoints);
});

t.test("an event reaches every enabled endpoint, even beyond the limit", async (t) => {
  const c = await merchantWithKey(s.app);
  const secrets = new Map<string, string>();
  for (let i = 0; i < maxEnabledEndpoints; i++) {
    const ep = await s.createEndpoint(`/beyond/api-${i}`, c);
    secrets.set(ep.url, ep.secret);
  }
  // Rows the API would refuse: written directly, as an operator or an older limit would have.
  const box = new SecretBox(deriveKey(s.masterKey, "webhook-signing-secrets"));
  const extra = 5;
  for (let i = 0; i < extra; i++) {
    const id = newId("we");
    const secret = generateSigningSecret();
    const url = `https://${hookHost}/beyond/sql-${i}`;
    await s.app.db.em.fork().execute(
      `insert into webhook_endpoints (id, merchant_id, environment, url, status, secret_ciphertext, created_at) values (?, ?, 'test', ?, 'enabled', ?, now())`,
      [id, c.merchant, url, box.seal(id, secret)],
    );
    secrets.set(url, secret);
  }
  const total = maxEnabledEndpoints + extra;
  t.equal(await enabledCount(c.merchant, "test"), total);

  const created = await call(base, "POST", `/api/v1/merchants/${c.merchant}/payment-intents`, { key: c.key, idempotencyKey: idemKey(), body: sampleIntent });
  t.equal(created.status, 200, "recording the event does not fail the request");
  const id = created.body.data.public_id;
  const [event] = await s.app.db.em.fork().execute<{ id: string }[]>(`select id from webhook_events where payment_intent_id = ?`, [id]);
  const deliveries = await s.app.db.em
    .fork()
    .execute<{ endpoint_id: string }[]>(`select endpoint_id from webhook_deliveries where event_id = ?`, [event!.id]);
  t.equal(deliveries.length, total, "one delivery per enabled endpoint");
  t.equal(new Set(deliveries.map((d) => d.endpoint_id)).size, total, "to distinct endpoints");

  const received = await until(
    `${total} signed webhooks of ${id}`,
    async () => {
      const mine = s.receiver.requests.filter((r) => r.url.startsWith("/beyond/") && JSON.parse(r.body.toString()).data?.payment_intent?.public_id === id);
      return mine.length >= total ? mine : undefined;
    },
    20_000,
    () => `${s.receiver.requests.filter((r) => r.url.startsWith("/beyond/")).length} so far`,
  );
  t.same([...new Set(received.map((r) => r.url))].sort(), [...secrets.keys()].map((u) => new URL(u).pathname).sort(), "every endpoint, the direct rows too");
  for (const r of received) {
    const secret = secrets.get(`https://${hookHost}${r.url}`) ?? "";
    const expected = createHmac("sha256", secret).update(`${r.headers["x-service-timestamp"]}.`).update(r.body).digest("hex");
    t.equal(r.headers["x-service-signature"], expected, `${r.url}: signed with its own secret`);
  }

  const over = await call(base, "POST", endpoints(c), { key: c.key, body: { url: `https://${hookHost}/beyond/over` } });
  t.equal(over.status, 409, "the API still refuses another while over the limit");
  t.equal(over.body.error.code, "invalid_state");
});

t.test("a test event to one endpoint of a merchant over the limit goes to that endpoint only", async (t) => {
  const c = await merchantWithKey(s.app);
  const ids: string[] = [];
  for (let i = 0; i < maxEnabledEndpoints + 2; i++) {
    const id = newId("we");
    await s.app.db.em.fork().execute(
      `insert into webhook_endpoints (id, merchant_id, environment, url, status, secret_ciphertext, created_at) values (?, ?, 'test', ?, 'enabled', ?, now())`,
      [id, c.merchant, `https://${hookHost}/only/${i}`, new SecretBox(deriveKey(s.masterKey, "webhook-signing-secrets")).seal(id, generateSigningSecret())],
    );
    ids.push(id);
  }
  const last = ids.at(-1)!;
  const res = await call(base, "POST", `${endpoints(c)}/${last}/test`, { key: c.key });
  t.equal(res.status, 200, JSON.stringify(res.body));
  t.equal(res.body.data.endpoint_id, last);
  const rows = await s.app.db.em.fork().execute<{ endpoint_id: string }[]>(`select endpoint_id from webhook_deliveries where event_id = ?`, [res.body.data.event_id]);
  t.same(rows.map((r) => r.endpoint_id), [last]);
});
