// A second node's word on a transfer (services/watcher/evm-told.ts): the same block, a transaction
// that succeeded, and the same log (token, Transfer, recipient, amount) at the output's place in
// the receipt, or the native transaction's own recipient and value. The Transfer topic is checked
// against keccak256 of the event's signature, computed here with viem.
import t from "tap";
import { keccak256, pad, toHex } from "viem";
import { toldDiffers, transferTopic } from "../../services/watcher/evm-told.ts";
import type { ToldTransaction } from "../../services/watcher/evm-node.ts";
import type { Output } from "../../services/watcher/follow.ts";

const usdc = "0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48";
const to = "0x1111111111111111111111111111111111111111";
const block = `0x${"ab".repeat(32)}`;
const output: Output = { asset: "USDC", toAddress: to, txHash: `0x${"cd".repeat(32)}`, outputIndex: 2, amount: "5000", blockHeight: 100, blockHash: block, blockTime: 1 };
const transferLog = (o: { address?: string; recipient?: string; amount?: bigint; topic?: string } = {}) => ({
  address: o.address ?? usdc,
  topics: [o.topic ?? transferTopic, pad("0x2222222222222222222222222222222222222222"), pad((o.recipient ?? to) as `0x${string}`)],
  data: pad(toHex(o.amount ?? 5_000_000_000n)),
});
const told = (o: Partial<ToldTransaction> = {}): ToldTransaction => ({
  blockHash: block,
  success: true,
  to: usdc,
  value: 0n,
  logs: [{ address: usdc, topics: [transferTopic], data: "0x" }, transferLog()],
  ...o,
});
const asset = { contract: usdc, decimals: 6 };

t.test("Transfer's topic is keccak256 of its signature", async (t) => {
  t.equal(transferTopic, keccak256(toHex("Transfer(address,address,uint256)")));
});

t.test("a token transfer agrees only where the same log is at the output's place", async (t) => {
  t.equal(toldDiffers(told(), output, asset), undefined, "the same transfer");
  t.match(toldDiffers(undefined, output, asset), /no such mined transaction/);
  t.match(toldDiffers(told({ blockHash: `0x${"ef".repeat(32)}` }), output, asset), /in block 0xefef/);
  t.match(toldDiffers(told({ success: false }), output, asset), /failed/);
  t.match(toldDiffers(told({ logs: [transferLog()] }), output, asset), /no log 1/, "the log is elsewhere in the receipt");
  t.match(toldDiffers(told({ logs: [transferLog(), transferLog({ address: "0x3333333333333333333333333333333333333333" })] }), output, asset), /is from 0x3333/);
  t.match(toldDiffers(told({ logs: [transferLog(), transferLog({ topic: `0x${"00".repeat(32)}` })] }), output, asset), /not a Transfer/);
  t.match(toldDiffers(told({ logs: [transferLog(), transferLog({ recipient: "0x4444444444444444444444444444444444444444" })] }), output, asset), /pays 0x0+4444/);
  t.match(toldDiffers(told({ logs: [transferLog(), transferLog({ amount: 1n })] }), output, asset), /moves 0x0+1, not 5000000000/);
  t.equal(toldDiffers(told(), { ...output, toAddress: to.toUpperCase().replace("0X", "0x") }, asset), undefined, "addresses compared lowercase");
});

t.test("a native transfer agrees on the transaction's own recipient and value", async (t) => {
  const eth: Output = { ...output, asset: "ETH", outputIndex: 0, amount: "0.5" };
  const native = { contract: undefined, decimals: 18 };
  const tx = told({ to, value: 500_000_000_000_000_000n, logs: [] });
  t.equal(toldDiffers(tx, eth, native), undefined);
  t.match(toldDiffers({ ...tx, value: 1n }, eth, native), /carries 1 wei/);
  t.match(toldDiffers({ ...tx, to: usdc }, eth, native), /pays 0xa0b8/);
  t.match(toldDiffers({ ...tx, to: null }, eth, native), /contract creation/);
  t.match(toldDiffers(tx, { ...eth, outputIndex: 1 }, native), /output 1 of a native transfer/);
});
