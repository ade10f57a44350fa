// The bookkeeping export (GET …/payment-intents/export, issue 64): 1,000 intents, some paid through
// ChainService as a watcher reports them, exported as CSV and held to the API's list (same intents,
// same amounts and transactions); the list's filters and date range; Test and Live apart; refusals
// in the error envelope; and the dashboard's "Export CSV". Real service, PostgreSQL and NATS.
import t from "tap";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { ChainService } from "../../gen/payments/v1/chains_pb.ts";
import { exportColumns } from "../../services/intents/export-rows.ts";
import { dashboardClient } from "../helpers/dashboard.ts";
import { call, idemKey, merchantWithKey, sampleIntent, startTestApp } from "../helpers/harness.ts";
import { hash, watcherClient } from "../helpers/lifecycle.ts";

const { app, base, rpcUrl } = await startTestApp(t, { DASHBOARD_BASE_URL: "http://127.0.0.1/dashboard", DASHBOARD_SIGN_IN_RATE_LIMIT_PER_MINUTE: "1000" }, ["rpc", "gateway"]);
const a = await merchantWithKey(app);
const path = `/api/v1/merchants/${a.merchant}/payment-intents`;

/** RFC 4180 records (quoted fields, CRLF line ends), the header first. */
function parseCsv(text: string): string[][] {
  const records: string[][] = [];
  let record: string[] = [];
  let field = "";
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i] as string;
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') (field += '"'), i++;
      else if (c === '"') quoted = false;
      else field += c;
    } else if (c === '"') quoted = true;
    else if (c === ",") record.push(field), (field = "");
    else if (c === "\r" && text[i + 1] === "\n") record.push(field), records.push(record), (record = []), (field = ""), i++;
    else field += c;
  }
  if (field !== "" || record.length > 0) throw new Error("the CSV does not end with CRLF");
  return records;
}

type Row = Record<(typeof exportColumns)[number], string>;
async function exportOf(query: string, key = a.key): Promise<{ status: number; headers: Headers; rows: Row[]; text: string }> {
  const res = await fetch(`${base}${path}/export${query ? `?${query}` : ""}`, { headers: { authorization: `Bearer ${key}` } });
  const text = await res.text();
  if (res.status !== 200) return { status: res.status, headers: res.headers, rows: [], text };
  const [header, ...records] = parseCsv(text);
  t.same(header, [...exportColumns], "the header line");
  return { status: res.status, headers: res.headers, text, rows: records.map((r) => Object.fromEntries(exportColumns.map((c, i) => [c, r[i] ?? ""])) as Row) };
}

interface ApiIntent {
  public_id: string;
  status: string;
  requested_amount: string;
  merchant_reference: string | null;
  created_at: string;
  deposit_address: string;
  price_amount?: string;
  transactions: { tx_hash: string; output_index: number; amount: string; confirmations: number; asset: string; fiat_value?: string }[];
}
async function listed(query: string): Promise<ApiIntent[]> {
  const out: ApiIntent[] = [];
  let cursor: string | null = null;
  do {
    const res = await call(base, "GET", `${path}?limit=200${query ? `&${query}` : ""}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`, { key: a.key });
    if (res.status !== 200) throw new Error(JSON.stringify(res.body));
    out.push(...res.body.data);
    cursor = res.body.next_cursor;
  } while (cursor);
  return out;
}

// 1,000 intents, eight at a time: every tenth priced in USD, every seventh with a reference of a batch.
const total = 1000;
const created: ApiIntent[] = [];
for (let i = 0; i < total; i += 8) {
  const made = await Promise.all(
    Array.from({ length: Math.min(8, total - i) }, (_, j) => {
      const n = i + j;
      const body = n % 10 === 0 ? { network: "ethereum", asset: "USDC", price_amount: "19.99", price_currency: "USD" } : { ...sampleIntent, requested_amount: `${1 + (n % 50)}.25` };
      return call(base, "POST", path, { key: a.key, idempotencyKey: idemKey(), body: { ...body, merchant_reference: n % 7 === 0 ? "batch-7" : `order-${n}` } });
    }),
  );
  for (const m of made) {
    if (m.status !== 200) throw new Error(JSON.stringify(m.body));
    created.push(m.body.data);
  }
}

