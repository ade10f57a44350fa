// Which nodes a watcher follows: a Live one only on mainnet (by name and by block 0), a Test
// one never on mainnet, none that changed chains while followed or that is still syncing; and
// the search for the first block a new chain could pay a watched intent in.
import t from "tap";
import { bitcoinMinimumChainwork, evmFacts, firstBlockAtOrAfter, refusal, type NodeFacts } from "../../services/watcher/node-check.ts";
import type { EvmNode } from "../../services/watcher/evm-node.ts";
import { mainnetGenesis } from "../../services/vocabulary/assets.ts";

const sepolia: NodeFacts = { chain: "chain id 11155111", mainnet: false, genesisHash: "0x25a5cc106eea7138acab33231d7160d69cb777ee0c2c553fcddf5138993e6dd9", syncing: false };
const mainnet: NodeFacts = { chain: "chain id 1", mainnet: true, genesisHash: mainnetGenesis.ethereum, syncing: false };
const live = { network: "ethereum", environment: "live" } as const;
const test = { network: "ethereum", environment: "test" } as const;

t.test("Live follows mainnet only, by its name and its block 0", async (t) => {
  t.equal(refusal(live, mainnet, undefined), undefined);
  t.match(refusal(live, sepolia, undefined), "the node follows chain id 11155111, not ethereum mainnet");
  t.match(refusal(live, { ...mainnet, genesisHash: sepolia.genesisHash }, undefined), "its block 0 is 0x25a5");
  t.match(refusal(live, { ...sepolia, genesisHash: mainnetGenesis.ethereum }, undefined), "not ethereum mainnet", "mainnet's block 0 under another chain id is not mainnet either");
  const btc = { network: "bitcoin", environment: "live" } as const;
  t.equal(refusal(btc, { chain: "bitcoin's main chain", mainnet: true, genesisHash: mainnetGenesis.bitcoin, syncing: false }, undefined), undefined);
  t.match(refusal(btc, { chain: "bitcoin's regtest chain", mainnet: false, genesisHash: "0f9188f1", syncing: false }, undefined), "not bitcoin mainnet");
});

t.test("Test never follows mainnet, by name or by block 0", async (t) => {
  t.equal(refusal(test, sepolia, undefined), undefined);
  t.match(refusal(test, mainnet, undefined), "Test intents are paid on a testnet");
  t.match(refusal(test, { ...sepolia, genesisHash: mainnetGenesis.ethereum }, undefined), "Test intents are paid on a testnet");
});

t.test("base and arbitrum: mainnet by their chain ids (8453, 42161); Live by their pinned block 0", async (t) => {
  // What a node says of itself, through evmFacts: the chain id decides what is mainnet per network.
  const said = (chainId: number, genesisHash: string) => ({ chainId: async () => chainId, genesisHash: async () => genesisHash, syncing: async () => false }) as unknown as EvmNode;
  const baseSepolia = "0x0dcc9e089e30b90ddfc55be9a37dd15bc551aeee999d2e2b51414c54eaf934e4";
  const base = { live: { network: "base", environment: "live" }, test: { network: "base", environment: "test" } } as const;
  t.equal(refusal(base.live, await evmFacts(said(8453, mainnetGenesis.base), "base"), undefined), undefined, "base mainnet on Live");
  t.match(refusal(base.live, await evmFacts(said(84532, baseSepolia), "base"), undefined), "the node follows chain id 84532, not base mainnet");
  t.match(refusal(base.live, await evmFacts(said(8453, baseSepolia), "base"), undefined), "not base mainnet's", "base's chain id over another block 0");
  t.equal(refusal(base.test, await evmFacts(said(84532, baseSepolia), "base"), undefined), undefined, "Base Sepolia on Test");
  t.match(refusal(base.test, await evmFacts(said(8453, baseSepolia), "base"), undefined), "Test intents are paid on a testnet", "base mainnet's chain id on Test");
  t.match(refusal(base.test, await evmFacts(said(84532, mainnetGenesis.base), "base"), undefined), "Test intents are paid on a testnet", "base mainnet's block 0 on Test");
  t.notOk((await evmFacts(said(8453, mainnetGenesis.base), "ethereum")).mainnet, "8453 is not ethereum's mainnet");

  const arbitrum = { live: { network: "arbitrum", environment: "live" }, test: { network: "arbitrum", environment: "test" } } as const;
  const arbSepolia = "0x77194da4010e549a7028a9c3c51c3e277823be6ac7d138d0bb8a70197b5c004c";
  t.equal(refusal(arbitrum.test, await evmFacts(said(421614, arbSepolia), "arbitrum"), undefined), undefined, "Arbitrum Sepolia on Test");
  t.match(refusal(arbitrum.test, await evmFacts(said(42161, arbSepolia), "arbitrum"), undefined), "Test intents are paid on a testnet", "Arbitrum One's chain id on Test");
  // Arbitrum One's block 0, written out (assets.ts mainnetGenesis says where it comes from).
  const arbOne = "0x7ee576b35482195fc49205cec9af72ce14f003b9ae69f6ba0faef4514be8b442";
  t.equal(mainnetGenesis.arbitrum, arbOne);
  t.equal(refusal(arbitrum.live, await evmFacts(said(42161, arbOne), "arbitrum"), undefined), undefined, "Arbitrum One on Live");
  t.match(refusal(arbitrum.live, await evmFacts(said(42161, arbSepolia), "arbitrum"), undefined), `its block 0 is ${arbSepolia}, not arbitrum mainnet's`, "Arbitrum One's chain id over another block 0");
  t.match(refusal(arbitrum.live, await evmFacts(said(421614, arbOne), "arbitrum"), undefined), "the node follows chain id 421614, not arbitrum mainnet", "Arbitrum One's block 0 under Sepolia's chain id: not enough");
  t.match(refusal(arbitrum.test, await evmFacts(said(421614, arbOne), "arbitrum"), undefined), "Test intents are paid on a testnet", "Arbitrum One's block 0 on Test");
});

