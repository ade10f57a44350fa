// The lease fences every report: a watcher that lost the chain to another (its lease lapsed and
// another claimed it) has its RecordObservation and RecordReorg refused, changing nothing,
// while the new holder's reports go through; reports with no epoch (an operator's own watcher)
// are not fenced. Over gRPC with a watcher's internal credential, read back through REST.
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import t from "tap";
import { ChainService } from "../../gen/payments/v1/chains_pb.ts";
import { call, idemKey, sampleIntent, startTestApp, merchantWithKey, until } from "../helpers/harness.ts";
import { hash, watcherClient } from "../helpers/lifecycle.ts";

const s = await startTestApp(t, {}, ["rpc", "gateway"]);
const a = await merchantWithKey(s.app);
const { client: observations, headers } = await watcherClient(s.app, s.rpcUrl, "test");
const chains = createClient(ChainService, createGrpcTransport({ baseUrl: s.rpcUrl }));
const path = `/api/v1/merchants/${a.merchant}/payment-intents`;
const claim = (watcherId: string) => chains.claimChain({ network: "ethereum", watcherId, leaseSeconds: 5 }, { headers });
const get = async (id: string) => (await call(s.base, "GET", `${path}/${id}`, { key: a.key })).body.data;
const refused = async (p: Promise<unknown>) => {
  try {
    await p;
    return "accepted";
  } catch (err) {
    return err instanceof ConnectError ? Code[err.code] : String(err);
  }
};

t.test("a watcher that lost the lease is refused; the holder is not", async (t) => {
  const created = await call(s.base, "POST", path, { key: a.key, idempotencyKey: idemKey(), body: { ...sampleIntent, requested_amount: "10" } });
  const pi = created.body.data as { public_id: string; deposit_address: string; required_confirmations: number };
  const report = (epoch: bigint | undefined, tx: string, block: string) =>
    observations.recordObservation(
      { network: "ethereum", asset: "USDC", toAddress: pi.deposit_address, txHash: tx, outputIndex: 0, amount: "10", confirmations: pi.required_confirmations, blockHeight: 7n, blockHash: block, leaseEpoch: epoch },
      { headers },
    );

  const first = await claim("watcher-a");
  t.ok(first.active);
  const second = await until("watcher-b takes the lapsed lease", async () => {
    const c = await claim("watcher-b");
    return c.active ? c : undefined;
  }, 20_000);
  t.equal(second.epoch, first.epoch + 1n, "a takeover moves the epoch");
  t.equal((await claim("watcher-b")).epoch, second.epoch, "a renewal keeps it");

  const [tx, block] = [hash(), hash()];
  t.equal(await refused(report(first.epoch, tx, block)), "FailedPrecondition", "the old holder's output is refused");
  t.same((await get(pi.public_id)).transactions, [], "and nothing was recorded");
  t.equal((await report(second.epoch, tx, block)).paymentIntentStatus, "confirmed", "the holder's output counts");
  t.equal(await refused(observations.recordReorg({ network: "ethereum", orphanedBlockHashes: [block], leaseEpoch: first.epoch }, { headers })), "FailedPrecondition", "the old holder's reorg is refused");
  t.equal((await get(pi.public_id)).status, "confirmed", "and changed nothing");
  t.equal(await refused(observations.recordReorg({ network: "ethereum", orphanedBlockHashes: [block] }, { headers })), "accepted", "a report with no epoch is not fenced");
  t.equal((await get(pi.public_id)).status, "pending");
});