// 120 of them (every fifth: half of them priced in USD) paid in one block as a Test watcher reports
// it: in full, 12 of those twice (two transactions), and 5 others paid in USDT, the wrong asset.
const { headers } = await watcherClient(app, rpcUrl, "test", ["ethereum"]);
const chains = createClient(ChainService, createGrpcTransport({ baseUrl: rpcUrl }));
let holder = await chains.claimChain({ network: "ethereum", watcherId: "export-test", leaseSeconds: 60 }, { headers });
for (let i = 0; !holder.active && i < 100; i++) {
  await new Promise((resolve) => setTimeout(resolve, 100));
  holder = await chains.claimChain({ network: "ethereum", watcherId: "export-test", leaseSeconds: 60 }, { headers });
}
const paid = created.filter((_, i) => i % 5 === 0).slice(0, 120);
const wrong = created.filter((_, i) => i % 5 === 2).slice(0, 5);
const outputs = [
  ...paid.map((pi) => ({ toAddress: pi.deposit_address, asset: "USDC", amount: pi.requested_amount, txHash: hash(), outputIndex: 0 })),
  ...paid.slice(0, 12).map((pi) => ({ toAddress: pi.deposit_address, asset: "USDC", amount: "0.5", txHash: hash(), outputIndex: 1 })),
  ...wrong.map((pi) => ({ toAddress: pi.deposit_address, asset: "USDT", amount: "3", txHash: hash(), outputIndex: 0 })),
];
const recent = holder.position?.recentBlocks.at(-1);
const height = BigInt(Number(recent?.height ?? 99n) + 1);
// The block, then 20 empty ones on it: 21 confirmations, more than the network's threshold.
const blocks = [{ height, hash: hash(), parentHash: recent?.hash ?? hash(), outputs }];
for (let i = 1n; i <= 20n; i++) blocks.push({ height: height + i, hash: hash(), parentHash: blocks.at(-1)!.hash, outputs: [] });
await chains.reportBlocks({ network: "ethereum", watcherId: "export-test", leaseEpoch: holder.epoch, blocks, headHeight: height + 20n }, { headers });

/** The rows an intent of the list becomes: one per transaction, or one with none. */
function expectedRows(list: ApiIntent[]) {
  return list.flatMap((pi) =>
    pi.transactions.length === 0
      ? [{ intent_id: pi.public_id, requested_amount: pi.requested_amount, tx_hash: "", amount: "" }]
      : pi.transactions.map((tx) => ({ intent_id: pi.public_id, requested_amount: pi.requested_amount, tx_hash: tx.tx_hash, amount: tx.amount })),
  );
}
const picked = (rows: Row[]) => rows.map((r) => ({ intent_id: r.intent_id, requested_amount: r.requested_amount, tx_hash: r.tx_hash, amount: r.amount }));

t.test("the export of 1,000 intents is the list's: the same intents, amounts and transactions, newest first", async (t) => {
  const all = await listed("");
  t.equal(all.length, total);
  const out = await exportOf("");
  t.equal(out.status, 200);
  t.match(out.headers.get("content-type"), /^text\/csv; charset=utf-8$/);
  t.match(out.headers.get("content-disposition"), /^attachment; filename="payment-intents\.csv"$/);
  t.ok(out.headers.get("x-request-id"));
  t.equal(out.rows.length, total + 12, "one row per transaction, one for an intent with none");
  t.same(picked(out.rows), expectedRows(all));
  t.equal(new Set(out.rows.map((r) => r.intent_id)).size, total, "every intent");

  const one = out.rows.find((r) => r.intent_id === paid[13]!.public_id)!;
  t.match(one, { status: "confirmed", network: "ethereum", asset: "USDC", contract: "0x1c7D4B196Cb0C7B01d743Fbc6116a902379C7238", counted: "true", block_height: String(height), exception_reason: "", amount_refunded: "" }, "a paid intent's row: the Test USDC contract, its block");
  t.match(one.tx_hash, /^[0-9a-f]{64}$/, "the hash alone, without an output suffix");
  t.ok(Date.parse(one.block_time) > 0, "its block's time");
  t.equal(Number(one.confirmations), 21);
  const wrongRow = out.rows.find((r) => r.intent_id === wrong[0]!.public_id)!;
  t.match(wrongRow, { asset: "USDT", contract: "0xaA8E23Fb1079EA71e0a56F48a2aA51851D8433D0", exception_reason: "wrong_asset", counted: "false", fiat_value_at_quote: "" }, "a payment in the wrong asset: an exception");
  const unpaid = out.rows.find((r) => r.intent_id === created[3]!.public_id)!;
  t.match(unpaid, { tx_hash: "", amount: "", confirmations: "", block_time: "", status: "pending", merchant_reference: "order-3" }, "an intent with no transaction: one row, its transaction's columns empty");
});

