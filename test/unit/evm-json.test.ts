// The node's bulk answers read field by field (services/watcher/evm-json.ts), against answers as
// geth writes them: real blocks (test/fixtures/evm/blocks.json), and transactions, logs and
// receipts in its documented shape. What viem's formatting gave is what these give; what it
// refused (a field that is not what geth writes) these refuse.
import { readFileSync } from "node:fs";
import t from "tap";
import { MalformedAnswer, blockOf, receiptOf, transfersOf } from "../../services/watcher/evm-json.ts";
import { transferTopic } from "../../services/watcher/evm-told.ts";

const fixtures = JSON.parse(readFileSync(new URL("../fixtures/evm/blocks.json", import.meta.url), "utf8")) as { ethereum: Record<string, unknown>[] };
const real = fixtures.ethereum.at(-1) as Record<string, unknown>;
const h = (byte: string) => `0x${byte.repeat(32)}`;
const recipient = "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed";
const word = (address: string) => `0x${"0".repeat(24)}${address.slice(2)}`;

t.test("a real block: where it sits, and the hash its header's fields hash to is its own", async (t) => {
  const b = blockOf(real, false);
  t.same(b && [b.height, b.hash, b.parentHash, b.timestamp, b.logsBloom], [Number(real.number), real.hash, real.parentHash, Number(real.timestamp), real.logsBloom]);
  t.same(b?.fieldsHash, { hash: real.hash });
  t.same(b?.valueTransfers, [], "asked without its transactions: no transfers");
  t.equal(blockOf(null, true), undefined, "null past the head: no block");
  t.match(blockOf({ ...real, stateRoot: "0x12" }, false)?.fieldsHash, { hash: /^0x/ }, "a changed field hashes to another hash");
  t.not((blockOf({ ...real, stateRoot: "0x12" }, false)?.fieldsHash as { hash: string }).hash, real.hash);
  t.match(blockOf({ ...real, nonce: "zz" }, false)?.fieldsHash, { malformed: /nonce/ }, "a field that makes no header: said, for the source to refuse");
});

t.test("with its transactions: the top-level ones that carry value to a recipient", async (t) => {
  const txs = [
    { hash: h("01"), to: recipient, value: "0xde0b6b3a7640000", input: "0x" },
    { hash: h("02"), to: recipient, value: "0x0", input: "0xa9059cbb" },
    { hash: h("03"), to: null, value: "0x5", input: "0x6080" },
    { hash: h("04"), to: recipient.toLowerCase(), value: "0x1" },
  ];
  const b = blockOf({ ...real, transactions: txs }, true);
  t.same(b?.valueTransfers, [
    { txHash: h("01"), to: recipient, value: 10n ** 18n },
    { txHash: h("04"), to: recipient.toLowerCase(), value: 1n },
  ], "no zero value, no contract creation");
  t.equal(b?.fieldsHash && "hash" in b.fieldsHash && b.fieldsHash.hash, real.hash, "the transactions are not header fields");
});

t.test("a block answer that is not what geth writes fails the read", async (t) => {
  const cases: [string, unknown, boolean][] = [
    ["not an object", "0x1", false],
    ["no hash", { ...real, hash: null }, false],
    ["a short parent hash", { ...real, parentHash: "0x1234" }, false],
    ["a number that is not hex", { ...real, number: 12 }, false],
    ["hashes where the transactions were asked for", { ...real, transactions: [h("01")] }, true],
    ["no transactions list", { ...real, transactions: undefined }, true],
    ["a value that is not a quantity", { ...real, transactions: [{ hash: h("01"), to: recipient, value: "1000" }] }, true],
    ["a recipient that is not an address", { ...real, transactions: [{ hash: h("01"), to: "0x12", value: "0x1" }] }, true],
  ];
  for (const [what, json, full] of cases) t.throws(() => blockOf(json, full), MalformedAnswer, what);
});

const log = (o: Record<string, unknown> = {}) => ({
  address: "0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48",
  topics: [transferTopic, word("0x1111111111111111111111111111111111111111"), word(recipient)],
  data: `0x${(1_500_000n).toString(16).padStart(64, "0")}`,
  blockNumber: "0x10",
  blockHash: h("0b"),
  transactionHash: h("0c"),
  transactionIndex: "0x3",
  logIndex: "0x7",
  removed: false,
  ...o,
});

t.test("Transfer logs: the recipient from its topic (lowercase), the value from its data", async (t) => {
  t.same(transfersOf([log()]), [
    { blockHash: h("0b"), height: 16, txHash: h("0c"), logIndex: 7, contract: "0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48", to: recipient.toLowerCase(), value: 1_500_000n },
  ]);
  t.same(transfersOf([]), []);
  const upper = log({ topics: [transferTopic.toUpperCase().replace("0X", "0x"), word("0x1111111111111111111111111111111111111111"), word(recipient).toUpperCase().replace("0X", "0x")] });
  t.equal(transfersOf([upper])[0]?.to, recipient.toLowerCase(), "hex in either case");
});

t.test("logs that move nothing are left out; a log field that is not what geth writes fails the read", async (t) => {
  const skipped: [string, Record<string, unknown>][] = [
    ["removed (its block left the chain)", { removed: true }],
    ["pending (no block)", { blockHash: null }],
    ["an ERC-721 Transfer (the token id indexed: four topics)", { topics: [...log().topics, h("00")] }],
    ["another event", { topics: [h("aa"), ...log().topics.slice(1)] }],
    ["a recipient word with bits above the address", { topics: [transferTopic, log().topics[1], `0x${"0".repeat(23)}1${recipient.slice(2)}`] }],
    ["data that is not one 32-byte word", { data: "0x01" }],
  ];
  for (const [what, o] of skipped) t.same(transfersOf([log(o)]), [], what);
  t.throws(() => transfersOf({}), MalformedAnswer, "not a list");
  t.throws(() => transfersOf([log({ logIndex: 7 })]), MalformedAnswer, "a log index that is not hex");
  t.throws(() => transfersOf([log({ transactionHash: "0x12" })]), MalformedAnswer, "a short transaction hash");
  t.throws(() => transfersOf([log({ address: "usdc" })]), MalformedAnswer, "an address that is not one");
});

t.test("receipts: the block, whether it succeeded, and the logs' places", async (t) => {
  const receipt = { blockHash: h("AB"), status: "0x1", logs: [{ logIndex: "0x4" }, { logIndex: "0x5" }], logsBloom: `0x${"00".repeat(256)}` };
  t.same(receiptOf(receipt), { blockHash: h("ab"), success: true, logIndexes: [4, 5] });
  t.equal(receiptOf({ ...receipt, status: "0x0" })?.success, false, "reverted");
  t.equal(receiptOf({ ...receipt, status: undefined, root: h("01") })?.success, false, "before Byzantium: a state root says nothing of success");
  t.equal(receiptOf(null), undefined, "none: not mined, or reorged away");
  t.throws(() => receiptOf({ ...receipt, logs: undefined }), MalformedAnswer);
  t.throws(() => receiptOf({ ...receipt, status: 1 }), MalformedAnswer);
  t.throws(() => receiptOf({ ...receipt, logs: [{ logIndex: null }] }), MalformedAnswer);
});
