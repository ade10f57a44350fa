// The payment lifecycle end to end: the sandbox simulator over REST (Test keys) and
// ObservationService over gRPC (the chain watcher, Live), each event delivered as a
// signed webhook through the real pipeline (PostgreSQL, NATS JetStream, HTTPS).
import { execFile } from "node:child_process";
import { createHmac, randomBytes } from "node:crypto";
import path from "node:path";
import { promisify } from "node:util";
import { Code, ConnectError } from "@connectrpc/connect";
import { base58 } from "@scure/base";
import t from "tap";
import { ErrorDetailSchema } from "../../gen/payments/v1/options_pb.ts";
import { importAddresses } from "../../services/addresses/admin.ts";
import { checkAddress } from "../../services/addresses/formats.ts";
import { assets, offeredIn } from "../../services/vocabulary/assets.ts";
import { call, giveLiveAccountKey, idemKey, merchantWithKey, sampleIntent, until } from "../helpers/harness.ts";
import { hash, watcherClient } from "../helpers/lifecycle.ts";
import { webhookSetup } from "../helpers/webhooks.ts";

const execFileAsync = promisify(execFile);
const s = await webhookSetup(t);
const { base, creds: a } = s;
const endpoint = await s.createEndpoint();
/** Signing secrets by endpoint path (an endpoint belongs to one environment). */
const secrets = new Map([[new URL(endpoint.url).pathname, endpoint.secret]]);
const watcher = await watcherClient(s.app, s.rpcUrl);
const intents = (c = a) => `/api/v1/merchants/${c.merchant}/payment-intents`;
const simulatePath = (id: string, c = a) => `/api/v1/sandbox/merchants/${c.merchant}/payment-intents/${id}/simulate`;

