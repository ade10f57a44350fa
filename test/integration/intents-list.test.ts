// Listing Payment Intents: keyset pages, filters, and cursors that cannot be forged or moved.
import t from "tap";
import { call, idemKey, merchantWithKey, sampleIntent, startTestApp } from "../helpers/harness.ts";

const { app, base } = await startTestApp(t);
const a = await merchantWithKey(app);
const b = await merchantWithKey(app);
const path = `/api/v1/merchants/${a.merchant}/payment-intents`;

const created: { public_id: string; created_at: string; merchant_reference: string | null; status: string }[] = [];
for (let i = 0; i < 25; i++) {
  const res = await call(base, "POST", path, {
    key: a.key,
    idempotencyKey: idemKey(),
    body: { ...sampleIntent, merchant_reference: i % 5 === 0 ? "batch-5" : `ref-${i}` },
  });
  created.push(res.body.data);
}
await call(base, "POST", `${path}/${created[3]?.public_id}/cancel`, { key: a.key });
await call(base, "POST", `/api/v1/merchants/${b.merchant}/payment-intents`, { key: b.key, idempotencyKey: idemKey(), body: sampleIntent });
const newestFirst = [...created].reverse().map((c) => c.public_id);

async function walk(query: string, limit: number): Promise<string[]> {
  const ids: string[] = [];
  let cursor: string | null = null;
  for (let page = 0; page < 100; page++) {
    const res = await call(base, "GET", `${path}?limit=${limit}${query}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`, { key: a.key });
    if (res.status !== 200) throw new Error(JSON.stringify(res.body));
    ids.push(...res.body.data.map((d: { public_id: string }) => d.public_id));
    t.equal(res.body.has_more, res.body.next_cursor !== null, "has_more iff next_cursor");
    cursor = res.body.next_cursor;
    if (!cursor) break;
  }
  return ids;
}

t.test("default page: 50, newest first, list envelope", async (t) => {
  const res = await call(base, "GET", path, { key: a.key });
  t.equal(res.status, 200);
  t.same(Object.keys(res.body).sort(), ["data", "has_more", "next_cursor"]);
  t.same(res.body.data.map((d: { public_id: string }) => d.public_id), newestFirst);
  t.equal(res.body.has_more, false);
  t.equal(res.body.next_cursor, null);
});

t.test("cursor pages cover every intent once, in order", async (t) => {
  t.same(await walk("", 7), newestFirst);
  t.same(await walk("", 1), newestFirst);
  t.same(await walk("", 200), newestFirst);
});

t.test("filters", async (t) => {
  const batch = created.filter((c) => c.merchant_reference === "batch-5").map((c) => c.public_id).reverse();
  t.same(await walk("&merchant_reference=batch-5", 2), batch);
  t.same(await walk("&status=cancelled", 10), [created[3]?.public_id]);
  t.equal((await walk("&status=pending", 10)).length, 24);
  t.same(await walk(`&public_id=${created[7]?.public_id}`, 10), [created[7]?.public_id]);
  const pivot = created[10]?.created_at as string;
  const after = await walk(`&created_after=${encodeURIComponent(pivot)}`, 4);
  t.same(after, newestFirst.filter((id) => Date.parse(created.find((c) => c.public_id === id)?.created_at ?? "") > Date.parse(pivot)));
  const before = await walk(`&created_before=${encodeURIComponent(pivot)}`, 4);
  t.same(before, newestFirst.filter((id) => Date.parse(created.find((c) => c.public_id === id)?.created_at ?? "") < Date.parse(pivot)));
  t.same(await walk("&status=expired", 10), []);
});

t.test("bad list parameters", async (t) => {
  const cases: [string, string, string][] = [
    ["limit=0", "validation_failed", "limit"],
    ["limit=201", "validation_failed", "limit"],
    ["limit=abc", "validation_failed", "limit"],
    ["status=paid", "validation_failed", "status"],
    ["created_after=yesterday", "validation_failed", "created_after"],
    ["created_before=2026-13-01T00:00:00Z", "validation_failed", "created_before"],
    ["colour=red", "validation_failed", "colour"],
    ["limit=5&limit=6", "validation_failed", "limit"],
    ["cursor=garbage", "invalid_cursor", "cursor"],
  ];
  for (const [query, code, param] of cases) {
    const res = await call(base, "GET", `${path}?${query}`, { key: a.key });
    t.equal(res.status, 400, query);
    t.equal(res.body.error?.code, code, query);
    t.equal(res.body.error?.param, param, query);
  }
});

t.test("a cursor is bound to its merchant, environment and filters", async (t) => {
  const first = await call(base, "GET", `${path}?limit=2`, { key: a.key });
  const cursor: string = first.body.next_cursor;
  const [payload, signature] = cursor.split(".");
  const forged = Buffer.from(JSON.stringify({ t: Date.now(), i: "pi_x" })).toString("base64url") + "." + signature;
  const tampered = await call(base, "GET", `${path}?cursor=${encodeURIComponent(forged)}`, { key: a.key });
  t.equal(tampered.body.error?.code, "invalid_cursor", "a changed payload is refused");
  t.ok(payload);
  const otherFilter = await call(base, "GET", `${path}?status=pending&cursor=${encodeURIComponent(cursor)}`, { key: a.key });
  t.equal(otherFilter.body.error?.code, "invalid_cursor", "a cursor cannot move to other filters");
  const foreign = await call(base, "GET", `/api/v1/merchants/${b.merchant}/payment-intents?cursor=${encodeURIComponent(cursor)}`, { key: b.key });
  t.equal(foreign.body.error?.code, "invalid_cursor", "another merchant cannot use it");
  const live = await merchantWithKey(app, "live", ["payment_intents:read"], a.merchant);
  const otherEnv = await call(base, "GET", `${path}?cursor=${encodeURIComponent(cursor)}`, { key: live.key });
  t.equal(otherEnv.body.error?.code, "invalid_cursor", "nor another environment");
  const sameLimitChange = await call(base, "GET", `${path}?limit=3&cursor=${encodeURIComponent(cursor)}`, { key: a.key });
  t.equal(sameLimitChange.status, 200, "the page size may change between pages");
  // The bounds' values are part of the scope, not only whether they are set.
  const ranged = await call(base, "GET", `${path}?limit=1&created_after=2020-01-01T00:00:00Z`, { key: a.key });
  const rangedCursor = encodeURIComponent(ranged.body.next_cursor);
  const sameRange = await call(base, "GET", `${path}?limit=1&created_after=2020-01-01T00:00:00Z&cursor=${rangedCursor}`, { key: a.key });
  t.equal(sameRange.status, 200, "the same range accepts it");
  const otherRange = await call(base, "GET", `${path}?limit=1&created_after=2021-01-01T00:00:00Z&cursor=${rangedCursor}`, { key: a.key });
  t.equal(otherRange.body.error?.code, "invalid_cursor", "another range refuses it");
});
