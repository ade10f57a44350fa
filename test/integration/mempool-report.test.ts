// What the core does with a watcher's mempool report (ChainService.ReportMempool) for outputs
// missing from it. One of an intent still watched is withdrawn for a reason only: at once when the
// watcher reports its transaction conflicted; when merely missing, only once it was missing from
// MEMPOOL_ABSENT_READS consecutive reports over at least MEMPOOL_ABSENT_SECONDS (2 and 2 here), a
// report that has it again starting the count over. One of an intent no longer watched (cancelled,
// with EXCEPTION_WATCH_SECONDS=0: past its watch windows) is missing because the watcher stopped
// looking for its address, not because it left the mempool, and keeps what was last known of it. Over gRPC with a watcher's internal credential,
// read back through REST.
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import t from "tap";
import { ChainService } from "../../gen/payments/v1/chains_pb.ts";
import { call, idemKey, startTestApp, merchantWithKey, until } from "../helpers/harness.ts";
import { hash, watcherClient } from "../helpers/lifecycle.ts";

const absentSeconds = 2;
const s = await startTestApp(t, { MEMPOOL_ABSENT_READS: "2", MEMPOOL_ABSENT_SECONDS: String(absentSeconds), EXCEPTION_WATCH_SECONDS: "0" }, ["rpc", "gateway"]);
const a = await merchantWithKey(s.app);
const { headers } = await watcherClient(s.app, s.rpcUrl, "test");
const chains = createClient(ChainService, createGrpcTransport({ baseUrl: s.rpcUrl }));
const path = `/api/v1/merchants/${a.merchant}/payment-intents`;
type Tx = { tx_hash: string; counted: boolean; reason: string | null; confirmations: number };
type Intent = { public_id: string; deposit_address: string; status: string; amount_pending: string; transactions: Tx[] };
const get = async (id: string) => (await call(s.base, "GET", `${path}/${id}`, { key: a.key })).body.data as Intent;
const create = async () => (await call(s.base, "POST", path, { key: a.key, idempotencyKey: idemKey(), body: { network: "bitcoin", asset: "BTC", requested_amount: "0.001" } })).body.data as Intent;

const holder = await until("the watcher holds the bitcoin lease", async () => {
  const c = await chains.claimChain({ network: "bitcoin", watcherId: "watcher-m", leaseSeconds: 300 }, { headers });
  return c.active ? c : undefined;
}, 20_000);
// A tip for the core: mempool reports are taken against it.
const tipHash = hash();
const start = BigInt(Number(holder.position?.recentBlocks.at(-1)?.height ?? 99n) + 1);
await chains.reportBlocks({ network: "bitcoin", watcherId: "watcher-m", leaseEpoch: holder.epoch, blocks: [{ height: start, hash: tipHash, parentHash: holder.position?.recentBlocks.at(-1)?.hash ?? hash(), outputs: [] }], headHeight: start }, { headers });
const output = (pi: Intent) => ({ output: { asset: "BTC", toAddress: pi.deposit_address, txHash: hash(), outputIndex: 0, amount: "0.001" }, replaceable: false });
const report = (outputs: ReturnType<typeof output>[], conflicted: string[] = []) =>
  chains.reportMempool({ network: "bitcoin", watcherId: "watcher-m", leaseEpoch: holder.epoch, tipHash, outputs, conflicted }, { headers });
const reasons = async (pi: Intent) => (await get(pi.public_id)).transactions.map((x) => x.reason);

t.test("a payment missing from the mempool's reports is withdrawn only after enough of them over long enough; never the payment of an intent no longer watched", async (t) => {
  const [watched, cancelled, later] = [await create(), await create(), await create()];
  const [toWatched, toCancelled, toLater] = [output(watched), output(cancelled), output(later)];

  const first = await report([toWatched, toCancelled]);
  t.same([first.applied, first.added, first.withdrawn, first.absent], [true, 2, 0, 0], "both payments seen in the mempool");
  t.same((await get(cancelled.public_id)).transactions.map((x) => [x.reason, x.confirmations]), [["unconfirmed", 0]]);

  const cancel = await call(s.base, "POST", `${path}/${cancelled.public_id}/cancel`, { key: a.key });
  t.equal(cancel.status, 200, "the merchant cancels an intent whose payment is still unconfirmed");

  // The watcher no longer looks for the cancelled intent's address, and the watched intent's
  // payment is missing (a node that lost it, or another node behind a balancer): neither is in the
  // next report, which brings a new payment.
  const second = await report([toLater]);
  t.same([second.applied, second.added, second.withdrawn, second.absent], [true, 1, 0, 1], "one report without it withdraws nothing: the watched intent's payment is absent once");
  t.same(await reasons(watched), ["unconfirmed"], "still seen");

  const back = await report([toLater, toWatched]);
  t.same([back.withdrawn, back.absent], [0, 0], "in the mempool again: no longer absent");
  // Before the report is sent: the service counts the absence from the report's own time, which a
  // clock read after its answer would place later than it is.
  const missingAt = Date.now();
  const again = await report([toLater]);
  t.same([again.withdrawn, again.absent], [0, 1], "missing again: the count starts over");
  const quick = await report([toLater]);
  if (Date.now() - missingAt < absentSeconds * 1000) t.same([quick.withdrawn, quick.absent], [0, 1], `two reports, but within ${absentSeconds} s: still not withdrawn`);

  const withdrawn = await until("withdrawn once missing long enough", async () => {
    const r = await report([toLater]);
    return r.withdrawn > 0 ? r : undefined;
  }, 20_000);
  t.ok(Date.now() - missingAt >= absentSeconds * 1000, "not before MEMPOOL_ABSENT_SECONDS");
  t.same([withdrawn.withdrawn, withdrawn.absent], [1, 0], "the watched intent's payment");
  const w = await get(watched.public_id);
  t.same([w.transactions[0]?.reason, w.amount_pending], ["withdrawn", "0"], "what left the mempool of a watched intent is withdrawn");
  const c = await get(cancelled.public_id);
  t.same([c.status, c.transactions[0]?.reason, c.transactions[0]?.tx_hash], ["cancelled", "unconfirmed", toCancelled.output.txHash], "the cancelled intent's payment keeps what was last known of it: seen, unconfirmed");
  t.equal((await get(later.public_id)).transactions[0]?.reason, "unconfirmed", "and the new payment is seen");
});

t.test("a conflicted transaction is withdrawn at once; a reported one is not", async (t) => {
  const [spent, kept] = [await create(), await create()];
  const [toSpent, toKept] = [output(spent), output(kept)];
  t.same((await report([toSpent, toKept])).added, 2);
  const r = await report([toKept], [toSpent.output.txHash.toUpperCase(), toKept.output.txHash]);
  t.equal(r.withdrawn, 1, "the first report without it, conflicted: withdrawn");
  t.same([await reasons(spent), await reasons(kept)], [["withdrawn"], ["unconfirmed"]], "a transaction still in the report stays, whatever the list says");
  const bad = await report([toKept], ["not-a-hash"]).catch((err: Error) => err);
  t.match(String(bad), /conflicted\[0\]|Not a transaction hash/, "a conflicted entry that is not a txid is refused");
});