async function createIntent(c = a, body: Record<string, unknown> = sampleIntent) {
  const res = await call(base, "POST", intents(c), { key: c.key, idempotencyKey: idemKey(), body });
  if (res.status !== 200) throw new Error(`create: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.data;
}

const simulate = (id: string, body: Record<string, unknown>, c = a) => call(base, "POST", simulatePath(id, c), { key: c.key, body });

/**
 * The signed webhooks the receiver got for an intent, verified with the endpoint's secret, in arrival
 * order, each event once by its id as the docs tell receivers to dedupe (delivery is at least once).
 */
function webhooksOf(intentId: string): { type: string; status: string; amount_received: string | null }[] {
  const out = [];
  const seen = new Set<string>();
  for (const r of s.receiver.requests) {
    const ts = String(r.headers["x-service-timestamp"]);
    const secret = secrets.get(r.url) ?? "";
    const expected = createHmac("sha256", secret).update(`${ts}.`).update(r.body).digest("hex");
    if (expected !== r.headers["x-service-signature"]) throw new Error("a webhook with a bad signature");
    const event = JSON.parse(r.body.toString());
    if (seen.has(event.id)) continue;
    seen.add(event.id);
    const pi = event.data.payment_intent;
    if (pi?.public_id === intentId) out.push({ type: event.type, status: pi.status, amount_received: pi.amount_received });
  }
  return out;
}

async function eventsOf(intentId: string, count: number) {
  return until(`${count} webhooks of ${intentId}`, async () => (webhooksOf(intentId).length >= count ? webhooksOf(intentId) : undefined), 15_000, () =>
    JSON.stringify(webhooksOf(intentId)),
  );
}

t.test("sandbox: every outcome, each event once and delivered signed", async (t) => {
  const cases: { outcomes: [string, string?][]; statuses: string[]; events: string[] }[] = [
    { outcomes: [["confirmed"]], statuses: ["confirmed"], events: ["payment.confirmed"] },
    { outcomes: [["underpaid"], ["confirmed"]], statuses: ["underpaid", "confirmed"], events: ["payment.underpaid", "payment.confirmed"] },
    { outcomes: [["overpaid"]], statuses: ["overpaid"], events: ["payment.overpaid"] },
    { outcomes: [["expired"]], statuses: ["expired"], events: ["payment.expired"] },
    { outcomes: [["late"]], statuses: ["late"], events: ["payment.expired", "payment.late"] },
    { outcomes: [["confirmed"], ["reorged"]], statuses: ["confirmed", "pending"], events: ["payment.confirmed", "payment.reorged"] },
    { outcomes: [["overpaid"], ["reorged"]], statuses: ["overpaid", "pending"], events: ["payment.overpaid", "payment.reorged"] },
    { outcomes: [["underpaid", "4"], ["overpaid"], ["reorged"]], statuses: ["underpaid", "overpaid", "underpaid"], events: ["payment.underpaid", "payment.overpaid", "payment.reorged"] },
  ];
  // Deliveries are concurrent and retries reorder them (the spec tells receivers to expect
  // it), so the events are compared as a multiset, each matched to the status it embeds.
  const sorted = (types: string[]) => [...types].sort();
  const done: { id: string; name: string; events: string[] }[] = [];
  for (const c of cases) {
    const pi = await createIntent();
    const name = c.outcomes.map(([o]) => o).join(" → ");
    for (const [i, [outcome, amount]] of c.outcomes.entries()) {
      const res = await simulate(pi.public_id, amount ? { outcome, amount } : { outcome });
      t.equal(res.status, 200, `${name}: ${outcome} ${JSON.stringify(res.body.error ?? "")}`);
      t.equal(res.body.data.status, c.statuses[i], `${name}: status after ${outcome}`);
    }
    const got = await eventsOf(pi.public_id, c.events.length + 1);
    t.same(sorted(got.map((e) => e.type)), sorted(["payment.intent.created", ...c.events]), `${name}: the events, once each`);
    const last = got.find((e) => e.type === c.events.at(-1));
    t.equal(last?.status, c.statuses.at(-1), `${name}: the last event embeds the final status`);
    done.push({ id: pi.public_id, name, events: ["payment.intent.created", ...c.events] });
  }
  // The later cases' webhooks arrived after the earlier ones' were counted: none of those came twice meanwhile.
  for (const d of done) t.same(sorted(webhooksOf(d.id).map((e) => e.type)), sorted(d.events), `${d.name}: still once each`);
});

t.test("an event's body carries the merchant's metadata as given, quotes, backslashes and any character, through a settlement", async (t) => {
  const metadata = { note: 'a "quoted" \\ back\\slash', unicode: "é ü 中文 😀 \u2028 end", json: '{"not":"parsed"}' };
  const pi = await createIntent(a, { ...sampleIntent, metadata });
  t.equal((await simulate(pi.public_id, { outcome: "confirmed" })).status, 200);
  const body = await until("the payment.confirmed webhook", async () => {
    for (const r of s.receiver.requests) {
      const e = JSON.parse(r.body.toString());
      if (e.type === "payment.confirmed" && e.data.payment_intent?.public_id === pi.public_id) return e;
    }
    return undefined;
  }, 15_000);
  t.same(body.data.payment_intent.metadata, metadata, "the same strings, character for character");
  t.equal(webhooksOf(pi.public_id).length >= 2, true, "signed over the bytes sent");
});

t.test("sandbox: the intent shows its transactions and amounts", async (t) => {
  const pi = await createIntent(a, { ...sampleIntent, requested_amount: "10" });
  const under = await simulate(pi.public_id, { outcome: "underpaid" });
  t.equal(under.body.data.amount_received, "5");
  t.equal(under.body.data.transactions.length, 1);
  t.match(under.body.data.transactions[0], { amount: "5", confirmations: 12, counted: true, simulated: true, output_index: 0 });
  t.match(under.body.data.transactions[0].tx_hash, /^0x[0-9a-f]{64}$/, "an EVM chain's hash, written as the chain writes it (0x)");
  const btc = await createIntent(a, { network: "bitcoin", asset: "BTC", requested_amount: "0.001" });
  const btcPaid = await simulate(btc.public_id, { outcome: "confirmed" });
  t.match(btcPaid.body.data.transactions[0].tx_hash, /^[0-9a-f]{64}$/, "a bitcoin txid: bare hex");
  const paid = await simulate(pi.public_id, { outcome: "confirmed" });
  t.equal(paid.body.data.amount_received, "10");
  t.ok(paid.body.data.paid_at, "paid_at once paid");
  const got = await call(base, "GET", `${intents()}/${pi.public_id}`, { key: a.key });
  t.same(got.body.data, paid.body.data, "GET shows the same intent");
  const listed = await call(base, "GET", `${intents()}?public_id=${pi.public_id}`, { key: a.key });
  t.same(listed.body.data[0], paid.body.data, "and so does the list");
});

t.test("sandbox: bad input changes nothing", async (t) => {
  const pi = await createIntent();
  const cases: [Record<string, unknown>, number, string, string?][] = [
    [{ outcome: "paid" }, 400, "validation_failed", "outcome"],
    [{}, 400, "validation_failed", "outcome"],
    [{ outcome: "confirmed", amount: "-1" }, 400, "validation_failed", "amount"],
    [{ outcome: "confirmed", amount: "1.0000001" }, 400, "validation_failed", "amount"],
    [{ outcome: "confirmed", amount: "1" }, 400, "validation_failed", "amount"],
    [{ outcome: "underpaid", amount: "20" }, 400, "validation_failed", "amount"],
    [{ outcome: "reorged" }, 409, "invalid_state"],
  ];
  for (const [body, status, code, param] of cases) {
    const res = await simulate(pi.public_id, body);
    t.equal(res.status, status, JSON.stringify(body));
    t.equal(res.body.error?.code, code, JSON.stringify(body));
    if (param) t.equal(res.body.error?.param, param, `${JSON.stringify(body)} param`);
  }
  const after = await call(base, "GET", `${intents()}/${pi.public_id}`, { key: a.key });
  t.equal(after.body.data.status, "pending", "still pending");
  t.equal(after.body.data.amount_received, null, "no funds recorded");
  t.same(after.body.data.transactions, []);

  await simulate(pi.public_id, { outcome: "confirmed" });
  const again = await simulate(pi.public_id, { outcome: "confirmed" });
  t.equal(again.status, 409, "confirmed cannot be confirmed again");
  t.equal(again.body.error.code, "invalid_state");

  const cancelled = await createIntent();
  await call(base, "POST", `${intents()}/${cancelled.public_id}/cancel`, { key: a.key });
  for (const outcome of ["confirmed", "underpaid", "overpaid", "expired", "late", "reorged"]) {
    t.equal((await simulate(cancelled.public_id, { outcome })).status, 409, `cancelled: ${outcome}`);
  }

  const other = await merchantWithKey(s.app);
  t.equal((await simulate(pi.public_id, { outcome: "confirmed" }, { ...other, merchant: other.merchant })).status, 404, "another merchant's intent");
  t.equal((await simulate(pi.public_id, { outcome: "confirmed" }, { ...a, key: other.key })).status, 403, "merchant mismatch");
  const live = await merchantWithKey(s.app, "live", undefined, a.merchant);
  const liveRes = await simulate(pi.public_id, { outcome: "confirmed" }, live);
  t.equal(liveRes.status, 403, "a Live key");
  t.equal(liveRes.body.error.code, "test_mode_only");
  const readOnly = await merchantWithKey(s.app, "test", ["payment_intents:read"], a.merchant);
  t.equal((await simulate(pi.public_id, { outcome: "confirmed" }, readOnly)).body.error?.code, "insufficient_scope");
});

t.test("ObservationService (Live): confirmations, top-up, duplicates, reorgs, late, unmatched", async (t) => {
  const live = await merchantWithKey(s.app, "live", undefined, a.merchant);
  const liveEndpoint = await s.createEndpoint("/hooks/live", live);
  secrets.set("/hooks/live", liveEndpoint.secret);
  const { client, headers } = watcher;
  const observe = (pi: { deposit_address: string }, amount: string, confirmations: number, tx = hash(), block = hash()) =>
    client.recordObservation(
      { network: "ethereum", asset: "USDC", toAddress: pi.deposit_address, txHash: tx, outputIndex: 0, amount, confirmations, blockHeight: 100n, blockHash: block },
      { headers },
    );
  const status = async (id: string) => (await call(base, "GET", `${intents(live)}/${id}`, { key: live.key })).body.data;

  const pi = await createIntent(live, { ...sampleIntent, requested_amount: "10" });
  t.match(pi.deposit_address, /^0x[0-9a-fA-F]{40}$/, "a Live intent has the merchant's derived address");
  const tx1 = hash();
  const block1 = hash();
  const below = await observe(pi, "4", 11, tx1, block1);
  t.equal(below.paymentIntentStatus, "pending", "below the threshold nothing counts");
  t.equal(below.data?.counted, false);
  t.equal((await status(pi.public_id)).amount_received, "0");
  const at = await observe(pi, "4", 12, tx1, block1);
  t.equal(at.paymentIntentStatus, "underpaid", "at the threshold it counts");
  t.equal(at.data?.counted, true);
  // The same observation ten times at once counts once and emits nothing more.
  await Promise.all(Array.from({ length: 10 }, () => observe(pi, "4", 12, tx1, block1)));
  t.equal((await status(pi.public_id)).amount_received, "4");
  const tx2 = hash();
  const block2 = hash();
  t.equal((await observe(pi, "6", 30, tx2, block2)).paymentIntentStatus, "confirmed", "a top-up confirms");
  t.equal((await observe(pi, "1", 30)).paymentIntentStatus, "overpaid");
  // Reorgs: an unknown block is a no-op; the top-up's block takes it back to underpaid.
  t.same((await client.recordReorg({ network: "ethereum", orphanedBlockHashes: [hash()] }, { headers })).orphaned, 0);
  const reorg = await client.recordReorg({ network: "ethereum", orphanedBlockHashes: [block2] }, { headers });
  t.equal(reorg.orphaned, 1);
  t.same(reorg.paymentIntentIds, [pi.public_id]);
  let now = await status(pi.public_id);
  t.equal(now.status, "underpaid", "overpaid → underpaid after the reorg");
  t.equal(now.amount_received, "5");
  // Seen again in another block, it counts again.
  t.equal((await observe(pi, "6", 12, tx2, hash())).paymentIntentStatus, "overpaid");
  // payment.detected too ("*" takes every type): the first funds were seen at 11 of 12 confirmations.
  const events = await eventsOf(pi.public_id, 7);
  t.same(
    events.map((e) => e.type).sort(),
    ["payment.intent.created", "payment.detected", "payment.underpaid", "payment.confirmed", "payment.overpaid", "payment.reorged", "payment.overpaid"].sort(),
    "each move once, as a signed webhook (in any order: deliveries are concurrent)",
  );

  // Late: funds counted after expiry.
  const late = await createIntent(live, { ...sampleIntent, requested_amount: "3", expires_in_seconds: 60 });
  await s.app.db.em.fork().execute(`update payment_intents set expires_at = now() - interval '1 second' where id = ?`, [late.public_id]);
  await until("expired by the scheduler", async () => (await status(late.public_id)).status === "expired", 5000);
  const lateTx = hash();
  t.equal((await observe(late, "3", 12, lateTx)).paymentIntentStatus, "late");
  await client.recordReorg({ network: "ethereum", txHashes: [lateTx] }, { headers });
  now = await status(late.public_id);
  t.equal(now.status, "expired", "late → expired when a reorg takes the late funds");
  t.same((await eventsOf(late.public_id, 4)).map((e) => e.type).sort(), ["payment.intent.created", "payment.expired", "payment.late", "payment.reorged"].sort(), "each once, in any order");

  // An address of no intent is stored, not an error, and listed for ops.
  const stray = await client.recordObservation(
    { network: "ethereum", asset: "ETH", toAddress: "0x000000000000000000000000000000000000dEaD", txHash: hash(), outputIndex: 3, amount: "0.5", confirmations: 1, blockHeight: 7n, blockHash: hash() },
    { headers },
  );
  t.equal(stray.data?.paymentIntentId, undefined);
  const unmatched = await client.listUnmatchedObservations({ network: "ethereum", limit: 10 }, { headers });
  t.ok(unmatched.data.some((o) => o.txHash === stray.data?.txHash), "listed as unmatched");
});

t.test("ObservationService: credentials and bad input", async (t) => {
  const { client, headers } = watcher;
  const pi = await createIntent();
  const valid = { network: "ethereum", asset: "USDC", toAddress: pi.deposit_address, txHash: hash(), outputIndex: 0, amount: "1", confirmations: 1, blockHeight: 1n, blockHash: hash() };
  const failure = (p: Promise<unknown>) => p.then(() => undefined, (e: unknown) => ConnectError.from(e));
  const apiKey = await failure(client.recordObservation(valid, { headers: { authorization: `Bearer ${a.key}` } }));
  t.equal(apiKey?.code, Code.Unauthenticated, "an API key is refused");
  const none = await failure(client.recordObservation(valid));
  t.equal(none?.code, Code.Unauthenticated, "no credential is refused");
  const onMerchantRoute = await call(base, "GET", intents(), { key: watcher.credential });
  t.equal(onMerchantRoute.status, 401, "an internal credential is refused on merchant routes");
  t.equal(onMerchantRoute.body.error.code, "invalid_api_key");

  const bad: [Partial<typeof valid>, string][] = [
    [{ amount: "-1" }, "amount"],
    [{ amount: "1e3" }, "amount"],
    [{ amount: "0.0000001" }, "amount"],
    [{ network: "dogecoin" }, "network"],
    [{ asset: "DOGE" }, "asset"],
    [{ toAddress: "bc1qcr8te4kr609gcawutmrza0j4xv80jy8z306fyu" }, "to_address"],
    [{ toAddress: "0x9858EfFD232B4033E47d90003D41EC34EcaEda95" }, "to_address"],
    [{ txHash: "" }, "tx_hash"],
    [{ blockHash: "", confirmations: 3 }, "block_hash"],
  ];
  for (const [change, param] of bad) {
    const err = await failure(client.recordObservation({ ...valid, ...change }, { headers }));
    t.equal(err?.code, Code.InvalidArgument, JSON.stringify(change));
    t.equal(err?.findDetails(ErrorDetailSchema)[0]?.param, param, `${JSON.stringify(change)} param`);
  }
  const other = await createIntent();
  const recorded = { ...valid, toAddress: other.deposit_address, txHash: hash() };
  await client.recordObservation(recorded, { headers });
  const changed = await failure(client.recordObservation({ ...recorded, amount: "2" }, { headers }));
  t.equal(changed?.code, Code.InvalidArgument, "an output recorded again with another amount");
  t.equal(changed?.findDetails(ErrorDetailSchema)[0]?.param, "tx_hash");
  const emptyReorg = await failure(client.recordReorg({ network: "ethereum" }, { headers }));
  t.equal(emptyReorg?.code, Code.InvalidArgument, "a reorg names blocks or transactions");
  const after = await call(base, "GET", `${intents()}/${pi.public_id}`, { key: a.key });
  t.same(after.body.data.transactions, [], "nothing was recorded");
});

t.test("deposit addresses: 50 concurrent creates on one xpub get 50 addresses; no source in Live is 409", async (t) => {
  const live = await merchantWithKey(s.app, "live");
  const created = await Promise.all(Array.from({ length: 50 }, () => createIntent(live)));
  t.equal(new Set(created.map((c) => c.deposit_address)).size, 50, "50 distinct addresses");
  const [{ next_index } = { next_index: -1 }] = await s.app.db.em.fork().execute<{ next_index: number }[]>(
    `select next_index from address_sources where merchant_id = ? and environment = 'live' and network = 'ethereum'`,
    [live.merchant],
  );
  t.equal(next_index, 50, "indexes 0..49 taken, none twice");

  const res = await call(base, "POST", intents(live), { key: live.key, idempotencyKey: idemKey(), body: { network: "bitcoin", asset: "BTC", requested_amount: "0.001" } });
  t.equal(res.status, 409);
  t.equal(res.body.error.code, "deposit_address_unavailable");
  t.match(res.body.error.message, /address-source set/, "the message names the admin command");
  const list = await call(base, "GET", `${intents(live)}?limit=200`, { key: live.key });
  t.equal(list.body.data.length, 50, "nothing created");
  await giveLiveAccountKey(s.app, live.merchant, "tron");
  const tron = await createIntent(live, { network: "tron", asset: "USDT", requested_amount: "5" });
  t.match(tron.deposit_address, /^T[1-9A-HJ-NP-Za-km-z]{33}$/);
  t.equal(tron.payment_uri, `tron:${tron.deposit_address}?amount=5&token=TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t`);
});

t.test("the example chain watcher of docs/payments.md confirms an intent over gRPC", async (t) => {
  const live = await merchantWithKey(s.app, "live");
  const pi = await createIntent(live, { ...sampleIntent, requested_amount: "2.5" });
  const run = (confirmations: string) =>
    execFileAsync("npm", ["run", "-s", "example:watcher", "--", "ethereum", "USDC", pi.deposit_address, "2.5", confirmations], {
      cwd: path.resolve(import.meta.dirname, "../.."),
      env: { ...process.env, RPC_URL: s.rpcUrl, INTERNAL_CREDENTIAL: watcher.credential, TX_HASH: "ab".repeat(32) },
    });
  const first = JSON.parse((await run("3")).stdout);
  t.same(first, { tx_hash: "ab".repeat(32), counted: false, payment_intent: pi.public_id, status: "pending" }, "seen, not yet counted");
  const second = JSON.parse((await run("12")).stdout);
  t.same(second, { tx_hash: "ab".repeat(32), counted: true, payment_intent: pi.public_id, status: "confirmed" }, "counted at 12 confirmations");
  const usage = await execFileAsync("npm", ["run", "-s", "example:watcher"], { cwd: path.resolve(import.meta.dirname, "../..") }).catch(
    (e: { code: number; stderr: string }) => e,
  );
  t.equal((usage as { code: number }).code, 2, "no arguments: usage and exit 2");
});

t.test("every network's Test intent has a valid deposit address and payment URI", async (t) => {
  const schemes: Record<string, string> = { bitcoin: "bitcoin:", ethereum: "ethereum:", polygon: "ethereum:", base: "ethereum:", arbitrum: "ethereum:", tron: "tron:", solana: "solana:" };
  // Every pair a Test intent can be made in (polygon's USDT is Live only: polygon-usdt.test.ts).
  for (const { network, asset, decimals } of assets.filter((a) => offeredIn(a, "test"))) {
    const amount = decimals >= 2 ? "1.25" : "1";
    const pi = await createIntent(a, { network, asset, requested_amount: amount });
    const check = checkAddress(network, "test", pi.deposit_address);
    t.ok(check.ok, `${network}/${asset}: ${pi.deposit_address} is a valid ${network} Test address`);
    t.equal(pi.payment_uri.startsWith(`${schemes[network]}`), true, `${network}/${asset}: ${pi.payment_uri}`);
    t.ok(pi.payment_uri.includes(pi.deposit_address), `${network}/${asset}: the URI pays the deposit address`);
  }
  const again = await Promise.all(Array.from({ length: 10 }, () => createIntent(a, { network: "bitcoin", asset: "BTC", requested_amount: "0.001" })));
  t.equal(new Set(again.map((p) => p.deposit_address)).size, 10, "Test addresses are never reused either");
  t.ok(again.every((p) => p.deposit_address.startsWith("tb1q")), "bitcoin Test addresses are testnet native segwit");
});

t.test("simulate with a Test key on a Live intent is 404, and changes nothing", async (t) => {
  const live = await merchantWithKey(s.app, "live", undefined, a.merchant);
  const pi = await createIntent(live);
  const res = await simulate(pi.public_id, { outcome: "confirmed" });
  t.equal(res.status, 404);
  t.equal(res.body.error.code, "not_found");
  t.equal((await call(base, "GET", `${intents(live)}/${pi.public_id}`, { key: live.key })).body.data.status, "pending");
});

t.test("deposit addresses from an imported pool: leased in order, once; used up is 409 and creates nothing", async (t) => {
  const live = await merchantWithKey(s.app, "live");
  const pool = [0, 1].map(() => base58.encode(randomBytes(32)));
  await importAddresses(s.app.db.em.fork(), live.merchant, "live", "solana", pool.join("\n"));
  const body = { network: "solana", asset: "USDC", requested_amount: "3" };
  const first = await createIntent(live, body);
  const second = await createIntent(live, body);
  t.same([first.deposit_address, second.deposit_address], pool, "the pool's addresses, in the order imported");
  t.equal(first.payment_uri, `solana:${pool[0]}?amount=3&spl-token=EPjFWdd5AufqSSqeM2qaxKEbt1M7cnjvn6k3K1qN9i8`);
  const third = await call(base, "POST", intents(live), { key: live.key, idempotencyKey: idemKey(), body });
  t.equal(third.status, 409);
  t.equal(third.body.error.code, "deposit_address_unavailable");
  t.match(third.body.error.message, /Every imported solana deposit address is in use.*address import/);
  const [{ n } = { n: -1 }] = await s.app.db.em.fork().execute<{ n: number }[]>(
    `select count(*)::int as n from payment_intents where merchant_id = ? and environment = 'live' and network = 'solana'`,
    [live.merchant],
  );
  t.equal(n, 2, "nothing created by the refused request");
  const leases = await s.app.db.em.fork().execute<{ address: string; payment_intent_id: string }[]>(
    `select address, payment_intent_id from address_pool where merchant_id = ? order by id`,
    [live.merchant],
  );
  t.same(leases.map((l) => l.payment_intent_id), [first.public_id, second.public_id], "each address leased to its intent");
});
