// What the core does with a watcher's mempool report (ChainService.ReportMempool) for outputs
// missing from it: one of an intent still watched left the mempool unmined and is withdrawn; one of
// an intent no longer watched (cancelled) is missing because the watcher stopped looking for its
// address, not because it left the mempool, and keeps what was last known of it. Over gRPC with a
// watcher's internal credential, read back through REST.
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import t from "tap";
import { ChainService } from "../../gen/payments/v1/chains_pb.ts";
import { call, idemKey, startTestApp, merchantWithKey, until } from "../helpers/harness.ts";
import { hash, watcherClient } from "../helpers/lifecycle.ts";

const s = await startTestApp(t, {}, ["rpc", "gateway"]);
const a = await merchantWithKey(s.app);
const { headers } = await watcherClient(s.app, s.rpcUrl, "test");
const chains = createClient(ChainService, createGrpcTransport({ baseUrl: s.rpcUrl }));
const path = `/api/v1/merchants/${a.merchant}/payment-intents`;
type Tx = { tx_hash: string; counted: boolean; reason: string | null; confirmations: number };
type Intent = { public_id: string; deposit_address: string; status: string; amount_pending: string; transactions: Tx[] };
const get = async (id: string) => (await call(s.base, "GET", `${path}/${id}`, { key: a.key })).body.data as Intent;
const create = async () => (await call(s.base, "POST", path, { key: a.key, idempotencyKey: idemKey(), body: { network: "bitcoin", asset: "BTC", requested_amount: "0.001" } })).body.data as Intent;

t.test("a mempool report withdraws what left the mempool, never the payment of an intent it no longer watches", async (t) => {
  const [watched, cancelled, later] = [await create(), await create(), await create()];
  const holder = await until("the watcher holds the bitcoin lease", async () => {
    const c = await chains.claimChain({ network: "bitcoin", watcherId: "watcher-m", leaseSeconds: 30 }, { headers });
    return c.active ? c : undefined;
  }, 20_000);
  // A tip for the core: mempool reports are taken against it.
  const tipHash = hash();
  const start = BigInt(Number(holder.position?.recentBlocks.at(-1)?.height ?? 99n) + 1);
  await chains.reportBlocks({ network: "bitcoin", watcherId: "watcher-m", leaseEpoch: holder.epoch, blocks: [{ height: start, hash: tipHash, parentHash: holder.position?.recentBlocks.at(-1)?.hash ?? hash(), outputs: [] }], headHeight: start }, { headers });
  const output = (pi: Intent) => ({ output: { asset: "BTC", toAddress: pi.deposit_address, txHash: hash(), outputIndex: 0, amount: "0.001" }, replaceable: false });
  const [toWatched, toCancelled, toLater] = [output(watched), output(cancelled), output(later)];
  const report = (outputs: ReturnType<typeof output>[]) => chains.reportMempool({ network: "bitcoin", watcherId: "watcher-m", leaseEpoch: holder.epoch, tipHash, outputs }, { headers });

  const first = await report([toWatched, toCancelled]);
  t.same([first.applied, first.added, first.withdrawn], [true, 2, 0], "both payments seen in the mempool");
  t.same((await get(cancelled.public_id)).transactions.map((x) => [x.reason, x.confirmations]), [["unconfirmed", 0]]);

  const cancel = await call(s.base, "POST", `${path}/${cancelled.public_id}/cancel`, { key: a.key });
  t.equal(cancel.status, 200, "the merchant cancels an intent whose payment is still unconfirmed");

  // The watcher no longer looks for the cancelled intent's address, and the watched intent's
  // payment left the mempool: neither is in the next report, which brings a new payment.
  const second = await report([toLater]);
  t.same([second.applied, second.added, second.withdrawn], [true, 1, 1], "one output withdrawn: the watched intent's");
  const w = await get(watched.public_id);
  t.same([w.transactions[0]?.reason, w.amount_pending], ["withdrawn", "0"], "what left the mempool of a watched intent is withdrawn");
  const c = await get(cancelled.public_id);
  t.same([c.status, c.transactions[0]?.reason, c.transactions[0]?.tx_hash], ["cancelled", "unconfirmed", toCancelled.output.txHash], "the cancelled intent's payment keeps what was last known of it: seen, unconfirmed");
  t.equal((await get(later.public_id)).transactions[0]?.reason, "unconfirmed", "and the new payment is seen");
});
