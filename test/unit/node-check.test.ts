// Which nodes a watcher follows: a Live one only on mainnet (by name and by block 0), a Test
// one never on mainnet, none that changed chains while followed or that is still syncing; and
// the search for the first block a new chain could pay a watched intent in.
import t from "tap";
import { bitcoinMinimumChainwork, firstBlockAtOrAfter, refusal, type NodeFacts } from "../../services/watcher/node-check.ts";
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
