// One source of chain truth per chain, fenced by the lease: a watcher that lost the chain to
// another (its lease lapsed and another claimed it) has its ReportBlocks refused, changing
// nothing, while the holder's go through; ObservationService (an operator's own watcher) is
// refused while a built-in watcher follows the chain. Over gRPC with a watcher's internal
// credential, read back through REST.
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import t from "tap";
import { ChainService } from "../../gen/payments/v1/chains_pb.ts";
import { call, idemKey, sampleIntent, startTestApp, merchantWithKey, until } from "../helpers/harness.ts";
import { hash, watcherClient } from "../helpers/lifecycle.ts";

const s = await startTestApp(t, {}, ["rpc", "gateway"]);
const a = await merchantWithKey(s.app);
const { client: observations, headers } = await watcherClient(s.app, s.rpcUrl, "test", ["ethereum"]);
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

t.test("a watcher that lost the lease takes over again only through a claim; ObservationService is refused while a built-in watcher follows the chain", async (t) => {
  const created = await call(s.base, "POST", path, { key: a.key, idempotencyKey: idemKey(), body: { ...sampleIntent, requested_amount: "10" } });
  const pi = created.body.data as { public_id: string; deposit_address: string; required_confirmations: number };
  const report = (tx: string, block: string) =>
    observations.recordObservation(
      { network: "ethereum", asset: "USDC", toAddress: pi.deposit_address, txHash: tx, outputIndex: 0, amount: "10", confirmations: pi.required_confirmations, blockHeight: 7n, blockHash: block },
      { headers },
    );
  const [tx, block] = [hash(), hash()];
  t.equal((await report(tx, block)).paymentIntentStatus, "confirmed", "no watcher follows the chain: an operator's own report counts");

  const first = await claim("watcher-a");
  t.ok(first.active);
  const second = await until("watcher-b takes the lapsed lease", async () => {
    const c = await claim("watcher-b");
    return c.active ? c : undefined;
  }, 20_000);
  t.equal(second.epoch, first.epoch + 1n, "a takeover moves the epoch");
  t.equal((await claim("watcher-b")).epoch, second.epoch, "a renewal keeps it");

  t.equal(await refused(report(hash(), hash())), "FailedPrecondition", "while a built-in watcher follows the chain, ObservationService is refused");
  t.equal(await refused(observations.recordReorg({ network: "ethereum", orphanedBlockHashes: [block] }, { headers })), "FailedPrecondition", "its reorgs too");
  const now = await get(pi.public_id);
  t.same([now.status, now.transactions.length], ["confirmed", 1], "and nothing changed");
});

t.test("ReportBlocks: the core keeps the chain, fenced by the lease epoch; what links to nothing or cannot be taken changes nothing else", async (t) => {
  const created = await call(s.base, "POST", path, { key: a.key, idempotencyKey: idemKey(), body: { ...sampleIntent, requested_amount: "10" } });
  const pi = created.body.data as { public_id: string; deposit_address: string; required_confirmations: number };
  const n = pi.required_confirmations;
  const holder = await until("watcher-c holds the lease", async () => {
    const c = await claim("watcher-c");
    return c.active ? c : undefined;
  }, 20_000);
  const tip = holder.position?.recentBlocks.at(-1);
  // A branch of blocks `from..to` on top of `parent`, hashes of its own.
  const branch = (from: number, count: number, parent: string) => {
    const out: { height: bigint; hash: string; parentHash: string; outputs: { asset: string; toAddress: string; txHash: string; outputIndex: number; amount: string }[] }[] = [];
    for (let i = 0; i < count; i++) out.push({ height: BigInt(from + i), hash: hash(), parentHash: i === 0 ? parent : (out[i - 1] as { hash: string }).hash, outputs: [] });
    return out;
  };
  const report = (epoch: bigint, blocks: ReturnType<typeof branch>, head?: number) =>
    chains.reportBlocks({ network: "ethereum", watcherId: "watcher-c", leaseEpoch: epoch, blocks, headHeight: head !== undefined ? BigInt(head) : (blocks.at(-1)?.height ?? 0n) }, { headers });
  const blocksNow = async () => Number((await s.app.db.em.fork().execute<{ n: string }[]>(`select count(*) as n from chain_blocks where network = 'ethereum' and environment = 'test'`))[0]?.n);

  const start = tip ? Number(tip.height) + 1 : 100;
  const main = branch(start, n, tip?.hash ?? hash());
  const tx = hash();
  (main[0] as (typeof main)[0]).outputs.push(
    { asset: "USDC", toAddress: pi.deposit_address, txHash: tx, outputIndex: 1, amount: "10" },
    // A lying node's amount: kept as rejected; the rest of the batch goes on.
    { asset: "USDC", toAddress: pi.deposit_address, txHash: hash(), outputIndex: 1, amount: "1".repeat(78) },
  );
  const before = await blocksNow();
  t.equal(await refused(report(holder.epoch - 1n, main)), "FailedPrecondition", "a past epoch's report is refused");
  t.equal(await blocksNow(), before, "and stores no block");
  t.same((await get(pi.public_id)).transactions, [], "nor any output");

  const done = await report(holder.epoch, main);
  t.same([done.appended, done.rejected, Number(done.tip?.height)], [n, 1, start + n - 1], "the blocks appended, the bad output rejected");
  let now = await get(pi.public_id);
  t.same([now.status, now.transactions.length, now.transactions[0]?.confirmations], ["confirmed", 1, n], "confirmations derived from the best chain: the payment counts");

  t.equal(await refused(report(holder.epoch, branch(start + n + 5, 2, hash()))), "FailedPrecondition", "a batch that links to nothing is refused");
  t.equal(await blocksNow(), before + n, "and stores nothing");

  // A lower branch from above the payment's block told in parts (the node's head is higher than
  // its first part) is kept beside the best chain: nothing leaves it and nothing counts differently.
  // (One that ends at the node's head is the node's chain, taken at once: reorg-shorter.test.ts.)
  const low = branch(start + 1, 1, (main[0] as { hash: string }).hash);
  const kept = await report(holder.epoch, low, start + n - 1);
  t.same([kept.appended, kept.orphaned, Number(kept.tip?.height)], [0, 0, start + n - 1], "a lower branch above the payment's block changes nothing");
  // The same branch once as high as the tip: the blocks above the payment's leave the best chain.
  const fork = [...low, ...branch(start + 2, n - 2, (low[0] as { hash: string }).hash)];
  const forked = await report(holder.epoch, fork.slice(1));
  t.same([forked.orphaned, Number(forked.tip?.height), forked.appended], [0, start + n - 1, n - 1], "a fork above the payment's block, as high as the tip, orphans no output");
  now = await get(pi.public_id);
  t.same([now.transactions[0]?.confirmations, now.transactions[0]?.counted], [n, true], "its confirmations are what the new best chain gives it, never fewer");
  // The old branch wins back once it is higher.
  const back = await report(holder.epoch, [...main.slice(1), ...branch(start + n, 1, (main.at(-1) as { hash: string }).hash)]);
  t.same([back.appended, Number(back.tip?.height)], [n, start + n], "the old blocks come back");
  now = await get(pi.public_id);
  t.same([now.status, now.transactions[0]?.confirmations, now.amount_received], ["confirmed", n + 1, "10"], "and the payment counts, once");
});
