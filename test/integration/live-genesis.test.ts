// Live is pinned: a Live chain's block 0 is its mainnet's, from the code, never from a report. The
// first report of a Live chain the core keeps nothing of yet, naming another block 0, is refused
// and changes nothing; one naming mainnet's is taken. Over gRPC with a Live watcher credential.
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import t from "tap";
import { ChainService } from "../../gen/payments/v1/chains_pb.ts";
import { startTestApp, until } from "../helpers/harness.ts";
import { hash, watcherClient } from "../helpers/lifecycle.ts";

// Ethereum mainnet's block 0 (services/vocabulary/assets.ts mainnetGenesis), written out.
const mainnet = "0xd4e56740f876aef8c010b86a40d5f56745a118d0906a34e69aec8c0db1cb8fa3";

const s = await startTestApp(t, {}, ["rpc"]);
const { headers } = await watcherClient(s.app, s.rpcUrl, "live");
const chains = createClient(ChainService, createGrpcTransport({ baseUrl: s.rpcUrl }));
const refused = async (p: Promise<unknown>) => {
  try {
    await p;
    return "accepted";
  } catch (err) {
    return err instanceof ConnectError ? `${Code[err.code]}: ${err.rawMessage}` : String(err);
  }
};
const kept = async () =>
  (
    await s.app.db.em
      .fork()
      .execute<{ n: string; genesis: string | null }[]>(
        `select (select count(*) from chain_blocks where network = 'ethereum' and environment = 'live') as n,
                (select genesis_hash from chain_watchers where network = 'ethereum' and environment = 'live') as genesis`,
      )
  )[0];

t.test("a Live chain's first report naming another block 0 is refused; mainnet's is taken", async (t) => {
  const claim = await until("the Live lease", async () => {
    const c = await chains.claimChain({ network: "ethereum", watcherId: "w-live", leaseSeconds: 30 }, { headers });
    return c.active ? c : undefined;
  }, 20_000);
  t.equal(claim.position, undefined, "the core keeps nothing of the chain yet");
  const blocks = (parent: string) => {
    const first = hash();
    return [
      { height: 100n, hash: `0x${first}`, parentHash: `0x${parent}`, outputs: [] },
      { height: 101n, hash: `0x${hash()}`, parentHash: `0x${first}`, outputs: [] },
    ];
  };
  const report = (genesisHash: string) =>
    chains.reportBlocks({ network: "ethereum", watcherId: "w-live", leaseEpoch: claim.epoch, genesisHash, blocks: blocks(hash()), headHeight: 101n }, { headers });

  // Sepolia's block 0, or any: what a Live credential in a Test watcher, or an intruder, would name.
  const sepolia = "0x25a5cc106eea7138acab33231d7160d69cb777ee0c2c553fcddf5138993e6dd9";
  const answer = await refused(report(sepolia));
  t.match(answer, /^FailedPrecondition: .*block 0 is 0x25a5cc.*not ethereum mainnet's \(0xd4e56740/, "another block 0 is refused, the first report too");
  t.same(await kept(), { n: "0", genesis: null }, "and nothing is kept");
  t.match(
    await refused(chains.reportBlocks({ network: "ethereum", watcherId: "w-live", leaseEpoch: claim.epoch, blocks: blocks(hash()), headHeight: 101n }, { headers })),
    /^FailedPrecondition: .*must name block 0/,
    "blocks naming no block 0 are refused on Live",
  );
  t.same(await kept(), { n: "0", genesis: null }, "nothing kept either");

  const taken = await report(mainnet);
  t.equal(taken.appended, 2, "mainnet's block 0 is taken");
  t.same(await kept(), { n: "2", genesis: mainnet });
  t.match(await refused(report(sepolia)), /^FailedPrecondition: .*not ethereum mainnet's/, "and another one after it is still refused");
});

t.test("Live arbitrum: a report naming Arbitrum One's block 0 is taken, one naming Arbitrum Sepolia's is refused", async (t) => {
  // Arbitrum One's block 0, written out (assets.ts says where it is taken from).
  const arbOne = "0x7ee576b35482195fc49205cec9af72ce14f003b9ae69f6ba0faef4514be8b442";
  const arbSepolia = "0x77194da4010e549a7028a9c3c51c3e277823be6ac7d138d0bb8a70197b5c004c";
  const claim = await until("the Live arbitrum lease", async () => {
    const c = await chains.claimChain({ network: "arbitrum", watcherId: "w-arb", leaseSeconds: 30 }, { headers });
    return c.active ? c : undefined;
  }, 20_000);
  const report = (genesisHash: string) => {
    const first = `0x${hash()}`;
    const blocks = [
      { height: 300_000_000n, hash: first, parentHash: `0x${hash()}`, outputs: [] },
      { height: 300_000_001n, hash: `0x${hash()}`, parentHash: first, outputs: [] },
    ];
    return chains.reportBlocks({ network: "arbitrum", watcherId: "w-arb", leaseEpoch: claim.epoch, genesisHash, blocks, headHeight: 300_000_001n }, { headers });
  };
  t.match(await refused(report(arbSepolia)), /^FailedPrecondition: .*block 0 is 0x77194da4.*not arbitrum mainnet's \(0x7ee576b3/, "Sepolia's block 0 on Live");
  t.equal((await report(arbOne)).appended, 2, "Arbitrum One's is taken");
  const [row] = await s.app.db.em.fork().execute<{ genesis: string }[]>(`select genesis_hash as genesis from chain_watchers where network = 'arbitrum' and environment = 'live'`);
  t.equal(row?.genesis, arbOne);
});
