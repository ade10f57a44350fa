// The Tron source against a node answering as TRON's JSON-RPC documentation says java-tron does
// (tronprotocol's docs/api/json-rpc: eth_syncing.md, eth_getBlockByHash.md, eth_getLogs.md,
// eth_chainId.md, index.md), over real HTTP: the differences from Ethereum's that anvil, standing
// in for a TRON node in the integration test, cannot show. Each case names the one it covers.
import { createServer, type IncomingMessage } from "node:http";
import type { AddressInfo } from "node:net";
import t from "tap";
import { tronFromHex20, tronToHex20 } from "../../services/addresses/formats.ts";
import { findAsset } from "../../services/vocabulary/assets.ts";
import { evmFacts, refusal } from "../../services/watcher/node-check.ts";
import { mainnetGenesis } from "../../services/vocabulary/assets.ts";
import { syncingFrom, tronChainIds, tronNode, tronSource, TronWatched } from "../../services/watcher/tron-source.ts";

const usdt = findAsset("tron", "USDT")!;
const testContract = tronToHex20(usdt.contract!.test!)!;
const payee = "TUEZSdKsoDHQMeZwihtdoBiN46zxhGWYdH";
const stranger = "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t";
const transferTopic = "0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef";
const word = (hex: string) => `0x${hex.replace(/^0x/, "").padStart(64, "0")}`;
// A BlockId: its first 8 bytes are the height (eth_getBlockByHash.md).
const blockId = (height: number, fork = 0) => `0x${height.toString(16).padStart(16, "0")}${fork.toString(16).padStart(8, "0")}${"5c".repeat(20)}`;
const genesisTime = 1_700_000_000;

/** A block as eth_getBlockByHash.md documents it: constant fields included, `stateRoot` just "0x". */
function block(height: number, fork = 0) {
  return {
    number: `0x${height.toString(16)}`,
    hash: blockId(height, fork),
    parentHash: height === 0 ? `0x${"0".repeat(64)}` : blockId(height - 1, fork),
    miner: "0xa234e405a2c6fd67cdd4d0ea2f6188f65534c8b1",
    timestamp: `0x${(genesisTime + 3 * height).toString(16)}`,
    size: "0x73d",
    transactionsRoot: "0xfda5b0a23514a969259ae378185fc833e2c4e35874ee2f8b6d26d15acd976c6e",
    stateRoot: "0x",
    transactions: [`0x${height.toString(16).padStart(64, "9")}`],
    uncles: [],
    gasLimit: "0x0",
    gasUsed: "0x0",
    difficulty: "0x0",
    totalDifficulty: "0x0",
    extraData: "0x",
    logsBloom: `0x${"00".repeat(256)}`,
    nonce: "0x0000000000000000",
    sha3Uncles: `0x${"0".repeat(64)}`,
    receiptsRoot: `0x${"0".repeat(64)}`,
    mixHash: `0x${"0".repeat(64)}`,
    baseFeePerGas: "0x0",
  };
}

/** A TRC-20 Transfer log as eth_getLogs.md documents it (with its blockTimestamp), to a 20-byte address. */
function transfer(height: number, to: string, value: bigint, contract = testContract, logIndex = 0) {
  return {
    address: contract,
    blockHash: blockId(height),
    blockNumber: `0x${height.toString(16)}`,
    blockTimestamp: `0x${(genesisTime + 3 * height).toString(16)}`,
    transactionHash: `0x${height.toString(16).padStart(8, "0")}${"7a".repeat(28)}`,
    transactionIndex: "0x0",
    logIndex: `0x${logIndex.toString(16)}`,
    removed: false,
    topics: [transferTopic, word("dd791d6b49e190062d650e6a23c575510d35f2f9"), word(tronToHex20(to)!)],
    data: word(value.toString(16)),
  };
}

/** A receipt as eth_getTransactionReceipt.md documents it: the transaction's logs as eth_getLogs writes them (block-wide logIndex). */
function receipt(logs: ReturnType<typeof transfer>[]) {
  const first = logs[0];
  if (!first) return null;
  return {
    blockHash: first.blockHash,
    blockNumber: first.blockNumber,
    transactionHash: first.transactionHash,
    transactionIndex: first.transactionIndex,
    from: "0xdd791d6b49e190062d650e6a23c575510d35f2f9",
    to: first.address,
    cumulativeGasUsed: "0x3a98",
    gasUsed: "0x3a98",
    effectiveGasPrice: "0xd2",
    contractAddress: null,
    logs,
    logsBloom: `0x${"00".repeat(256)}`,
    status: "0x1",
    type: "0x0",
    root: null,
  };
}

interface Call {
  method: string;
  params: unknown[];
}

