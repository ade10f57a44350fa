// An EVM block's hash from its header's fields (services/watcher/evm-header.ts), against real
// blocks as eth_getBlockByNumber answered them (test/fixtures/evm/blocks.json says where each came
// from): ethereum from Homestead to Prague, each fork's fields, Polygon PoS (Bor) and Arbitrum One
// (Nitro). The expected hash is the block's own, never computed by the code under test. Any field
// changed, the parent hash above all, gives another hash: a node cannot tell a real block with an
// invented parent.
import { readFileSync } from "node:fs";
import t from "tap";
import { formatBlock } from "viem";
import { evmHeaderHash } from "../../services/watcher/evm-header.ts";

type Block = Record<string, string>;
const fixtures = JSON.parse(readFileSync(new URL("../fixtures/evm/blocks.json", import.meta.url), "utf8")) as { ethereum: Block[]; polygon: Block[]; arbitrum: Block[] };
const forkFields = ["baseFeePerGas", "withdrawalsRoot", "blobGasUsed", "excessBlobGas", "parentBeaconBlockRoot", "requestsHash"];

t.test("real ethereum blocks of every era hash to their hash", async (t) => {
  const eras = new Set<number>();
  for (const b of fixtures.ethereum) {
    t.equal(evmHeaderHash(b), b.hash, `block ${Number(b.number)} (${forkFields.filter((f) => f in b).join(", ") || "no fork fields"})`);
    eras.add(forkFields.filter((f) => f in b).length);
  }
  t.same([...eras].sort(), [0, 1, 2, 5, 6], "Frontier's fields alone, London's, Shanghai's, Cancun's and Prague's");
});

t.test("real Polygon PoS blocks (Bor) hash to their hash", async (t) => {
  for (const b of fixtures.polygon) t.equal(evmHeaderHash(b), b.hash, `block ${Number(b.number)}`);
});

t.test("real Arbitrum One blocks (Nitro) hash to their hash, the fields its JSON-RPC adds left out", async (t) => {
  for (const b of fixtures.arbitrum) {
    t.ok(["l1BlockNumber", "sendCount", "sendRoot"].every((f) => f in b), "as the node wrote it");
    t.equal(evmHeaderHash(b), b.hash, `block ${Number(b.number)}`);
  }
});

t.test("a block as viem formats it (quantities as bigints, absent fields null) hashes the same", async (t) => {
  for (const b of [...fixtures.ethereum, ...fixtures.polygon, ...fixtures.arbitrum]) t.equal(evmHeaderHash(formatBlock(b as never) as unknown as Record<string, unknown>), b.hash, `block ${Number(b.number)}`);
});

t.test("any field changed gives another hash; a header of no fork's shape is refused", async (t) => {
  const b = fixtures.ethereum.at(-1) as Block;
  for (const field of ["parentHash", "stateRoot", "receiptsRoot", "logsBloom", "timestamp", "extraData", "baseFeePerGas", "parentBeaconBlockRoot", "requestsHash"]) {
    const v = b[field] as string;
    const changed = v.length > 4 ? `${v.slice(0, -1)}${v.endsWith("0") ? "1" : "0"}` : "0x1234";
    t.not(evmHeaderHash({ ...b, [field]: changed }), b.hash, `${field} changed`);
  }
  const { withdrawalsRoot: _, ...noShanghai } = b;
  t.throws(() => evmHeaderHash(noShanghai), { message: /no withdrawalsRoot \(Shanghai\) but fields after it/ });
  t.throws(() => evmHeaderHash({ ...b, number: "twelve" }), { message: /number is not a quantity/ });
  t.throws(() => evmHeaderHash({ ...b, extraData: "0x123" }), { message: /extraData is not hex bytes/ });
  // A Prague block told without its requestsHash is a Cancun header: another hash, not an error.
  const { requestsHash: __, ...asCancun } = b;
  t.not(evmHeaderHash(asCancun), b.hash);
});