t.test("a fiat-priced intent: its quote and the payment's value at it", async (t) => {
  const pi = paid.slice(12).find((p) => typeof p.price_amount === "string")!;
  t.ok(pi, "one of the paid intents is priced in USD");
  const row = (await exportOf(`public_id=${pi.public_id}`)).rows[0]!;
  t.match(row, { price_amount: "19.99", price_currency: "USD", quote_rate: /^1(\.0+)?$/, quote_sources: "peg", fiat_value_at_quote: "19.99", fiat_value: "19.99" }, "USDC is pegged to the dollar: paid in full, worth the price");
  t.equal(row.counted, "true", "it counted");
  t.equal(row.fiat_value_at_confirmation, "19.99", "and at the market's rate when it counted (the peg) it was worth 19.99");
});

t.test("filters and the date range apply as they do to the list", async (t) => {
  const pivot = created[400]!.created_at;
  const until = created[700]!.created_at;
  for (const query of ["status=confirmed", "merchant_reference=batch-7", `public_id=${created[17]!.public_id}`, `created_after=${encodeURIComponent(pivot)}`, `created_after=${encodeURIComponent(pivot)}&created_before=${encodeURIComponent(until)}`, `status=pending&created_before=${encodeURIComponent(until)}`]) {
    const list = await listed(query);
    t.ok(list.length > 0, `${query}: something to export`);
    t.same(picked((await exportOf(query)).rows), expectedRows(list), query);
  }
  t.same((await exportOf("status=cancelled")).rows, [], "nothing matches: the header alone");
});

t.test("a Test key never sees Live rows, nor one merchant another's", async (t) => {
  const live = await merchantWithKey(app, "live", undefined, a.merchant);
  const made = await call(base, "POST", path, { key: live.key, idempotencyKey: idemKey(), body: sampleIntent });
  t.equal(made.status, 200);
  const liveRows = (await exportOf("", live.key)).rows;
  t.same(liveRows.map((r) => r.intent_id), [made.body.data.public_id], "the Live key: its one Live intent");
  t.notOk((await exportOf("")).rows.some((r) => r.intent_id === made.body.data.public_id), "the Test key: not the Live intent");
  const other = await merchantWithKey(app);
  const res = await fetch(`${base}${path}/export`, { headers: { authorization: `Bearer ${other.key}` } });
  t.equal(res.status, 403);
  t.equal(((await res.json()) as { error: { code: string } }).error.code, "merchant_mismatch");
});

t.test("refusals: in the error envelope, before any CSV", async (t) => {
  for (const [query, param] of [
    ["status=paidish", "status"],
    ["created_after=yesterday", "created_after"],
    ["created_after=2030-01-01T00:00:00Z&created_before=2029-01-01T00:00:00Z", "created_after"],
    ["limit=5", "limit"],
    ["status=pending&status=confirmed", "status"],
  ] as const) {
    const res = await exportOf(query);
    t.equal(res.status, 400, query);
    const body = JSON.parse(res.text);
    t.match(body, { error: { code: "validation_failed", param, request_id: /^req_/ } }, `${query}: validation_failed on ${param}`);
  }
  const reader = await merchantWithKey(app, "test", ["webhooks:read"], a.merchant);
  const refused = await exportOf("", reader.key);
  t.equal(refused.status, 403);
  t.match(JSON.parse(refused.text), { error: { code: "insufficient_scope", message: /payment_intents:read/ } });
  t.equal((await exportOf("", "sk_test_nope")).status, 401);
  const post = await call(base, "POST", `${path}/export`, { key: a.key, body: {} });
  t.equal(post.status, 405);
});

t.test("the dashboard's Export CSV: the list's filters, as a download", async (t) => {
  const c = dashboardClient(base);
  t.equal((await c.signIn(a.key)).status, 303);
  const page = await c.get("/dashboard/payments?status=confirmed&reference=batch-7");
  t.match(page.body, /<a class="button" href="\/dashboard\/payments\/export\?status=confirmed&amp;reference=batch-7" id="export-csv" download>Export CSV<\/a>/);
  const res = await c.get("/dashboard/payments/export?status=confirmed&reference=batch-7");
  t.equal(res.status, 200);
  t.match(res.headers.get("content-disposition"), /attachment/);
  t.same(res.body, (await exportOf("status=confirmed&merchant_reference=batch-7")).text, "the API's export with the same filters");
  const bad = await c.get("/dashboard/payments/export?from=someday");
  t.equal(bad.status, 400, "a malformed filter: a page that says so");

  const reader = await merchantWithKey(app, "test", ["webhooks:read"], a.merchant);
  const d = dashboardClient(base);
  await d.signIn(reader.key);
  t.notMatch((await d.get("/dashboard/webhooks")).body, /export-csv/);
  const refused = await d.get("/dashboard/payments/export");
  t.equal(refused.status, 403);
  t.match(refused.body, /payment_intents:read/, "the refusal names the scope");
});