/** A node on a loopback port that answers each call with `answer` (batches too, as viem sends them), and keeps every call. */
async function node(t: { teardown(fn: () => unknown): void }, answer: (c: Call) => unknown) {
  const calls: Call[] = [];
  const server = createServer(async (req: IncomingMessage, res) => {
    let body = "";
    for await (const chunk of req) body += chunk;
    const parsed = JSON.parse(body) as ({ id: number } & Call) | ({ id: number } & Call)[];
    const one = (r: { id: number } & Call) => {
      calls.push({ method: r.method, params: r.params });
      const out = answer(r);
      return out instanceof Error
        ? { jsonrpc: "2.0", id: r.id, error: { code: (out as Error & { code: number }).code, message: out.message, data: "{}" } }
        : { jsonrpc: "2.0", id: r.id, result: out };
    };
    res.setHeader("content-type", "application/json");
    res.end(JSON.stringify(Array.isArray(parsed) ? parsed.map(one) : one(parsed)));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/jsonrpc`, calls };
}

const rpcError = (code: number, message: string) => Object.assign(new Error(message), { code });

t.test("eth_syncing: a caught-up node with peers answers an object, not false (eth_syncing.md)", async (t) => {
  t.equal(syncingFrom(false), false, "no peers: false");
  // The documented answer of a Nile node: highestBlock is estimated from its clock, here equal to its head.
  t.equal(syncingFrom({ startingBlock: "0x3fe1dda", currentBlock: "0x3fe1ded", highestBlock: "0x3fe1ded" }), false, "caught up");
  t.equal(syncingFrom({ startingBlock: "0x1", currentBlock: "0x3fe1ded", highestBlock: "0x3fe1def" }), false, "a block or two late by its clock");
  t.equal(syncingFrom({ startingBlock: "0x1", currentBlock: "0x3fe1ded", highestBlock: "0x3fe3000" }), true, "thousands of blocks behind its clock: syncing");
  t.equal(syncingFrom({ currentBlock: "0x10" }), true, "an answer without the fields is not trusted");

  let answer: unknown = { startingBlock: "0x3fe1dda", currentBlock: "0x3fe1ded", highestBlock: "0x3fe1ded" };
  const n = await node(t, (c) => {
    if (c.method === "eth_syncing") return answer;
    if (c.method === "eth_chainId") return "0xcd8690dc";
    if (c.method === "eth_getBlockByNumber") return block(0);
    throw new Error(c.method);
  });
  const facts = await evmFacts(tronNode(n.url), "tron");
  t.same([facts.chain, facts.syncing, facts.mainnet], [`chain id ${tronChainIds.nile}`, false, false]);
  t.equal(refusal({ network: "tron", environment: "test" }, facts, undefined), undefined, "a caught-up Nile node with peers is followed");
  answer = { startingBlock: "0x3fe1dda", currentBlock: "0x3fe1ded", highestBlock: "0x3fe2ded" };
  t.match(refusal({ network: "tron", environment: "test" }, await evmFacts(tronNode(n.url), "tron"), undefined), "still syncing");
});

t.test("chain identity: eth_chainId is block 0's last 4 bytes; Live needs mainnet's id and block 0, Test Nile's or Shasta's id", async (t) => {
  let chainId = "0x2b6653dc";
  let genesis = mainnetGenesis.tron;
  const n = await node(t, (c) => {
    if (c.method === "eth_chainId") return chainId;
    if (c.method === "eth_syncing") return false;
    if (c.method === "eth_getBlockByNumber") return { ...block(0), hash: genesis };
    throw new Error(c.method);
  });
  const live = { network: "tron", environment: "live" } as const;
  const test = { network: "tron", environment: "test" } as const;
  const facts = () => evmFacts(tronNode(n.url), "tron");
  t.equal(mainnetGenesis.tron.slice(-8), (728126428).toString(16), "mainnet's chain id is its block 0's last 4 bytes");
  t.equal(refusal(live, await facts(), undefined), undefined, "mainnet on Live");
  t.match(refusal(test, await facts(), undefined), "Test intents are paid on a testnet", "mainnet on Test");
  genesis = `0x${"0".repeat(16)}d698d4192c56cb6be724a558448e2684802de4d6cd8690dc`;
  t.match(refusal(live, await facts(), undefined), "its block 0 is 0x0000000000000000d698", "mainnet's id over another block 0 on Live");
  t.match(refusal(test, await facts(), undefined), "Test intents are paid on a testnet", "mainnet's id on Test, whatever its block 0");
  chainId = "0xcd8690dc";
  t.equal(refusal(test, await facts(), undefined), undefined, "Nile on Test");
  t.match(refusal(live, await facts(), undefined), "the node follows chain id 3448148188, not tron mainnet");
  chainId = "0x94a9059e";
  t.equal(refusal(test, await facts(), undefined), undefined, "Shasta on Test");
  chainId = "0x7a69";
  t.match(
    refusal(test, await facts(), undefined),
    "the node follows chain id 31337, not a tron testnet (Nile's chain id 3448148188 or Shasta's chain id 2494104990",
    "another chain id on Test: not a TRON chain",
  );
  genesis = mainnetGenesis.tron;
  t.match(refusal(test, await facts(), undefined), "Test intents are paid on a testnet", "mainnet's block 0 on Test, whatever its id");
});

t.test("blocks and TRC-20 Transfer logs: 20-byte addresses, TRON's block fields, no tags, T… addresses out", async (t) => {
  const head = 30;
  const n = await node(t, (c) => {
    if (c.method === "eth_blockNumber") return `0x${head.toString(16)}`;
    if (c.method === "eth_getBlockByNumber") {
      const h = Number(c.params[0]);
      return h > head ? null : block(h);
    }
    const all = [transfer(21, payee, 12_500_000n), transfer(22, stranger, 1n, testContract, 0), transfer(22, payee, 1n, testContract, 3)];
    if (c.method === "eth_getLogs") {
      const f = c.params[0] as { fromBlock: string; toBlock: string };
      return all.filter((l) => Number(l.blockNumber) >= Number(f.fromBlock) && Number(l.blockNumber) <= Number(f.toBlock));
    }
    if (c.method === "eth_getTransactionReceipt") return receipt(all.filter((l) => l.transactionHash === c.params[0]));
    throw new Error(c.method);
  });
  const watched = new TronWatched();
  watched.add(payee);
  watched.add("not an address");
  t.equal(watched.size, 1, "a T… address is kept in its 20-byte form; anything else is not kept");
  t.ok(watched.has(tronToHex20(payee)!.toUpperCase().replace("0X", "0x")), "and matched whatever the case of the log's hex");
  const source = tronSource(tronNode(n.url), [{ info: usdt, contract: usdt.contract!.test! }], watched);
  t.equal(await source.headHeight(), head);
  t.equal(await source.hashAt(20), blockId(20), "the BlockId as the block's hash");
  t.equal(await source.hashAt(31), undefined, "null past the head");
  const read = await source.read(20, 22);
  t.same(read?.blocks, [20, 21, 22].map((h) => ({ height: h, hash: blockId(h), parentHash: blockId(h - 1), time: genesisTime + 3 * h })), "height, hash, parent and time (seconds) of TRON's block fields");
  t.same(
    read?.outputs.map((o) => [o.toAddress, o.amount, o.outputIndex, o.blockHeight, o.asset]),
    [
      [payee, "12.5", 1, 21, "USDT"],
      [payee, "0.000001", 2, 22, "USDT"],
    ],
    "Transfers to the watched address, written back as its T… address, to the unit, each known by its place among its transaction's logs",
  );
  const logs = n.calls.filter((c) => c.method === "eth_getLogs");
  t.same((logs[0]?.params[0] as { address: string[] }).address, [testContract], "the contract asked for in its 20-byte form, not T… nor 41…");
  t.match(testContract, /^0x[0-9a-f]{40}$/);
  const tags = n.calls.flatMap((c) => JSON.stringify(c.params ?? []).match(/"(latest|pending|safe|finalized|earliest)"/g) ?? []);
  t.same(tags, [], "no block tag is ever sent (pending and safe are refused)");
  t.same(n.calls.filter((c) => c.method === "eth_getBlockByNumber").map((c) => c.params[1]), n.calls.filter((c) => c.method === "eth_getBlockByNumber").map(() => false), "blocks without transactions: no TRX is watched");
});

t.test("an answer over the node's maxResponseSize (-32003) is read again in smaller parts, as Ethereum's too-large answers are (index.md)", async (t) => {
  const n = await node(t, (c) => {
    if (c.method === "eth_getBlockByNumber") return block(Number(c.params[0]));
    if (c.method === "eth_getLogs") {
      const f = c.params[0] as { fromBlock: string; toBlock: string };
      if (Number(f.toBlock) > Number(f.fromBlock)) return rpcError(-32003, "Response exceeds the limit of 26214400 bytes");
      return Number(f.fromBlock) === 7 ? [transfer(7, payee, 3_000_000n)] : [];
    }
    if (c.method === "eth_getTransactionReceipt") return receipt([transfer(7, payee, 3_000_000n)]);
    throw new Error(c.method);
  });
  const watched = new TronWatched();
  watched.add(payee);
  const read = await tronSource(tronNode(n.url), [{ info: usdt, contract: usdt.contract!.test! }], watched).read(5, 8);
  t.same(read?.outputs.map((o) => [o.toAddress, o.amount]), [[payee, "3"]]);
  t.ok(n.calls.filter((c) => c.method === "eth_getLogs").length > 1, "split");
});

t.test("the 20-byte form and back", async (t) => {
  t.equal(tronFromHex20(testContract), usdt.contract!.test);
});