t.test("a node that names another chain than it first served is refused until it serves that one again", async (t) => {
  t.equal(refusal(test, sepolia, "chain id 11155111"), undefined);
  t.match(refusal(test, { ...sepolia, chain: "chain id 17000" }, "chain id 11155111"), "it served chain id 11155111 and now names chain id 17000");
  t.equal(refusal(test, { ...sepolia, genesisHash: "0xabc" }, "chain id 11155111"), undefined, "a new block 0 under the same name is a new chain, not a refusal");
});

t.test("a syncing node is refused, on either environment", async (t) => {
  t.match(refusal(test, { ...sepolia, syncing: true }, undefined), "still syncing");
  t.match(refusal(live, { ...mainnet, syncing: true }, undefined), "still syncing");
});

t.test("a Live bitcoin node whose best tip has less chainwork than the documented minimum is refused", async (t) => {
  const btc = { network: "bitcoin", environment: "live" } as const;
  const main: NodeFacts = { chain: "bitcoin's main chain", mainnet: true, genesisHash: mainnetGenesis.bitcoin, syncing: false };
  // Mainnet's tip at block 912 683, as Bitcoin Core 30.0 ships it: 0xdee8e2a309ad8a9820433c68.
  t.equal(bitcoinMinimumChainwork, BigInt("0x0000000000000000000000000000000000000000dee8e2a309ad8a9820433c68"));
  t.equal(refusal(btc, { ...main, chainwork: "0000000000000000000000000000000000000000dee8e2a309ad8a9820433c68" }, undefined), undefined, "at the minimum");
  t.equal(refusal(btc, { ...main, chainwork: "0000000000000000000000000000000000000001128750f82f4c366153a3a030" }, undefined), undefined, "above it");
  t.match(refusal(btc, { ...main, chainwork: "0000000000000000000000000000000000000000dee8e2a309ad8a9820433c67" }, undefined), "less than mainnet's minimum dee8e2a309ad8a9820433c68");
  // A copy of mainnet's block 0 with a few blocks of its own on top: regtest-like work.
  t.match(refusal(btc, { ...main, chainwork: "0000000000000000000000000000000000000000000000000000000100010001" }, undefined), "chainwork 0000");
  t.match(refusal(btc, { ...main, chainwork: "" }, undefined), "no chainwork said", "a node that does not say is refused");
  t.match(refusal(btc, { ...main, chainwork: "01", syncing: true }, undefined), "still syncing", "a syncing node is refused as syncing");
  const testBtc = { network: "bitcoin", environment: "test" } as const;
  t.equal(refusal(testBtc, { chain: "bitcoin's regtest chain", mainnet: false, genesisHash: "0f9188f1", syncing: false, chainwork: "02" }, undefined), undefined, "Test chains have no minimum");
});

t.test("the first block at or after a time, by bisection", async (t) => {
  const times = [100, 110, 120, 120, 130, 150];
  const at = async (h: number) => times[h] as number;
  t.equal(await firstBlockAtOrAfter(at, 5, 0), 0);
  t.equal(await firstBlockAtOrAfter(at, 5, 120), 2);
  t.equal(await firstBlockAtOrAfter(at, 5, 121), 4);
  t.equal(await firstBlockAtOrAfter(at, 5, 150), 5);
  t.equal(await firstBlockAtOrAfter(at, 5, 151), 6, "past the head: head + 1");
  let reads = 0;
  await firstBlockAtOrAfter(async (h) => (reads++, h), 1_000_000, 777_777);
  t.ok(reads <= 21, `a million blocks in ${reads} reads`);
});
