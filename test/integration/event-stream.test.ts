// The event stream (WebhookService/StreamWebhookEvents, GET …/webhook-events/stream), read as
// Server-Sent Events as `listen` reads it: an event whose transaction commits after newer ones
// were sent still comes (nothing skipped), each once; another merchant's or environment's never;
// `types` filters; a resume after an event sends what came after it. Real service and PostgreSQL.
import { createParser } from "eventsource-parser";
import t from "tap";
import { recordEvent } from "../../services/events/record.ts";
import { call, idemKey, merchantWithKey, sampleIntent, startTestApp, until } from "../helpers/harness.ts";

const s = await startTestApp(t, {}, ["rpc", "gateway"]);
const a = await merchantWithKey(s.app);
const other = await merchantWithKey(s.app);
const live = await merchantWithKey(s.app, "live", ["webhooks:read", "webhooks:listen", "payment_intents:write"], a.merchant);

interface Streamed {
  id: string;
  type: string;
  payload: string;
}

/** Opens the stream and collects its events until the test ends. */
async function open(t: { teardown(fn: () => void): void }, key: string, merchant: string, query = ""): Promise<Streamed[]> {
  const abort = new AbortController();
  t.teardown(() => abort.abort());
  const res = await fetch(`${s.base}/api/v1/merchants/${merchant}/webhook-events/stream${query}`, { headers: { authorization: `Bearer ${key}` }, signal: abort.signal });
  if (res.status !== 200) throw new Error(`stream: ${res.status} ${await res.text()}`);
  const events: Streamed[] = [];
  const parser = createParser({ onEvent: (m) => { const e = JSON.parse(m.data).event; if (e) events.push(e); } });
  void (async () => {
    const text = new TextDecoder();
    try {
      for await (const chunk of res.body!) parser.feed(text.decode(chunk, { stream: true }));
    } catch {
      /* aborted at the end of the test */
    }
  })();
  return events;
}

const createIntent = async (key = a.key, merchant = a.merchant) => {
  const res = await call(s.base, "POST", `/api/v1/merchants/${merchant}/payment-intents`, { key, idempotencyKey: idemKey(), body: sampleIntent });
  if (res.status !== 200) throw new Error(JSON.stringify(res.body));
  return res.body.data.public_id as string;
};
const has = (events: Streamed[], intent: string, type = "payment.intent.created") => events.some((e) => e.type === type && e.payload.includes(intent));

t.test("an event committed after newer ones were sent still comes, once; other merchants' and Live's never", async (t) => {
  const events = await open(t, a.key, a.merchant);
  const first = await createIntent();
  await until("the first event", async () => has(events, first), 10_000);
  // An event stamped 5 s ago (its created_at taken before its transaction), committed only now.
  const late = await s.app.db.em.fork().transactional((em) =>
    recordEvent(em, { merchantId: a.merchant, environment: "test", type: "webhook.test", data: { test: { late: true } }, createdAt: new Date(Date.now() - 5_000) }),
  );
  await createIntent(other.key, other.merchant);
  await createIntent(live.key, a.merchant);
  const sentinel = await createIntent();
  await until("the late event, and a sentinel after it", async () => events.some((e) => e.id === late.id) && has(events, sentinel), 10_000);
  const ids = events.map((e) => e.id);
  t.equal(new Set(ids).size, ids.length, "each once");
  t.ok(ids.indexOf(late.id) > ids.indexOf(events.find((e) => e.payload.includes(first))!.id), "after the newer one it was sent behind");
  t.equal(events.length, 3, "the first, the late one, the sentinel: nothing of the other merchant or of Live");
  t.equal(events.find((e) => e.id === late.id)?.payload, late.payload, "the stored envelope, byte for byte");
});

t.test("types filters; a resume after an event sends what came after it", async (t) => {
  const filtered = await open(t, a.key, a.merchant, "?types=payment.cancelled");
  const all = await open(t, a.key, a.merchant);
  const pi = await createIntent();
  await call(s.base, "POST", `/api/v1/merchants/${a.merchant}/payment-intents/${pi}/cancel`, { key: a.key, idempotencyKey: idemKey() });
  await until("both streams have the cancellation", async () => has(all, pi, "payment.cancelled") && has(filtered, pi, "payment.cancelled"), 10_000);
  t.same(filtered.map((e) => e.type), ["payment.cancelled"], "only the type asked for");

  const created = all.find((e) => e.type === "payment.intent.created" && e.payload.includes(pi))!;
  const resumed = await open(t, a.key, a.merchant, `?after=${created.id}`);
  await until("the resumed stream has the cancellation", async () => has(resumed, pi, "payment.cancelled"), 10_000);
  t.notOk(resumed.some((e) => e.id === created.id), "not the event resumed after");
});

t.test("Live streams with webhooks:listen; the stream's own route refuses what it should", async (t) => {
  const events = await open(t, live.key, a.merchant);
  const pi = await createIntent(live.key, a.merchant);
  await until("the Live event", async () => has(events, pi), 10_000);
  const head = await fetch(`${s.base}/api/v1/merchants/${a.merchant}/webhook-events/stream`, { method: "HEAD", headers: { authorization: `Bearer ${a.key}` } });
  t.equal(head.status, 405, "HEAD of a stream");
  const other_ = await fetch(`${s.base}/api/v1/merchants/${other.merchant}/webhook-events/stream`, { headers: { authorization: `Bearer ${a.key}` } });
  t.equal(other_.status, 403, "another merchant's stream");
  t.match(await other_.json(), { error: { code: "merchant_mismatch" } });
});
